"""Interval arithmetic on numpy arrays of [start, end) spans (microseconds)."""

from __future__ import annotations

import numpy as np

Spans = tuple[np.ndarray, np.ndarray]
EMPTY: Spans = (np.zeros(0), np.zeros(0))


def union(starts: np.ndarray, ends: np.ndarray) -> Spans:
    """Merge overlapping spans into disjoint sorted ones."""
    if len(starts) == 0:
        return EMPTY
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=float)[order]
    e = np.maximum.accumulate(np.asarray(ends, dtype=float)[order])
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    idx = np.flatnonzero(new)
    last = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], e[last]


def total(spans: Spans) -> float:
    """Summed lengths (added as :func:`totals` adds them)."""
    return float(np.add.reduceat(spans[1] - spans[0], [0])[0]) if len(spans[0]) else 0.0


def clip(spans: Spans, lo: float, hi: float) -> Spans:
    """The parts of disjoint sorted ``spans`` inside [lo, hi)."""
    s, e = spans
    if len(s) == 0:
        return EMPTY
    i = int(np.searchsorted(e, lo, side="right"))
    j = int(np.searchsorted(s, hi, side="left"))
    if j <= i:
        return EMPTY
    cs = np.maximum(s[i:j], lo)
    ce = np.minimum(e[i:j], hi)
    keep = ce > cs
    return cs[keep], ce[keep]


def merge(a: Spans, b: Spans) -> Spans:
    return union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def clip_many(spans: Spans, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``clip(spans, lo[k], hi[k])`` for every window k at once: (starts, ends, window of each piece), the
    pieces of window 0 first, each window's in order."""
    s, e = spans
    if len(s) == 0 or len(lo) == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
    first = np.searchsorted(e, lo, side="right")
    count = np.maximum(np.searchsorted(s, hi, side="left") - first, 0)
    owner = np.repeat(np.arange(len(lo)), count)
    idx = first[owner] + np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)
    cs = np.maximum(s[idx], lo[owner])
    ce = np.minimum(e[idx], hi[owner])
    keep = ce > cs
    return cs[keep], ce[keep], owner[keep]


def pieces_in(spans: Spans, lo: np.ndarray, hi: np.ndarray) -> int:
    """How many pieces :func:`clip_many` would make of ``spans`` in the windows, without making them."""
    s, e = spans
    if len(s) == 0 or len(lo) == 0:
        return 0
    first = np.searchsorted(e, lo, side="right")
    return int(np.maximum(np.searchsorted(s, hi, side="left") - first, 0).sum())


def totals_in(spans: Spans, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per window k, the length of the disjoint sorted ``spans`` inside ``[lo[k], hi[k]]``: what
    ``totals(*clip_many(spans, lo, hi), len(lo))`` gives, from running sums of the spans' lengths, with no
    piece made (windows that overlap each other make as many pieces as each holds spans)."""
    s, e = np.asarray(spans[0], dtype=float), np.asarray(spans[1], dtype=float)
    if len(s) == 0 or len(lo) == 0:
        return np.zeros(len(lo))
    running = np.concatenate(([0.0], np.cumsum(e - s)))
    first = np.searchsorted(e, lo, side="right")  # the first span ending after the window starts
    after = np.searchsorted(s, hi, side="left")  # the first span starting at or after its end
    some = after > first
    head, tail = np.minimum(first, len(s) - 1), np.maximum(after - 1, 0)
    inside = running[np.maximum(after, first)] - running[first]
    inside -= np.where(some, np.maximum(lo - s[head], 0.0) + np.maximum(e[tail] - hi, 0.0), 0.0)
    return np.where(some, np.maximum(inside, 0.0), 0.0)


def totals(starts: np.ndarray, ends: np.ndarray, owner: np.ndarray, windows: int) -> list[float]:
    """Per window, ``total()`` of its pieces (``owner``: the window of each piece, ascending)."""
    out = np.zeros(windows)
    if len(owner):
        first = np.searchsorted(owner, np.arange(windows))
        nonempty = np.flatnonzero(np.diff(np.append(first, len(owner))) > 0)
        out[nonempty] = np.add.reduceat(ends - starts, first[nonempty])
    return out.tolist()


def subtract(a: Spans, b: Spans) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint sorted ``a`` minus disjoint sorted ``b``: for each span of ``a``, the gaps around the spans
    of ``b`` that reach into it (empty pieces dropped): (starts, ends, index of the ``a`` span of each)."""
    a_s, a_e = np.asarray(a[0], dtype=float), np.asarray(a[1], dtype=float)
    b_s, b_e = b
    if len(b_s) == 0 or len(a_s) == 0:
        keep = a_e > a_s
        return a_s[keep], a_e[keep], np.flatnonzero(keep)
    first = np.searchsorted(b_e, a_s, side="right")  # first b ending after the a span starts
    count = np.searchsorted(b_s, a_e, side="left") - first  # b spans starting before it ends
    pieces = count + 1
    owner = np.repeat(np.arange(len(a_s)), pieces)
    pos = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    k = first[owner] + pos  # the b span ending each piece (when pos < count)
    last_b = len(b_s) - 1
    starts = np.where(pos == 0, a_s[owner], b_e[np.clip(k - 1, 0, last_b)])
    ends = np.where(pos == count[owner], a_e[owner], b_s[np.clip(k, 0, last_b)])
    keep = starts < ends
    return starts[keep], ends[keep], owner[keep]


Pieces = tuple[np.ndarray, np.ndarray, np.ndarray]


def subtract_per_window(a: Pieces, b: Pieces, windows: int, disjoint: bool) -> Pieces:
    """Per window, its pieces of ``a`` minus its pieces of ``b`` (pieces as :func:`clip_many` gives them:
    start, end, window, by window then time): (starts, ends, window of each piece). Pieces of disjoint
    windows never meet, so one subtraction serves them all; overlapping windows go one at a time."""
    if disjoint:
        starts, ends, index = subtract(a[:2], b[:2])
        return starts, ends, a[2][index]
    out: list[Pieces] = [(np.zeros(0), np.zeros(0), np.zeros(0, np.int64))]
    for k in range(windows):
        in_a, in_b = a[2] == k, b[2] == k
        starts, ends, _index = subtract((a[0][in_a], a[1][in_a]), (b[0][in_b], b[1][in_b]))
        out.append((starts, ends, np.full(len(starts), k, np.int64)))
    return (
        np.concatenate([p[0] for p in out]),
        np.concatenate([p[1] for p in out]),
        np.concatenate([p[2] for p in out]),
    )


def waits(starts: np.ndarray, ends: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    """For each task, the idle time on its lane (a stream, a thread) before it started: its start less the
    latest end of the lane's earlier tasks (0 for a lane's first task, or when it started before that end)."""
    n = len(starts)
    out = np.zeros(n)
    if n < 2:
        return out
    order = np.lexsort((starts, lanes))
    lane, begin, end = lanes[order], starts[order], ends[order]
    latest = np.empty(n)
    cuts = np.flatnonzero(lane[1:] != lane[:-1]) + 1
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), n], strict=True):  # a lane at a time: few lanes
        latest[lo:hi] = np.maximum.accumulate(end[lo:hi])
    same = lane[1:] == lane[:-1]
    out[order[1:]] = np.where(same, np.maximum(begin[1:] - latest[:-1], 0.0), 0.0)
    return out
