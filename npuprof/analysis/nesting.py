"""How the operators of a thread nest: the parent of each, the time of its children, its device total.

The definition is a stack walk over the operators sorted by (thread, start, -duration): before an operator
is pushed, the operators on top that ended at or before its start are popped; the one left on top is its
parent. :func:`walk` gives that walk's results. When the operators nest properly (each one ends before or
with the one open around it, as RecordFunction ranges do) it computes them with array operations, ~3x
faster than the walk; otherwise (overlapping ranges, negative or non-finite times) it runs the walk.
"""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np


def walk(
    thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, dev_self: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(parent index or -1, summed duration of the children, device total = own device time plus the
    children's totals) of operators sorted by (thread, start, -duration)."""
    found = _parents(thread, ts, dur)
    if found is None:
        return _stack_walk(thread, ts, dur, dev_self)
    parent, depth = found
    n = len(ts)
    child = np.flatnonzero(parent >= 0)
    # bincount adds in index order, as the walk does
    child_sum = np.bincount(parent[child], weights=dur[child], minlength=n) if n else np.zeros(0)
    dev_total = dev_self.copy()
    if n and dev_self.any():
        # deepest level first, each child in index order: the walk's order of additions
        by_depth = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
        for level in range(int(depth.max()), 1, -1):
            kids = by_depth[bounds[level] : bounds[level + 1]]
            np.add.at(dev_total, parent[kids], dev_total[kids])
    return parent, child_sum, dev_total


def _parents(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(parent, depth) of each operator as the stack walk finds them, computed from a sweep over start and
    end events, or None when the operators do not nest properly (the sweep then differs from the walk).

    Sweep order: by time; at equal times ends before starts (the walk pops an operator ending where the
    next starts), ends of nested operators inner first, and an operator of zero length closes right after
    it opens. Depth = operators open. They nest properly iff every operator closes at the depth it opened
    at (the first one closing out of turn would close above its depth); then the parent of an operator is
    the last one before it opened one level up."""
    n = len(ts)
    if not (np.isfinite(ts).all() and np.isfinite(dur).all() and (dur >= 0).all()):
        return None
    end = ts + dur
    parent = np.full(n, -1, np.int64)
    depth = np.ones(n, np.int64)
    cuts = [0, *(np.flatnonzero(np.diff(thread)) + 1).tolist(), n]
    for lo, hi in itertools.pairwise(cuts):
        t_ts, t_end = ts[lo:hi], end[lo:hi]
        m = hi - lo
        long = t_end > t_ts  # zero-length operators open and close with nothing in between
        li = np.flatnonzero(long)
        l_end = t_end[li]
        close_order = np.lexsort((-li, l_end))  # the end events, in sweep order
        closed_at = np.empty(len(li), np.int64)
        closed_at[close_order] = np.arange(len(li))
        # open when an operator starts: longer ones started before it (itself counted) minus those ended
        opened_before = np.cumsum(long) - long
        d = 1 + opened_before - np.searchsorted(l_end[close_order], t_ts, side="right")
        # open when a longer operator ends (itself counted): started before that end minus ended before
        open_at_end = np.searchsorted(t_ts[li], l_end, side="left") - closed_at
        if not np.array_equal(open_at_end, d[li]):
            return None
        key = d * (m + 1) + np.arange(m)
        ordered = np.sort(key)
        below = ordered[np.maximum(np.searchsorted(ordered, key - (m + 1)) - 1, 0)]
        nested = d > 1
        if not (below[nested] // (m + 1) == d[nested] - 1).all():
            return None
        parent[lo:hi] = np.where(nested, lo + below % (m + 1), -1)
        depth[lo:hi] = d
    return parent, depth


def _stack_walk(
    thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, dev_self: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The walk itself, one operator at a time."""
    n = len(ts)
    end_l = (ts + dur).tolist()
    ts_l, th_l, dur_l = ts.tolist(), thread.tolist(), dur.tolist()
    par = [-1] * n
    csum = [0.0] * n
    dtot = dev_self.tolist()
    has_dev = bool(dev_self.any())
    stack: list[int] = []
    cur_thread = None
    for i in range(n):
        if th_l[i] != cur_thread:
            while stack:
                j = stack.pop()
                if stack and has_dev:
                    dtot[stack[-1]] += dtot[j]
            cur_thread = th_l[i]
        start = ts_l[i]
        while stack and end_l[stack[-1]] <= start:
            j = stack.pop()
            if stack and has_dev:
                dtot[stack[-1]] += dtot[j]
        if stack:
            p = stack[-1]
            par[i] = p
            csum[p] += dur_l[i]
        stack.append(i)
    while stack:
        j = stack.pop()
        if stack and has_dev:
            dtot[stack[-1]] += dtot[j]
    return np.array(par, dtype=np.int64), np.array(csum), np.array(dtot)


def self_times(
    thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, parent: np.ndarray, child_sum: np.ndarray
) -> np.ndarray:
    """Each operator's self time (operators sorted as for :func:`walk`, ``parent`` and ``child_sum`` its
    results): its duration less its children's, and on a thread where an operator runs past the end of its
    parent (B begins inside A and ends after it: threads interleaved, times rounded), the time it was the
    innermost operator open (the last one opened), so that the self times add up to the thread's busy
    time, each µs counted once (docs/formats.md). Taking B's whole duration from A's left A no self time
    for the part it ran alone (helper-221)."""
    own = np.maximum(dur - child_sum, 0.0)
    child = np.flatnonzero(parent >= 0)
    end = ts + dur
    overran = child[end[child] > end[parent[child]]]
    if not len(overran):
        return own
    for th in np.unique(thread[overran]).tolist():
        rows = np.flatnonzero(thread == th)
        if not (np.isfinite(ts[rows]).all() and np.isfinite(end[rows]).all()):
            continue  # no time order to follow (the reader names such times)
        t_ts = ts[rows].tolist()
        own[rows] = _innermost_time(t_ts, np.maximum(end[rows], ts[rows]).tolist())
    return own


def _innermost_time(ts_l: list[float], end_l: list[float]) -> list[float]:
    """Per operator (in the walk's order, ``end_l`` none before its start), the time it is the last opened
    of those open."""
    own = [0.0] * len(ts_l)
    ends: list[tuple[float, int]] = []  # heap of (end, index): the open operators
    opened: list[int] = []  # heap of -index: the last opened on top; closed ones dropped lazily
    closed: set[int] = set()
    now = -math.inf
    for k in [*range(len(ts_l)), None]:
        start = math.inf if k is None else ts_l[k]
        while ends and ends[0][0] <= start:  # those that end before the next one opens
            end, done = heapq.heappop(ends)
            own[-opened[0]] += end - now
            now = end
            closed.add(done)
            while opened and -opened[0] in closed:
                heapq.heappop(opened)
        if k is None:
            break
        if opened:
            own[-opened[0]] += start - now
        now = start
        heapq.heappush(ends, (end_l[k], k))
        heapq.heappush(opened, -k)
    return own
