"""A trace cut short: where its last complete event ends (docs/formats.md, "Traces cut short").

A job killed while torch or torch_npu wrote its trace (their writes are not atomic), a copy interrupted or a
full disk leave a trace whose JSON never closes. The Trace Event Format lets the events' array go unclosed
for that reason, and Perfetto reads such a file: every reader of npuprof reads the complete events before
the cut and says where the trace was cut. Only a text that is a beginning of JSON cut short is read so
(msgspec stops at its very end); other bytes after the JSON, or JSON that stops being JSON before its end,
are refused as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec
import numpy as np

from npuprof.analysis.trace_repairs import repaired_names, repaired_strings, repaired_values, structure_marks

__all__ = ["CUT_TRIES", "Cut", "cut_in", "is_cut_short", "last_boundary", "mended", "value_ends"]

_RAW = msgspec.json.Decoder(msgspec.Raw)
_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")
_TRAILING_AT = re.compile(r"trailing characters \(byte (\d+)\)")
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")  # between two events: "},{"
# the last "},{" of a text: the greedy ".*" takes all of it, then the regex engine backs off from its end
# a byte at a time (skipping to each "}") until a "},{" follows; so the search costs the bytes after the
# last one, not a step per "},{" before it (a string of megabytes of "{}, {}, ..." has one every 4 bytes)
_LAST_BOUNDARY = re.compile(rb"(?s).*(\}[ \t\r\n]*,[ \t\r\n]*\{)")
BOUNDARY_SLACK = 4096  # room after a "}" for the "," and "{" of its boundary (whitespace)
_WS = b" \t\r\n"
CUT_TRIES = 8  # "},{" before the cut tried one by one (then the text's own structure says where)


@dataclass
class Cut:
    """Where a trace cut short ends: ``size`` bytes of text (decompressed; ``nuls`` NUL bytes at its end
    included), the last complete event ending at ``events_end``; ``in_keys``: the events' array closed and
    the cut is in the keys after it (a Kineto trace); ``last_ts``: the ``ts`` of the last event read that
    has one (as the reader gives times), or None; ``base_lost``: a Kineto trace whose baseTimeNanoseconds
    was to come after its events (older torch releases), so its times are not epoch times; ``after_ops``:
    that last event is one of the parts a Kineto trace writes after every operator, ``"memory"`` (its
    ``[memory]`` events) or ``"python"`` (its Python functions, after those), else "" (docs/formats.md,
    "Traces cut short")."""

    size: int
    events_end: int
    in_keys: bool = False
    last_ts: float | None = None
    nuls: int = 0
    base_lost: bool = False  # the Kineto trace's baseTimeNanoseconds came after the cut: times not epoch
    after_ops: str = ""

    def note(self, events: int) -> str:
        """One line for the user: where the trace was cut, what was read and what that means."""
        where = (
            "after its events' array closed, in the keys after it (traceName, ...: not read)"
            if self.in_keys
            else "inside its events"
        )
        zeros = f" ({self.nuls} NUL bytes at its end: a write cut short by a crash or a full disk)"
        return (
            f"the trace is cut short: it ends after {self.size - self.nuls} bytes, {where}, before its JSON "
            f"closes{zeros if self.nuls else ''}; read the {events} complete event(s) before the cut, up to "
            f"byte {self.events_end} (a job killed while it wrote the trace, a copy cut short, a full disk?)"
            + (
                "; its baseTimeNanoseconds, which this torch writes after the events, was cut off: its times "
                "are µs after an unknown base, not epoch times"
                if self.base_lost
                else ""
            )
        )


def is_cut_short(text: bytes | bytearray) -> bool:
    """Whether ``text`` is the beginning of one JSON value cut short: msgspec stops only at its end."""
    try:
        _RAW.decode(text)
    except msgspec.DecodeError as exc:
        message = str(exc)
        if message == "Input data was truncated":  # in a string, a literal, or between values
            return True
        found = _AT_BYTE.search(message)  # a number cut after its "-", "." or exponent: its last byte
        return "trailing" not in message and found is not None and int(found.group(1)) >= len(text)
    except RecursionError:
        return False
    return False


def cut_in(body: bytes, kineto: bool) -> tuple[int, bool] | None:
    """:func:`_cut_in` of ``body``, or of it mended by the same-length repairs of
    ``analysis/trace_repairs.py`` (NaN, bytes that are not UTF-8, names Kineto did not escape: msgspec
    refuses them before the cut, and the reader mends them as it reads)."""
    found = _cut_in(body, kineto)
    if found is not None:
        return found
    repaired = mended(body)
    found = _cut_in(repaired, kineto) if repaired != body else None
    if found is not None:
        return found
    before = _before_cut_token(body)
    return cut_in(body[:before], kineto) if before is not None else None


_NOT_A_NUMBER_WORDS = (b"NaN", b"Infinity", b"-Infinity")  # what Python's json.dump writes for them


def _before_cut_token(body: bytes) -> int | None:
    """Where a NaN or Infinity a script wrote, that ``body`` ends in (cut inside it, or right after it
    before what ends a value), starts: the repairs mend only one that is followed by what ends a value,
    and msgspec refuses its first letter; None when ``body`` ends in no such token after a ":", "," or "["."""
    end = len(body.rstrip(_WS))
    start = end
    while start > 0 and start > end - 9 and (body[start - 1 : start].isalpha() or body[start - 1] == 0x2D):
        start -= 1
    token = body[start:end]
    if not token or not any(word.startswith(token) for word in _NOT_A_NUMBER_WORDS) or token == b"-":
        return None
    before = body[:start].rstrip(_WS)
    return start if before[-1:] in (b":", b",", b"[") else None


def mended(text: bytes) -> bytes:
    """``text`` with the same-length repairs of ``analysis/trace_repairs.py`` made (the reader's own)."""
    repaired = repaired_strings(text)
    out = repaired[0] if repaired else text
    valued = repaired_values(out)
    out = valued[0] if valued else out
    named = repaired_names(out)
    return bytes(named[0] if named else out)


def _cut_in(body: bytes, kineto: bool) -> tuple[int, bool] | None:
    """``body``: a trace's text from its first event (or from an event where the events before it were
    read) to its end, NUL bytes at the end left off. When it is events cut short: (the end of its last
    complete event in ``body``, 0 when none; whether the cut is in the keys after the events' array, which
    only a Kineto trace has). None when it is no trace cut short: closed JSON, other bytes after the JSON,
    text that stops being JSON before its end."""
    framed = b"[" + body
    try:
        _RAW_EVENTS.decode(framed)
    except msgspec.DecodeError as exc:
        message = str(exc)
    except RecursionError:
        return None
    else:  # the events' array closes at the end: a Kineto trace cut right after it, before its "}"
        if not kineto:
            return None
        bracket = body.rstrip(_WS).rfind(b"]")
        return _end_before(body, bracket), True
    trailing = _TRAILING_AT.search(message)
    if trailing is not None:  # the events' array closed (its "]" is at or before the byte said)
        if not kineto:
            return None
        bracket = body.rfind(b"]", 0, int(trailing.group(1)))
        tail = body[bracket + 1 :].strip(_WS)
        if tail[:1] != b"," or not is_cut_short(b"{" + tail[1:]):
            return None
        return _end_before(body, bracket), True
    if not is_cut_short(framed):
        return None
    last = _end_before(body, len(body))
    if last > 0 and body[last - 1] == 0x2C:  # "},": cut right after an event's comma
        last = _end_before(body, last - 1)
    if last > 0 and body[last - 1] == 0x7D and _whole(body[:last]):  # cut right after an event
        return last, False
    end = len(body)
    for _ in range(CUT_TRIES):
        close = last_boundary(body, end)
        if close < 0:
            return 0, False  # not one event complete
        # "[" + body being JSON cut short, events that close here are the array's: their end
        if _whole(body[: close + 1]):
            return close + 1, False
        end = close
    # more "},{" in the event the cut went through (a list of objects in its args, a string of
    # "{}, {}, ..."): where JSON closes the array's values, read from the text's quotes and brackets
    for close in reversed(value_ends(body[:end]).tolist()):
        if _BOUNDARY.match(body, close) is not None:
            return (close + 1, False) if _whole(body[: close + 1]) else None
    return 0, False


def last_boundary(buf: bytes | bytearray, end: int) -> int:
    """The index of the "}" of the last "},{" whose "}" lies before ``end`` (-1 when none), found by the
    regex engine from the end back: a value full of "}" or of "},{" costs no Python step per byte."""
    stop = min(len(buf), end + BOUNDARY_SLACK)
    while (found := _LAST_BOUNDARY.match(buf, 0, stop)) is not None:
        if found.start(1) < end:
            return found.start(1)
        stop = found.start(1)  # one "},{" starting after end: those before it end before its "}"
    return -1


def value_ends(text: bytes) -> np.ndarray:
    """Where the objects of ``text`` (JSON values after a "[", separated by ",", cut short: the caller has
    the decoder say so) close: the "}"s outside strings that bring the nesting back to the array's."""
    data = np.frombuffer(text, np.uint8)
    marks, depth = structure_marks(data)
    return marks[(depth == 0) & (data[marks] == 0x7D)]


def _whole(events: bytes) -> bool:
    try:
        _RAW_EVENTS.decode(b"[" + events + b"]")
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


def _end_before(text: bytes, end: int) -> int:
    """The index just past the last byte before ``end`` that is not white space (0 when none)."""
    return len(text[:end].rstrip(_WS))
