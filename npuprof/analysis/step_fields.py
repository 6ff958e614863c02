"""The columns of the step breakdown (docs/formats.md, "Step breakdown"): their attributes, their names in
``step_trace_time.csv`` and their keys in the summary and the report. Apart from the computation
(step_breakdown.py) so that what only names them (the schemas, the terminal) loads without numpy: the
launcher's last lines read a summary through them after every run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    """One column of the breakdown: its attribute, its name in ``step_trace_time.csv`` and its key in the
    summary and the report (None where an output leaves it out). ``optional``: a time the trace may not
    hold (the attribute None then): its key is left out of the summary and the report, its CSV cell empty,
    so that "not known" never reads as 0 (docs/formats.md, "Step breakdown")."""

    attr: str
    ascend: str | None
    summary: str | None
    optional: bool = False
    share: str | None = None  # the report's key for its percent of the step's duration (None: none)


FIELDS = (
    Field("start", None, "start_us"),
    Field("duration", None, "duration_us"),
    Field("computing", "Computing", "computing_us"),
    Field("not_overlapped", "Communication(Not Overlapped)", "comm_not_overlapped_us"),
    Field("overlapped", "Overlapped", "overlapped_us"),
    Field("communication", "Communication", "communication_us"),
    Field("free", "Free", "free_us"),
    Field("stage", "Stage", None),
    Field("bubble", "Bubble", "bubble_us"),
    Field("not_overlapped_exclude_receive", "Communication(Not Overlapped and Exclude Receive)", None),
    Field("preparing", "Preparing", "preparing_us"),
    # the training thread's time inside the DataLoader's batch fetches; unknown without a fetch in the trace
    Field("data", None, "data_us", optional=True, share="data_pct"),
)
# the summary's step entries list their times in this order
SUMMARY_ORDER = (
    "start_us",
    "duration_us",
    "computing_us",
    "communication_us",
    "comm_not_overlapped_us",
    "overlapped_us",
    "free_us",
    "bubble_us",
    "preparing_us",
)
# the summary's step times that may be unknown, after SUMMARY_ORDER's: each present only when known
OPTIONAL_ORDER = tuple(f.summary for f in FIELDS if f.optional and f.summary)
# a step's times in the report's CSV and the terminal's all-steps row, in the order the CSV lists them
STEP_TIME_FIELDS = (
    "duration_us",
    "computing_us",
    "communication_us",
    "comm_not_overlapped_us",
    "overlapped_us",
    "free_us",
    "preparing_us",
    "bubble_us",
)
# the report's percents of a step: (the time's key, the percent's key)
SHARES = tuple((f.summary, f.share) for f in FIELDS if f.summary and f.share)
# the report's CSV: STEP_TIME_FIELDS, then the times that may be unknown and the percents (empty cells when
# not known)
STEP_CSV_FIELDS = (*STEP_TIME_FIELDS, *OPTIONAL_ORDER, *(share for _key, share in SHARES))
STEP_HEADER = ["Device_id", "Step", *(f.ascend for f in FIELDS if f.ascend)]
