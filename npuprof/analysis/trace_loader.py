"""Fast, memory-bounded reading of Chrome traces: Kineto's (``torch.profiler``) and torch_npu's.

Two forms, told apart by their content (never by the file's name; :func:`sniff_trace`): a JSON object whose
``traceEvents`` array holds the events (Kineto, ``export_chrome_trace``), and a bare JSON array of events
(torch_npu's ``trace_view.json``). Either may be gzipped. A trace holds millions of events; decoding it whole
costs several times the file size in memory, so this module streams it: the file (``.gz`` decompressed on
the fly) is read in blocks, each block is cut at an event boundary and decoded with msgspec into typed
:class:`Event` structs whose ``args`` stay undecoded (``msgspec.Raw``) until asked for.

Times: ``ts`` is a number of µs, or a string (torch_npu: epoch µs with nanosecond decimals,
``"1704161511420306.491"``, 19 digits, more than a float holds). A trace with string times is read relative to
an integer base ``B`` µs: the integer part of its first string ``ts`` that is a time (in the first
``BASE_WINDOW`` bytes of events) rounded down to a multiple of ``TS_BASE_STEP`` (10^12 µs, ~11.6 days, so the
ranks of one job share it). Each string ``ts`` becomes the float ``ts - B``, computed on the decimal text (the
base's leading digits dropped, never rounded through a float), so its nanoseconds are kept: offsets stay below
~2 * 10^12 µs, where a float resolves 0.25 ns and the shortest ``repr`` of an offset gives back the text's
decimals.
``B`` is in ``TraceReader.ts_base`` / ``Trace.ts_base`` and, when not 0, in
``meta["baseTimeNanoseconds"]`` (``B * 1000``) unless the trace has that key itself: the same meaning as
Kineto's key (``ts`` are µs after it), so every reader that adds Kineto's base to its times gets the file's
epoch times back. Numeric ``ts`` are read as they are (a trace mixing the two is taken to hold numbers
already relative to ``B``). The conversion is done on the decoded events (``ts`` is decoded as a float or
a string; strings are turned into floats a chunk at a time, in two msgspec calls), so it only works for
decoders whose events have a settable ``ts``; other decoders get the text as they asked for it.

Public API (stable):

* :func:`load_trace` -- ``load_trace(path, keep=None) -> Trace``: all events (or those ``keep`` accepts)
  and the top-level keys (``Trace.meta``: ``distributedInfo``, ``deviceProperties``,
  ``baseTimeNanoseconds``, ...; none for a bare array).
* :func:`sniff_trace` -- ``sniff_trace(path) -> "kineto" | "array" | None`` from the first KBs.
* :func:`iter_chunks` -- the streaming form: ``TraceChunk`` objects (decoded events plus the exact bytes they
  came from), then the metadata is available on the :class:`TraceReader`. Use it to process a trace of any
  size in bounded memory.
* :class:`Event` -- fields ``name, ph, cat, ts, dur, pid, tid, id, args``; ``Event.args_dict()`` decodes args.
* :class:`TraceError` -- raised for a missing, truncated or corrupt trace (the message says which and where).
  A trace cut short (its JSON never closes: a job killed while it wrote it) is read up to its last complete
  event instead, ``TraceReader.cut`` / ``Trace.cut`` saying where (analysis/trace_cut.py); one cut before
  its first event closes is "truncated: nothing to read".

``ts`` and ``dur`` are microseconds (floats): as in the file, or relative to ``ts_base`` (above).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import msgspec

from npuprof.analysis import torch_files
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.cells import json_string_text
from npuprof.analysis.damaged import LEAD, Damaged
from npuprof.analysis.gzip_members import MAGIC, GzipMembers, is_gzip
from npuprof.analysis.trace_cut import Cut, cut_in, is_cut_short, mended, value_ends
from npuprof.analysis.trace_cut import last_boundary as _last_boundary
from npuprof.analysis.trace_repairs import (
    NOT_A_NUMBER,
    repaired_names,
    repaired_strings,
    repaired_values,
)

__all__ = [
    "FORM_ARRAY",
    "FORM_KINETO",
    "Event",
    "Trace",
    "TraceChunk",
    "TraceError",
    "TraceReader",
    "iter_chunks",
    "load_trace",
    "sniff_trace",
]

DEFAULT_BLOCK = 16 << 20  # bytes of event text decoded at a time
EMPTY_RAW = msgspec.Raw(b"")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
# Two traces joined into one object ({"traceEvents": [...], ..., "traceEvents": [...]}: a merge by hand):
# Python's json keeps the last array alone; the reader read the first, the second kept as a key of meta (all
# of it, held in memory), or refused the trace as "undecodable events" (helper-351). Refused, said so.
SECOND_EVENTS_ARRAY = (
    "the events' array is followed by a second traceEvents key (two traces joined into one object?): "
    "keep one array of events"
)
_SECOND_EVENTS = re.compile(
    rb'\][ \t\r\n]*,[ \t\r\n]*"traceEvents"[ \t\r\n]*:'
)  # a second key, after the first
_ARRAY_KEY = re.compile(rb'"\s*:\s*\[')  # the end of a key whose value is an array
_HEAD_LIMIT = 64 << 20  # the traceEvents key must appear within this many bytes
_WS = b" \t\r\n"
# msgspec's syntax errors end in "(byte N)"; "trailing characters" is also how the end of the events array
# shows, so it does not count as a bad byte
# non-JSON numbers Python's json.dump writes for float nan and inf (a trace edited by a script); torch never
_NOT_JSON = {
    b"NaN": " (NaN: not a JSON number, as Python's json.dump writes a float nan)",
    b"Inf": " (Infinity: not a JSON number, as Python's json.dump writes a float inf)",
}
_MALFORMED_AT = re.compile(r"JSON is malformed: (?!trailing).*\(byte (\d+)\)$")
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")
GROWTH_LIMIT = 64 << 20  # bytes read at most at a time after an event larger than a block
_WINDOW = 4 << 20  # bytes read at a time when looking for an event boundary
_LOOKAHEAD = 1 << 16  # bytes after a "{" that must read as events for it to start one
_SNIPPET = 160  # characters of a bad event quoted in an error

FORM_KINETO = "kineto"  # {"traceEvents": [...], ...}
FORM_ARRAY = "array"  # [{...}, ...] (torch_npu's trace_view.json)
_BOM = b"\xef\xbb\xbf"
SNIFF_BYTES = 64 << 10  # what sniff_trace reads first
# keys Kineto writes before traceEvents: a JSON object starting with one of them may hold traceEvents after
# a large header (many devices, process groups), so sniff_trace reads on for it
_KINETO_HEAD_KEYS = re.compile(
    rb'^\{\s*"(?:traceEvents|schemaVersion|deviceProperties|distributedInfo|record_shapes|profile_memory|'
    rb"with_stack|with_flops|with_modules|displayTimeUnit|baseTimeNanoseconds|traceName|trace_id|"
    rb'cuda_runtime_version|cuda_driver_version|cupti_version|hip_runtime_version|roctracer_version)"'
)
_PH_KEY = re.compile(rb'"ph"\s*:')

# string times (see the module's doc)
TS_BASE_STEP = 10**12
BASE_TIME_KEY = "baseTimeNanoseconds"  # Kineto's: its ts are µs after this; set for string times too
BASE_WINDOW = 64 << 10  # the base comes from the first string ts in this many bytes of events
_FIRST_STRING_TS = re.compile(rb'"ts"\s*:\s*"(\s*-?\d+[^"\\]*)"')  # the text of a string ts
_LEADING_ZEROS = re.compile(rb"(^|,)0+(?=\d)")
_FLOATS = msgspec.json.Decoder(list[float])
_STICKY_FALLBACK = 4  # chunks in a row the decoder did not fit, after which the fallback is tried first
_RETRY_EVERY = 32  # ... and the decoder again every this many chunks (a later part of the trace may fit)


# A time (µs) beyond ~146 years from its clock's zero is no time a profiler wrote; bounding it keeps every sum
# and product of the tables finite (1e308 + 1e308 would be inf, which JSON cannot hold) and the tables' epoch
# nanoseconds within an int64 (docs/formats.md, "Damaged events"): a ts of 2**62 ns at most, plus Kineto's
# baseTimeNanoseconds (below 2**62: tables.base_ns_of), and a dur of 2**61 ns at most. helper-228: a ts of
# 9.3e15 µs was read (the bound was 1e18 µs) and written to kernel_details.csv as -9146744073709451.616,
# its nanoseconds wrapped past 2**63; a dur past 9.2e15 µs became 0 ns.
TIME_LIMIT = (1 << 62) / 1000  # µs, for a ts: 4.6e15, the year 2116 as an epoch time
DURATION_LIMIT = (1 << 61) / 1000  # µs, for a dur: 73 years
Time = Annotated[float, msgspec.Meta(ge=-DURATION_LIMIT, le=DURATION_LIMIT)]
# a ts as decoded: a number, or torch_npu's string (turned into a number by TraceReader before use)
TimeOrText = Annotated[float, msgspec.Meta(ge=-TIME_LIMIT, le=TIME_LIMIT)] | str
# A [memory] event's byte count (Bytes, Total Allocated, Total Reserved) beyond this either side of 0 is no
# allocator's (4 EiB): bounded so that the difference of two, a raw event's numbytes, is an int64, and so
# that analyse's figures are finite (helper-257: a Total Allocated of 1.5e300 was a peak of 1.4e294 MB)
BYTES_LIMIT = 1 << 62
Bytes = Annotated[float, msgspec.Meta(gt=-float(BYTES_LIMIT), lt=float(BYTES_LIMIT))]
# A complete event ending past TIME_LIMIT (its ts and dur each within bound, their sum not) is left out by
# every reader (docs/formats.md, "Damaged events"): its end plus Kineto's base passes an int64 of ns.
END_PROBLEM = f"its end (ts + dur) is beyond {TIME_LIMIT:.2g} µs"


def ends_past_limit(ts: Any, dur: float) -> bool:
    """Whether a complete event's end (``ts`` a number) is beyond TIME_LIMIT."""
    return isinstance(ts, float) and ts + dur > TIME_LIMIT


def described_event(event: Any) -> str:
    """An event as a damaged-event message quotes it: its name, category and ts."""
    cat = getattr(event, "cat", None) or type(event).__struct_config__.tag
    return f"{getattr(event, 'name', '')!r} (cat {cat!r}, ts {getattr(event, 'ts', None)!r})"


# The value of a ts or dur the event does not have: -0.0, equal to 0.0 in every sum and comparison (so
# nothing changes for a reader that does not ask), told apart by its sign (``no_time``). No profiler writes
# "-0" for a time.
NO_TIME = -0.0


