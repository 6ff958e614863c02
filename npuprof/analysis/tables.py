"""From an :class:`Extract` to the Ascend tables and npuprof's per-rank summary (docs/formats.md,
"The Ascend tables"); the step breakdown is :mod:`npuprof.analysis.step_breakdown`.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from npuprof.analysis import intervals, nesting
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.extract import Extract
from npuprof.analysis.rounding import rounded
from npuprof.analysis.step_breakdown import StepBreakdown, StepWindows, Work, breakdown

KERNEL_HEADER = [
    "Step Id",
    "Device_id",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Num",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
]
OPERATOR_HEADER = [
    "Name",
    "Input Shapes",
    "Call Stack",
    "Host Self Duration(us)",
    "Host Total Duration(us)",
    "Device Self Duration(us)",
    "Device Total Duration(us)",
    "Device Self Duration With AICore(us)",
    "Device Total Duration With AICore(us)",
]
OP_STAT_HEADER = [
    "OP Type",
    "Core Type",
    "Count",
    "Total Time(us)",
    "Min Time(us)",
    "Avg Time(us)",
    "Max Time(us)",
    "Ratio(%)",
]
TOP_PER_STEP = 100
LINES_BATCH = 1 << 16  # CSV rows formatted at a time


def csv_cell(text: str) -> str:
    """``text`` as the csv module writes it in a row (quoted when it holds a comma, quote or newline)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([text, ""])
    return buf.getvalue()[:-2]


class _Memo(dict):  # type: ignore[type-arg]
    """A dict that fills itself: ``memo[key]`` computes ``make(key)`` the first time."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.make(key)
        return value


def csv_cells(strings: list[str], preset: dict[int, str]) -> dict[int, str]:
    """string id -> CSV cell, computed on first use; ``preset`` gives the cells of other (negative) ids."""
    cells = _Memo(lambda sid: csv_cell(strings[sid]))
    cells.update(preset)
    return cells


_FLOAT_ENCODER = msgspec.json.Encoder()


def float_texts(values: np.ndarray) -> list[str]:
    """``repr`` of each value, as the csv module writes floats; a column with few distinct values (sizes,
    memory totals, durations) formats each distinct value once."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n >= 64:
        uniq, inverse = np.unique(values, return_inverse=True)
        if len(uniq) <= n // 4 and not bool((np.signbit(values) & (values == 0)).any()):  # no -0.0
            texts = _reprs(uniq)
            return list(map(texts.__getitem__, inverse.tolist()))
    return _reprs(values)


def _reprs(values: np.ndarray) -> list[str]:
    """``repr`` of each value. msgspec writes the same shortest digits ~4x faster, and the same text for 0
    and for magnitudes in [1e-4, 1e16); other values (exponent notation, inf, nan) go through ``repr``."""
    if len(values) == 0:
        return []
    texts = _FLOAT_ENCODER.encode(values.tolist())[1:-1].decode().split(",")
    size = np.abs(values)
    for i in np.flatnonzero(~((size == 0) | ((size >= 1e-4) & (size < 1e16)))).tolist():
        texts[i] = repr(float(values[i]))
    return texts


def r3(x: float) -> float:
    return round(float(x), 3)


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


