"""From an :class:`Extract` to the Ascend tables and npuprof's per-rank summary (docs/formats.md, "What the
parser writes" and "The Ascend tables as columns"): typed columns (:mod:`npuprof.analysis.ascend_tables`),
formatted when written; the step breakdown is :mod:`npuprof.analysis.step_breakdown`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from npuprof.analysis import intervals, launch_flows, nesting, process_links
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.ascend_tables import EAGER_MODEL, KernelTable, OperatorTable, OpStatTable

# the cell and time texts live in cells.py; memory.py, trace_view.py and older callers import them from here
from npuprof.analysis.cells import (  # noqa: F401
    LINES_BATCH,
    csv_cell,
    csv_cells,
    epoch_texts,
    float_texts,
    ns_of,
    ns_of_texts,
    us_texts,
)
from npuprof.analysis.extract import Extract
from npuprof.analysis.rounding import rounded
from npuprof.analysis.step_breakdown import StepBreakdown, StepWindows, Work, breakdown
from npuprof.analysis.summary_schema import TOP_PER_STEP

CPU_CORE = "CPU"


def base_ns_of(meta: dict[str, Any]) -> int:
    """Kineto's ``baseTimeNanoseconds`` (its ``ts`` values are microseconds after it; 0 when absent, as in
    traces that write epoch times themselves)."""
    base = meta.get("baseTimeNanoseconds")
    return base if isinstance(base, int) and not isinstance(base, bool) and 0 < base < 1 << 62 else 0


def base_ns_notes(meta: dict[str, Any]) -> list[str]:
    """The warning for a ``baseTimeNanoseconds`` that is there but no time (damage, an edit): its ``ts``
    are then read as they are, so starts compared across ranks may mix clocks."""
    if "baseTimeNanoseconds" not in meta or base_ns_of(meta) or meta["baseTimeNanoseconds"] == 0:
        return []
    shown = repr(meta["baseTimeNanoseconds"])[:40]
    return [
        f"the trace's baseTimeNanoseconds ({shown}) is no time in nanoseconds: its times are read without "
        "it (the start skew across ranks may compare different clocks)"
    ]


@dataclass
class OpView:
    """The operators as numpy columns, with the results of the nesting walk."""

    thread: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    name: np.ndarray
    shapes: np.ndarray
    stack: np.ndarray
    ext: np.ndarray
    self_time: np.ndarray
    parent: np.ndarray
    dev_self: np.ndarray
    dev_total: np.ndarray

    @cached_property
    def inner_repeat(self) -> np.ndarray:
        """True for an operator that is its parent's only child and of its name (``aten::sum`` running
        ``aten::sum.dim_IntList``, both named ``aten::sum`` in the trace): torch's ``key_averages()``
        counts such a pair as one call, the outer one, whose total is the outer one's and whose self time
        is both ones' (``EventList._remove_dup_nodes``). Every table that counts calls or sums totals
        follows it; worked out once per rank."""
        has = self.parent >= 0
        parents = self.parent[has]
        children = np.bincount(parents, minlength=len(self.parent))
        inner = np.zeros(len(self.parent), bool)
        inner[has] = (self.name[parents] == self.name[has]) & (children[parents] == 1)
        return inner

    @cached_property
    def call(self) -> np.ndarray:
        """The call each operator is part of: itself, or for an inner repeat the outermost operator of its
        chain of repeats."""
        call = np.where(self.inner_repeat, self.parent, np.arange(len(self.parent)))
        while not np.array_equal(up := call[call], call):  # pointer jumping: a chain of n in log2(n) rounds
            call = up
        return call


@dataclass
class RankTables:
    """Every table of one rank, as columns; the CSV writer formats them (``table.csv_lines()``)."""

    device: str  # "CPU", "CUDA" or "NPU"
    device_id: int
    breakdown: StepBreakdown
    kernels: KernelTable
    operators: OperatorTable
    op_stats: OpStatTable
    summary: dict[str, Any]
    ops: OpView | None = None

    @property
    def step_rows(self) -> list[list[Any]]:
        """The rows of step_trace_time.csv."""
        return self.breakdown.ascend_rows(self.device_id)


def nest(x: Extract) -> OpView:
    """Per thread, sort operators by (start, -duration) and nest them (see :mod:`nesting`): self time,
    parent, device totals."""
    launch_flows.link(x)  # torch_npu's form: operators and tasks joined by flows, not External ids
    n = len(x.op_ts)
    thread = np.frombuffer(x.op_thread, dtype=np.int32) if n else np.zeros(0, np.int32)
    ts = np.frombuffer(x.op_ts, dtype=np.float64) if n else np.zeros(0)
    dur = np.frombuffer(x.op_dur, dtype=np.float64) if n else np.zeros(0)
    order = _op_order(thread, ts, dur)
    thread, ts, dur = thread[order], ts[order], dur[order]
    name = np.frombuffer(x.op_name, dtype=np.int32)[order] if n else np.zeros(0, np.int32)
    shapes = np.frombuffer(x.op_shapes, dtype=np.int32)[order] if n else np.zeros(0, np.int32)
    stack = np.frombuffer(x.op_stack, dtype=np.int32)[order] if n else np.zeros(0, np.int32)
    ext = np.frombuffer(x.op_ext, dtype=np.int64)[order] if n else np.zeros(0, np.int64)
    # device time launched by each op (kernels carry the launching op's External id)
    dev_self = np.zeros(n)
    found = process_links.launchers(x, thread, ext) if n else None
    if found is not None:
        task_op = found[0]
        hit = task_op >= 0
        np.add.at(dev_self, task_op[hit], np.frombuffer(x.dev_dur, dtype=np.float64)[hit])
    elif n and len(x.dev_ts):
        dext = np.frombuffer(x.dev_ext, dtype=np.int64)
        ddur = np.frombuffer(x.dev_dur, dtype=np.float64)
        valid = ext >= 0
        ext_sorted_idx = np.flatnonzero(valid)[np.argsort(ext[valid], kind="stable")]
        ext_sorted = ext[ext_sorted_idx]
        pos = np.searchsorted(ext_sorted, dext)
        pos_ok = pos < len(ext_sorted)
        hit = np.zeros(len(dext), dtype=bool)
        hit[pos_ok] = ext_sorted[pos[pos_ok]] == dext[pos_ok]
        np.add.at(dev_self, ext_sorted_idx[pos[hit]], ddur[hit])
    parent, child_sum, dev_total = nesting.walk(thread, ts, dur, dev_self)
    self_time = nesting.self_times(thread, ts, dur, parent, child_sum)
    return OpView(thread, ts, dur, name, shapes, stack, ext, self_time, parent, dev_self, dev_total)


def _op_order(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((-dur, ts, thread))``. A trace lists each thread's operators in that order already,
    as a rule: then a stable sort by thread alone (~100x faster) gives the same order."""
    order = np.argsort(thread, kind="stable")
    th, t, d = thread[order], ts[order], dur[order]
    in_order = (th[1:] != th[:-1]) | (t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (d[1:] <= d[:-1]))
    return order if in_order.all() else np.lexsort((-dur, ts, thread))


