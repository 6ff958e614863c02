"""helper-221: a trace holding two processes' operators (traces merged into one, a DataLoader worker's
events beside the main process's): each process numbers its operators' External ids and its launches'
correlation ids on its own, so their ids meet, and a task is linked to an operator of the process that
launched it. Each answer is worked out here from the events."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from analyse_support.handmade import T0, mem, process_names, write_rank_dir, x
from analyse_support.handmade import kernel_on as _kernel
from analyse_support.handmade import launch_in as _launch

from npuprof.analysis import process_links
from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir
from npuprof.reports import stacks as st

A, B = 100, 200  # the two host processes; GPU 0 is A's (pid 0), GPU 1 B's (pid 1)


def _trace(with_mul: bool = True) -> dict:
    """A: aten::mm (ext 1) launches gemm (correlation 11, GPU 0, 200 µs), aten::relu (ext 2) relu_k (12,
    30 µs). B: aten::add (ext 1) launches add_k (11, GPU 1, 50 µs), aten::mul (ext 3) mul_k (13, GPU 1,
    10 µs). Both 11s launched before either kernel began: add_k is B's because B's mul_k, its correlation
    B's alone, ran on GPU 1 too; without mul_k nothing tells add_k's process."""
    events = process_names((A, "python3"), (B, "python3"), (0, "GPU 0"), (1, "GPU 1"))
    events += [
        x("ProfilerStep#1", "user_annotation", 0, 1000, pid=A, tid=A),
        x("aten::mm", "cpu_op", 10, 40, pid=A, tid=A, **{"External id": 1}),
        _launch(A, 20, 11, 1),
        x("aten::relu", "cpu_op", 60, 20, pid=A, tid=A, **{"External id": 2}),
        _launch(A, 65, 12, 2),
        x("aten::add", "cpu_op", 12, 15, pid=B, tid=B, **{"External id": 1}),
        _launch(B, 22, 11, 1),
        _kernel("gemm", 100, 200, 0, 11, 1),
        _kernel("relu_k", 320, 30, 0, 12, 2),
        _kernel("add_k", 120, 50, 1, 11, 1),
    ]
    if with_mul:
        events += [
            x("aten::mul", "cpu_op", 30, 10, pid=B, tid=B, **{"External id": 3}),
            _launch(B, 32, 13, 3),
            _kernel("mul_k", 200, 10, 1, 13, 3),
        ]
    return {"schemaVersion": 1, "traceEvents": events}


def _summary(tmp_path: Path, trace: dict) -> dict:
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, workers=1).status == "parsed"
    return json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).read_text())


def test_analyse_gives_each_process_its_own_tasks(tmp_path: Path) -> None:
    """gemm (A's) was counted as A's aten::mm's and B's add_k too (the first operator of External id 1):
    mm 250 µs of device time, aten::add 0."""
    summary = _summary(tmp_path / "a", _trace())
    device = {op["name"]: op["device_us"] for op in summary["operator_totals"]}
    assert device == {"aten::mm": 200.0, "aten::relu": 30.0, "aten::add": 50.0, "aten::mul": 10.0}
    assert not any("several processes" in w for w in summary.get("warnings", []))
    # nothing tells add_k's process: linked to no operator, and said
    summary = _summary(tmp_path / "b", _trace(with_mul=False))
    device = {op["name"]: op["device_us"] for op in summary["operator_totals"]}
    assert device == {"aten::mm": 200.0, "aten::relu": 30.0, "aten::add": 0.0}
    (said,) = [w for w in summary["warnings"] if "several processes" in w]
    assert said.startswith("1 device task(s) could have been launched by any of several processes"), said


def test_export_stacks_draws_each_task_under_its_own_process(tmp_path: Path) -> None:
    """gemm was drawn under B's aten::add (the last launch of correlation 11 in the file), A's aten::mm
    launching nothing."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace()))
    folded = st.folded_from_trace(path, metric="self_cuda_time_total")
    assert folded.integer_values() == {
        ("ProfilerStep", "aten::mm", "gemm"): 200,
        ("ProfilerStep", "aten::relu", "relu_k"): 30,
        ("aten::add", "add_k"): 50,
        ("aten::mul", "mul_k"): 10,
    }
    path.write_text(json.dumps(_trace(with_mul=False)))
    folded = st.folded_from_trace(path, metric="self_cuda_time_total")
    assert folded.integer_values()[(st.UNLINKED_FRAME, "add_k")] == 50
    assert ("ProfilerStep", "aten::mm", "gemm") in folded.integer_values()
    assert any(n.startswith("1 device task(s) could have been launched by any of") for n in folded.notes)


def test_a_launch_after_the_task_began_is_not_its_launch() -> None:
    """Correlation 7 launched by process 0 at 10 and process 1 at 50: the task starting at 20 is process
    0's, the one at 60 either's (no other task settles its device), one with no launch its operator's."""
    launches = {7: [(0, 10.0), (1, 50.0)]}
    tasks = [(7, 1, 20.0, "gpu0"), (7, 1, 60.0, "gpu9"), (None, 5, 1.0, "gpu0"), (None, 6, 1.0, "gpu0")]
    got = process_links.task_processes(tasks, launches, {5: {1}, 6: {0, 1}})
    assert got == [0, process_links.AMBIGUOUS, 1, 0]  # ext 6: both; GPU 0's settled tasks are process 0's


def _npu_trace() -> list[dict]:
    """torch_npu's form (a bare array, epoch string times), two processes' operators joined to their
    Ascend Hardware tasks by async_npu flows whose ids meet: A's aten::mm (flow 1) launches MmKernel (200
    µs, A's device); B's aten::add (flow 1 too) AddKernel (50 µs), B's aten::mul (flow 2, B's alone)
    MulKernel (10 µs) on B's device. Both flow 1s began before either task: AddKernel is B's, its device
    B's by MulKernel; nothing tells MmKernel's (A launched nothing else): linked to none, and said."""
    base = 1704161511420000

    def ev(name: str, ts: float, dur: float, pid: int, tid: int, **args: object) -> dict:
        return {
            "ph": "X",
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": f"{base + ts:.3f}",
            "dur": dur,
            "args": args,
        }

    def flow(ph: str, flow_id: int, pid: int, tid: int, ts: float) -> dict:
        return {"ph": ph, "cat": "async_npu", "name": "torch_to_npu", "id": flow_id, "pid": pid, "tid": tid,
                "ts": f"{base + ts:.3f}", "bp": "e"}  # fmt: skip

    a, b, dev_a, dev_b = 1000, 1001, 3000, 3001
    names = ((a, "Python"), (b, "Python"), (dev_a, "Ascend Hardware"), (dev_b, "Ascend Hardware"))
    events = [{"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": n}} for p, n in names]
    events += [
        {**ev("ProfilerStep#1", 0, 1000, a, 1), "cat": "cpu_op"},
        {**ev("aten::mm", 10, 40, a, 1), "cat": "cpu_op"},
        flow("s", 1, a, 1, 10),
        ev("MmKernel", 100, 200, dev_a, 2, **{"Task Type": "AI_CORE"}),
        flow("f", 1, dev_a, 2, 100),
        {**ev("aten::add", 12, 10, b, 5), "cat": "cpu_op"},
        flow("s", 1, b, 5, 12),
        ev("AddKernel", 120, 50, dev_b, 2, **{"Task Type": "AI_VECTOR_CORE"}),
        flow("f", 1, dev_b, 2, 120),
        {**ev("aten::mul", 30, 10, b, 5), "cat": "cpu_op"},
        flow("s", 2, b, 5, 30),
        ev("MulKernel", 200, 10, dev_b, 2, **{"Task Type": "AI_VECTOR_CORE"}),
        flow("f", 2, dev_b, 2, 200),
    ]
    return events


