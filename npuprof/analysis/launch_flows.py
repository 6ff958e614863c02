"""Which operator launched which device task in a trace of torch_npu's form (docs/formats.md, "Traces
npuprof reads").

Kineto links them by the ``External id`` both carry; torch_npu's ``trace_view.json`` has no such id, only
an ``async_npu`` flow (``torch_to_npu``) per launch: its start event sits on the operator's thread at the
operator's start, its finish event on the task's device thread at the task's start (both "bind to the
enclosing slice", ``bp: "e"``). :func:`link` turns each such pair into a shared External id, so that the
tables count the task's time as the operator's device time exactly as for Kineto traces.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from npuprof.analysis import process_links
from npuprof.analysis.extract import Extract


def link(x: Extract) -> int:
    """Give the operators and device tasks that an ``async_npu`` flow joins a common External id where
    they have none (ids above any in the trace); returns how many tasks were linked. Idempotent."""
    if getattr(x, "_launches_linked", False):
        return 0
    x._launches_linked = True  # type: ignore[attr-defined]
    pairs = _flow_pairs(x)
    if pairs is None or not len(x.op_ts) or not len(x.dev_ts):
        return 0
    (s_pid, s_tid, s_ts), (f_pid, f_tid, f_ts) = pairs
    op_at = _operator_index(x, s_ts)
    task_at, task_at_any_stream = _task_index(x, f_ts)
    op = _lookup(op_at, s_pid, s_tid, s_ts)
    exact = _lookup(task_at, f_pid, f_tid, f_ts)
    task = np.where(exact >= 0, exact, _lookup(task_at_any_stream, f_pid, f_ts))
    both = (op >= 0) & (task >= 0)
    _count_unowned(x, task[both])
    if not both.any():
        return 0
    op_ext = np.array(x.op_ext, dtype=np.int64)  # a writable copy
    dev_ext = np.array(x.dev_ext, dtype=np.int64)
    op_idx, task_idx = op[both], task[both]
    free = dev_ext[task_idx] < 0  # a task with an id of its own keeps it
    op_idx, task_idx = op_idx[free], task_idx[free]
    fresh = op_ext[op_idx] < 0
    top = max(int(op_ext.max(initial=-1)), int(dev_ext.max(initial=-1)))
    op_ext[op_idx[fresh]] = top + 1 + op_idx[fresh]
    dev_ext[task_idx] = op_ext[op_idx]
    x.op_ext, x.dev_ext = op_ext, dev_ext
    return len(task_idx)


def _count_unowned(x: Extract, linked: np.ndarray) -> None:
    """``x._flows_ambiguous``: how many device tasks, without an id of their own and linked by no other
    flow, end a flow whose id several processes started and that is any of theirs (_own_pairs)."""
    unowned = getattr(x, "_flows_unowned", None)
    if unowned is None or not len(unowned[0]):
        return
    at, at_any_stream = _task_index(x, unowned[2])
    exact = _lookup(at, *unowned)
    task = np.where(exact >= 0, exact, _lookup(at_any_stream, unowned[0], unowned[2]))
    task = np.setdiff1d(task[task >= 0], linked)
    x._flows_ambiguous = int((np.asarray(x.dev_ext, dtype=np.int64)[task] < 0).sum())  # type: ignore[attr-defined]


def _lookup(table: dict[Any, int], *columns: np.ndarray) -> np.ndarray:
    """``table[(a, b, ...)]`` for each row of the columns, -1 where missing: dict lookups by a C-level
    ``map`` (Python's equality of the keys, as a loop would have it, without the loop)."""
    keys = zip(*(c.tolist() for c in columns), strict=True)
    return np.fromiter(map(table.get, keys, repeat(-1)), np.int64, len(columns[0]))


def _flow_pairs(x: Extract) -> tuple[tuple[Any, Any, Any], tuple[Any, Any, Any]] | None:
    """(pid, tid, ts) of the start and of the finish of each flow id that has both (the first of each); of
    an id several processes started, each process's first start and the first of the finishes that are
    its own (:func:`_own_pairs`)."""
    ids = np.asarray(x.fl_id, dtype=np.int64)
    if not len(ids):
        return None
    start = np.asarray(x.fl_start, dtype=np.int8) == 1
    s_ids, s_first = np.unique(ids[start], return_index=True)
    f_ids, f_first = np.unique(ids[~start], return_index=True)
    common, s_at, f_at = np.intersect1d(s_ids, f_ids, assume_unique=True, return_indices=True)
    if not len(common):
        return None
    s_rows = np.flatnonzero(start)[s_first[s_at]]
    f_rows = np.flatnonzero(~start)[f_first[f_at]]
    pid, tid, ts = (np.asarray(c) for c in (x.fl_pid, x.fl_tid, x.fl_ts))
    shared = _shared_ids(ids[start], pid[start], common)
    if len(shared):  # traces merged into one (one process's trace has none: its rows as they were)
        keep = ~np.isin(common, shared)
        own_s, own_f, unowned = _own_pairs(ids, start, pid, ts, common, shared)
        x._flows_unowned = (pid[unowned], tid[unowned], ts[unowned])  # type: ignore[attr-defined]
        s_rows = np.concatenate([s_rows[keep], own_s])
        f_rows = np.concatenate([f_rows[keep], own_f])
        order = np.lexsort((f_rows, ids[f_rows]))  # by flow id, then finish: as the reference test has it
        s_rows, f_rows = s_rows[order], f_rows[order]
    return (pid[s_rows], tid[s_rows], ts[s_rows]), (pid[f_rows], tid[f_rows], ts[f_rows])


def _shared_ids(s_ids: np.ndarray, s_pids: np.ndarray, common: np.ndarray) -> np.ndarray:
    """The flow ids of ``common`` that more than one process started (traces merged into one: each process
    numbers its flows on its own)."""
    pairs = np.unique(np.stack([s_ids, s_pids.astype(np.int64)]), axis=1)  # (id, pid), each once
    flow_ids, processes = np.unique(pairs[0], return_counts=True)
    return flow_ids[(processes > 1) & np.isin(flow_ids, common)]


def _own_pairs(
    ids: np.ndarray,
    start: np.ndarray,
    pid: np.ndarray,
    ts: np.ndarray,
    common: np.ndarray,
    shared: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and finish rows joining the flow ids several processes started, and the rows of their
    finishes that stay any of several processes' (linked to none, said by tables.process_notes). A finish
    is the process's that started its id, as a task is the process's that launched its correlation id
    (process_links.py, docs/formats.md): the only one; of several, the only one whose start came at or
    before the finish, else the one whose other flows (settled so) end on the finish's device (its pid).
    Each process's first start of the id joins the first of the id's finishes that are its own
    (helper-221: joining the id's first start and first finish linked process A's task to B's operator,
    or B's to none)."""
    codes: dict[int, int] = {}
    launches: dict[int, list[tuple[int, float]]] = {}
    first_start: dict[tuple[int, int], int] = {}  # (id, process) -> its first start row
    rows = np.flatnonzero(np.isin(ids, common))
    for row, flow, p, t, is_start in zip(
        rows.tolist(),
        ids[rows].tolist(),
        pid[rows].tolist(),
        ts[rows].tolist(),
        start[rows].tolist(),
        strict=True,
    ):
        if is_start:
            code = codes.setdefault(p, len(codes))
            launches.setdefault(flow, []).append((code, t))
            first_start.setdefault((flow, code), row)
    finishes = rows[~start[rows]]
    tasks = zip(
        ids[finishes].tolist(), repeat(None), ts[finishes].tolist(), pid[finishes].tolist(), strict=False
    )
    hosts = process_links.task_processes(tasks, launches, {})
    is_shared = set(shared.tolist())
    s_out: list[int] = []
    f_out: list[int] = []
    done: set[tuple[int, int]] = set()
    ambiguous: list[int] = []
    for row, flow, host in zip(finishes.tolist(), ids[finishes].tolist(), hosts, strict=True):
        if flow not in is_shared:
            continue
        if host < 0:
            ambiguous.append(row)
        elif (flow, host) not in done:
            done.add((flow, host))
            s_out.append(first_start[(flow, host)])
            f_out.append(row)
    return np.array(s_out, np.int64), np.array(f_out, np.int64), np.array(ambiguous, np.int64)


def _operator_index(x: Extract, starts: np.ndarray) -> dict[tuple[Any, Any, float], int]:
    """(pid, tid, start) -> operator, of the operators starting at one of ``starts``; of operators
    starting together, the innermost (shortest): the one that launched (of equally short ones, the last)."""
    keys = list(x.threads)
    op_ts = np.asarray(x.op_ts, dtype=np.float64)
    by_length = np.argsort(-np.asarray(x.op_dur, dtype=np.float64), kind="stable")
    by_length = by_length[np.isin(op_ts[by_length], starts)]
    thread = np.asarray(x.op_thread)[by_length].tolist()
    pids = list(map(itemgetter(0), map(keys.__getitem__, thread)))
    tids = list(map(itemgetter(1), map(keys.__getitem__, thread)))
    # a later (shorter) one replaces an earlier one of the same key
    return dict(zip(zip(pids, tids, op_ts[by_length].tolist(), strict=True), by_length.tolist(), strict=True))


def _task_index(
    x: Extract, starts: np.ndarray
) -> tuple[dict[tuple[Any, Any, float], int], dict[tuple[Any, float], int]]:
    """(pid, stream, start) -> device task, and (pid, start) -> the first task starting then, of the
    tasks starting at one of ``starts``."""
    dev_ts = np.asarray(x.dev_ts, dtype=np.float64)
    order = np.flatnonzero(np.isin(dev_ts, starts))[::-1]  # backwards: the first of a key is written last
    pids = list(map(list(x.dev_pid).__getitem__, order.tolist()))
    streams = np.asarray(x.dev_stream, dtype=np.int64)[order].tolist()
    ts = dev_ts[order].tolist()
    exact = dict(zip(zip(pids, streams, ts, strict=True), order.tolist(), strict=True))
    return exact, dict(zip(zip(pids, ts, strict=True), order.tolist(), strict=True))
