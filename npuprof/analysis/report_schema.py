"""The typed, versioned `npuprof analyse` report (``--format json``; docs/formats.md, "The report").

:func:`npuprof.analysis.report.build_report` makes a :class:`Report`; the terminal, the CSV and the JSON
output read it. Field order is the JSON's key order; a field left UNSET is left out of the JSON. A tool
reading the JSON back uses :func:`read_report`, which names the version when the report was written by
an older or newer npuprof, and the field when one is damaged, instead of failing later with a KeyError.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from npuprof.analysis.summary_schema import CutShort, Finite, SummaryStep
from npuprof.analysis.versioned import Words, decode_versioned

REPORT_VERSION = 1


class ReportStep(SummaryStep, kw_only=True):  # type: ignore[misc,valid-type]
    """A step of the summary (its number and times), its GC time when the capture detected GC
    (``gc_us``: the pauses' time inside the step; ``gc_pauses``: the pauses overlapping it; both absent
    otherwise), whether the capture ended inside it (then ``partial`` is true; absent otherwise), and the
    percent of its duration that ``data_us`` is (``data_pct``: absent with ``data_us``). ``preparing_us`` is
    null for a step in which nothing ran: no first task to measure it to (the summary's 0 then is no
    measurement)."""

    preparing_us: Finite | None  # type: ignore[assignment]
    data_pct: Finite | UnsetType = UNSET
    gc_us: Finite | UnsetType = UNSET
    gc_pauses: int | UnsetType = UNSET
    partial: bool | UnsetType = UNSET


class ReportOperator(msgspec.Struct, kw_only=True):
    """An operator over the steps reported: calls and summed times."""

    name: str
    count: int
    self_us: Finite
    total_us: Finite
    device_us: Finite


class ReportKernel(msgspec.Struct, kw_only=True):
    """A device kernel over the steps reported: calls and summed time."""

    name: str
    count: int
    total_us: Finite


class ReportRange(msgspec.Struct, kw_only=True):
    """The user's ranges (``npuprof.range``, ``range_start``/``range_end``) or ``--msprof-tx``'s ``comm:``
    ranges of one name over the steps reported (a range counts in the step it starts in)."""

    name: str
    kind: str  # range | comm
    count: int
    total_us: Finite
    mean_us: Finite
    max_us: Finite


class ReportGc(msgspec.Struct, kw_only=True):
    """The GC pauses of the steps reported (``--gc-detect-threshold``)."""

    threshold_ms: Finite
    pauses: int  # summed over the steps (a pause across a step boundary counts in both)
    gc_us: Finite  # the pauses' time inside the steps
    dropped: int  # pauses the capture counted but did not keep (past its limit)


class RankReport(msgspec.Struct, kw_only=True):
    rank: int | None
    rank_dir: str
    status: str  # parsed | cached
    device: str
    trace: str
    steps: list[ReportStep]
    step_time_mean_us: Finite | None  # over the whole steps reported (a partial step is left out)
    top_operators: list[ReportOperator]
    top_kernels: list[ReportKernel]
    memory_peak_mb: Finite | None
    memory_peak_reserved_mb: Finite | None
    communication: dict[str, int | Finite]  # operators, time_us, size_mb
    # the slowest ranges by total time, --top of them (absent: no marks and no --msprof-tx in the capture)
    ranges: list[ReportRange] | UnsetType = UNSET
    gc: ReportGc | UnsetType = UNSET  # absent: no GC detection in the capture
    # what the parser could not fully understand, one line each (absent when nothing)
    warnings: list[str] | UnsetType = UNSET
    # the step the capture ended inside of, and why (absent when none)
    partial_step: int | UnsetType = UNSET
    partial_reason: str | UnsetType = UNSET
    # the training process's time after the capture's last step had closed (the trace export, which a
    # timer of the user's around that step counts, this table not): the record's export_ms; absent when
    # not recorded (older npuprof, not npuprof's capture) or that step is not reported
    export_after_step: int | UnsetType = UNSET
    export_ms: Finite | UnsetType = UNSET
    # the profiler's start, at the boundary that ended step start_after_step (before the capture's warm-up
    # or first step): the ms it took the training process there, which a timer of the user's around that
    # step counts and no table shows; the record's start_after_step and start_ms, absent when not recorded
    start_after_step: int | UnsetType = UNSET
    start_ms: Finite | UnsetType = UNSET
    # the call that start ran inside, from the record: the --step-on function, None for optimizer.step();
    # absent when the record does not say it (older npuprof) or no start is reported
    step_on: str | UnsetType | None = UNSET
    # the epoch time (ns) the steps' start_us count from; absent when they are epoch µs themselves
    time_base_ns: int | UnsetType = UNSET
    # the trace was cut short: the summary's (absent when it is whole)
    cut_short: CutShort | UnsetType = UNSET
    # in Report.pooled only: the rank dirs pooled, in order (rank_dir is then the directory holding them)
    captures: list[str] | UnsetType = UNSET
    # torchrun's attempt the capture was made in (its record's restart_count, TORCHELASTIC_RESTART_COUNT:
    # 0 the first); absent when not recorded (outside torchrun, older npuprof, not npuprof's capture)
    restart_count: int | UnsetType = UNSET
    # true: made in a round of torchrun's workers before the latest (npuprof/results/rounds.py), left out of
    # the comparison across ranks; absent otherwise
    earlier_round: bool | UnsetType = UNSET


class Problem(msgspec.Struct, kw_only=True):
    """A rank dir that was not analysed, and why."""

    rank_dir: str
    status: str  # corrupt | truncated | missing | incomplete | in progress | needs_torch_npu | ...
    reason: str


class CrossStep(msgspec.Struct, kw_only=True):
    """One step across the ranks: each rank's duration (keyed by the rank's number as text)."""

    step: int | None
    ranks: dict[str, Finite]
    max_us: Finite
    min_us: Finite


class Slowest(msgspec.Struct, kw_only=True):
    """The slowest rank by mean step time, and whether it is an outlier."""

    rank: int
    mean_step_us: Finite
    median_us: Finite
    slower_than_median_pct: Finite
    modified_z: Finite | None  # None with fewer than 3 ranks, or no spread
    outlier: bool
    # 2 ranks sharing fewer whole steps than the rule needs (report.SMALL_GROUP_STEPS): how many they
    # share; ``outlier`` is then false because it could not be judged, not because the rank is not one
    too_few_steps: int | UnsetType = UNSET


class Straggler(msgspec.Struct, kw_only=True):
    """The rank the others wait for in their collectives: the most time per step outside exposed
    communication (synchronous training gives every rank the same step time, so the slowest rank by step
    time says little there)."""

    rank: int
    busy_us: Finite  # mean over its whole steps of step time minus exposed communication
    median_busy_us: Finite
    busier_than_median_pct: Finite
    modified_z: Finite | None
    outlier: bool
    too_few_steps: int | UnsetType = UNSET  # as Slowest's


class StartSkew(msgspec.Struct, kw_only=True):
    """How far apart the ranks started one step."""

    step: int | None
    skew_us: Finite
    earliest_rank: int
    latest_rank: int
    # the latest rank's profiler started at the boundary right before this step and took it this many ms
    # (its capture record's start_ms), at least half the skew beyond the earliest rank's own start there:
    # the skew is the profiler's start, not the job's (absent otherwise)
    profiler_start_ms: Finite | UnsetType = UNSET


class CrossRange(msgspec.Struct, kw_only=True):
    """The ranges of one name over every rank: on how many ranks, their calls and time, and the rank of
    the longest one."""

    name: str
    kind: str  # range | comm
    ranks: int
    count: int
    total_us: Finite
    mean_us: Finite
    max_us: Finite
    max_rank: int | None


class CrossRank(msgspec.Struct, kw_only=True):
    steps: list[CrossStep]
    slowest: Slowest | None
    start_skew: list[StartSkew]
    # the rank the others wait for (absent when no rank had exposed communication)
    straggler: Straggler | UnsetType = UNSET
    # the slowest ranges by total time over the ranks, --top of them (absent when no rank has ranges)
    ranges: list[CrossRange] | UnsetType = UNSET
    # the attempt compared when torchrun restarted the job between captures: the latest one's captures
    # (those of an earlier attempt left out); absent otherwise
    restart_count: int | UnsetType = UNSET


class Report(msgspec.Struct, kw_only=True):
    version: int = REPORT_VERSION
    path: str
    steps_filter: list[int] | None  # --steps A-B as [A, B]; null for no --steps, a list or an open end
    steps_asked: str | UnsetType = UNSET  # --steps as read: "3,5-7,10-" (absent without --steps)
    ranks: list[RankReport]
    problems: list[Problem]
    cross_rank: CrossRank
    # each process (rank) with more than 3 captures, its captures pooled into one (analysis/pooling.py):
    # the terminal shows these instead of each capture; absent when no process has that many
    pooled: list[RankReport] | UnsetType = UNSET


class ReportError(ValueError):
    """The report cannot be read; the message says why."""


_REPORT_DECODER = msgspec.json.Decoder(Report)
_WORDS = Words(
    not_ours="not an npuprof report",
    label="report version",
    newer_fix="upgrade npuprof",
    older_fix="run `npuprof analyse --format json` again",
)


def read_report(data: bytes | str) -> Report:
    """The JSON of ``npuprof analyse --format json`` as a Report, or ReportError naming the problem."""
    return decode_versioned(data, _REPORT_DECODER, REPORT_VERSION, ReportError, _WORDS)


def json_value(obj: Any) -> Any:
    """``default`` for the json module: a report's structs as plain values. The report itself is taken
    apart one level only, so that its ranks become plain values one at a time as they are written (a
    many-rank report would otherwise be copied whole)."""
    if isinstance(obj, Report):
        fields = {name: getattr(obj, name) for name in obj.__struct_fields__}
        return {name: value for name, value in fields.items() if value is not UNSET}
    if isinstance(obj, msgspec.Struct):
        return msgspec.to_builtins(obj)
    raise TypeError(f"{type(obj).__name__} is not part of a report")