def device_id_of(x: Extract) -> int:
    """The device the kernels ran on (the first non-negative device id; 0 when none)."""
    dev_device = np.asarray(x.dev_device, dtype=np.int64)
    valid = dev_device[dev_device >= 0]
    return int(valid[0]) if len(valid) else 0


def step_windows(x: Extract) -> StepWindows:
    """The ``ProfilerStep`` windows, by start (the first span of a number repeated); one window over the
    whole trace when it has no steps."""
    if x.steps:
        seen: dict[int, tuple[int | None, float, float]] = {}
        for num, ts, dur, _t in x.steps:
            seen.setdefault(num, (num, ts, ts + dur))
        return StepWindows.of(sorted(seen.values(), key=lambda s: s[1]))
    if x.first_ts == float("inf"):
        return StepWindows.of([])
    return StepWindows.of([(None, x.first_ts, x.last_ts)])


def build_tables(x: Extract, ops: OpView | None = None, base_ns: int = 0) -> RankTables:
    """Every table of one rank; ``ops`` is ``nest(x)`` when the caller has it already; ``base_ns``: the
    trace's time base (kernel_details' start times are epoch µs)."""
    if ops is None:
        ops = nest(x)
    on_device = len(x.dev_ts) > 0 or x.hccl_without_tasks()
    windows = step_windows(x)
    device = _device_kind(x) if len(x.dev_ts) else "NPU" if on_device else "CPU"
    device_id = device_id_of(x)
    fetch = _fetch_ops(x, ops)
    work = device_work(x, ops) if on_device else host_work(x, ops, fetch)
    steps = _without_damaged_fetch_steps(
        x, breakdown(windows, replace(work, data=data_fetches(x, ops, fetch)))
    )
    step_numbers = windows.numbers if x.steps else None
    launch = _launch_rows(x, ops)
    if on_device:
        kernels, op_stats = _device_kernels(x, ops, windows, step_numbers, base_ns, launch)
    else:
        kernels, op_stats = _cpu_kernels(x, ops, windows, step_numbers, base_ns), _cpu_op_stats(x, ops)
    summary = {
        "device": device,
        "device_id": device_id,
        "steps": steps.summary_steps(),
        "top_operators": _top_ops(x, ops, windows),
        "top_kernels": _top_kernels(x, windows, launch),
        **_totals(x, ops),
    }
    return RankTables(device, device_id, steps, kernels, _operator_table(x, ops), op_stats, summary, ops)


def device_notes(tabs: RankTables, x: Extract) -> list[str]:
    """A warning when the trace's device work ran on more than one device (one process driving two GPUs):
    the step breakdown counts it as one device's, the union of their busy time (helper-175: two GPUs each
    busy half of a step, one after the other, read as one device busy all of it, without a word)."""
    if tabs.device == "CPU" or not len(x.dev_device):
        return []
    devices = np.unique(np.asarray(x.dev_device, dtype=np.int64))
    devices = devices[devices >= 0]
    if len(devices) < 2:
        return []
    shown = ", ".join(map(str, devices[:8].tolist())) + (" ..." if len(devices) > 8 else "")
    return [
        f"the trace holds device work of {len(devices)} devices ({shown}): each step's computing, "
        "communication and free time count it as one device's (the union of their busy time)"
    ]


