"""A small, fast Chrome/Kineto trace reader for the reports (export-stacks, memory-timeline).

``args`` is kept undecoded (``msgspec.Raw``) and decoded only for the few events that need it: decoding every
event's args costs 4x the time and twice the memory on big traces (measured-facts.md).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import msgspec


class TraceEvent(msgspec.Struct, frozen=True):
    name: str = ""
    ph: str = ""
    cat: str | None = None
    ts: float | None = None
    dur: float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    id: int | str | None = None
    bp: str | None = None
    args: msgspec.Raw = msgspec.Raw(b"")

    def decoded_args(self) -> dict[str, Any]:
        if not self.args:
            return {}
        try:
            value = msgspec.json.decode(self.args)
        except msgspec.DecodeError:
            return {}
        return value if isinstance(value, dict) else {}


class _TraceFile(msgspec.Struct):
    traceEvents: list[TraceEvent] = msgspec.field(default_factory=list)


class TraceReadError(ValueError):
    """The file is not a readable Chrome trace."""


def read_trace_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def load_events(path: Path) -> list[TraceEvent]:
    """The trace's events: from ``{"traceEvents": [...]}`` or a bare JSON array; gzip or plain."""
    try:
        data = read_trace_bytes(path)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceReadError(f"cannot read {path}: {exc}") from exc
    stripped = data.lstrip()
    try:
        if stripped[:1] == b"[":
            return msgspec.json.decode(data, type=list[TraceEvent])
        return msgspec.json.decode(data, type=_TraceFile).traceEvents
    except msgspec.DecodeError as exc:
        raise TraceReadError(f"{path} is not a Chrome trace (JSON with traceEvents): {exc}") from exc


def process_names(events: list[TraceEvent]) -> dict[int | str | None, str]:
    """pid -> the name from the ``process_name`` metadata events."""
    names: dict[int | str | None, str] = {}
    for ev in events:
        if ev.ph == "M" and ev.name == "process_name":
            name = ev.decoded_args().get("name")
            if isinstance(name, str):
                names[ev.pid] = name
    return names