def no_time(value: Any) -> bool:
    """Whether ``value`` is NO_TIME: the event had no such field."""
    return value == 0.0 and type(value) is float and math.copysign(1.0, value) < 0


class EventHead(msgspec.Struct, gc=False):
    """What every reader of events needs of one (the decoder skips the rest)."""

    name: str = ""
    ph: str = ""
    cat: str = ""
    ts: TimeOrText = NO_TIME
    dur: Time = NO_TIME
    pid: int | str = 0
    tid: int | str = 0


class ScanEvent(EventHead, gc=False):
    """The fields of an event the tables read; ``id`` pairs the two ends of a flow (torch_npu's
    ``async_npu`` launches, read by the tables)."""

    args: msgspec.Raw = EMPTY_RAW
    id: Any = None  # any JSON value: only an integer pairs flow ends


class Event(ScanEvent, gc=False):
    """One trace event. Missing fields take the defaults below; unknown fields are skipped."""

    id: int | str | None = None

    def args_dict(self) -> dict[str, Any]:
        """The event's ``args`` decoded (an empty dict when it has none, or when they are not valid JSON:
        ``args`` are only checked for their nesting while the trace is read)."""
        if not self.args:
            return {}
        try:
            value = msgspec.json.decode(self.args)
        except (msgspec.DecodeError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}


