"""helper-299: the launcher's wait for post-processing after a batch system's SIGTERM, in-process."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

# Slurm's KillWait and Kubernetes' grace period: the SIGKILL comes this long after the SIGTERM
SIGKILL_AFTER_S = 30.0
# the job's own finalise after the SIGTERM: up to 20 s (docs/architecture.md, "Signals")
FINALISE_S = 20.0
# how long the launcher waits for post-processing after the job's end, stopped by SIGTERM (README)
WAIT_AFTER_STOP_S = 10.0


class _PausesOnlyClock:
    """``time`` whose ``monotonic()`` moves only by its ``sleep()``."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _launcher_waits_after_sigterm(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    job_ended_after_s: float,
    quiet_s: float = 0.1,
) -> tuple[list[float | None], str]:
    """The launcher's wait for one busy post-processor that never finishes, for a job that ended
    ``job_ended_after_s`` after the SIGTERM (its quiet first moment, before it says it waits, ``quiet_s``):
    the deadlines it waited to, from the signal, and what it said on stderr."""
    from npuprof import runner
    from npuprof.results import layout, postprocess

    (tmp_path / layout.PENDING_DIR).mkdir()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "run-x")  # no change of the post-processors' priority
    monkeypatch.setattr(runner, "_busy_post_processors", lambda output, run_id: 1)
    waited: list[float | None] = []

    def post_processing_never_done(*args: Any, deadline: float | None = None, **kwargs: Any) -> int:
        waited.append(deadline)
        raise TimeoutError  # as wait_for_pending past its deadline

    monkeypatch.setattr(postprocess, "wait_for_pending", post_processing_never_done)
    monkeypatch.setattr(runner, "_QUIET_WAIT_S", quiet_s)  # the moment before the wait is said
    # the launcher's clock, moved by its own pauses only: the job ended as the wait began, whenever a loaded
    # machine let the wait begin (a stall of 0.125 s there failed the third test below)
    monkeypatch.setattr(runner, "time", _PausesOnlyClock())
    sigterm_came = runner.time.monotonic() - job_ended_after_s
    held = runner._HeldSignals()
    try:
        runner._wait_for_post_processing(
            tmp_path, tmp_path / "npuprof.log", "run-x", held, signal.SIGTERM, sigterm_came
        )
    finally:
        held.restore()
    return [w - sigterm_came if w is not None else None for w in waited], " ".join(
        capsys.readouterr().err.split()
    )


def test_the_wait_after_a_sigterm_ends_before_the_sigkill_that_follows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM to `npuprof run` (scancel): the job took 20 s to finalise its capture, then the launcher
    waited 2 s and 10 s more for post-processing from the job's end, and wrote its record 32 s after the
    signal, killed first by the SIGKILL that comes at 30 s. The wait ends in time for the record."""
    waited, said = _launcher_waits_after_sigterm(tmp_path, monkeypatch, capsys, FINALISE_S)
    assert waited and waited[0] is not None and waited[0] < SIGKILL_AFTER_S - 2, waited
    (stopped_after,) = re.findall(r"stopped waiting after (\d+) s \(the job was stopped by SIGTERM\)", said)
    assert FINALISE_S + int(stopped_after) < SIGKILL_AFTER_S, said


def test_a_job_that_ended_past_the_wait_after_a_sigterm_is_not_said_to_be_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profiler start held the SIGTERM, and the finalise after it ended 26 s after the signal (it may take
    up to 28 s: docs/architecture.md, "Signals"), past the 25 s the launcher's wait may last: it said
    'waiting for 1 background post-processing job(s) ..., 0 s at most after SIGTERM' and then at once
    'stopped waiting after 0 s'. It says that it does not wait, and why."""
    waited, said = _launcher_waits_after_sigterm(tmp_path, monkeypatch, capsys, 26.0)
    assert not waited, waited
    assert "npuprof: waiting for" not in said and "stopped waiting" not in said, said
    assert re.search(
        r"not waiting for 1 background post-processing job\(s\): the job ended 26 s after SIGTERM, "
        r"past the 25 s",
        said,
    ), said


def test_the_wait_after_a_sigterm_lasts_10_s_from_the_jobs_end_its_quiet_start_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wait's bound was computed twice, before its quiet start and again after it: a job that ended 1 s
    after the SIGTERM had its post-processors waited for 10 s from the end of that quiet start (2 s), 12 s
    from its end, not the 10 s the wait may last."""
    quiet_s, job_ended_after_s = 0.5, 1.0
    waited, _said = _launcher_waits_after_sigterm(tmp_path, monkeypatch, capsys, job_ended_after_s, quiet_s)
    (deadline,) = waited
    assert deadline is not None and deadline - job_ended_after_s <= WAIT_AFTER_STOP_S + quiet_s / 4, waited
