"""The raw trace's events as trace_view.json holds them (docs/formats.md, "What the parser writes").

Each event keeps its fields as written (``args`` and ``dur`` as their JSON text; fields the Chrome trace
format does not define dropped), re-encoded compactly by msgspec in one order; ``ts`` becomes a string of
epoch microseconds with nanosecond decimals (``"1704161511420306.491"``: the trace's time plus Kineto's
``baseTimeNanoseconds``, added exactly); ``ProfilerStep#N`` becomes a ``cpu_op``; an operator gets
``args["Call stack"]`` when its stack was rebuilt from the ``python_function`` spans. Dropped: Kineto's
own metadata, its ``Spans`` bookkeeping (whose pid is a string), and the ``Overlap Analysis`` process of a
trace torch_npu wrote (trace_view appends its own lanes).

Speed: a chunk of ~2,000 events is rewritten with a few C-level passes (``map``, numpy, one msgspec decode
into structs typed by phase, one encode); the times of the usual texts (Kineto's ``%d.%03d``, torch_npu's
epoch strings) are converted as arrays, others through :func:`ts_texts`; the operators' stacks are found
by array search (:class:`Stacks`). The two halves of a trace can be written by two forked processes
(:class:`SplitBody`): cut where a serial read cuts its chunks (``,\n`` joins chunks), the file is the same.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import re
import tempfile
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.extract import SCAN_DECODER, Extract, positions
from npuprof.analysis.forked import Forked
from npuprof.analysis.scan import BLOCK  # the scan's chunks: its cuts are the body's (split_point)
from npuprof.analysis.tables import ns_of_texts, us_texts
from npuprof.analysis.trace_loader import TraceReader, raw_ts_is_no_time

MIN_SPLIT = 8 << 20  # bytes of events below which one process writes them all
OVERLAP_PROCESS_RE = re.compile(r"(?i)^\s*overlap analysis\s*$")
UNSET = msgspec.UNSET


class _Event(msgspec.Struct, omit_defaults=True, gc=False):
    """One raw event, every field kept as written (``args``, ``dur`` and ``ts`` as their JSON text);
    ``ts`` is rewritten (to a str). Fields the Chrome trace format does not define are dropped."""

    ph: Any = UNSET
    cat: Any = UNSET
    name: Any = UNSET
    pid: Any = UNSET
    tid: Any = UNSET
    ts: msgspec.Raw | msgspec.UnsetType = UNSET
    dur: msgspec.Raw | msgspec.UnsetType = UNSET
    id: Any = UNSET
    bp: Any = UNSET
    s: Any = UNSET
    cname: Any = UNSET
    args: msgspec.Raw | msgspec.UnsetType = UNSET


class _Phased(msgspec.Struct, tag_field="ph", omit_defaults=True, gc=False):
    """:class:`_Event` by its phase (the tag, encoded first as ``ph`` is), with an integer pid: a chunk
    decoded so needs no look at the phases and pids of its events. One subclass per phase."""

    cat: Any = UNSET
    name: Any = UNSET
    pid: int | msgspec.UnsetType = UNSET
    tid: Any = UNSET
    ts: msgspec.Raw | msgspec.UnsetType = UNSET
    dur: msgspec.Raw | msgspec.UnsetType = UNSET
    id: Any = UNSET
    bp: Any = UNSET
    s: Any = UNSET
    cname: Any = UNSET
    args: msgspec.Raw | msgspec.UnsetType = UNSET


class _Meta(_Phased, tag="M", omit_defaults=True, gc=False):
    pid: Any = UNSET  # dropped whatever it is


_PHASED = {
    ph: msgspec.defstruct(f"_Phase{ph}", [], bases=(_Phased,), tag=ph, omit_defaults=True, gc=False)
    for ph in "XBEiIbnestfPONDCRc"  # the Chrome trace format's phases but "M"
}
_PHASE_KIND: dict[type, int] = {_PHASED["X"]: 1, _Meta: 2}
# decodes chunks whose events have a known phase and an integer pid, else _DECODER does
_TYPED = msgspec.json.Decoder(list[functools.reduce(operator.or_, (*_PHASED.values(), _Meta))])  # type: ignore[misc]
_DECODER = msgspec.json.Decoder(list[_Event])
_ENC = msgspec.json.Encoder()
_INTS = msgspec.json.Decoder(list[int])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_FLOATS = msgspec.json.Decoder(list[float])
_PH, _CAT, _NAME, _PID, _TS = (
    attrgetter("ph"),
    attrgetter("cat"),
    attrgetter("name"),
    attrgetter("pid"),
    attrgetter("ts"),
)
_PIDTID = attrgetter("pid", "tid")
# by category: what the Extract counts as an operator (which may get a Call stack), and the steps' one
_OP, _ANNOT = 1, 2
_KIND_OF_CAT = {
    vocab.CPU_OP: _OP,
    **{k: _OP for k, v in vocab.OLD_NAMES.items() if v == vocab.CPU_OP},
    vocab.USER_ANNOTATION: _ANNOT,
}
_X, _META = 1, 2
_KIND_OF_PH = {"X": _X, "M": _META}
_LEADING_ZEROS = re.compile(rb"(^|,)0+(?=\d)")


@dataclass
class Body:
    """What writing the events learnt: the threads ``(pid, tid)`` in order of first appearance, and
    whether any event was written."""

    threads: list[tuple[Any, Any]] = field(default_factory=list)
    wrote: bool = False

    def then(self, later: Body) -> Body:
        """This part of the trace followed by ``later``."""
        return Body(list(dict.fromkeys([*self.threads, *later.threads])), self.wrote or later.wrote)


class Stacks:
    """The Call stacks rebuilt for the operators (call_stacks.call_stacks: per operator an index into
    ``x.strings``, -1 for none), found by the operator's thread and start as the trace wrote them: a stack
    depends on nothing else, so the events need no counting to find theirs. Of two operators of a thread
    that start together, the later one's counts. Arrays, searched a chunk of operators at a time."""

    def __init__(self, x: Extract, added: np.ndarray) -> None:
        self.texts = x.strings
        self.thread_of = dict(x.threads)
        ops = np.flatnonzero(added >= 0)
        thread = np.frombuffer(x.op_thread, dtype=np.int32)[ops].astype(np.int64)
        ts = np.frombuffer(x.op_ts, dtype=np.float64)[ops]
        order = np.lexsort((ops, ts, thread))
        last = np.ones(len(order), bool)  # the last of each (thread, start)
        last[:-1] = (thread[order][1:] != thread[order][:-1]) | (ts[order][1:] != ts[order][:-1])
        order = order[last]
        self.thread, self.ts, self.text = thread[order], ts[order], added[ops[order]]
        self.bounds = np.searchsorted(self.thread, np.arange(len(self.thread_of) + 1))
        self._prefix: dict[int, bytes] = {}  # a stack's '{"Call stack":"..."' by its text, made once

    def __bool__(self) -> bool:
        return bool(len(self.text))

    def add_to(self, events: list[Any]) -> None:
        """Give the operator ``events`` of a chunk their stacks."""
        try:
            threads = np.fromiter(
                map(self.thread_of.get, map(_PIDTID, events), repeat(-1)), np.int64, len(events)
            )
            starts = np.array(_FLOATS.decode(b"[" + b",".join(map(_TS, events)) + b"]"), dtype=np.float64)
        except (TypeError, msgspec.DecodeError):  # no ts, a string one, an unhashable pid: one at a time
            for event in events:
                text = self.get(event)
                if text:
                    _add_call_stack(event, text)
            return
        found = np.full(len(events), -1, np.int64)
        for t in np.unique(threads[threads >= 0]).tolist():
            lo, hi = self.bounds[t], self.bounds[t + 1]
            if lo == hi:
                continue
            mine = np.flatnonzero(threads == t)
            pos = np.minimum(np.searchsorted(self.ts[lo:hi], starts[mine]) + lo, hi - 1)
            hit = self.ts[pos] == starts[mine]
            found[mine[hit]] = self.text[pos[hit]]
        hits = np.flatnonzero(found >= 0).tolist()
        if hits:
            prefix = self._prefix
            for k, text in zip(hits, found[hits].tolist(), strict=True):
                head = prefix.get(text)
                if head is None:
                    head = prefix[text] = b'{"Call stack":' + _ENC.encode(self.texts[text])
                _add_encoded_stack(events[k], head)

    def get(self, event: Any) -> str | None:
        """The stack of one operator event, or None."""
        try:
            t = self.thread_of.get((event.pid, event.tid), -1)
            start = float(bytes(event.ts))
        except (TypeError, ValueError):  # no ts, or torch_npu's string one: no stack to add
            return None
        if t < 0 or self.bounds[t] == self.bounds[t + 1]:
            return None
        lo, hi = self.bounds[t], self.bounds[t + 1]
        pos = min(int(np.searchsorted(self.ts[lo:hi], start)) + lo, hi - 1)
        return self.texts[self.text[pos]] if self.ts[pos] == start else None


