"""--delay/--duration's plan (agent/window_plan.py) at its edges, in process (helper-373's mutation hunt:
each of these could change, and no test said so): which signals a thread blocks by /proc, how late a window
says it closed, how long a boundary may take, a window skipped, the exit's line said once, a fork of a
window that recorded."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

from npuprof.agent import window_plan
from npuprof.config import ProfileConfig


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, line: str) -> None:
        self.lines.append(line)

    def warn_once(self, key: str, line: str) -> None:
        self.lines.append(line)

    def error(self, line: str) -> None:
        self.lines.append(line)


def _plan(**cfg: Any) -> window_plan.WindowPlan:
    return window_plan.WindowPlan(ProfileConfig(**cfg), _Log())  # not bound: no handler, no timer


def test_a_thread_blocking_a_signal_is_read_from_its_sigblk() -> None:
    """SIGUSR2 (12) blocked in one thread: its bit 11 of SigBlk; SIGPIPE (13), the next bit, and SIGUSR1
    are not; nor is SIGUSR2 in the main thread."""
    blocked, done = threading.Event(), threading.Event()

    def blocker() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
        blocked.set()
        done.wait(30)

    thread = threading.Thread(target=blocker, daemon=True)
    thread.start()
    try:
        assert blocked.wait(30)
        assert thread.native_id is not None
        assert window_plan._blocks(thread.native_id, signal.SIGUSR2)
        assert not window_plan._blocks(thread.native_id, signal.SIGPIPE)
        assert not window_plan._blocks(thread.native_id, signal.SIGUSR1)
        assert not window_plan._blocks(threading.get_native_id(), signal.SIGUSR2)
        assert not window_plan._blocks(thread.native_id, None)
    finally:
        done.set()
        thread.join(30)


def test_a_window_the_timer_could_not_close_says_how_late_it_closed_from_half_a_second() -> None:
    plan = _plan(delay=0.0, duration=1.0)
    plan._no_kick_why = "the job's main thread blocks the timer's signal"
    now = time.monotonic()
    plan.began_at, plan.end_at = now - 3.0, now - 2.0
    said = plan.late_by()
    assert said.startswith("the window closed 2.") and said.endswith(
        " s after its end: the job's main thread blocks the timer's signal"
    ), said
    plan.end_at = time.monotonic() - 0.2  # within LATE_S (0.5 s): as asked
    assert plan.late_by() == ""
    plan.end_at, plan._no_kick_why = now - 2.0, ""  # the timer could close it: its lateness is a step's
    assert plan.late_by() == ""


def test_a_boundary_gets_the_windows_length_and_at_least_a_second() -> None:
    assert _plan(duration=3.0)._step_grace == 3.0
    assert _plan(duration=0.2)._step_grace == 1.0
    assert _plan()._step_grace == 1.0


def test_a_skipped_window_is_done() -> None:
    """A capture the controller skipped (a full disk, a rank not selected) ends the one window."""
    plan = _plan(duration=1.0)
    plan.state = window_plan.OPEN
    plan.hear("skipped", 3, "only 1 MiB free")
    assert plan.state == window_plan.DONE
    assert plan.action_at(4) == window_plan.Action.NONE


def test_the_exits_line_of_a_window_not_begun_is_said_once() -> None:
    """The exit's finalise may run twice (atexit, multiprocessing's finalizers)."""
    plan = _plan(delay=5.0, duration=1.0)
    said = plan.not_begun_at_exit()
    assert said.startswith(f"{window_plan.WINDOW_DUE_AT_EXIT}due 5 s after the agent woke, it ended 0."), said
    assert plan.not_begun_at_exit() == ""


def test_a_child_forked_from_a_launcher_after_its_window_recorded_waits_for_none() -> None:
    """A window that recorded (began_at) stays done in a child forked after it; one the launcher never
    opened waits again there, its delay from the fork."""
    plan = _plan(delay=4.0, duration=1.0)
    plan.state, plan.began_at = window_plan.DONE, time.monotonic()
    plan._forked_from_a_launcher()
    assert plan.state == window_plan.DONE
    plan.began_at = None
    forked = time.monotonic()
    plan._forked_from_a_launcher()
    assert plan.state == window_plan.WAITING
    assert forked + 4.0 <= plan.start_at <= time.monotonic() + 4.0
    assert plan.end_at == plan.start_at + 1.0
