"""The steps of a rank and the breakdown of each step's time, computed once as typed columns.

Every output reads the same :class:`StepBreakdown`: ``step_trace_time.csv`` (Ascend's column names),
``npuprof_summary.json`` and the report (npuprof's ``*_us`` names), the terminal's step table, and the
Overlap Analysis lanes of ``trace_view.json``. The definitions are in docs/formats.md ("Step breakdown").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from npuprof.analysis import intervals
from npuprof.analysis.rounding import rounded
from npuprof.analysis.step_fields import FIELDS, OPTIONAL_ORDER, SUMMARY_ORDER

OVERLAP_LANES = ("Computing", "Communication(Not Overlapped)", "Free")


@dataclass(frozen=True)
class StepWindows:
    """The ``ProfilerStep#N`` spans of a rank, by start: step numbers (None for the one window over a
    trace without steps) and their [start, end) times in µs."""

    numbers: tuple[int | None, ...]
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, spans: list[tuple[int | None, float, float]]) -> StepWindows:
        """From (number, start, end) spans, ordered by start."""
        return cls(
            tuple(s[0] for s in spans),
            np.array([s[1] for s in spans], dtype=np.float64),
            np.array([s[2] for s in spans], dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.numbers)

    @property
    def disjoint(self) -> bool:
        return bool((self.start[1:] >= self.end[:-1]).all())

    def index_of(self, times: np.ndarray) -> np.ndarray:
        """Index of the window holding each time (-1 when none); a time in two overlapping windows goes
        to the later one."""
        if not len(self) or len(times) == 0:
            return np.full(len(times), -1, dtype=np.int64)
        idx = np.searchsorted(self.start, times, side="right") - 1
        ok = idx >= 0
        ok[ok] = times[ok] < self.end[idx[ok]]
        return np.where(ok, idx, -1)

    def labels(self) -> list[int | None]:
        """The step number of each index that :meth:`index_of` gives, -1 (outside every step) included."""
        return [*self.numbers, None]


_BY_SUMMARY = {f.summary: f for f in FIELDS if f.summary}


@dataclass(frozen=True)
class Lanes:
    """The Overlap Analysis spans: step (index of its window), lane (index into OVERLAP_LANES), start, end;
    by step, lane, time."""

    step: np.ndarray
    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray


@dataclass(frozen=True)
class Work:
    """What a rank's device did, as disjoint sorted spans, and the start of each task (sorted)."""

    computing: intervals.Spans
    communication: intervals.Spans
    receive: intervals.Spans
    task_starts: np.ndarray
    # the training thread's DataLoader fetches (disjoint, sorted); None when the trace holds none
    data: intervals.Spans | None = None


@dataclass(frozen=True)
class StepBreakdown:
    """Per step (the index of ``windows``), each time in µs, unrounded."""

    windows: StepWindows
    duration: np.ndarray
    computing: np.ndarray
    communication: np.ndarray
    not_overlapped: np.ndarray
    overlapped: np.ndarray
    free: np.ndarray
    bubble: np.ndarray
    stage: np.ndarray
    not_overlapped_exclude_receive: np.ndarray
    preparing: np.ndarray
    lanes: Lanes
    communication_spans: intervals.Spans
    # the training thread's time inside DataLoader fetches (None: the trace holds no fetch, so not known)
    data: np.ndarray | None = None
    # the steps overlap too much to draw their lanes (_breakdown_by_totals): lanes is empty
    lanes_left_out: bool = False

    @property
    def start(self) -> np.ndarray:
        return self.windows.start

    def ascend_rows(self, device_id: int) -> list[list[object]]:
        """The rows of ``step_trace_time.csv``."""
        columns = [rounded(getattr(self, f.attr), 3) for f in FIELDS if f.ascend]
        numbers = ["" if n is None else n for n in self.windows.numbers]
        return [[device_id, num, *cells] for num, *cells in zip(numbers, *columns, strict=True)]

    def summary_steps(self) -> list[dict[str, object]]:
        """The steps of ``npuprof_summary.json``: the step number and its times (µs, 3 decimals)."""
        known = [key for key in OPTIONAL_ORDER if getattr(self, _BY_SUMMARY[key].attr) is not None]
        keys = (*SUMMARY_ORDER, *known)
        columns = {key: rounded(getattr(self, _BY_SUMMARY[key].attr), 3) for key in keys}
        numbers = self.windows.numbers
        # a time not known for one step alone (NaN: the data time of a step whose fetch was damaged) is left
        # out of that step
        return [
            {"step": num, **{key: columns[key][k] for key in keys if not math.isnan(columns[key][k])}}
            for k, num in enumerate(numbers)
        ]