def overlap_pids(x: Extract) -> frozenset[Any]:
    """The processes of the trace named ``Overlap Analysis`` (a trace torch_npu wrote carries its own)."""
    return frozenset(pid for pid, name in x.process_names.items() if OVERLAP_PROCESS_RE.match(name))


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write all of ``data``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_body(
    out_fd: int,
    path: Path,
    fd: int,
    start: int,
    end: int,
    base_ns: int,
    stacks: Stacks | None,
    drop: frozenset[Any] = frozenset(),
    opening: bool = True,
    damaged: bool = False,
) -> Body:
    """Write the raw events between offsets ``start`` and ``end`` of the plain trace open at ``fd``,
    rewritten (see the module's doc), to ``out_fd``, after ``[`` when ``opening``; chunks are joined by
    ``,\\n``. ``stacks``: the Call stack to add to the operators (:class:`Stacks`), or None;
    ``drop``: pids whose events are left out; ``damaged``: the scan left damaged events out (Extract.damaged),
    so are they here (:func:`_undamaged`)."""
    body = Body()
    seen: dict[tuple[Any, Any], None] = {}
    if opening:
        write_all(out_fd, b"[\n")
    reader = TraceReader(path, block=BLOCK, fd=fd, decoder=_TYPED, fallback=_DECODER)
    for chunk in reader.iter_range(start, end) if end > start else ():
        events = _undamaged(chunk.events, chunk.text) if damaged else chunk.events
        kept = _rewrite(events, base_ns, stacks, drop) if events else []
        if not kept:
            continue
        seen.update(dict.fromkeys(map(_PIDTID, kept)))
        data = memoryview(_ENC.encode(kept))[1:-1]
        if body.wrote:
            write_all(out_fd, b",\n")
        write_all(out_fd, data)
        body.wrote = True
    body.threads = [key for key in seen if UNSET not in key]  # an event may lack its pid or tid
    return body


