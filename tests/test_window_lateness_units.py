"""agent/window_lateness.py's watch on a clock the test moves (helper-373's mutation hunt: with its gap
threshold doubled, the first held-back reason overwritten, the blocked mark forgotten, the hold counted
from the signal rather than the last run that could not open, the late-signal threshold doubled, the
boundary's grace unsaid, a later hold said when the window no longer waited, tests/test_window_late.py
still passed). LATE_OPEN_S is 2 s: half of it, 1 s, is a gap. The test runs on the main thread, where a
run of the handler counts as the kick's."""

from __future__ import annotations

import pytest

from npuprof.agent import window_lateness
from npuprof.agent.window_lateness import OpeningWatch


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    moved = _Clock()
    monkeypatch.setattr(window_lateness, "time", moved)
    return moved


def _at(clock: _Clock, moment: float) -> _Clock:
    clock.now = moment
    return clock


def test_a_gap_of_a_second_after_a_run_in_an_import_is_counted_from_that_run(clock: _Clock) -> None:
    watch = OpeningWatch()
    _at(clock, 0.1)
    watch.signal_sent(steps_armed=False)
    _at(clock, 0.2)
    watch.handler_runs(in_an_import=True)  # could not open: the job's import
    watch.handler_ran()
    _at(clock, 1.5)
    watch.handler_runs(in_an_import=False)  # 1.3 s later: a gap
    late, why = watch.lateness(start_at=0.0, now=1.6, no_kick_why="")
    assert late == pytest.approx(1.5)
    assert why == "the main thread ran none of the timer's signals for 1.3 s (C code?)"


def test_the_first_reason_the_timer_held_its_signal_back_is_kept(clock: _Clock) -> None:
    watch = OpeningWatch()
    watch.signal_held_back("in init_process_group", window_waits=True)
    watch.signal_held_back("in new_group", window_waits=True)
    late, why = watch.lateness(start_at=0.0, now=3.0, no_kick_why="")  # no handler run: a boundary's
    assert late == 3.0
    assert why == "the timer held its signal back: in init_process_group, and no step boundary came sooner"


def test_a_main_thread_seen_blocking_the_signal_stays_said_once_it_unblocks(clock: _Clock) -> None:
    watch = OpeningWatch()
    _at(clock, 0.1)
    watch.signal_sent(steps_armed=False)
    watch.signal_blocked(window_waits=True)
    watch.signal_blocked(window_waits=False)  # a later look: the window no longer waits
    _at(clock, 1.5)
    watch.handler_runs(in_an_import=False)
    late, why = watch.lateness(start_at=0.0, now=1.6, no_kick_why="")
    assert late == pytest.approx(1.5)
    assert why == "the job's main thread blocked the timer's signal, and ran it 1.4 s after it went out"


def test_a_later_hold_is_said_only_while_the_window_waits(clock: _Clock) -> None:
    for waits, said in ((True, "the timer held its signal back 1.9 s: in new_group"), (False, None)):
        watch = OpeningWatch()
        _at(clock, 0.1)
        watch.signal_sent(steps_armed=False)
        _at(clock, 0.2)
        watch.handler_runs(in_an_import=True)
        watch.handler_ran()
        watch.signal_held_back("in new_group", window_waits=waits)
        _at(clock, 2.1)
        watch.handler_runs(in_an_import=False)
        _late, why = watch.lateness(start_at=0.0, now=2.2, no_kick_why="")
        expected = said or "the main thread ran none of the timer's signals for 1.9 s (C code?)"
        assert why == expected, waits


def test_a_signal_that_went_out_a_second_late_says_why(clock: _Clock) -> None:
    for armed, said in (
        (True, "no step boundary came within 1.0 s, the timer then opened it mid-step"),
        (False, "the timer's signal went out 1.0 s late (a loaded host?)"),
    ):
        watch = OpeningWatch()
        _at(clock, 1.0)  # exactly half of LATE_OPEN_S after the start
        watch.signal_sent(steps_armed=armed)
        _at(clock, 1.1)
        watch.handler_runs(in_an_import=False)
        late, why = watch.lateness(start_at=0.0, now=1.2, no_kick_why="")
        assert (late, why) == (pytest.approx(1.1), said)
