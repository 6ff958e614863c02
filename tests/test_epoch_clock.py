"""agent/epoch_clock.py: npuprof's own records of a capture (GC pauses, comm ranges) are put on the trace's
epoch clock by an offset read at the capture's start and end; a reading preempted inside its bracket (a
loaded host) was off by milliseconds, and the mean of the two carried half of that into every record (four
comm-range tests found them 4 ms off the trace's clock on a loaded machine)."""

from __future__ import annotations

import time

import pytest

from npuprof.agent import comm_marks, gc_watch

EPOCH_AT_ZERO = 1_780_000_000_000_000_000  # the fake clocks' true offset: epoch ns at perf_counter 0
STALL_NS = 8_000_000  # a preemption between a reading's wall time and its closing perf_counter


class LoadedHostClocks:
    """perf_counter_ns and time_ns 100 ns apart per call; while ``stalls`` is above 0, a bracket's closing
    perf_counter_ns comes ``STALL_NS`` late (the thread preempted just after reading the wall clock)."""

    def __init__(self) -> None:
        self.now, self.stalls, self._stall_next = 1_000_000, 0, False

    def perf_counter_ns(self) -> int:
        self.now += 100
        if self._stall_next:
            self.now += STALL_NS
            self._stall_next = False
        return self.now

    def time_ns(self) -> int:
        self.now += 100
        if self.stalls > 0:
            self.stalls -= 1
            self._stall_next = True
        return self.now + EPOCH_AT_ZERO


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> LoadedHostClocks:
    fake = LoadedHostClocks()
    monkeypatch.setattr(time, "perf_counter_ns", fake.perf_counter_ns)
    monkeypatch.setattr(time, "time_ns", fake.time_ns)
    return fake


@pytest.mark.parametrize("stalled", ["at-the-end", "at-the-start"])
def test_a_comm_range_lands_on_the_epoch_clock_when_one_reading_is_preempted(
    clocks: LoadedHostClocks, stalled: str
) -> None:
    """Three readings in a row preempted (the first three brackets of the end's, or the start's): the
    range's epoch times stay within 10 µs of the truth; they were 2 ms off (half of the 4 ms a preempted
    bracket misreads)."""
    if stalled == "at-the-start":
        clocks.stalls = 3
    ranges = comm_marks.CommRanges()
    if stalled == "at-the-end":
        clocks.stalls = 3
    ranges.add("comm:all_reduce,default_pg,float32,1024", 7, 5_000_000, 6_000_000)
    [recorded] = ranges.record()["ranges"]
    assert abs(recorded["start_ns"] - (5_000_000 + EPOCH_AT_ZERO)) <= 10_000, recorded
    assert abs(recorded["end_ns"] - (6_000_000 + EPOCH_AT_ZERO)) <= 10_000, recorded


def test_a_gc_pause_lands_on_the_epoch_clock_when_every_end_reading_tried_is_preempted(
    clocks: LoadedHostClocks,
) -> None:
    """The end's readings all preempted (more than it tries): the start's narrow reading is used alone."""
    watch = gc_watch.GcWatch(threshold_ms=0.0)
    watch.start()
    watch._events.append((2_000_000, 2_500_000, 2, 10, 0))
    clocks.stalls = 1000
    [pause] = watch.stop()["events"]
    assert abs(pause["start_ns"] - (2_000_000 + EPOCH_AT_ZERO)) <= 10_000, pause
    assert abs(pause["end_ns"] - (2_500_000 + EPOCH_AT_ZERO)) <= 10_000, pause


class _ScriptedBrackets:
    """Each reading's (perf_counter before, wall, perf_counter after), in order."""

    def __init__(self, brackets: list[tuple[int, int, int]]) -> None:
        self.perf = [n for before, _, after in brackets for n in (before, after)]
        self.wall = [wall for _, wall, _ in brackets]

    def perf_counter_ns(self) -> int:
        return self.perf.pop(0)

    def time_ns(self) -> int:
        return self.wall.pop(0)


def test_a_reading_takes_the_narrowest_of_at_least_three_brackets_from_their_middle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helper-373: with the first bracket kept, or the second (narrow already) taken before the third was
    tried, or the offset taken from the bracket's start, every test still passed."""
    from npuprof.agent import epoch_clock

    clocks = _ScriptedBrackets(
        [
            (1_000_000, 5_000_000_000, 1_050_000),  # 50 µs wide: not narrow
            (2_000_000, 7_000_000_000, 2_010_000),  # 10 µs: narrow, but only the second
            (3_000_000, 9_000_000_000, 3_005_000),  # 5 µs: the narrowest of three
            (4_000_000, 9_000_000_000, 4_001_000),  # never read
        ]
    )
    monkeypatch.setattr(epoch_clock, "time", clocks)
    assert epoch_clock.read() == epoch_clock.EpochOffset(9_000_000_000 - 3_002_500, 5_000)
    assert len(clocks.wall) == 1


def test_two_readings_exactly_narrow_enough_are_averaged() -> None:
    from npuprof.agent.epoch_clock import NARROW_NS, EpochOffset, over_a_capture

    first, last = EpochOffset(1_000, NARROW_NS), EpochOffset(3_000, NARROW_NS)
    assert over_a_capture(first, last) == 2_000
    assert over_a_capture(first, last._replace(width_ns=NARROW_NS + 1)) == 1_000  # the narrower
    assert over_a_capture(None, last) == 3_000
