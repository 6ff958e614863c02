"""One capture's marks, ranges and GC pauses as the parser handles them (analysis/parse.py): what the
capture recorded (its side files, read when the parse starts), the spans read from its trace, the
``MsprofTx`` and ``GC`` layers appended to trace_view.json, and ``npuprof_annotations.json`` for the
report. Nothing here fails a parse: a side file or trace part that cannot be used becomes a warning in
``npuprof_annotations.json``, and `npuprof analyse` shows it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import msgspec

from npuprof.analysis import gc_layer, marks_ranges
from npuprof.analysis.annotation_schema import ANNOTATIONS_FILE, Annotations, encode
from npuprof.analysis.step_breakdown import StepWindows
from npuprof.analysis.trace_loader import TraceError
from npuprof.results.atomic import write_bytes


class RankAnnotations:
    """``rank_dir``'s marks, ranges and GC pauses; empty (and costing nothing) for a capture that had
    none of them."""

    def __init__(self, rank_dir: Path) -> None:
        self.warnings: list[str] = []
        self.want = marks_ranges.wanted(rank_dir, self.warnings.append)
        self.gc: gc_layer.GcRecord | None = None
        try:
            self.gc = gc_layer.read_record(rank_dir)
        except gc_layer.GcFileError as exc:
            self.warnings.append(f"{exc}: the GC layer is not shown")
        if self.gc is not None and self.gc.removed:
            self.warnings.append(
                f"{gc_layer.GC_FILE}: the script took npuprof's entry out of gc.callbacks during the "
                "capture (gc.callbacks.clear()?): the GC pauses after that are missing, the GC time shown "
                "is a lower bound"
            )
        self.spans: marks_ranges.Spans | None = None  # read from the trace
        self._merged: marks_ranges.Spans | None = None  # and the comm: ranges of their side file
        # the trace's own MsprofTx layer (a trace_view.json: torch_npu's, or npuprof's analysed alone),
        # read where the capture left no side file saying what it recorded; trace_view.json keeps it as is
        self.layer: marks_ranges.Spans | None = None

    @property
    def empty(self) -> bool:
        return self.want is None and self.layer is None and self.gc is None and not self.warnings

    def take_layer(self, mstx: list[tuple[str, Any, Any, float, float]]) -> None:
        """The MsprofTx layer's marks and ranges (Extract.mstx), when the capture's side files name none."""
        if self.want is None and mstx:
            self.layer = marks_ranges.from_layer(mstx)

    def read_spans(self, raw: Path, fd: int) -> None:
        """Read the marks and ranges from the plain trace open at ``fd`` (when the capture had any)."""
        if self.want is None:
            return
        try:
            self.spans = marks_ranges.read_spans(raw, fd, self.want)
        except TraceError as exc:
            self.warnings.append(f"marks and ranges not read: {exc}")

    def trace_events(self, process_names: dict[Any, str], device_id: int, base_ns: int) -> list[bytes]:
        """The MsprofTx and GC layers of trace_view.json, encoded (none for an empty capture)."""
        out: list[bytes] = []
        spans = self._all_spans(base_ns) if self.layer is None else None  # a layer of its own stays as it is
        if spans is not None:
            out += marks_ranges.layer_events(spans, process_names, base_ns)
        if self.gc is not None:
            out += gc_layer.layer_events(self.gc, device_id)
        return out

    def write(self, out_dir: Path, windows: StepWindows, base_ns: int) -> list[str]:
        """Write ``npuprof_annotations.json`` into ``out_dir`` unless the capture had nothing of the kind;
        return the names written. One an earlier parse left there (of side files deleted since, or damaged)
        is removed: it would be read as this parse's."""
        if self.empty:
            with contextlib.suppress(OSError):  # none there; or a folder of that name: the user's
                os.unlink(out_dir / ANNOTATIONS_FILE)
            return []
        fields: dict[str, Any] = {}
        if self.want is not None or self.layer is not None:
            spans = self._all_spans(base_ns)
            fields["ranges"] = marks_ranges.per_step(spans, windows) if spans is not None else []
        if self.gc is not None:
            fields["gc"] = {
                "threshold_ms": self.gc.threshold_ms,
                "pauses": len(self.gc.events),
                "dropped": self.gc.dropped,
                "steps": gc_layer.per_step(self.gc, windows, base_ns),
            }
        if self.warnings:
            fields["warnings"] = self.warnings
        write_bytes(out_dir / ANNOTATIONS_FILE, encode(msgspec.convert(fields, Annotations)))
        return [ANNOTATIONS_FILE]

    def all_spans(self, base_ns: int) -> marks_ranges.Spans | None:
        """The marks and ranges of the trace and the ``comm:`` ranges, by start (None: neither)."""
        return self._all_spans(base_ns)

    def _all_spans(self, base_ns: int) -> marks_ranges.Spans | None:
        """The spans read from the trace and the ``comm:`` ranges of ``npuprof_comm_ranges.json`` (those
        are there even when the trace could not be read), or the trace's MsprofTx layer; None when there
        are none."""
        if self.layer is not None:
            return self.layer
        if self._merged is None and self.want is not None:
            record = self.want.comm_ranges
            if self.spans is not None or record is not None:
                spans = self.spans if self.spans is not None else marks_ranges.Spans()
                spans = marks_ranges.with_ends(spans, self.want, base_ns)
                self._merged = marks_ranges.with_comm_ranges(spans, record, base_ns)
        return self._merged