@dataclass
class RankTables:
    device: str  # "CPU" or "CUDA"
    device_id: int
    breakdown: StepBreakdown
    kernel_header: list[str] = field(default_factory=list)
    kernel_lines: list[str] = field(default_factory=list)  # kernel_details.csv rows, CSV-formatted
    operator_rows: list[list[Any]] = field(default_factory=list)
    op_stat_rows: list[list[Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    ops: OpView | None = None

    @property
    def step_rows(self) -> list[list[Any]]:
        """The rows of step_trace_time.csv."""
        return self.breakdown.ascend_rows(self.device_id)


def nest(x: Extract) -> OpView:
    """Per thread, sort operators by (start, -duration) and nest them (see :mod:`nesting`): self time,
    parent, device totals."""
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
    if n and len(x.dev_ts):
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
    self_time = np.maximum(dur - child_sum, 0.0)
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


def build_tables(x: Extract, ops: OpView | None = None) -> RankTables:
    """Every table of one rank; ``ops`` is ``nest(x)`` when the caller has it already."""
    if ops is None:
        ops = nest(x)
    n_dev = len(x.dev_ts)
    windows = step_windows(x)
    tables = RankTables(
        device="CUDA" if n_dev else "CPU",
        device_id=device_id_of(x),
        breakdown=breakdown(windows, device_work(x, ops) if n_dev else host_work(x, ops)),
        ops=ops,
    )
    tables.kernel_header = KERNEL_HEADER if x.steps else KERNEL_HEADER[1:]
    _kernel_tables(x, tables, ops, windows, tables.device_id)
    _operator_tables(x, tables, ops, windows, n_dev == 0)
    tables.summary = {
        "device": tables.device,
        "device_id": tables.device_id,
        "steps": tables.breakdown.summary_steps(),
        "top_operators": _top_ops(x, ops, windows),
        "top_kernels": _top_kernels(x, windows),
    }
    return tables


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
    return Work(
        computing=intervals.union(d_ts[~d_comm], d_end[~d_comm]),
        communication=intervals.union(d_ts[d_comm], d_end[d_comm]),
        receive=intervals.union(d_ts[recv], d_end[recv]),
        task_starts=np.sort(d_ts),
    )


def host_work(x: Extract, ops: OpView) -> Work:
    """CPU only, the device is the host: computing is the union of the step thread's operators other than
    communication calls; communication the union of the collectives' spans."""
    step_threads = {t for _n, _ts, _d, t in x.steps}
    on_step_thread = np.isin(ops.thread, list(step_threads)) if step_threads else _busiest_thread(ops)
    op_comm = _name_flags(x.strings, vocab.is_comm_operator)[ops.name] if len(ops.name) else np.zeros(0, bool)
    keep = on_step_thread & ~op_comm
    comm_s = np.array([c[1] for c in x.comm_spans])
    comm_e = np.array([c[1] + c[2] for c in x.comm_spans])
    recv = np.array([vocab.is_receive(c[0]) for c in x.comm_spans], dtype=bool)
    return Work(
        computing=intervals.union(ops.ts[keep], ops.ts[keep] + ops.dur[keep]),
        communication=intervals.union(comm_s, comm_e),
        receive=intervals.union(comm_s[recv], comm_e[recv]) if len(recv) else intervals.EMPTY,
        task_starts=np.sort(ops.ts[keep]),
    )


def _busiest_thread(ops: OpView) -> np.ndarray:
    if len(ops.thread) == 0:
        return np.zeros(0, bool)
    busy = np.bincount(ops.thread, weights=ops.self_time)
    return ops.thread == int(np.argmax(busy))


def _kernel_tables(x: Extract, tables: RankTables, ops: OpView, windows: StepWindows, device_id: int) -> None:
    n = len(x.dev_ts)
    if not n:
        return
    strings = x.strings
    d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)
    d_dur = np.frombuffer(x.dev_dur, dtype=np.float64)
    d_ext = np.frombuffer(x.dev_ext, dtype=np.int64)
    d_corr = np.frombuffer(x.dev_corr, dtype=np.int64)
    d_stream = np.frombuffer(x.dev_stream, dtype=np.int64)
    d_blocks = np.frombuffer(x.dev_blocks, dtype=np.int64)
    d_name = np.frombuffer(x.dev_name, dtype=np.int32)
    # step of each task: by its launch time when the runtime launch is known, else its own start
    when = d_ts.copy()
    if len(x.launch_corr):
        lc = np.frombuffer(x.launch_corr, dtype=np.int64)
        lt = np.frombuffer(x.launch_ts, dtype=np.float64)
        o = np.argsort(lc, kind="stable")
        lc, lt = lc[o], lt[o]
        pos = np.clip(np.searchsorted(lc, d_corr), 0, len(lc) - 1)
        hit = lc[pos] == d_corr
        when[hit] = lt[pos[hit]]
    step_idx = windows.index_of(when)
    # the launching operator's name and shapes, by External id
    op_of = np.full(n, -1, dtype=np.int64)
    if len(ops.ext):
        valid = np.flatnonzero(ops.ext >= 0)
        o = valid[np.argsort(ops.ext[valid], kind="stable")]
        es = ops.ext[o]
        if len(es):
            pos = np.clip(np.searchsorted(es, d_ext), 0, len(es) - 1)
            hit = es[pos] == d_ext
            op_of[hit] = o[pos[hit]]
    # wait time: gap since the previous task on the same stream ended
    order = np.lexsort((d_ts, d_stream))
    wait = np.zeros(n)
    prev_end = (d_ts + d_dur)[order][:-1]
    same = d_stream[order][1:] == d_stream[order][:-1]
    gaps = np.where(same, np.maximum(d_ts[order][1:] - np.maximum.accumulate(prev_end), 0.0), 0.0)
    wait[order[1:]] = gaps
    # kernel_details.csv lines, built column-wise (one C-level join per row) in start-time order
    kinds = x.dev_kind
    kind_codes = {k: i for i, k in enumerate(dict.fromkeys(kinds))}
    kind_l = list(kind_codes)
    kind_of = np.fromiter(map(kind_codes.__getitem__, kinds), np.int64, n)
    core_names = [vocab.TASK_CORE.get(k, k) for k in kind_l] + [vocab.COMM_CORE]
    comm_name = np.zeros(len(strings), bool)
    uniq_names = np.unique(d_name)
    comm_name[uniq_names] = [vocab.is_comm_name(strings[i]) for i in uniq_names.tolist()]
    has_steps = bool(x.steps)
    order_t = np.argsort(d_ts, kind="stable")
    nid = d_name[order_t]
    oi = op_of[order_t]
    launched = oi >= 0
    op_name_id = np.where(launched, ops.name[np.maximum(oi, 0)] if len(ops.name) else -1, -1)
    op_shape_id = np.where(launched, ops.shapes[np.maximum(oi, 0)] if len(ops.shapes) else -1, -1)
    kind_t = kind_of[order_t]
    core_t = np.where(comm_name[nid], len(kind_l), kind_t)
    # op type: the launching operator's name (a string id) or else the task kind (-1 - kind code)
    type_t = np.where(launched, op_name_id, -1 - kind_t)
    cell = csv_cells(strings, {-1: ""})
    type_cell = csv_cells(strings, {-1 - k: csv_cell(kind) for k, kind in enumerate(kind_l)})
    core_cells = [csv_cell(c) for c in core_names]
    # cells that go together are formatted together: (step,) device; type,core; the launching
    # operator's shapes plus the five empty columns after them
    device_cell = str(device_id)
    step_cells = [f"{'' if n is None else n},{device_cell}" for n in windows.labels()]
    n_core = len(core_names)
    type_core = (type_t + len(kind_l) + 1) * n_core + core_t
    type_core_cell = _Memo(
        lambda code: f"{type_cell[code // n_core - len(kind_l) - 1]},{core_cells[code % n_core]}"
    )
    shape_cell = _Memo(lambda sid: cell[sid] + ",,,,,")
    dur_t = np.round(d_dur, 3)[order_t]
    ts_t = np.round(d_ts, 3)[order_t]
    wait_t = np.round(wait, 3)[order_t]
    blocks_t = d_blocks[order_t]
    step_t = step_idx[order_t]
    lines: list[str] = []
    for lo in range(0, n, LINES_BATCH):  # in batches: the columns of text are several times the lines
        part = slice(lo, lo + LINES_BATCH)
        k = len(nid[part])
        columns = [
            list(map(step_cells.__getitem__, step_t[part].tolist())) if has_steps else [device_cell] * k,
            list(map(cell.__getitem__, nid[part].tolist())),
            list(map(type_core_cell.__getitem__, type_core[part].tolist())),
            float_texts(ts_t[part]),
            float_texts(dur_t[part]),
            float_texts(wait_t[part]),
            _FLOAT_ENCODER.encode(blocks_t[part].tolist())[1:-1].decode().split(","),
            list(map(shape_cell.__getitem__, op_shape_id[part].tolist())),
        ]
        lines += map(",".join, zip(*columns, strict=True))
    tables.kernel_lines = lines
    # op_statistic: by the task's type (launching operator) and core, groups in order of first appearance
    key = (type_t + len(kind_l) + 1) * (len(core_names) + 1) + core_t
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    count = np.bincount(inv, minlength=len(uniq))
    total = np.bincount(inv, weights=dur_t, minlength=len(uniq))
    low = np.full(len(uniq), np.inf)
    high = np.full(len(uniq), -np.inf)
    np.minimum.at(low, inv, dur_t)
    np.maximum.at(high, inv, dur_t)
    groups: dict[tuple[str, str], list[float]] = {}
    for u in np.argsort(first, kind="stable").tolist():
        i = int(first[u])
        t = int(type_t[i])
        op_type = strings[t] if t >= 0 else kind_l[-1 - t]
        groups[(op_type, core_names[int(core_t[i])])] = [
            int(count[u]),
            float(total[u]),
            float(low[u]),
            float(high[u]),
        ]
    _stat_rows(tables, groups)


def _stat_rows(tables: RankTables, groups: dict[tuple[str, str], list[float]]) -> None:
    grand = sum(g[1] for g in groups.values()) or 1.0
    for (op_type, core), (count, tot, mn, mx) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        tables.op_stat_rows.append(
            [op_type, core, int(count), r3(tot), r3(mn), r3(tot / count), r3(mx), round(tot / grand * 100, 2)]
        )


def _operator_tables(
    x: Extract, tables: RankTables, ops: OpView, windows: StepWindows, cpu_only: bool
) -> None:
    n = len(ops.ts)
    if not n:
        return
    strings = x.strings
    ns = len(strings) + 1
    key = (ops.name.astype(np.int64) * ns + (ops.shapes + 1)) * ns + (ops.stack + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    sums = [
        np.bincount(inv, weights=w, minlength=len(uniq))
        for w in (ops.self_time, ops.dur, ops.dev_self, ops.dev_total)
    ]
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inv[::-1]] = np.arange(n)[::-1]
    order = np.argsort(-sums[0], kind="stable")
    for u in order.tolist():
        i = first[u]
        sh, st = int(ops.shapes[i]), int(ops.stack[i])
        tables.operator_rows.append(
            [
                strings[ops.name[i]],
                strings[sh] if sh >= 0 else "",
                strings[st] if st >= 0 else "",
                r3(sums[0][u]),
                r3(sums[1][u]),
                r3(sums[2][u]),
                r3(sums[3][u]),
                0,
                0,
            ]
        )
    if cpu_only:  # the device is the CPU: op_statistic counts operators by their self time
        names, inv = np.unique(ops.name, return_inverse=True)
        cnt = np.bincount(inv)
        tot = np.bincount(inv, weights=ops.self_time)
        mn = np.full(len(names), np.inf)
        mx = np.zeros(len(names))
        np.minimum.at(mn, inv, ops.self_time)
        np.maximum.at(mx, inv, ops.self_time)
        groups = {
            (strings[nm], "CPU"): [int(c), float(t), float(a), float(b)]
            for nm, c, t, a, b in zip(names.tolist(), cnt, tot, mn, mx, strict=False)
        }
        _stat_rows(tables, groups)


def _grouped_top(
    step_idx: np.ndarray,
    names: np.ndarray,
    weights: list[np.ndarray],
    strings: list[str],
    windows: StepWindows,
    fields: list[str],
) -> list[dict[str, Any]]:
    """Per step and name: count and summed weights; the TOP_PER_STEP first by the first weight, per step."""
    if len(names) == 0:
        return []
    ns = len(strings)
    key = (step_idx + 1).astype(np.int64) * ns + names
    uniq, inv = np.unique(key, return_inverse=True)
    count = np.bincount(inv, minlength=len(uniq))
    sums = [np.bincount(inv, weights=w, minlength=len(uniq)) for w in weights]
    # per step (ascending), the names by the first weight, largest first (ties: by name id)
    group_step = uniq // ns - 1
    order = np.lexsort((-sums[0], group_step))
    in_step = group_step[order]
    rank = np.arange(len(order)) - np.searchsorted(in_step, in_step, side="left")
    keep = order[rank < TOP_PER_STEP]
    labels = windows.labels()  # index -1: outside every step
    steps = [labels[s] if len(windows) else None for s in group_step[keep].tolist()]
    names_kept = list(map(strings.__getitem__, (uniq[keep] % ns).tolist()))
    keys = ("step", "name", "count", *fields)
    columns = [steps, names_kept, count[keep].tolist(), *(rounded(w[keep], 3) for w in sums)]
    return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]


def _top_ops(x: Extract, ops: OpView, windows: StepWindows) -> list[dict[str, Any]]:
    step_idx = windows.index_of(ops.ts) if x.steps else np.zeros(len(ops.ts), np.int64)
    return _grouped_top(
        step_idx,
        ops.name.astype(np.int64),
        [ops.self_time, ops.dur, ops.dev_total],
        x.strings,
        windows,
        ["self_us", "total_us", "device_us"],
    )


def _top_kernels(x: Extract, windows: StepWindows) -> list[dict[str, Any]]:
    if not len(x.dev_ts):
        return []
    d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)
    step_idx = windows.index_of(d_ts) if x.steps else np.zeros(len(d_ts), np.int64)
    return _grouped_top(
        step_idx,
        np.frombuffer(x.dev_name, dtype=np.int32).astype(np.int64),
        [np.frombuffer(x.dev_dur, dtype=np.float64)],
        x.strings,
        windows,
        ["total_us"],
    )