def _undamaged(events: list[Any], text: memoryview) -> list[Any]:
    """The events of a chunk (decoded from ``text``) that the scan reads: those it left out as damaged
    (a ``pid`` that is an object, a ``dur`` that is a string: docs/formats.md, "Damaged events") are left
    out of trace_view.json too, and so are those whose ``ts`` is a string that is no time and the complete
    events without a ``ts`` or a ``dur`` (said by analyse as left out). Only a trace the scan found damaged
    is checked so."""
    framed = b"[" + bytes(text) + b"]"
    try:
        SCAN_DECODER.decode(framed)
    except msgspec.DecodeError:
        pass
    else:
        timeless = list(map(_no_time, events))
        return [e for e, no in zip(events, timeless, strict=True) if not no] if any(timeless) else events
    raws = _RAWS.decode(framed)
    kept = []
    for event, raw in zip(events, raws, strict=True):
        with contextlib.suppress(msgspec.DecodeError):
            SCAN_DECODER.decode(b"[" + bytes(raw) + b"]")
            if not _no_time(event):
                kept.append(event)
    return kept


def _no_time(event: Any) -> bool:
    """Whether the scan leaves ``event`` out for its time: a ``ts`` that is a string but no time, or a
    complete event without a ``ts`` or a ``dur``."""
    if event.ts is not UNSET and raw_ts_is_no_time(event.ts):
        return True
    complete = type(event) is _PHASED["X"] or (isinstance(event, _Event) and event.ph == "X")
    return complete and (event.ts is UNSET or event.dur is UNSET)


