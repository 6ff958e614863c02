"""Which process launched which device task, in a trace holding several host processes' operators (traces
merged into one, a DataLoader worker's events beside the main process's).

Each process numbers its operators' ``External id`` and its launches' ``correlation`` from counters of its
own, while a task links to the operator that launched it by those ids (docs/formats.md, "Traces npuprof
reads"): two processes give the same ids to different operators, and a task of one was linked to the
other's operator (helper-221: process A's 200 µs gemm counted as process B's ``aten::add``'s device time).
A task is the process's whose runtime call of its correlation id launched it: the one such process; of
several, the only one whose call began before the task did, else the one whose other tasks (settled so)
ran on the task's device. Without a launch of its id, the one process with an operator of its External
id. A task still any of several processes' is linked to none, and said (:data:`AMBIGUOUS`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np

from npuprof.analysis.extract import Extract

UNKNOWN = -1  # no launch and no operator of the task's ids: it is linked as before (to nothing)
AMBIGUOUS = -2  # any of several processes' tasks


def task_processes(
    tasks: Iterable[tuple[Any, Any, float, Hashable]],
    launches: dict[Any, list[tuple[int, float]]],
    ext_owners: dict[Any, set[int]],
) -> list[int]:
    """The process (a number) of each task ``(correlation, External id, start, device)``, UNKNOWN or
    AMBIGUOUS; ``launches``: correlation -> its runtime calls (process, start); ``ext_owners``: External
    id -> the processes with an operator of it."""
    out: list[int] = []
    pending: list[tuple[int, Hashable, set[int]]] = []
    device_hosts: dict[Hashable, set[int]] = {}  # device -> the processes of its tasks settled by a launch
    for i, (corr, ext, ts, device) in enumerate(tasks):
        calls = launches.get(corr) if corr is not None else None
        if calls:
            procs = {p for p, _t in calls}
            if len(procs) > 1:
                procs = {p for p, t in calls if t <= ts} or procs
            if len(procs) == 1:
                (proc,) = procs
                out.append(proc)
                device_hosts.setdefault(device, set()).add(proc)
                continue
        else:
            procs = ext_owners.get(ext, set()) if ext is not None else set()
            if len(procs) <= 1:
                out.append(next(iter(procs)) if procs else UNKNOWN)
                continue
        out.append(AMBIGUOUS)
        pending.append((i, device, procs))
    for i, device, procs in pending:
        owner = device_hosts.get(device, set())
        if len(owner) == 1 and owner <= procs:
            out[i] = next(iter(owner))
    return out


def launchers(x: Extract, op_thread: np.ndarray, op_ext: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Per device task, the operator that launched it (an index into ``op_thread`` / ``op_ext``, the
    operators in the tables' order; the first of a process's operators with the task's External id), -1
    for none, and how many tasks with an External id could be any of several processes' (linked to none);
    None when the operators are one process's, or no two processes share an External id (a task's
    External id then names its operator)."""
    n_ops = len(op_ext)
    if not n_ops or not len(x.dev_ts):
        return None
    codes: dict[Any, int] = {}  # pid -> process number, in the order of their threads
    thread_code = np.array([codes.setdefault(pid, len(codes)) for pid, _tid in x.threads], np.int64)
    linked = np.flatnonzero(op_ext >= 0)
    if len(codes) < 2 or not len(linked):
        return None
    op_code = thread_code[op_thread[linked]]
    if (op_code == op_code[0]).all():
        return None  # one process's operators
    shared = np.unique(op_ext[linked])
    pairs = np.unique(np.stack([op_code, op_ext[linked]]), axis=1)
    if pairs.shape[1] == len(shared):
        return None  # no id shared by two processes
    first: dict[tuple[int, int], int] = {}
    ext_owners: dict[Any, set[int]] = {}
    for i, code, ext in zip(linked.tolist(), op_code.tolist(), op_ext[linked].tolist(), strict=True):
        if first.setdefault((code, ext), i) == i:
            ext_owners.setdefault(ext, set()).add(code)
    hosts, _launches = _task_hosts(x, codes, ext_owners)
    d_ext = np.asarray(x.dev_ext, dtype=np.int64).tolist()
    out = np.fromiter(
        (first.get((host, ext), -1) if host >= 0 else -1 for host, ext in zip(hosts, d_ext, strict=True)),
        np.int64,
        len(d_ext),
    )
    ambiguous = sum(1 for host, ext in zip(hosts, d_ext, strict=True) if host == AMBIGUOUS and ext >= 0)
    return out, ambiguous


