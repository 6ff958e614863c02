"""Same-length repairs of trace text that JSON decoders refuse though a profiler wrote it (docs/formats.md,
"Names torch did not escape" and "Values torch wrote that are no JSON").

The trace reader (:mod:`npuprof.analysis.trace_loader`) decodes a chunk of events whole; only a chunk that
fails to decode comes here, so a valid trace costs nothing. Each repair rewrites the chunk's bytes with text
of exactly the same length, so every offset the reader holds into the chunk (event boundaries, the bytes each
event came from) stays right:

* :func:`repaired_strings` -- unpaired UTF-16 surrogate escapes and bytes that are not UTF-8;
* :func:`repaired_values` -- old releases' values that are no JSON (inf/nan/N/A bandwidths, unescaped
  backslashes), ``"cat": null``, a ``ts`` or ``dur`` of NaN or Infinity (its event then left out), and an
  arg of NaN or Infinity (read as unknown);
* :func:`repaired_names` -- event names Kineto's writer left with a '"' or a control character unescaped.

Each returns the rewritten text and how many it changed (None when nothing needed it); the ``*_note``
functions say it in one line for the reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

# strings msgspec refuses though Python's json reads them: an unpaired UTF-16 surrogate escape (a path with
# bytes that are not UTF-8, written by Python's json.dump: "\udcff"), and bytes that are not UTF-8. Each is
# replaced by text of its own length ("\ufffd", "?"), so every offset into the chunk stays right.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")  # found by its literal "\u", fast
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, decoded with "surrogateescape"
# an event name as Kineto's C++ writer puts it, which escapes no '"' in it and, in torch 2.0, no control
# character (a Python frame of generated code: 'gen{"device": "cpu"}(2): f'; docs/formats.md, "Names torch
# did not escape"): the name is followed by its event's "pid", and what stands between is the name
_NAME_VALUE = re.compile(rb'"name"[ \t\r\n]*:[ \t\r\n]*"')
_NAME_ENDS = re.compile(rb'"[ \t\r\n]*(?:,[ \t\r\n]*"[^"\\\x00-\x1f]*"[ \t\r\n]*:|\})')  # then a key, or "}"
_NAME_BEFORE_PID = re.compile(rb'"[ \t\r\n]*,[ \t\r\n]*"pid"[ \t\r\n]*:')
_NAME_LIMIT = 1 << 16  # bytes a damaged name may hold before its "pid"
# values old releases of torch's Kineto wrote that are no JSON (docs/formats.md, "Values torch wrote that are
# no JSON"), each rewritten as JSON text of its own length, so every offset stays right; by kind:
# torch 1.8's "memory bandwidth (GB/s)" of a copy or memset of 0 µs: inf, nan or -nan (and N/A, unquoted, in
# the Kineto of March 2021); read as null (npuprof does not read it), the space after its ":" holding the 4th
# character of "null"
# a '\' torch's writer did not escape (a Windows path in a Python frame's name, before kineto#754): a
# backslash after an even run of them, before a character no JSON escape has; the string holding it is read
# with '/' for each of its backslashes (what Kineto writes since), but one before a '"' or a '\'
_BAD_ESCAPE = re.compile(rb'(?<!\\)(?:\\\\)*\\(?:[^"\\/bfnrtu]|u(?![0-9a-fA-F]{4}))')
_BANDWIDTH_NO_NUMBER = re.compile(
    rb'"memory bandwidth \(GB/s\)"[ \t\r\n]*:([ \t\r\n]+(?:-?nan|inf|N/A))(?=[ \t\r\n]*[,}])'
)
# NaN or Infinity, which Python's json.dump writes for a float nan or inf (torch never writes them), each
# rewritten as the string "?" padded with spaces (no room for null's 4 letters in a compact "k":NaN):
# - an event's "ts" or "dur" (a script that edited the trace): a time that is no number, so that event alone
#   is left out as damaged, as Perfetto drops it, not the trace;
# - an arg (a key's value or a list's element: a record_function's float arg, a tool's): an unknown value;
# - not a key's of the event's own (pid, tid, id...): a pid of "?" would read as a process of its own, so
#   those stay refused, named with their byte.
# Each NaN or Infinity is found with bytes.find and its key read backwards from it (a regex tried a match at
# every '"' of the chunk: 0.4 s for 18 MB); a key whose quotes are escaped is text inside a string, no key.
_NOT_A_NUMBER_TOKENS = (b"NaN", b"Infinity")
NOT_A_NUMBER = "?"  # what each is read as
_VALUE_ENDS = re.compile(rb"[ \t\r\n]*[,}\]]")
_KEY_LIMIT = 1 << 10  # bytes of a key read back from its value
_TIME_KEYS = frozenset((b"ts", b"dur"))
# a quote after 1 or 3 backslashes is escaped, after 2 not: counted as +1 -1 +1 (each run ends at its quote)
_ESCAPED_QUOTE_RUNS = ((1, b'\\"'), (-1, b'\\\\"'), (1, b'\\\\\\"'))
_EVENT_KEYS = frozenset((b"name", b"ph", b"cat", b"pid", b"tid", b"id", b"args", b"s", b"bp"))
# an event's "cat" of null (some exporters write it so): no category, as an event without one; read as "" and
# two spaces, silently (docs/formats.md, "Traces npuprof reads")
_NULL_CATEGORY = re.compile(rb'(?<=[{,])[ \t\r\n]*"cat"[ \t\r\n]*:[ \t\r\n]*(null)(?=[ \t\r\n]*[,}])')


def repaired_strings(framed: bytes | bytearray) -> tuple[bytearray, int] | None:
    """``framed`` with its unpaired surrogate escapes and its bytes that are not UTF-8 replaced by text of
    the same length (``\\ufffd``, ``?``), and how many; None when it has neither."""
    lone = _lone_surrogates(framed) if b"\\u" in framed else []
    text = bytearray(framed)
    for at in lone:
        text[at : at + 6] = rb"\ufffd"
    bad_bytes = 0
    if not text.isascii():  # in C: most traces, and most damage (helper-123), are ASCII
        decoded, bad_bytes = _ESCAPED_BYTE.subn("?", text.decode("utf-8", "surrogateescape"))
        if bad_bytes:
            text = bytearray(decoded.encode())
    if not lone and not bad_bytes:
        return None
    return text, len(lone) + bad_bytes


def repaired_names(framed: bytes | bytearray) -> tuple[bytearray, int] | None:
    """``framed`` with each event name that Kineto's writer left unescaped (a '"' or a control character in
    it) read up to its event's ``"pid"``, those characters replaced by ``'`` and a space (text of the same
    length), and how many names; None when no name needed it."""
    text: bytearray | None = None
    names = 0
    at = 0
    while found := _NAME_VALUE.search(framed, at):
        start = at = found.end()
        close = _closing_quote(framed, start)
        if close >= 0 and _NAME_ENDS.match(framed, close) and not _has_control(framed, start, close):
            at = close + 1
            continue
        end = _NAME_BEFORE_PID.search(framed, start, start + _NAME_LIMIT)
        if end is None:
            continue
        stop = end.start()
        value = bytearray(framed[start:stop])
        changed = False
        k = 0
        while k < len(value):
            byte = value[k]
            if byte == 0x5C:  # "\\": an escape, kept with the character it escapes
                k += 2
                continue
            if byte == 0x22 or byte < 0x20:
                value[k] = 0x27 if byte == 0x22 else 0x20
                changed = True
            k += 1
        if changed:
            if text is None:
                text = bytearray(framed)
            text[start:stop] = value
            names += 1
        at = stop + 1
    return (text, names) if text is not None else None


def _overwritten(
    framed: bytes | bytearray, text: bytearray | None, pattern: re.Pattern[bytes], value: bytes
) -> tuple[bytearray | None, int]:
    """``text`` (a copy of ``framed`` made at the first match) with each match's group 1 in ``framed``
    overwritten by ``value``, padded with spaces to the same length; and how many were."""
    count = 0
    for found in pattern.finditer(framed):
        if text is None:
            text = bytearray(framed)
        start, end = found.span(1)
        text[start:end] = value.ljust(end - start)
        count += 1
    return text, count


def _not_numbers_overwritten(
    framed: bytes | bytearray, text: bytearray | None
) -> tuple[bytearray | None, dict[str, int]]:
    """``text`` (a copy of ``framed`` made at the first one, or ``framed`` with other repairs) with each time
    and each arg of NaN or Infinity overwritten by ``"?"`` padded with spaces; and how many of each kind."""
    source = text if text is not None else framed
    found = sorted(one for token in _NOT_A_NUMBER_TOKENS for one in _not_numbers(source, token))
    found = list(_outside_strings(source, found))
    if found and text is None:
        text = bytearray(framed)
    counts: dict[str, int] = {}
    for start, end, kind in found:
        text[start:end] = f'"{NOT_A_NUMBER}"'.encode().ljust(end - start)  # type: ignore[index]
        counts[kind] = counts.get(kind, 0) + 1
    return text, counts


def _outside_strings(
    text: bytes | bytearray, found: list[tuple[int, int, str]]
) -> Iterator[tuple[int, int, str]]:
    """The ones of ``found`` (in order) that stand outside a string: a list's element (after "[" or ",") may
    be text inside one ("a,NaN,b"), which the key read back does not rule out. The quotes before each are
    counted from the last one's place (C-speed bytes.count), less the escaped ones (after an odd run of
    backslashes, up to three: '\\"', '\\\\\\"'; a longer run, in a string, is rarer than rare)."""
    quotes, counted = 0, 0
    for start, end, kind in found:
        escaped = sum(sign * text.count(run, counted, start) for sign, run in _ESCAPED_QUOTE_RUNS)
        quotes += text.count(b'"', counted, start) - escaped
        counted = start
        if quotes % 2 == 0:
            yield start, end, kind


def _not_numbers(text: bytes | bytearray, token: bytes) -> Iterator[tuple[int, int, str]]:
    """Where ``token`` (NaN, Infinity) stands in ``text`` as a time's or an arg's value, with its "-": (start,
    end, its kind)."""
    at = 0
    found: list[tuple[int, int, bytes | None]] = []
    while (at := text.find(token, at)) >= 0:
        start, end = at, at + len(token)
        at = end
        if _VALUE_ENDS.match(text, end) is None:
            continue
        if token == b"Infinity" and start and text[start - 1] == 0x2D:  # "-"
            start -= 1
        key = _key_of_value_at(text, start)
        if key is not False:
            found.append((start, end, key))
    # a key named as an event's own (ts, pid...) is one only at the event's level: in its args ({"ts": NaN},
    # a tool's) it is an arg like any other (helper-351: the whole trace was refused for {"pid": NaN}, and
    # {"ts": NaN} was said an event's time, its event "left out", which it was not)
    own = [start for start, _end, key in found if key in _EVENT_KEYS or key in _TIME_KEYS]
    levels = dict(zip(own, _depths(text, own), strict=True)) if own else {}
    events_at = 2 if text.lstrip(b" \t\r\n")[:1] == b"[" else 1  # the depth of an event's own keys
    for start, end, key in found:
        if start not in levels or levels[start] != events_at:
            yield start, end, ARG_NOT_A_NUMBER
        elif key in _TIME_KEYS:
            yield start, end, TIME_NOT_A_NUMBER


def _key_of_value_at(text: bytes | bytearray, start: int) -> bytes | bool | None:
    """The key whose value starts at ``start``; None for a list's element (after "[" or ","); False for
    anything else (no value that is a key's or a list's)."""
    before = _before_space(text, start)
    if before < 0:
        return False
    if text[before] in b"[,":
        return None
    if text[before] != 0x3A:  # ":"
        return False
    close = _before_space(text, before)
    if close < 1 or text[close] != 0x22 or text[close - 1] == 0x5C:  # no '"' ending a key, or an escaped one
        return False
    opening = text.rfind(b'"', max(0, close - _KEY_LIMIT), close)
    key = bytes(text[opening + 1 : close])
    if opening < 0 or b"\\" in key or (opening and text[opening - 1] == 0x5C):
        return False
    return key


def _depths(text: bytes | bytearray, positions: list[int]) -> list[int]:
    """How deep in objects and arrays each of ``positions`` (outside strings, in order) of ``text`` is: the
    "{" and "[" outside strings before it, less the "}" and "]". Asked only for a NaN under a key named as
    an event's own."""
    marks, depth = structure_marks(np.frombuffer(bytes(text), np.uint8))
    before = np.searchsorted(marks, np.asarray(positions)) - 1  # the last mark before each position
    return np.where(before >= 0, depth[np.maximum(before, 0)], 0).tolist()


