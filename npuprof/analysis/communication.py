"""communication.json and communication_matrix.json from the collectives in a trace (docs/formats.md,
"What the parser writes").

Sources: ``record_param_comms`` operators (NCCL/HCCL: collective name, message size, dtype, process group),
their device kernels (matched by External id) for the time on the device, and on CPU the ``gloo:<op>``
spans of gloo's worker threads (size from their input dims and dtype; their group is the default one of
``distributedInfo``, or, with --msprof-tx, the group that the ``comm:`` ranges of the calls name for the
worker thread: each process group has threads of its own).
Operators are named ``<collective>__<n>@<group hash>``, n counting per group and collective, so the same
operator has the same name on every rank of a group; the group is written as msprof's hash of its name
(``group_id``), as torch_npu writes it: msprof-analyze's ``cluster`` finds the group's entry in
profiler_metadata.json's ``parallel_group_info``, keyed by the name, through that hash (docs/formats.md,
"profiler_metadata.json"). Wait/synchronisation times need all ranks and are
reported as 0 here.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from npuprof.analysis import process_links
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.extract import Extract, npu_dims
from npuprof.analysis.rounding import rounded
from npuprof.analysis.step_breakdown import StepWindows

# torch's dtype names (record_param_comms' "dtype": Float, BFloat16, Float8_e4m3fn ...) and the C++ type
# names of gloo spans' "Input type" (float, c10::Half, signed char, long int ...), lower case
_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "long": 8,
    "long int": 8,
    "long long": 8,
    "long long int": 8,
    "int64": 8,
    "uint64": 8,
    "unsigned long": 8,
    "unsigned long int": 8,
    "int": 4,
    "int32": 4,
    "uint32": 4,
    "unsigned int": 4,
    "short": 2,
    "short int": 2,
    "int16": 2,
    "uint16": 2,
    "unsigned short": 2,
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "int8": 1,
    "byte": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "complexhalf": 4,
    "complexfloat": 8,
    "complexdouble": 16,
    "complex<c10::half>": 4,
    "complex<float>": 8,
    "complex<double>": 16,
}
_P2P = ("send", "recv", "receive", "isend", "irecv")
TRANSPORT = "SDMA"
# the trace's args and distributedInfo are whatever the file says: a value of another type or out of range
# counts as absent
_BAD_NUMBER = (TypeError, ValueError, OverflowError)
_NELEMS_KEYS = ("In msg nelems", "Out msg nelems")


@dataclass
class CommOp:
    name: str  # collective, e.g. allreduce
    group: str
    ts: float
    dur: float
    size_bytes: float  # 0 when unknown (size_known False): communication.json's readers want a number
    ranks: Sequence[int]
    size_known: bool = True
    # for the db export (db_export.py): the element type and count, the host call (its start, duration
    # and thread index) and the device task's correlation id when the time is the device's (-1: none)
    dtype: str = ""
    count: float = 0.0
    host: tuple[float, float, int] | None = None
    corr: int = -1

    @property
    def p2p(self) -> bool:
        low = self.name.lower()
        return any(low.startswith(p) or f"_{p}" in low for p in _P2P)


@functools.lru_cache(maxsize=256)
def double_hash(text: str) -> int:
    """The 64-bit hash msprof gives group names (two 32-bit polynomial hashes side by side)."""
    h0 = h1 = 0
    for c in text:
        h0 = (h0 * 29 + ord(c)) & 0xFFFFFFFF
        h1 = (h1 * 131 + ord(c)) & 0xFFFFFFFF
    return (h0 << 32) | h1


def group_id(group: str) -> str:
    """A group as communication.json and analysis.db name it: msprof's hash of its name, in decimal (the
    name after ``@`` in torch_npu's operator keys; docs/formats.md, "What the parser writes")."""
    return str(double_hash(group))


def _dtype_size(dtype: Any) -> int | None:
    """Bytes an element of ``dtype``; None for a type not known here (its size is then said unknown)."""
    text = str(dtype).lower().replace("torch.", "").replace("c10::", "").strip()
    return _DTYPE_BYTES.get(text)


