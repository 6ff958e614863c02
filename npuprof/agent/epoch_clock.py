"""The offset from ``time.perf_counter_ns`` to the epoch (``time.time_ns``), by which npuprof's own records
of a capture (GC pauses, comm ranges: docs/formats.md) are put on the trace's clock.

A reading brackets one ``time_ns()`` between two ``perf_counter_ns()``; a thread preempted inside the
bracket (a loaded host) reads an offset off by as much as the bracket is wide, milliseconds. So a reading
takes the narrowest of a few brackets, more while they stay wide; and a capture's two readings (at its start
and its end) are averaged only when both are narrow (the clocks drift apart by microseconds over a capture),
else the narrower is kept.
"""

from __future__ import annotations

import time
from typing import NamedTuple

NARROW_NS = 20_000  # a bracket this narrow leaves the offset off by 10 µs at most
_TRIES, _MORE_TRIES = 3, 50


class EpochOffset(NamedTuple):
    offset_ns: int  # epoch ns - perf_counter ns
    width_ns: int  # the bracket's width: the reading's error is at most half of it


def read() -> EpochOffset:
    """The offset, from the narrowest of ``_TRIES`` paired readings (up to ``_MORE_TRIES`` while none
    is ``NARROW_NS`` wide)."""
    best: EpochOffset | None = None
    for tried in range(_MORE_TRIES):
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best.width_ns:
            best = EpochOffset(wall - (before + after) // 2, after - before)
        if tried + 1 >= _TRIES and best.width_ns <= NARROW_NS:
            break
    assert best is not None
    return best


def over_a_capture(first: EpochOffset | None, last: EpochOffset) -> int:
    """The offset for a capture read at its start (``first``, None when not read) and its end."""
    if first is None:
        return last.offset_ns
    if max(first.width_ns, last.width_ns) <= NARROW_NS:
        return (first.offset_ns + last.offset_ns) // 2
    return min(first, last, key=lambda reading: reading.width_ns).offset_ns
