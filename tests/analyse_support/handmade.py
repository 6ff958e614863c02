"""Small hand-made Kineto traces whose tables are known to the microsecond."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

PID = 100
T0 = 1_000_000.0  # all times below are offsets from T0 (µs)


def x(name: str, cat: str, ts: float, dur: float, pid: Any = PID, tid: Any = PID, **args: Any) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": T0 + ts,
        "dur": dur,
        "args": args,
    }


def kernel_on(name: str, ts: float, dur: float, gpu: int, corr: int, ext: int) -> dict:
    """A CUDA kernel on GPU ``gpu`` (its process id ``gpu``, stream 7), linked by ``corr`` / ``ext``."""
    args = {"correlation": corr, "stream": 7, "device": gpu, "External id": ext}
    return x(name, "kernel", ts, dur, pid=gpu, tid=7, **args)


def process_names(*named: tuple[int, str]) -> list[dict]:
    """The process_name metadata events of (pid, name) pairs, as Kineto writes them."""
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
        for pid, name in named
    ]


def launch_in(pid: int, ts: float, corr: int, ext: int) -> dict:
    """A 5 µs cudaLaunchKernel of host process ``pid`` (on its thread ``pid``) of correlation ``corr``."""
    return x(
        "cudaLaunchKernel", "cuda_runtime", ts, 5, pid=pid, tid=pid, correlation=corr, **{"External id": ext}
    )


def mem(ts: float, nbytes: int, allocated: int, addr: int) -> dict:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": PID,
        "tid": PID,
        "ts": T0 + ts,
        "args": {
            "Total Reserved": 4 << 20,
            "Total Allocated": allocated,
            "Bytes": nbytes,
            "Device Id": 0,
            "Device Type": 1,
            "Addr": addr,
        },
    }


def cuda_trace(rank: int = 0) -> dict:
    """Two steps on a CUDA-like device.

    step 1 [0, 1000): kernels [100, 300) and [250, 400) -> computing 300; NCCL all-reduce [350, 600) ->
      communication 250, not overlapped 200, overlapped 50; free 500; preparing 100.
    step 2 [1000, 2000): kernel [1100, 1200); NCCL receive [1300, 1500) -> computing 100, communication 200,
      not overlapped 200, bubble 200, stage 800, exclude-receive 0, free 700, preparing 100.
    Operators: aten::linear [10, 110) holds aten::addmm [20, 60) (self 60 and 40); addmm launched both
    step-1 compute kernels (ext 2): device self 350 for addmm, device total 350 for linear.
    Memory: 4096 B allocated at 25 (inside addmm), freed at 50.
    """
    ev = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        x("ProfilerStep#1", "user_annotation", 0, 1000),
        x("ProfilerStep#2", "user_annotation", 1000, 1000),
        x("aten::linear", "cpu_op", 10, 100, **{"External id": 1, "Input Dims": [[8, 4], [4, 4]]}),
        x("aten::addmm", "cpu_op", 20, 40, **{"External id": 2, "Input Dims": [[4], [8, 4], [4, 4]]}),
        x(
            "record_param_comms",
            "cpu_op",
            300,
            10,
            **{
                "External id": 3,
                "Collective name": "allreduce",
                "In msg nelems": 1024,
                "Out msg nelems": 1024,
                "dtype": "Float",
                "Process Group Name": "0",
                "Group size": 2,
                "Process Group Ranks": "[0, 1]",
            },
        ),
        x(
            "record_param_comms",
            "cpu_op",
            1250,
            10,
            **{
                "External id": 4,
                "Collective name": "recv",
                "In msg nelems": 256,
                "dtype": "BFloat16",
                "Process Group Name": "1",
                "Group size": 2,
                "Process Group Ranks": "[0, 1]",
            },
        ),
        x("aten::mul", "cpu_op", 1050, 20, **{"External id": 5}),
        x("cudaLaunchKernel", "cuda_runtime", 30, 5, correlation=11, **{"External id": 2}),
        x("cudaLaunchKernel", "cuda_runtime", 40, 5, correlation=12, **{"External id": 2}),
        x(
            "kernel_a",
            "kernel",
            100,
            200,
            pid=0,
            tid=7,
            correlation=11,
            stream=7,
            device=0,
            grid=[4, 2, 1],
            **{"External id": 2},
        ),
        x(
            "kernel_b",
            "kernel",
            250,
            150,
            pid=0,
            tid=8,
            correlation=12,
            stream=8,
            device=0,
            grid=[2, 1, 1],
            **{"External id": 2},
        ),
        x(
            "ncclDevKernel_AllReduce_Sum_f32",
            "kernel",
            350,
            250,
            pid=0,
            tid=20,
            correlation=13,
            stream=20,
            device=0,
            **{"External id": 3},
        ),
        x(
            "kernel_c",
            "kernel",
            1100,
            100,
            pid=0,
            tid=7,
            correlation=14,
            stream=7,
            device=0,
            **{"External id": 5},
        ),
        x(
            "ncclDevKernel_SendRecv",
            "kernel",
            1300,
            200,
            pid=0,
            tid=20,
            correlation=15,
            stream=20,
            device=0,
            **{"External id": 4},
        ),
        mem(25, 4096, 8192, 0xA0),
        mem(50, -4096, 4096, 0xA0),
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "fake"}],
        "distributedInfo": {
            "backend": "nccl",
            "rank": rank,
            "world_size": 2,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1]}],
        },
        "traceEvents": ev,
        "traceName": "handmade",
    }


def with_steps(trace: dict, durations: dict[int, int]) -> dict:
    """``trace`` (cpu_trace's) with its one step replaced by one step of each number in ``durations`` lasting
    its µs, one after the other from the first's start."""
    (template,) = [e for e in trace["traceEvents"] if e.get("name") == "ProfilerStep#7"]
    trace["traceEvents"].remove(template)
    ts = template["ts"]
    for step, dur in durations.items():
        trace["traceEvents"].append({**template, "name": f"ProfilerStep#{step}", "ts": ts, "dur": dur})
        ts += dur
    return trace


def cpu_trace() -> dict:
    """CPU only, one step [0, 1000): main-thread ops [100, 300) and [500, 600) (computing 300, the nested
    op adds nothing); a gloo all_reduce on a worker thread [250, 550) -> communication 300, overlapped
    100 ([250, 300) and [500, 550)), not overlapped 200; free 500; preparing 100."""
    ev = [
        x("ProfilerStep#7", "user_annotation", 0, 1000),
        x("aten::mm", "cpu_op", 100, 200, **{"External id": 1}),
        x("aten::empty", "cpu_op", 120, 10, **{"External id": 2}),
        x("aten::add", "cpu_op", 500, 100, **{"External id": 3}),
        x(
            "gloo:all_reduce",
            "user_annotation",
            250,
            300,
            tid=101,
            **{"Input Dims": [[256]], "Input type": ["float"]},
        ),
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2},
        "traceEvents": ev,
    }


def write_rank_dir(
    root: Path,
    trace: dict,
    rank: int | None = 0,
    name: str = "host_1_20250101000000000",
    gz: bool = False,
    compact: bool = False,
) -> Path:
    rank_dir = root / f"{name}_ascend_pt"
    rank_dir.mkdir(parents=True)
    info = "profiler_info.json" if rank is None else f"profiler_info_{rank}.json"
    (rank_dir / info).write_text(json.dumps({"config": {}}, indent=4))
    text = json.dumps(trace, separators=(",", ":") if compact else None, indent=None if compact else 2)
    path = rank_dir / ("host.1.pt.trace.json" + (".gz" if gz else ""))
    if gz:
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return rank_dir
