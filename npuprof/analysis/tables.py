"""From an :class:`Extract` to the Ascend tables (output-format.md §4-5) and npuprof's per-rank summary.

Conventions (documented in docs/analyse.md):
* Steps are the host ``ProfilerStep#N`` spans; device time is attributed by clipping to those windows.
* With device tasks (CUDA kernels, memcpy, memset): Computing = union of non-communication tasks,
  Communication = union of communication kernels (nccl/hccl/rccl in the name).
* CPU only: the device is the CPU. Computing = union of the operators on the step thread(s) other than
  communication calls; Communication = union of the collectives' spans (``gloo:*`` worker-thread spans,
  ``record_param_comms``, ``c10d::*`` calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npuprof.analysis import intervals
from npuprof.analysis.extract import Extract, is_comm_name, is_receive

STEP_HEADER = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
]
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
    step_rows: list[list[Any]] = field(default_factory=list)
    kernel_rows: list[list[Any]] = field(default_factory=list)
    operator_rows: list[list[Any]] = field(default_factory=list)
    op_stat_rows: list[list[Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    overlap_spans: list[tuple[str, float, float]] = field(default_factory=list)  # for trace_view
    comm_spans: list[tuple[str, float, float]] = field(default_factory=list)
    steps: list[tuple[int | None, float, float]] = field(default_factory=list)
    ops: OpView | None = None


def _nest(x: Extract) -> OpView:
    """Per thread, sort operators by (start, -duration) and walk a stack: self time, parent, device totals."""
    n = len(x.op_ts)
    thread = np.frombuffer(x.op_thread, dtype=np.int32) if n else np.zeros(0, np.int32)
    ts = np.frombuffer(x.op_ts, dtype=np.float64) if n else np.zeros(0)
    dur = np.frombuffer(x.op_dur, dtype=np.float64) if n else np.zeros(0)
    order = np.lexsort((-dur, ts, thread))
    thread, ts, dur = thread[order], ts[order], dur[order]
    name = np.frombuffer(x.op_name, dtype=np.int32)[order] if n else np.zeros(0, np.int32)
    shapes = np.frombuffer(x.op_shapes, dtype=np.int32)[order] if n else np.zeros(0, np.int32)
    stack = np.frombuffer(x.op_stack, dtype=np.int32)[order] if n else np.zeros(0, np.int32)
    ext = np.frombuffer(x.op_ext, dtype=np.int64)[order] if n else np.zeros(0, np.int64)
    end = ts + dur
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
    child_sum = np.zeros(n)
    dev_total = dev_self.copy()
    parent = np.full(n, -1, dtype=np.int64)
    stack_idx: list[int] = []
    cur_thread = -1
    end_l = end.tolist()
    ts_l = ts.tolist()
    th_l = thread.tolist()
    dur_l = dur.tolist()
    par = [-1] * n
    csum = [0.0] * n
    dtot = dev_total.tolist()
    has_dev = bool(len(x.dev_ts))
    for i in range(n):
        t = th_l[i]
        if t != cur_thread:
            while stack_idx:
                j = stack_idx.pop()
                if stack_idx and has_dev:
                    dtot[stack_idx[-1]] += dtot[j]
            cur_thread = t
        start = ts_l[i]
        while stack_idx and end_l[stack_idx[-1]] <= start:
            j = stack_idx.pop()
            if stack_idx and has_dev:
                dtot[stack_idx[-1]] += dtot[j]
        if stack_idx:
            p = stack_idx[-1]
            par[i] = p
            csum[p] += dur_l[i]
        stack_idx.append(i)
    while stack_idx:
        j = stack_idx.pop()
        if stack_idx and has_dev:
            dtot[stack_idx[-1]] += dtot[j]
    if n:
        parent = np.array(par, dtype=np.int64)
        child_sum = np.array(csum)
        dev_total = np.array(dtot)
    self_time = np.maximum(dur - child_sum, 0.0)
    return OpView(thread, ts, dur, name, shapes, stack, ext, self_time, parent, dev_self, dev_total)


def _step_windows(x: Extract) -> list[tuple[int | None, float, float]]:
    if x.steps:
        seen: dict[int, tuple[int, float, float]] = {}
        for num, ts, dur, _t in x.steps:
            seen.setdefault(num, (num, ts, ts + dur))
        return sorted(seen.values(), key=lambda s: s[1])
    if x.first_ts == float("inf"):
        return []
    return [(None, x.first_ts, x.last_ts)]


def _step_of(starts: np.ndarray, windows: list[tuple[int | None, float, float]]) -> np.ndarray:
    """Index of the window holding each time (-1 when none)."""
    if not windows or len(starts) == 0:
        return np.full(len(starts), -1, dtype=np.int64)
    w_start = np.array([w[1] for w in windows])
    w_end = np.array([w[2] for w in windows])
    idx = np.searchsorted(w_start, starts, side="right") - 1
    ok = idx >= 0
    ok[ok] = starts[ok] < w_end[idx[ok]]
    return np.where(ok, idx, -1)


def build_tables(x: Extract) -> RankTables:
    ops = _nest(x)
    strings = x.strings
    n_dev = len(x.dev_ts)
    device = "CUDA" if n_dev else "CPU"
    dev_device = np.frombuffer(x.dev_device, dtype=np.int64) if n_dev else np.zeros(0, np.int64)
    device_id = int(dev_device[dev_device >= 0][0]) if n_dev and (dev_device >= 0).any() else 0
    windows = _step_windows(x)
    step_threads = {t for _n, _ts, _d, t in x.steps}
    tables = RankTables(device=device, device_id=device_id, ops=ops, steps=windows)
    comm_name_ids = (
        np.array(
            [is_comm_name(s) or s.startswith("c10d::") or s == "record_param_comms" for s in strings],
            dtype=bool,
        )
        if strings
        else np.zeros(0, bool)
    )
    recv_name_ids = np.array([is_receive(s) for s in strings], dtype=bool) if strings else np.zeros(0, bool)

    # device tasks
    if n_dev:
        d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)
        d_end = d_ts + np.frombuffer(x.dev_dur, dtype=np.float64)
        d_name = np.frombuffer(x.dev_name, dtype=np.int32)
        d_comm = comm_name_ids[d_name]
        compute = intervals.union(d_ts[~d_comm], d_end[~d_comm])
        comm_s, comm_e = d_ts[d_comm], d_end[d_comm]
        recv_mask = recv_name_ids[d_name] & d_comm
        recv = intervals.union(d_ts[recv_mask], d_end[recv_mask])
        first_task = np.sort(d_ts)
    else:
        on_step_thread = np.isin(ops.thread, list(step_threads)) if step_threads else _busiest_thread(ops)
        op_comm = comm_name_ids[ops.name] if len(ops.name) else np.zeros(0, bool)
        keep = on_step_thread & ~op_comm
        compute = intervals.union(ops.ts[keep], ops.ts[keep] + ops.dur[keep])
        comm_s = np.array([c[1] for c in x.comm_spans])
        comm_e = np.array([c[1] + c[2] for c in x.comm_spans])
        rmask = np.array([is_receive(c[0]) for c in x.comm_spans], dtype=bool)
        recv = intervals.union(comm_s[rmask], comm_e[rmask]) if len(rmask) else intervals.EMPTY
        first_task = np.sort(ops.ts[keep])
    comm = intervals.union(comm_s, comm_e)
    busy = intervals.merge(compute, comm)

    step_summ = []
    for num, lo, hi in windows:
        c = intervals.total(intervals.clip(compute, lo, hi))
        m = intervals.total(intervals.clip(comm, lo, hi))
        b = intervals.total(intervals.clip(busy, lo, hi))
        bubble = intervals.total(intervals.clip(recv, lo, hi))
        not_overlapped = b - c
        overlapped = m - not_overlapped
        free = (hi - lo) - b
        k = int(np.searchsorted(first_task, lo, side="left"))
        preparing = float(first_task[k] - lo) if k < len(first_task) and first_task[k] < hi else 0.0
        row = [
            device_id,
            "" if num is None else num,
            r3(c),
            r3(not_overlapped),
            r3(overlapped),
            r3(m),
            r3(free),
            r3((hi - lo) - bubble),
            r3(bubble),
            r3(max(not_overlapped - bubble, 0.0)),
            r3(preparing),
        ]
        tables.step_rows.append(row)
        step_summ.append(
            {
                "step": num,
                "start_us": r3(lo),
                "duration_us": r3(hi - lo),
                "computing_us": r3(c),
                "communication_us": r3(m),
                "comm_not_overlapped_us": r3(not_overlapped),
                "overlapped_us": r3(overlapped),
                "free_us": r3(free),
                "bubble_us": r3(bubble),
                "preparing_us": r3(preparing),
            }
        )
        # the Overlap Analysis lanes of trace_view.json
        for label, spans in (
            ("Computing", intervals.clip(compute, lo, hi)),
            (
                "Communication(Not Overlapped)",
                _subtract(intervals.clip(comm, lo, hi), intervals.clip(compute, lo, hi)),
            ),
            ("Free", _subtract(([lo], [hi]), intervals.clip(busy, lo, hi))),
        ):
            tables.overlap_spans.extend((label, float(a), float(z)) for a, z in zip(*spans, strict=False))
    cs, ce = comm
    tables.comm_spans = [("Communication", float(a), float(z)) for a, z in zip(cs, ce, strict=False)]

    _kernel_tables(x, tables, ops, windows, device_id)
    _operator_tables(x, tables, ops, windows, n_dev == 0)
    tables.summary = {
        "device": device,
        "device_id": device_id,
        "steps": step_summ,
        "top_operators": _top_ops(x, ops, windows),
        "top_kernels": _top_kernels(x, windows),
    }
    return tables


def _busiest_thread(ops: OpView) -> np.ndarray:
    if len(ops.thread) == 0:
        return np.zeros(0, bool)
    busy = np.bincount(ops.thread, weights=ops.self_time)
    return ops.thread == int(np.argmax(busy))


def _subtract(a: intervals.Spans, b: intervals.Spans) -> intervals.Spans:
    """Disjoint sorted ``a`` minus disjoint sorted ``b``."""
    out_s: list[float] = []
    out_e: list[float] = []
    bs, be = list(b[0]), list(b[1])
    j = 0
    for s, e in zip(a[0], a[1], strict=False):
        cur = s
        while j < len(bs) and be[j] <= cur:
            j += 1
        k = j
        while k < len(bs) and bs[k] < e:
            if bs[k] > cur:
                out_s.append(cur)
                out_e.append(bs[k])
            cur = max(cur, be[k])
            k += 1
        if cur < e:
            out_s.append(cur)
            out_e.append(e)
    return np.array(out_s), np.array(out_e)


def _kernel_tables(x: Extract, tables: RankTables, ops: OpView, windows: list, device_id: int) -> None:
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
    step_idx = _step_of(when, windows)
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
    kinds = x.dev_kind
    core_of = {"kernel": "CUDA kernel", "memcpy": "memcpy", "memset": "memset"}
    comm_name = {int(i): is_comm_name(strings[i]) for i in np.unique(d_name).tolist()}
    rows = tables.kernel_rows
    has_steps = bool(x.steps)
    order_t = np.argsort(d_ts, kind="stable")
    ts_r = np.round(d_ts, 3).tolist()
    dur_r = np.round(d_dur, 3).tolist()
    wait_r = np.round(wait, 3).tolist()
    blocks = d_blocks.tolist()
    names_l = d_name.tolist()
    op_of_l = op_of.tolist()
    step_l = step_idx.tolist()
    op_name_l = ops.name.tolist()
    op_shape_l = ops.shapes.tolist()
    for i in order_t.tolist():
        nid = names_l[i]
        oi = op_of_l[i]
        op_name = strings[op_name_l[oi]] if oi >= 0 else kinds[i]
        shapes = strings[op_shape_l[oi]] if oi >= 0 and op_shape_l[oi] >= 0 else ""
        core = "NCCL" if comm_name[nid] else core_of.get(kinds[i], kinds[i])
        si = step_l[i]
        step = windows[si][0] if si >= 0 and windows[si][0] is not None else ""
        row = [
            device_id,
            strings[nid],
            op_name,
            core,
            ts_r[i],
            dur_r[i],
            wait_r[i],
            blocks[i],
            shapes,
            "",
            "",
            "",
            "",
            "",
        ]
        rows.append([step, *row] if has_steps else row)
    if not has_steps:
        tables.kernel_header = KERNEL_HEADER[1:]  # type: ignore[attr-defined]
    # op_statistic: by the task's type (launching operator) and core
    groups: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        off = 1 if has_steps else 0
        key = (row[off + 2], row[off + 3])
        dur = row[off + 5]
        g = groups.get(key)
        if g is None:
            groups[key] = [1, dur, dur, dur]
        else:
            g[0] += 1
            g[1] += dur
            g[2] = min(g[2], dur)
            g[3] = max(g[3], dur)
    _stat_rows(tables, groups)


def _stat_rows(tables: RankTables, groups: dict[tuple[str, str], list[float]]) -> None:
    grand = sum(g[1] for g in groups.values()) or 1.0
    for (op_type, core), (count, tot, mn, mx) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        tables.op_stat_rows.append(
            [op_type, core, int(count), r3(tot), r3(mn), r3(tot / count), r3(mx), round(tot / grand * 100, 2)]
        )


def _operator_tables(x: Extract, tables: RankTables, ops: OpView, windows: list, cpu_only: bool) -> None:
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
    windows: list,
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
    out: list[dict[str, Any]] = []
    per_step: dict[int, list[int]] = {}
    for u, k in enumerate(uniq.tolist()):
        per_step.setdefault(k // ns - 1, []).append(u)
    for s, members in per_step.items():
        members.sort(key=lambda u: -sums[0][u])
        step = windows[s][0] if s >= 0 and windows else None
        for u in members[:TOP_PER_STEP]:
            item: dict[str, Any] = {"step": step, "name": strings[int(uniq[u] % ns)], "count": int(count[u])}
            for f, arr in zip(fields, sums, strict=False):
                item[f] = r3(arr[u])
            out.append(item)
    return out


def _top_ops(x: Extract, ops: OpView, windows: list) -> list[dict[str, Any]]:
    step_idx = _step_of(ops.ts, windows) if x.steps else np.zeros(len(ops.ts), np.int64)
    return _grouped_top(
        step_idx,
        ops.name.astype(np.int64),
        [ops.self_time, ops.dur, ops.dev_total],
        x.strings,
        windows,
        ["self_us", "total_us", "device_us"],
    )


def _top_kernels(x: Extract, windows: list) -> list[dict[str, Any]]:
    if not len(x.dev_ts):
        return []
    d_ts = np.frombuffer(x.dev_ts, dtype=np.float64)
    step_idx = _step_of(d_ts, windows) if x.steps else np.zeros(len(d_ts), np.int64)
    return _grouped_top(
        step_idx,
        np.frombuffer(x.dev_name, dtype=np.int32).astype(np.int64),
        [np.frombuffer(x.dev_dur, dtype=np.float64)],
        x.strings,
        windows,
        ["total_us"],
    )