def test_torch_npu_launch_flows_of_two_processes(tmp_path: Path) -> None:
    """export-stacks took the id's last start: A's MmKernel drawn under B's aten::add. analyse paired each
    flow id's first start with its first finish: A's aten::mm with MmKernel (a guess: both flow 1s began
    before it, A launched nothing else), AddKernel, B's, linked to nothing (aten::add 0 µs of device
    time); it now resolves the id as export-stacks does (helper-225)."""
    trace = _npu_trace()
    summary = _summary(tmp_path / "a", trace)  # type: ignore[arg-type]
    device = {op["name"]: op["device_us"] for op in summary["operator_totals"]}
    assert device["aten::mul"] == 10.0
    # analyse joins each process's first start of a flow id to the first finish that is its own
    # (tests/test_launch_flows_rules.py, helper-225): AddKernel is B's, MmKernel linked to none, and said
    assert device["aten::add"] == 50.0
    assert device.get("aten::mm", 0.0) == 0.0
    said = "1 device task(s) could have been launched by any of several processes"
    assert any(w.startswith(said) for w in summary["warnings"]), summary["warnings"]
    # B's flow 1 begun after MmKernel did (at 110): MmKernel is A's, the only one started before it
    add_at, late_at = f"{1704161511420000 + 12:.3f}", f"{1704161511420000 + 110:.3f}"
    late = [{**e, "ts": late_at} if (e["pid"], e.get("ts")) == (1001, add_at) else e for e in trace]
    assert sum(e is not o for e, o in zip(late, trace, strict=True)) == 2  # aten::add and its flow start
    summary = _summary(tmp_path / "late", late)  # type: ignore[arg-type]
    device = {op["name"]: op["device_us"] for op in summary["operator_totals"]}
    assert (device["aten::mm"], device["aten::add"], device["aten::mul"]) == (200.0, 50.0, 10.0)
    assert not any("several processes" in w for w in summary.get("warnings", [])), summary["warnings"]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(trace))
    folded = st.folded_from_trace(path, metric="self_npu_time_total")
    assert folded.integer_values() == {
        (st.UNLINKED_FRAME, "MmKernel"): 200,
        ("aten::add", "AddKernel"): 50,
        ("aten::mul", "MulKernel"): 10,
    }
    assert any(n.startswith("1 device task(s) could have been launched by any of") for n in folded.notes)


