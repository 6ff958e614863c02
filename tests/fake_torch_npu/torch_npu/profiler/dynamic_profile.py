"""Stand-in for ``torch_npu.profiler.dynamic_profile`` (tests only): ``init(path)`` and ``step()``.

The real module starts a monitor (a profiler_config.json watcher, or, with an empty path, the msmonitor
daemon's shared memory) and opens a profiler when a configuration arrives. No daemon runs here and no
configuration arrives, so the stand-in records each call and never opens a profiler, as the real one
does while the daemon has sent nothing."""

from __future__ import annotations

import os

from .. import _calls
from .analysis.prof_common_func._constant import print_warn_msg

__all__ = ["init", "start", "step"]


class _DynamicProfile:
    def __init__(self) -> None:
        self.config_path: str | None = None
        self.cur_step = 0
        self.repeat_init = False

    def init(self, path: str) -> None:
        if self.repeat_init:
            print_warn_msg("Init dynamic profiling repeatedly")
            return
        self.config_path = path
        self.repeat_init = True

    def step(self) -> None:
        self.cur_step += 1
        _calls.record("dynamic_profile.step", cur_step=self.cur_step)


_INSTANCE = _DynamicProfile()


def init(path: str) -> None:
    _calls.record("dynamic_profile.init", path=path)
    _INSTANCE.init(os.path.abspath(path) if path else path)


def step() -> None:
    _INSTANCE.step()


def start(config_path: str | None = None) -> None:
    _calls.record("dynamic_profile.start", config_path=config_path)
