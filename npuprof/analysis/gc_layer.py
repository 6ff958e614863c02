"""``--gc-detect-threshold``'s GC pauses (``npuprof_gc.json``, docs/formats.md): the ``GC`` layer of
trace_view.json in torch_npu's form, and the GC time of each step for `npuprof analyse`.

torch_npu's parser writes each pause as an X event named ``GC`` of category ``GC`` in a process
``Python GC`` (label CPU, sort index 1) whose one thread, named ``Python GC`` too, has the training
process's id (docs/formats.md, "Marks, communication ranges and GC in trace_view.json", with its sources);
msprof-analyze's advisor finds the pauses by that category. Its ``args`` are empty there; here they hold
the generation and Python's counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.cells import ns_of
from npuprof.analysis.side_records import read_epoch_spans
from npuprof.analysis.step_breakdown import StepWindows
from npuprof.analysis.trace_body import epoch_texts

GC_FILE = "npuprof_gc.json"  # written by the capture (agent/gc_watch.py)
GC_SORT = 1  # torch_npu's TraceEventManager.GC_SORT_INDEX
# torch_npu formats the layer's pid as CANN does: (pid << 10) | (sort index << 5) | device id
PID_SHIFT, SORT_SHIFT = 10, 5
FALLBACK_PID = 2_000_000_004  # a pid the formula cannot take

Count = Annotated[int, msgspec.Meta(ge=0, lt=1 << 62)]
EpochNs = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]


class GcPause(msgspec.Struct, kw_only=True, gc=False):
    start_ns: EpochNs
    end_ns: EpochNs
    generation: Count
    collected: Count
    uncollectable: Count


class GcRecord(msgspec.Struct, kw_only=True):
    version: int
    pid: Count
    threshold_ms: Annotated[float, msgspec.Meta(ge=0, le=1e12)]
    clock: str
    events: list[GcPause]
    dropped: Count = 0
    removed: bool = (
        False  # the script took the capture's gc.callbacks entry out: the pauses after are missing
    )


class GcFileError(ValueError):
    """``npuprof_gc.json`` cannot be used; the message says why."""


_DECODER = msgspec.json.Decoder(GcRecord)


def read_record(rank_dir: Path) -> GcRecord | None:
    """``rank_dir``'s GC pauses, None without the file; GcFileError when it cannot be used."""
    path = rank_dir / GC_FILE
    if not path.is_file():
        return None
    return read_epoch_spans(path, _DECODER, "events", GcFileError)


def layer_pid(pid: int, device_id: int) -> int:
    """The pid torch_npu gives the GC layer of process ``pid`` on device ``device_id``."""
    if pid < 1 << 22 and 0 <= device_id < 1 << SORT_SHIFT:
        return (pid << PID_SHIFT) | (GC_SORT << SORT_SHIFT) | device_id
    return FALLBACK_PID


_ENC = msgspec.json.Encoder()


def layer_events(record: GcRecord, device_id: int) -> list[bytes]:
    """The GC layer, encoded: each pause ``{"ph": "X", "name": "GC", "pid", "tid", "ts", "dur", "cat":
    "GC", "args": {"generation", "collected", "uncollectable"}}`` (``ts`` epoch µs text, ``dur`` µs),
    then the process and thread metadata, in torch_npu's order and key order. None without pauses."""
    if not record.events:
        return []
    pid = layer_pid(record.pid, device_id)
    tid = record.pid
    starts = epoch_texts(np.array([p.start_ns for p in record.events], dtype=np.int64))
    out = [
        _ENC.encode(
            {
                "ph": "X",
                "name": "GC",
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "dur": (p.end_ns - p.start_ns) / 1000,
                "cat": vocab.GC_CAT,
                "args": {
                    "generation": p.generation,
                    "collected": p.collected,
                    "uncollectable": p.uncollectable,
                },
            }
        )
        for p, ts in zip(record.events, starts, strict=True)
    ]
    for kind, thread, key, value in (
        ("process_name", 0, "name", "Python GC"),
        ("process_labels", 0, "labels", "CPU"),
        ("process_sort_index", 0, "sort_index", GC_SORT),
        ("thread_name", tid, "name", "Python GC"),
        ("thread_sort_index", tid, "sort_index", tid),
    ):
        out.append(_ENC.encode({"ph": "M", "name": kind, "pid": pid, "tid": thread, "args": {key: value}}))
    return out


def per_step(record: GcRecord, windows: StepWindows, base_ns: int) -> list[dict[str, Any]]:
    """Each step's GC: ``step``, ``pauses`` (the pauses overlapping it) and ``gc_us`` (their time inside
    it, exact to the ns: a pause across a step boundary counts in each step for its part there)."""
    if not len(windows):
        return []
    starts = np.array([p.start_ns for p in record.events], dtype=np.int64)
    ends = np.array([p.end_ns for p in record.events], dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    lo = ns_of(windows.start) + base_ns
    hi = ns_of(windows.end) + base_ns
    out = []
    for step, a, b in zip(windows.numbers, lo.tolist(), hi.tolist(), strict=True):
        inside = np.flatnonzero((ends > a) & (starts < b)) if len(starts) else starts
        gc_ns = _union_length(np.maximum(starts[inside], a), np.minimum(ends[inside], b))
        out.append({"step": step, "pauses": len(inside), "gc_us": gc_ns / 1000})
    return out


def _union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Nanoseconds covered by the spans (sorted by start): pauses of one process do not overlap, but the
    file is not trusted to say so."""
    total, reach = 0, None
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if reach is None or s >= reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total
