"""What ``--msprof-tx``'s communication ranges cost inside a capture: a training job that calls a collective
every step (gloo, a world of one process: the step's gradients all-reduced at once, as a DDP bucket), the
recorded steps with ``--msprof-tx`` against the same steps without it. Budget (issue 13): <= x1.02 of the
per-step time.

    .venv/bin/python bench/marks_capture.py            # ~2 min on 2 cores
    .venv/bin/python bench/marks_capture.py --quick    # seconds: checks it runs, figures meaningless

Two measures, in the same run:

- **in process** (the one this machine resolves): one process, one torch.profiler capture holding every
  step (CPU activity, as npuprof's), blocks of steps calling ``torch.distributed.all_reduce`` wrapped by
  ``--msprof-tx`` (agent/comm_marks.py: each call kept as a ``comm:`` range in memory, as in an npuprof
  capture on torch.profiler, for npuprof_comm_ranges.json) and blocks calling the function itself (what
  runs without ``--msprof-tx``: nothing is wrapped then), alternating step by step with a third arm, for
  scale: the wrapper making each range a ``record_function`` span (what npuprof did before
  npuprof_comm_ranges.json, and still does under a profiler of the script's own). The arms' order runs
  through the 6 permutations (neighbouring steps share the machine's state of the moment), each step timed
  by the thread's CPU time; the median of the rounds' ratios to the bare step (and of the differences).
- **end to end**: ``npuprof run`` of the job with and without ``--msprof-tx``, same schedule, runs
  interleaved; each run's median step over the recorded steps but the first and the last; the median of
  the paired ratios. Separate processes differ by up to ±10% here (bench/README.md), so this row cannot
  resolve 2%.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    MODELS,
    PYTHON,
    bench_env,
    interleaved,
    median,
    npuprof_run,
    paired_diff,
    paired_ratio,
    print_table,
    run,
    verdict,
)

BUDGET = 1.02
SKIP_FIRST, WARMUP = 5, 1  # end to end: recorded steps are SKIP_FIRST + WARMUP .. + active - 1


def _step_fn(model_name: str) -> Any:
    """A training step of the bench's MLP whose gradients are all-reduced at once (one collective)."""
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.manual_seed(0)
    width, batch = MODELS[model_name]
    model = nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
    )
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    inputs, targets = torch.randn(batch, width), torch.randint(0, 10, (batch,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(inputs), targets).backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params])  # type: ignore[union-attr]
        dist.all_reduce(flat)  # looked up at each call: the in-process measure swaps it
        optimizer.step()

    return step


def _init_world(rendezvous: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=0, world_size=1)


def job(argv: list[str]) -> int:
    """``python bench/marks_capture.py job --out F --model M --steps N [--in-process BLOCK,ROUNDS]``."""
    parser = argparse.ArgumentParser(prog="marks_capture job")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", choices=sorted(MODELS), default="1ms")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--in-process", default=None, help="BLOCK,ROUNDS: the in-process measure")
    args = parser.parse_args(argv)
    import torch.distributed as dist

    with tempfile.TemporaryDirectory() as tmp:
        _init_world(os.path.join(tmp, "store"))
        step = _step_fn(args.model)
        if args.in_process:
            block, rounds = (int(x) for x in args.in_process.split(","))
            result = _in_process(step, block, rounds)
        else:
            cpu, wall = [], []
            for _ in range(args.steps):
                w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                step()
                cpu.append(time.thread_time_ns() - c0)
                wall.append(time.perf_counter_ns() - w0)
            result = {"cpu_ns": cpu, "wall_ns": wall}
        dist.destroy_process_group()
    args.out.write_text(json.dumps(result))
    return 0


ORDERS = list(itertools.permutations(("wrapped", "bare", "spans")))


