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

# kernel_details.csv as torch_npu writes it (its 2023 and 2025 releases; docs/formats.md): the AI Core
# metrics columns that follow Context ID there depend on aic_metrics and are left out
KERNEL_HEADER = [
    "Step Id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Dim",
    "Mix Block Dim",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
    "Context ID",
]
NA = "N/A"  # torch_npu's cell for a value it does not have
EAGER_MODEL = "4294967295"  # torch_npu's Model ID of a task outside any graph (eager mode)
CPU_CORE = "CPU"
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


# ---- times as torch_npu writes them: epoch microseconds, as text with nanosecond decimals ------------------
_NUM_WIDTH = 32  # characters of a time's text that the array parse reads (longer ones go through Decimal)
_POS = np.arange(_NUM_WIDTH)


def base_ns_of(meta: dict[str, Any]) -> int:
    """Kineto's ``baseTimeNanoseconds`` (its ``ts`` values are microseconds after it; 0 when absent, as in
    traces that write epoch times themselves)."""
    base = meta.get("baseTimeNanoseconds")
    return base if isinstance(base, int) and not isinstance(base, bool) and 0 < base < 1 << 62 else 0


def ns_of_texts(texts: list[bytes]) -> np.ndarray:
    """Nanoseconds (int64) of times in µs written as JSON numbers (``b"5298017518195.893"``, or quoted):
    exact for the digits given (a 4th decimal rounds half up); parsed as arrays, the rare exponent form or
    over-long text through Decimal."""
    n = len(texts)
    if not n:
        return np.zeros(0, np.int64)
    arr = np.array(texts, dtype=f"S{_NUM_WIDTH + 1}")
    m = arr.view(np.uint8).reshape(n, _NUM_WIDTH + 1)
    if (m[:, 0] == 34).any():  # quoted: torch_npu's own string times
        arr = np.array([t.strip(b'" ') for t in texts], dtype=f"S{_NUM_WIDTH + 1}")
        m = arr.view(np.uint8).reshape(n, _NUM_WIDTH + 1)
    length = (m != 0).sum(axis=1)
    m = m[:, :_NUM_WIDTH]
    neg = m[:, 0] == 45  # "-"
    is_dot = m == 46
    has_dot = is_dot.any(axis=1)
    dot = np.where(has_dot, is_dot.argmax(axis=1), length)[:, None]
    digits = m.astype(np.int64) - 48
    is_digit = (digits >= 0) & (digits <= 9)
    # the power of ten of each digit in nanoseconds
    power = np.where(dot > _POS, dot - _POS + 2, 3 - (_POS - dot))
    used = is_digit & (power >= 0)
    ns = (np.where(used, digits, 0) * np.where(used, 10 ** np.clip(power, 0, 18), 0)).sum(axis=1)
    fourth = np.where(is_digit & (power == -1), digits, 0).sum(axis=1)
    ns = np.where(neg, -(ns + (fourth >= 5)), ns + (fourth >= 5))
    other = ~(is_digit | is_dot | (m == 0)) & ~((_POS == 0) & neg[:, None])
    bad = np.flatnonzero(other.any(axis=1) | (length > _NUM_WIDTH) | (dot[:, 0] - neg > 16))
    if len(bad):
        from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

        for i in bad.tolist():
            try:
                value = Decimal(texts[i].strip(b'" ').decode()) * 1000
                ns[i] = int(value.to_integral_value(ROUND_HALF_UP)) if value.is_finite() else 0
            except (InvalidOperation, UnicodeDecodeError, OverflowError, ValueError):
                ns[i] = 0
    return ns


_EXACT_US = float(1 << 43)  # below this many µs a float resolves nanoseconds (its half ulp < 0.5 ns)


def ns_of(values: np.ndarray) -> np.ndarray:
    """Nanoseconds (int64) of times in µs, rounded to the nearest: for a time read from a trace, the
    nanoseconds its text gave (a float resolves them below 2**43 µs; larger ones are read back from their
    shortest text)."""
    values = np.asarray(values, dtype=np.float64)
    whole = np.floor(values)
    with np.errstate(invalid="ignore"):
        ns = whole.astype(np.int64) * 1000 + np.round((values - whole) * 1000).astype(np.int64)
    far = np.flatnonzero(~(np.abs(values) < _EXACT_US))
    if len(far):
        ns[far] = ns_of_texts([t.encode() for t in _reprs(values[far])])
    return ns


def us_texts(ns: np.ndarray) -> list[str]:
    """Nanoseconds as µs text with three decimals (``1704161511420306.491``), as torch_npu writes times."""
    ns = np.asarray(ns, dtype=np.int64)
    if not len(ns):
        return []
    q, r = np.divmod(np.abs(ns), 1000)
    texts = (("%d.%03d\n" * len(ns)) % tuple(np.column_stack((q, r)).ravel().tolist()))[:-1].split("\n")
    for i in np.flatnonzero(ns < 0).tolist():
        texts[i] = "-" + texts[i]
    return texts