def _rewrite(events: list[Any], base_ns: int, stacks: Stacks | None, drop: frozenset[Any]) -> list[Any]:
    """The events of a chunk to write, rewritten in place."""
    n = len(events)
    try:
        kinds = np.fromiter(map(_KIND_OF_CAT.get, map(_CAT, events), repeat(0)), np.int8, n)
        if isinstance(events[0], _Phased):  # phases by type, integer pids
            phs = np.fromiter(map(_PHASE_KIND.get, map(type, events), repeat(0)), np.int8, n)
            gone = phs == _META
            if drop:
                gone |= np.fromiter(map(drop.__contains__, map(_PID, events)), bool, n)
        else:
            phs = np.fromiter(map(_KIND_OF_PH.get, map(_PH, events), repeat(0)), np.int8, n)
            pids = list(map(_PID, events))
            gone = phs == _META
            if str in set(map(type, pids)):
                gone |= np.fromiter(map(isinstance, pids, repeat(str)), bool, n)
            if drop:
                gone |= np.fromiter(map(drop.__contains__, pids), bool, n)
    except TypeError:  # a category, phase or pid that is a list or an object: the plain walk
        return _rewrite_walk(events, base_ns, stacks, drop)
    is_x = phs == _X
    if stacks:
        stacks.add_to(list(map(events.__getitem__, np.flatnonzero(is_x & (kinds == _OP)).tolist())))
    for i in np.flatnonzero(is_x & (kinds == _ANNOT)).tolist():
        _step_to_operator(events[i])
    kept = list(map(events.__getitem__, np.flatnonzero(~gone).tolist())) if gone.any() else events
    _rewrite_ts(kept, base_ns)
    return kept


def _rewrite_walk(events: list[Any], base_ns: int, stacks: Stacks | None, drop: frozenset[Any]) -> list[Any]:
    """:func:`_rewrite` for a chunk whose categories, phases or pids are not all hashable."""
    cats = list(map(_CAT, events))
    phs = [_phase(e) for e in events]
    x = [ph == "X" for ph in phs]
    ops = [i for i, c in enumerate(cats) if x[i] and _is_in(c, (vocab.CPU_OP, *_OLD_OPS))]
    if stacks:
        for i in ops:
            text = stacks.get(events[i])
            if text:
                _add_call_stack(events[i], text)
    for i in positions(cats, vocab.USER_ANNOTATION):
        if x[i]:
            _step_to_operator(events[i])
    kept = [
        e
        for e, ph in zip(events, phs, strict=True)
        if ph != "M" and not isinstance(e.pid, str) and not (_hashable(e.pid) and e.pid in drop)
    ]
    _rewrite_ts(kept, base_ns)
    return kept


_OLD_OPS = tuple(k for k, v in vocab.OLD_NAMES.items() if v == vocab.CPU_OP)


def _phase(event: Any) -> Any:
    return event.ph if isinstance(event, _Event) else type(event).__struct_config__.tag


def _is_in(value: Any, wanted: tuple[str, ...]) -> bool:
    return any(value == w for w in wanted)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _step_to_operator(event: Any) -> None:
    name = event.name
    if isinstance(name, str) and name.startswith(vocab.STEP_PREFIX):
        event.cat = vocab.CPU_OP  # torch_npu's steps are operators


def _add_call_stack(event: Any, text: str) -> None:
    _add_encoded_stack(event, b'{"Call stack":' + _ENC.encode(text))


