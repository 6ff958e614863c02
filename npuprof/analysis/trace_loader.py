"""Fast, memory-bounded reading of Kineto (``torch.profiler``) Chrome traces.

A Kineto trace is one JSON object whose ``traceEvents`` array holds millions of events. Decoding it whole
costs several times the file size in memory, so this module streams it: the file (``.gz`` decompressed on
the fly) is read in blocks, each block is cut at an event boundary and decoded with msgspec into typed
:class:`Event` structs whose ``args`` stay undecoded (``msgspec.Raw``) until asked for.

Public API (stable):

* :func:`load_trace` -- ``load_trace(path, keep=None) -> Trace``: all events (or those ``keep`` accepts)
  and the top-level keys (``Trace.meta``: ``distributedInfo``, ``deviceProperties``,
  ``baseTimeNanoseconds``, ...).
* :func:`iter_chunks` -- the streaming form: ``TraceChunk`` objects (decoded events plus the exact bytes they
  came from), then the metadata is available on the :class:`TraceReader`. Use it to process a trace of any
  size in bounded memory.
* :class:`Event` -- fields ``name, ph, cat, ts, dur, pid, tid, id, args``; ``Event.args_dict()`` decodes args.
* :class:`TraceError` -- raised for a missing, truncated or corrupt trace (the message says which and where).

``ts`` and ``dur`` are microseconds as in the file (floats).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import msgspec

__all__ = ["Event", "Trace", "TraceChunk", "TraceError", "TraceReader", "iter_chunks", "load_trace"]

DEFAULT_BLOCK = 16 << 20  # bytes of event text decoded at a time
EMPTY_RAW = msgspec.Raw(b"")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_HEAD_LIMIT = 64 << 20  # the traceEvents key must appear within this many bytes
_WS = b" \t\r\n"
# msgspec's syntax errors end in "(byte N)"; "trailing characters" is also how the end of the events array
# shows, so it does not count as a bad byte
_MALFORMED_AT = re.compile(r"JSON is malformed: (?!trailing).*\(byte (\d+)\)$")
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")
_WINDOW = 4 << 20  # bytes read at a time when looking for an event boundary
_LOOKAHEAD = 1 << 16  # bytes after a "{" that must read as events for it to start one
_SNIPPET = 160  # characters of a bad event quoted in an error


# A time (µs) beyond ~31,700 years is no time a profiler wrote; bounding it keeps every sum and product of
# the tables finite (1e308 + 1e308 would be inf, which JSON cannot hold).
TIME_LIMIT = 1e18
Time = Annotated[float, msgspec.Meta(ge=-TIME_LIMIT, le=TIME_LIMIT)]


class ScanEvent(msgspec.Struct, gc=False):
    """The fields of an event the tables read (others, ``id`` included, are skipped by the decoder)."""

    name: str = ""
    ph: str = ""
    cat: str = ""
    ts: Time = 0.0
    dur: Time = 0.0
    pid: int | str = 0
    tid: int | str = 0
    args: msgspec.Raw = EMPTY_RAW


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


@dataclass
class TraceChunk:
    """Consecutive events and the exact bytes (``text``: ``{...},{...}``) they were decoded from."""

    events: list[Event]
    text: memoryview


@dataclass
class Trace:
    """A loaded trace: ``events`` in file order and ``meta``, the top-level keys other than traceEvents."""

    path: Path
    events: list[Event]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int | None:
        info = self.meta.get("distributedInfo")
        rank = info.get("rank") if isinstance(info, dict) else None
        return rank if isinstance(rank, int) else None


_DECODER = msgspec.json.Decoder(list[Event])
_ANY = msgspec.json.Decoder()
_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])


def _open(path: Path) -> BinaryIO:
    if not path.is_file():
        raise TraceError("missing", f"no trace file at {path}")
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
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
    ) -> None:
        """``fd``: read the (plain) trace from this open descriptor instead of opening ``path``.
        ``decoder``: a msgspec decoder of a list of event structs (default: ``list[Event]``);
        ``fallback``: the decoder for chunks that are valid JSON but that ``decoder`` rejects."""
        self.path = Path(path)
        self.decoder = decoder or _DECODER
        self.fallback = fallback
        self.fd = fd
        self.block = block
        self.meta: dict[str, Any] = {}
        self.bytes_read = 0
        self.event_count = 0
        # where the last text that failed to decode stops being JSON (offset into that text), when known
        self.malformed_at: int | None = None

    def _read(self, handle: BinaryIO, size: int) -> bytes:
        try:
            data = handle.read(size)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise TraceError(
                "truncated" if isinstance(exc, EOFError) else "corrupt",
                f"{self.path}: cannot read the trace at byte {self.bytes_read}: {exc}",
            ) from exc
        self.bytes_read += len(data)
        return data

    def _head(self, handle: BinaryIO) -> bytearray:
        """Read up to the opening bracket of traceEvents; parse the keys before it; return what follows."""
        buf = bytearray()
        while True:
            data = self._read(handle, 1 << 20)
            searched = max(0, len(buf) - 4096)
            buf += data
            first = _next_nonspace(buf, 0)
            if first < len(buf) and buf[first] != 0x7B:  # "{"
                what = "a bare JSON array of events" if buf[first] == 0x5B else "not a JSON object"
                raise TraceError(
                    "corrupt", f"{self.path}: {what}, not a Chrome trace object with traceEvents"
                )
            match = _EVENTS_KEY.search(buf, searched)
            if match:
                break
            if not data or len(buf) > _HEAD_LIMIT:
                kind = "corrupt" if buf.strip() else "truncated"
                raise TraceError(kind, f"{self.path}: no traceEvents array found (not a Chrome trace?)")
        head = bytes(buf[: match.start()]).strip()
        if not head.startswith(b"{"):
            raise TraceError("corrupt", f"{self.path}: the trace does not start with a JSON object")
        head = head.rstrip(b",").rstrip()
        if head != b"{":
            self.meta.update(self._decode_object(head + b"}", "the keys before traceEvents"))
        return buf[match.end() :]

    def _decode_object(self, text: bytes, what: str) -> dict[str, Any]:
        try:
            value = _ANY.decode(text)
        except (msgspec.DecodeError, RecursionError) as exc:
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
        try:
            try:
                events = self.decoder.decode(framed)
            except msgspec.ValidationError:
                if self.fallback is None:
                    return self._undecodable(framed)
                try:
                    events = self.fallback.decode(framed)
                except msgspec.DecodeError:
                    return self._undecodable(framed)
            except msgspec.DecodeError:
                return self._undecodable(framed)
        except RecursionError:  # wherever such a trace is cut, it cannot be read
            raise TraceError(
                "corrupt", f"{self.path}: JSON nested too deeply to read (corrupt trace)"
            ) from None
        return events, memoryview(framed)[1:-1]

    def _undecodable(self, framed: bytearray) -> None:
        """Why ``[text]`` did not decode: JSON that stops at a byte (``malformed_at``; a text cut inside an
        event stops at its end), or an event of the wrong shape (TraceError)."""
        self.malformed_at = None
        try:
            raws = _RAW_EVENTS.decode(framed)
        except msgspec.DecodeError as exc:
            found = _MALFORMED_AT.search(str(exc))
            if found:
                self.malformed_at = int(found.group(1)) - 1  # "[" was added in front
            return None
        decoder = self.fallback or self.decoder
        for raw in raws:
            try:
                decoder.decode(b"[" + bytes(raw) + b"]")
            except msgspec.DecodeError as exc:
                raise TraceError("corrupt", f"{self.path}: {_bad_event(bytes(raw), exc)}") from None
        return None

    def _split(self, buf: bytearray, limit: int) -> tuple[int, list[Event], memoryview] | None:
        """Find the last event boundary ``},{`` in ``buf`` (which starts at an event) that yields a
        decodable chunk; return (index just after its ``}``, events). None when no boundary works yet;
        TraceError when none ever will (the first event is not JSON, or not an event)."""
        end = len(buf)
        tries = 0
        bad: int | None = None  # a byte where the text stops being JSON: no boundary after it can work
        while tries < limit:
            close = buf.rfind(b"}", 0, end)
            if close < 0:
                if bad is not None:
                    where = self.bytes_read - len(buf) + bad
                    raise TraceError(
                        "corrupt", f"{self.path}: malformed JSON at byte {where} (corrupt trace)"
                    )
                return None
            comma = _next_nonspace(buf, close + 1)
            if comma < len(buf) and buf[comma] == 0x2C:  # ","
                brace = _next_nonspace(buf, comma + 1)
                if brace < len(buf) and buf[brace] == 0x7B:  # "{"
                    tries += 1
                    decoded = self._decode(memoryview(buf)[: close + 1])
                    if decoded is not None:
                        return close + 1, *decoded
                    if self.malformed_at is not None and self.malformed_at < close:
                        bad = self.malformed_at
                        end = bad
                        continue
            end = close
        return None

    def _finish(self, buf: bytearray) -> tuple[int, list[Event], memoryview]:
        """At end of a stream: find the array's closing bracket (the rest must be the trailing keys)."""
        end = len(buf)
        for _ in range(64):
            bracket = buf.rfind(b"]", 0, end)
            if bracket < 0:
                break
            value = self._tail_value(bytes(buf[bracket + 1 :]))
            if value is not None:
                self.meta.update(value)
                last = _prev_nonspace(buf, bracket)
                if last < 0:
                    return 0, [], memoryview(b"")
                decoded = self._decode(memoryview(buf)[: last + 1])
                if decoded is None:
                    raise TraceError(
                        "corrupt",
                        f"{self.path}: undecodable events before byte {self.bytes_read}"
                        f"{self._malformed_where(len(buf))} (corrupt trace)",
                    )
                return last + 1, *decoded
            end = bracket
        raise TraceError(
            "truncated",
            f"{self.path}: the trace ends without closing its traceEvents array "
            f"after {self.bytes_read} bytes (truncated file?)",
        )

    def _tail(self, handle: BinaryIO, size: int) -> int:
        """Plain files: parse the keys after traceEvents from the file's end; return the offset just past
        the last event (before the closing bracket)."""
        span = min(size, 1 << 20)
        handle.seek(size - span)
        buf = bytearray(handle.read(span))
        end = len(buf)
        for _ in range(64):
            bracket = buf.rfind(b"]", 0, end)
            if bracket < 0:
                break
            value = self._tail_value(bytes(buf[bracket + 1 :]))
            if value is not None:
                self.meta.update(value)
                return size - span + _prev_nonspace(buf, bracket) + 1
            end = bracket
        raise TraceError(
            "truncated",
            f"{self.path}: the trace ends without closing its traceEvents array "
            f"after {size} bytes (truncated file?)",
        )

    def _malformed_where(self, buffered: int) -> str:
        """``: malformed JSON at byte N`` for the last failed decode of text that began ``buffered`` bytes
        before ``bytes_read``, when it stopped being JSON at a known byte."""
        if self.malformed_at is None:
            return ""
        return f": malformed JSON at byte {self.bytes_read - buffered + self.malformed_at}"

    @staticmethod
    def _tail_value(tail: bytes) -> dict[str, Any] | None:
        tail = tail.strip()
        if tail.startswith(b","):
            tail = b"{" + tail[1:]
        elif tail == b"}":
            tail = b"{}"
        else:
            return None
        try:
            value = _ANY.decode(tail)
        except (msgspec.DecodeError, RecursionError):
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
            if isinstance(handle, gzip.GzipFile):
                raise TraceError("corrupt", f"{self.path}: region() needs an uncompressed trace")
            rest = self._head(handle)
            return self.bytes_read - len(rest)

    def events_end(self) -> int:
        """Plain files only: the end of the last event; fills ``meta`` with the keys after it."""
        with self._plain() as handle:
            if isinstance(handle, gzip.GzipFile):
                raise TraceError("corrupt", f"{self.path}: region() needs an uncompressed trace")
            return self._tail(handle, os.fstat(handle.fileno()).st_size)

    def _plain(self) -> Any:
        if self.fd is not None:
            return _PreadFile(self.fd, own=False)
        handle = _open(self.path)
        if isinstance(handle, gzip.GzipFile):
            return handle
        return _PreadFile(handle.fileno(), own=True, keep=handle)

    def __iter__(self) -> Iterator[TraceChunk]:
        with self._plain() as handle:
            if isinstance(handle, gzip.GzipFile):
                yield from self._iter_stream(handle)
                return
        start, end = self.region()
        yield from self.iter_range(start, end)

    def iter_range(self, start: int, end: int) -> Iterator[TraceChunk]:
        """Events of a plain file between two event boundaries (``start`` at a ``{``, ``end`` after a ``}``,
        give or take spaces and a comma)."""
        with self._plain() as handle:
            handle.seek(start)
            self.bytes_read = start
            buf = bytearray()
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
                    decoded = self._decode(memoryview(buf)[: last + 1])
                    if decoded is None:
                        raise TraceError(
                            "corrupt",
                            f"{self.path}: undecodable events between bytes "
                            f"{self.bytes_read - len(buf)} and {end}"
                            f"{self._malformed_where(len(buf))} (corrupt trace)",
                        )
                    self.event_count += len(decoded[0])
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
                    more = self._read(handle, min(self.block, end - self.bytes_read))
                    buf += more
                    continue
                cut, events, text = found
                self.event_count += len(events)
                yield TraceChunk(events, text)
                rest = _next_nonspace(buf, cut)
                if rest < len(buf) and buf[rest] == 0x2C:
                    rest += 1
                buf = buf[rest:]

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
                last = len(window) if pos + len(window) >= end else len(window) - _LOOKAHEAD
                i = 0
                while True:
                    close = window.find(b"}", i)
                    if close < 0:
                        break
                    comma = _next_nonspace(window, close + 1)
                    if comma < len(window) and window[comma] == 0x2C:
                        brace = _next_nonspace(window, comma + 1)
                        if brace >= last:
                            break
                        if window[brace] == 0x7B and _starts_events(window, brace):
                            return pos + brace
                    i = close + 1
                pos += max(len(window) - _LOOKAHEAD, 1)
        return end

    def _iter_stream(self, handle: BinaryIO) -> Iterator[TraceChunk]:
        buf = self._head(handle)
        eof = False
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
                    more = self._read(handle, self.block)
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
                yield TraceChunk(events, text)
            if eof:
                return
            rest = _next_nonspace(buf, cut)
            # drop the separating comma: the next chunk starts at "{"
            if rest < len(buf) and buf[rest] == 0x2C:
                rest += 1
            buf = buf[rest:]


