"""Trace reading for the reports (export-stacks, memory-timeline).

``load_events`` uses the project's streaming loader (npuprof.analysis.trace_loader.load_trace), keeping
only the events the reports need; the small reader below reads the other Chrome trace form, a bare JSON
array, which that loader does not take. Events of either kind have ``name ph cat ts dur pid tid id args``
and ``args_dict()``.
``args`` is kept undecoded (``msgspec.Raw``) and decoded only for the few events that need it: decoding every
event's args costs 4x the time and twice the memory on big traces (bench/README.md).
"""

from __future__ import annotations

import gzip
import zlib
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

    def args_dict(self) -> dict[str, Any]:
        if not self.args:
            return {}
        try:
            value = msgspec.json.decode(self.args)
        except (msgspec.DecodeError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}


class _TraceFile(msgspec.Struct):
    traceEvents: list[TraceEvent] = msgspec.field(default_factory=list)


class TraceReadError(ValueError):
    """The file is not a readable Chrome trace."""


# what reading a (possibly gzipped) file raises for a missing, unreadable, truncated or corrupt one
_READ_ERRORS = (OSError, EOFError, zlib.error)


def read_trace_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def wanted(ev: Any) -> bool:
    """The events the reports use: durations, flows, metadata and ``[memory]`` records."""
    return ev.ph in ("X", "s", "f", "t", "M") or ev.name == "[memory]"


def load_events(path: Path) -> list[Any]:
    """The trace's events (those ``wanted``): from ``{"traceEvents": [...]}`` or a bare JSON array."""
    from npuprof.analysis.trace_loader import TraceError, load_trace

    try:
        return load_trace(path, keep=wanted).events
    except TraceError as exc:
        if _starts_with_array(path):
            return [ev for ev in _load_events(path) if wanted(ev)]
        raise TraceReadError(str(exc)) from exc
    except OSError as exc:
        raise TraceReadError(f"cannot read {path}: {exc}") from exc


def _starts_with_array(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
        if head[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as unzipped:
                head = unzipped.read(4096)
    except _READ_ERRORS:
        return False
    return head.lstrip()[:1] == b"["


def _load_events(path: Path) -> list[TraceEvent]:
    try:
        data = read_trace_bytes(path)
    except _READ_ERRORS as exc:
        raise TraceReadError(f"cannot read {path}: {exc}") from None
    stripped = data.lstrip()
    try:
        if stripped[:1] == b"[":
            return msgspec.json.decode(data, type=list[TraceEvent])
        return msgspec.json.decode(data, type=_TraceFile).traceEvents
    except msgspec.DecodeError as exc:
        raise TraceReadError(f"{path} is not a Chrome trace (JSON with traceEvents): {exc}") from None
    except RecursionError:
        raise TraceReadError(f"{path}: JSON nested too deeply to read (corrupt trace)") from None


def process_names(events: list[Any]) -> dict[int | str | None, str]:
    """pid -> the name from the ``process_name`` metadata events."""
    names: dict[int | str | None, str] = {}
    for ev in events:
        if ev.ph == "M" and ev.name == "process_name":
            name = ev.args_dict().get("name")
            if isinstance(name, str):
                names[ev.pid] = name
    return names