def process_notes(tabs: RankTables, x: Extract) -> list[str]:
    """A warning for the device tasks that any of several processes of the trace could have launched
    (process_links.py): linked to no operator."""
    found = process_links.launchers(x, tabs.ops.thread, tabs.ops.ext) if tabs.ops is not None else None
    ambiguous = found[1] if found is not None else 0
    ambiguous += getattr(x, "_flows_ambiguous", 0)  # torch_npu's launch flows (launch_flows.py)
    return process_links.ambiguous_note(ambiguous)


def lane_notes(tabs: RankTables) -> list[str]:
    """A warning when the steps overlap each other too much for trace_view.json's Overlap Analysis lanes
    (step_breakdown._breakdown_by_totals): they are left out, the step times stand."""
    if not tabs.breakdown.lanes_left_out:
        return []
    return [
        f"the {len(tabs.breakdown.windows)} steps overlap one another so much that the Overlap Analysis "
        "lanes would draw the same work once for each step over it: trace_view.json has none; the step "
        "times are whole"
    ]


def link_notes(tabs: RankTables, x: Extract) -> list[str]:
    """A warning when no device task is linked to a host operator (by External id) or to a runtime launch
    (by correlation) while the trace has operators: device work that nothing in this trace launched
    (helper-99: an added process of kernels turned a CPU trace into a CUDA one, 15 % computing, without a
    word)."""
    launcher, ops = tabs.kernels.launcher, tabs.ops
    if tabs.device == "CPU" or launcher is None or not len(launcher) or (launcher >= 0).any():
        return []
    if ops is None or not len(ops.name):
        return []
    corr = tabs.kernels.task_id
    if len(x.launch_corr) and np.isin(corr[corr >= 0], np.frombuffer(x.launch_corr, dtype=np.int64)).any():
        return []
    return [
        f"none of the {len(launcher)} device tasks is linked to a host operator (no External id of an "
        "operator, no correlation id of a runtime launch): their time is the device's, but nothing in this "
        "trace is known to have launched them (another process's tasks, or a trace put together?)"
    ]


def _device_kind(x: Extract) -> str:
    """NPU for torch_npu's traces (an ``Ascend Hardware`` / NPU device process), else CUDA."""
    names = getattr(x, "process_names", {}).values()
    return "NPU" if any(vocab.NPU_PROCESS_RE.search(name) for name in names) else "CUDA"


def _name_flags(strings: list[str], rule: Any) -> np.ndarray:
    """``rule(name)`` for every string id."""
    return np.array([rule(s) for s in strings], dtype=bool) if strings else np.zeros(0, bool)


def device_work(x: Extract, ops: OpView) -> Work:
    """With device tasks: computing is the union of the tasks other than communication kernels."""
    d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)
    d_end = d_ts + np.frombuffer(x.dev_dur, dtype=np.float64)
    d_name = np.frombuffer(x.dev_name, dtype=np.int32)
    d_comm = _name_flags(x.strings, vocab.is_comm_name)[d_name]
    recv = _name_flags(x.strings, vocab.is_receive)[d_name] & d_comm
    both_ways = _name_flags(x.strings, vocab.is_send_or_receive)[d_name] & d_comm
    if both_ways.any():  # NCCL's SendRecv kernel does either: its record_param_comms says which
        received = [
            vocab.external_id(args)
            for name, _ts, _dur, _thread, args in x.comm_spans
            if name == vocab.COMM_RECORD and vocab.is_receive(str(args.get("Collective name", "")))
        ]
        d_ext = np.frombuffer(x.dev_ext, dtype=np.int64)
        recv = (recv & ~both_ways) | (both_ways & np.isin(d_ext, [e for e in received if e >= 0]))
    c_ts, c_end, c_recv = comm_process_spans(x)
    computes = ~d_comm & ~_copy_tasks(x, d_name)
    return Work(
        computing=intervals.union(d_ts[computes], d_end[computes]),
        communication=intervals.union(
            np.concatenate([d_ts[d_comm], c_ts]), np.concatenate([d_end[d_comm], c_end])
        ),
        receive=intervals.union(
            np.concatenate([d_ts[recv], c_ts[c_recv]]), np.concatenate([d_end[recv], c_end[c_recv]])
        ),
        task_starts=np.sort(d_ts),
    )


def _copy_tasks(x: Extract, d_name: np.ndarray) -> np.ndarray:
    """A mask of the device tasks that copy or fill memory (vocab.COPY_TASK_KINDS / COPY_TASK_NAMES)."""
    is_copy = {kind: kind in vocab.COPY_TASK_KINDS for kind in dict.fromkeys(x.dev_kind)}
    by_kind = np.zeros(len(d_name), bool)
    if any(is_copy.values()):
        by_kind = np.fromiter(map(is_copy.__getitem__, x.dev_kind), bool, len(d_name))
    by_name = _name_flags(x.strings, vocab.COPY_TASK_NAMES.__contains__)[d_name]
    return by_kind | by_name