def _starts_events(window: bytes, brace: int) -> bool:
    """Does an event start at ``brace``? What follows it, up to the window's last "}", must read as whole
    events, or as their beginning (the window may end inside an event). A "{" inside an event (an object in
    a list in its args, a "},{" in a string) fails: the text soon closes what it never opened."""
    framed = b"[" + window[brace : window.rfind(b"}") + 1] + b"]"
    try:
        _RAW_EVENTS.decode(framed)
    except msgspec.DecodeError as exc:
        message = str(exc)
        if "trailing characters" in message:  # a "]" in the text closed the events' array
            return False
        found = _AT_BYTE.search(message)
        return found is None or int(found.group(1)) >= len(framed) - 1  # not JSON only where it was cut
    except RecursionError:
        return False
    return True


def _bad_event(raw: bytes, exc: msgspec.DecodeError) -> str:
    """One line: what is wrong with the event ``raw`` (msgspec's words, its path made relative to the
    event), and its start."""
    problem = str(exc).replace("`$[0]", "`event")
    text = " ".join(raw[:_SNIPPET].decode("utf-8", "replace").split())  # one line, however it was indented
    return f"an event of the wrong shape ({problem}): {text}{'...' if len(raw) > _SNIPPET else ''}"


def iter_chunks(path: str | Path, block: int = DEFAULT_BLOCK) -> tuple[TraceReader, Iterator[TraceChunk]]:
    """``reader, chunks = iter_chunks(path)``; after consuming ``chunks``, ``reader.meta`` holds the keys."""
    reader = TraceReader(path, block)
    return reader, iter(reader)


def load_trace(path: str | Path, keep: Callable[[Event], bool] | None = None) -> Trace:
    """Load a Kineto/Chrome trace (``.json`` or ``.json.gz``).

    Returns ``Trace(events, meta)``; ``events`` are :class:`Event` structs in file order, ``meta`` the
    top-level keys besides ``traceEvents``. With ``keep``, only events for which ``keep(event)`` is true are
    kept and their ``args`` are copied out of the read buffer, so memory is proportional to what is kept
    (pass e.g. ``lambda e: e.cat == "python_function"``). Without it every event is kept and memory is
    about twice the uncompressed size. Raises :class:`TraceError` (``kind``: missing / truncated / corrupt).
    """
    reader = TraceReader(path)
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
    return Trace(Path(path), events, reader.meta)
