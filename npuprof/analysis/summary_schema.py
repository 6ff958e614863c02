"""The typed, versioned hand-over from parsing to reporting: ``npuprof_summary.json``, one per rank dir
(docs/formats.md, "npuprof_summary.json").

The parser writes a :class:`Summary`; the report reads it back with :func:`read_summary`, which checks every
field it uses (types, finite numbers) and names the version when the file was written by an older or newer
npuprof, instead of failing somewhere later with a KeyError.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from npuprof.analysis.step_fields import OPTIONAL_ORDER, SUMMARY_ORDER
from npuprof.analysis.versioned import Words, decode_versioned, trace_gone_words

SUMMARY_VERSION = 1
TOP_PER_STEP = 100  # the operators and kernels a summary keeps per step (the report's --top can show no more)

# A finite float: JSON has no NaN/Infinity, and Python's json writes them; ±1.7e308 bounds keep inf out.
Finite = Annotated[float, msgspec.Meta(ge=-1.7e308, le=1.7e308)]

SummaryStep = msgspec.defstruct(
    "SummaryStep",
    [
        ("step", int | None),
        *((name, Finite) for name in SUMMARY_ORDER),  # start_us, then the step's times
        # absent when the trace does not tell (data_us: no DataLoader fetch in it, or torch_npu's tables)
        *((name, Finite | msgspec.UnsetType, msgspec.UNSET) for name in OPTIONAL_ORDER),
        # absent when the memory table had no row for the step, null when it had no peak
        ("memory_peak_mb", Finite | None | msgspec.UnsetType, msgspec.UNSET),
        ("memory_peak_reserved_mb", Finite | None | msgspec.UnsetType, msgspec.UNSET),  # as memory_peak_mb
    ],
    kw_only=True,
)


class TopOperator(msgspec.Struct, kw_only=True):
    step: int | None
    name: str
    count: int
    self_us: Finite
    total_us: Finite
    device_us: Finite


class TopKernel(msgspec.Struct, kw_only=True):
    step: int | None
    name: str
    count: int
    total_us: Finite


class CutShort(msgspec.Struct, kw_only=True):
    """A trace cut short, read up to its last complete event (docs/formats.md, "Traces cut short")."""

    text_bytes: int  # where its text ends (decompressed; NUL bytes at its end not counted)
    events_end: int  # the byte just past its last complete event
    events_read: int
    after_events: bool  # cut in the keys after the events' array (every event read)
    steps_left_out: list[int]  # the steps the cut may have taken events of


class Summary(msgspec.Struct, kw_only=True):
    """Field order is the file's key order."""

    version: int = SUMMARY_VERSION
    rank: int | None
    trace: str
    events: int
    device: str
    device_id: int | None
    steps: list[SummaryStep]  # type: ignore[valid-type]
    top_operators: list[TopOperator]
    top_kernels: list[TopKernel]
    memory: dict[str, int | Finite | None]  # peak_allocated_mb, peak_reserved_mb; {} without memory data
    communication: dict[str, int | Finite]  # operators, time_us, size_mb
    world_size: int | None
    # what the parser could not fully understand, one line each (absent when nothing)
    warnings: list[str] | msgspec.UnsetType = msgspec.UNSET
    # the epoch time (ns) the steps' start_us count from (Kineto's baseTimeNanoseconds, or the base of a
    # trace with string times); absent when start_us is epoch µs already (a torch_npu-parsed dir)
    time_base_ns: Annotated[int, msgspec.Meta(ge=0, lt=1 << 62)] | msgspec.UnsetType = msgspec.UNSET
    # every operator and kernel name over the whole capture (step null), uncut: the pooled report of many
    # captures sums these (a name outside one capture's kept top would be undercounted); absent in
    # summaries of older npuprof
    operator_totals: list[TopOperator] | msgspec.UnsetType = msgspec.UNSET
    kernel_totals: list[TopKernel] | msgspec.UnsetType = msgspec.UNSET
    # ``communication`` of each step, by step number (what --steps sums); absent in older summaries
    communication_by_step: dict[str, dict[str, int | Finite]] | msgspec.UnsetType = msgspec.UNSET
    # the trace was cut short: where, what was read (absent when it is whole)
    cut_short: CutShort | msgspec.UnsetType = msgspec.UNSET


class SummaryError(ValueError):
    """The summary cannot be used; the message says why and what to do."""


_SUMMARY_DECODER = msgspec.json.Decoder(Summary)
_WORDS = Words(
    not_ours="not a summary",
    label="summary version",
    newer_fix="upgrade npuprof, or re-run with --force",
    older_fix="re-run with --force",
    suffix="; re-run with --force",
)


_WORDS_TRACE_GONE = trace_gone_words(_WORDS.not_ours, _WORDS.label)


def read_summary(data: bytes, trace_kept: bool = True) -> Summary:
    """``npuprof_summary.json``'s bytes as a Summary, or SummaryError naming the problem and its fix
    (``trace_kept`` False: the rank dir's raw trace is gone, so not --force)."""
    words = _WORDS if trace_kept else _WORDS_TRACE_GONE
    return decode_versioned(data, _SUMMARY_DECODER, SUMMARY_VERSION, SummaryError, words)


def as_plain(summary: Summary) -> dict[str, Any]:
    """The summary as plain JSON values, keys in the file's order."""
    return msgspec.to_builtins(summary)
