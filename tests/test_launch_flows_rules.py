"""The async_npu flow join (npuprof/analysis/launch_flows.py) against a plain reference written here: the
rule of docs/formats.md ("Traces npuprof reads"), one flow at a time, on random small traces with ties,
signed zeros, NaN times, string pids and tasks or operators that already carry an External id."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from npuprof.analysis import launch_flows, scan


def reference_link(x: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """The rule, spelled out: each flow id's first start and first finish; of an id several processes
    started, each finish is the process's that started it (the only one; of several, the only one whose
    start came at or before the finish, else the one whose other finishes, settled so, are on its device
    (its pid); else none's) and each process's first start joins the first finish that is its own; the
    start finds the operator of its thread starting then (the shortest; of equal ones, the later); the
    finish the first task of its process and stream starting then, else the first of its process starting
    then; a task keeping its own id, a new id (above all) for an operator without one."""
    op_ext, dev_ext = list(map(int, x.op_ext)), list(map(int, x.dev_ext))
    keys = list(x.threads)
    rows: dict[int, dict[bool, list[int]]] = {}
    for row, (flow, start) in enumerate(zip(x.fl_id.tolist(), x.fl_start.tolist(), strict=True)):
        rows.setdefault(flow, {True: [], False: []})[bool(start)].append(row)
    both = {flow: ends for flow, ends in rows.items() if ends[True] and ends[False]}
    owner: dict[int, Any] = {}  # finish row -> its process (a pid), or None
    settled: dict[Any, set[Any]] = {}  # device pid -> the processes of its finishes settled by the starts
    for ends in both.values():
        for f in ends[False]:
            starters = {int(x.fl_pid[s]) for s in ends[True]}
            if len(starters) > 1:
                starters = {int(x.fl_pid[s]) for s in ends[True] if x.fl_ts[s] <= x.fl_ts[f]} or starters
            owner[f] = next(iter(starters)) if len(starters) == 1 else None
            if owner[f] is not None:
                settled.setdefault(int(x.fl_pid[f]), set()).add(owner[f])
    for ends in both.values():
        for f in ends[False]:
            starters = {int(x.fl_pid[s]) for s in ends[True]}
            on_device = settled.get(int(x.fl_pid[f]), set())
            if owner[f] is None and len(on_device) == 1 and on_device <= starters:
                owner[f] = next(iter(on_device))
    joined = []  # (flow, start row, finish row)
    for flow, ends in both.items():
        if len({int(x.fl_pid[s]) for s in ends[True]}) == 1:
            joined.append((flow, ends[True][0], ends[False][0]))
            continue
        for proc in {int(x.fl_pid[s]) for s in ends[True]}:
            own = [f for f in ends[False] if owner[f] == proc]
            if own:
                joined.append((flow, next(s for s in ends[True] if x.fl_pid[s] == proc), own[0]))
    top = max([-1, *op_ext, *dev_ext])
    pairs = []
    for _flow, s, f in sorted(joined, key=lambda j: (j[0], j[2])):
        op = None
        for i in range(len(x.op_ts)):
            same_start = keys[x.op_thread[i]] == (x.fl_pid[s], x.fl_tid[s]) and x.op_ts[i] == x.fl_ts[s]
            if same_start and (op is None or x.op_dur[i] <= x.op_dur[op]):
                op = i
        task = next(
            (
                i
                for i in range(len(x.dev_ts))
                if (x.dev_pid[i], x.dev_stream[i], x.dev_ts[i]) == (x.fl_pid[f], x.fl_tid[f], x.fl_ts[f])
            ),
            None,
        )
        if task is None:
            task = next(
                (i for i in range(len(x.dev_ts)) if (x.dev_pid[i], x.dev_ts[i]) == (x.fl_pid[f], x.fl_ts[f])),
                None,
            )
        if op is not None and task is not None and dev_ext[task] < 0:
            pairs.append((op, task))
    fresh = {op for op, _ in pairs if op_ext[op] < 0}
    for op in fresh:
        op_ext[op] = top + 1 + op
    for op, task in pairs:
        dev_ext[task] = op_ext[op]
    return np.array(op_ext, np.int64), np.array(dev_ext, np.int64), len(pairs)


def random_trace(seed: int) -> SimpleNamespace:
    r = random.Random(seed)
    keys = list(dict.fromkeys((r.choice([1, 2, "p"]), r.choice([1, 2])) for _ in range(3)))
    times = [0.0, -0.0, 1.0, float("nan")]
    n_op, n_dev, n_flow = r.randint(0, 12), r.randint(0, 12), r.randint(0, 16)
    return SimpleNamespace(
        threads={k: i for i, k in enumerate(keys)},
        op_thread=np.array([r.randrange(len(keys)) for _ in range(n_op)], np.int32),
        op_ts=np.array([r.choice(times) for _ in range(n_op)]),
        op_dur=np.array([r.choice([0.0, 1.0, 2.0]) for _ in range(n_op)]),
        op_ext=np.array([r.choice([-1, -1, 5, 7]) for _ in range(n_op)], np.int64),
        dev_pid=[r.choice([1, 2, 800]) for _ in range(n_dev)],
        dev_stream=np.array([r.choice([1, 2, 3]) for _ in range(n_dev)], np.int64),
        dev_ts=np.array([r.choice(times) for _ in range(n_dev)]),
        dev_ext=np.array([r.choice([-1, -1, -1, 9]) for _ in range(n_dev)], np.int64),
        fl_id=np.array([r.randrange(3) for _ in range(n_flow)], np.int64),
        fl_start=np.array([r.randrange(2) for _ in range(n_flow)], np.int8),
        fl_pid=np.array([r.choice([1, 2, 2, 800]) for _ in range(n_flow)], np.int64),
        fl_tid=np.array([r.choice([1, 2]) for _ in range(n_flow)], np.int64),
        fl_ts=np.array([r.choice(times) for _ in range(n_flow)]),
    )


def test_link_follows_the_rule_on_random_traces() -> None:
    linked_somewhere = 0
    for seed in range(600):
        x = random_trace(seed)
        want_op, want_dev, want_n = reference_link(x)
        got_n = launch_flows.link(x)
        assert got_n == want_n, seed
        np.testing.assert_array_equal(np.asarray(x.op_ext), want_op, err_msg=str(seed))
        np.testing.assert_array_equal(np.asarray(x.dev_ext), want_dev, err_msg=str(seed))
        linked_somewhere += got_n > 0
        assert launch_flows.link(x) == 0  # idempotent
    assert linked_somewhere > 25  # the draws do exercise the join (38 of the 600 link)


def test_the_shortest_operator_starting_with_the_flow_launched_it() -> None:
    x = random_trace(0)
    x.threads = {(7, 7): 0}
    x.op_thread = np.zeros(3, np.int32)
    x.op_ts, x.op_dur = np.array([5.0, 5.0, 5.0]), np.array([9.0, 1.0, 4.0])
    x.op_ext = np.full(3, -1, np.int64)
    x.dev_pid, x.dev_stream = [8, 8], np.array([2, 3], np.int64)
    x.dev_ts, x.dev_ext = np.array([6.0, 6.0]), np.full(2, -1, np.int64)
    x.fl_id, x.fl_start = np.array([1, 1], np.int64), np.array([1, 0], np.int8)
    x.fl_pid, x.fl_tid, x.fl_ts = np.array([7, 8], np.int64), np.array([7, 3], np.int64), np.array([5.0, 6.0])
    assert launch_flows.link(x) == 1
    assert x.op_ext.tolist() == [-1, 1, -1]  # above any id (there is none): -1 + 1 + its index
    assert x.dev_ext.tolist() == [-1, 1]  # stream 3, as the flow's finish names it


def test_the_scan_keeps_only_flow_ends_with_integer_ids(tmp_path: Path) -> None:
    """An async_npu flow end is kept when its phase is "s" or "f" and its id, pid and tid are integers an
    int64 holds: a chunk of plain ones (the arrays' path) and one with every odd value (one at a time)."""
    good = [
        {"ph": "s", "id": 11, "pid": 1, "tid": 2, "ts": "1700000000000001.000"},
        {"ph": "f", "id": 11, "pid": 9, "tid": 3, "ts": "1700000000000002.500", "bp": "e"},
    ]
    odd = [
        {"ph": "s", "id": "12", "pid": 1, "tid": 2, "ts": "1700000000000003.000"},
        {"ph": "s", "id": True, "pid": 1, "tid": 2, "ts": "1700000000000003.000"},
        {"ph": "s", "id": 1 << 70, "pid": 1, "tid": 2, "ts": "1700000000000003.000"},
        {"ph": "s", "id": 2.0, "pid": 1, "tid": 2, "ts": "1700000000000003.000"},
        {"ph": "f", "id": 13, "pid": "9", "tid": 3, "ts": "1700000000000004.000"},
        {"ph": "t", "id": 14, "pid": 1, "tid": 2, "ts": "1700000000000005.000"},
        {"ph": "f", "id": -(1 << 63), "pid": 9, "tid": 3, "ts": "1700000000000006.000"},
    ]
    for name, events in (("plain", good), ("odd", good + odd)):
        trace = tmp_path / f"{name}.json"
        trace.write_text(json.dumps([{**e, "cat": "async_npu", "name": "torch_to_npu"} for e in events]))
        x, _meta, _end = scan.scan(trace)
        want = [e for e in events if e["ph"] in "sf" and all(type(e[k]) is int for k in ("id", "pid", "tid"))]
        want = [e for e in want if -(1 << 63) <= e["id"] < 1 << 63]
        assert np.asarray(x.fl_id).tolist() == [e["id"] for e in want]
        assert np.asarray(x.fl_start).tolist() == [int(e["ph"] == "s") for e in want]
        assert np.asarray(x.fl_pid).tolist() == [e["pid"] for e in want]
        assert np.asarray(x.fl_tid).tolist() == [e["tid"] for e in want]
        # string times are read after the base (10^12 µs steps below the first): µs with their decimals
        base = int(events[0]["ts"].split(".")[0]) // 10**12 * 10**12
        assert np.asarray(x.fl_ts).tolist() == [float(e["ts"]) - base for e in want]
