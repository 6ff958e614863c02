"""A user's own torch.profiler, without npuprof: what torch writes, and what torch itself measured.

``python own_profiler.py OUT`` writes into OUT:
- ``tb/``: tensorboard_trace_handler's files of two workers (this process and a forked one, each
  ``schedule(wait=1, warmup=1, active=2, repeat=3)``), and ``facts_w{0,1}.json``: per capture torch's
  ``key_averages()`` (name -> [count, self µs, total µs]) and the ProfilerStep numbers it recorded, and
  each iteration's time by a timer around it (µs, ``prof.step()`` left out);
- ``labels.json``: a scheduled capture whose steps hold record_function ranges named like steps
  (``ProfilerStep#99`` with ``ProfilerStep#100`` inside), ``labels_facts.json`` its real step numbers;
- files that are not Chrome traces: ``stacks.txt`` (prof.export_stacks), ``et.json``
  (ExecutionTraceObserver), ``mem.json``, ``mem.raw.json.gz`` and ``mem.html`` (export_memory_timeline).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.profiler import (
    ExecutionTraceObserver,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)

OUT = Path(sys.argv[1])
MODEL = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
OPT = torch.optim.SGD(MODEL.parameters(), lr=0.01)


def iteration(rows: int = 8) -> None:
    loss = MODEL(torch.randn(rows, 16)).sum()  # aten::sum runs aten::sum.dim_IntList: same name, nested
    OPT.zero_grad()
    loss.backward()
    OPT.step()


def key_averages(prof: profile) -> dict[str, list[float]]:
    return {e.key: [e.count, e.self_cpu_time_total, e.cpu_time_total] for e in prof.key_averages()}


def worker(index: int) -> None:
    facts: list[dict] = []
    walls: list[float] = []
    handler = tensorboard_trace_handler(str(OUT / "tb"), worker_name=f"w{index}")

    def ready(prof: profile) -> None:
        handler(prof)
        facts.append({"steps": [prof.step_num - 2, prof.step_num - 1], "ops": key_averages(prof)})

    plan = schedule(wait=1, warmup=1, active=2, repeat=3)
    with profile(activities=[ProfilerActivity.CPU], schedule=plan, on_trace_ready=ready) as prof:
        for i in range(12):
            start = time.perf_counter()
            iteration(8 if i % 2 else 512)  # steps of different lengths
            walls.append((time.perf_counter() - start) * 1e6)
            prof.step()
    (OUT / "tb" / f"facts_w{index}.json").write_text(json.dumps({"captures": facts, "wall_us": walls}))


def labelled_steps() -> None:
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=5)) as prof:
        for _ in range(3):
            with record_function("ProfilerStep#99"), record_function("ProfilerStep#100"):
                iteration()
            with record_function("ProfilerStep#x"), record_function("ProfilerStep#"):
                iteration()
            prof.step()
    prof.export_chrome_trace(str(OUT / "labels.json"))
    (OUT / "labels_facts.json").write_text(json.dumps({"steps": [0, 1, 2, 3]}))


def not_traces() -> None:
    verbose = torch._C._profiler._ExperimentalConfig(verbose=True)  # export_stacks needs it
    with profile(
        activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True,
        experimental_config=verbose,
    ) as prof:  # fmt: skip
        iteration()
    prof.export_stacks(str(OUT / "stacks.txt"), "self_cpu_time_total")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # export_memory_timeline is deprecated
        for name in ("mem.json", "mem.raw.json.gz", "mem.html"):
            prof.export_memory_timeline(str(OUT / name))
    observer = ExecutionTraceObserver().register_callback(str(OUT / "et.json"))
    observer.start()
    iteration()
    observer.stop()
    observer.unregister_callback()


if __name__ == "__main__":
    (OUT / "tb").mkdir(parents=True)
    gc.freeze()  # the parent's objects (torch's) out of the forked worker's collections
    child = multiprocessing.get_context("fork").Process(target=worker, args=(1,))
    child.start()
    worker(0)
    child.join()
    if child.exitcode != 0:
        sys.exit(f"worker 1 exited with {child.exitcode}")
    labelled_steps()
    not_traces()
    os.sync()
    gc.freeze()  # skip the exit-time collection over torch's objects
