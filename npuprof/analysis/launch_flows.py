"""Which operator launched which device task in a trace of torch_npu's form (docs/formats.md, "Traces
npuprof reads").

Kineto links them by the ``External id`` both carry; torch_npu's ``trace_view.json`` has no such id, only
an ``async_npu`` flow (``torch_to_npu``) per launch: its start event sits on the operator's thread at the
operator's start, its finish event on the task's device thread at the task's start (both "bind to the
enclosing slice", ``bp: "e"``). :func:`link` turns each such pair into a shared External id, so that the
tables count the task's time as the operator's device time exactly as for Kineto traces.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
    op_at = _operator_index(x)
    task_at, task_at_any_stream = _task_index(x)
    ops: list[int] = []
    tasks: list[int] = []
    for key_s, pid, tid, ts in zip(
        zip(s_pid.tolist(), s_tid.tolist(), s_ts.tolist(), strict=True),
        f_pid.tolist(),
        f_tid.tolist(),
        f_ts.tolist(),
        strict=True,
    ):
        op = op_at.get(key_s)
        task = task_at.get((pid, tid, ts), task_at_any_stream.get((pid, ts)))
        if op is not None and task is not None:
            ops.append(op)
            tasks.append(task)
    if not ops:
        return 0
    op_ext = np.array(x.op_ext, dtype=np.int64)  # a writable copy
    dev_ext = np.array(x.dev_ext, dtype=np.int64)
    op_idx = np.array(ops, dtype=np.int64)
    task_idx = np.array(tasks, dtype=np.int64)
    free = dev_ext[task_idx] < 0  # a task with an id of its own keeps it
    op_idx, task_idx = op_idx[free], task_idx[free]
    fresh = op_ext[op_idx] < 0
    top = max(int(op_ext.max(initial=-1)), int(dev_ext.max(initial=-1)))
    op_ext[op_idx[fresh]] = top + 1 + op_idx[fresh]
    dev_ext[task_idx] = op_ext[op_idx]
    x.op_ext, x.dev_ext = op_ext, dev_ext
    return len(task_idx)


def _flow_pairs(x: Extract) -> tuple[tuple[Any, Any, Any], tuple[Any, Any, Any]] | None:
    """(pid, tid, ts) of the start and of the finish of each flow id that has both (the first of each)."""
    ids = np.asarray(x.fl_id, dtype=np.int64)
    if not len(ids):
        return None
    start = np.asarray(x.fl_start, dtype=np.int8) == 1
    s_ids, s_first = np.unique(ids[start], return_index=True)
    f_ids, f_first = np.unique(ids[~start], return_index=True)
    _common, s_at, f_at = np.intersect1d(s_ids, f_ids, assume_unique=True, return_indices=True)
    if not len(_common):
        return None
    s_rows = np.flatnonzero(start)[s_first[s_at]]
    f_rows = np.flatnonzero(~start)[f_first[f_at]]
    pid, tid, ts = (np.asarray(c) for c in (x.fl_pid, x.fl_tid, x.fl_ts))
    return (pid[s_rows], tid[s_rows], ts[s_rows]), (pid[f_rows], tid[f_rows], ts[f_rows])


def _operator_index(x: Extract) -> dict[tuple[Any, Any, float], int]:
    """(pid, tid, start) -> operator; of operators starting together, the innermost (shortest): the one
    that launched."""
    keys = list(x.threads)
    thread = np.asarray(x.op_thread).tolist()
    by_length = np.argsort(-np.asarray(x.op_dur, dtype=np.float64), kind="stable").tolist()
    ts = np.asarray(x.op_ts, dtype=np.float64).tolist()
    return {(*keys[thread[i]], ts[i]): i for i in by_length}


def _task_index(x: Extract) -> tuple[dict[tuple[Any, Any, float], int], dict[tuple[Any, float], int]]:
    """(pid, stream, start) -> device task, and (pid, start) -> the first task starting then."""
    pids = x.dev_pid
    streams = np.asarray(x.dev_stream, dtype=np.int64).tolist()
    ts = np.asarray(x.dev_ts, dtype=np.float64).tolist()
    exact: dict[tuple[Any, Any, float], int] = {}
    anywhere: dict[tuple[Any, float], int] = {}
    for i, (pid, stream, start) in enumerate(zip(pids, streams, ts, strict=True)):
        exact.setdefault((pid, stream, start), i)
        anywhere.setdefault((pid, start), i)
    return exact, anywhere