def _nelems(dims: Any) -> int | None:
    """Elements in the first tensor(-list) input of Input Dims (0 when they are not lists); None when a
    dim of it is no number (one of NaN or Infinity, read as "?": docs/formats.md): not known."""
    if not isinstance(dims, list) or not dims:
        return 0
    first = dims[0]
    if isinstance(first, list) and first and isinstance(first[0], list):  # TensorList
        counts = [_prod(d) for d in first if isinstance(d, list)]
        known = [count for count in counts if count is not None]
        return sum(known) if len(known) == len(counts) else None
    return _prod(first) if isinstance(first, list) else 0


def _prod(shape: list[Any]) -> int | None:
    return math.prod(shape) if all(isinstance(n, int | float) for n in shape) else None


def _as_float(value: Any) -> float:
    try:
        number = float(value)
    except _BAD_NUMBER:
        return 0.0
    return number if math.isfinite(number) else 0.0


def _message_elements(args: dict[str, Any]) -> float | None:
    """The elements a ``record_param_comms`` moves: its ``In msg nelems``, else its ``Out msg nelems``
    (0 when neither is given); None when those given are no number, as an arg of NaN or Infinity reads
    (docs/formats.md, "Values torch wrote that are no JSON"): its size is then unknown, not 0."""
    given = [args[key] for key in _NELEMS_KEYS if args.get(key) is not None]
    numbers = [number for number in map(_finite_or_none, given) if number is not None]
    if not numbers:
        return None if given else 0.0
    return next((number for number in numbers if number), 0.0)


def _finite_or_none(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except _BAD_NUMBER:
        return None
    return number if math.isfinite(number) else None


def _ranks_of(value: Any) -> list[int]:
    if isinstance(value, str):
        return list(_ranks_in_text(value))
    return _int_list(value) if isinstance(value, list) else []


def _int_list(values: list[Any]) -> list[int]:
    try:
        return [int(r) for r in values]
    except _BAD_NUMBER:
        return []


@functools.lru_cache(maxsize=256)
def _ranks_in_text(text: str) -> tuple[int, ...]:
    """The ranks of a group written as JSON text (every operator of a group repeats the same text)."""
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    return tuple(_int_list(value)) if isinstance(value, list) else ()


def _device_tasks(x: Extract) -> dict[tuple[Any, int], tuple[float, float, int]]:
    """(start, duration, correlation id) of the last device task with each External id that a host
    communication span carries (``record_param_comms``, ``nccl:all_reduce``): the time NCCL/HCCL spent
    on the device; keyed (None, id), or (the span's pid, id) in a trace of several processes whose records
    carry one id (each numbers its own: a task is its own process's, process_links.py, docs/formats.md;
    helper-225: process B's 50 µs add_k, External id 5 as A's all_reduce, was taken as that all_reduce's)."""
    keys = list(x.threads)
    by_pid: dict[int, set[Any]] = {}
    for _name, _ts, _dur, thread, args in x.comm_spans:
        ext = vocab.external_id(args)
        if ext >= 0:
            by_pid.setdefault(ext, set()).add(keys[thread][0])
    if not by_pid or not len(x.dev_ts):
        return {}
    d_ext = np.frombuffer(x.dev_ext, dtype=np.int64)
    found_hosts = process_links.hosts_for_ids(x, by_pid)
    if found_hosts is not None:  # several processes' records carry one id: each task to its own's
        hosts, codes = found_hosts
        pid_of = {code: pid for pid, code in codes.items()}
        d_ts, d_dur = np.frombuffer(x.dev_ts, dtype=np.float64), np.frombuffer(x.dev_dur, dtype=np.float64)
        d_corr = np.frombuffer(x.dev_corr, dtype=np.int64)
        out: dict[tuple[Any, int], tuple[float, float, int]] = {}
        for i in np.flatnonzero(np.isin(d_ext, np.fromiter(by_pid, np.int64, len(by_pid)))).tolist():
            if hosts[i] >= 0:  # in file order: the last one stays
                out[(pid_of[hosts[i]], int(d_ext[i]))] = (float(d_ts[i]), float(d_dur[i]), int(d_corr[i]))
        return out
    order = np.argsort(d_ext, kind="stable")  # equal ids keep file order: the last one is the last
    ids = np.array(sorted(by_pid), dtype=np.int64)
    last = np.searchsorted(d_ext[order], ids, side="right") - 1
    found = (last >= 0) & (d_ext[order][np.maximum(last, 0)] == ids)
    task = order[last[found]]
    d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)[task].tolist()
    d_dur = np.frombuffer(x.dev_dur, dtype=np.float64)[task].tolist()
    d_corr = np.frombuffer(x.dev_corr, dtype=np.int64)[task].tolist()
    return dict(
        zip(((None, e) for e in ids[found].tolist()), zip(d_ts, d_dur, d_corr, strict=True), strict=False)
    )


