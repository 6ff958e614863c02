"""trace_view.json as torch_npu writes it (docs/formats.md, "What the parser writes"): a bare
JSON array of events, read by msprof-analyze (advisor, compare) with ``ijson.items(f, "item")`` and by
MindStudio Insight.

The raw trace's events, rewritten, come first (analysis/trace_body.py); this module appends what torch_npu's
file has and the raw trace has not: the process and thread metadata of torch_npu (``Python`` / ``Ascend
Hardware`` with their labels and sort indexes, ``Thread <tid>`` / ``Stream <n>``), the ``Overlap
Analysis`` process with its four lanes (``Computing``, ``Communication``, ``Communication(Not
Overlapped)``, ``Free``), a ``Communication`` process whose ``Group <g> Communication`` threads hold the
collectives as HCCL names them (``hcom_allReduce__<g>_<n>``: msprof-analyze compare takes the op from the
name's second ``_`` part) and the ``async_npu`` flows from each operator to the device tasks it launched;
last, when the capture had them, the user's marks and ranges and ``--msprof-tx``'s ``comm:`` ranges as
CANN's ``MsprofTx`` layer and the GC pauses as torch_npu's ``Python GC`` layer (analysis/marks_ranges.py,
analysis/gc_layer.py). It also reads a .gz trace behind its decompression (:class:`Decompression`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import msgspec
import numpy as np

from npuprof.analysis import intervals, process_links
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.communication import group_id
from npuprof.analysis.extract import Extract
from npuprof.analysis.forked import Forked
from npuprof.analysis.gzip_members import GzipMembers
from npuprof.analysis.step_breakdown import OVERLAP_LANES
from npuprof.analysis.tables import RankTables, ns_of
from npuprof.analysis.trace_body import Body, append, epoch_texts, write_all
from npuprof.analysis.trace_loader import TraceError, TraceReader

FLOW_BATCH = 1 << 15  # flows formatted at a time
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


class GzipRead(NamedTuple):
    """What :func:`decompress` found of a .gz: what was left out after its data (``GzipMembers.ignored_note``)
    or None, its members read to their end, whether its data ends in a member cut short, and the bytes it
    held (decompressed)."""

    note: str | None
    members: int
    cut: bool
    size: int


def decompress(raw: Path, out: IO[bytes]) -> GzipRead:
    """Write the decompressed ``raw`` (.gz) into ``out``, flushed as it goes (so it can be read behind).
    Returns what was found of it (:class:`GzipRead`). Raises TraceError for a damaged file."""
    written = 0
    try:
        with GzipMembers(raw, cut_ok=True) as src:
            while data := src.read(8 << 20):
                out.write(data)
                out.flush()
                written += len(data)
            cut = bool(src.cut_short) or src.ignored_what == "a gzip member cut short"
            return GzipRead(src.ignored_note(), src.members, cut, written)
    except EOFError as exc:  # worded as the trace reader words it (trace_loader.TraceReader._read)
        raise TraceError(
            "truncated", f"{raw}: the compressed trace ends early after {written} bytes (truncated file?)"
        ) from exc
    except zlib.error as exc:
        raise TraceError("corrupt", f"{raw}: cannot read the trace after {written} bytes: {exc}") from exc


class Decompression:
    """:func:`decompress` in a forked process (a thread would fight the reader for the GIL), so the trace
    can be read behind it: ``wait_for(n)`` returns the size written once it is ``n`` bytes or all of it
    (then ``done``); ``join()`` waits for the end and raises its error; ``cancel()`` stops it. Where fork
    is unavailable, all is decompressed at once, here."""

    def __init__(self, raw: Path, out: IO[bytes]) -> None:
        out.flush()
        self.out, self.done = out, False
        self.note: str | None = None  # decompress's note, once joined
        self.read: GzipRead | None = None  # and all it found
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
                self.read = self.job.result()
                self.note = self.read.note
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


_ENC = msgspec.json.Encoder()


def events_start(path: Path, fd: int) -> int:
    """The offset of the first event of the plain trace open at ``fd``."""
    return TraceReader(path, fd=fd).events_start()


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
    ``tid_of[which[k]]`` over [starts[k], ends[k]) (trace µs), formatted in bulk, ``FLOW_BATCH`` rows a
    piece (the text of a million rows at once would be several hundred MB)."""
    if not len(starts):
        return []
    pid_json = _ENC.encode(pid).decode()
    templates = [
        ('{"name":' + nm.decode() + ',"pid":' + pid_json + ',"tid":' + _ENC.encode(t).decode()).replace(
            "%", "%%"
        )
        + ',"ts":"%s","dur":%s,"ph":"X"}'
        for nm, t in zip(name_json, tid_of, strict=True)
    ]
    pieces = []
    for lo in range(0, len(starts), FLOW_BATCH):
        hi = min(lo + FLOW_BATCH, len(starts))
        first, last = ns_of(starts[lo:hi]) + base_ns, ns_of(ends[lo:hi]) + base_ns
        dur = _ENC.encode(np.round((last - first) / 1000.0, 3).tolist())[1:-1].decode().split(",")
        values: list[Any] = [None] * (2 * len(dur))
        values[0::2], values[1::2] = epoch_texts(first), dur
        pieces.append(_bulk(templates, which[lo:hi].tolist(), values))
    return pieces


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


