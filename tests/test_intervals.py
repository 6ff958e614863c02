"""Interval arithmetic (npuprof/analysis/intervals.py) on hand-computed spans: merging, clipping to step
windows, per-window totals and subtraction, at the edges that matter (touching spans, zero-length spans,
windows with nothing in them or after everything, spans on both sides of a window)."""

from __future__ import annotations

import numpy as np
import pytest

from npuprof.analysis import intervals


def arr(*values: float) -> np.ndarray:
    return np.array(values, dtype=float)


def lists(*columns: np.ndarray) -> list[list[float]]:
    return [c.tolist() for c in columns]


def some_spans() -> intervals.Spans:
    """(0, 3), (1, 2) inside it, (2, 4) overlapping, (5, 8) and (8, 9) touching, a zero-length (15, 15),
    (20, 21). Made in each test, never at import: a module-level value would hide a broken ``union`` from
    bench/mutation.py, whose runs reuse modules imported before the mutant is switched on."""
    return intervals.union(arr(5, 0, 2, 8, 1, 15, 20), arr(8, 3, 4, 9, 2, 15, 21))


# windows [0, 2), [3, 7), [10, 16) (only the zero-length span), [14, 25), [30, 40) (after every span)
LO, HI = arr(0, 3, 10, 14, 30), arr(2, 7, 16, 25, 40)


def test_union_merges_overlapping_nested_and_touching_spans() -> None:
    assert lists(*some_spans()) == [[0.0, 5.0, 15.0, 20.0], [4.0, 9.0, 15.0, 21.0]]
    assert lists(*intervals.union(arr(), arr())) == [[], []]


def test_clip_many_cuts_spans_to_each_window() -> None:
    spans = some_spans()
    starts, ends, owner = intervals.clip_many(spans, LO, HI)
    # [0, 2) of (0, 4); [3, 4) and [5, 7); nothing (a zero-length span is no time); [20, 21); nothing
    assert lists(starts, ends, owner) == [[0.0, 3.0, 5.0, 20.0], [2.0, 4.0, 7.0, 21.0], [0, 1, 1, 3]]
    assert lists(*intervals.clip_many(intervals.EMPTY, LO, HI)) == [[], [], []]
    assert lists(*intervals.clip_many(spans, arr(), arr())) == [[], [], []]


def test_clip_many_is_clip_for_every_window() -> None:
    spans = some_spans()
    starts, ends, owner = intervals.clip_many(spans, LO, HI)
    for k in range(len(LO)):
        mine = owner == k
        assert lists(*intervals.clip(spans, LO[k], HI[k])) == lists(starts[mine], ends[mine]), k
    assert lists(*intervals.clip(intervals.EMPTY, 0.0, 1.0)) == [[], []]
    assert lists(*intervals.clip((arr(0), arr(10)), 2.0, 5.0)) == [[2.0], [5.0]]


def test_totals_per_window_empty_ones_included() -> None:
    spans = some_spans()
    pieces = intervals.clip_many(spans, LO, HI)
    assert intervals.totals(*pieces, len(LO)) == [2.0, 3.0, 0.0, 1.0, 0.0]
    assert intervals.totals(arr(), arr(), np.zeros(0, np.int64), 3) == [0.0, 0.0, 0.0]
    for k in range(len(LO)):
        assert intervals.total(intervals.clip(spans, LO[k], HI[k])) == intervals.totals(*pieces, len(LO))[k]
    assert intervals.total(intervals.EMPTY) == 0.0


def test_subtract_with_spans_on_both_sides() -> None:
    a = (arr(0, 20, 40, 55), arr(10, 30, 50, 58))
    b = (arr(2, 6, 18, 25, 28, 40), arr(4, 12, 22, 26, 35, 50))
    # (0, 10) - (2, 4) - (6, 12) = [0, 2), [4, 6); (20, 30) - (18, 22) - (25, 26) - (28, 35) = [22, 25),
    # [26, 28); (40, 50) is covered exactly; (55, 58) has nothing of b
    assert lists(*intervals.subtract(a, b)) == [
        [0.0, 4.0, 22.0, 26.0, 55.0],
        [2.0, 6.0, 25.0, 28.0, 58.0],
        [0, 0, 1, 1, 3],
    ]


def test_subtract_one_span_and_nothing() -> None:
    assert lists(*intervals.subtract((arr(0), arr(10)), (arr(3), arr(5)))) == [
        [0.0, 5.0],
        [3.0, 10.0],
        [0, 0],
    ]
    # nothing to take away: a as it is, less its zero-length spans
    a = (arr(0, 20, 30), arr(10, 20, 40))
    assert lists(*intervals.subtract(a, intervals.EMPTY)) == [[0.0, 30.0], [10.0, 40.0], [0, 2]]
    assert lists(*intervals.subtract(intervals.EMPTY, (arr(3), arr(5)))) == [[], [], []]


@pytest.mark.parametrize("disjoint", [True, False])
def test_subtract_per_window(disjoint: bool) -> None:
    """Windows [0, 10) and [10, 20): a = the windows, b = work [2, 4) in the first, [10, 12) and [15, 20) in
    the second; the two paths (one subtraction, or one per window) give the same pieces."""
    a = (arr(0, 10), arr(10, 20), np.array([0, 1]))
    b = (arr(2, 10, 15), arr(4, 12, 20), np.array([0, 1, 1]))
    starts, ends, window = intervals.subtract_per_window(a, b, 2, disjoint)
    assert lists(starts, ends, window) == [[0.0, 4.0, 12.0], [2.0, 10.0, 15.0], [0, 0, 1]]
