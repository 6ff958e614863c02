"""memory_record.csv and operator_memory.csv from the ``[memory]`` instant events (docs/formats.md,
"What the parser writes")."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.extract import Extract
from npuprof.analysis.step_breakdown import StepWindows
from npuprof.analysis.tables import LINES_BATCH, OpView, csv_cell, csv_cells, epoch_texts, float_texts

MEMORY_RECORD_HEADER = [
    "Component",
    "Timestamp(us)",
    "Total Allocated(MB)",
    "Total Reserved(MB)",
    "Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
OPERATOR_MEMORY_HEADER = [
    "Name",
    "Size(KB)",
    "Allocation Time(us)",
    "Release Time(us)",
    "Active Release Time(us)",
    "Duration(us)",
    "Active Duration(us)",
    "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)",
    "Release Total Allocated(MB)",
    "Release Total Reserved(MB)",
    "Release Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
MB = 1024.0 * 1024.0


@functools.lru_cache(maxsize=64)
def device_type_name(code: int, device_id: int = 0) -> str:
    name = vocab.DEVICE_TYPES.get(code, f"device{code}").upper()
    return name if name == "CPU" else f"{name}:{device_id}"


# an event's device: its Device Type times this, plus its Device Id (NO_ID: none, the rank's device then), so
# that two GPUs of one process are two devices (helper-179: all rows said CUDA:0, the peak was cuda:1's).
# torch writes a c10::DeviceIndex there (-1: none, the CPU's); the reader takes any int32 (extract.py), and
# every id from 0 up keeps a key of its own (helper-181: at 1 << 16, ids 65535 and 70000 were one "no id")
DEVICE_KEY, NO_ID = 1 << 32, (1 << 32) - 1


def _device_cells(keys: np.ndarray, device_id: int) -> dict[int, str]:
    """Device key -> the last two cells of a row: the empty Stream Ptr and the Device Type."""
    return {
        k: f",{device_type_name(k // DEVICE_KEY, device_id if k % DEVICE_KEY == NO_ID else k % DEVICE_KEY)}"
        for k in np.unique(keys).tolist()
    }


def memory_columns(x: Extract) -> dict[str, np.ndarray]:
    if not len(x.mem_ts):
        return {}
    cols = {
        k: np.frombuffer(getattr(x, f"mem_{k}"), dtype=dt)
        for k, dt in (
            ("ts", np.float64),
            ("alloc", np.float64),
            ("reserved", np.float64),
            ("bytes", np.float64),
            ("addr", np.int64),
            ("devtype", np.int32),
            ("thread", np.int32),
        )
    }
    # each row's process (a number): each process has its own address space, so a block is a process's
    codes: dict[Any, int] = {}
    process_of_thread = np.array([codes.setdefault(pid, len(codes)) for pid, _tid in x.threads], np.int64)
    cols["process"] = process_of_thread[cols["thread"]]
    ids = np.frombuffer(x.mem_devid, dtype=np.int32) if len(x.mem_devid) else np.full(len(cols["ts"]), -1)
    ids = np.where(ids >= 0, ids.astype(np.int64), NO_ID)
    cols["device"] = cols["devtype"].astype(np.int64) * DEVICE_KEY + ids
    missing = np.isnan(cols["alloc"]) | (cols["devtype"] == 0)
    # by time; the rows summed below (missing) at one time as summing_keys puts them (a block allocated
    # and freed in one µs after its allocation, other frees first); the others as listed, their totals say
    # the order
    keys = np.zeros(len(missing), np.int8)
    keys[missing] = summing_keys(
        cols["ts"][missing], cols["bytes"][missing], cols["addr"][missing], cols["device"][missing]
    )
    order = np.lexsort((keys, cols["ts"]))
    cols = {k: v[order] for k, v in cols.items()}
    # torch's CPU totals (c10's ProfiledCPUMemoryReporter) keep every block allocated while a profiler
    # recorded until its free is seen while one records: a block of an earlier capture freed between two
    # captures stays in them for good, so that each capture of a process showed more than the one before
    # (helper-215: the same step 3.6 MB in the first of 43 captures, 50.7 MB in the last). On the CPU the
    # figures are the running sum of the capture's own Bytes, as for a torch without totals
    missing = missing[order]
    cols["missed"] = np.zeros(len(missing), np.float64)  # the bytes of a block taken as freed, at each row
    if missing.any():  # torch before 1.10: Bytes only; each device's running sum from the capture's start
        alloc = cols["alloc"].copy()
        for code in np.unique(cols["device"][missing]).tolist():
            rows = missing & (cols["device"] == code)
            changes = cols["bytes"][rows]
            cols["missed"][rows] = missed_frees(
                changes, _block_ids(cols["addr"][rows], cols["process"][rows])
            )
            changes = changes - cols["missed"][rows]
            alloc[rows] = np.cumsum(changes) + held_before(changes, cols["addr"][rows], cols["process"][rows])
        cols["alloc"] = alloc
    return cols


def held_before(nbytes: np.ndarray, addr: np.ndarray, process: np.ndarray | None = None) -> float:
    """What one allocator's changes in a capture, in the order they are summed (:func:`summing_keys` at one
    time), show was allocated before the capture began: every block the capture frees without having
    allocated it (its address's first change a free: torch reports the free of a block allocated while an
    earlier capture recorded, docs/formats.md, "npuprof_summary.json"), and no less than the running sum goes
    below 0 (frees at an unknown address, 0), which no memory is (helper-179). By the least the sum showed
    alone, a block held since before the capture and freed after another was allocated was not counted
    (helper-247: 100 MiB held, 50 allocated, the 100 freed, 200 allocated peaked at 200, not 250).
    ``process``: each change's process (a number), whose addresses are its own; None: one process."""
    if not len(nbytes):
        return 0.0
    deficit = -min(float(np.cumsum(nbytes).min()), 0.0)
    known = addr != 0
    blocks = addr[known] if process is None else np.stack([np.asarray(process)[known], addr[known]])
    _blocks, first = np.unique(blocks, return_index=True, axis=None if process is None else 1)
    first_change = nbytes[known][first]
    return max(float(-first_change[first_change < 0].sum()), deficit)