def _add_encoded_stack(event: Any, head: bytes) -> None:
    """Put ``head`` (``{"Call stack":"..."``) first in the event's args."""
    raw = bytes(event.args).strip() if isinstance(event.args, msgspec.Raw) else b"{}"
    if raw[:1] != b"{" or b'"Call stack"' in raw:  # args of another kind, or its own stack
        return
    inner = raw[1:].lstrip()
    event.args = msgspec.Raw(head + (inner if inner[:1] == b"}" else b"," + inner))


# ---- times ----------------------------------------------------------------------------------------------
def _rewrite_ts(events: list[Any], base_ns: int) -> None:
    """Set the ``ts`` of ``events`` to torch_npu's epoch text (events without one keep none)."""
    stamped, stamps = events, list(map(_TS, events))
    try:
        joined = b",".join(stamps)
    except TypeError:  # some have no ts (UNSET)
        stamped = [e for e in events if e.ts is not UNSET]
        stamps = list(map(_TS, stamped))
        joined = b",".join(stamps)
    texts = epoch_ts(stamps, base_ns, joined) if stamps else None
    if texts is not None:
        list(map(setattr, stamped, repeat("ts"), texts))


def epoch_ts(stamps: list[Any], base_ns: int, joined: bytes | None = None) -> list[str] | None:
    """The epoch texts (:func:`ts_texts`) of the ``ts`` texts ``stamps`` (JSON numbers or strings; bytes
    or msgspec.Raw; ``joined``: them joined by ","), or None when they are torch_npu's epoch strings,
    which are what they become. The usual forms as arrays, the others through :func:`ts_texts`."""
    n = len(stamps)
    if joined is None:
        joined = b",".join(stamps)
    if _epoch_strings(joined, n):
        return None
    texts = _kineto_texts(joined, n, base_ns)
    return texts if texts is not None else ts_texts(list(map(bytes, stamps)), base_ns)


def _epoch_strings(joined: bytes, n: int) -> bool:
    """Are the ``n`` times (joined by ",") all JSON strings of one width holding digits, a "." and three
    decimals, without a leading zero (as torch_npu writes them and as :func:`us_texts` would)?"""
    width = (len(joined) + 1) // n - 1
    return (
        7 <= width <= 22
        and len(joined) == n * (width + 1) - 1
        and joined[0 :: width + 1] == b'"' * n
        and joined[width - 1 :: width + 1] == b'"' * n
        and joined[width - 5 :: width + 1] == b"." * n
        and joined[width :: width + 1] == b"," * (n - 1)
        and not joined.translate(None, b'0123456789.,"')
        and joined.count(b'"') == 2 * n
        and joined.count(b".") == n
        and joined.count(b",") == n - 1
        and b"0" not in joined[1 :: width + 1]
        and (width < 22 or max(joined[1 :: width + 1]) <= 56)  # below 9e18 ns: an int64 holds it
    )


def _kineto_texts(joined: bytes, n: int, base_ns: int) -> list[str] | None:
    """The epoch texts of ``n`` plain numbers with exactly three decimals (Kineto's ``%d.%03d``), joined
    by ","; None for any other text, or a negative base (then :func:`ts_texts` does it)."""
    if base_ns < 0 or joined.translate(None, b"0123456789.,") or joined.count(b".") != n:
        return None
    width = (len(joined) + 1) // n - 1
    if (  # the rule: one width in a chunk, a "." before the last three digits of each
        5 <= width <= 19
        and len(joined) == n * (width + 1) - 1
        and joined[width - 4 :: width + 1] == b"." * n
        and joined[width :: width + 1] == b"," * (n - 1)
        and joined.count(b",") == n - 1
    ):
        cells = np.frombuffer(joined + b",", np.uint8).reshape(n, width + 1)
        digits = np.delete(cells[:, :width], width - 4, axis=1).astype(np.int64) - 48
        ns = digits @ (10 ** np.arange(width - 2, -1, -1, dtype=np.int64))
    else:
        ns = _ns_of_numbers(joined, n)
        if ns is None:
            return None
    if int(ns.max()) > np.iinfo(np.int64).max - base_ns:
        return None
    return epoch_texts(ns + base_ns)


