"""Test helper: a small hand-written Kineto-style CUDA trace (no GPU here), with the links torch writes:
runtime calls and kernels sharing ``args.correlation``, and ``ac2g`` flows from the call to the kernel."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

PID, TID, GPU, STREAM = 4242, 4242, 0, 7

# (name, start, dur, correlation, launching op) of device work
KERNELS = [
    ("sm80_gemm_kernel<float>", 400.0, 300.0, 11, "aten::mm"),
    ("vectorized_elementwise_kernel<add>", 720.0, 50.0, 12, "aten::add"),
    ("Memcpy HtoD (Pageable -> Device)", 760.0, 25.5, 13, "aten::copy_"),
]
UNLINKED = ("orphan_kernel", 900.0, 10.0)
EXPECTED_DEVICE_TOTAL = sum(k[2] for k in KERNELS) + UNLINKED[2]


def events(with_correlation: bool = True, with_flows: bool = True) -> list[dict]:
    def x(cat, name, ts, dur, pid=PID, tid=TID, **args):
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "args": args,
        }

    evs: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": GPU, "tid": 0, "args": {"name": "GPU 0"}},
        x("python_function", "train.py(10): <module>", 0.0, 1000.0),
        x("python_function", "train.py(5): step", 50.0, 500.0),
        x("cpu_op", "aten::mm", 100.0, 200.0, **{"External id": 1}),
        x("cpu_op", "aten::add", 330.0, 60.0, **{"External id": 2}),
        x("cpu_op", "aten::copy_", 400.0, 100.0, **{"External id": 3}),
        x("user_annotation", "ProfilerStep#1", 40.0, 900.0),
        x("gpu_user_annotation", "ProfilerStep#1", 390.0, 600.0, pid=GPU, tid=STREAM),
    ]
    launch = {"aten::mm": 150.0, "aten::add": 350.0, "aten::copy_": 420.0}
    for name, ts, dur, corr, op in KERNELS:
        runtime = "cudaMemcpyAsync" if name.startswith("Memcpy") else "cudaLaunchKernel"
        ext = {"aten::mm": 1, "aten::add": 2, "aten::copy_": 3}[op]
        evs.append(x("cuda_runtime", runtime, launch[op], 20.0, correlation=corr, **{"External id": ext}))
        cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
        kargs = {"device": GPU, "stream": STREAM, "External id": ext}
        if with_correlation:
            kargs["correlation"] = corr
        evs.append(x(cat, name, ts, dur, pid=GPU, tid=STREAM, **kargs))
        if with_flows:
            evs.append(
                {
                    "ph": "s",
                    "id": corr,
                    "pid": PID,
                    "tid": TID,
                    "ts": launch[op],
                    "cat": "ac2g",
                    "name": "ac2g",
                }
            )
            evs.append(
                {
                    "ph": "f",
                    "id": corr,
                    "pid": GPU,
                    "tid": STREAM,
                    "ts": ts,
                    "cat": "ac2g",
                    "name": "ac2g",
                    "bp": "e",
                }
            )
    evs.append(x("kernel", UNLINKED[0], UNLINKED[1], UNLINKED[2], pid=GPU, tid=STREAM, device=GPU))
    return evs


def write(path: Path, **kwargs: bool) -> Path:
    data = json.dumps({"schemaVersion": 1, "traceEvents": events(**kwargs)}).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path