def metadata(x: Extract, body: Body) -> list[bytes]:
    """The process and thread metadata of the events written (``body``), each encoded: the first of the
    events torch_npu's trace_view.json has and the raw trace has not (then :func:`overlays`)."""
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
    return out


def overlays(
    tables: RankTables, x: Extract, comm_ops: list[Any], base_ns: int, layers: Iterable[bytes] = ()
) -> Iterator[bytes]:
    """The Overlap Analysis process and its lanes, the Communication process and the async_npu flows:
    what needs the tables, not the rewritten events (encoded, a few MB at a time); then ``layers``, the
    capture's MsprofTx and GC layers (analysis/annotations.py), when it has any."""
    out = _process(OVERLAP_PID, "Overlap Analysis", "NPU", OVERLAP_SORT)
    for tid, label in enumerate(LANES):
        out += _thread(OVERLAP_PID, tid, label, None)
    lanes = tables.breakdown.lanes
    lane_tid = np.array([LANES.index(label) for label in OVERLAP_LANES], dtype=np.int64)
    windows = tables.breakdown.windows
    if tables.breakdown.lanes_left_out:  # steps over one another: no lane at all (step_breakdown.py)
        cs = ce = np.zeros(0)
    else:
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
    yield from out
    if not len(x.cx_ts):  # else the trace's own communication process is kept, as its events are
        yield from _communication(comm_ops, base_ns)
    yield from _flows(x, base_ns)
    yield from layers


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
    # n: the collective's index in its group, whatever its type, as HCCL numbers them (docs/formats.md)
    seq: dict[str, int] = {}
    names: list[bytes] = []
    for op in comm_ops:
        n = seq.get(op.group, 0)
        seq[op.group] = n + 1
        # the last 3 digits of the group's hash, as torch_npu names them (docs/formats.md)
        names.append(_ENC.encode(f"hcom_{hcom_name(op.name)}__{group_id(op.group)[-3:]}_{n}"))
    starts = np.array([op.ts for op in comm_ops], dtype=np.float64)
    ends = starts + np.array([op.dur for op in comm_ops], dtype=np.float64)
    tids = [groups[op.group] for op in comm_ops]
    return out + _spans(names, COMM_PID, tids, np.arange(len(comm_ops)), starts, ends, base_ns)