def _world(dist: dict[str, Any]) -> Sequence[int]:
    """Ranks 0 .. world_size - 1 (a range: a huge world_size costs nothing), or rank 0 alone."""
    try:
        return range(int(dist.get("world_size", 1)))
    except _BAD_NUMBER:
        return range(1)


Call = tuple[float, float, str, str]  # a comm: range: start and end (the trace's µs), group, function


def call_groups(ranges: Sequence[tuple[str, int, int]], base_ns: int) -> list[Call]:
    """(start, end, group, function) of each ``comm:`` range (``name``, start and end in epoch ns:
    --msprof-tx's ``comm:{op},{group},{dtype},{count}``), by start, in the trace's µs after ``base_ns``."""
    out = []
    for name, start_ns, end_ns in ranges:
        parts = name.split(",")
        if name.startswith("comm:") and len(parts) >= 4:  # a group's own name may hold a comma
            start, end = (start_ns - base_ns) / 1000.0, (end_ns - base_ns) / 1000.0
            out.append((start, end, ",".join(parts[1:-2]), parts[0][len("comm:") :]))
    return sorted(out)


def _thread_groups(spans: list[tuple[int, float, str]], calls: Sequence[Call]) -> dict[int, str]:
    """The group of each gloo worker thread: the one most named by the ``comm:`` ranges of the same
    collective (``all_gather`` in ``all_gather_into_tensor``) in which its spans (thread, start, collective)
    began (a range covers its call, a synchronous one until its span has ended)."""
    starts = [c[0] for c in calls]
    votes: dict[int, dict[str, int]] = {}
    for thread, ts, coll in spans:
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and ts <= calls[i][1] and coll in calls[i][3]:
            tally = votes.setdefault(thread, {})
            tally[calls[i][2]] = tally.get(calls[i][2], 0) + 1
    return {thread: max(tally, key=lambda g: tally[g]) for thread, tally in votes.items()}


