"""trace_view.json: the raw Kineto trace copied as it is, plus the Ascend lanes (output-format.md §7).

Appended events: an ``Overlap Analysis`` process with ``Computing``, ``Communication(Not Overlapped)`` and
``Free`` spans per step, a ``Communication`` process with the communication spans, and ``process_name``
metadata naming each device process ``Ascend Hardware`` (kernels keep their own args).
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import IO, Any

import msgspec

from npuprof.analysis.tables import RankTables

OVERLAP_PID = 2_000_000_001
COMM_PID = 2_000_000_002
_LANES = {"Computing": 0, "Communication(Not Overlapped)": 1, "Free": 2}


def copy_raw(raw: Path, out: IO[bytes]) -> None:
    """Copy the raw trace (decompressing a .gz) into ``out``; the copy is what the scan then reads."""
    with open(raw, "rb") as probe:
        gz = probe.read(2) == b"\x1f\x8b"
    if gz:
        with gzip.open(raw, "rb") as src:
            shutil.copyfileobj(src, out, 8 << 20)
        out.flush()
        return
    out.flush()
    size = raw.stat().st_size
    with open(raw, "rb") as src:
        offset = 0
        while offset < size:
            sent = os.sendfile(out.fileno(), src.fileno(), offset, min(size - offset, 1 << 30))
            if sent == 0:
                break
            offset += sent
    out.seek(0, os.SEEK_END)


def _meta(pid: int, name: str, tid: int | None = None) -> dict[str, Any]:
    if tid is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def extra_events(tables: RankTables, process_names: dict[Any, str], device_pids: set[Any]) -> list[dict]:
    events: list[dict[str, Any]] = [_meta(OVERLAP_PID, "Overlap Analysis")]
    events += [_meta(OVERLAP_PID, label, tid) for label, tid in _LANES.items()]
    for label, start, end in tables.overlap_spans:
        if end > start:
            events.append(
                {
                    "ph": "X",
                    "cat": "overlap_analysis",
                    "name": label,
                    "pid": OVERLAP_PID,
                    "tid": _LANES[label],
                    "ts": start,
                    "dur": end - start,
                }
            )
    if tables.comm_spans:
        events += [_meta(COMM_PID, "Communication"), _meta(COMM_PID, "Communication", 0)]
        events += [
            {
                "ph": "X",
                "cat": "communication",
                "name": name,
                "pid": COMM_PID,
                "tid": 0,
                "ts": start,
                "dur": end - start,
            }
            for name, start, end in tables.comm_spans
        ]
    for pid in sorted(device_pids, key=str):
        if process_names.get(pid, "").startswith(("GPU", "Device")):
            events.append(_meta(pid, "Ascend Hardware"))
    return events


def finish(out: IO[bytes], events_end: int, events: list[dict[str, Any]]) -> None:
    """Insert ``events`` after the last raw event (offset ``events_end``) and restore the original tail."""
    out.flush()
    fd = out.fileno()
    size = os.fstat(fd).st_size
    tail = os.pread(fd, size - events_end, events_end)
    out.seek(events_end)
    out.truncate()
    enc = msgspec.json.Encoder()
    buf = bytearray()
    for ev in events:
        buf += b",\n  "
        buf += enc.encode(ev)
        if len(buf) > 4 << 20:
            out.write(buf)
            buf.clear()
    out.write(buf)
    out.write(tail)