def epoch_texts(values: np.ndarray, base_ns: int) -> list[str]:
    """Trace times (µs after ``base_ns``) as epoch µs text with nanosecond decimals."""
    return us_texts(ns_of(values) + base_ns)


def ascend_shapes(dims: str) -> str:
    """Kineto's ``Input Dims`` text (``[[4],[8,4],[]]``) in kernel_details' form: one tensor's dims joined
    by ``,``, tensors by ``;``, in quotes (``"4;8,4;"``); ``N/A`` for none."""
    import json

    try:
        value = json.loads(dims)
    except ValueError:
        return dims or "N/A"
    if not isinstance(value, list) or not value:
        return "N/A"

    def one(item: Any) -> str:
        if isinstance(item, list):
            if item and all(isinstance(d, list) for d in item):  # a TensorList
                return "|".join(one(d) for d in item)
            return ",".join(str(d) for d in item)
        return str(item)

    cells = [one(v) for v in value]
    return '"' + ";".join(cells) + '"' if any(cells) else "N/A"


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


def build_tables(x: Extract, ops: OpView | None = None, base_ns: int = 0) -> RankTables:
    """Every table of one rank; ``ops`` is ``nest(x)`` when the caller has it already; ``base_ns``: the
    trace's time base (kernel_details' start times are epoch µs)."""
    if ops is None:
        ops = nest(x)
    n_dev = len(x.dev_ts)
    windows = step_windows(x)
    tables = RankTables(
        device=_device_kind(x) if n_dev else "CPU",
        device_id=device_id_of(x),
        breakdown=breakdown(windows, device_work(x, ops) if n_dev else host_work(x, ops)),
        ops=ops,
    )
    tables.kernel_header = KERNEL_HEADER if x.steps else KERNEL_HEADER[1:]
    if n_dev:
        _kernel_tables(x, tables, ops, windows, base_ns)
    else:
        _cpu_task_lines(x, tables, ops, windows, base_ns)
    _operator_tables(x, tables, ops, windows, n_dev == 0)
    tables.summary = {
        "device": tables.device,
        "device_id": tables.device_id,
        "steps": tables.breakdown.summary_steps(),
        "top_operators": _top_ops(x, ops, windows),
        "top_kernels": _top_kernels(x, windows),
    }
    return tables


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


def _kernel_tables(x: Extract, tables: RankTables, ops: OpView, windows: StepWindows, base_ns: int) -> None:
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
    shape_cells = shape_cells_of(strings)
    type_cell = csv_cells(strings, {-1 - k: csv_cell(kind) for k, kind in enumerate(kind_l)})
    core_cells = [csv_cell(c) for c in core_names]
    # cells that go together are formatted together: type,core; the mix block dim, the launching
    # operator's shapes and the columns torch_npu fills from CANN (not known here)
    n_core = len(core_names)
    type_core = (type_t + len(kind_l) + 1) * n_core + core_t
    type_core_cell = _Memo(
        lambda code: f"{type_cell[code // n_core - len(kind_l) - 1]},{core_cells[code % n_core]}"
    )
    tail_cell = _Memo(lambda sid: f"0,{shape_cells[sid]}{_NA_TAIL}")
    dur_t = np.round(d_dur, 3)[order_t]
    wait_t = np.round(wait, 3)[order_t]
    lines = _task_lines(
        windows.labels() if has_steps else None,
        step_idx[order_t],
        [
            lambda part: [EAGER_MODEL] * len(nid[part]),
            lambda part: _int_cells(d_corr[order_t][part]),
            lambda part: _int_cells(d_stream[order_t][part]),
            lambda part: list(map(cell.__getitem__, nid[part].tolist())),
            lambda part: list(map(type_core_cell.__getitem__, type_core[part].tolist())),
            lambda part: epoch_texts(d_ts[order_t][part], base_ns),
            lambda part: float_texts(dur_t[part]),
            lambda part: float_texts(wait_t[part]),
            lambda part: _int_cells(d_blocks[order_t][part]),
            lambda part: list(map(tail_cell.__getitem__, op_shape_id[part].tolist())),
        ],
    )
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


_NA_TAIL = f",{NA}" * 6  # Input Data Types .. Context ID


def _int_cells(values: np.ndarray) -> list[str]:
    """Integers as cells; a negative one (unknown) as N/A."""
    if not len(values):
        return []
    texts = _FLOAT_ENCODER.encode(values.tolist())[1:-1].decode().split(",")
    for i in np.flatnonzero(values < 0).tolist():
        texts[i] = NA
    return texts


def shape_cells_of(strings: list[str]) -> dict[int, str]:
    """Input Dims string id -> kernel_details' Input Shapes cell (-1: N/A), computed on first use."""
    cells = _Memo(lambda sid: csv_cell(ascend_shapes(strings[sid])))
    cells[-1] = NA
    return cells