# pieces of work the steps may cut the work's spans (and themselves) into, per span, before their times come
# from running sums (_breakdown_by_totals): steps that follow one another cut each span at most once; below
# PIECES_FLOOR (~50 MB of pieces a kind) they are always made, and the lanes drawn (helper-176: a 30-step
# trace whose steps overlapped 6x lost its lanes, which cost 0.3 s to draw)
PIECES_PER_SPAN = 4
PIECES_FLOOR = 1_000_000


def breakdown(windows: StepWindows, work: Work) -> StepBreakdown:
    """Each step's computing, communication (overlapped or not), free, bubble and preparing time, and the
    Overlap Analysis lanes, and the time spent fetching data. Works for overlapping steps too: every step
    is measured on its own."""
    lo, hi, n = windows.start, windows.end, len(windows)
    busy = intervals.merge(work.computing, work.communication)
    kinds = (work.computing, work.communication, busy, work.receive)
    pieces = sum(intervals.pieces_in(k, lo, hi) for k in kinds)
    if pieces > max(PIECES_PER_SPAN * (sum(len(k[0]) for k in kinds) + n), PIECES_FLOOR):
        return _breakdown_by_totals(windows, work, busy)
    comp = intervals.clip_many(work.computing, lo, hi)
    comm = intervals.clip_many(work.communication, lo, hi)
    busy_in = intervals.clip_many(busy, lo, hi)
    computing, communication, busy_t, bubble = (
        np.array(intervals.totals(*pieces, n))
        for pieces in (comp, comm, busy_in, intervals.clip_many(work.receive, lo, hi))
    )
    cno = intervals.subtract_per_window(comm, comp, n, windows.disjoint)
    free = intervals.subtract_per_window((lo, hi, np.arange(n)), busy_in, n, windows.disjoint)
    times = (computing, communication, busy_t, bubble)
    return _of_totals(windows, work, times, _lanes(comp, cno, free))


def _breakdown_by_totals(windows: StepWindows, work: Work, busy: intervals.Spans) -> StepBreakdown:
    """:func:`breakdown` of steps that overlap each other so much that their pieces of work would be many
    times the work's spans (thousands of steps over one another: an edited or merged trace; 20,000 of them
    took 24 GB, helper-175): the same times from running sums, without the Overlap Analysis lanes, which
    would draw each piece once for every step over it (``lanes_left_out``, said in the capture's warnings)."""
    lo, hi = windows.start, windows.end
    times = tuple(
        intervals.totals_in(k, lo, hi) for k in (work.computing, work.communication, busy, work.receive)
    )
    none = np.zeros(0)
    lanes = Lanes(np.zeros(0, np.int64), np.zeros(0, np.int8), none, none)
    return _of_totals(windows, work, times, lanes, lanes_left_out=True)


def _of_totals(
    windows: StepWindows,
    work: Work,
    times: tuple[np.ndarray, ...],
    lanes: Lanes,
    lanes_left_out: bool = False,
) -> StepBreakdown:
    """The breakdown of each step from its computing, communication, busy and bubble (receive) totals."""
    computing, communication, busy_t, bubble = times
    lo, hi = windows.start, windows.end
    duration = hi - lo
    not_overlapped = busy_t - computing
    return StepBreakdown(
        windows=windows,
        duration=duration,
        computing=computing,
        communication=communication,
        not_overlapped=not_overlapped,
        overlapped=communication - not_overlapped,
        free=duration - busy_t,
        bubble=bubble,
        stage=duration - bubble,
        not_overlapped_exclude_receive=np.maximum(not_overlapped - bubble, 0.0),
        preparing=_preparing(lo, hi, work.task_starts),
        lanes=lanes,
        communication_spans=work.communication,
        data=None if work.data is None else intervals.totals_in(work.data, lo, hi),
        lanes_left_out=lanes_left_out,
    )


def _preparing(lo: np.ndarray, hi: np.ndarray, task_starts: np.ndarray) -> np.ndarray:
    """From each step's start to its first task (0 when the step has none)."""
    if not len(task_starts):
        return np.zeros(len(lo))
    k = np.searchsorted(task_starts, lo, side="left")
    first = task_starts[np.minimum(k, len(task_starts) - 1)]
    return np.where((k < len(task_starts)) & (first < hi), first - lo, 0.0)


def _lanes(*pieces: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Lanes:
    """The pieces of each lane (start, end, step), ordered by step, then lane, then time."""
    owner = np.concatenate([p[2] for p in pieces])
    lane = np.concatenate([np.full(len(p[0]), k, np.int8) for k, p in enumerate(pieces)])
    order = np.argsort(owner * len(pieces) + lane, kind="stable")
    starts = np.concatenate([p[0] for p in pieces])[order]
    ends = np.concatenate([p[1] for p in pieces])[order]
    return Lanes(owner[order], lane[order], starts, ends)