class TraceError(Exception):
    """The trace cannot be read: missing, truncated or corrupt. ``kind`` is one of those words."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:  # pickled back from a forked reader
        return (TraceError, (self.kind, str(self)))


class NotAnEventEnd(TraceError):
    """A byte range asked to end at an event's end (``TraceReader.iter_range``'s ``exact_end``) does not:
    its cut was guessed inside an event (a string holding ``{...}, {...}``: TraceReader.boundary_after)."""

    def __init__(self, message: str) -> None:
        super().__init__("corrupt", message)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (NotAnEventEnd, (str(self),))


class TraceVersion:
    """The trace file as a reader began to read it (its inode held open, its size and modification time),
    to tell at its end whether it was written meanwhile: a trace rewritten in place (torch's
    export_chrome_trace into the same path while `npuprof analyse` or `export-stacks` read it) gave tables
    of one version and a trace_view.json of another, reported and marked parsed. A rename over its path
    (npuprof's own writes) leaves the open file whole; the reader read that one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # never blocks: a FIFO planted under a trace's name is refused by the reader, not waited on here
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        self.began = self._stamp()

    def _stamp(self) -> tuple[int, int]:
        info = os.fstat(self.fd)
        return info.st_size, info.st_mtime_ns

    def still_the_same(self, what: str = "its tables") -> None:
        """Raise TraceError (kind ``changed``) when the file was written since; ``what`` was made of it."""
        if self._stamp() != self.began:
            raise TraceError(
                "changed",
                f"{self.path}: the trace was written while it was read (another process writes it): {what} "
                "would mix two versions: not kept; read it again once it is written",
            )

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class TraceChunk:
    """Consecutive events and the exact bytes (``text``: ``{...},{...}``) they were decoded from."""

    events: list[Event]
    text: memoryview


@dataclass
class Trace:
    """A loaded trace: ``events`` in file order, ``meta`` (the top-level keys other than traceEvents), its
    ``form`` (FORM_KINETO or FORM_ARRAY) and ``ts_base``."""

    path: Path
    events: list[Event]
    meta: dict[str, Any] = field(default_factory=dict)
    form: str = FORM_KINETO
    ts_base: int = 0  # µs to add to every ts for the absolute time (string times; see the module's doc)
    repaired_strings: int = 0  # characters read as U+FFFD / "?" (not_text_note)
    repaired_names: int = 0  # names with characters Kineto did not escape, read without them (unescaped_note)
    repaired_values: dict[str, int] = field(default_factory=dict)  # no JSON, by kind (unwritten_notes)
    gzip_note: str | None = None  # bytes after the gzip data that were left out (GzipMembers.ignored_note)
    damaged: Damaged = field(default_factory=Damaged)  # events of the wrong shape left out (Damaged.note)
    cut: Cut | None = None  # the trace is cut short: its complete events were read (trace_cut.Cut)
    events_read: int = 0  # every event read, ``keep`` or not

    @property
    def cut_note(self) -> str | None:
        """One line for the user when the trace is cut short; None when it is whole."""
        return self.cut.note(self.events_read) if self.cut is not None else None

    @property
    def rank(self) -> int | None:
        info = self.meta.get("distributedInfo")
        rank = info.get("rank") if isinstance(info, dict) else None
        return rank if isinstance(rank, int) else None


_DECODER = msgspec.json.Decoder(list[Event])
_TS = attrgetter("ts")
_ANY = msgspec.json.Decoder()
_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
TAIL_TRIES = 64  # "]"s after the events that could close their array, tried from the end of the file
FORWARD_LIMIT = 256 << 20  # events read forward whole to find their end, when the look back could not
_TRAILING_AT = re.compile(r"trailing characters \(byte (\d+)\)")


def _open(path: Path) -> BinaryIO:
    if not path.is_file():
        raise TraceError("missing", f"no trace file at {path}")
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == MAGIC:
        return GzipMembers(path, cut_ok=True)  # type: ignore[return-value]
    return open(path, "rb", buffering=0)


class _PreadFile:
    """A read-only view of a descriptor with its own offset (``os.pread``), safe to share across forks."""

    def __init__(self, fd: int, own: bool, keep: Any = None) -> None:
        self._fd, self._own, self._keep, self._pos = fd, own, keep, 0

    def fileno(self) -> int:
        return self._fd

    def seek(self, pos: int) -> None:
        self._pos = pos

    def read(self, size: int) -> bytes:
        data = os.pread(self._fd, size, self._pos)
        self._pos += len(data)
        return data

    def __enter__(self) -> _PreadFile:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._own and self._keep is not None:
            self._keep.close()


def _next_nonspace(buf: bytes | bytearray, start: int) -> int:
    n = len(buf)
    while start < n and buf[start] in _WS:
        start += 1
    return start


def _prev_nonspace(buf: bytes | bytearray, end: int) -> int:
    """Index of the last non-space byte before ``end`` (-1 when none)."""
    end -= 1
    while end >= 0 and buf[end] in _WS:
        end -= 1
    return end


class TraceReader:
    """Streams one trace file. Iterate it for :class:`TraceChunk` objects; ``meta`` is complete afterwards.

    ``block`` is the amount of event text decoded per chunk: memory use is a few times that, whatever the
    file size.
    """

    def __init__(
        self,
        path: str | Path,
        block: int = DEFAULT_BLOCK,
        fd: int | None = None,
        decoder: msgspec.json.Decoder | None = None,
        fallback: msgspec.json.Decoder | None = None,
        judge: bool = True,
    ) -> None:
        """``fd``: read the (plain) trace from this open descriptor instead of opening ``path``.
        ``decoder``: a msgspec decoder of a list of event structs (default: ``list[Event]``);
        ``fallback``: the decoder for chunks that are valid JSON but that ``decoder`` rejects;
        ``judge``: count the damaged events left out and refuse a trace made mostly of them (False for a
        decoder that reads only some events, which cannot tell: they are left out unsaid)."""
        self.path = Path(path)
        self.decoder = decoder or _DECODER
        self.fallback = fallback
        self.fd = fd
        self.block = block
        self.meta: dict[str, Any] = {}
        self.bytes_read = 0
        self.event_count = 0
        self.form: str | None = None  # FORM_KINETO or FORM_ARRAY, once the head is read
        # µs subtracted from string times (see the module's doc); None until the first events are seen
        self.ts_base: int | None = None
        self._lead = ""  # the base's leading digits, as text
        # chunks in a row that ``decoder`` did not fit (``fallback`` decoded them): after _STICKY_FALLBACK
        # of them (torch_npu's trace, whose device tasks have no category), ``fallback`` goes first
        self._misses = 0
        self._texts_kept = False  # the decoder's events keep ts as they were written: nothing to convert
        # where the last text that failed to decode stops being JSON (offset into that text), when known
        self.malformed_at: int | None = None
        self.malformed_what = ""  # what stands there, when it is a known non-JSON number
        self._events_at: int | None = None  # events_start()'s answer, once asked
        self.repaired_strings = 0  # unpaired surrogate escapes and bytes not UTF-8 read as "\ufffd" / "?"
        self.repaired_names = 0  # event names with a '"' or a control character Kineto wrote unescaped
        self.repaired_values: dict[
            str, int
        ] = {}  # values torch wrote that are no JSON, by kind (unwritten_notes)
        self.gzip_note: str | None = None  # bytes after a gzipped trace's data, left out (GzipMembers)
        self.judge = judge
        self.damaged = Damaged()  # events of the wrong shape left out (docs/formats.md, "Damaged events")
        self._from_first = False  # reading from the first event: the LEAD rule applies
        # the events of a chunk before the first this reader leaves out -> the first of them a later reader
        # of their args leaves out (the scan's tables: extract.first_unreadable), quoted first if any
        self.first_check: Callable[[list[Any]], str | None] | None = None
        # set to a list to have iter_range record each cut: (where the next chunk starts, bytes read then)
        self.cuts: list[tuple[int, int]] | None = None
        self.cut: Cut | None = None  # the trace is cut short: where (its events are read up to there)
        # a stream's last ts read, up to its last chunk yielded, and its event's part (_last_progress_of)
        self._last_progress: tuple[float | None, str] = (None, "")
        self._growing = False  # the last _split found no event's end: the buffer grows over one event

    def _read(self, handle: BinaryIO, size: int) -> bytes:
        try:
            data = handle.read(size)
        except (EOFError, zlib.error, OSError) as exc:
            # a read takes a block of MB: the byte reached says little, an early end says what is wrong
            where = f" after {self.bytes_read} bytes" if self.bytes_read else ""
            raise TraceError(
                "truncated" if isinstance(exc, EOFError) else "corrupt",
                f"{self.path}: the compressed trace ends early{where} (truncated file?): {exc}"
                if isinstance(exc, EOFError)
                else f"{self.path}: cannot read the trace{where}: {exc}",
            ) from exc
        self.bytes_read += len(data)
        return data

    def _head(self, handle: BinaryIO) -> bytearray:
        """Read up to the opening bracket of the events (traceEvents' array, or the bare array itself);
        parse the keys before it; return what follows."""
        buf = bytearray()
        while True:
            data = self._read(handle, 1 << 20)
            searched = max(0, len(buf) - 4096)
            buf += data
            if searched == 0 and (wide := _wide_text(bytes(buf[:64]))) is not None:
                raise TraceError("corrupt", f"{self.path}: {wide}")
            first = _next_nonspace(buf, len(_BOM) if buf.startswith(_BOM) else 0)
            if first < len(buf) and buf[first] == 0x5B:  # "[": torch_npu's bare array of events
                if (what := torch_files.describe(bytes(buf[first : first + 4096]))) is not None:
                    raise TraceError("corrupt", f"{self.path}: {what}")
                self.form = FORM_ARRAY
                return buf[first + 1 :]
            if first < len(buf) and buf[first] != 0x7B:  # "{"
                what = torch_files.describe_at(self.path, bytes(buf[first : first + 4096])) or (
                    "not a JSON object or array, not a Chrome trace (an object with traceEvents, or an array "
                    "of events)"
                )
                raise TraceError("corrupt", f"{self.path}: {what}")
            match = _EVENTS_KEY.search(buf, searched)
            if match:
                break
            if not data and not buf.removeprefix(_BOM).strip():
                what = "is empty (0 bytes)" if not buf else "holds only white space"
                raise TraceError(
                    "truncated", f"{self.path}: it {what}: no events (a trace whose writing failed?)"
                )
            if not data or len(buf) > _HEAD_LIMIT:
                kind = "corrupt" if buf.strip() else "truncated"
                what = torch_files.describe_at(self.path, bytes(buf[:4096]))
                raise TraceError(
                    kind, f"{self.path}: {what or 'no traceEvents array found (not a Chrome trace?)'}"
                )
        self.form = FORM_KINETO
        head = bytes(buf[: match.start()]).removeprefix(_BOM).strip()
        if not head.startswith(b"{"):
            raise TraceError("corrupt", f"{self.path}: the trace does not start with a JSON object")
        head = head.rstrip(b",").rstrip()
        if head != b"{":
            self.meta.update(self._decode_object(head + b"}", "the keys before traceEvents"))
        return buf[match.end() :]

    def _decode_object(self, text: bytes, what: str) -> dict[str, Any]:
        try:
            try:
                value = _ANY.decode(text)
            except msgspec.DecodeError:
                repaired = repaired_strings(text)  # a host name or path of bytes that are not UTF-8
                text = bytes(repaired[0]) if repaired else text
                try:
                    value = _ANY.decode(text)
                except msgspec.DecodeError:
                    # a number beyond a double (baseTimeNanoseconds 1e400, helper-123): Python's json reads
                    # it as inf, which the readers of these keys refuse, each with its own warning
                    value = json.loads(text)
        except (msgspec.DecodeError, ValueError, RecursionError) as exc:
            raise TraceError("corrupt", f"{self.path}: cannot decode {what}: {exc}") from None
        if not isinstance(value, dict):
            raise TraceError("corrupt", f"{self.path}: {what} is not a JSON object")
        return value

    def _decode(self, text: memoryview) -> tuple[list[Event], memoryview] | None:
        """Decode ``{...},{...}`` (text that starts at an event); return the events and the text (a view of
        the buffer the events' ``args`` point into), or None when the text is not JSON (then
        ``malformed_at`` says where it stops being JSON, when it does). JSON that is not events, or nests
        too deeply to read, is a corrupt trace: TraceError."""
        framed = bytearray(b"[")
        framed += text
        framed += b"]"
        events = self._events_of(framed)
        if events is None:
            repaired = repaired_strings(framed)
            valued = repaired_values(repaired[0] if repaired else framed)
            named = repaired_names(valued[0] if valued else repaired[0] if repaired else framed)
            if repaired is None and named is None and valued is None:
                left = self._undecodable(framed)
                if left is None:
                    return None
                events, framed = left
            else:
                text = named[0] if named else valued[0] if valued else repaired[0] if repaired else framed
                events = self._events_of(text)
                if events is None:  # not JSON for another reason: said where that is (the same length)
                    left = self._undecodable(text)
                    if left is None:
                        return None
                    events, text = left
                framed = text
            self.repaired_strings += repaired[1] if repaired else 0
            self.repaired_names += named[1] if named else 0
            for kind, count in valued[1].items() if valued else ():
                self.repaired_values[kind] = self.repaired_values.get(kind, 0) + count
        if not self._texts_kept:
            try:
                self._times(events)
            except _NoTime:  # a string ts that is no time ("soon"): that event is damaged, left out
                events, framed = self._without_damaged(_RAW_EVENTS.decode(framed), times=True)
                # the rest as any chunk: those left may hold no string time at all (helper-197: then
                # _string_times took this decoder for one that keeps ts as written, and every later
                # chunk's string times stayed text)
                self._times(events)
        return events, memoryview(framed)[1:-1]

    def _times(self, events: list[Any]) -> None:
        """The times of a chunk's events made numbers (string times) or moved to ``ts_base`` (numbers in a
        trace of string times). Raises _NoTime for a string ts that is no time."""
        try:
            sum(map(_TS, events))  # C speed; a string time (or a ts that is no number) stops it
        except (TypeError, AttributeError):
            self._string_times(events)
        else:
            if self.ts_base and events and max(map(_TS, events)) >= self.ts_base:
                self._rebase_numbers(events, range(len(events)))

    def _events_of(self, framed: bytearray) -> list[Any] | None:
        """The events of ``[...]``, by the decoder or the fallback; None when it is not JSON they read."""
        try:
            try:
                if self._misses >= _STICKY_FALLBACK and self._misses % _RETRY_EVERY:
                    raise msgspec.ValidationError  # the decoder rarely fits here: the fallback (retried)
                events = self.decoder.decode(framed)
                self._misses = 0
            except msgspec.ValidationError:
                if self.fallback is None:
                    return None
                self._misses += 1
                try:
                    events = self.fallback.decode(framed)
                except msgspec.DecodeError:
                    return None
            except msgspec.DecodeError:
                return None
        except RecursionError:  # wherever such a trace is cut, it cannot be read
            raise TraceError(
                "corrupt", f"{self.path}: JSON nested too deeply to read (corrupt trace)"
            ) from None
        return events

    def _rebase_numbers(self, events: list[Any], where: Iterable[int]) -> None:
        """A trace whose times are strings of epoch µs (its ts are offsets from ``ts_base``) with some written
        as numbers (a trace merged or edited by hand): those numbers are epoch µs too, moved the same way
        (left as they were, each step read 100% free)."""
        base = self.ts_base
        try:
            for i in where:
                ts = events[i].ts
                if type(ts) in (int, float) and ts >= base:
                    events[i].ts = ts - base
        except (AttributeError, TypeError):  # frozen structs: the decoder's own business
            self._texts_kept = True

    def _string_times(self, events: list[Any]) -> None:
        """Replace each string ``ts`` of ``events`` by its number (relative to ``ts_base``)."""
        try:
            values = list(map(_TS, events))
        except AttributeError:  # this decoder's events have no ts
            self._texts_kept = True
            return
        kinds = set(map(type, values))
        if str not in kinds:  # this decoder keeps ts as written (msgspec.Raw, ...): leave them
            self._texts_kept = True
            return
        at: list[int] | None = None  # every event, when all ts are strings (the rule in torch_npu's trace)
        texts = values
        if len(kinds) > 1:
            at = [i for i, v in enumerate(values) if type(v) is str]
            texts = [values[i] for i in at]
            if self.ts_base:
                strings = set(at)
                self._rebase_numbers(events, (i for i in range(len(values)) if i not in strings))
        numbers = self._numbers(texts)
        if numbers is None:
            where = range(len(texts)) if at is None else at
            numbers = [self._number(text, events[i]) for i, text in zip(where, texts, strict=True)]
        try:
            if at is None:
                list(map(setattr, events, repeat("ts"), numbers))
            else:
                for i, number in zip(at, numbers, strict=True):
                    events[i].ts = number
        except (AttributeError, TypeError):  # frozen structs: the decoder's own business
            self._texts_kept = True

    def _numbers(self, texts: list[str]) -> list[float] | None:
        """``texts`` as offsets from ``ts_base``, in two msgspec decodes: the whole values (checking the
        syntax, rounded) and the values without the base's leading digits (exact); None when a text is not
        a plain decimal within [B, B + TS_BASE_STEP) (then each goes through Decimal)."""
        joined = ",".join(texts)
        base = self.ts_base or 0
        if base and self._fixed_width(texts, joined):  # drop the base's digits at each text's start
            cut = ("," + joined).replace("," + self._lead, ",")[1:]
            return self._offsets(cut.encode(), len(texts))
        try:
            whole = _FLOATS.decode(b"[" + joined.encode() + b"]")
        except (msgspec.DecodeError, UnicodeEncodeError):
            return None
        if len(whole) != len(texts):  # a text held a comma
            return None
        if not base:  # a time beyond TIME_LIMIT, as a number is (helper-197: "1e300" was read as one)
            return whole if whole and min(whole) >= -TIME_LIMIT and max(whole) <= TIME_LIMIT else None
        # within [B, B + step) a plain decimal is the base's digits and 12 more: dropping the former is
        # exact; an exponent, or a text the rounding of "whole" let in, fails one of the range checks
        if "e" in joined or "E" in joined or min(whole) < base or max(whole) >= base + TS_BASE_STEP:
            return None
        if not self._lead:
            self._lead = str(base // TS_BASE_STEP)
        cut = ("," + joined).replace("," + self._lead, ",")[1:].encode()
        return self._offsets(cut, len(texts))

    def _fixed_width(self, texts: list[str], joined: str) -> bool:
        """Are all texts of torch_npu's one layout, checked on the joined text by C-level slicing: the same
        length, the base's digits then 12 more, a "." and decimals (the decimals' syntax is msgspec's)?"""
        if not self._lead:
            self._lead = str(self.ts_base // TS_BASE_STEP)
        width, dot = len(texts[0]), len(self._lead) + 12
        n = len(texts)
        return (
            width > dot + 1
            and len(joined) == n * (width + 1) - 1
            and joined[width :: width + 1] == "," * (n - 1)
            and joined[dot :: width + 1] == "." * n
            and ("," + joined).count("," + self._lead) == n
            and "e" not in joined
            and "E" not in joined
            and "-" not in joined
            and "+" not in joined
        )

    def _offsets(self, cut: bytes, n: int) -> list[float] | None:
        """The numbers of ``cut`` (texts without the base's digits, joined by ","), each in [0, step)."""
        if b",0" in cut or cut.startswith(b"0"):
            cut = _LEADING_ZEROS.sub(rb"\1", cut)
        try:
            offsets = _FLOATS.decode(b"[" + cut + b"]")
        except msgspec.DecodeError:
            return None
        if len(offsets) != n or min(offsets) < 0 or max(offsets) >= TS_BASE_STEP:
            return None
        return offsets

    def _number(self, text: str, event: Any) -> float:
        value = _decimal(text.encode("utf-8", "replace"))
        if value is None:
            raise _NoTime(text)
        return float(value - (self.ts_base or 0))

    def _set_base(self, window: bytes | bytearray) -> None:
        """The base of string times, from the first string ts in ``window`` (the first BASE_WINDOW bytes
        of events) that is a time (helper-197: a damaged first event's "1e400" made it 0, losing every other
        time's nanoseconds; a 70-digit one made it 10^69); 0 when there is none, or when it is below
        TS_BASE_STEP. Its integer part is the number's, not the digits before a "." (helper-351: a string
        "1.704161511420306491e15" made the base 0: every time was rounded through a double, 174 ns off)."""
        first = 0
        for found in _FIRST_STRING_TS.finditer(window):
            value = _decimal(found.group(1))
            if value is not None:
                first = int(value)
                break
        self.ts_base = first // TS_BASE_STEP * TS_BASE_STEP if first >= TS_BASE_STEP else 0
        if self.ts_base:
            self.meta.setdefault(BASE_TIME_KEY, self.ts_base * 1000)

    def _undecodable(self, framed: bytearray) -> tuple[list[Any], bytearray] | None:
        """Why ``[text]`` did not decode: JSON that stops at a byte (``malformed_at``; a text cut inside an
        event stops at its end: None), or events of the wrong shape, left out (:meth:`_without_damaged`)."""
        self.malformed_at = None
        try:
            raws = _RAW_EVENTS.decode(framed)
        except RecursionError:  # as in _events_of (helper-129: a traceback here, from a bare array of arrays)
            raise TraceError(
                "corrupt", f"{self.path}: JSON nested too deeply to read (corrupt trace)"
            ) from None
        except msgspec.DecodeError as exc:
            found = _MALFORMED_AT.search(str(exc))
            if found:
                self.malformed_at = int(found.group(1)) - 1  # "[" was added in front
                at = self.malformed_at + 1
                self.malformed_what = _NOT_JSON.get(bytes(framed[at : at + 9]).lstrip(b"-")[:3], "")
            return None
        # a string ts that is no time is damage too, in the same pass: those before the first other damage
        # are quoted first, and the scan's check of the events before it (first_check) never sees one
        # (helper-197: its "soon" raised "could not convert string to float", a traceback)
        return self._without_damaged(raws, times=True)

    def _without_damaged(self, raws: list[msgspec.Raw], times: bool = False) -> tuple[list[Any], bytearray]:
        """JSON values some of which are no events this reader reads (a number, a ``dur`` that is a string:
        damage): those left out, counted in ``damaged`` (docs/formats.md, "Damaged events"), the others
        decoded together; (events, their text framed in ``[]``). ``times``: a string ``ts`` that is no
        decimal number is damage too. Reading from the first event, the trace is refused (TraceError) once
        the events left out outnumber those read by ``damaged.LEAD``."""
        decoder = self.fallback or self.decoder
        good: list[bytes] = []
        for raw in raws:
            one = bytes(raw)
            try:
                (event,) = decoder.decode(b"[" + one + b"]")
                if times and _no_time(event):
                    raise msgspec.ValidationError(_NO_TIME)
            except msgspec.DecodeError as exc:
                if not self.judge:
                    continue
                if not self.damaged.first and self.first_check is not None and good:
                    # (counted when that reader leaves it out: here only which comes first)
                    self.damaged.first = self.first_check(decoder.decode(b"[" + b",".join(good) + b"]")) or ""
                self.damaged.add(_problem(exc, one), _bad_event(one, exc))
                self._note_damaged_fetch(one)
                read = self.event_count + len(good)
                if self._from_first and self.damaged.total > read + LEAD:
                    raise TraceError(
                        "corrupt", f"{self.path}: {self.damaged.refusal(read, early=True)}"
                    ) from None
                continue
            good.append(one)
        framed = bytearray(b"[" + b",".join(good) + b"]")
        return decoder.decode(framed), framed

    def _note_damaged_fetch(self, raw: bytes) -> None:
        """A damaged event that is a DataLoader fetch (a ``dur`` of NaN, say) is kept in ``damaged.fetches``
        with its start where it can be read: its step's data time is not known."""
        if not raw.lstrip().startswith(b"{") or vocab.DATA_FETCH_PREFIX.encode() not in raw:
            return  # the usual damage: decoded no further
        try:
            event = _ANY.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return
        name = event.get("name") if isinstance(event, dict) else None
        if not isinstance(name, str) or not vocab.is_data_fetch(name):
            return
        self.damaged.fetches.append((self._start_of(event.get("ts")), event.get("pid"), event.get("tid")))

    def _start_of(self, ts: Any) -> float | None:
        """A damaged event's ``ts`` as the events read have theirs (relative to ``ts_base``); None when it
        is no time."""
        if isinstance(ts, str):
            value = _decimal(ts.encode("utf-8", "replace"))
            return None if value is None else float(value - (self.ts_base or 0))
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            return None
        base = self.ts_base or 0
        return float(ts - base) if base and ts >= base else float(ts)

    def refuse_if_damaged(self) -> None:
        """Raise TraceError when more than half of the events read were left out as damaged."""
        message = self.damaged.refused(self.event_count) if self.judge else None
        if message is not None:
            raise TraceError("corrupt", f"{self.path}: {message}")

    def _split(self, buf: bytearray, limit: int) -> tuple[int, list[Event], memoryview] | None:
        """Find the last event boundary ``},{`` in ``buf`` (which starts at an event) that yields a
        decodable chunk; return (index just after its ``}``, events). None when no boundary works yet;
        TraceError when none ever will (the first event is not JSON, or not an event)."""
        end = len(buf)
        tries = 0
        bad: int | None = None  # a byte where the text stops being JSON: no boundary after it can work
        what = ""  # what stands there, when it is a known non-JSON number (NaN, Infinity)
        inside = self._growing  # in an event larger than a block: each "},{" looked at first (_cut_inside)
        while tries < limit:
            close = _last_boundary(buf, end)
            if close < 0:
                if bad is not None:
                    where = self.bytes_read - len(buf) + bad
                    raise TraceError(
                        "corrupt", f"{self.path}: malformed JSON at byte {where}{what} (corrupt trace)"
                    )
                self._growing = True
                return None
            tries += 1
            cut_inside = inside and self._cut_inside(buf, close)
            decoded = None if cut_inside else self._decode(memoryview(buf)[: close + 1])
            if decoded is not None:
                self._growing = False
                return close + 1, *decoded
            if self.malformed_at is not None and self.malformed_at < close:
                bad, what = self.malformed_at, self.malformed_what
                end = bad
                continue
            inside = self.malformed_at is None  # JSON cut short there: perhaps in a string of "{}, {}, ..."
            end = close
        self._growing = True
        return None

    def _cut_inside(self, buf: bytearray, close: int) -> bool:
        """Whether the events of ``buf`` up to ``close`` are JSON that does not close there: a "},{" inside an
        event (a string of "{}, {}, ..."), which :meth:`_decode` would refuse as it does, after its
        repairs of the whole text (they mend only what JSON refuses: none here). One pass of the decoder,
        where the repairs took several: a string of megabytes that holds JSON with escaped quotes took
        16 s to read, its repairs' regexes going over all of the text read at each "},{" tried. Asked only
        in an event larger than a block (a chunk's first "},{" closes an event: one decode, as before)."""
        try:
            _RAW_EVENTS.decode(b"[" + buf[: close + 1] + b"]")
        except msgspec.DecodeError as exc:
            if str(exc) == "Input data was truncated":
                self.malformed_at = None  # as _decode leaves it: the text stops being JSON nowhere
                return True
        except RecursionError:
            pass
        return False

    def _more(self, handle: BinaryIO, buf: bytearray, limit: int) -> bytes:
        """The bytes read after ``buf`` when no event of it ends in it (an event larger than a block): as
        many again as it holds (up to GROWTH_LIMIT), so that an event of megabytes is looked at a few times,
        not once per block (each look is a pass over all of ``buf``)."""
        return self._read(handle, min(max(self.block, min(len(buf), GROWTH_LIMIT)), limit))

    def _finish(self, buf: bytearray) -> tuple[int, list[Event], memoryview]:
        """At end of a stream: find the array's closing bracket (the rest must be the trailing keys)."""
        end = len(buf)
        tries = 0
        while tries < TAIL_TRIES:
            bracket = buf.rfind(b"]", 0, end)
            if bracket < 0:
                break
            if not self._may_close_events(buf, bracket):
                end = bracket
                continue
            tries += 1
            value = (
                None if _closes_before_the_end(buf, bracket) else self._tail_value(bytes(buf[bracket + 1 :]))
            )
            comma = _trailing_key_before(buf, bracket) if value is not None else None
            if comma is not None:  # "samples": [] after the events: their array ends before it
                end = comma
                continue
            if value is not None:
                self.meta.update(value)
                last = _prev_nonspace(buf, bracket)
                if last < 0:
                    return 0, [], memoryview(b"")
                decoded = self._decode(memoryview(buf)[: last + 1])
                if decoded is None:
                    decoded, last = self._events_read_forward(buf)
                if decoded is None and cut_in(bytes(buf).rstrip(b"\0"), self.form == FORM_KINETO):
                    return self._cut_short(buf)  # that "]" was a list's in the args of the event cut
                if decoded is None:
                    raise TraceError(
                        "corrupt",
                        f"{self.path}: undecodable events before byte {self.bytes_read}"
                        f"{self._malformed_where(len(buf), buf)} (corrupt trace)",
                    )
                return last + 1, *decoded
            end = bracket
        decoded, last = self._events_read_forward(buf)  # keys after the events too long to look back over
        if decoded is not None:
            return last + 1, *decoded
        return self._cut_short(buf)

    def _cut_short(self, buf: bytearray) -> tuple[int, list[Event], memoryview]:
        """At the end of a stream whose JSON does not close: the complete events of ``buf`` (which starts
        at an event) when the trace is cut short (``cut``); else TraceError, as it is not."""
        text = bytes(buf).rstrip(b"\0")
        found = cut_in(text, self.form == FORM_KINETO)
        if found is None:
            raise TraceError("truncated", _unclosed(self.path, self.bytes_read, buf))
        end, in_keys = found
        if not end and not self.event_count:
            raise TraceError("truncated", _nothing_read(self.path, self.bytes_read))
        decoded = self._decode(memoryview(buf)[:end]) if end else ([], memoryview(b""))
        if decoded is None:
            raise TraceError(
                "corrupt",
                f"{self.path}: undecodable events before byte {self.bytes_read}"
                f"{self._malformed_where(len(buf), buf)} (corrupt trace)",
            )
        last_ts, part = _last_progress_of(decoded[0], self._last_progress)
        self.cut = Cut(
            self.bytes_read,
            self.bytes_read - len(buf) + end,
            in_keys,
            last_ts,
            len(buf) - len(text),
            self._base_lost(last_ts),
            part if self.form == FORM_KINETO else "",
        )
        return end, *decoded

    def _base_lost(self, last_ts: float | None) -> bool:
        """Whether the cut took the Kineto trace's baseTimeNanoseconds with the keys after its events (torch
        releases that write it last): none before its events, and times that are no epoch µs (before 1973)."""
        return (
            self.form == FORM_KINETO
            and BASE_TIME_KEY not in self.meta
            and last_ts is not None
            and abs(last_ts) < _EPOCH_US
        )

    def _may_close_events(self, buf: bytes | bytearray, bracket: int) -> bool:
        """Whether the "]" at ``bracket`` may close the events' array, by the byte after it: a bare array
        ends the file; in an object a "," (more keys) or the object's "}" follows. Any other "]" (one in a
        string after the events, an array nested in a key's value) is passed over without a decode."""
        after = _next_nonspace(buf, bracket + 1)
        if self.form == FORM_ARRAY:
            return after >= len(buf) or buf[after] == 0
        return after < len(buf) and buf[after] in (0x2C, 0x7D)  # "," or "}"

    def _events_read_forward(self, buf: bytearray) -> tuple[tuple[list[Event], memoryview] | None, int]:
        """The events of ``buf`` (which starts at one) up to the "]" that closes their array, found by
        reading forward: keys after the events too long for the look back from the end (Chrome's
        ``"samples"`` of a long recording) end there. Their keys fill ``meta``. (None, -1) when no such
        "]" reads so; then ``malformed_at`` is left as it was, for the error that names it."""
        malformed_at = self.malformed_at
        decoded, last = self._forward(buf)
        if decoded is None:
            self.malformed_at = malformed_at
        return decoded, last

    def _forward(self, buf: bytearray) -> tuple[tuple[list[Event], memoryview] | None, int]:
        closed = self._closing_read_forward(buf)
        if closed is None or closed[0] < 0:
            return None, -1
        last, value = closed
        decoded = self._decode(memoryview(buf)[: last + 1])
        if decoded is not None:
            self.meta.update(value)
        return decoded, last

    def _closing_read_forward(self, buf: bytes | bytearray) -> tuple[int, dict[str, Any]] | None:
        """``buf`` starting at the first event: the end of its last event (-1: none), and the keys after the
        "]" that closes their array, found by reading the events forward as raw text (not decoded); None
        when no "]" reads so."""
        try:
            _RAW_EVENTS.decode(b"[" + bytes(buf))
            return None  # the events' "[" closes where the text ends: no "]" of their own
        except msgspec.DecodeError as exc:
            found = _TRAILING_AT.search(str(exc))
        except RecursionError:
            return None
        if found is None:
            return None
        bracket = buf.rfind(b"]", 0, int(found.group(1)))  # the byte said, in "[" + buf, is at or after it
        value = self._tail_value(bytes(buf[bracket + 1 :])) if bracket >= 0 and buf[bracket] == 0x5D else None
        if value is not None and "traceEvents" in value:  # keys after the events holding another array
            raise TraceError("corrupt", f"{self.path}: {SECOND_EVENTS_ARRAY}")
        # the end of the last event: -1 for an empty array
        return (_prev_nonspace(buf, bracket), value) if value is not None else None

    def _tail(self, handle: BinaryIO, size: int) -> int:
        """Plain files: parse the keys after traceEvents from the file's end; return the offset just past
        the last event (before the closing bracket)."""
        span = min(size, 1 << 20)
        handle.seek(size - span)
        buf = bytearray(handle.read(span))
        end = len(buf)
        tries = 0
        while tries < TAIL_TRIES:
            bracket = buf.rfind(b"]", 0, end)
            if bracket < 0:
                break
            if not self._may_close_events(buf, bracket):
                end = bracket
                continue
            tries += 1
            value = self._tail_value(bytes(buf[bracket + 1 :]))
            comma = _trailing_key_before(buf, bracket) if value is not None else None
            if comma is not None:  # "samples": [] after the events: their array ends before it
                end = comma
                continue
            if value is not None and self._closes_events(buf, bracket, size - span):
                self.meta.update(value)
                return size - span + _prev_nonspace(buf, bracket) + 1
            end = bracket
        found = self._end_read_forward(handle, size)  # keys after the events longer than the look back
        if found is not None:
            return found
        found = self._cut_end(handle, size)
        if found is not None:
            return found
        raise TraceError("truncated", _unclosed(self.path, size, buf))

    def _closes_events(self, buf: bytearray, bracket: int, low: int) -> bool:
        """Whether the "]" at ``bracket`` of ``buf`` (a plain file's last bytes, from ``low``) may close the
        events' array: not when the events from one that starts in ``buf`` are still open there (a trace
        cut short right after a list in an event's args, ``"Input Dims": [[32, 64]]``, whose "]" looks like
        the array's end from after it). True when no event starts in ``buf`` (one longer than it)."""
        start = self._events_at if self._events_at is not None else self.events_start()
        at = start - low if start >= low else next(_event_starts(bytes(buf[:bracket])), None)
        return at is None or not is_cut_short(b"[" + bytes(buf[at : bracket + 1]))

    def _cut_end(self, handle: BinaryIO, size: int) -> int | None:
        """Plain files whose JSON does not close: the end of the last complete event when the trace is cut
        short (``cut``; docs/formats.md, "Traces cut short"), found from the file's end back, a window at
        a time; None when it is not cut short. TraceError when no event is complete."""
        start = self._events_at if self._events_at is not None else self.events_start()
        span = CUT_WINDOW
        while True:
            low = max(start, size - span)
            handle.seek(low)
            window = handle.read(size - low)
            text = window.rstrip(b"\0")
            for at in [0] if low == start else _event_starts(text):
                found = cut_in(text[at:], self.form == FORM_KINETO)
                if found is None:
                    continue
                end, in_keys = found
                if not end and low > start:
                    break  # the event the cut went through is longer than the window
                if not end:
                    raise TraceError("truncated", _nothing_read(self.path, size))
                last_ts, part = self._last_time(text[at : at + end])
                nuls = len(window) - len(text)
                part = part if self.form == FORM_KINETO else ""
                self.cut = Cut(size, low + at + end, in_keys, last_ts, nuls, self._base_lost(last_ts), part)
                return low + at + end
            if low == start or span >= CUT_LIMIT:
                return None
            span *= 4

    def _last_time(self, events: bytes) -> tuple[float | None, str]:
        """The ``ts`` of the last of ``events`` (complete events, "," between them) that has one and tells how
        far the writer had got (:func:`_tells_progress`), as the reader gives times (relative to ``ts_base``),
        and its part (:func:`after_operators`); (None, "") where none has.
        Events the reader mends (a NaN arg a script wrote, bytes
        that are not UTF-8) are read mended: else one of them anywhere in ``events`` hid every time."""
        framed = b"[" + events + b"]"
        try:
            raws = _RAW_EVENTS.decode(framed)
        except (msgspec.DecodeError, RecursionError):
            try:
                raws = _RAW_EVENTS.decode(mended(framed))
            except (msgspec.DecodeError, RecursionError):
                return None, ""
        for raw in reversed(raws[-4096:]):
            try:
                event = _ANY.decode(raw)
            except (msgspec.DecodeError, RecursionError):
                continue
            if not isinstance(event, dict) or not _tells_progress(event.get("ph"), event.get("pid")):
                continue
            ts = self._start_of(event.get("ts"))
            if ts is not None:
                return ts, after_operators(event.get("ph"), event.get("name"), event.get("cat"))
        return None, ""

    def _end_read_forward(self, handle: BinaryIO, size: int) -> int | None:
        """Plain files: the end of the last event, found by reading the events forward
        (:meth:`_closing_read_forward`), whose keys after it fill ``meta``; None when no "]" reads so, or
        the events are more than FORWARD_LIMIT bytes (they would be read whole)."""
        start = self._events_at if self._events_at is not None else self.events_start()
        if size - start > FORWARD_LIMIT:
            return None
        handle.seek(start)
        closed = self._closing_read_forward(handle.read(size - start))
        if closed is None:
            return None
        last, value = closed
        self.meta.update(value)
        return start + last + 1

    def _malformed_where(self, buffered: int, buf: bytes | bytearray = b"") -> str:
        """``: malformed JSON at byte N`` for the last failed decode of text that began ``buffered`` bytes
        before ``bytes_read``, when it stopped being JSON at a known byte; and SECOND_EVENTS_ARRAY when
        ``buf`` (that text) holds a second traceEvents key after the events' array."""
        where = ""
        if self.malformed_at is not None:
            at = self.bytes_read - buffered + self.malformed_at
            where = f": malformed JSON at byte {at}{self.malformed_what}"
        if self.form == FORM_KINETO and _SECOND_EVENTS.search(buf) is not None:
            where += f"; {SECOND_EVENTS_ARRAY}"
        return where

    def _tail_value(self, tail: bytes) -> dict[str, Any] | None:
        """The keys after the events' array, given what follows a "]" to the end of the file; None when
        that "]" is not the array's end. A bare array ends the file. NUL bytes after the JSON (a file
        extended past its end by a crash) are no content: the JSON closed whole before them."""
        tail = tail.strip().rstrip(b"\0").strip()
        if self.form == FORM_ARRAY:
            return {} if not tail else None
        if tail.startswith(b","):
            if not tail[1:].lstrip().startswith(b'"'):
                return None  # a comma before no key ("],}" inside a string cut short): no JSON's end
            tail = b"{" + tail[1:]
        elif tail == b"}":
            tail = b"{}"
        else:
            return None
        try:
            value = _ANY.decode(tail)
        except msgspec.DecodeError as exc:
            if "trailing characters" in str(exc):  # an object closed before the end: so says Python's json
                return None  # (a "]" in an event cut short: its tail, megabytes, not read twice more)
            repaired = repaired_strings(tail)  # a traceName of bytes that are not UTF-8 (helper-123)
            text = bytes(repaired[0]) if repaired else tail
            try:
                value = json.loads(text)  # a number beyond a double (1e400): inf, as in the keys before
            except (ValueError, RecursionError):
                return None
        except RecursionError:
            return None
        return value if isinstance(value, dict) else None

    def region(self) -> tuple[int, int]:
        """Plain (uncompressed) files only: (first byte of the first event, end of the last event). Also
        fills ``meta``."""
        start = self.events_start()
        return start, max(start, self.events_end())

    def events_start(self) -> int:
        """Plain files only: the first byte of the first event; fills ``meta`` with the keys before it."""
        with self._plain() as handle:
            if isinstance(handle, GzipMembers):
                raise TraceError("corrupt", f"{self.path}: region() needs an uncompressed trace")
            rest = self._head(handle)
            start = self.bytes_read - len(rest)
            if len(rest) < BASE_WINDOW:
                handle.seek(start)
                rest = bytearray(handle.read(BASE_WINDOW))
            self._set_base(rest[:BASE_WINDOW])
            self._events_at = start
            return start

    def events_end(self) -> int:
        """Plain files only: the end of the last event; fills ``meta`` with the keys after it."""
        if self.form is None:
            self.events_start()
        with self._plain() as handle:
            if isinstance(handle, GzipMembers):
                raise TraceError("corrupt", f"{self.path}: region() needs an uncompressed trace")
            return self._tail(handle, os.fstat(handle.fileno()).st_size)

    def _plain(self) -> Any:
        if self.fd is not None:
            return _PreadFile(self.fd, own=False)
        handle = _open(self.path)
        if isinstance(handle, GzipMembers):
            return handle
        return _PreadFile(handle.fileno(), own=True, keep=handle)

    def __iter__(self) -> Iterator[TraceChunk]:
        with self._plain() as handle:
            if isinstance(handle, GzipMembers):
                try:
                    yield from self._iter_stream(handle)
                except TraceError as exc:
                    raise with_gzip_note(exc, handle.ignored_note()) from exc
                self.gzip_note = handle.ignored_note()
                self.refuse_if_damaged()
                return
        start, end = self.region()
        yield from self.iter_range(start, end)
        self.refuse_if_damaged()

    def iter_range(self, start: int, end: int, exact_end: bool = False) -> Iterator[TraceChunk]:
        """Events of a plain file between two event boundaries (``start`` at a ``{``, ``end`` after a ``}``,
        give or take spaces and a comma). ``exact_end``: ``end`` is a guessed cut, not the events' end;
        raise NotAnEventEnd unless the events read from ``start`` end there as they are, with no repair
        and none left out (else the guess may lie inside an event)."""
        if self.ts_base is None:
            self.events_start()  # the base of string times is the same for every range of the file
        self._from_first = start == self._events_at
        with self._plain() as handle:
            handle.seek(start)
            self.bytes_read = start
            buf = bytearray()
            read_before = (start, 0)  # the offset and length of the text of the last events yielded
            while True:
                want = min(self.block + (1 << 16) - len(buf), end - self.bytes_read)
                if want > 0:
                    data = self._read(handle, want)
                    if not data:
                        raise TraceError("truncated", f"{self.path}: the file shrank while being read")
                    buf += data
                at_end = self.bytes_read >= end
                if at_end:
                    last = _prev_nonspace(buf, len(buf))
                    if last >= 0 and buf[last] == 0x2C:
                        last = _prev_nonspace(buf, last)
                    if last < 0:
                        return
                    if exact_end:
                        chunk = self._exact_end(memoryview(buf)[: last + 1], end)
                        if chunk.events:
                            yield chunk
                        return
                    decoded = self._decode(memoryview(buf)[: last + 1])
                    if decoded is None:  # keys after the events longer than _tail's look back
                        whole = bytearray(buf)
                        while more := handle.read(1 << 20):
                            whole += more
                        decoded, _last = self._events_read_forward(whole)
                        if decoded is None:
                            decoded = self._cut_again(whole, self.bytes_read - len(buf), handle, read_before)
                    if decoded is None:
                        raise TraceError(
                            "corrupt",
                            f"{self.path}: undecodable events between bytes "
                            f"{self.bytes_read - len(buf)} and {end}"
                            f"{self._malformed_where(len(buf), buf)} (corrupt trace)",
                        )
                    self.event_count += len(decoded[0])
                    if decoded[0]:  # (every event of it damaged: none)
                        yield TraceChunk(*decoded)
                    return
                found = self._split(buf, limit=8)
                if found is None:
                    if len(buf) > 16 * self.block + (256 << 20):
                        raise TraceError(
                            "corrupt",
                            f"{self.path}: no event boundary found near byte "
                            f"{self.bytes_read} (corrupt trace)",
                        )
                    more = self._more(handle, buf, end - self.bytes_read)
                    buf += more
                    continue
                cut, events, text = found
                self.event_count += len(events)
                if events:
                    read_before = (self.bytes_read - len(buf), cut)  # for _cut_again's time
                    yield TraceChunk(events, text)
                rest = _next_nonspace(buf, cut)
                if rest < len(buf) and buf[rest] == 0x2C:
                    rest += 1
                if self.cuts is not None:
                    self.cuts.append((self.bytes_read - len(buf) + rest, self.bytes_read))
                buf = buf[rest:]

    def _cut_again(
        self, whole: bytearray, at: int, handle: Any, read_before: tuple[int, int]
    ) -> tuple[list[Event], memoryview] | None:
        """The complete events of ``whole``, a cut trace's text from byte ``at`` (an event's start, where the
        events read from the first one have got to) to the file's end, where the end :meth:`_cut_end` found
        from the file's end back lies inside an event: one longer than its window whose args hold a list of
        objects with a "ph" (a tool's), cut inside it, whose objects nothing in the window tells from events
        (helper-357: the trace was refused as "undecodable events"). Read forward from ``at``, the end is
        the last event's that closes before the cut (``cut`` says it); None where that is no trace cut
        short either, or the read did not start at the first event (a range of ``analyse -j N``).
        ``read_before``: where the text of the events yielded last lies, for the time of the last event read
        where none of ``whole``'s tells it (read again: typed events need not carry a pid)."""
        if self.cut is None or not self._from_first:
            return None
        text = bytes(whole).rstrip(b"\0")
        found = cut_in(text, self.form == FORM_KINETO)
        if found is None:
            return None
        end, in_keys = found
        decoded = self._decode(memoryview(whole)[:end]) if end else ([], memoryview(b""))
        if decoded is None:
            return None
        last_ts, part = self._last_time(text[:end]) if end else (None, "")
        if last_ts is None and read_before[1]:
            handle.seek(read_before[0])
            last_ts, part = self._last_time(handle.read(read_before[1]))
        self.cut = Cut(
            self.cut.size,
            at + end,
            in_keys,
            last_ts,
            self.cut.nuls,
            self._base_lost(last_ts),
            part if self.form == FORM_KINETO else "",
        )
        return decoded

    def _exact_end(self, text: memoryview, end: int) -> TraceChunk:
        """The last chunk of a range that must end at ``end`` (iter_range's ``exact_end``). Read from an
        event's start, text that decodes as events unchanged ends where an event ends: JSON's reading from
        there is the file's own. A repair or an event left out could be text cut inside a string instead,
        so either is refused too (NotAnEventEnd: the caller reads the range again from its start)."""
        before = self._changes()
        decoded = self._decode(text)
        if decoded is None or self._changes() != before:
            raise NotAnEventEnd(f"{self.path}: byte {end} is not the end of an event")
        self.event_count += len(decoded[0])
        return TraceChunk(*decoded)

    def _changes(self) -> tuple[int, int, int, int]:
        """What a reader counts of the repairs it made and the events it left out."""
        values = sum(self.repaired_values.values())
        return self.repaired_strings, self.repaired_names, values, self.damaged.total

    def boundary_after(self, pos: int, end: int) -> int:
        """The first event boundary (offset of a ``{`` that starts an event) at or after ``pos``, checked by
        decoding what follows it; ``end`` when there is none before it."""
        with self._plain() as handle:
            while pos < end:
                handle.seek(pos)
                window = handle.read(min(_WINDOW, end - pos))
                if not window:
                    break
                # a "{" is checked on the _LOOKAHEAD bytes after it (all there are at the end)
                at_end = pos + len(window) >= end
                last = len(window) if at_end else len(window) - _LOOKAHEAD
                judge = _EventStarts(window)
                # "},{" found by the regex engine, not per "}"; not before "{}": an event is no empty
                # object, and a string of "{}, {}, ..." reads as objects 64 KiB on from its end
                for match in _BEFORE_AN_OBJECT.finditer(window):
                    brace = match.end() - 1
                    if brace >= last:
                        break
                    if judge.starts(brace):
                        return pos + brace
                if at_end:  # every "{" up to the end was looked at (it moved on a byte at a time here)
                    break
                pos += max(len(window) - _LOOKAHEAD, 1)
        return end

    def _iter_stream(self, handle: BinaryIO) -> Iterator[TraceChunk]:
        self._from_first = True
        buf = self._head(handle)
        eof = False
        more = True
        while len(buf) < BASE_WINDOW and more:  # the first events: the base of string times
            data = self._read(handle, BASE_WINDOW)
            more = bool(data)
            buf += data
        self._set_base(buf[:BASE_WINDOW])
        while not eof:
            want = self.block
            while len(buf) < want:
                data = self._read(handle, want - len(buf) + (1 << 16))
                if not data:
                    eof = True
                    break
                buf += data
            if eof:
                cut, events, text = self._finish(buf)
            else:
                found = self._split(buf, limit=8)
                if found is None:  # an event larger than a block, or corrupt text: read more
                    if len(buf) > 16 * self.block + (256 << 20):
                        raise TraceError(
                            "corrupt",
                            f"{self.path}: no event boundary found near byte "
                            f"{self.bytes_read} (corrupt trace)",
                        )
                    more = self._more(handle, buf, GROWTH_LIMIT)
                    if not more:
                        cut, events, text = self._finish(buf)
                        eof = True
                    else:
                        buf += more
                        continue
                else:
                    cut, events, text = found
            if events:
                self.event_count += len(events)
                self._last_progress = _last_progress_of(events, self._last_progress)
                yield TraceChunk(events, text)
            if eof:
                return
            rest = _next_nonspace(buf, cut)
            # drop the separating comma: the next chunk starts at "{"
            if rest < len(buf) and buf[rest] == 0x2C:
                rest += 1
            buf = buf[rest:]


_CONTENT = re.compile(rb"[^ \t\r\n\0]")  # a byte that is neither JSON white space nor NUL


def _closes_before_the_end(buf: bytes | bytearray, bracket: int) -> bool:
    """Whether what follows the "]" at ``bracket`` (a "," and keys, or a "}") closes as an object within the
    _LOOKAHEAD bytes after it with more than white space and NULs after that: no keys after the events'
    array, as TraceReader._tail_value finds, without copying the text to the end for each "]" tried (a gzipped
    trace cut in an event of MBs: each of the 64 "]"s before it copied those MBs 4 times, 2 s of 4.7;
    helper-351). False when the text after it is shorter (_tail_value reads it)."""
    if len(buf) - bracket <= _LOOKAHEAD:
        return False
    after = _next_nonspace(buf, bracket + 1)
    if after < len(buf) and buf[after] == 0x7D:  # "}": the object's end, then nothing but blanks
        return _CONTENT.search(buf, after + 1) is not None
    if after >= len(buf) or buf[after] != 0x2C:  # ","
        return False
    key = _next_nonspace(buf, after + 1)
    if key < len(buf) and buf[key] != 0x22:  # a list's next element ("[[10], [10]]"), no key
        return True
    head = b"{" + bytes(buf[after + 1 : after + 1 + _LOOKAHEAD])
    try:
        _ANY.decode(head)
    except msgspec.DecodeError as exc:
        found = _TRAILING_AT.search(str(exc))
        return found is not None and _CONTENT.search(buf, after + int(found.group(1))) is not None
    except RecursionError:
        return False
    return False


_WIDE_BOMS = (
    (b"\xff\xfe\0\0", "UTF-32LE"),
    (b"\0\0\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)


def _wide_text(head: bytes) -> str | None:
    """What a trace written as UTF-16 or UTF-32 text is, in one line (a Windows shell's redirect, PowerShell
    5's `>`, writes UTF-16): JSON traces are UTF-8, and the reader said "not a JSON object or array, not a
    Chrome trace" of it (helper-351). None for other text. Told by its byte order mark, or by the NUL
    bytes beside its first 2 to 4 characters (ASCII: "{", "[", spaces)."""
    name = next((name for mark, name in _WIDE_BOMS if head.startswith(mark)), None)
    if name is None and len(head) >= 8:
        nul, even, odd = b"\0", head[0:8:2], head[1:8:2]
        wide = {
            "UTF-32LE": head[1:4] == nul * 3 and head[5:8] == nul * 3 and head[0] and head[4],
            "UTF-32BE": head[0:3] == nul * 3 and head[4:7] == nul * 3 and head[3] and head[7],
            "UTF-16LE": odd == nul * 4 and nul not in even,
            "UTF-16BE": even == nul * 4 and nul not in odd,
        }
        name = next((name for name, found in wide.items() if found), None)
    if name is None:
        return None
    return (
        f"the trace is {name} text, not UTF-8 as JSON traces are (re-encoded by a tool or a Windows shell's "
        f"redirect?): convert it, e.g. `iconv -f {name} -t UTF-8 FILE > FILE.utf8.json`, and read that"
    )


def _trailing_key_before(buf: bytes | bytearray, bracket: int) -> int | None:
    """When the ``]`` at ``bracket`` closes the array value of a key that follows the events (Chrome's
    ``"samples": [...]``, a ``"deviceProperties"`` written last), the byte of the comma before that key;
    else None. Such a key is the last ``"name": [`` before ``bracket`` whose text, from its name to the
    end, reads as the rest of one JSON object, and which is not traceEvents itself."""
    floor = max(0, bracket - _LOOKAHEAD)
    # (a longer key is found by reading the events forward: TraceReader._events_read_forward)
    for tries, found in enumerate(reversed(list(_ARRAY_KEY.finditer(buf, floor, bracket)))):
        if tries == 16:
            break
        name = buf.rfind(b'"', floor, found.start())
        comma = _prev_nonspace(buf, name) if name >= 0 else -1
        if comma < 0 or buf[comma] != 0x2C:  # ","
            continue
        try:
            value = _ANY.decode(b"{" + bytes(buf[name:]))
        except (msgspec.DecodeError, RecursionError):
            continue
        if isinstance(value, dict) and "traceEvents" not in value:
            return comma
    return None


class _EventStarts:
    """Whether an event starts at a "{" of ``window`` (:meth:`starts`), for the "{"s of one search in order.
    What follows a "{", up to the last "}" of the _LOOKAHEAD bytes after it (of the window, for an event
    longer than that), must read as whole events, or as their beginning, as written or as the reader mends
    it (``analysis/trace_repairs.py``). A "{" inside an event (an object in a list in its args, a "},{" in a
    string) fails: the text soon closes what it never opened. Read to the window's end, each "{" before a
    damaged event megabytes on was decoded up to it and its repairs tried on all of it: a forked scan of a
    trace damaged near a cut took 30 s, not 0.1.

    Each "{" costs the bytes up to where its text stops being JSON, not the _LOOKAHEAD: the text is first
    read a little way (_LOOKS; a text that stops being JSON there stops so on the whole), the repairs
    are made once per stretch of the window (not on each "{"'s text), and the "{"s before the byte where a
    rejected one's text stopped being JSON are passed over: inside a string of megabytes of "{}, {}, ..."
    (JSON in an arg) each was read to the string's end and mended, 9 s to find a boundary 64 KiB before
    that end (helper-338). The search is a guess each range's reader checks (docs/formats.md, "Read in
    parallel"), so a "{" passed over costs no result."""

    def __init__(self, window: bytes) -> None:
        self.window = window
        self.skip = 0  # "{"s before this byte are passed over
        self.mended = b""  # the window mended from mended_at on
        self.mended_at = -1

    def starts(self, brace: int) -> bool:
        return self._starts(brace) and self._reads_on(brace)

    def _reads_on(self, brace: int) -> bool:
        """Whether the text from ``brace``, read on past the _LOOKAHEAD (up to READ_ON bytes), is still not
        closed by a "]" other than the events' own. A list of objects in an event's args, each with a "ph" (a
        tool's), reads as events as far as the look ahead: helper-351, one of 130 KB made the split of `-j N`
        fall inside it (the trace read again by one process), and the look back from a cut trace's end tried
        8 of its objects a window, mending the window for each, then grew the window, and past CUT_LIMIT
        refused the trace. Its "]" closes it, and what follows is no events' end; the "{"s before it are
        passed over. One decode: ~1 ms a MB."""
        window = self.window
        stop = window.rfind(b"}", brace, brace + READ_ON)
        if stop < brace + _LOOKAHEAD:
            return True  # read already
        try:
            _RAW_EVENTS.decode(b"[" + window[brace : stop + 1] + b"]")
        except msgspec.DecodeError as exc:
            found = _TRAILING_AT.search(str(exc))
            if found is None:  # cut at READ_ON, or damage further on: the reader of the events says
                return True
            bracket = window.rfind(b"]", brace, brace + int(found.group(1)))
            if _ends_events(window[bracket + 1 : stop + 1]):
                return True
            self.skip = max(self.skip, bracket)
            return False
        except RecursionError:
            return True
        return True

    def _starts(self, brace: int) -> bool:
        if brace < self.skip:
            return False
        window = self.window
        stop = window.rfind(b"}", brace, brace + _LOOKAHEAD)
        stop = stop if stop > brace else window.rfind(b"}")
        verdict = _reads_as_events(window, brace, stop)
        if isinstance(verdict, bool):
            return verdict
        end = max(stop + 1, brace + 2 * _LOOKAHEAD)
        if not (0 <= self.mended_at <= brace and stop < self.mended_at + len(self.mended)):
            self.mended_at, self.mended = brace, mended(window[brace:end])
        verdict = _reads_as_events(self.mended, brace - self.mended_at, stop - self.mended_at)
        if isinstance(verdict, bool):
            return verdict
        self.skip = brace + verdict  # the "{"s before the byte where its text stopped being JSON
        return False


READ_ON = 1 << 20  # bytes from a "{" read for the "]" of a list it is in (_EventStarts._reads_on)


def _ends_events(after: bytes) -> bool:
    """Whether ``after``, what follows a "]" up to a "}", is what follows the events' array: nothing (a bare
    array's end), the top-level object's "}", or more of its keys (whole, or cut where the read stopped)."""
    after = after.strip(_WS + b"\0")
    if not after or after == b"}":
        return True
    if after[:1] != b",":
        return False
    rest = b"{" + after[1:]
    if is_cut_short(rest):
        return True
    try:
        return isinstance(_ANY.decode(rest), dict)
    except (msgspec.DecodeError, RecursionError):
        return False


def _reads_as_events(text: bytes, brace: int, stop: int) -> bool | int:
    """Whether ``text`` from ``brace`` to ``stop`` (its "}") reads as whole events or as their beginning
    (False: a "]" in it closed the events' array); else how many bytes after ``brace`` it stops being
    JSON. Read first a little way, then further (_LOOKS): JSON that stops being JSON well before the end of
    a part stops so on the whole (a "{" in a string of escaped quotes, at its second byte)."""
    for look in (*_LOOKS, stop + 1 - brace):
        whole = look >= stop + 1 - brace
        framed = b"[" + text[brace : stop + 1 if whole else brace + look] + b"]"
        try:
            _RAW_EVENTS.decode(framed)
        except msgspec.DecodeError as exc:
            message = str(exc)
            if "trailing characters" in message:  # a "]" in the text closed the events' array
                return False
            found = _AT_BYTE.search(message)
            # near where a part was cut (by a margin for what the decoder looks ahead): read on
            if found is not None and int(found.group(1)) < len(framed) - (1 if whole else _LOOK_MARGIN):
                return int(found.group(1)) - 1  # "[" was added in front
        except RecursionError:
            return False
        if whole:
            return True  # JSON, or not JSON only where it was cut
    return True


_LOOKS = (256, 4096)  # bytes of a "{"'s text read first: most that are no event's stop being JSON in them
_LOOK_MARGIN = 64  # an error this near the end of a part read may be where it was cut


def _decimal(text: bytes) -> Decimal | None:
    """The finite number a string time holds (within TIME_LIMIT), or None."""
    text = text.strip()
    if not text or len(text) > 64 or b"_" in text:  # "1_000": Python's Decimal only (helper-197)
        return None
    try:
        value = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError, ValueError):
        return None
    if not value.is_finite() or abs(value) > TIME_LIMIT:
        return None
    return value


class _NoTime(ValueError):
    """A string ``ts`` that is no decimal number: its event is damaged (TraceReader._decode)."""


_NO_TIME = "Expected a time, got a `str` that is no number - at `event.ts`"


def _no_time(event: Any) -> bool:
    return _text_is_no_time(getattr(event, "ts", None))


def _text_is_no_time(value: Any) -> bool:
    """Whether a decoded ``ts`` is a string that is no time."""
    return type(value) is str and _decimal(value.encode("utf-8", "replace")) is None


def raw_ts_is_no_time(raw: Any) -> bool:
    """Whether a ``ts`` kept as its JSON text (bytes, msgspec.Raw) is a string that is no time: its event
    is damaged (docs/formats.md, "Damaged events")."""
    text = bytes(raw) if raw is not None else b""
    if text[:1] != b'"':
        return False
    if b"\\" in text:  # escapes ("\u0031"): the string they write, as the decoders read it (helper-197)
        decoded = json_string_text(text)
        return decoded is None or _decimal(decoded) is None
    return _decimal(text[1:-1]) is None


_FAILED_TIME = re.compile(r" - at `(?:\$\[0\]|event)\.(ts|dur)`$")  # msgspec's path, or _NO_TIME's


def _problem(exc: msgspec.DecodeError, raw: bytes = b"") -> str:
    """msgspec's words for what is wrong with one event (``raw``), its path made relative to the event;
    a ts or dur of NaN or Infinity (read as "?": trace_repairs) said so, not as a string the trace lacks."""
    failed = _FAILED_TIME.search(str(exc))
    if failed and raw and _time_is_not_a_number(raw, failed[1]):
        return f"event.{failed[1]} is NaN or Infinity"
    return str(exc).replace("`$[0]", "`event")


def _time_is_not_a_number(raw: bytes, key: str) -> bool:
    try:
        event = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return False
    return isinstance(event, dict) and event.get(key) == NOT_A_NUMBER


def _bad_event(raw: bytes, exc: msgspec.DecodeError) -> str:
    """One line: what is wrong with the event ``raw`` (msgspec's words, its path made relative to the
    event), and its start."""
    problem = _problem(exc, raw)
    text = " ".join(raw[:_SNIPPET].decode("utf-8", "replace").split())  # one line, however it was indented
    return f"an event of the wrong shape ({problem}): {text}{'...' if len(raw) > _SNIPPET else ''}"


def _unclosed(path: Any, size: int, tail: bytes | bytearray) -> str:
    """Why a trace's JSON does not close at its end, ``tail`` being its last bytes read."""
    nuls = len(tail) - len(tail.rstrip(b"\0"))
    if nuls:  # a file extended but never written (a crash, a full disk): zeros where the end should be
        return (
            f"{path}: the trace ends in {nuls}{'+' if nuls == len(tail) else ''} NUL bytes after "
            f"{size - nuls} bytes, where its JSON should close (a write cut short by a crash or a full disk?)"
        )
    last = bytes(tail[-TAIL_SHOWN:]).decode("utf-8", "backslashreplace")
    return (
        f"{path}: the trace ends after {size} bytes, before its JSON closes (in its events or a key after "
        f"them: truncated file, or other bytes after the JSON?); its last bytes: {last!r}"
    )


TAIL_SHOWN = 32  # bytes of an unclosed trace's end shown: garbage after a closed JSON is seen there
CUT_WINDOW = 4 << 20  # bytes from a plain trace's end looked at first for the last complete event
_EPOCH_US = 1e14  # µs: 1973; Kineto's ts after its base are ~10**12-10**13, epoch µs ~1.7 * 10**15
CUT_LIMIT = 256 << 20  # ... four times more each time, up to this


def _nothing_read(path: Any, size: int) -> str:
    """Why a trace cut short before its first event is complete is not read."""
    return (
        f"{path}: nothing to read: the trace ends after {size} bytes, before its first event is complete "
        "(cut short: a job killed while it wrote the trace, a copy cut short, a full disk?)"
    )


def _last_progress_of(events: list[Any], before: tuple[float | None, str]) -> tuple[float | None, str]:
    """The ``ts`` of the last of ``events`` that has one as a number and tells how far the trace's writer
    had got (:func:`_tells_progress`), with its part of a Kineto trace (:func:`after_operators`); ``before``
    when none has."""
    for event in reversed(events):
        ts = getattr(event, "ts", NO_TIME)
        if isinstance(ts, float) and not no_time(ts) and _tells_progress(event.ph, event.pid):
            return ts, after_operators(event.ph, getattr(event, "name", ""), getattr(event, "cat", ""))
    return before


def after_operators(ph: Any, name: Any, cat: Any) -> str:
    """The part of a Kineto trace an event is in, where it is one Kineto writes after every operator
    (docs/formats.md, "Traces cut short"): ``"memory"`` for a ``[memory]`` event, ``"python"`` for a
    Python function; "" for any other."""
    if ph == "i" and name == "[memory]":
        return "memory"
    return "python" if cat == vocab.PYTHON_FUNCTION else ""


def _tells_progress(ph: Any, pid: Any) -> bool:
    """Whether an event's ``ts`` tells how far in time the part of the trace it is in had got (for the steps
    of a trace cut short: docs/formats.md, "Traces cut short"). Not a metadata event's (Kineto gives each
    the trace's start), nor those of the trailer Kineto writes after every activity: the profiler's span
    and its marks, of the processes "Spans", "Traces" and "" (a string pid, where activities have numbers;
    torch_npu's are all numbers). A cut in that trailer leaves every step whole."""
    return ph != "M" and not isinstance(pid, str)


# "},{" before an object that is not empty: in a JSON string no object has a key (its quotes are escaped), so
# what reads as objects from a "{" in a string (one of megabytes of "{}, {}, ...") is empty, and no event is
_BEFORE_AN_OBJECT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{(?![ \t\r\n]*\})")


def _event_starts(window: bytes) -> Iterator[int]:
    """Where events start in ``window`` (a part of a trace's events), first ones first, at most 8. Not at
    an empty object, nor at one without a "ph": read from the end back, a window that begins inside a
    string of "{}, {}, ..." or a list of objects found its events there, and the events' end inside them
    (the trace refused as corrupt); past them, the window grows back to an event's start."""
    found = passed = 0
    judge = _EventStarts(window)
    for match in _BEFORE_AN_OBJECT.finditer(window):
        brace = match.end() - 1
        if brace < passed or not judge.starts(brace):
            continue
        without = _objects_without_a_phase(window, brace)
        if without:
            passed = brace + without
            continue
        yield brace
        found += 1
        if found == 8:
            return


def _objects_without_a_phase(window: bytes, brace: int) -> int:
    """How many bytes from ``brace`` hold objects none of which has a "ph", as JSON reads them from there
    (in the _LOOKAHEAD bytes): 0 when the first has one, as every event has, or when they are not all
    objects, or damaged (judged by what follows them). An object of a list in an event's args has none."""
    text = window[brace : brace + _LOOKAHEAD]
    ends = value_ends(text)
    if not len(ends):
        return 0
    try:
        values = _ANY.decode(b"[" + text[: int(ends[-1]) + 1] + b"]")
    except (msgspec.DecodeError, RecursionError):
        return 0
    if len(values) != len(ends) or not all(isinstance(value, dict) for value in values):
        return 0
    first = next((k for k, value in enumerate(values) if "ph" in value), len(values))
    return int(ends[first - 1]) + 1 if first else 0


def sniff_trace(path: str | Path, named: bool = False) -> str | None:
    """The form of the trace at ``path`` from its content (gzipped or not), whatever its name:
    FORM_KINETO (a JSON object with ``traceEvents``), FORM_ARRAY (a bare JSON array of events, torch_npu's
    trace_view.json), or None (not a trace, or unreadable). Reads the first SNIFF_BYTES (more only for an
    object that starts with one of Kineto's header keys, or for a file the user ``named`` itself, until
    traceEvents shows: a folder's other JSON files are not read through)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the open; a directory is no trace
            return None
        with GzipMembers(path) if is_gzip(path) else open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
            text = head.removeprefix(_BOM).lstrip(_WS)
            if text[:1] == b"[":
                rest = text[1:].lstrip(_WS)
                return FORM_ARRAY if rest[:1] == b"{" and _PH_KEY.search(rest) else None
            if text[:1] != b"{":
                return None
            # an object of other keys first (Perfetto's otherData, a tool's own) is a trace when traceEvents
            # comes within the first SNIFF_BYTES; one of Kineto's header is read on for it
            limit = _HEAD_LIMIT if named or _KINETO_HEAD_KEYS.match(text) else 0
            tail = b""
            while True:
                if _EVENTS_KEY.search(tail + head):
                    return FORM_KINETO
                if len(head) < SNIFF_BYTES or handle.tell() > limit:
                    return None
                tail = head[-4096:]
                head = handle.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return None


def why_not_a_trace(path: str | Path) -> str:
    """What a file that :func:`sniff_trace` does not take holds instead, in a few words for the user."""
    try:
        if os.stat(path).st_size == 0:
            return "it is empty (0 bytes)"
        gz = is_gzip(path)
        with GzipMembers(path) if gz else open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES).removeprefix(_BOM).lstrip(_WS)
            while gz and handle.read(1 << 20):  # a gzip is read to its end: a cut one says so there
                pass
    except (EOFError, zlib.error) as exc:
        return f"it is gzipped but cannot be decompressed ({exc}): truncated or damaged"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not head:
        return "it holds only white space"
    if head[:1] == b"[" and head[1:].lstrip(_WS)[:1] == b"]":
        return "it is an empty JSON array: a trace with no events"
    if head[:1] == b"{" and not _KINETO_HEAD_KEYS.match(head) and not _EVENTS_KEY.search(head):
        return (
            f"a JSON object with no traceEvents in its first {_HEAD_LIMIT >> 20} MB, which does not start as "
            "a Kineto trace does; if it is a trace, name it *.pt.trace.json and it is read as one"
        )
    return ""


def iter_chunks(path: str | Path, block: int = DEFAULT_BLOCK) -> tuple[TraceReader, Iterator[TraceChunk]]:
    """``reader, chunks = iter_chunks(path)``; after consuming ``chunks``, ``reader.meta`` holds the keys."""
    reader = TraceReader(path, block)
    return reader, iter(reader)


def load_trace(
    path: str | Path, keep: Callable[[Event], bool] | None = None, block: int = DEFAULT_BLOCK
) -> Trace:
    """Load a Chrome trace of either form (:func:`sniff_trace`), gzipped or not, whatever its name.

    Returns ``Trace(events, meta)``; ``events`` are :class:`Event` structs in file order, ``meta`` the
    top-level keys besides ``traceEvents``. With ``keep``, only events for which ``keep(event)`` is true are
    kept and their ``args`` are copied out of the read buffer, so memory is proportional to what is kept
    (pass e.g. ``lambda e: e.cat == "python_function"``). Without it every event is kept and memory is
    about twice the uncompressed size. ``block``: the bytes of event text decoded at a time (all of them
    decoded, then left out or kept: a few times ``block`` on top of what is kept). Raises
    :class:`TraceError` (``kind``: missing / truncated / corrupt).
    """
    reader = TraceReader(path, block)
    events: list[Event] = []
    for chunk in reader:
        if keep is None:
            events.extend(chunk.events)
            continue
        for event in chunk.events:
            if keep(event):
                if event.args:
                    event.args = event.args.copy()
                events.append(event)
    trace = Trace(Path(path), events, reader.meta, reader.form or FORM_KINETO, reader.ts_base or 0)
    trace.repaired_strings = reader.repaired_strings
    trace.repaired_names = reader.repaired_names
    trace.repaired_values = reader.repaired_values
    trace.gzip_note = reader.gzip_note
    trace.damaged = reader.damaged
    trace.cut, trace.events_read = reader.cut, reader.event_count
    return trace


def with_gzip_note(exc: TraceError, note: str | None) -> TraceError:
    """``exc`` with what was left out after the gzip data said too (a member cut short that the trace's
    text went on in: the trace is truncated, and that says where)."""
    return TraceError(exc.kind, f"{exc}; {note}") if note else exc
