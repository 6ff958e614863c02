"""helper-225: the step a device task is counted in, in a trace holding two processes whose correlation ids
meet (traces merged into one): the time of its own process's runtime call of its correlation id, not of the
id's first call in any process (docs/formats.md, kernel_details.csv). Answers worked out from the events."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

from analyse_support.handmade import T0, process_names, write_rank_dir, x
from analyse_support.handmade import kernel_on as _kernel
from analyse_support.handmade import launch_in as _launch

from npuprof.analysis import communication, scan
from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir

A, B = 100, 200  # the two host processes; GPU 0 is A's (pid 0), GPU 1 B's (pid 1)


def _trace() -> dict:
    """A's steps: 1 [0, 100), 2 [100, 200), 3 [200, 400). B (first in the file): aten::add (ext 1) calls
    correlation 5 at 12 (step 1's time): add_k on GPU 1 at 30. A: aten::mm (ext 1) calls 5 at 155 (step 2):
    gemm on GPU 0 at 210 (step 3's time); aten::relu (ext 2) calls 6 at 178: relu_k on GPU 0 at 320. Both
    5s were called before gemm began; GPU 0 is A's by relu_k: gemm is A's, launched in step 2 (the id's
    first call, B's, put it in step 1); add_k is B's (only B's call came before it): step 1."""
    events = process_names((A, "python3"), (B, "python3"), (0, "GPU 0"), (1, "GPU 1"))
    events += [
        x("aten::add", "cpu_op", 10, 10, pid=B, tid=B, **{"External id": 1}),
        _launch(B, 12, 5, 1),
        _kernel("add_k", 30, 50, 1, 5, 1),
        x("ProfilerStep#1", "user_annotation", 0, 100, pid=A, tid=A),
        x("ProfilerStep#2", "user_annotation", 100, 100, pid=A, tid=A),
        x("ProfilerStep#3", "user_annotation", 200, 200, pid=A, tid=A),
        x("aten::mm", "cpu_op", 150, 20, pid=A, tid=A, **{"External id": 1}),
        _launch(A, 155, 5, 1),
        x("aten::relu", "cpu_op", 175, 10, pid=A, tid=A, **{"External id": 2}),
        _launch(A, 178, 6, 2),
        _kernel("gemm", 210, 100, 0, 5, 1),
        _kernel("relu_k", 320, 30, 0, 6, 2),
    ]
    return {"schemaVersion": 1, "traceEvents": events}


def test_a_task_is_in_the_step_of_its_own_process_call(tmp_path: Path) -> None:
    """kernel_details' Step Id (by the launch's time, tables._device_kernels): gemm was step 1's."""
    rank_dir = write_rank_dir(tmp_path, _trace())
    assert parse_rank_dir(rank_dir, workers=1).status == "parsed"
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    summary = json.loads((out / SUMMARY_FILE).read_text())
    device = {op["name"]: op["device_us"] for op in summary["operator_totals"]}
    assert device == {"aten::mm": 100.0, "aten::relu": 30.0, "aten::add": 50.0}
    with (out / "kernel_details.csv").open(newline="") as f:
        steps = {row["Name"]: row["Step Id"] for row in csv.DictReader(f)}
    assert steps == {"add_k": "1", "gemm": "2", "relu_k": "2"}


def _comm_trace() -> dict:
    """A's all_reduce (record_param_comms, External id 5) launches ncclKernel (correlation 21, GPU 0, 300 µs
    at 100); B's aten::add (External id 5 too: B numbers its own) launches add_k (correlation 30, B's
    alone, GPU 1, 50 µs at 500), the id's last task in the file. The all_reduce's device time is
    ncclKernel's: add_k is B's (only B called 30)."""
    events = process_names((A, "python3"), (B, "python3"), (0, "GPU 0"), (1, "GPU 1"))
    comm = {"External id": 5, "Collective name": "allreduce", "In msg nelems": 1024, "dtype": "Float"}
    events += [
        x("ProfilerStep#1", "user_annotation", 0, 1000, pid=A, tid=A),
        x("record_param_comms", "cpu_op", 10, 20, pid=A, tid=A, **comm),
        _launch(A, 15, 21, 5),
        x("aten::add", "cpu_op", 40, 10, pid=B, tid=B, **{"External id": 5}),
        _launch(B, 42, 30, 5),
        _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 100, 300, 0, 21, 5),
        _kernel("add_k", 500, 50, 1, 30, 5),
    ]
    return {"schemaVersion": 1, "traceEvents": events}


def test_a_collective_takes_its_own_process_task(tmp_path: Path) -> None:
    """communication._device_tasks took the id's last task, B's add_k: the all_reduce 50 µs at 500."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(_comm_trace()))
    extract, meta, _end = scan.scan(trace)
    (op,) = communication.collect(extract, meta)
    assert (op.name, op.ts, op.dur, op.corr) == ("allreduce", T0 + 100, 300.0, 21)


def test_the_db_takes_each_task_launch_from_its_own_process(tmp_path: Path) -> None:
    """The db's CANN_API launch of each task (joined to it by connectionId, as msprof-analyze's free_analysis
    reads it) is its own process's call of its correlation id: gemm's is A's at 155, not B's at 12, the
    id's first call in the file (helper-247)."""
    rank_dir = write_rank_dir(tmp_path, _trace())
    assert parse_rank_dir(rank_dir, workers=1, export_db=True).status == "parsed"
    con = sqlite3.connect(rank_dir / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")
    strings = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    launches = con.execute(
        "SELECT i.name, c.startNs, c.globalTid FROM TASK t JOIN COMPUTE_TASK_INFO i USING (globalTaskId) "
        "JOIN CANN_API c ON c.connectionId = t.connectionId WHERE c.type = 10000"
    ).fetchall()
    got = {strings[name]: (start, tid) for name, start, tid in launches}

    def call(pid: int, ts: float) -> tuple[int, int]:  # launch_in's call: on thread pid of process pid
        return round((T0 + ts) * 1000), (pid << 32) | pid

    assert got == {"add_k": call(B, 12), "gemm": call(A, 155), "relu_k": call(A, 178)}