def _in_process(step: Any, block: int, rounds: int) -> dict[str, Any]:
    """Blocks of ``block`` steps of each arm, ``rounds`` times, in one torch.profiler capture."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from npuprof import marks
    from npuprof.agent import comm_marks

    class Log:
        def info(self, message: str) -> None:
            pass

    marks.use_backend("torch-cpu")
    bare = dist.all_reduce
    comm_marks.set_enabled(True)  # as a capture with --msprof-tx sets it
    comm_marks.install(Log())
    wrapped = dist.all_reduce
    assert wrapped is not bare and getattr(wrapped, comm_marks.WRAPPED, False)
    # per round, the median step of a block of each (their order alternating ABBA)
    per_round: dict[str, list[float]] = {"bare": [], "wrapped": [], "spans": []}
    comm_marks.start_collecting()  # as an npuprof capture begins (agent/capture_annotations.py)
    collector = comm_marks._collector
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(block):  # warm-up, not timed
            step()
        for round_no in range(rounds):
            for name in ORDERS[round_no % len(ORDERS)]:
                dist.all_reduce = bare if name == "bare" else wrapped
                # no collector: the wrapper opens a record_function span instead
                comm_marks._collector = None if name == "spans" else collector
                times = []
                for _ in range(block):
                    c0 = time.thread_time_ns()
                    step()
                    times.append(time.thread_time_ns() - c0)
                per_round[name].append(statistics.median(times))
    dist.all_reduce = bare
    comm_marks._collector = collector
    record = comm_marks.stop_collecting()
    assert record is not None
    spans = sum(e.count for e in prof.key_averages() if e.key.startswith(comm_marks.PREFIX))
    return {**per_round, "ranges": len(record["ranges"]) + record["dropped"], "spans_recorded": spans}


def _worker(out: Path, model: str, steps: int, in_process: str | None = None) -> list[str]:
    cmd = [PYTHON, str(Path(__file__).resolve()), "job", "--out", str(out), "--model", model]
    cmd += ["--steps", str(steps)]
    return cmd + (["--in-process", in_process] if in_process else [])


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the bench runs, nothing more"
    )
    args = parser.parse_args()
    block, rounds = (1, 6) if args.quick else (1, 402)
    active = 6 if args.quick else 40
    repeats = 1 if args.quick else 4
    env = bench_env()
    rows: list[list[str]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_text:
        tmp = Path(tmp_text)
        for model in ("1ms", "10ms"):
            out = tmp / f"in-process-{model}.json"
            run(_worker(out, model, 0, f"{block},{rounds}"), env=env)
            found = json.loads(out.read_text())
            bare = median(found["bare"])
            for arm, what, judged in (
                ("wrapped", "--msprof-tx's wrapper", True),
                ("spans", "(for scale) the wrapper making record_function spans", False),
            ):
                ratio = paired_ratio(found[arm], found["bare"])
                added = paired_diff(found[arm], found["bare"])
                rows.append(
                    [
                        f"recorded steps, a collective each, {model} model: {what} vs the bare function "
                        f"(in process, {rounds} rounds, thread CPU)",
                        f"bare {_ms(bare)}",
                        _ms(median(found[arm])),
                        f"x{ratio:.3f} ({added / 1000:+.1f} µs a step)",
                        f"<= x{BUDGET:g}" if judged else "-",
                        verdict(ratio, BUDGET) if judged else "-",
                    ]
                )
            notes.append(
                f"{model} in process: {found['ranges']} comm: ranges kept in memory, "
                f"{found['spans_recorded']} as spans"
            )

        steps = SKIP_FIRST + WARMUP + active + 2
        kept = slice(SKIP_FIRST + WARMUP + 1, SKIP_FIRST + WARMUP + active - 1)
        flags = ["--no-analyse", "--skip-first", str(SKIP_FIRST), "--warmup", str(WARMUP)]
        flags += ["--active", str(active)]
        results: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}

        def variant(name: str, extra: list[str]) -> Any:
            def go(round_no: int) -> float:
                out = tmp / f"{name}-{round_no}.json"
                where = ["-o", str(tmp / f"{name}-{round_no}")]
                run(npuprof_run([*where, *flags, *extra], _worker(out, "1ms", steps)), env=env)
                found = json.loads(out.read_text())
                cpu, wall = median(found["cpu_ns"][kept]), median(found["wall_ns"][kept])
                results[name].append((cpu, wall))
                return cpu

            return go

        interleaved({"without": variant("without", []), "with": variant("with", ["--msprof-tx"])}, repeats)
        cpu_ratio = paired_ratio([c for c, _ in results["with"]], [c for c, _ in results["without"]])
        wall_ratio = paired_ratio([w for _, w in results["with"]], [w for _, w in results["without"]])
        rows.append(
            [
                "recorded steps, a collective each, 1ms model: npuprof run --msprof-tx vs without "
                f"(end to end, {repeats} pairs, thread CPU)",
                f"without {_ms(median([c for c, _ in results['without']]))}",
                _ms(median([c for c, _ in results["with"]])),
                f"x{cpu_ratio:.3f} (wall x{wall_ratio:.3f})",
                f"<= x{BUDGET:g}",
                verdict(cpu_ratio, BUDGET),
            ]
        )
    print_table(
        f"--msprof-tx inside a capture (load {os.getloadavg()[0]:.1f})",
        ["what", "baseline (same run)", "npuprof", "ratio", "budget", "verdict"],
        rows,
        notes=[*notes, *(["--quick: figures meaningless"] if args.quick else [])],
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["job"]:
        sys.exit(job(sys.argv[2:]))
    sys.exit(main())
