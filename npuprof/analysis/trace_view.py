"""trace_view.json as torch_npu writes it (docs/formats.md, "What the parser writes"): a bare
JSON array of events, read by msprof-analyze (advisor, compare) with ``ijson.items(f, "item")`` and by
MindStudio Insight.

From the raw Kineto trace (which stays as torch wrote it), event by event: ``ts`` becomes a string of epoch
microseconds with nanosecond decimals (``"1704161511420306.491"``: Kineto's ``baseTimeNanoseconds`` added),
``ProfilerStep#N`` becomes a ``cpu_op``, an operator gets ``args["Call stack"]`` when its stack was rebuilt
from the ``python_function`` spans, and Kineto's own metadata (and its ``Spans`` bookkeeping, whose pid is a
string) is replaced. Appended: the process and thread metadata of torch_npu (``Python`` / ``Ascend
Hardware`` with their labels and sort indexes, ``Thread <tid>`` / ``Stream <n>``), the ``Overlap Analysis``
process with its four lanes (``Computing``, ``Communication``, ``Communication(Not Overlapped)``,
``Free``), a ``Communication`` process whose ``Group <g> Communication`` threads hold the collectives as
HCCL names them (``hcom_allReduce__<g>_<n>``: msprof-analyze compare takes the op from the name's second
``_`` part) and the ``async_npu`` flows from each operator to the device tasks it launched.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import operator
import os
import re
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import IO, Any

import msgspec
import numpy as np

from npuprof.analysis import intervals
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.call_stacks import PythonFrames
from npuprof.analysis.extract import Extract, positions
from npuprof.analysis.forked import Forked
from npuprof.analysis.step_breakdown import OVERLAP_LANES
from npuprof.analysis.tables import RankTables, ns_of, ns_of_texts, us_texts
from npuprof.analysis.trace_loader import TraceError, TraceReader

OVERLAP_PID = 2_000_000_001
COMM_PID = 2_000_000_002
# torch_npu's Overlap Analysis threads, by tid
LANES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
# process_sort_index of torch_npu's processes
HOST_SORT, DEVICE_SORT, COMM_SORT, OVERLAP_SORT = 0, 8, 9, 11
# torch_npu's processes: label and sort index
TORCH_NPU_PROCESSES = {
    "Python": ("CPU", HOST_SORT),
    "CANN": ("CPU", 2),
    "Ascend Hardware": ("NPU", DEVICE_SORT),
    "HCCL": ("NPU", COMM_SORT),
    "Communication": ("NPU", COMM_SORT),
    "Overlap Analysis": ("NPU", OVERLAP_SORT),
}
BLOCK = 512 << 10  # bytes of the raw trace decoded at a time


def decompress(raw: Path, out: IO[bytes]) -> None:
    """Write the decompressed ``raw`` (.gz) into ``out``, flushed as it goes (so it can be read behind).
    Raises TraceError for a damaged file."""
    try:
        with gzip.open(raw, "rb") as src:
            while data := src.read(8 << 20):
                out.write(data)
                out.flush()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        kind = "truncated" if isinstance(exc, EOFError) else "corrupt"
        raise TraceError(kind, f"{raw}: cannot decompress the trace: {type(exc).__name__}: {exc}") from exc


class Decompression:
    """:func:`decompress` in a forked process (a thread would fight the reader for the GIL), so the trace
    can be read behind it: ``wait_for(n)`` returns the size written once it is ``n`` bytes or all of it
    (then ``done``); ``join()`` waits for the end and raises its error; ``cancel()`` stops it. Where fork
    is unavailable, all is decompressed at once, here."""

    def __init__(self, raw: Path, out: IO[bytes]) -> None:
        out.flush()
        self.out, self.done = out, False
        self.job = Forked(True, lambda: decompress(raw, out))
        if not self.job.pid:
            self.join()

    def wait_for(self, size: int) -> int:
        while True:
            if self.job.finished():
                self.join()
                return os.fstat(self.out.fileno()).st_size
            now = os.fstat(self.out.fileno()).st_size
            if now >= size:
                return now
            time.sleep(0.002)

    def join(self) -> None:
        if not self.done:
            try:
                self.job.result()
            finally:
                self.done = True

    def cancel(self) -> None:
        self.job.cancel()


@contextlib.contextmanager
def readable(out: IO[bytes], raw: Path) -> Iterator[int]:
    """A read-only descriptor with the content written to ``out`` so far (``out`` may be write-only): the
    same file reopened through /proc, or else a private temporary copy of the decompressed ``raw``."""
    out.flush()
    try:
        fd = os.open(f"/proc/self/fd/{out.fileno()}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        with tempfile.TemporaryFile(dir=Path(out.name).parent if isinstance(out.name, str) else None) as tmp:
            decompress(raw, tmp)  # type: ignore[arg-type]
            yield tmp.fileno()
        return
    try:
        yield fd
    finally:
        os.close(fd)


# ---- the events of the raw trace, rewritten ------------------------------------------------------------
UNSET = msgspec.UNSET


class _Event(msgspec.Struct, omit_defaults=True, gc=False):
    """One raw event, every field kept as written (``args`` and ``dur`` as their JSON text); ``ts`` is
    rewritten. Fields the Chrome trace format does not define are dropped."""

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


_BODY_DECODER = msgspec.json.Decoder(list[_Event])
_ENC = msgspec.json.Encoder()
_DUR, _ARGS = attrgetter("dur"), attrgetter("args")


_PH, _CAT, _NAME, _PID, _TS = (
    attrgetter("ph"),
    attrgetter("cat"),
    attrgetter("name"),
    attrgetter("pid"),
    attrgetter("ts"),
)
_PIDTID = attrgetter("pid", "tid")
# what the Extract counts as an operator and as a device task (in file order), by category
_OP_CATS = frozenset({vocab.CPU_OP, *(k for k, v in vocab.OLD_NAMES.items() if v == vocab.CPU_OP)})
_TASK_CATS = frozenset(
    {*vocab.DEVICE_WORK_CATS, *(k for k, v in vocab.OLD_NAMES.items() if v in vocab.DEVICE_WORK_CATS)}
)


@dataclass
class Body:
    """What writing the events learnt: the threads ``(pid, tid)`` in order of first appearance, and the
    tid of each device task (in file order, as the Extract lists them)."""

    threads: list[tuple[Any, Any]] = field(default_factory=list)
    task_tids: list[Any] = field(default_factory=list)
    operators: int = 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def events_start(path: Path, fd: int) -> int:
    """The offset of the first event of the plain trace open at ``fd``."""
    return TraceReader(path, fd=fd).events_start()


def _of_cats(cats: list[Any], wanted: frozenset[str]) -> list[int]:
    """Indices of the categories in ``wanted``, in order."""
    return sorted(i for c in wanted for i in positions(cats, c))


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


Stacks = dict[tuple[Any, Any, float], str]  # (pid, tid, ts as the trace wrote it) -> Call stack


def stacks_by_start(x: Extract, stacks: list[str | None]) -> Stacks:
    """The rebuilt stacks (one per operator, in file order; see call_stacks.call_stacks) by the operator's
    thread and start: a stack depends on nothing else, so the events need no counting to find theirs."""
    keys = list(x.threads)
    thread = np.frombuffer(x.op_thread, dtype=np.int32).tolist() if len(x.op_thread) else []
    ts = np.frombuffer(x.op_ts, dtype=np.float64).tolist() if len(x.op_ts) else []
    return {(*keys[t], start): text for t, start, text in zip(thread, ts, stacks, strict=True) if text}


def write_body(
    out_fd: int, path: Path, fd: int, start: int, end: int, base_ns: int, stacks: Stacks | None
) -> Body:
    """Write ``[`` and the raw events between offsets ``start`` and ``end`` of the plain trace open at
    ``fd``, rewritten (see the module's doc), to ``out_fd``; ``stacks``: the Call stack to add to the
    operators (:func:`stacks_by_start`), or None. Works column-wise: no Python code runs per event but for
    the operators, steps and device tasks."""
    body = Body()
    seen: dict[tuple[Any, Any], None] = {}
    _write_all(out_fd, b"[\n")
    first = True
    reader = TraceReader(path, block=BLOCK, fd=fd, decoder=_BODY_DECODER)
    for chunk in reader.iter_range(start, end) if end > start else ():
        events = chunk.events
        cats = list(map(_CAT, events))
        ops = [i for i in _of_cats(cats, _OP_CATS) if events[i].ph == "X"]
        if stacks:
            for i in ops:
                event = events[i]
                try:
                    text = stacks.get((event.pid, event.tid, float(bytes(event.ts))))
                except (TypeError, ValueError):  # no ts, or torch_npu's string one: no stack to add
                    continue
                if text:
                    _add_call_stack(event, text)
        body.operators += len(ops)
        body.task_tids += [events[i].tid for i in _of_cats(cats, _TASK_CATS) if events[i].ph == "X"]
        for i in positions(cats, vocab.USER_ANNOTATION):
            name = events[i].name
            if events[i].ph == "X" and isinstance(name, str) and name.startswith(vocab.STEP_PREFIX):
                events[i].cat = vocab.CPU_OP  # torch_npu's steps are operators
        phs = list(map(_PH, events))
        dropped = set(positions(phs, "M"))
        pids = list(map(_PID, events))
        if str in set(map(type, pids)):
            dropped.update(i for i, pid in enumerate(pids) if isinstance(pid, str))
        kept = [e for i, e in enumerate(events) if i not in dropped] if dropped else events
        if not kept:
            continue
        seen.update(dict.fromkeys(map(_PIDTID, kept)))
        stamps = list(map(_TS, kept))
        stamped = [e for e in kept if e.ts is not UNSET] if UNSET in stamps else kept
        raw = list(map(bytes, map(_TS, stamped))) if stamped is not kept else list(map(bytes, stamps))
        list(map(setattr, stamped, repeat("ts"), ts_texts(raw, base_ns)))
        data = _ENC.encode(kept)[1:-1]
        _write_all(out_fd, data if first else b",\n" + data)
        first = False
    body.threads = [key for key in seen if UNSET not in key]  # an event may lack its pid or tid
    return body


def _add_call_stack(event: _Event, text: str) -> None:
    raw = bytes(event.args).strip() if isinstance(event.args, msgspec.Raw) else b"{}"
    if not raw.startswith(b"{") or b'"Call stack"' in raw:  # args of another kind, or its own stack
        return
    inner = raw[1:].lstrip()
    sep = b"" if inner.startswith(b"}") else b","
    event.args = msgspec.Raw(b'{"Call stack":' + _ENC.encode(text) + sep + inner)


class _FrameArgs(msgspec.Struct, gc=False):
    id: Any = msgspec.field(name="Python id", default=None)
    parent: Any = msgspec.field(name="Python parent id", default=None)


class _Frame(msgspec.Struct, gc=False):
    cat: Any = None
    ph: Any = None
    name: Any = ""
    pid: Any = 0
    tid: Any = 0
    ts: Any = 0.0
    dur: Any = 0.0
    args: msgspec.Raw = msgspec.Raw(b"")


_FRAME_DECODER = msgspec.json.Decoder(list[_Frame])
_FRAME_ARGS_DECODER = msgspec.json.Decoder(list[_FrameArgs | None])


class _Skipped(msgspec.Struct, tag_field="cat", gc=False):
    """An event of a category the frames' reader skips whole (msgspec skips its fields unread)."""


class _PyFrame(_Skipped, tag=vocab.PYTHON_FUNCTION, gc=False):
    ph: Any = None
    name: Any = ""
    pid: Any = 0
    tid: Any = 0
    ts: Any = 0.0
    dur: Any = 0.0
    args: msgspec.Raw = msgspec.Raw(b"")


# Kineto's categories: a chunk with any other (or an event without one) is decoded with _FRAME_DECODER
_OTHER_CATS = sorted(
    {
        vocab.CPU_OP,
        vocab.USER_ANNOTATION,
        vocab.GPU_USER_ANNOTATION,
        vocab.CPU_INSTANT,
        vocab.OVERHEAD,
        vocab.CUDA_SYNC,
        vocab.PROFILER_RANGE,
        vocab.TRACE,
        *vocab.DEVICE_WORK_CATS,
        *vocab.RUNTIME_CATS,
        *vocab.HOST_FLOW_CATS,
    }
)
_SKIP_TYPES = tuple(
    msgspec.defstruct(f"_Skip{k}", [], bases=(_Skipped,), tag=cat, gc=False)
    for k, cat in enumerate(_OTHER_CATS)
)
_TYPED_FRAME_DECODER = msgspec.json.Decoder(list[functools.reduce(operator.or_, _SKIP_TYPES, _PyFrame)])  # type: ignore[misc]


def read_python_frames(path: Path, fd: int, start: int, end: int) -> PythonFrames:
    """The ``python_function`` spans between offsets ``start`` and ``end`` of the plain trace at ``fd``,
    with Kineto's ``Python id`` / ``Python parent id`` (-1 where absent). Column-wise, as write_body."""
    keys: list[tuple[Any, Any]] = []
    ts: list[Any] = []
    dur: list[Any] = []
    names: list[Any] = []
    ids: list[Any] = []
    parents: list[Any] = []
    reader = TraceReader(path, block=BLOCK, fd=fd, decoder=_TYPED_FRAME_DECODER, fallback=_FRAME_DECODER)
    for chunk in reader.iter_range(start, end) if end > start else ():
        events = chunk.events
        if events and isinstance(events[0], _Skipped):  # typed: the python_function events are _PyFrame
            where = positions(list(map(type, events)), _PyFrame)
        else:
            where = positions(list(map(_CAT, events)), vocab.PYTHON_FUNCTION)
        picked = list(map(events.__getitem__, where))
        if "X" in (phs := set(map(_PH, picked))) and len(phs) > 1:
            picked = [e for e in picked if e.ph == "X"]
        elif phs and "X" not in phs:
            continue
        keys += map(_PIDTID, picked)
        ts += map(_TS, picked)
        dur += map(_DUR, picked)
        names += map(_interned, map(_NAME, picked))  # the same few names, millions of times
        raws = [bytes(r) or b"null" for r in map(_ARGS, picked)]
        try:
            args = _FRAME_ARGS_DECODER.decode(b"[" + b",".join(raws) + b"]")
        except msgspec.DecodeError:  # args that are not objects: no ids for these frames
            args = [None] * len(picked)
        ids += (a.id if a is not None else None for a in args)
        parents += (a.parent if a is not None else None for a in args)
    if not _all_plain(ts, dur, names):
        good = [
            i
            for i, (t, d, nm) in enumerate(zip(ts, dur, names, strict=True))
            if type(t) in (int, float) and type(d) in (int, float) and isinstance(nm, str)
        ]
        keys, ts, dur, names, ids, parents = (
            [v[i] for i in good] for v in (keys, ts, dur, names, ids, parents)
        )
    return PythonFrames(
        keys,
        np.array(ts, dtype=np.float64),
        np.array(dur, dtype=np.float64),
        names,
        _id_column(ids),
        _id_column(parents),
    )


def _interned(name: Any) -> Any:
    return sys.intern(name) if type(name) is str else name


def _id_column(values: list[Any]) -> np.ndarray:
    """Python ids as int64, -1 for a missing one (None, or not a non-negative integer)."""
    if set(map(type, values)) <= {int, type(None)}:
        column = np.array(values, dtype=np.float64)  # None -> nan
        ok = np.isfinite(column) & (column >= 0) & (column < 2.0**53)
        return np.where(ok, np.nan_to_num(column), -1).astype(np.int64)
    return np.array([_int_or(v) for v in values], dtype=np.int64)


def _all_plain(ts: list[Any], dur: list[Any], names: list[Any]) -> bool:
    """All times numbers and all names strings (as Kineto writes them)?"""
    return (
        set(map(type, ts)) <= {int, float}
        and set(map(type, dur)) <= {int, float}
        and set(map(type, names)) <= {str}
    )


def _int_or(value: Any, default: int = -1) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62 else default
    )


# ---- the events torch_npu adds ------------------------------------------------------------------------
def _meta(kind: str, pid: Any, tid: Any, key: str, value: Any) -> bytes:
    return _ENC.encode({"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {key: value}})


def _process(pid: Any, name: str, label: str, sort: int) -> list[bytes]:
    return [
        _meta("process_name", pid, 0, "name", name),
        _meta("process_labels", pid, 0, "labels", label),
        _meta("process_sort_index", pid, 0, "sort_index", sort),
    ]


def _thread(pid: Any, tid: Any, name: str, sort: Any) -> list[bytes]:
    out = [_meta("thread_name", pid, tid, "name", name)]
    if sort is not None:
        out.append(_meta("thread_sort_index", pid, tid, "sort_index", sort))
    return out


_STREAM = re.compile(r"(?i)^stream\s*(\d+)$")


def _bulk(templates: list[str], which: list[int], values: list[Any]) -> bytes:
    """The rows ``templates[which[k]]``, joined by ``,\\n`` and filled with ``values`` in order: one
    %-formatting for all of them."""
    return (",\n".join(map(templates.__getitem__, which)) % tuple(values)).encode()


def _spans(
    name_json: list[bytes],
    pid: Any,
    tid_of: list[Any],
    which: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    base_ns: int,
) -> list[bytes]:
    """X events ``{"name", "pid", "tid", "ts", "dur", "ph"}``: ``name_json[which[k]]`` on thread
    ``tid_of[which[k]]`` over [starts[k], ends[k]) (trace µs), formatted in bulk (one piece)."""
    if not len(starts):
        return []
    lo, hi = ns_of(starts) + base_ns, ns_of(ends) + base_ns
    dur = _ENC.encode(np.round((hi - lo) / 1000.0, 3).tolist())[1:-1].decode().split(",")
    pid_json = _ENC.encode(pid).decode()
    templates = [
        ('{"name":' + nm.decode() + ',"pid":' + pid_json + ',"tid":' + _ENC.encode(t).decode()).replace(
            "%", "%%"
        )
        + ',"ts":"%s","dur":%s,"ph":"X"}'
        for nm, t in zip(name_json, tid_of, strict=True)
    ]
    values: list[Any] = [None] * (2 * len(dur))
    values[0::2], values[1::2] = us_texts(lo), dur
    return [_bulk(templates, which.tolist(), values)]


def hcom_name(collective: str) -> str:
    """HCCL's name of a collective (``all_reduce`` -> ``allReduce``, ``recv`` -> ``receive``)."""
    low = collective.lower().strip("_")
    known = {
        "allreduce": "allReduce",
        "allgather": "allGather",
        "allgather_base": "allGather",
        "allgather_into_tensor_coalesced": "allGather",
        "reducescatter": "reduceScatter",
        "reduce_scatter_base": "reduceScatter",
        "reduce_scatter_tensor_coalesced": "reduceScatter",
        "recv": "receive",
        "alltoall": "alltoall",
        "alltoall_base": "alltoall",
        "all_to_all": "alltoall",
        "alltoallv": "alltoallv",
    }
    if low in known:
        return known[low]
    if low.replace("_", "") in known:
        return known[low.replace("_", "")]
    parts = [p for p in low.split("_") if p]
    return (parts[0] + "".join(p.capitalize() for p in parts[1:])) if parts else "unknown"


def tail_events(tables: RankTables, x: Extract, body: Body, comm_ops: list[Any], base_ns: int) -> list[bytes]:
    """The events torch_npu's trace_view.json has and the raw trace has not, each encoded."""
    out: list[bytes] = []
    device_pids = set(x.dev_pid) | {
        pid for pid, name in x.process_names.items() if vocab.DEVICE_PROCESS_RE.search(name)
    }
    by_pid: dict[Any, list[Any]] = {}
    for pid, tid in body.threads:
        by_pid.setdefault(pid, []).append(tid)
    for pid, tids in by_pid.items():
        own = x.process_names.get(pid, "")
        if own in TORCH_NPU_PROCESSES:  # a trace in torch_npu's form already: its processes stay as named
            out += _process(pid, own, *TORCH_NPU_PROCESSES[own])
            for tid in tids:
                label = x.thread_names.get(x.threads.get((pid, tid), -1))
                out += _thread(pid, tid, label or f"Thread {tid}", tid if isinstance(tid, int) else None)
            continue
        device = pid in device_pids
        out += _process(
            pid,
            "Ascend Hardware" if device else "Python",
            "NPU" if device else "CPU",
            DEVICE_SORT if device else HOST_SORT,
        )
        for tid in tids:
            number = tid if isinstance(tid, int) else None
            if isinstance(tid, str) and (m := _STREAM.match(tid)):
                number = int(m.group(1))
            label = f"Stream {number if number is not None else tid}" if device else f"Thread {tid}"
            out += _thread(pid, tid, label, number)
    # Overlap Analysis
    out += _process(OVERLAP_PID, "Overlap Analysis", "NPU", OVERLAP_SORT)
    for tid, label in enumerate(LANES):
        out += _thread(OVERLAP_PID, tid, label, None)
    lanes = tables.breakdown.lanes
    lane_tid = np.array([LANES.index(label) for label in OVERLAP_LANES], dtype=np.int64)
    windows = tables.breakdown.windows
    cs, ce, _owner = intervals.clip_many(tables.breakdown.communication_spans, windows.start, windows.end)
    starts = np.concatenate([lanes.start, cs])
    ends = np.concatenate([lanes.end, ce])
    which = np.concatenate([lane_tid[lanes.lane.astype(np.int64)], np.full(len(cs), 1, np.int64)])
    keep = ends > starts
    order = np.lexsort((starts[keep], which[keep]))
    out += _spans(
        [_ENC.encode(label) for label in LANES],
        OVERLAP_PID,
        list(range(len(LANES))),
        which[keep][order],
        starts[keep][order],
        ends[keep][order],
        base_ns,
    )
    out += _communication(comm_ops, base_ns)
    out += _flows(x, body, base_ns)
    return out


def _communication(comm_ops: list[Any], base_ns: int) -> list[bytes]:
    """The ``Communication`` process: a ``Group <g> Communication`` thread per process group, holding
    its collectives named as HCCL names them."""
    if not comm_ops:
        return []
    out = _process(COMM_PID, "Communication", "NPU", COMM_SORT)
    groups: dict[str, int] = {}
    for op in comm_ops:
        groups.setdefault(op.group, len(groups))
    for group, index in groups.items():
        out += _thread(COMM_PID, index, f"Group {group} Communication", index)
    seq: dict[tuple[str, str], int] = {}
    names: list[bytes] = []
    for op in comm_ops:
        n = seq.get((op.group, op.name), 0)
        seq[(op.group, op.name)] = n + 1
        names.append(_ENC.encode(f"hcom_{hcom_name(op.name)}__{op.group}_{n}"))
    starts = np.array([op.ts for op in comm_ops], dtype=np.float64)
    ends = starts + np.array([op.dur for op in comm_ops], dtype=np.float64)
    tids = [groups[op.group] for op in comm_ops]
    return out + _spans(names, COMM_PID, tids, np.arange(len(comm_ops)), starts, ends, base_ns)


def _flows(x: Extract, body: Body, base_ns: int) -> list[bytes]:
    """``async_npu`` flows (torch_npu's ``torch_to_npu``) from each operator to the device tasks it
    launched (matched by Kineto's External id)."""
    n = len(x.dev_ts)
    if not n or not len(x.op_ts) or len(body.task_tids) != n:
        return []
    o_ext = np.frombuffer(x.op_ext, dtype=np.int64)
    d_ext = np.frombuffer(x.dev_ext, dtype=np.int64)
    valid = np.flatnonzero(o_ext >= 0)
    order = valid[np.argsort(o_ext[valid], kind="stable")]
    sorted_ext = o_ext[order]
    if not len(sorted_ext):
        return []
    pos = np.clip(np.searchsorted(sorted_ext, d_ext), 0, len(sorted_ext) - 1)
    hit = np.flatnonzero((sorted_ext[pos] == d_ext) & (d_ext >= 0))
    if not len(hit):
        return []
    op = order[pos[hit]]
    keys = list(x.threads)
    op_thread = np.frombuffer(x.op_thread, dtype=np.int32)[op].tolist()
    op_ts = us_texts(ns_of(np.frombuffer(x.op_ts, dtype=np.float64)[op]) + base_ns)
    task_ts = us_texts(ns_of(np.frombuffer(x.dev_ts, dtype=np.float64)[hit]) + base_ns)
    # one template per thread at each end: the s event on the operator's, the f event on the task's
    templates: list[str] = []
    index: dict[tuple[str, Any, Any], int] = {}

    def template(ph: str, pid: Any, tid: Any) -> int:
        key = (ph, pid, tid)
        if key not in index:
            index[key] = len(templates)
            where = f',"pid":{_ENC.encode(pid).decode()},"tid":{_ENC.encode(tid).decode()}'.replace("%", "%%")
            templates.append(
                '{"ph":"'
                + ph
                + '","bp":"e","name":"torch_to_npu","id":%d'
                + where
                + ',"ts":"%s","cat":"async_npu"}'
            )
        return index[key]

    which: list[int] = []
    values: list[Any] = []
    for k, task, thread, s_ts, f_ts in zip(
        range(len(hit)), hit.tolist(), op_thread, op_ts, task_ts, strict=True
    ):
        which += (template("s", *keys[thread]), template("f", x.dev_pid[task], body.task_tids[task]))
        values += (k + 1, s_ts, k + 1, f_ts)
    return [_bulk(templates, which, values)]


def write_tail(out_fd: int, events: list[bytes], body_empty: bool) -> None:
    """Append ``events`` after the body and close the array."""
    if events:
        _write_all(out_fd, (b"\n" if body_empty else b",\n") + b",\n".join(events))
    _write_all(out_fd, b"\n]\n")