def structure_marks(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the "{", "}", "[" and "]" outside strings of ``data`` (a JSON text's bytes) are, and the nesting
    after each. In passes over arrays, not a step per byte: a quote after an odd run of backslashes is in a
    string."""
    quotes = np.flatnonzero(data == 0x22)
    slashes = np.flatnonzero(data == 0x5C)
    if len(quotes) and len(slashes):
        runs = slashes[np.r_[True, np.diff(slashes) > 1]]  # where each run of backslashes starts
        before = quotes - 1
        run = np.searchsorted(runs, before, side="right") - 1
        escaped = (before >= 0) & (data[np.maximum(before, 0)] == 0x5C)
        length = np.where(escaped, before - runs[np.maximum(run, 0)] + 1, 0)
        quotes = quotes[length % 2 == 0]
    marks = np.flatnonzero((data == 0x7B) | (data == 0x7D) | (data == 0x5B) | (data == 0x5D))
    marks = marks[np.searchsorted(quotes, marks) % 2 == 0]  # outside strings: an even count of quotes before
    return marks, np.cumsum(np.where((data[marks] == 0x7B) | (data[marks] == 0x5B), 1, -1))


def _before_space(text: bytes | bytearray, at: int) -> int:
    """The last byte before ``at`` that is no JSON whitespace (-1 when none)."""
    at -= 1
    while at >= 0 and text[at] in b" \t\r\n":
        at -= 1
    return at


def repaired_values(framed: bytes | bytearray) -> tuple[bytearray, dict[str, int]] | None:
    """``framed`` with the values old releases of torch's Kineto wrote that are no JSON (the regexes above)
    rewritten as JSON text of the same length, and how many of each kind (an event's "cat" of null, read as
    "", is counted as none); None when it has none of them."""
    text: bytearray | None = None
    counts: dict[str, int] = {}
    if b"memory bandwidth (GB/s)" in framed:
        text, found = _overwritten(framed, text, _BANDWIDTH_NO_NUMBER, b"null")
        if found:
            counts[BANDWIDTH] = found
    if b"NaN" in framed or b"Infinity" in framed:
        text, kinds = _not_numbers_overwritten(framed, text)
        counts.update(kinds)
    if b"null" in framed:
        text, _ = _overwritten(framed, text, _NULL_CATEGORY, b'""')
    at = 0
    while b"\\" in framed and (found := _BAD_ESCAPE.search(text if text is not None else framed, at)):
        if text is None:
            text = bytearray(framed)
        bad = found.end() - 2  # the backslash that escapes nothing
        start = text.rfind(b'"', max(0, bad - _NAME_LIMIT), bad) + 1  # the string holding it
        end = text.find(b'"', bad + 2, bad + _NAME_LIMIT)
        end = end if end >= 0 else bad + 2
        value = text[start:end]
        for k in range(len(value) - 1):
            if value[k] == 0x5C and value[k + 1] not in (0x22, 0x5C):  # not before a '"' or a '\'
                value[k] = 0x2F
        text[start:end] = value
        counts[BACKSLASH] = counts.get(BACKSLASH, 0) + 1
        at = max(end, bad + 2)
    return (text, counts) if text is not None else None


def _closing_quote(text: bytes | bytearray, start: int) -> int:
    """The first '"' at or after ``start`` that no backslash escapes (-1 when none)."""
    at = start
    while (at := text.find(b'"', at)) >= 0:
        run = at
        while run > start and text[run - 1] == 0x5C:
            run -= 1
        if (at - run) % 2 == 0:
            return at
        at += 1
    return -1


def _has_control(text: bytes | bytearray, start: int, end: int) -> bool:
    return any(byte < 0x20 for byte in text[start:end])


def _lone_surrogates(text: bytes | bytearray) -> list[int]:
    """Where the unpaired UTF-16 surrogate escapes of ``text`` begin: a high one not followed at once by a
    low one, a low one not preceded at once by a high one; an escape after an odd run of backslashes is a
    backslash's escape and text (``\\\\ud800``), not a surrogate."""
    lone: list[int] = []
    pending: int | None = None  # a high escape whose low may follow
    for match in SURROGATE_ESCAPE.finditer(text):
        at = match.start()
        run = at
        while run > 0 and text[run - 1] == 0x5C:  # "\\"
            run -= 1
        if (at - run) % 2:
            continue
        high = text[at + 3] in b"89abAB"
        if pending is not None:
            if not high and at == pending + 6:
                pending = None
                continue
            lone.append(pending)
            pending = None
        if high:
            pending = at
        else:
            lone.append(at)
    if pending is not None:
        lone.append(pending)
    return lone


def unescaped_note(count: int) -> str:
    """What a reader says of the names Kineto wrote with a '"' or a control character unescaped
    (TraceReader.repaired_names)."""
    return (
        f"{count} event name(s) hold a '\"' or a control character that torch's trace writer did not escape "
        "(a Python frame of generated code?): read with ' and a space in their place"
    )


def not_text_note(count: int) -> str:
    """What a reader says of the characters it read as U+FFFD / "?" (TraceReader.repaired_strings)."""
    return (
        f"{count} character(s) in the trace's strings are not text (unpaired UTF-16 surrogate escapes, or "
        "bytes that are not UTF-8: a name or path made of undecodable bytes): read as U+FFFD and '?'"
    )


BANDWIDTH = "bandwidth"  # kinds of values torch wrote that are no JSON (repaired_values; unwritten_notes)
BACKSLASH = "backslash"
TIME_NOT_A_NUMBER = "time not a number"
ARG_NOT_A_NUMBER = "arg not a number"
_UNWRITTEN = {
    ARG_NOT_A_NUMBER: (
        "{n} arg value(s) are NaN or Infinity, which is no JSON (Python's json.dump of a float nan or inf: a "
        "record_function's or a tool's arg?): read as unknown (the string \"?\"); an event whose figures "
        "need that value (a [memory] event's Bytes) is left out, counted with the damaged ones; an External "
        "id or correlation so links its event to none"
    ),
    TIME_NOT_A_NUMBER: (
        "{n} event(s) have a ts or dur of NaN or Infinity, which is no JSON (Python's json.dump of a float "
        "nan or inf: a script's edit of the trace?): those events are left out, counted with the damaged "
        'ones (their time read as "?"), the rest of the trace read as written'
    ),
    BANDWIDTH: (
        '{n} copy or memset event(s) have a "memory bandwidth (GB/s)" of inf, nan or N/A, which is no '
        "JSON (torch 1.8's trace writer, for a copy of 0 µs: kineto#110, kineto#129): read as absent "
        "(npuprof does not use it)"
    ),
    BACKSLASH: (
        "{n} string(s) hold a '\\' that torch's trace writer did not escape (a Windows path in a Python "
        "frame's name, torch < 2.1: pytorch#98432, kineto#754): read with '/' in its place, as torch writes "
        "it since"
    ),
}


def unwritten_notes(counts: dict[str, int]) -> list[str]:
    """What a reader says of the values torch wrote that are no JSON (TraceReader.repaired_values): one
    line per kind."""
    return [_UNWRITTEN[kind].format(n=n) for kind, n in sorted(counts.items()) if n]


# A Python frame's name ("file(line): function") whose file is a Windows path starting with a drive letter,
# with a control character before its line number: torch < 2.1 wrote the path's '\' unescaped, and a '\'
# before t, n, r, b or f made a JSON escape (docs/formats.md, "Values torch wrote that are no JSON")
_DRIVE_PATH_READ_AS_ESCAPES = re.compile(r"[A-Za-z]:[^\n\t\r\b\f]*[\n\t\r\b\f].*?\(\d+\): ", re.DOTALL)
_ESCAPE_LETTERS = str.maketrans({"\t": "/t", "\n": "/n", "\r": "/r", "\b": "/b", "\f": "/f"})


def mended_frame_name(name: str) -> str:
    """``name`` with each control character of a Windows path its Python frame holds written back as the
    '\\' and letter torch wrote (``C:\\tmp\\new.py``, read as JSON gives a tab and a newline), with '/' for
    the '\\' as later torch writes it and as the other repairs read it: no Windows path holds a control
    character. Any other name is returned as it is."""
    if name.isprintable():
        return name
    found = _DRIVE_PATH_READ_AS_ESCAPES.match(name)
    if found is None:
        return name
    return name[: found.end()].translate(_ESCAPE_LETTERS) + name[found.end() :]