def _block_ids(addr: np.ndarray, process: np.ndarray) -> np.ndarray:
    """A number for each change's block (its address in its process, which has its own); 0: no address."""
    ids = np.unique(np.stack([process, addr]), axis=1, return_inverse=True)[1].reshape(-1) + 1
    return np.where(addr != 0, ids, 0)


def missed_frees(nbytes: np.ndarray, block: np.ndarray) -> np.ndarray:
    """For each change, in the order summed, the size of the block its allocation took the place of: an
    earlier allocation of the same block (``block``: its number, 0 unknown) with no free between, freed by
    then, as an address holds one block at a time, though the trace has no free of it. torch reports a CPU
    free only on a thread its profiler records: the blocks gloo's worker threads free (FSDP2's gradients,
    reduce-scattered there) have none, and the running sum grew by them every step (docs/formats.md,
    "memory_record.csv")."""
    out = np.zeros(len(nbytes), np.float64)
    known = np.flatnonzero(block != 0)
    if len(known) < 2:
        return out
    order = known[np.lexsort((known, block[known]))]  # each block's changes in the order summed
    b, v = block[order], nbytes[order]
    again = np.r_[False, (b[1:] == b[:-1]) & (v[:-1] > 0) & (v[1:] > 0)]
    out[order[again]] = np.r_[0.0, v[:-1]][again]
    return out


def missed_frees_note(blocks: int) -> str | None:
    """The line that says ``blocks`` were taken as freed (:func:`missed_frees`), proof that frees go unseen
    in the process: a block freed so whose address is never reused still counts (docs/formats.md,
    "memory_record.csv"). None for none."""
    if not blocks:
        return None
    return (
        f"{blocks} block(s) were allocated again at their address with no free seen (freed on a thread the "
        "profiler does not record, e.g. gloo's): taken as freed; others never reused may still be counted: "
        "the summed memory may run high"
    )