def _flow_starts(tmp_path: Path, trace: dict) -> dict[str, int]:
    """The process of the async_npu flow start each device task of trace_view.json's is reached from."""
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, workers=1).status == "parsed"
    view = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    events = view["traceEvents"] if isinstance(view, dict) else view
    starts = {e["id"]: e["pid"] for e in events if e.get("cat") == "async_npu" and e["ph"] == "s"}
    tasks = {(e["pid"], e["ts"]): e["name"] for e in events if e.get("cat") == "kernel"}
    return {
        tasks[(e["pid"], e["ts"])]: starts[e["id"]]
        for e in events
        if e.get("cat") == "async_npu" and e["ph"] == "f"
    }


def test_trace_view_flows_start_at_the_task_own_process_operator(tmp_path: Path) -> None:
    """helper-225: npuprof's flows matched by External id alone, the first operator of the id: add_k's
    started at A's aten::mm; each starts at its own process's now, and add_k, any of both processes' when
    mul_k does not tell GPU 1's, has none."""
    assert _flow_starts(tmp_path / "a", _trace()) == {"gemm": A, "relu_k": A, "add_k": B, "mul_k": B}
    assert _flow_starts(tmp_path / "b", _trace(with_mul=False)) == {"gemm": A, "relu_k": A}


def test_a_block_is_freed_by_its_own_process_in_operator_memory(tmp_path: Path) -> None:
    """helper-247: two processes' blocks at one address (each process has its own address space; a forked
    worker has its parent's layout): A's aten::empty allocates 1000 bytes at 0xA at 5 and frees them at 30,
    B's aten::zeros 2000 bytes at 0xA at 10, freed at 40. operator_memory.csv paired B's allocation with A's
    free (20 µs) and left A's without a release."""

    def block(ts: float, nbytes: int, pid: int) -> dict:
        event = mem(ts, nbytes, 0, 0xA)
        event.update(pid=pid, tid=pid)
        event["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        return event

    changes = [(5, 1000, A), (10, 2000, B), (30, -1000, A), (40, -2000, B)]
    events = [
        x("ProfilerStep#1", "user_annotation", 0, 100, pid=A, tid=A),
        x("aten::empty", "cpu_op", 0, 20, pid=A, tid=A, **{"External id": 1}),
        x("aten::zeros", "cpu_op", 8, 4, pid=B, tid=B, **{"External id": 1}),
        *(block(ts, nbytes, pid) for ts, nbytes, pid in changes),
    ]
    rank_dir = write_rank_dir(tmp_path, {"schemaVersion": 1, "traceEvents": events})
    assert parse_rank_dir(rank_dir, workers=1).status == "parsed"
    expected = {}  # each allocation's release: the next free of its process
    for ts, nbytes, pid in changes:
        if nbytes > 0:
            freed = next(t for t, n, p in changes if p == pid and n == -nbytes)
            expected[{A: "aten::empty", B: "aten::zeros"}[pid]] = (T0 + ts, T0 + freed, float(freed - ts))
    with (rank_dir / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv").open(newline="") as f:
        rows = {
            r["Name"]: tuple(
                float(r[k] or "nan") for k in ("Allocation Time(us)", "Release Time(us)", "Duration(us)")
            )
            for r in csv.DictReader(f)
        }
    assert rows == expected
