"""Synthesise a realistic Kineto-style CUDA training trace of a given size (for benchmarks and tests).

The event mix follows what ``torch.profiler`` writes for a data-parallel CUDA job with record_shapes,
profile_memory and with_stack: ``ProfilerStep#N`` spans, ``python_function`` stacks, ``cpu_op`` operators,
``cuda_runtime`` launches linked to ``kernel`` events by ``ac2g`` flows, ``[memory]`` instants, a
``gpu_memcpy`` per step and an NCCL all-reduce per layer group (``record_param_comms`` + its kernel), written
in Kineto's own pretty-printed layout (about 330 bytes per event).
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

_HEADER = """{
  "schemaVersion": 1,
  "deviceProperties": [
    {
      "id": 0, "name": "NVIDIA Synthetic", "totalGlobalMem": 85031714816,
      "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "numSms": 132
    }
  ],
  "distributedInfo": {"backend": "nccl", "rank": %(rank)d, "world_size": %(world)d, "pg_count": 1, \
"pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": %(world)d, \
"ranks": %(ranks)s}]},
  "record_shapes": 1,
  "profile_memory": 1,
  "with_stack": 1,
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {
    "ph": "M", "name": "process_name", "ts": %(t0).3f, "pid": %(pid)d, "tid": 0,
    "args": {"name": "python3"}
  },
  {
    "ph": "M", "name": "process_name", "ts": %(t0).3f, "pid": 0, "tid": 0,
    "args": {"name": "GPU 0"}
  },
  {
    "ph": "M", "name": "process_labels", "ts": %(t0).3f, "pid": 0, "tid": 0,
    "args": {"labels": "GPU 0"}
  }"""

_X = """,
  {
    "ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d,
    "ts": %.3f, "dur": %.3f,
    "args": {
      %s
    }
  }"""

_FLOW = """,
  {
    "ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,
    "cat": "ac2g", "name": "ac2g"%s
  }"""

_MEM = """,
  {
    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
    "pid": %d, "tid": %d,
    "ts": %.3f,
    "args": {
      "Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Device Id": 0, "Device Type": 1, \
"Addr": %d, "Ev Idx": %d
    }
  }"""

_FOOTER = """
  ],
  "traceName": "synthetic.pt.trace.json"
}
"""

_OPS = [
    ("aten::linear", "aten::addmm", "sm90_xmma_gemm_f16f16_f32_tn_n_tilesize128x128x64"),
    ("aten::gelu", "aten::gelu", "void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernel>"),
    ("aten::layer_norm", "aten::native_layer_norm", "void at::native::vectorized_layer_norm_kernel<float>"),
    ("aten::add", "aten::add", "void at::native::elementwise_kernel<128, 2, AddFunctor<float>>"),
    ("aten::mul", "aten::mul", "void at::native::vectorized_elementwise_kernel<4, MulFunctor<float>>"),
]
_FRAMES = [
    "train.py(88): <module>",
    "train.py(61): train_step",
    "torch/nn/modules/module.py(1773): _call_impl",
    "model.py(40): forward",
    "torch/nn/modules/linear.py(125): forward",
]


def write_synthetic_trace(
    path: str | Path, size_mb: float, rank: int = 0, world: int = 2, seed: int = 0, step_start: int = 1
) -> dict[str, int]:
    """Write a trace of about ``size_mb`` MB (gzipped when the name ends in .gz); return what it holds."""
    rng = random.Random(seed + rank)
    path = Path(path)
    target = int(size_mb * 1e6)
    pid, tid, gpu_tid, nccl_tid = 4242, 4242, 7, 20
    t = 1_000_000.0 + rank * 37.0
    t_gpu = t
    ext = corr = ev_idx = flow = 0
    addr = 1 << 40
    allocated = 1 << 30
    counts = {"steps": 0, "kernels": 0, "cpu_ops": 0, "collectives": 0, "events": 3}
    gz = path.name.endswith(".gz")
    with gzip.open(path, "wt", compresslevel=1) if gz else open(path, "w") as out:
        out.write(_HEADER % {"rank": rank, "world": world, "ranks": list(range(world)), "t0": t, "pid": pid})
        written = 1000
        step = step_start
        while written < target:
            parts: list[str] = []
            step_t0 = t
            step_idx = len(parts)
            parts.append("")  # the step span, filled in at the end
            for layer in range(64):
                # python stack for this layer
                depth_t = t
                for depth, frame in enumerate(_FRAMES):
                    parts.append(
                        _X
                        % (
                            "python_function",
                            frame,
                            pid,
                            tid,
                            depth_t + depth * 0.2,
                            40.0 - depth,
                            f'"Python parent id": {ev_idx}, "Python id": {ev_idx + 1}, "Ev Idx": {ev_idx}',
                        )
                    )
                    ev_idx += 1
                op, inner, kernel = _OPS[layer % len(_OPS)]
                ext += 1
                dur = 20.0 + rng.random() * 10
                shapes = (
                    '"Input Dims": [[64, 1024], [1024, 1024], [1024]], "Input type": ["float", "float", '
                    '"float"], "Input Strides": [[1024, 1], [1024, 1], [1]], "Concrete Inputs": ["", "", ""]'
                )
                parts.append(
                    _X
                    % (
                        "cpu_op",
                        op,
                        pid,
                        tid,
                        t + 1,
                        dur,
                        f'"External id": {ext}, "Record function id": 0, "Sequence number": {ext}, '
                        f'"Fwd thread id": 0, {shapes}, "Ev Idx": {ev_idx}',
                    )
                )
                ext += 1
                parts.append(
                    _X
                    % (
                        "cpu_op",
                        inner,
                        pid,
                        tid,
                        t + 2,
                        dur - 3,
                        f'"External id": {ext}, "Record function id": 0, {shapes}, "Ev Idx": {ev_idx + 1}',
                    )
                )
                ev_idx += 2
                corr += 1
                flow += 1
                launch_t = t + 5
                parts.append(
                    _X
                    % (
                        "cuda_runtime",
                        "cudaLaunchKernel",
                        pid,
                        tid,
                        launch_t,
                        6.0,
                        f'"External id": {ext}, "cbid": 211, "correlation": {corr}',
                    )
                )
                t_gpu = max(t_gpu, launch_t + 8)
                kdur = 15.0 + rng.random() * 30
                parts.append(
                    _X
                    % (
                        "kernel",
                        kernel,
                        0,
                        gpu_tid,
                        t_gpu,
                        kdur,
                        f'"External id": {ext}, "device": 0, "stream": 7, "correlation": {corr}, '
                        f'"registers per thread": 128, "shared memory": 0, "blocks per SM": 2.5, '
                        f'"warps per SM": 10, "grid": [264, 1, 1], "block": [128, 1, 1], '
                        f'"est. achieved occupancy %": 25',
                    )
                )
                parts.append(_FLOW % ("s", corr, pid, tid, launch_t, ""))
                parts.append(_FLOW % ("f", corr, 0, gpu_tid, t_gpu, ', "bp": "e"'))
                t_gpu += kdur + 1
                size = 64 * 1024 * 4
                allocated += size
                parts.append(_MEM % (pid, tid, t + 3, 2 << 30, allocated, size, addr, ev_idx))
                parts.append(_MEM % (pid, tid, t + dur, 2 << 30, allocated - size, -size, addr, ev_idx + 1))
                allocated -= size
                ev_idx += 2
                addr += size
                counts["kernels"] += 1
                counts["cpu_ops"] += 2
                t += dur + 8
                if layer % 16 == 15:  # a bucket all-reduce
                    ext += 1
                    corr += 1
                    n = 4 * 1024 * 1024
                    parts.append(
                        _X
                        % (
                            "cpu_op",
                            "record_param_comms",
                            pid,
                            tid,
                            t,
                            12.0,
                            f'"External id": {ext}, "Record function id": 0, "Ev Idx": {ev_idx}, '
                            f'"Collective name": "allreduce", "In msg nelems": {n}, '
                            f'"Out msg nelems": {n}, "In split size": "[]", "Out split size": "[]", '
                            f'"Global rank start": 0, "Global rank stride": 1, "Group size": {world}, '
                            f'"Process Group Name": "0", "Process Group Description": "default_pg", '
                            f'"Process Group Ranks": "{list(range(world))}", "dtype": "Float", '
                            f'"Rank": {rank}',
                        )
                    )
                    ev_idx += 1
                    cdur = 300.0 + rng.random() * 100
                    cstart = max(t_gpu - 200.0, t + 10)
                    parts.append(
                        _X
                        % (
                            "kernel",
                            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                            0,
                            nccl_tid,
                            cstart,
                            cdur,
                            f'"External id": {ext}, "device": 0, "stream": 20, '
                            f'"correlation": {corr}, "grid": [2, 1, 1], "block": [640, 1, 1]',
                        )
                    )
                    counts["kernels"] += 1
                    counts["cpu_ops"] += 1
                    counts["collectives"] += 1
                    t += 15
            # one host-to-device copy per step
            corr += 1
            parts.append(
                _X
                % (
                    "gpu_memcpy",
                    "Memcpy HtoD (Pageable -> Device)",
                    0,
                    gpu_tid,
                    t_gpu,
                    12.0,
                    f'"device": 0, "stream": 7, "correlation": {corr}, "bytes": 1048576, '
                    f'"memory bandwidth (GB/s)": 11.2',
                )
            )
            t_gpu += 13
            t = max(t, t_gpu) + 50
            parts[step_idx] = _X % (
                "user_annotation",
                f"ProfilerStep#{step}",
                pid,
                tid,
                step_t0,
                t - step_t0 - 1,
                f'"External id": {ext + 1}, "Record function id": 0, "Ev Idx": {ev_idx}',
            )
            ext += 1
            counts["steps"] += 1
            counts["events"] += len(parts)
            text = "".join(parts)
            out.write(text)
            written += len(text)
            step += 1
        out.write(_FOOTER)
    return counts
