"""The user's marks and ranges (``npuprof.mark``, ``range_start``/``range_end``, ``npuprof.range``) and
``--msprof-tx``'s ``comm:`` ranges of one capture, written into trace_view.json as the ``MsprofTx`` layer
that torch_npu's file has for mstx data, and summed per step and name for `npuprof analyse`
(docs/formats.md, "Marks, communication ranges and GC in trace_view.json").

The user's marks and ranges are ``user_annotation`` spans of the raw trace, named by their message, like
any ``record_function``; ``npuprof_marks.json`` names them. The scan of the tables keeps no such span, so
they are read here, in a second pass that decodes only the events naming ``user_annotation`` (~0.1 s of
CPU per 128 MB of a synthetic CUDA trace, against ~2 s for the scan), and only for a capture that
recorded marks. The ``comm:`` ranges are not in the trace: the capture wrote them into
``npuprof_comm_ranges.json`` (epoch ns, docs/formats.md). A capture made before that file existed has
them as spans (``profiler_info``'s ``_msprof_tx`` says it made them): they are then read from its trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np

from npuprof.analysis.cells import ns_of
from npuprof.analysis.side_records import read_epoch_spans
from npuprof.analysis.step_breakdown import StepWindows
from npuprof.analysis.trace_body import epoch_texts
from npuprof.analysis.trace_loader import EventHead, TraceReader
from npuprof.analysis.vocabulary import USER_ANNOTATION
from npuprof.results import layout

MARKS_FILE = "npuprof_marks.json"  # written by the capture (agent/capture_annotations.py)
COMM_FILE = "npuprof_comm_ranges.json"  # agent/comm_marks.py
COMM_PREFIX = "comm:"  # agent/comm_marks.py
BLOCK = 256 << 10  # bytes of events read at a time
NEEDLE = USER_ANNOTATION.encode()
# CANN's msprof timeline (docs/formats.md, "Marks, communication ranges and GC in trace_view.json"): the
# MsprofTx layer has sort index 6, label CPU, and a layer's pid is (pid << 10) | (sort << 5) | device, the
# device bits of a host layer being 31
MSPROFTX_SORT = 6
HOST_DEVICE = 31
PID_SHIFT, SORT_SHIFT = 10, 5
FALLBACK_PID = 2_000_000_003  # a process whose id is no number (then no formula applies)
# mstx's event types and domains (same section)
EVENT_TYPE = {"mark": "marker", "range": "start/end", "comm": "start/end"}
DOMAIN = {"mark": "default", "range": "default", "comm": "communication"}


Count = Annotated[int, msgspec.Meta(ge=0, lt=1 << 62)]
EpochNs = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]


class CommRange(msgspec.Struct, kw_only=True, gc=False):
    name: str
    tid: int | str
    start_ns: EpochNs
    end_ns: EpochNs


class CommRecord(msgspec.Struct, kw_only=True):
    """``npuprof_comm_ranges.json``: the ``comm:`` ranges of a capture."""

    version: int
    pid: Count
    clock: str
    ranges: list[CommRange]
    dropped: Count = 0


_COMM_DECODER = msgspec.json.Decoder(CommRecord)


@dataclass
class Wanted:
    """What a capture recorded: the names of its marks and ranges (name -> ``mark`` or ``range``), to be
    found in its trace; whether its trace holds ``comm:`` spans (a capture made before
    ``npuprof_comm_ranges.json``); the ``comm:`` ranges of that file."""

    names: dict[str, str]
    comm: bool
    comm_ranges: CommRecord | None = None
    # the names the trace holds in another form (agent's marks._traced): the trace's -> the name called
    shown: dict[str, str] = field(default_factory=dict)
    # (name in the trace, epoch ns): ranges ended by a thread torch does not record (``ended_elsewhere``)
    ends: list[tuple[str, int]] = field(default_factory=list)

    @property
    def in_trace(self) -> bool:
        """Whether the trace has anything to read for this capture."""
        return bool(self.names) or self.comm


def wanted(rank_dir: Path, warn: Callable[[str], None]) -> Wanted | None:
    """What ``rank_dir``'s capture recorded; None when neither marks nor ``comm:`` ranges (nothing to read).
    A side file that cannot be read is named through ``warn`` and counts as absent."""
    names: dict[str, str] = {}
    shown: dict[str, str] = {}
    ends: list[tuple[str, int]] = []
    path = rank_dir / MARKS_FILE
    if path.is_file():
        try:
            value = json.loads(path.read_bytes())
            listed = value.get("names") if isinstance(value, dict) and value.get("version") == 1 else None
            if not isinstance(listed, dict):
                raise ValueError("not version 1 with a names object")
            names = {str(k): v for k, v in listed.items() if v in ("mark", "range")}
            called = value.get("shown")
            if isinstance(called, dict):
                shown = {k: v for k, v in called.items() if k in names and isinstance(v, str) and _text(v)}
            over = value.get("names_not_listed")
            if isinstance(over, int) and not isinstance(over, bool) and over > 0:
                warn(
                    f"{over} mark(s) and range(s) recorded under names past the first {len(names):,} of the "
                    "capture are not shown (their names were not listed: npuprof.marks.NAMES_LIMIT)"
                )
            elsewhere = value.get("ended_elsewhere")
            if isinstance(elsewhere, list):
                ends = [
                    (e["name"], e["end_ns"])
                    for e in elsewhere
                    if isinstance(e, dict)
                    and isinstance(e.get("name"), str)
                    and names.get(e["name"]) == "range"
                    and isinstance(e.get("end_ns"), int)
                    and not isinstance(e.get("end_ns"), bool)
                    and e["end_ns"] >= 0
                ]
            still_open = value.get("open_at_end")
            if isinstance(still_open, list) and still_open:
                still = ", ".join(repr(_cut(str(n))) for n in still_open[:5]) + (
                    " ..." if len(still_open) > 5 else ""
                )
                warn(
                    f"range(s) {still} still open when the capture ended (no range_end in it): torch ended "
                    "them with the capture, so their time runs to its end"
                )
        except (OSError, ValueError) as exc:
            warn(f"{MARKS_FILE} unreadable ({exc}): the user's marks and ranges are not shown")
    record: CommRecord | None = None
    comm_file = rank_dir / COMM_FILE
    if comm_file.is_file():
        try:
            record = _read_comm(comm_file)
        except ValueError as exc:
            warn(f"{exc}: the communication ranges are not shown")
        comm = False
    else:
        comm = any(_msprof_tx(info) for info in sorted(rank_dir.glob("profiler_info*.json")))
    return Wanted(names, comm, record, shown, ends) if names or comm or record is not None else None


def _cut(name: str, width: int = 80) -> str:
    """``name`` cut in its middle to ``width`` characters for a warning: a range named by a 1 MB string
    left open made a 1 MB warning line (the parse's, analyse's, npuprof_annotations.json's)."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head) :]


def _text(name: str) -> bool:
    """Whether ``name`` can be written as UTF-8 and printed on one line (the shown form of a name)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return name.isprintable()


def _read_comm(path: Path) -> CommRecord:
    return read_epoch_spans(path, _COMM_DECODER, "ranges", ValueError)


def _msprof_tx(info: Path) -> bool:
    try:
        value = layout.read_json_record(info)
        return value["config"]["experimental_config"]["_msprof_tx"] is True
    except (OSError, ValueError, KeyError, TypeError):
        return False


class _Annotation(EventHead, gc=False):
    """The fields of an event read here (``args`` and the rest are skipped)."""


_SPACE = b" \t\r\n"


class _Sieve:
    """A decoder for TraceReader that decodes only the events naming ``user_annotation`` of a block of
    events (``[{...},{...}]``): each is cut out at its event boundaries (``},{`` outside the event, as
    TraceReader cuts blocks) and the pieces decoded together; where a cut is unsure (a nested list of
    objects, a string holding ``},{``), the whole block is decoded. A block without one gives no events."""

    def __init__(self) -> None:
        self.decoder = msgspec.json.Decoder(list[_Annotation])

    def decode(self, text: bytes | bytearray) -> list[_Annotation]:
        at = text.find(NEEDLE)
        if at < 0:
            return []
        pieces = []
        while at >= 0:
            start, end = _event_start(text, at), _event_end(text, at)
            if start < 0 or end < 0:
                return self.decoder.decode(text)
            pieces.append(bytes(text[start:end]))
            at = text.find(NEEDLE, end)
        try:
            return self.decoder.decode(b"[" + b",".join(pieces) + b"]")
        except msgspec.DecodeError:  # a cut inside an event: the block as a whole (raises if it is bad)
            return self.decoder.decode(text)


def _prev(text: bytes | bytearray, i: int) -> int:
    while i >= 0 and text[i] in _SPACE:
        i -= 1
    return i


def _next(text: bytes | bytearray, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _event_start(text: bytes | bytearray, at: int) -> int:
    """The ``{`` that opens the event holding byte ``at``: one after ``[`` or after ``},``; -1 if none."""
    i = at
    while (i := text.rfind(b"{", 0, i)) >= 0:
        j = _prev(text, i - 1)
        if j >= 0 and (text[j] == 0x5B or (text[j] == 0x2C and _at(text, _prev(text, j - 1)) == 0x7D)):
            return i  # after "[" or "},"
    return -1


def _event_end(text: bytes | bytearray, at: int) -> int:
    """Just past the ``}`` that closes the event holding byte ``at``: one before ``,{`` or ``]``; -1."""
    i = at
    while (i := text.find(b"}", i)) >= 0:
        i += 1
        j = _next(text, i)
        if j < len(text) and (text[j] == 0x5D or (text[j] == 0x2C and _at(text, _next(text, j + 1)) == 0x7B)):
            return i  # before "]" or ",{"
    return -1


def _at(text: bytes | bytearray, i: int) -> int:
    return text[i] if 0 <= i < len(text) else -1


@dataclass
class Spans:
    """The marks and ranges found, in trace order: name, kind (``mark``, ``range``, ``comm``), process,
    thread, start (µs of the trace) and duration (ns)."""

    name: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    pid: list[Any] = field(default_factory=list)
    tid: list[Any] = field(default_factory=list)
    ts: list[float] = field(default_factory=list)
    dur_ns: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.name)


def read_spans(raw: Path, fd: int, want: Wanted) -> Spans:
    """The marks and ranges of the plain trace open at ``fd`` (``raw``: its name, for messages). Raises
    TraceError for a trace it cannot read."""
    found = Spans()
    if not want.in_trace:
        return found
    # (the scan has judged its damaged events: this decoder, which reads only some, could not)
    reader = TraceReader(raw, block=BLOCK, fd=fd, decoder=_Sieve(), judge=False)  # type: ignore[arg-type]
    names, comm, shown = want.names, want.comm, want.shown
    for chunk in reader:
        for ev in chunk.events:
            if ev.ph != "X" or ev.cat != USER_ANNOTATION:
                continue
            kind = names.get(ev.name) or ("comm" if comm and ev.name.startswith(COMM_PREFIX) else None)
            if kind is None:
                continue
            found.name.append(shown.get(ev.name, ev.name) if shown else ev.name)
            found.kind.append(kind)
            found.pid.append(ev.pid)
            found.tid.append(ev.tid)
            found.ts.append(float(ev.ts))
            found.dur_ns.append(ev.dur)  # as µs until converted below, in one go
    if len(found):
        found.dur_ns = ns_of(np.array(found.dur_ns, dtype=np.float64)).tolist()
    return found


def from_layer(mstx: list[tuple[str, Any, Any, float, float]]) -> Spans:
    """The marks and ranges of a trace's MsprofTx layer ((name, pid, tid, ts µs, dur µs) each, as CANN
    writes them: docs/formats.md), by start: a mark has no length; a ``comm:`` name, npuprof's
    communication range; any other, a range."""
    found = Spans()
    for name, pid, tid, ts, dur in sorted(mstx, key=lambda m: m[3]):
        found.name.append(name)
        found.kind.append("mark" if dur == 0 else "comm" if name.startswith(COMM_PREFIX) else "range")
        found.pid.append(pid)
        found.tid.append(tid)
        found.ts.append(ts)
        found.dur_ns.append(dur)
    if len(found):
        found.dur_ns = ns_of(np.array(found.dur_ns, dtype=np.float64)).tolist()
    return found


def with_comm_ranges(spans: Spans, record: CommRecord | None, base_ns: int) -> Spans:
    """``spans`` (read from the trace) and ``record``'s ``comm:`` ranges, in one list ordered by start
    (µs of the trace: epoch ns - ``base_ns``, over 1000); ``spans`` itself when there are none."""
    if record is None or not record.ranges:
        return spans
    columns = [list(column) for column in _columns(spans)]
    for r in record.ranges:
        for column, value in zip(
            columns,
            (r.name, "comm", record.pid, r.tid, (r.start_ns - base_ns) / 1000, r.end_ns - r.start_ns),
            strict=True,
        ):
            column.append(value)
    order = sorted(range(len(columns[0])), key=columns[4].__getitem__)  # stable: trace order at a tie
    return Spans(*([column[i] for i in order] for column in columns))


def with_ends(spans: Spans, want: Wanted, base_ns: int) -> Spans:
    """``spans`` with each range that ``want.ends`` says a thread torch does not record ended (its span
    running to the capture's end: torch never saw that end) ending there: of the spans of its name that
    hold that moment, the one that began first. helper-207: a range the training thread opened and a
    worker thread ended 20 ms later was 175 ms, to the capture's end, in analyse and trace_view.json."""
    if not want.ends or not len(spans):
        return spans
    by_name: dict[str, list[int]] = {}
    for i, (name, kind) in enumerate(zip(spans.name, spans.kind, strict=True)):
        if kind == "range":
            by_name.setdefault(name, []).append(i)
    dur = list(spans.dur_ns)
    for traced, end_ns in sorted(want.ends, key=lambda e: e[1]):
        at_ns = end_ns - base_ns  # ns of the trace
        held = [
            i
            for i in by_name.get(want.shown.get(traced, traced), ())
            if spans.ts[i] * 1000 <= at_ns < spans.ts[i] * 1000 + dur[i]
        ]
        if held:
            first = min(held, key=spans.ts.__getitem__)
            dur[first] = max(0, round(at_ns - spans.ts[first] * 1000))
    return Spans(spans.name, spans.kind, spans.pid, spans.tid, spans.ts, dur)


def _columns(spans: Spans) -> tuple[list[Any], ...]:
    return (spans.name, spans.kind, spans.pid, spans.tid, spans.ts, spans.dur_ns)


# ---- trace_view.json: the MsprofTx layer ------------------------------------------------------------
_ENC = msgspec.json.Encoder()


def layer_pid(pid: Any) -> int:
    """The pid CANN gives the MsprofTx layer of process ``pid``."""
    if isinstance(pid, int) and not isinstance(pid, bool) and 0 <= pid < 1 << 22:
        return (pid << PID_SHIFT) | (MSPROFTX_SORT << SORT_SHIFT) | HOST_DEVICE
    return FALLBACK_PID


def layer_events(spans: Spans, process_names: dict[Any, str], base_ns: int) -> list[bytes]:
    """The MsprofTx layer as CANN's msprof timeline writes mstx data (docs/formats.md), encoded: each
    mark or range an X event ``{"name", "pid", "tid", "ts", "dur",
    "ph", "args": {"event_type", "domain"}}`` (a mark: no length, ``marker``), then per process its
    ``process_name`` (the process's own name, as CANN's ``pid_name``), ``process_labels`` (CPU) and
    ``process_sort_index`` (6), and per thread ``Thread <tid>`` sorted by its id."""
    if not len(spans):
        return []
    starts = epoch_texts(ns_of(np.array(spans.ts, dtype=np.float64)) + base_ns)
    out: list[bytes] = []
    threads: dict[tuple[int, Any], None] = {}
    for name, kind, pid, tid, ts, dur in zip(
        spans.name, spans.kind, spans.pid, spans.tid, starts, spans.dur_ns, strict=True
    ):
        layer = layer_pid(pid)
        threads.setdefault((layer, tid))
        event = {
            "name": name,
            "pid": layer,
            "tid": tid,
            "ts": ts,
            "dur": 0.0 if kind == "mark" else dur / 1000,
            "ph": "X",
            "args": {"event_type": EVENT_TYPE[kind], "domain": DOMAIN[kind]},
        }
        out.append(_ENC.encode(event))
    for pid in dict.fromkeys(spans.pid):
        layer = layer_pid(pid)
        own = process_names.get(pid) or "MsprofTx"
        for kind, key, value in (
            ("process_name", "name", own),
            ("process_labels", "labels", "CPU"),
            ("process_sort_index", "sort_index", MSPROFTX_SORT),
        ):
            out.append(_meta(kind, layer, 0, key, value))
    for layer, tid in threads:
        out.append(_meta("thread_name", layer, tid, "name", f"Thread {tid}"))
        if isinstance(tid, int):
            out.append(_meta("thread_sort_index", layer, tid, "sort_index", tid))
    return out


def _meta(kind: str, pid: Any, tid: Any, key: str, value: Any) -> bytes:
    return _ENC.encode({"name": kind, "pid": pid, "tid": tid, "ph": "M", "args": {key: value}})


# ---- the report: per step and name --------------------------------------------------------------------
def per_step(spans: Spans, windows: StepWindows) -> list[dict[str, Any]]:
    """The ranges (marks left out: they have no length) summed per step and name, in order of first
    appearance: ``step`` (the step the range starts in; None outside every step), ``name``, ``kind``,
    ``count``, ``total_us`` and ``max_us`` (exact to the ns)."""
    keep = [i for i, kind in enumerate(spans.kind) if kind != "mark"]
    if not keep:
        return []
    where = windows.index_of(np.array([spans.ts[i] for i in keep], dtype=np.float64))
    labels = windows.labels()
    acc: dict[tuple[Any, str], list[Any]] = {}
    for i, w in zip(keep, where.tolist(), strict=True):
        key = (labels[w], spans.name[i])
        entry = acc.setdefault(key, [spans.kind[i], 0, 0, 0])
        dur = spans.dur_ns[i]
        entry[1] += 1
        entry[2] += dur
        entry[3] = max(entry[3], dur)
    return [
        {
            "step": step,
            "name": name,
            "kind": kind,
            "count": count,
            "total_us": total / 1000,
            "max_us": longest / 1000,
        }
        for (step, name), (kind, count, total, longest) in acc.items()
    ]
