"""agent/gc_watch.py's callback on a clock the test sets (helper-373's mutation hunt: the threshold's
milliseconds read as microseconds, a pause exactly at the threshold dropped, one event over the limit kept,
an end without its start taken from 0, and a second watch left running beside the first, passed every
test). Nothing is collected: the callback is called as Python would call it."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from npuprof.agent import gc_watch

INFO = {"generation": 2, "collected": 5, "uncollectable": 0}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The perf_counter_ns readings the callback will take, in order."""
    readings: list[int] = []
    monkeypatch.setattr(gc_watch, "time", SimpleNamespace(perf_counter_ns=lambda: readings.pop(0)))
    yield readings


def _pause(watch: gc_watch.GcWatch, clock: list[int], start: int, end: int) -> None:
    clock.extend([start, end])
    watch._callback("start", INFO)
    watch._callback("stop", INFO)


def test_a_pause_of_the_threshold_in_milliseconds_is_kept_and_a_shorter_one_not(clock: list[int]) -> None:
    watch = gc_watch.GcWatch(threshold_ms=2.0)
    _pause(watch, clock, 1_000_000_000, 1_002_000_000)  # 2 ms exactly: kept
    _pause(watch, clock, 2_000_000_000, 2_001_999_999)  # 1 ns short
    _pause(watch, clock, 3_000_000_000, 3_000_500_000)  # 0.5 ms: not a pause of 2 ms (nor of 2 µs)
    assert [(start, end) for start, end, *_ in watch._events] == [(1_000_000_000, 1_002_000_000)]
    assert watch._events[0][2:] == (2, 5, 0)


def test_the_events_stop_at_the_limit_and_the_rest_are_counted(clock: list[int]) -> None:
    watch = gc_watch.GcWatch(threshold_ms=0.0, limit=2)
    for n in range(1, 5):
        _pause(watch, clock, n * 1000, n * 1000 + 10)
    assert len(watch._events) == 2 and watch.dropped == 2


def test_an_end_without_its_start_is_no_pause(clock: list[int]) -> None:
    """A watch started inside a collection hears its end only."""
    watch = gc_watch.GcWatch(threshold_ms=0.0)
    clock.append(5_000)
    watch._callback("stop", INFO)
    assert watch._events == [] and watch.dropped == 0


def test_a_watch_started_stops_the_one_running() -> None:
    first, second = gc_watch.GcWatch(threshold_ms=1.0), gc_watch.GcWatch(threshold_ms=1.0)
    first.start()
    try:
        second.start()
        try:
            called = gc_watch._called_callbacks()
            assert first._callback not in called and called[0] == second._callback
            assert gc_watch._watches == [second]
        finally:
            second.stop()
    finally:
        first.stop()
    assert first._callback not in gc_watch._called_callbacks() and gc_watch._watches == []