def summing_keys(ts: np.ndarray, nbytes: np.ndarray, addr: np.ndarray, device: Any = None) -> np.ndarray:
    """Where each change goes among those of its time when Bytes are summed (0 first): an allocation 1; a
    free 2, after them, when it frees a block allocated at that time and not held before it (allocated and
    freed in one µs: listed free first, the sum dipped below 0 by its size and the whole capture was lifted
    by it, helper-221), or when its address is unknown (0: the least it shows); any other free 0, before
    them: its block was held before that time (put after an allocation beside it, it took that block
    back, and neither the freed block before nor the new one after was shown, helper-222). A block is held
    before a time when its allocations before it outnumber its frees, its first change a free (held since
    before the capture) counting as one allocation more."""
    n = len(ts)
    keys = np.where(nbytes < 0, 0, 1).astype(np.int8)
    if not n:
        return keys
    device = np.zeros(n, np.int64) if device is None else np.asarray(device)
    # only the blocks freed at a time something is allocated are looked at (none, as a rule: a trace's
    # times in ns are seldom equal), each with all its changes
    by_time = np.argsort(ts, kind="stable")
    new_time = np.flatnonzero(np.r_[True, ts[by_time][1:] != ts[by_time][:-1]])
    times_with = np.maximum.reduceat(nbytes[by_time] > 0, new_time) & np.maximum.reduceat(
        nbytes[by_time] < 0, new_time
    )
    mixed = np.zeros(n, bool)
    mixed[by_time] = np.repeat(times_with, np.diff(np.r_[new_time, n]))
    if not (mixed & (nbytes < 0)).any():
        return keys
    rows = np.flatnonzero(np.isin(addr, addr[mixed & (nbytes < 0)]))
    keys[rows] = _free_keys(ts[rows], nbytes[rows], addr[rows], device[rows])
    return keys


def _free_keys(ts: np.ndarray, nbytes: np.ndarray, addr: np.ndarray, device: np.ndarray) -> np.ndarray:
    """summing_keys of the changes of some blocks, each with all its changes."""
    n = len(ts)
    keys = np.where(nbytes < 0, 0, 1).astype(np.int8)
    by_block = np.lexsort((np.arange(n), ts, addr, device))  # each block's changes in time order
    a, t, d, b = addr[by_block], ts[by_block], device[by_block], nbytes[by_block]
    same_block = np.zeros(n, bool)
    same_block[1:] = (a[1:] == a[:-1]) & (d[1:] == d[:-1])
    starts = ~(same_block & np.r_[False, t[1:] == t[:-1]])  # each (block, time) group's first change
    group = np.cumsum(starts) - 1
    block = np.cumsum(~same_block) - 1
    first = np.flatnonzero(starts)
    allocated = np.maximum.reduceat(b > 0, first)
    freed = np.maximum.reduceat(b < 0, first)
    sign = np.sign(b).astype(np.int64)
    before = np.cumsum(sign) - sign  # the changes of the rows before, all blocks
    before = before - before[~same_block][block]  # ... of this block only
    held_since_start = (freed & ~allocated)[group[~same_block]]  # by block: its first change a free
    held = before[first] + held_since_start[block[first]] > 0
    after = (b < 0) & ((a == 0) | (allocated[group] & ~held[group]))
    keys[by_block[after]] = 2
    return keys


def peak_rows(cols: dict[str, np.ndarray]) -> np.ndarray:
    """The events whose totals the peaks describe: the accelerator's (the device type with the most
    events other than the CPU, 0) when the trace has any, else all (a CPU job). Each allocator reports its
    own totals, so a host allocation's total is never compared with the device's."""
    keys = cols["device"]
    devices, counts = np.unique(keys[cols["devtype"] != 0], return_counts=True)
    if not len(devices):
        return np.ones(len(keys), bool)
    return keys == devices[np.argmax(counts)]


def _allocated_mb(cols: dict[str, np.ndarray], mine: np.ndarray) -> tuple[np.ndarray, float]:
    """The allocated totals (MB) of the rows ``mine``, and what their first one shows was there just
    before it: its total less its own Bytes (a first free of 500 MB leaving 1000 held 1500 before it), as
    memory-timeline's peak holds (docs/formats.md, "npuprof_summary.json": the totals a step started with)."""
    allocated = cols["alloc"][mine] / MB
    first = np.flatnonzero(mine)[:1]
    before = float((cols["alloc"][first] - cols["bytes"][first])[0]) / MB if len(first) else np.nan
    return allocated, before


def _reserved_mb(cols: dict[str, np.ndarray], mine: np.ndarray) -> np.ndarray:
    """The reserved totals (MB) of the rows ``mine``; unknown (NaN) when they are the CPU's: its allocator
    keeps no cache and torch reports its reserved total as 0, which is not a peak below the allocated one
    (memory-timeline says n/a there too)."""
    reserved = cols["reserved"][mine] / MB
    if not (cols["devtype"][mine] != 0).any():
        return np.full(len(reserved), np.nan)
    return reserved


