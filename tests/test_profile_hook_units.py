"""agent/profile_hook.py's watch in process, with real profile hooks standing for torch's tracer (helper-373's
mutation hunt: each of these could change with tests/test_profile_hook.py's job still passing): the job's
cProfile given back after a capture only while the job has not touched the hook, across two cycles of one
step, and the note of a hook lost said once a capture."""

from __future__ import annotations

import cProfile
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from npuprof.agent.profile_hook import FRAMES_MISSING, ProfileHookWatch

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="cProfile uses sys.monitoring from Python 3.12, not the profile hook"
)


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warn_once(self, key: str, line: str) -> None:
        self.lines.append(line)

    def info(self, line: str) -> None:
        self.lines.append(line)

    def warning(self, line: str) -> None:
        self.lines.append(line)


def _torch_hook(frame: Any, event: str, arg: Any) -> None:
    """Stands for torch's Python tracer."""


def _torch_hook_again(frame: Any, event: str, arg: Any) -> None:
    """torch's tracer of the next cycle."""


def _jobs_hook(frame: Any, event: str, arg: Any) -> None:
    """A hook the job sets while torch records."""


@pytest.fixture
def job_cprofile() -> Iterator[cProfile.Profile]:
    """The job's cProfile, enabled (``python -m cProfile``); the hook cleared after."""
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield prof
    finally:
        sys.setprofile(None)
        prof.disable()


def _start(watch: ProfileHookWatch, tracer: Any) -> None:
    before = watch.before_start(True)
    sys.setprofile(tracer)  # torch takes the hook's place
    watch.started(before, True)


def test_the_jobs_cprofile_runs_again_after_the_capture(job_cprofile: cProfile.Profile) -> None:
    watch = ProfileHookWatch(_Log())  # type: ignore[arg-type]
    _start(watch, _torch_hook)
    assert watch.lost_at(3) is None
    sys.setprofile(None)  # torch stops, leaving no hook
    watch.stopped()
    assert sys.getprofile() is job_cprofile


def test_a_hook_the_job_set_during_the_capture_keeps_its_cprofile_off_and_is_said_once(
    job_cprofile: cProfile.Profile,
) -> None:
    """The job changed the hook while torch recorded: it believes its own profiler runs, and it may have
    turned it off itself (Lightning's per-action cProfile): npuprof enables nothing after."""
    log = _Log()
    watch = ProfileHookWatch(log)  # type: ignore[arg-type]
    _start(watch, _torch_hook)
    sys.setprofile(_jobs_hook)
    note = watch.lost_at(5)
    assert note == (
        f"{FRAMES_MISSING} from step 5 on: the job's own profile hook ({__name__}._jobs_hook) took the place "
        "of torch's Python tracer (a cProfile enabled or disabled there does it, as Lightning's "
        "AdvancedProfiler does around each action)"
    )
    assert watch.lost_at(6) is None  # said once a capture
    sys.setprofile(None)  # the job's hook goes, torch stops
    watch.stopped()
    assert sys.getprofile() is None


def test_a_second_cycle_in_the_same_step_still_gives_the_jobs_cprofile_back(
    job_cprofile: cProfile.Profile,
) -> None:
    """torch's stop and next start in one step(): its first tracer is still the hook when the second cycle
    starts; the hook it displaced is the job's cProfile, as in the first cycle."""
    log = _Log()
    watch = ProfileHookWatch(log)  # type: ignore[arg-type]
    _start(watch, _torch_hook)
    watch.stopped()  # its tracer still set: nothing given back yet
    assert sys.getprofile() is _torch_hook
    _start(watch, _torch_hook_again)
    sys.setprofile(None)
    watch.stopped()
    assert sys.getprofile() is job_cprofile
    assert all("_torch_hook" not in line for line in log.lines), log.lines


def test_a_start_that_left_the_hook_as_it_was_displaced_nothing(job_cprofile: cProfile.Profile) -> None:
    """A profiler start that set no tracer (the hook still the job's): nothing taken, nothing said."""
    log = _Log()
    watch = ProfileHookWatch(log)  # type: ignore[arg-type]
    watch.started(watch.before_start(True), True)
    assert (watch.tracer, watch.displaced, log.lines) == (None, None, [])
    assert watch.lost_at(2) is None
    watch.stopped()
    assert sys.getprofile() is job_cprofile


def test_a_hook_lost_again_in_the_next_capture_is_said_for_it(job_cprofile: cProfile.Profile) -> None:
    watch = ProfileHookWatch(_Log())  # type: ignore[arg-type]
    for step in (5, 15):
        _start(watch, _torch_hook)
        sys.setprofile(_jobs_hook)
        note = watch.lost_at(step)
        assert note is not None and note.startswith(f"{FRAMES_MISSING} from step {step} on:"), note
        sys.setprofile(None)
        watch.stopped()
