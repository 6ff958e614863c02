"""The one small interface every profiler backend offers to the controller."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from npuprof.agent.schedule import Action
from npuprof.config import ProfileConfig

ScheduleFn = Callable[[int], Action]
TraceReady = Callable[[Any], None]


class CaptureRefused(RuntimeError):
    """The profiler refuses to record in this process, for a reason of the user's to fix (the message says
    which): no capture opens here, the training goes on."""


class Backend(Protocol):
    name: str  # "torch_npu", "torch-cuda", "torch-cpu"
    device: str  # the device of this process: "npu:0", "cuda:0", "cpu"
    writes_own_layout: bool  # True when the backend creates the rank dir itself (torch_npu)

    def ignored_flags(self, cfg: ProfileConfig) -> list[str]:
        """Flags given by the user that mean nothing on this backend (reported once, never silent)."""
        ...

    def create_profiler(self, cfg: ProfileConfig, schedule: ScheduleFn, on_trace_ready: TraceReady) -> Any:
        """A profiler object with start(), step(), stop() and torch's step/schedule semantics."""
        ...

    def align(self, prof: Any, step: int) -> None:
        """Make a fresh profiler believe it is at ``step`` (so ProfilerStep#N carries the global step)."""
        ...

    def export_raw(self, prof: Any, rank_dir: Path | None, worker: str) -> tuple[Path, Path | None]:
        """Write the raw capture; return (rank dir, raw trace file or None)."""
        ...

    def version_info(self) -> dict[str, str]: ...

    # optional: ``profiler_enabled() -> bool``, whether the profiler records now (torch's backends have it;
    # without it a profiler that failed is judged by what it was doing: npuprof.agent.controller)

    def add_metadata(self, prof: Any, metadata: dict[str, Any]) -> bool:
        """Hand metadata to the profiler if it writes profiler_metadata.json itself; False otherwise."""
        ...

    def script_profiler_started(self) -> None:
        """The training script started a profiler of its own: undo what this backend changed in the
        profiler's module state, so the script's profiler behaves as it would without npuprof."""
        ...


class NotChosen:
    """The backend of a process that has not loaded torch, whose skipped windows are recorded without one
    (npuprof.agent.controller, ``_sink_for_a_skip``): torch.profiler's, writing npuprof's layout, its
    name and device not known; it records nothing."""

    name: str | None = None
    device: str | None = None
    writes_own_layout = False

    def version_info(self) -> dict[str, str]:
        return {}


def align_torch_style(prof: Any, step: int) -> None:
    """torch.profiler.profile and torch_npu's profile both keep ``step_num`` and ``current_action``."""
    prof.step_num = step
    action = prof.schedule(step)
    prof.current_action = action
    if hasattr(prof, "_prev_schedule_action"):
        prof._prev_schedule_action = action


def release_profiler(prof: Any) -> None:
    """A profiler stopped for good, its trace handed over: break the reference cycles it is in, so that it
    and the capture's events it holds are freed as npuprof lets go of it. torch's ``action_map`` holds the
    profile's own bound methods, and npuprof's wrappers of its methods (entry._held) sit in its
    ``__dict__``: only a full collection freed it, hundreds of captures later, and ``--repeat 0`` (a new
    profiler each cycle) grew the job by the size of each capture's events (helper-133: 310 -> 762 MB over
    100 captures of 1,500 ops; a hand-written profiler kept for the whole job stayed at 334 MB)."""
    action_map = getattr(prof, "action_map", None)
    if isinstance(action_map, dict):
        action_map.clear()
    own = getattr(prof, "__dict__", None)
    if isinstance(own, dict):
        # every wrapper of npuprof's, whichever methods it wraps (a list of names here missed the start()
        # wrapper added later, and each stopped profiler stayed alive until a full collection again)
        for name in [name for name, value in own.items() if getattr(value, HELD_MARK, False)]:
            del own[name]


HELD_MARK = "_npuprof_held"  # set on the wrappers entry._held puts in a profiler's __dict__


def load_range_modules() -> None:
    """Load what torch's ``record_function`` loads at its first use in a process, before the profiler
    starts: torch 2.13 imports its CUPTI monitor module there (~0.8 ms), which in a job that recorded no range
    before (an inference loop) landed in the capture's first step under --warmup 0 (helper-117). Each
    later range only looks the module up. A torch without that step is left as it is, and so is a process
    where torch's profiler module is not loaded (the backend's profiler, made first, loads it)."""
    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    load = getattr(autograd_profiler, "_maybe_cupti_monitor", None)
    if callable(load):
        load()