def _ns_of_numbers(joined: bytes, n: int) -> np.ndarray | None:
    """:func:`_kineto_texts`' numbers when their widths differ: each checked and read on its own."""
    text = np.frombuffer(joined + b",", np.uint8)
    dots = np.flatnonzero(text == 46)
    # each "." after a digit and followed by three digits and the end of its number: one "." a number
    if (
        dots[0] == 0
        or dots[-1] + 4 >= len(text)
        or not _digits(text, dots - 1)
        or (text[dots + 4] != 44).any()
    ):
        return None
    if not (_digits(text, dots + 1) and _digits(text, dots + 2) and _digits(text, dots + 3)):
        return None
    digits = joined.replace(b".", b"")
    if b",0" in digits or digits.startswith(b"0"):
        digits = _LEADING_ZEROS.sub(rb"\1", digits)
    try:
        ns = np.array(_INTS.decode(b"[" + digits + b"]"), dtype=np.int64)
    except (msgspec.DecodeError, OverflowError):
        return None
    return ns if len(ns) == n else None


def _digits(text: np.ndarray, at: np.ndarray) -> bool:
    return bool(((text[at] >= 48) & (text[at] <= 57)).all())


# "0000" .. "9999" and ".000" .. ".999", each read as one 4-byte cell
_QUADS = np.array([b"%04d" % i for i in range(10_000)], dtype="S4").view(np.uint32)
_DECIMALS = np.array([b".%03d" % i for i in range(1000)], dtype="S4").view(np.uint32)
_BREAK = np.array([b"\n\n\n\n"], dtype="S4").view(np.uint32)[0]


def epoch_texts(ns: np.ndarray) -> list[str]:
    """Non-negative nanoseconds as µs text with three decimals, as :func:`us_texts` writes them; four
    digits at a time, as arrays, when the µs all have 16 digits (epoch times from 2001 to 2286)."""
    us, frac = np.divmod(ns, 1000)
    if not len(us) or int(us.min()) < 10**15 or int(us.max()) >= 10**16:
        return us_texts(ns)
    cells = np.empty((len(us), 6), np.uint32)  # 16 digits, "." and 3 decimals, "\n" x 4
    for col in range(3, -1, -1):
        us, quad = np.divmod(us, 10_000)
        cells[:, col] = _QUADS[quad]
    cells[:, 4] = _DECIMALS[frac]
    cells[:, 5] = _BREAK
    return cells.tobytes().decode("ascii").split("\n")[: 4 * len(ns) : 4]


def ts_texts(raw: list[bytes], base_ns: int) -> list[str]:
    """The ``ts`` texts of events (µs after ``base_ns``) as epoch µs with three decimals. The usual texts
    (digits, up to three decimals, a base of whole µs) are added as text; others go through
    :func:`ns_of_texts`. A string time (torch_npu's own form) is an epoch time already."""
    n = len(raw)
    if b'"' in b"".join(map(itemgetter(slice(0, 1)), raw)):
        # string times are torch_npu's epoch times already (the reader's base is for the numbers)
        quoted = np.array([r[:1] == b'"' for r in raw])
        ns = ns_of_texts(raw) + np.where(quoted, 0, base_ns)
        return us_texts(ns)
    base_us, rest = divmod(base_ns, 1000)
    parts = list(map(bytes.partition, raw, repeat(b".")))
    heads = list(map(itemgetter(0), parts))
    tails = list(map(itemgetter(2), parts))
    joined_heads, joined_tails = b"".join(heads), b"".join(tails)
    if (
        rest
        or not joined_heads.isdigit()
        or (joined_tails and not joined_tails.isdigit())
        or max(map(len, tails), default=0) > 3
        or min(map(len, heads), default=1) == 0
    ):
        return us_texts(ns_of_texts(raw) + base_ns)
    flat: list[Any] = [None] * (2 * n)
    flat[0::2] = map(base_us.__add__, map(int, heads))
    flat[1::2] = map(bytes.ljust, tails, repeat(3), repeat(b"0"))
    return ((b"%d.%s\n" * n) % tuple(flat)).decode().split("\n")[:-1]