def collect(x: Extract, meta: dict[str, Any], calls: Sequence[Call] = ()) -> list[CommOp]:
    """The collectives of the trace; ``calls``: the groups of the ``comm:`` ranges (``call_groups``), which
    give the gloo spans theirs."""
    dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
    pgs = dist.get("pg_config") or []
    if not isinstance(pgs, list):
        pgs = []
    default_pg = next(
        (p for p in pgs if isinstance(p, dict) and p.get("pg_desc") == "default_pg"),
        pgs[0] if pgs and isinstance(pgs[0], dict) else {},
    )
    default_group = str(default_pg.get("pg_name", "default"))
    default_ranks: Sequence[int] = _ranks_of(default_pg.get("ranks", [])) or _world(dist)
    dev_by_ext = _device_tasks(x)
    keys = list(x.threads)
    by_process = any(pid is not None for pid, _ext in dev_by_ext)  # keyed by the span's process too
    ops: list[CommOp] = []
    gloo: list[tuple[int, int, float]] = []  # (index in ops, thread, start) of the gloo spans
    # record_param_comms, where torch writes it, is the record of each collective: the backend's spans
    # (nccl:all_reduce on the host and again over its kernel) are the same operations
    recorded = any(span[0] == "record_param_comms" for span in x.comm_spans)
    for name, ts, dur, thread, args in x.comm_spans:
        host, corr = (ts, dur, thread), -1
        if recorded and name != "record_param_comms":
            continue
        if name == "record_param_comms":
            coll = str(args.get("Collective name", "unknown"))
            if coll in ("barrier", "wait"):
                continue
            count = _message_elements(args)
            dtype = str(args.get("dtype", "float"))
            element = _dtype_size(dtype) if count is not None else None
            count = count or 0.0
            group = str(args.get("Process Group Name", default_group))
            ranks = _ranks_of(args.get("Process Group Ranks")) or default_ranks
            dev = dev_by_ext.get((keys[thread][0] if by_process else None, vocab.external_id(args)))
            if dev is not None:
                ts, dur, corr = dev
        else:  # gloo:all_reduce and friends
            coll = name.split(":", 1)[1]
            types = args.get("Input type") or ["float"]
            if isinstance(types, str):  # torch_npu's form: "float;\r\nfloat"
                types = types.split(";")
            dtype = str(types[0] if isinstance(types, list) and types else "float").strip()
            dims = args.get("Input Dims")  # recorded only with --record-shapes
            if isinstance(dims, str):  # torch_npu's form (extract.npu_dims)
                dims = npu_dims(dims)
            nelems = _nelems(dims)
            count = _as_float(nelems or 0)
            element = _dtype_size(dtype) if dims is not None and nelems is not None else None
            group, ranks = default_group, default_ranks
            dev = dev_by_ext.get(
                (keys[thread][0] if by_process else None, vocab.external_id(args))
            )  # torch 1.8-1.10 nccl: its kernel
            if dev is not None:
                ts, dur, corr = dev
            gloo.append((len(ops), thread, ts))
        if element is None:  # no shapes recorded, or an element type not known here
            ops.append(CommOp(coll, group, ts, dur, 0.0, ranks, False, dtype, count, host, corr))
            continue
        ops.append(CommOp(coll, group, ts, dur, count * element, ranks, True, dtype, count, host, corr))
    if gloo and calls:
        by_name = {str(p.get("pg_name")): p for p in pgs if isinstance(p, dict)}
        by_name["default_pg"] = default_pg  # the comm: ranges' name of the default group
        groups = _thread_groups([(thread, ts, ops[i].name) for i, thread, ts in gloo], calls)
        for i, thread, _ts in gloo:
            pg = by_name.get(groups.get(thread, ""))
            ranks = _ranks_of(pg.get("ranks", [])) if pg else []
            if pg and ranks:
                ops[i].group, ops[i].ranks = str(pg.get("pg_name", default_group)), ranks
    if not ops:  # no host record of them (torch before 1.13, torch_npu's trace_view): the device's tasks
        ops = _device_comm_ops(x, default_group, default_ranks)
    if not ops:  # a CPU trace with only the calls (c10d::allreduce_): as analyse counts its time
        ops = _host_comm_calls(x, default_group, default_ranks)
    ops.sort(key=lambda o: o.ts)
    return ops


def _matching(strings: list[str], name_ids: np.ndarray, rule: Any) -> list[int]:
    """Positions of the items whose name (a string id) ``rule`` accepts."""
    wanted = [i for i in set(name_ids.tolist()) if rule(strings[i])]
    return np.flatnonzero(np.isin(name_ids, wanted)).tolist() if wanted else []


def _host_comm_calls(x: Extract, group: str, ranks: Sequence[int]) -> list[CommOp]:
    """The ``c10d::`` calls, as operators of unknown size (``c10d::allreduce_`` -> ``allreduce``)."""
    names = np.frombuffer(x.op_name, dtype=np.int32) if len(x.op_ts) else np.zeros(0, np.int32)
    o_ts, o_dur = np.frombuffer(x.op_ts, dtype=np.float64), np.frombuffer(x.op_dur, dtype=np.float64)
    o_thread = np.frombuffer(x.op_thread, dtype=np.int32)
    ops = []
    for k in _matching(x.strings, names, lambda name: name.startswith(vocab.C10D_PREFIX)):
        coll = x.strings[int(names[k])][len(vocab.C10D_PREFIX) :].rstrip("_")
        if coll not in ("barrier", "wait"):
            start, dur = float(o_ts[k]), float(o_dur[k])
            host = (start, dur, int(o_thread[k]))
            ops.append(CommOp(coll, group, start, dur, 0.0, ranks, False, "", 0.0, host))
    return ops