def _flows(x: Extract, base_ns: int) -> Iterator[bytes]:
    """``async_npu`` flows (torch_npu's ``torch_to_npu``) from each operator to the device tasks it
    launched (matched by Kineto's External id, in a trace of several processes whose ids meet the task's own
    process's operator, process_links.py); none when some device tasks have no category, or when the
    trace has such flows already (torch_npu's form: its events are kept, flows included)."""
    n = len(x.dev_ts)
    if not n or not len(x.op_ts) or len(x.dev_tid) != n or len(x.fl_id):
        return
    o_ext = np.frombuffer(x.op_ext, dtype=np.int64)
    d_ext = np.frombuffer(x.dev_ext, dtype=np.int64)
    found = process_links.launchers(x, np.frombuffer(x.op_thread, dtype=np.int32), o_ext)
    if found is not None:  # several processes' External ids meet: a task's own process's operator
        hit = np.flatnonzero(found[0] >= 0)  # (helper-225: B's add_k drawn from A's aten::mm)
        op = found[0][hit]
    else:
        valid = np.flatnonzero(o_ext >= 0)
        order = valid[np.argsort(o_ext[valid], kind="stable")]
        sorted_ext = o_ext[order]
        if not len(sorted_ext):
            return
        pos = np.clip(np.searchsorted(sorted_ext, d_ext), 0, len(sorted_ext) - 1)
        hit = np.flatnonzero((sorted_ext[pos] == d_ext) & (d_ext >= 0))
        op = order[pos[hit]]
    if not len(hit):
        return
    keys = list(x.threads)
    # one template per thread at each end: the s event on the operator's, the f event on the task's
    threads, s_which = np.unique(np.frombuffer(x.op_thread, dtype=np.int32)[op], return_inverse=True)
    templates = [_flow_template("s", *keys[t]) for t in threads.tolist()]
    f_index: dict[tuple[Any, Any], int] = {}
    for lo in range(0, len(hit), FLOW_BATCH):  # in batches: a few MB of text at a time
        tasks = hit[lo : lo + FLOW_BATCH].tolist()
        m = len(tasks)
        f_keys = list(zip(map(x.dev_pid.__getitem__, tasks), map(x.dev_tid.__getitem__, tasks), strict=True))
        for key in dict.fromkeys(f_keys):
            if key not in f_index:
                f_index[key] = len(templates)
                templates.append(_flow_template("f", *key))
        which: list[Any] = [None] * (2 * m)
        which[0::2] = s_which[lo : lo + m].tolist()
        which[1::2] = map(f_index.__getitem__, f_keys)
        values: list[Any] = [None] * (4 * m)
        values[0::4] = values[2::4] = range(lo + 1, lo + m + 1)
        values[1::4] = epoch_texts(ns_of(np.frombuffer(x.op_ts, dtype=np.float64)[op[lo : lo + m]]) + base_ns)
        values[3::4] = epoch_texts(ns_of(np.frombuffer(x.dev_ts, dtype=np.float64)[tasks]) + base_ns)
        yield _bulk(templates, which, values)


def _flow_template(ph: str, pid: Any, tid: Any) -> str:
    where = f',"pid":{_ENC.encode(pid).decode()},"tid":{_ENC.encode(tid).decode()}'.replace("%", "%%")
    return (
        '{"ph":"' + ph + '","bp":"e","name":"torch_to_npu","id":%d' + where + ',"ts":"%s","cat":"async_npu"}'
    )


class Spooled:
    """Encoded events (:func:`overlays`) kept in a private temporary file in ``work_dir`` until they are
    appended (:func:`write_tail`), rather than in memory while the body is written."""

    def __init__(self, events: Iterable[bytes], work_dir: Path) -> None:
        self.file = tempfile.TemporaryFile(dir=work_dir)  # noqa: SIM115 (closed by close())
        self.empty = True
        for event in events:
            self.file.write(event if self.empty else b",\n" + event)
            self.empty = False
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def write_tail(out_fd: int, events: list[bytes], body_empty: bool, spooled: Spooled | None = None) -> None:
    """Append ``events`` and then the ``spooled`` ones after the body, and close the array."""
    after = spooled is not None and not spooled.empty
    if events or after:
        write_all(
            out_fd,
            (b"\n" if body_empty else b",\n") + b",\n".join(events) + (b",\n" if events and after else b""),
        )
    if after:
        append(out_fd, spooled.file.fileno())  # type: ignore[union-attr]
    write_all(out_fd, b"\n]\n")
