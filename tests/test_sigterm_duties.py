"""npuprof's SIGTERM handler is installed for duties (agent/signals.py, Duties; docs/architecture.md,
"Signals"): a capture that records, an ended capture's memory snapshot still being copied, a --dynamic
session between captures. In-process, as the agent drives the guard: which duties keep the handler
installed, and how long the watcher waits for a main thread that does not start it."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _pauses_clock import PausesOnlyClock

from npuprof.agent import signals, sigterm_clock
from npuprof.agent.log import AgentLog
from npuprof.agent.signals import Duties, KeptWork, SigtermGuard

# docs/architecture.md: a capture's handler gets 1 s, a --dynamic session's 50 ms
CAPTURE_GRACE_S = 1.0
SESSION_GRACE_BELOW_S = 0.1


class Copy:
    """A memory snapshot's copy whose end the test decides."""

    def __init__(self) -> None:
        self.left = True

    def work(self) -> KeptWork:
        return KeptWork(lambda: self.left, lambda timeout_s: not self.left, 5.0)


@contextmanager
def guard_in_this_process() -> Iterator[SigtermGuard]:
    guard = SigtermGuard(lambda: None, AgentLog(None, "test"))
    try:
        yield guard
    finally:
        guard.uninstall()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)


def handler_now() -> Any:
    return signal.getsignal(signal.SIGTERM)


def test_a_capture_without_a_copy_left_puts_the_handler_down_at_its_end() -> None:
    with guard_in_this_process() as guard:
        assert guard.install()
        assert handler_now() == guard._handle
        guard.capture_ended(None)
        assert handler_now() == signal.SIG_DFL


def test_the_handler_stays_for_the_copy_until_a_step_boundary_after_it_is_done() -> None:
    copy = Copy()
    with guard_in_this_process() as guard:
        assert guard.install()
        guard.capture_ended(copy.work())
        assert handler_now() == guard._handle
        guard.put_down_if_copied()  # a step boundary while the copy goes on
        assert handler_now() == guard._handle
        copy.left = False
        guard.put_down_if_copied()
        assert handler_now() == signal.SIG_DFL


def test_a_capture_that_begins_during_a_copy_takes_it_into_its_own_hand_over() -> None:
    copy = Copy()
    with guard_in_this_process() as guard:
        assert guard.install()
        guard.capture_ended(copy.work())
        assert guard.install()  # the next capture: its finalise hands the copy over with the rest
        guard.capture_ended(None)  # ended with nothing left to copy (the agent asks the post-processor)
        assert handler_now() == signal.SIG_DFL


def test_a_dynamic_session_keeps_the_handler_past_each_capture() -> None:
    with guard_in_this_process() as guard:
        assert guard.install_for_session()
        for _ in range(2):
            assert guard.install()
            guard.capture_ended(None)
            assert handler_now() == guard._handle


def test_a_session_whose_handler_the_script_held_at_training_start_keeps_one_a_capture_installs() -> None:
    """The script's own SIGTERM handler is left alone; once it gave SIGTERM its default action back, a
    capture installs npuprof's, and the session keeps it past that capture (helper-256's rule)."""

    def theirs(signum: int, frame: Any) -> None:
        pass

    with guard_in_this_process() as guard:
        signal.signal(signal.SIGTERM, theirs)
        assert not guard.install_for_session()
        assert handler_now() is theirs
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        assert guard.install()
        guard.capture_ended(None)
        assert handler_now() == guard._handle


def test_each_duty_gives_the_main_thread_its_own_grace() -> None:
    copy = Copy().work()
    assert Duties(capture=True).grace_s(CAPTURE_GRACE_S) == CAPTURE_GRACE_S
    assert Duties(copy=copy).grace_s(CAPTURE_GRACE_S) == CAPTURE_GRACE_S
    assert Duties(capture=True, session=True).grace_s(CAPTURE_GRACE_S) == CAPTURE_GRACE_S
    assert Duties(session=True).grace_s(CAPTURE_GRACE_S) < SESSION_GRACE_BELOW_S


def test_a_copy_done_leaves_nothing_for_a_sigterm_to_finish_unless_another_duty_holds() -> None:
    copy = Copy()

    def broken() -> bool:
        raise OSError("gone")

    assert not Duties(copy=copy.work()).nothing_left()
    copy.left = False
    assert Duties(copy=copy.work()).nothing_left()
    assert not Duties(copy=copy.work(), session=True).nothing_left()
    assert not Duties().nothing_left()  # no duty: the handler is not npuprof's to run
    assert Duties(copy=KeptWork(broken, lambda timeout_s: True, 5.0)).nothing_left()


@pytest.mark.parametrize(
    ("holding", "named"), [("the profiler's start", "the profiler's start"), (None, "a trace export")]
)
def test_a_sigterm_held_past_the_limit_names_what_held_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holding: str | None, named: str
) -> None:
    """helper-298: a SIGTERM during torch's start of the profiler (seconds the first time) that waited past
    the limit was said to have come "during a trace export"; the line names what held it now. On a SIGTERM's
    clock that moves only by the code's pauses (tests/_pauses_clock.py): the hold's own 20 s limit, waited
    in no time."""
    clock = PausesOnlyClock()
    clock.take_part()  # the test's thread: it stands in for the watcher
    monkeypatch.setattr(sigterm_clock, "CLOCK", clock)
    died: list[tuple[int, float]] = []
    monkeypatch.setattr(signals, "_die_of", lambda signum: died.append((signum, clock.monotonic())))
    log_path = tmp_path / "npuprof.log"
    guard = SigtermGuard(lambda: None, AgentLog(str(log_path), "test"))
    try:
        assert guard.install()
        with signals.export_hold(*([holding] if holding else [])):
            held_at = clock.monotonic()
            guard._give_handler_time()  # the watcher, as the signal comes
    finally:
        guard.uninstall()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
    assert died == [(signal.SIGTERM, held_at + 20.0)]  # a hold's 20 s (docs/architecture.md, "Signals")
    (line,) = [line for line in log_path.read_text().splitlines() if "took over" in line]
    assert f"SIGTERM during {named} that took over" in line, line


def test_a_watcher_woken_once_the_handler_ended_the_capture_leaves_the_hand_over_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-334 (test_sigterm_training_thread, ~5 % of runs on a loaded host): the watcher, woken late by
    the SIGTERM, found the capture ended (the handler had it finished by the training thread) and took
    that for nothing to finish: it killed the process at once, in the middle of the handler's hand-over
    (its "handed over" never said). The handler, under way, ends the process itself: the watcher only
    bounds it (HANDLER_LIMIT_S, 20 s: docs/architecture.md, "Signals"). On the clock that moves only by
    the code's pauses."""
    clock = PausesOnlyClock()
    clock.take_part()  # the test's thread: it stands in for the watcher
    monkeypatch.setattr(sigterm_clock, "CLOCK", clock)
    died: list[tuple[int, float]] = []
    monkeypatch.setattr(signals, "_die_of", lambda signum: died.append((signum, clock.monotonic())))
    with guard_in_this_process() as guard:
        assert guard.install()
        arrived = guard._note_arrival()
        guard._handler_started.set()  # the main thread's handler runs (as _handle sets it going): it asked
        guard._finalising = True  # for the finish...
        guard.capture_ended(None)  # ... which the thread has done, the hand-over still to come
        guard._give_handler_time()  # the watcher, woken only now
    assert died == [(signal.SIGTERM, arrived + 20.0)]