_DEVICE_COLLECTIVE = re.compile(r"^(?:hcom_([A-Za-z]+)_|nccl(?:Dev)?Kernel_([A-Za-z]+)(?:_|$))")


def _device_comm_ops(x: Extract, group: str, ranks: Sequence[int]) -> list[CommOp]:
    """The device's communication tasks (``ncclKernel_AllReduce_...``, ``hcom_allReduce__...``) as
    operators of unknown size, named by their collective where the task's name says it."""
    # the communication process's collectives, when the trace has one, are the same operations as their
    # tasks on the device's streams (and as npuprof's own Communication process, in a trace_view.json it
    # wrote): they are taken alone, so that each counts once
    from_process = _comm_process_ops(x, group, ranks)
    if from_process:
        return from_process
    names = np.frombuffer(x.dev_name, dtype=np.int32) if len(x.dev_ts) else np.zeros(0, np.int32)
    d_ts, d_dur = np.frombuffer(x.dev_ts, dtype=np.float64), np.frombuffer(x.dev_dur, dtype=np.float64)
    d_corr = np.frombuffer(x.dev_corr, dtype=np.int64)
    ops = []
    for k in _matching(x.strings, names, vocab.is_comm_name):
        name = x.strings[int(names[k])]
        ops.append(CommOp(_collective(name), group, float(d_ts[k]), float(d_dur[k]), 0.0, ranks, False, "",
                          0.0, None, int(d_corr[k])))  # fmt: skip
    return ops


def _collective(name: str) -> str:
    found = _DEVICE_COLLECTIVE.match(name)
    return next((g for g in found.groups() if g), name) if found else name


_GROUP_THREAD = re.compile(r"(?i)^group\s+(\S+)\s+communication")


def _comm_process_ops(x: Extract, group: str, ranks: Sequence[int]) -> list[CommOp]:
    """The collectives of torch_npu's communication process: its events on ``Group <g> Communication``
    threads (the others, ``Plane <n>``, are their tasks); when no thread is so named, its events of a
    communication name (``hcom_allReduce__123_0``)."""
    if not len(x.cx_ts):
        return []
    names = np.asarray(x.cx_name, dtype=np.int32)
    threads = np.asarray(x.cx_thread, dtype=np.int32)
    labels = {int(t): x.thread_names.get(int(t), "") for t in np.unique(threads).tolist()}
    op_threads = [t for t, label in labels.items() if vocab.COMM_OP_THREAD_RE.search(label)]
    if op_threads:
        picked = np.flatnonzero(np.isin(threads, op_threads)).tolist()
    else:
        picked = _matching(x.strings, names, vocab.is_comm_name)
    c_ts = np.asarray(x.cx_ts, dtype=np.float64)
    c_dur = np.asarray(x.cx_dur, dtype=np.float64)
    ops = []
    for k in picked:
        found = _GROUP_THREAD.match(labels[int(threads[k])])
        ops.append(CommOp(_collective(x.strings[int(names[k])]), found.group(1) if found else group,
                          float(c_ts[k]), float(c_dur[k]), 0.0, ranks, False, "", 0.0, None))  # fmt: skip
    return ops


def summary(ops: list[CommOp]) -> dict[str, Any]:
    """The summary's communication figures: operators, time, and the size when every operator's is known
    (gloo records sizes only with --record-shapes); otherwise how many sizes are unknown, never 0 MB."""
    result: dict[str, Any] = {"operators": len(ops)}
    if not ops:
        return result
    result["time_us"] = round(sum(o.dur for o in ops), 3)
    unknown = sum(1 for o in ops if not o.size_known)
    if unknown:
        result["size_unknown_operators"] = unknown
    else:
        result["size_mb"] = round(sum(o.size_bytes for o in ops) / 1e6, 6)
    return result


