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
    summary and the report (None where an output leaves it out)."""

    attr: str
    ascend: str | None
    summary: str | None


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
STEP_HEADER = ["Device_id", "Step", *(f.ascend for f in FIELDS if f.ascend)]