def _peak(mb: np.ndarray) -> float | None:
    """The most of ``mb``, rounded; None when every value is unknown (NaN: the reserved total of a torch
    before 1.10, which it did not report: not 0)."""
    known = mb[~np.isnan(mb)]
    return round(float(known.max()), 3) if len(known) else None


def _mb_texts(values: np.ndarray) -> list[str]:
    """Cells of sizes; N/A for an unknown one (NaN), as torch_npu writes a value it lacks."""
    texts = float_texts(values)
    unknown = np.isnan(values)
    if unknown.any():
        for i in np.flatnonzero(unknown).tolist():
            texts[i] = "N/A"
    return texts


def memory_record_lines(cols: dict[str, np.ndarray], device_id: int, base_ns: int = 0) -> Iterator[str]:
    """CSV lines (no header) of memory_record.csv, in time order; times in epoch µs when the trace has a
    time base (``base_ns``). Made ``LINES_BATCH`` at a time, as they are written."""
    if not cols:
        return
    tail = _device_cells(cols["device"], device_id)
    for lo in range(0, len(cols["ts"]), LINES_BATCH):
        part = slice(lo, lo + LINES_BATCH)
        if base_ns:
            ts: Any = ["PTA," + t for t in epoch_texts(cols["ts"][part], base_ns)]
        else:
            ts = map("PTA,{:.3f}".format, cols["ts"][part].tolist())
        alloc = float_texts(np.round(cols["alloc"][part] / MB, 6))
        res = _mb_texts(np.round(cols["reserved"][part] / MB, 6))
        devices = map(tail.__getitem__, cols["device"][part].tolist())
        yield from map(",".join, zip(ts, alloc, res, alloc, devices, strict=True))