def _task_hosts(
    x: Extract, codes: dict[Any, int], ext_owners: dict[Any, set[int]]
) -> tuple[list[int], dict[Any, list[tuple[int, float]]]]:
    """Each device task's process (:func:`task_processes`), and the runtime calls by correlation id
    (process, start), in the file's order; ``codes``: pid -> process number, added to for launches'."""
    launches: dict[Any, list[tuple[int, float]]] = {}
    for corr, pid, ts in zip(
        np.asarray(x.launch_corr, dtype=np.int64).tolist(),
        np.asarray(x.launch_pid, dtype=np.int64).tolist(),
        np.asarray(x.launch_ts, dtype=np.float64).tolist(),
        strict=True,
    ):
        if pid >= 0:  # a process id that is a number (extract's launch_pid)
            launches.setdefault(corr, []).append((codes.setdefault(pid, len(codes)), ts))
    d_ext = np.asarray(x.dev_ext, dtype=np.int64).tolist()
    tasks = zip(
        np.asarray(x.dev_corr, dtype=np.int64).tolist(),
        [e if e >= 0 else None for e in d_ext],
        np.asarray(x.dev_ts, dtype=np.float64).tolist(),
        list(x.dev_pid),
        strict=True,
    )
    return task_processes(tasks, launches, ext_owners), launches


def own_launches(
    x: Extract, op_thread: np.ndarray, op_ext: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per device task, its own process's first runtime call of its correlation id (an index into the
    extract's ``launch_*`` columns) and what to take: 1 that call, -1 none (a task any of several processes'
    launched, or whose process made no call of the id), 0 as for one process (the id's first call, in any
    process: a task no call of a numbered process launched). None when no correlation id is called by two
    processes (its first call is then its own; helper-225: process B's call of id 5 in step 1 gave A's
    kernel, launched in step 2, step 1). kernel_details' Step Id and the db's CANN_API launch rows both
    take it (tables._launch_rows)."""
    lc = np.asarray(x.launch_corr, dtype=np.int64)
    lp = np.asarray(x.launch_pid, dtype=np.int64)
    if len(lc) < 2 or not len(x.dev_ts) or lp.min() == lp.max():
        return None  # one process's calls (nearly every trace)
    if np.unique(np.stack([lc, lp]), axis=1).shape[1] == len(np.unique(lc)):
        return None  # no correlation id called by two processes
    codes: dict[Any, int] = {}
    thread_code = np.array([codes.setdefault(pid, len(codes)) for pid, _tid in x.threads], np.int64)
    ext_owners: dict[Any, set[int]] = {}
    linked = np.flatnonzero(op_ext >= 0)
    for code, ext in zip(thread_code[op_thread[linked]].tolist(), op_ext[linked].tolist(), strict=True):
        ext_owners.setdefault(ext, set()).add(code)
    hosts, launches = _task_hosts(x, codes, ext_owners)
    first_call: dict[tuple[Any, int], int] = {}  # (correlation, process) -> its first call's row
    for row, (corr, pid) in enumerate(zip(lc.tolist(), lp.tolist(), strict=True)):
        if pid >= 0:
            first_call.setdefault((corr, codes[pid]), row)
    rows = np.full(len(hosts), -1, np.int64)
    take = np.zeros(len(hosts), np.int8)
    for i, (corr, host) in enumerate(
        zip(np.asarray(x.dev_corr, dtype=np.int64).tolist(), hosts, strict=True)
    ):
        if not launches.get(corr):
            continue  # no numbered process's call: as before
        own = first_call.get((corr, host)) if host >= 0 else None
        if own is None:
            take[i] = -1
        else:
            rows[i], take[i] = own, 1
    return rows, take


def hosts_for_ids(x: Extract, exts: dict[int, set[Any]]) -> tuple[list[int], dict[Any, int]] | None:
    """Per device task, its process (:func:`task_processes`: a number, UNKNOWN or AMBIGUOUS), and the
    numbers of the processes (pid -> number), for matching tasks to the External ids ``exts`` (id -> the
    pids of the host records carrying it: communication's spans); None when each id of ``exts`` is one
    process's, in those records and the operators (a task's External id then names its process's)."""
    if not len(x.dev_ts) or len({pid for pid, _tid in x.threads}) < 2:
        return None
    codes: dict[Any, int] = {}
    thread_code = np.array([codes.setdefault(pid, len(codes)) for pid, _tid in x.threads], np.int64)
    op_ext = np.asarray(x.op_ext, dtype=np.int64)
    linked = np.flatnonzero(op_ext >= 0)
    op_code = thread_code[np.asarray(x.op_thread, dtype=np.int64)[linked]]
    wanted = np.isin(op_ext[linked], np.fromiter(exts, np.int64, len(exts)))
    owners = {ext: {codes.setdefault(pid, len(codes)) for pid in pids} for ext, pids in exts.items()}
    for code, ext in zip(op_code[wanted].tolist(), op_ext[linked][wanted].tolist(), strict=True):
        owners[ext].add(code)
    if all(len(procs) < 2 for procs in owners.values()):
        return None  # no id of theirs carried by two processes (nearly every trace)
    ext_owners: dict[Any, set[int]] = {}
    for code, ext in zip(op_code.tolist(), op_ext[linked].tolist(), strict=True):
        ext_owners.setdefault(ext, set()).add(code)
    return _task_hosts(x, codes, ext_owners)[0], codes


def ambiguous_note(count: int) -> list[str]:
    """The warning for the tasks :func:`launchers` could not give a process."""
    if not count:
        return []
    return [
        f"{count} device task(s) could have been launched by any of several processes of this trace (each "
        "process numbers its operators' External ids and its launches' correlation ids on its own, and "
        "theirs meet here): linked to no operator, their time is the device's, in no operator's device time"
    ]
