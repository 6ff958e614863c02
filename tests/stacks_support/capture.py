"""Test helper: a tiny CPU training loop under torch.profiler that writes real rank directories as
`npuprof run` lays them out, and makes the in-run exports at the end of each capture: the step's part
(npuprof.agent.capture_exports), then the post-processor's (npuprof.results.extras), here in one process.

Run as a script: python -m tests.stacks_support.capture OUT_DIR [--no-stack] [--no-memory]
    [--stacks METRIC ...] [--memory-format FMT ...]
Besides the rank-dir files it writes test references into each rank dir: ``ref_key_averages.json``
(torch's own self CPU time per operator), ``ref_torch_memory.json`` (torch's own export_memory_timeline
.json) and, with ``--torch-stacks``, ``ref_torch_stacks.txt`` (torch's own export_stacks, for which the
profiler is started with ``experimental_config=_ExperimentalConfig(verbose=True)``).
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from npuprof.agent.capture_exports import export_capture_extras
from npuprof.agent.memory_snapshot import TASK_KEY
from npuprof.results import layout
from npuprof.results.atomic import make_dir, write_json
from npuprof.results.extras import finish_exports
from npuprof.results.handover import ExportsJob


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--no-stack", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--stacks", nargs="*", default=[])
    parser.add_argument("--memory-format", nargs="*", default=[])
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--torch-stacks", action="store_true", help="also torch's own export_stacks")
    parser.add_argument("--steps", type=int, default=6)
    opts = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    worker = socket.gethostname()
    log_lines: list[str] = []

    def on_ready(prof: profile) -> None:
        rank_dir = make_dir(opts.out / layout.rank_dir_name(worker, os.getpid(), layout.timestamp_ms()))
        trace = rank_dir / layout.trace_file_name(worker, time.time_ns(), gzip=False)
        prof.export_chrome_trace(str(trace))
        if opts.gzip:
            import gzip

            Path(str(trace) + ".gz").write_bytes(gzip.compress(trace.read_bytes()))
            trace.unlink()
        config = {
            "record_shapes": not opts.no_memory,
            "profile_memory": not opts.no_memory,
            "with_stack": not opts.no_stack,
            "with_modules": False,
        }
        write_json(rank_dir / layout.info_file_name(0), {"config": {"common_config": config}, "rank_id": 0})
        averages = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
        write_json(rank_dir / "ref_key_averages.json", averages)
        if not opts.no_memory:
            prof.export_memory_timeline(str(rank_dir / "ref_torch_memory.json"), "cpu")
        if opts.torch_stacks:
            prof.export_stacks(str(rank_dir / "ref_torch_stacks.txt"), "self_cpu_time_total")
        exports = export_capture_extras(
            prof,
            rank_dir,
            stacks_metrics=opts.stacks,
            memory_formats=opts.memory_format,
            device="cpu",
            log=log_lines.append,
        )
        written = [p.name for p in exports.written]
        if exports.job is not None:
            task = exports.job.pop(TASK_KEY, None)  # the hand-over thread's part, here at once
            if task is not None:
                task.run(pause=False)
            job = ExportsJob(**exports.job)

            def say(message: str, level: str) -> None:
                if level != "INFO":
                    log_lines.append(message)

            written += finish_exports(rank_dir, trace, job, say)
        names = [str(rank_dir / name) for name in written if (rank_dir / name).exists()]
        write_json(rank_dir / "ref_exports.json", {"written": names, "log": log_lines})

    kwargs = {}
    if opts.torch_stacks:
        kwargs["experimental_config"] = torch._C._profiler._ExperimentalConfig(verbose=True)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=on_ready,
        record_shapes=not opts.no_memory,
        profile_memory=not opts.no_memory,
        with_stack=not opts.no_stack,
        **kwargs,
    ) as prof:
        for _ in range(opts.steps):
            x = torch.randn(32, 64)
            y = torch.randint(0, 10, (32,))
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            prof.step()


if __name__ == "__main__":
    main()
    gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
