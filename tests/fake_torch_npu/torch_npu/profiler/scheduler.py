"""Stand-in for ``torch_npu.profiler.scheduler`` (tests only); same semantics as the real ``Schedule``."""

from __future__ import annotations

from enum import Enum

from .. import _calls
from .analysis.prof_common_func._constant import print_warn_msg

__all__ = ["ProfilerAction", "Schedule"]


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class Schedule:
    @_calls.logged("schedule")
    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0) -> None:
        self.wait = wait
        self.active = active
        self.warmup = warmup
        self.repeat = repeat
        self.skip_first = skip_first
        if self.warmup == 0:
            print_warn_msg("Profiler won't be using warmup, this can skew profiler results")

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError("Invalid parameter step, which must be not less than 0.")
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        num_steps = self.wait + self.warmup + self.active
        if self.repeat > 0 and step / num_steps >= self.repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < self.wait:
            return ProfilerAction.NONE
        if mod_step < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE


def _default_schedule_fn(_: int) -> ProfilerAction:
    return ProfilerAction.RECORD