def summary_by_step(ops: list[CommOp], windows: StepWindows) -> dict[str, dict[str, Any]]:
    """:func:`summary` of each step's operators (by the step they start in), keyed by the step's number:
    what `npuprof analyse --steps` sums. Operators outside every step, or a trace without numbered steps,
    have no key."""
    by_step: dict[str, list[CommOp]] = {}
    for op, key in zip(ops, _step_keys(ops, windows), strict=True):
        if key is not None and key.startswith("step") and key[4:].isdigit():
            by_step.setdefault(key[4:], []).append(op)
    return {step: summary(step_ops) for step, step_ops in by_step.items()}


def add_summaries(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several :func:`summary` results (of steps) as one: sizes only when every part's is known."""
    result: dict[str, Any] = {"operators": sum(int(p.get("operators", 0)) for p in parts)}
    if not result["operators"]:
        return result
    result["time_us"] = round(sum(float(p.get("time_us", 0.0)) for p in parts), 3)
    unknown = sum(int(p.get("size_unknown_operators", 0)) for p in parts)
    if unknown:
        result["size_unknown_operators"] = unknown
    else:
        result["size_mb"] = round(sum(float(p.get("size_mb", 0.0)) for p in parts), 6)
    return result


def _size_bucket(mb: float) -> str:
    return f"{mb:.6f}".rstrip("0").rstrip(".") or "0"


def _info(start_us: float, ms: float, mb: float, distribution: dict[str, list[float]]) -> dict[str, Any]:
    """One "Communication Time Info" + "Communication Bandwidth Info" record."""
    bandwidth = round(mb / ms, 4) if ms > 0 else 0.0
    return _record(start_us, round(ms, 6), round(mb, 6), bandwidth, distribution)


def _record(
    start_us: float, ms: float, mb: float, bandwidth: float, distribution: dict[str, list[float]]
) -> dict[str, Any]:
    """The record of :func:`_info` from its rounded figures. Wait and synchronisation need every rank's
    timing, so they are 0 here."""
    return {
        "Communication Time Info": {
            "Start Timestamp(us)": start_us,
            "Elapse Time(ms)": ms,
            "Transit Time(ms)": ms,
            "Wait Time(ms)": 0.0,
            "Synchronization Time(ms)": 0.0,
            "Idle Time(ms)": 0.0,
            "Wait Time Ratio": 0.0,
            "Synchronization Time Ratio": 0.0,
        },
        "Communication Bandwidth Info": {
            TRANSPORT: {
                "Transit Size(MB)": mb,
                "Transit Time(ms)": ms,
                "Bandwidth(GB/s)": bandwidth,
                "Large Packet Ratio": 0.0,
                "Size Distribution": distribution,
            }
        },
    }


def _op_records(ops: list[CommOp], base_us: float = 0.0) -> list[dict[str, Any]]:
    """``_info(round(op.ts, 3), ms, mb, {bucket: [1, round(ms, 6)]})`` of each operator, its figures
    rounded for all operators at once."""
    ms = np.array([op.dur for op in ops], dtype=float) / 1000.0
    mb = np.array([op.size_bytes for op in ops], dtype=float) / 1e6
    timed = ms > 0
    quotient = np.divide(mb, ms, out=np.zeros(len(ops)), where=timed)
    bandwidth = [b if t else 0.0 for b, t in zip(rounded(quotient, 4), timed.tolist(), strict=True)]
    ms6, mb6 = rounded(ms, 6), rounded(mb, 6)
    starts = rounded(np.array([op.ts for op in ops], dtype=float) + base_us, 3)
    buckets: dict[float, str] = {}
    for value in mb.tolist():
        if value not in buckets:
            buckets[value] = _size_bucket(value)
    return [
        _record(start, t, size, bw, {buckets[raw]: [1, t]})
        for start, t, size, bw, raw in zip(starts, ms6, mb6, bandwidth, mb.tolist(), strict=True)
    ]


def _total(infos: list[dict[str, Any]]) -> dict[str, Any]:
    elapse = sum(i["Communication Time Info"]["Elapse Time(ms)"] for i in infos)
    size = sum(i["Communication Bandwidth Info"][TRANSPORT]["Transit Size(MB)"] for i in infos)
    dist: dict[str, list[float]] = {}
    for info in infos:
        for k, (c, t) in info["Communication Bandwidth Info"][TRANSPORT]["Size Distribution"].items():
            d = dist.setdefault(k, [0, 0.0])
            d[0] += c
            d[1] = round(d[1] + t, 6)
    start = min((i["Communication Time Info"]["Start Timestamp(us)"] for i in infos), default=0.0)
    return _info(start, elapse, size, dist)


def _step_keys(ops: list[CommOp], windows: StepWindows) -> list[str | None]:
    """The communication.json step key of each operator ("step<N>", or "step" for a trace without
    steps); None for one outside every step."""
    if not len(windows):
        return ["step"] * len(ops)
    labels = ["step" if n is None else f"step{n}" for n in windows.numbers] + [None]  # -1: outside
    inside = windows.index_of(np.array([op.ts for op in ops], dtype=float))
    return [labels[i] for i in inside.tolist()]


def matrix_picks(members: list[tuple[str, CommOp]]) -> dict[str, list[tuple[str, CommOp]]]:
    """The operators of one type, step and group that torch_npu's communication matrix samples, by
    duration: ``top1``, ``middle``, ``bottom1``..``bottom3`` (those there are) and ``total`` (all)."""
    ordered = sorted(members, key=lambda m: -m[1].dur)
    half = len(ordered) // 2
    picks = {
        "top1": ordered[:1],
        "middle": ordered[half : half + 1],
        "bottom1": ordered[-1:],
        "bottom2": ordered[-2:-1],
        "bottom3": ordered[-3:-2],
        "total": ordered,
    }
    return {label: chosen for label, chosen in picks.items() if chosen}


def build(
    ops: list[CommOp], windows: StepWindows, rank: int | None, base_ns: int = 0
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(communication.json, communication_matrix.json) contents; start times in epoch µs when the trace
    has a time base (``base_ns``), as trace_view.json's."""
    comm: dict[str, dict[str, dict[str, Any]]] = {}
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    seq: dict[str, int] = {}  # the collective's index in its group, whatever its type (docs/formats.md)
    per_kind: dict[tuple[str, str, str], list[tuple[str, CommOp]]] = {}
    records = _op_records(ops, base_ns / 1000.0)
    for op, step, record in zip(ops, _step_keys(ops, windows), records, strict=True):
        n = seq.get(op.group, 0)
        seq[op.group] = n + 1
        if step is None:
            continue
        kind = "p2p" if op.p2p else "collective"
        key = f"{op.name}__{n}@{group_id(op.group)}"
        comm.setdefault(step, {"collective": {}, "p2p": {}})[kind][key] = record
        per_kind.setdefault((step, kind, op.group), []).append((key, op))
    for step_data in comm.values():
        for kind in ("collective", "p2p"):
            infos = list(step_data[kind].values())
            step_data[kind]["Total Op Info"] = _total(infos)
    # the matrix: this rank's self link for each operator type, with top/bottom/total aggregates
    for (step, kind, name_of_group), items in per_kind.items():
        by_type: dict[str, list[tuple[str, CommOp]]] = {}
        for key, op in items:
            by_type.setdefault(op.name, []).append((key, op))
        target = matrix.setdefault(step.replace("step", "") or "step", {}).setdefault(kind, {})
        group = group_id(name_of_group)
        for name, members in by_type.items():
            local = members[0][1].ranks.index(rank) if rank is not None and rank in members[0][1].ranks else 0
            link = f"{local}-{local}"
            for label, chosen in matrix_picks(members).items():
                ms = sum(m[1].dur for m in chosen) / 1000.0
                mb = sum(m[1].size_bytes for m in chosen) / 1e6
                target[f"{name}-{label}@{group}"] = {
                    link: {
                        "Transport Type": "LOCAL",
                        "Transit Size(MB)": round(mb, 6),
                        "Transit Time(ms)": round(ms, 6),
                        "Bandwidth(GB/s)": round(mb / ms, 4) if ms > 0 else 0.0,
                        "Op Name": chosen[0][0] if label != "total" else f"{name}-total@{group}",
                    }
                }
    return comm, matrix
