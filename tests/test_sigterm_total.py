"""agent/signals.py: a SIGTERM held during a hold (torch's start of the profiler, a trace export), then
handled by the script's main thread or, that thread blocked outside Python, finished by npuprof's watcher:
the waits together stay within SIGTERM_LIMIT_S of the signal, before the SIGKILL torchrun and Slurm send 30 s
after it. In-process, as test_sigterm_duties drives the guard's watcher, on a SIGTERM's clock that moves only
by the code's own pauses (scaled down to real time, a loaded machine woke the watcher late enough to miss
the margins)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pauses_clock import PausesOnlyClock

from npuprof.agent import signals, sigterm_clock
from npuprof.agent.log import AgentLog
from npuprof.agent.signals import PROFILER_START, TRACE_EXPORT, SigtermGuard

# torchrun's and Slurm's 30 s from SIGTERM to SIGKILL; a hold of 18 s (within the 20 s allowed a hold and a
# started handler), then a finish of up to 18 s (docs/architecture.md, "Signals")
SIGKILL_AFTER_S = 30.0
HOLD_S = 18.0
FINISH_S = 18.0


def _deaths_on_a_paused_clock(
    monkeypatch: pytest.MonkeyPatch, then: threading.Event | None = None
) -> tuple[PausesOnlyClock, list[float]]:
    """A SIGTERM's clock that moves only by the code's pauses, the test's thread taking part; when the guard
    lets the process die, the moment is kept (and ``then`` set: the process would be gone, whatever it was
    doing with it) and nothing dies."""
    clock = PausesOnlyClock()
    clock.take_part()
    monkeypatch.setattr(sigterm_clock, "CLOCK", clock)
    died: list[float] = []

    def dies(signum: int) -> None:
        died.append(clock.monotonic())
        if then is not None:
            then.set()

    monkeypatch.setattr(signals, "_die_of", dies)
    return clock, died


@contextlib.contextmanager
def _installed(guard: SigtermGuard) -> Iterator[None]:
    try:
        assert guard.install()
        yield
    finally:
        guard.uninstall()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)


def _watched_through_a_hold(
    clock: PausesOnlyClock, guard: SigtermGuard, holding: str
) -> tuple[threading.Thread, float]:
    """The signal comes during a hold of HOLD_S: the watcher, started as it comes, and when."""
    watcher = threading.Thread(target=guard._give_handler_time)
    with signals.export_hold(holding):
        arrived = guard._note_arrival()
        clock.start(watcher)
        clock.sleep(HOLD_S)  # what is held goes on
    return watcher, arrived


def _died_in_time(died: list[float], arrived: float, log_path: Path, said: str) -> None:
    assert died, "the watcher never let the process die"
    assert died[0] - arrived < SIGKILL_AFTER_S, died[0] - arrived
    (line,) = [line for line in log_path.read_text().splitlines() if said in line]
    assert "since the signal); dying now" in line, line


def test_a_handler_started_after_a_long_hold_is_cut_before_the_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-299: a SIGTERM that came as torch started the profiler (seconds the first time; 18 s here)
    waited for the start, then the handler had 20 s more from its own start: the watcher let the process
    die 38 s after the signal, the SIGKILL at 30 s first (the job's exit 137, npuprof's line never written).
    The handler gets what is left of the signal's limit, within the 30 s."""
    clock, died = _deaths_on_a_paused_clock(monkeypatch)
    log_path = tmp_path / "npuprof.log"
    guard = SigtermGuard(lambda: None, AgentLog(str(log_path), "test"))
    with _installed(guard):
        watcher, arrived = _watched_through_a_hold(clock, guard, PROFILER_START)
        guard._handler_started.set()  # the held signal delivered: the handler runs, and never ends
        clock.join(watcher)
    _died_in_time(died, arrived, log_path, "finalising the capture")


def test_a_capture_finished_from_the_watcher_after_a_hold_is_cut_before_the_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-303: the main thread blocked outside Python (a collective) while another thread records:
    the watcher finishes that capture itself (_finished_from_the_watcher). After a hold (a trace export, up
    to 20 s) and the handler's grace, that finish (the recording thread's next boundary, then its export: up
    to 18 s) had no bound from the signal, so the process could die 40 s after it. It is cut within
    SIGTERM_LIMIT_S of the signal, as a started handler is."""
    finish_ends = threading.Event()
    clock, died = _deaths_on_a_paused_clock(monkeypatch, then=finish_ends)
    log_path = tmp_path / "npuprof.log"
    guard = SigtermGuard(
        # the recording thread's boundary, then its export
        lambda: clock.wait_until(finish_ends, clock.monotonic() + FINISH_S),
        AgentLog(str(log_path), "test"),
        recorded_off_main=lambda: True,  # the capture is a training thread's
    )
    try:
        with _installed(guard):
            guard._grace = 0.1  # the handler's grace (the main thread never starts it: blocked in C++)
            watcher, arrived = _watched_through_a_hold(clock, guard, TRACE_EXPORT)
            clock.join(watcher)
    finally:
        finish_ends.set()
    _died_in_time(died, arrived, log_path, "took too long")