def _enclosing_op(ops: OpView, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Index of the innermost operator on the same thread open at each time (-1 when none)."""
    if not len(ops.ts):
        return np.full(len(ts), -1, dtype=np.int64)
    key_ops = ops.thread.astype(np.float64) * 1e15 + (ops.ts - ops.ts.min())
    key_mem = thread.astype(np.float64) * 1e15 + (ts - ops.ts.min())
    # ops are sorted by (thread, ts) already
    out = np.searchsorted(key_ops, key_mem, side="right") - 1
    end = ops.ts + ops.dur
    # climb from the last operator started before each time to the first one still open at it, all
    # times at once: each round moves the unresolved ones to their operator's parent
    pending = np.flatnonzero(out >= 0)
    while len(pending):
        j = out[pending]
        same_thread = ops.thread[j] == thread[pending]
        closed = ~same_thread | (end[j] < ts[pending])
        pending, j, same_thread = pending[closed], j[closed], same_thread[closed]
        out[pending] = np.where(same_thread, ops.parent[j], -1)
        pending = pending[out[pending] >= 0]
    return out


def pair_allocations(cols: dict[str, np.ndarray], ops: OpView) -> tuple[np.ndarray, ...]:
    """(allocations, their releases, their operators): the indices of the allocation events, of the
    release of the same address of the same process that follows each (-1: none), and of the innermost
    operator open on the allocating thread (-1: none). Two processes of one trace (traces merged, a forked
    worker's layout) use the same addresses for blocks of their own (helper-247: process B's free paired
    with A's allocation)."""
    ts, nbytes, addr = cols["ts"], cols["bytes"], cols["addr"]
    device, process = cols["device"], cols["process"]
    allocs = np.flatnonzero(nbytes > 0)
    order = np.lexsort((ts, addr, process, device))
    pos_in = np.empty(len(ts), dtype=np.int64)
    pos_in[order] = np.arange(len(ts))
    nxt = pos_in[allocs] + 1
    release = np.full(len(allocs), -1, dtype=np.int64)
    ok = nxt < len(ts)
    cand = order[np.minimum(nxt, len(ts) - 1)]
    same_block = (
        (addr[cand] == addr[allocs]) & (device[cand] == device[allocs]) & (process[cand] == process[allocs])
    )
    ok &= same_block & (nbytes[cand] < 0)
    release[ok] = cand[ok]
    owner = _enclosing_op(ops, cols["thread"][allocs], ts[allocs])
    return allocs, release, owner


def operator_memory_lines(
    cols: dict[str, np.ndarray], ops: OpView, strings: list[str], device_id: int, base_ns: int = 0
) -> tuple[Iterator[str], dict[str, float]]:
    """Lines (CSV, no header) of operator_memory.csv (each allocation paired with its release by address),
    made ``LINES_BATCH`` at a time as they are written, and the peaks; times in epoch µs when the trace
    has a time base (``base_ns``)."""
    if not cols:
        return iter(()), {}
    alloc_mb, res_mb = cols["alloc"] / MB, cols["reserved"] / MB
    mine = peak_rows(cols)
    allocated, before = _allocated_mb(cols, mine)
    peaks = {
        "peak_allocated_mb": round(float(np.fmax(allocated.max(), before)), 3),
        "peak_reserved_mb": _peak(_reserved_mb(cols, mine)),
    }
    return _operator_memory_lines(cols, alloc_mb, res_mb, ops, strings, device_id, base_ns), peaks


def _operator_memory_lines(
    cols: dict[str, np.ndarray],
    alloc_mb: np.ndarray,
    res_mb: np.ndarray,
    ops: OpView,
    strings: list[str],
    device_id: int,
    base_ns: int,
) -> Iterator[str]:
    ts, nbytes = cols["ts"], cols["bytes"]
    allocs, release, owner = pair_allocations(cols, ops)
    a6, r6, ts3 = np.round(alloc_mb, 6), np.round(res_mb, 6), np.round(ts, 3)
    kb = np.round(nbytes / 1024, 3)
    name_ids = np.where(owner >= 0, ops.name[np.maximum(owner, 0)], -1) if len(ops.name) else owner
    names = csv_cells(strings, {-1: csv_cell("[unknown]")})
    tail = _device_cells(cols["device"], device_id)
    for lo in range(0, len(allocs), LINES_BATCH):  # column-wise, one C-level join per row, in batches
        part = slice(lo, lo + LINES_BATCH)
        at, rel = allocs[part], release[part]
        k = len(at)
        ok = rel >= 0
        rel = rel[ok]

        def column(
            values: np.ndarray, where: np.ndarray | None = None, k: int = k, epoch: bool = False
        ) -> list[str]:
            texts = epoch_texts(values, base_ns) if epoch and base_ns else _mb_texts(values)
            if where is None:
                return texts
            out = np.full(k, "", dtype=object)
            out[where] = texts
            return out.tolist()

        # np.round equals round(release - allocation, 3) here: both times are already rounded to 3 places
        durs = column(np.round(ts3[rel] - ts3[at[ok]], 3), ok)
        rel_at = column(ts3[rel], ok, epoch=True)
        a_rel = column(a6[rel], ok)
        a_alloc = column(a6[at])
        columns = [
            list(map(names.__getitem__, name_ids[part].tolist())),
            column(kb[at]),
            column(ts3[at], epoch=True),
            rel_at,
            rel_at,
            durs,
            durs,
            a_alloc,
            column(r6[at]),
            a_alloc,
            a_rel,
            column(r6[rel], ok),
            a_rel,
            list(map(tail.__getitem__, cols["device"][at].tolist())),
        ]
        yield from map(",".join, zip(*columns, strict=True))


def step_peaks(
    cols: dict[str, np.ndarray], windows: StepWindows, until: float | None = None
) -> list[tuple[float, float | None] | None]:
    """Peak allocated and reserved MB of each step window (of the device :func:`peak_rows` picks): the
    most of what the step started with (the totals of the last event before it) and of every event inside
    it; None when the trace has no memory event before the step's end, or ``until`` (a trace cut in its
    [memory] events: the last one read) comes before it ends."""
    out: list[tuple[float, float] | None] = []
    if not cols:
        return [None] * len(windows)
    mine = peak_rows(cols)
    ts, reserved = cols["ts"][mine], _reserved_mb(cols, mine)
    alloc, before = _allocated_mb(cols, mine)
    for lo, hi in zip(windows.start.tolist(), windows.end.tolist(), strict=True):
        i, j = max(int(np.searchsorted(ts, lo)) - 1, 0), int(np.searchsorted(ts, hi))
        if until is not None and hi >= until:
            out.append(None)  # the cut may have taken some of its events
        elif j > i:
            # a step holding the first sample started with what was there before it (unknown when the
            # step began after it: then the last sample before the step says what it started with)
            most = float(alloc[i:j].max()) if i or ts[0] < lo else float(np.fmax(alloc[i:j].max(), before))
            out.append((round(most, 3), _peak(reserved[i:j])))
        else:
            out.append(None)
    return out
