"""The typed, versioned hand-over of a capture's marks, ranges and GC pauses from parsing to reporting:
``ASCEND_PROFILER_OUTPUT/npuprof_annotations.json`` (docs/formats.md, "npuprof_annotations.json").

Written by the parser only for a capture that recorded marks, ran with ``--msprof-tx`` or detected GC
(``npuprof_summary.json`` stays as it was); read by the report with :func:`read_annotations`, which names
the version or the damaged field instead of failing later.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from npuprof.analysis.summary_schema import Finite
from npuprof.analysis.versioned import Words, decode_versioned, trace_gone_words

ANNOTATIONS_FILE = "npuprof_annotations.json"
ANNOTATIONS_VERSION = 1


class StepRange(msgspec.Struct, kw_only=True):
    """The ranges of one name that started in one step (None: outside every step)."""

    step: int | None
    name: str
    kind: Literal["range", "comm"]  # the user's range, or --msprof-tx's comm: range
    count: int
    total_us: Finite
    max_us: Finite


class StepGc(msgspec.Struct, kw_only=True):
    """The GC pauses overlapping one step, and their time inside it."""

    step: int | None
    pauses: int
    gc_us: Finite


class GcSummary(msgspec.Struct, kw_only=True):
    threshold_ms: Finite  # --gc-detect-threshold
    pauses: int  # in the capture (inside steps or not)
    dropped: int  # past the capture's limit, counted only
    steps: list[StepGc]


class Annotations(msgspec.Struct, kw_only=True):
    """Field order is the file's key order; a part that does not apply is absent."""

    version: int = ANNOTATIONS_VERSION
    ranges: list[StepRange] | UnsetType = UNSET  # absent: no marks and no --msprof-tx in the capture
    gc: GcSummary | UnsetType = UNSET  # absent: no GC detection
    warnings: list[str] | UnsetType = UNSET  # side files that could not be read, one line each


class AnnotationsError(ValueError):
    """The file cannot be used; the message says why and what to do."""


_DECODER = msgspec.json.Decoder(Annotations)
_WORDS = Words(
    not_ours="not npuprof's",
    label="version",
    newer_fix="upgrade npuprof, or re-run with --force",
    older_fix="re-run with --force",
    suffix="; re-run with --force",
)


_WORDS_TRACE_GONE = trace_gone_words(_WORDS.not_ours, _WORDS.label)


def read_annotations(data: bytes, trace_kept: bool = True) -> Annotations:
    """``npuprof_annotations.json``'s bytes as Annotations, or AnnotationsError naming the problem
    (``trace_kept`` False: the rank dir's raw trace is gone, so not --force)."""
    words = _WORDS if trace_kept else _WORDS_TRACE_GONE
    return decode_versioned(data, _DECODER, ANNOTATIONS_VERSION, AnnotationsError, words)


def encode(annotations: Annotations) -> bytes:
    """The file's bytes (indented, as npuprof_summary.json's neighbours are)."""
    return msgspec.json.format(msgspec.json.encode(annotations), indent=4) + b"\n"
