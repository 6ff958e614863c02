"""helper-212: CUDA traces built by hand (torch 2.x and torch 1.8-1.10 forms), each answer computed here from
the events, never read back from npuprof's code."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from analyse_support.handmade import write_rank_dir, x

from npuprof.analysis.parse import parse_rank_dir


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _task(name: str, ts: float, dur: float, device: int, stream: int, old: bool) -> dict:
    cat, tid = ("Kernel", f"stream {stream}") if old else ("kernel", stream)
    return x(name, cat, ts, dur, pid=device, tid=tid, device=device, stream=stream)


@pytest.mark.parametrize("old", [False, True], ids=["torch2", "torch1.8"])
def test_a_stream_of_two_devices_waits_on_its_own_device(tmp_path: Path, old: bool) -> None:
    """Each GPU's default stream is "stream 7": one process driving two GPUs has a stream 7 on each, and a
    task waits since the end of its own device's stream's last task (the Wait Time of kernel_b was taken
    from GPU 1's task: 100 µs where GPU 0's stream 7 sat idle 400)."""
    step = x("ProfilerStep#1", "Operator" if old else "user_annotation", 0, 1000)
    events = [
        step,
        _task("kernel_a", 100, 100, 0, 7, old),  # GPU 0, stream 7: [100, 200)
        _task("gpu1_k", 300, 200, 1, 7, old),  # GPU 1, stream 7: [300, 500), its stream's first
        _task("kernel_b", 600, 100, 0, 7, old),  # GPU 0, stream 7 idle since 200: waits 400
    ]
    rank_dir = write_rank_dir(tmp_path, {"schemaVersion": 1, "traceEvents": events})
    assert parse_rank_dir(rank_dir).status == "parsed"
    rows = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    waits = {r["Name"]: float(r["Wait Time(us)"]) for r in rows}
    assert waits == {"kernel_a": 0.0, "gpu1_k": 0.0, "kernel_b": 400.0}


def test_a_kernel_is_in_the_step_that_launched_it_in_the_table_and_the_report(tmp_path: Path) -> None:
    """helper-247: kernel_details.csv put a task in the step of its runtime launch (torch_npu's rule, a step
    holding the device work it launched: docs/formats.md), the report's top kernels in the step of its own
    start. gemm, launched at 85 in step 1 [0, 100), runs at [150, 190) in step 2's window; relu_k is
    launched and runs in step 2; copy_k has no launch in the trace: its own start (130) gives step 2."""
    launch = "cuda_runtime"
    events = [
        x("ProfilerStep#1", "user_annotation", 0, 100),
        x("ProfilerStep#2", "user_annotation", 100, 100),
        x("aten::mm", "cpu_op", 80, 10, **{"External id": 1}),
        x("cudaLaunchKernel", launch, 85, 3, correlation=3, **{"External id": 1}),
        x("aten::relu", "cpu_op", 110, 10, **{"External id": 2}),
        x("cudaLaunchKernel", launch, 112, 3, correlation=4, **{"External id": 2}),
        x("gemm", "kernel", 150, 40, pid=0, tid=7, device=0, stream=7, correlation=3, **{"External id": 1}),
        x("relu_k", "kernel", 190, 5, pid=0, tid=7, device=0, stream=7, correlation=4, **{"External id": 2}),
        x("copy_k", "kernel", 130, 10, pid=0, tid=8, device=0, stream=8, correlation=9),
    ]
    expected = {("gemm", 1), ("relu_k", 2), ("copy_k", 2)}
    rank_dir = write_rank_dir(tmp_path, {"schemaVersion": 1, "traceEvents": events})
    assert parse_rank_dir(rank_dir).status == "parsed"
    rows = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert {(r["Name"], int(r["Step Id"])) for r in rows} == expected
    from npuprof.analysis.report import build_report

    for step in (1, 2):
        (rank,) = build_report(rank_dir, steps=(step, step), jobs=1).ranks
        assert {(k.name, step) for k in rank.top_kernels} == {e for e in expected if e[1] == step}