# ---- byte ranges in forked processes --------------------------------------------------------------------
def split_point(cuts: list[tuple[int, int]], start: int, end: int) -> int | None:
    """Where [start, end) can be cut in two so that each part, read on its own, is cut into the same chunks
    as a serial read (so the file is the same as one process writes): the start of a chunk of a serial read
    (``cuts``: Extract.cuts) near the middle, such that the read that cut the chunk before it stopped
    short of it (a read of the first part ends there). None when there is none in the middle half, or
    the range is too small to be worth it."""
    if end - start < MIN_SPLIT:
        return None
    middle, quarter = (start + end) // 2, (end - start) // 4
    best = None
    for m, (at, _read) in enumerate(cuts):
        if m and cuts[m - 1][1] >= at:
            continue
        if start + quarter <= at <= end - quarter and (best is None or abs(at - middle) < abs(best - middle)):
            best = at
    return best


class SplitBody:
    """:func:`write_body` of [start, end) to ``out_fd``, started now: in a forked process when ``fork``
    (else inline, at ``result()``); with a ``cut`` (:func:`split_point`), [start, cut) is written straight
    to ``out_fd`` by one forked process and [cut, end) into a private temporary file in ``work_dir`` by
    another, appended once both are done. ``result()`` gives the :class:`Body`; ``close()`` waits for the
    processes and drops their work (the caller is failing)."""

    def __init__(
        self,
        fork: bool,
        out_fd: int,
        work_dir: Path,
        path: Path,
        fd: int,
        span: tuple[int, int],
        cut: int | None,
        base_ns: int,
        stacks: Stacks | None,
        drop: frozenset[Any],
        damaged: bool = False,
    ) -> None:
        start, end = span
        self.out_fd, self.later, self.later_file = out_fd, None, None
        if not (fork and cut is not None and start < cut < end):
            self.first = Forked(
                fork, lambda: write_body(out_fd, path, fd, start, end, base_ns, stacks, drop, damaged=damaged)
            )
            return
        self.later_file = tempfile.TemporaryFile(dir=work_dir)  # noqa: SIM115 (closed by close())
        later_fd = self.later_file.fileno()
        try:
            self.later = Forked(
                True,
                lambda: write_body(
                    later_fd, path, fd, cut, end, base_ns, stacks, drop, opening=False, damaged=damaged
                ),
            )
            self.first = Forked(
                True, lambda: write_body(out_fd, path, fd, start, cut, base_ns, stacks, drop, damaged=damaged)
            )
        except BaseException:
            self.close()
            raise

    def result(self) -> Body:
        try:
            head = self.first.result()
            if self.later is None:
                return head
            tail = self.later.result()
            if tail.wrote:
                if head.wrote:
                    write_all(self.out_fd, b",\n")
                append(self.out_fd, self.later_file.fileno())  # type: ignore[union-attr]
            return head.then(tail)
        finally:
            self.close()

    def close(self) -> None:
        for job in (getattr(self, "first", None), self.later):
            if job is not None:
                job.close()
        if self.later_file is not None:
            self.later_file.close()
            self.later_file = None


def append(out_fd: int, src_fd: int) -> None:
    """Append the whole file at ``src_fd`` to ``out_fd`` (in the kernel where it can)."""
    size = os.fstat(src_fd).st_size
    offset = 0
    with contextlib.suppress(OSError, AttributeError):
        while offset < size:
            copied = os.copy_file_range(src_fd, out_fd, size - offset, offset)
            if not copied:
                break
            offset += copied
    while offset < size:
        data = os.pread(src_fd, min(8 << 20, size - offset), offset)
        if not data:
            raise OSError(f"the temporary body file shrank at byte {offset}")
        write_all(out_fd, data)
        offset += len(data)