def _task_lines(labels: list[int | None] | None, step_idx: np.ndarray, columns: list[Any]) -> list[str]:
    """kernel_details.csv lines: the Step Id (``labels[step_idx]``, left out when ``labels`` is None)
    then each of ``columns`` (``column(part)`` gives the cells of the rows in the slice ``part``), built
    column-wise in batches (one C-level join per row)."""
    lines: list[str] = []
    n = len(step_idx)
    step_cells = [] if labels is None else ["" if s is None else str(s) for s in labels]
    for lo in range(0, n, LINES_BATCH):  # in batches: the columns of text are several times the lines
        part = slice(lo, min(lo + LINES_BATCH, n))
        cells = [column(part) for column in columns]
        if labels is not None:
            cells.insert(0, list(map(step_cells.__getitem__, step_idx[part].tolist())))
        lines += map(",".join, zip(*cells, strict=True))
    return lines


def _cpu_task_lines(x: Extract, tables: RankTables, ops: OpView, windows: StepWindows, base_ns: int) -> None:
    """kernel_details.csv when the device is the CPU: its tasks are the operators of the step thread(s)
    that call no other operator (Accelerator Core ``CPU``) and the collectives of the communication
    backends' threads (``gloo:all_reduce``, core ``GLOO``), each thread a stream."""
    strings = x.strings
    n = len(ops.ts)
    step_threads = {t for _n, _ts, _d, t in x.steps}
    on_step = np.isin(ops.thread, list(step_threads)) if step_threads else _busiest_thread(ops)
    has_child = np.zeros(n, bool)
    if n:
        has_child[ops.parent[ops.parent >= 0]] = True
    comm_op = _name_flags(strings, vocab.is_comm_operator)[ops.name] if n else np.zeros(0, bool)
    leaf = np.flatnonzero(on_step & ~has_child & ~comm_op)
    spans = [c for c in x.comm_spans if c[0].startswith(vocab.COMM_ANNOTATION_PREFIXES)]
    span_names = [x.intern(c[0]) for c in spans]  # ids of new strings come after every existing one
    ts = np.concatenate([ops.ts[leaf], np.array([c[1] for c in spans], dtype=np.float64)])
    dur = np.concatenate([ops.dur[leaf], np.array([c[2] for c in spans], dtype=np.float64)])
    thread = np.concatenate([ops.thread[leaf], np.array([c[3] for c in spans], dtype=np.int64)])
    name = np.concatenate([ops.name[leaf].astype(np.int64), np.array(span_names, dtype=np.int64)])
    shapes = np.concatenate([ops.shapes[leaf].astype(np.int64), np.full(len(spans), -1, np.int64)])
    backends = [c[0].split(":", 1)[0].upper() for c in spans]
    cores = [CPU_CORE, *sorted(set(backends))]
    core = np.concatenate(
        [np.zeros(len(leaf), np.int64), np.array(list(map(cores.index, backends)), np.int64)]
    )
    if not len(ts):
        return
    order = np.lexsort((-dur, ts))
    ts, dur, thread, name = ts[order], dur[order], thread[order], name[order]
    shapes, core = shapes[order], core[order]
    # wait time: the gap since the previous task of the same thread ended
    by_thread = np.lexsort((ts, thread))
    wait = np.zeros(len(ts))
    ends = (ts + dur)[by_thread]
    same = thread[by_thread][1:] == thread[by_thread][:-1]
    gaps = np.maximum(ts[by_thread][1:] - np.maximum.accumulate(ends)[:-1], 0.0)
    wait[by_thread[1:]] = np.where(same, gaps, 0.0)
    stream_cell = [csv_cell(str(tid)) for _pid, tid in x.threads]
    cell = csv_cells(strings, {})
    shape_cells = shape_cells_of(strings)
    core_cells = [csv_cell(c) for c in cores]
    dur3, wait3 = np.round(dur, 3), np.round(wait, 3)
    tables.kernel_lines = _task_lines(
        windows.labels() if x.steps else None,
        windows.index_of(ts) if x.steps else np.zeros(len(ts), np.int64),
        [
            lambda part: [f"{NA},{NA}"] * len(ts[part]),
            lambda part: list(map(stream_cell.__getitem__, thread[part].tolist())),
            lambda part: [f"{cell[i]},{cell[i]}" for i in name[part].tolist()],
            lambda part: list(map(core_cells.__getitem__, core[part].tolist())),
            lambda part: epoch_texts(ts[part], base_ns),
            lambda part: float_texts(dur3[part]),
            lambda part: float_texts(wait3[part]),
            lambda part: ["0"] * len(ts[part]),
            lambda part: [f"{NA},{shape_cells[s]}{_NA_TAIL}" for s in shapes[part].tolist()],
        ],
    )


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