def comm_process_spans(x: Extract) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Starts, ends and a receive mask of the events of torch_npu's communication process (``HCCL``), whose
    time is communication whatever their names (collectives and their tasks: the union counts each µs
    once)."""
    c_ts = np.asarray(x.cx_ts, dtype=np.float64)
    c_end = c_ts + np.asarray(x.cx_dur, dtype=np.float64)
    names = np.asarray(x.cx_name, dtype=np.int32)
    if not len(names):
        return c_ts, c_end, np.zeros(0, bool)
    # a send-and-receive (hcom_batchSendRecv) is no receive: no record here says which it did
    recv = (
        _name_flags(x.strings, vocab.is_receive)[names]
        & ~_name_flags(x.strings, vocab.is_send_or_receive)[names]
    )
    return c_ts, c_end, recv


def _fetch_ops(x: Extract, ops: OpView) -> np.ndarray:
    """Which operators are DataLoader batch fetches (vocabulary.is_data_fetch): some releases record so."""
    return _name_flags(x.strings, vocab.is_data_fetch)[ops.name] if len(ops.name) else np.zeros(0, bool)


def host_work(x: Extract, ops: OpView, fetch: np.ndarray) -> Work:
    """CPU only, the device is the host: computing is the union of the step thread's operators other than
    communication calls and DataLoader fetches; communication the union of the collectives' spans. An
    operator that issued a collective (an ancestor of a ``c10d::`` call: DDP's AccumulateGrad, an autograd
    Function's backward that calls ``dist.all_reduce``) waits in it, or for it, while communication runs:
    there it counts only through its other operators (docs/formats.md, step_trace_time.csv's Computing)."""
    step_threads = {t for _n, _ts, _d, t in x.steps}
    on_step_thread = np.isin(ops.thread, list(step_threads)) if step_threads else _busiest_thread(ops)
    op_comm = _name_flags(x.strings, vocab.is_comm_operator)[ops.name] if len(ops.name) else np.zeros(0, bool)
    # a DataLoader fetch is a wait for a batch, recorded as an operator by some releases and as an annotation
    # by others: it counts only through the operators inside it, as the annotation does (its own data column)
    keep = on_step_thread & ~op_comm & ~fetch
    calls = on_step_thread & op_comm
    comm_s = np.array([c[1] for c in x.comm_spans])
    comm_e = np.array([c[1] + c[2] for c in x.comm_spans])
    recv = np.array([vocab.is_receive(c[0]) for c in x.comm_spans], dtype=bool)
    if calls.any():  # the calls (c10d::allreduce_) too: a thread blocked in one waits for communication
        # (helper-99: gloo's span covered 136 of the 2,404 µs a rank sat in c10d::allreduce_; the rest read
        # as free)
        comm_s = np.concatenate([comm_s, ops.ts[calls]])
        comm_e = np.concatenate([comm_e, ops.ts[calls] + ops.dur[calls]])
        recv = np.concatenate([recv.astype(bool), _name_flags(x.strings, vocab.is_receive)[ops.name[calls]]])
    c_ts, c_end, c_recv = comm_process_spans(x)
    if len(c_ts):  # a trace whose only device work is its communication process's
        comm_s, comm_e = np.concatenate([comm_s, c_ts]), np.concatenate([comm_e, c_end])
        recv = np.concatenate([recv.astype(bool), c_recv])
    communication = intervals.union(comm_s, comm_e)
    issuing = keep & _ancestors_of(ops.parent, np.flatnonzero(calls))
    plain = keep & ~issuing
    computing = intervals.union(ops.ts[plain], ops.ts[plain] + ops.dur[plain])
    if issuing.any():
        ends = ops.ts + ops.dur
        busy = intervals.merge(communication, intervals.union(ops.ts[calls], ends[calls]))
        outside = intervals.subtract(intervals.union(ops.ts[issuing], ends[issuing]), busy)
        computing = intervals.merge(computing, outside[:2])
    return Work(
        computing=computing,
        communication=communication,
        receive=intervals.union(comm_s[recv], comm_e[recv]) if len(recv) else intervals.EMPTY,
        task_starts=np.sort(ops.ts[keep]),
    )


def data_fetches(x: Extract, ops: OpView, is_fetch: np.ndarray) -> intervals.Spans | None:
    """The training thread's DataLoader batch fetches (vocabulary.is_data_fetch), operators or annotations,
    as disjoint spans (a fetch inside another counts once): on the steps' threads, or every thread when the
    trace has no steps. None when the trace holds no fetch on those threads: the job's data time is then not
    known (a job that loads its batches by hand, or whose own thread fetches them for the training thread to
    wait on), which a 0 would misstate (docs/formats.md, "Step breakdown")."""
    noted = np.array(x.data_fetches, dtype=np.float64).reshape(-1, 3)
    if not is_fetch.any() and not len(noted):
        return None
    starts = np.concatenate([ops.ts[is_fetch], noted[:, 0]])
    ends = starts + np.maximum(np.concatenate([ops.dur[is_fetch], noted[:, 1]]), 0.0)
    threads = np.concatenate([ops.thread[is_fetch], noted[:, 2].astype(np.int32)])
    step_threads = list({t for _n, _ts, _d, t in x.steps})
    keep = np.isin(threads, step_threads) if step_threads else np.ones(len(threads), bool)
    if not keep.any():
        return None
    return intervals.union(starts[keep], ends[keep])


def _without_damaged_fetch_steps(x: Extract, steps: StepBreakdown) -> StepBreakdown:
    """``steps`` with the data time of each step that held a DataLoader fetch left out as damaged (a ``dur``
    of NaN) not known (NaN: left out of the summary), where a 0 would read as measured: the step whose window
    holds the fetch's start, on the steps' threads; every step when its start could not be read
    (docs/formats.md, "Step breakdown")."""
    step_threads = {t for _n, _ts, _d, t in x.steps}
    starts = [
        ts
        for ts, pid, tid in x.damaged.fetches
        if not step_threads or x.threads.get((pid, tid)) in step_threads
    ]
    if not starts or not len(steps.windows):
        return steps
    lo, hi = steps.windows.start, steps.windows.end
    unknown = np.zeros(len(lo), bool)
    for ts in starts:
        if ts is None:
            unknown[:] = True
        else:
            unknown |= (lo <= ts) & (ts < hi)
    data = np.zeros(len(lo)) if steps.data is None else steps.data.astype(np.float64, copy=True)
    data[unknown] = np.nan
    return replace(steps, data=data)


def _ancestors_of(parent: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """A mask of the operators that hold one of ``nodes`` (an index each; ``parent``: each operator's
    parent index, -1 for a root), at any depth."""
    held = np.zeros(len(parent), dtype=bool)
    level = np.unique(parent[nodes]) if len(nodes) else nodes
    while len(level := level[level >= 0]):
        level = level[~held[level]]  # each chain walked once
        held[level] = True
        level = np.unique(parent[level])
    return held


def _busiest_thread(ops: OpView) -> np.ndarray:
    if len(ops.thread) == 0:
        return np.zeros(0, bool)
    busy = np.bincount(ops.thread, weights=ops.self_time)
    return ops.thread == int(np.argmax(busy))


def _launch_rows(x: Extract, ops: OpView) -> np.ndarray:
    """Per device task (the extract's order), its runtime call: an index into the extract's ``launch_*``
    columns, -1 for none. The call of its correlation id; in a trace of several processes whose ids meet,
    its own process's (process_links.own_launches), none where that is not known."""
    rows = np.full(len(x.dev_ts), -1, np.int64)
    if not len(x.launch_corr):
        return rows
    d_corr = np.frombuffer(x.dev_corr, dtype=np.int64)
    lc = np.frombuffer(x.launch_corr, dtype=np.int64)
    o = np.argsort(lc, kind="stable")
    pos = np.clip(np.searchsorted(lc[o], d_corr), 0, len(lc) - 1)
    hit = lc[o][pos] == d_corr
    rows[hit] = o[pos[hit]]
    own = process_links.own_launches(x, ops.thread, ops.ext)  # a correlation id called by several processes
    if own is not None:
        rows = np.where(own[1] > 0, own[0], np.where(own[1] < 0, -1, rows))
    return rows


def _step_times(x: Extract, launch: np.ndarray) -> np.ndarray:
    """The time that gives each device task its step (docs/formats.md, kernel_details.csv's Step Id): its
    runtime launch's start when known (``launch``: _launch_rows), else its own start. kernel_details and the
    summary's top kernels both count a task in that step."""
    d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)
    if not len(x.launch_ts):
        return d_ts.copy()
    return np.where(launch >= 0, np.frombuffer(x.launch_ts, dtype=np.float64)[np.maximum(launch, 0)], d_ts)


def _device_kernels(
    x: Extract,
    ops: OpView,
    windows: StepWindows,
    step_numbers: tuple[int | None, ...] | None,
    base_ns: int,
    launch: np.ndarray,
) -> tuple[KernelTable, OpStatTable]:
    """kernel_details (the device tasks, by start) and op_statistic (by the task's type and core);
    ``launch``: each task's runtime call (:func:`_launch_rows`)."""
    n = len(x.dev_ts)
    d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)
    d_dur = np.frombuffer(x.dev_dur, dtype=np.float64)
    d_ext = np.frombuffer(x.dev_ext, dtype=np.int64)
    d_corr = np.frombuffer(x.dev_corr, dtype=np.int64)
    d_stream = np.frombuffer(x.dev_stream, dtype=np.int64)
    d_name = np.frombuffer(x.dev_name, dtype=np.int32)
    when = _step_times(x, launch)
    # the launching operator, by External id
    op_of = np.full(n, -1, dtype=np.int64)
    found = process_links.launchers(x, ops.thread, ops.ext)
    if found is not None:  # several processes' operators, their External ids meeting
        op_of = found[0]
    elif len(ops.ext):
        valid = np.flatnonzero(ops.ext >= 0)
        o = valid[np.argsort(ops.ext[valid], kind="stable")]
        es = ops.ext[o]
        if len(es):
            pos = np.clip(np.searchsorted(es, d_ext), 0, len(es) - 1)
            hit = es[pos] == d_ext
            op_of[hit] = o[pos[hit]]
    # since the stream's earlier tasks ended: a stream of its device (each GPU's default stream is "stream
    # 7"; helper-212: a trace of one process driving two GPUs timed a task of GPU 1 from GPU 0's tasks)
    d_device = np.frombuffer(x.dev_device, dtype=np.int64)
    lane = (
        np.unique(np.stack([d_device, d_stream]), axis=1, return_inverse=True)[1].reshape(-1)
        if n and d_device.min() != d_device.max()  # one device (nearly every trace): its stream ids
        else d_stream
    )
    wait = intervals.waits(d_ts, d_ts + d_dur, lane)
    # the task kinds and cores as string ids; a communication kernel's core is COMM_CORE
    kind_codes = {k: i for i, k in enumerate(dict.fromkeys(x.dev_kind))}
    kind_of = np.fromiter(map(kind_codes.__getitem__, x.dev_kind), np.int64, n)
    kind_ids = np.array([x.intern(k) for k in kind_codes], np.int64)
    core_ids = np.array([x.intern(vocab.TASK_CORE.get(k, k)) for k in kind_codes], np.int64)
    comm_core = x.intern(vocab.COMM_CORE)
    comm_name = np.zeros(len(x.strings), bool)
    uniq_names = np.unique(d_name)
    comm_name[uniq_names] = [vocab.is_comm_name(x.strings[i]) for i in uniq_names.tolist()]
    by_start = np.argsort(d_ts, kind="stable")
    name = d_name[by_start].astype(np.int64)
    launcher = op_of[by_start]
    launched = launcher >= 0
    kind = kind_of[by_start]
    # a task's type: the launching operator's name, else its kind
    op_type = np.where(launched, ops.name[np.maximum(launcher, 0)] if len(ops.name) else -1, kind_ids[kind])
    core = np.where(comm_name[name], comm_core, core_ids[kind])
    shapes = np.where(launched, ops.shapes[np.maximum(launcher, 0)] if len(ops.shapes) else -1, -1)
    kernels = KernelTable(
        strings=x.strings,
        step_numbers=step_numbers,
        step=windows.index_of(when)[by_start],
        model_id=np.full(n, EAGER_MODEL, np.int64),
        task_id=d_corr[by_start],
        stream=d_stream[by_start],
        stream_names=None,
        name=name,
        type=op_type.astype(np.int64),
        core=core,
        start_ns=ns_of(d_ts[by_start]) + base_ns,
        duration_us=d_dur[by_start],
        wait_us=wait[by_start],
        block_dim=np.frombuffer(x.dev_blocks, dtype=np.int64)[by_start],
        mix_block_dim=np.zeros(n, np.int64),
        input_shapes=shapes.astype(np.int64),
        launcher=launcher,
        launch=launch[by_start],
        device=d_device[by_start],
    )
    # op_statistic: groups in order of first appearance, of the durations as kernel_details rounds them
    span = len(x.strings) + 1
    _uniq, first, inv = np.unique(op_type * span + core, return_index=True, return_inverse=True)
    dur = np.round(kernels.duration_us, 3)
    low = np.full(len(first), np.inf)
    high = np.full(len(first), -np.inf)
    np.minimum.at(low, inv, dur)
    np.maximum.at(high, inv, dur)
    appearance = np.argsort(first, kind="stable")
    stats = _op_stat_table(
        x.strings,
        op_type[first[appearance]],
        core[first[appearance]],
        np.bincount(inv)[appearance],
        np.bincount(inv, weights=dur)[appearance],
        low[appearance],
        high[appearance],
    )
    return kernels, stats


def _cpu_task_operators(ops: OpView, eligible: np.ndarray) -> np.ndarray:
    """Which operators are the CPU's tasks: an eligible one that calls no other operator, or whose own
    time is at least half its span (``aten::mm`` calling a 2 µs ``aten::resolve_conj`` computes for
    itself), and that is inside no other task. A task's operators nested in it are not tasks: the rows
    do not overlap, so their sum is their union (docs/formats.md, "What the parser writes")."""
    n = len(ops.ts)
    has = ops.parent >= 0
    children_time = np.bincount(ops.parent[has], weights=ops.dur[has], minlength=n)
    has_child = np.bincount(ops.parent[has], minlength=n) > 0
    works = eligible & (~has_child | (ops.dur - children_time >= ops.dur / 2))
    inside_task = np.zeros(n, bool)
    while True:  # down the nesting, a level a round
        parents = ops.parent[has]
        below = np.zeros(n, bool)
        below[has] = works[parents] | inside_task[parents]
        if np.array_equal(below, inside_task):
            return works & ~inside_task
        inside_task = below


def _cpu_kernels(
    x: Extract, ops: OpView, windows: StepWindows, step_numbers: tuple[int | None, ...] | None, base_ns: int
) -> KernelTable:
    """kernel_details when the device is the CPU: its tasks are the operators of the step thread(s)
    that do their work themselves (Accelerator Core ``CPU``, ``_cpu_task_operators``) and the
    collectives of the communication backends' threads (``gloo:all_reduce``, core ``GLOO``), each thread
    a stream."""
    strings = x.strings
    n = len(ops.ts)
    step_threads = {t for _n, _ts, _d, t in x.steps}
    on_step = np.isin(ops.thread, list(step_threads)) if step_threads else _busiest_thread(ops)
    comm_op = _name_flags(strings, vocab.is_comm_operator)[ops.name] if n else np.zeros(0, bool)
    leaf = np.flatnonzero(_cpu_task_operators(ops, on_step & ~comm_op))
    spans = [c for c in x.comm_spans if c[0].startswith(vocab.COMM_ANNOTATION_PREFIXES)]
    if not len(leaf) and not spans:
        return KernelTable.empty(strings, step_numbers)
    span_names = [x.intern(c[0]) for c in spans]
    ts = np.concatenate([ops.ts[leaf], np.array([c[1] for c in spans], dtype=np.float64)])
    dur = np.concatenate([ops.dur[leaf], np.array([c[2] for c in spans], dtype=np.float64)])
    thread = np.concatenate([ops.thread[leaf], np.array([c[3] for c in spans], dtype=np.int64)])
    name = np.concatenate([ops.name[leaf].astype(np.int64), np.array(span_names, dtype=np.int64)])
    shapes = np.concatenate([ops.shapes[leaf].astype(np.int64), np.full(len(spans), -1, np.int64)])
    launcher = np.concatenate([leaf.astype(np.int64), np.full(len(spans), -1, np.int64)])
    backends = [c[0].split(":", 1)[0].upper() for c in spans]
    cores = [CPU_CORE, *sorted(set(backends))]
    core_ids = np.array([x.intern(c) for c in cores], np.int64)
    core = core_ids[
        np.concatenate([np.zeros(len(leaf), np.int64), np.array(list(map(cores.index, backends)), np.int64)])
    ]
    order = np.lexsort((-dur, ts))
    ts, dur, thread, name = ts[order], dur[order], thread[order], name[order]
    shapes, core, launcher = shapes[order], core[order], launcher[order]
    wait = intervals.waits(ts, ts + dur, thread)  # since the thread's earlier tasks ended
    unknown = np.full(len(ts), -1, np.int64)
    return KernelTable(
        strings=strings,
        step_numbers=step_numbers,
        step=windows.index_of(ts) if step_numbers is not None else np.zeros(len(ts), np.int64),
        model_id=unknown,
        task_id=unknown,
        stream=thread.astype(np.int64),
        stream_names=[str(tid) for _pid, tid in x.threads],
        name=name,
        type=name,
        core=core,
        start_ns=ns_of(ts) + base_ns,
        duration_us=dur,
        wait_us=wait,
        block_dim=np.zeros(len(ts), np.int64),
        mix_block_dim=unknown,
        input_shapes=shapes,
        launcher=launcher,
    )


def _op_stat_table(
    strings: list[str],
    op_type: np.ndarray,
    core: np.ndarray,
    count: np.ndarray,
    total: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
) -> OpStatTable:
    """op_statistic from its groups (in order of first appearance): by total time, largest first."""
    grand = sum(total.tolist()) or 1.0  # summed in the groups' order: the Ratio's last digit depends on it
    order = np.argsort(-total, kind="stable")
    total = total[order]
    count = count[order].astype(np.int64)
    return OpStatTable(
        strings=strings,
        op_type=op_type[order].astype(np.int64),
        core=core[order].astype(np.int64),
        count=count,
        total_us=total,
        min_us=low[order],
        avg_us=total / count,
        max_us=high[order],
        ratio_pct=total / grand * 100,
    )


def _cpu_op_stats(x: Extract, ops: OpView) -> OpStatTable:
    """op_statistic when the device is the CPU: the operators' calls by name, their self times (an inner
    repeat's is its call's, ``OpView.call``)."""
    if not len(ops.ts):
        return OpStatTable.empty(x.strings)
    call = ops.call
    calls = np.flatnonzero(call == np.arange(len(call)))
    self_time = _per_call(call, ops.self_time)[calls]
    names, inv = np.unique(ops.name[calls], return_inverse=True)
    low = np.full(len(names), np.inf)
    high = np.zeros(len(names))
    np.minimum.at(low, inv, self_time)
    np.maximum.at(high, inv, self_time)
    return _op_stat_table(
        x.strings,
        names.astype(np.int64),
        np.full(len(names), x.intern(CPU_CORE), np.int64),
        np.bincount(inv),
        np.bincount(inv, weights=self_time),
        low,
        high,
    )


def _operator_table(x: Extract, ops: OpView) -> OperatorTable:
    """operator_details: the operators' calls grouped by name, input shapes and call stack; by self time.
    An inner repeat (``OpView.call``) is part of its call: its self times are added to the call's, its
    totals are in the call's already."""
    n = len(ops.ts)
    if not n:
        return OperatorTable.empty(x.strings)
    call = ops.call
    calls = np.flatnonzero(call == np.arange(n))
    name, shapes, stack = ops.name[calls], ops.shapes[calls], ops.stack[calls]
    span = len(x.strings) + 1
    key = (name.astype(np.int64) * span + (shapes + 1)) * span + (stack + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    sums = [
        np.bincount(inv, weights=w, minlength=len(uniq))
        for w in (
            _per_call(call, ops.self_time)[calls],
            ops.dur[calls],
            _per_call(call, ops.dev_self)[calls],
            ops.dev_total[calls],
        )
    ]
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inv[::-1]] = np.arange(len(calls))[::-1]
    order = np.argsort(-sums[0], kind="stable")
    row = first[order]
    return OperatorTable(
        strings=x.strings,
        name=name[row].astype(np.int64),
        input_shapes=shapes[row].astype(np.int64),
        call_stack=stack[row].astype(np.int64),
        host_self_us=sums[0][order],
        host_total_us=sums[1][order],
        device_self_us=sums[2][order],
        device_total_us=sums[3][order],
    )


def _grouped_top(
    step_idx: np.ndarray,
    names: np.ndarray,
    weights: list[np.ndarray],
    strings: list[str],
    windows: StepWindows,
    fields: list[str],
    counted: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """Per step and name: count and summed weights; the TOP_PER_STEP first by the first weight, per step,
    and in every step the TOP_PER_STEP first over the whole capture (a name 101st in each step may be
    first over all of them: the report's whole-capture top sums the steps, docs/formats.md). ``counted``:
    the events that count as calls (all when None)."""
    if len(names) == 0:
        return []
    ns = len(strings)
    key = (step_idx + 1).astype(np.int64) * ns + names
    uniq, inv = np.unique(key, return_inverse=True)
    count = _counts(inv, len(uniq), counted)
    sums = [np.bincount(inv, weights=w, minlength=len(uniq)) for w in weights]
    # per step (ascending), the names by the first weight, largest first (ties: by name id)
    group_step = uniq // ns - 1
    order = np.lexsort((-sums[0], group_step))
    in_step = group_step[order]
    rank = np.arange(len(order)) - np.searchsorted(in_step, in_step, side="left")
    group_name = uniq % ns
    overall = np.bincount(group_name, weights=sums[0], minlength=ns)
    named = np.flatnonzero(np.bincount(group_name, minlength=ns))
    top_overall = named[np.lexsort((named, -overall[named]))[:TOP_PER_STEP]]
    keep = order[(rank < TOP_PER_STEP) | np.isin(group_name[order], top_overall)]
    labels = windows.labels()  # index -1: outside every step
    steps = [labels[s] if len(windows) else None for s in group_step[keep].tolist()]
    names_kept = list(map(strings.__getitem__, group_name[keep].tolist()))
    keys = ("step", "name", "count", *fields)
    columns = [steps, names_kept, count[keep].tolist(), *(rounded(w[keep], 3) for w in sums)]
    return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]


def _counts(inv: np.ndarray, groups: int, counted: np.ndarray | None) -> np.ndarray:
    if counted is None:
        return np.bincount(inv, minlength=groups)
    return np.bincount(inv, weights=counted, minlength=groups).astype(np.int64)


def _named_totals(
    names: np.ndarray,
    weights: list[np.ndarray],
    strings: list[str],
    fields: list[str],
    counted: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """Per name over the whole capture: count and summed weights, every name (step null)."""
    if len(names) == 0:
        return []
    uniq, inv = np.unique(names, return_inverse=True)
    count = _counts(inv, len(uniq), counted)
    sums = [rounded(np.bincount(inv, weights=w, minlength=len(uniq)), 3) for w in weights]
    keys = ("step", "name", "count", *fields)
    columns = [[None] * len(uniq), [strings[i] for i in uniq.tolist()], count.tolist(), *sums]
    return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]


def _one_call(ops: OpView) -> np.ndarray:
    """1.0 for the operators that are calls of their own, 0.0 for an inner repeat (``OpView.inner_repeat``);
    self times are summed either way."""
    return (~ops.inner_repeat).astype(np.float64)


def _per_call(call: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` summed onto the call each operator is part of (0 at an inner repeat)."""
    return np.bincount(call, weights=values, minlength=len(call))


def _op_weights(ops: OpView) -> tuple[list[np.ndarray], np.ndarray]:
    """self, total and device time per operator, and ``_one_call``: an inner repeat's total and device
    time are in its parent's already."""
    calls = _one_call(ops)
    return [ops.self_time, ops.dur * calls, ops.dev_total * calls], calls


def _totals(x: Extract, ops: OpView) -> dict[str, Any]:
    d_names = np.frombuffer(x.dev_name, dtype=np.int32).astype(np.int64) if len(x.dev_ts) else np.zeros(0)
    weights, calls = _op_weights(ops)
    return {
        "operator_totals": _named_totals(
            ops.name.astype(np.int64), weights, x.strings, ["self_us", "total_us", "device_us"], calls
        ),
        "kernel_totals": _named_totals(
            d_names, [np.frombuffer(x.dev_dur, dtype=np.float64)], x.strings, ["total_us"]
        ),
    }  # fmt: skip


def _top_ops(x: Extract, ops: OpView, windows: StepWindows) -> list[dict[str, Any]]:
    step_idx = windows.index_of(ops.ts) if x.steps else np.zeros(len(ops.ts), np.int64)
    weights, calls = _op_weights(ops)
    fields = ["self_us", "total_us", "device_us"]
    return _grouped_top(step_idx, ops.name.astype(np.int64), weights, x.strings, windows, fields, calls)


def _top_kernels(x: Extract, windows: StepWindows, launch: np.ndarray) -> list[dict[str, Any]]:
    """Per step and name, the device tasks, each in kernel_details.csv's step (:func:`_step_times`): a
    task launched in one step and run in the next is the first's (helper-247: by its own start the report's
    per-step counts differed from the table's)."""
    if not len(x.dev_ts):
        return []
    when = _step_times(x, launch)
    step_idx = windows.index_of(when) if x.steps else np.zeros(len(when), np.int64)
    return _grouped_top(
        step_idx,
        np.frombuffer(x.dev_name, dtype=np.int32).astype(np.int64),
        [np.frombuffer(x.dev_dur, dtype=np.float64)],
        x.strings,
        windows,
        ["total_us"],
    )
