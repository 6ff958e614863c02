"""Shared helpers of the benches: environments, paired runs, medians, one table, and the training worker.

The worker (``python bench/_common.py worker ...``) is the small CPU training loop every bench runs, bare,
under `npuprof run`, or with the same schedule written by hand with torch.profiler. It times every step
(zero_grad, forward, backward, optimizer.step: a capture ends inside optimizer.step, in npuprof's step hook
or in the hand-written ``prof.step()`` right after it), by the wall clock and by the thread's CPU time, and
writes the times and its RSS as JSON. On a shared machine the CPU time is the steady measure: it does not
count the moments another process held the core.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# one step ~1 ms and ~10 ms on a 2-core CPU machine (width, batch)
MODELS = {"1ms": (256, 64), "10ms": (512, 160)}


# ---- environments and commands -------------------------------------------------------------------------
def bench_env(**extra: str) -> dict[str, str]:
    """The environment every run gets: no npuprof settings inherited, one OpenMP thread (2 cores: a second
    thread would fight the background post-processing and the other run for the CPU)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NPUPROF_", "PROF_CONFIG_PATH", "MSMONITOR"))
    }
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    pythonpath = [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    env.update(extra)
    return env


def npuprof_launcher() -> list[str]:
    """How a user starts npuprof: the console script beside this Python, else ``python -m npuprof``."""
    script = Path(PYTHON).with_name("npuprof")
    return [str(script)] if script.exists() else [PYTHON, "-m", "npuprof"]


def npuprof_run(flags: Sequence[str], command: Sequence[str]) -> list[str]:
    return [*npuprof_launcher(), "run", *flags, "--", *command]


def worker_cmd(
    out: Path,
    model: str,
    steps: int,
    hand: str | None = None,
    export_dir: Path | None = None,
    gzip: bool = False,
) -> list[str]:
    cmd = [
        PYTHON,
        str(Path(__file__).resolve()),
        "worker",
        "--out",
        str(out),
        "--model",
        model,
        "--steps",
        str(steps),
    ]
    if hand:
        cmd += ["--hand", hand]
    if gzip:
        cmd.append("--gzip")
    if export_dir is not None:
        cmd += ["--export-dir", str(export_dir)]
    return cmd


def run(cmd: Sequence[str], env: dict[str, str] | None = None, timeout: float = 600) -> float:
    """Run ``cmd`` to the end; its wall time in seconds. Raises with its stderr if it fails."""
    start = time.perf_counter()
    result = subprocess.run(
        list(cmd), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {result.returncode}:\n{result.stderr.decode(errors='replace')[-3000:]}"
        )
    return wall


def run_with_cpu(cmd: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """``run``, and the CPU time (user + system) the command and the children it waited for used, in
    seconds: unlike the wall time, it does not count the moments other processes held the cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = run(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# ---- pairing and statistics --------------------------------------------------------------------------
def interleaved(variants: dict[str, Callable[[int], float]], repeats: int) -> dict[str, list[float]]:
    """Run each variant once per round, rotating the order every round (machines are noisy: a slow
    spell then hits every variant alike); returns each variant's samples."""
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_no in range(repeats):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(variants[name](round_no))
    return samples


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def paired_ratio(numer: Sequence[float], denom: Sequence[float]) -> float:
    """Median of the per-round ratios (a pair shares the machine's state of the moment)."""
    return median([n / d for n, d in zip(numer, denom, strict=True) if d > 0])


def paired_diff(numer: Sequence[float], denom: Sequence[float]) -> float:
    return median([n - d for n, d in zip(numer, denom, strict=True)])


# ---- output ----------------------------------------------------------------------------------------------
def verdict(value: float, budget: float) -> str:
    return "met" if value <= budget else "MISSED"


def verdict_as_printed(value: float, budget: float, digits: int = 1) -> str:
    """The verdict on the two figures as the table prints them (``digits`` decimals): a launcher 222.7 ms
    slower against a budget of 222.66 printed "+222.7 ms", "<= +223 ms" and "MISSED", a row that its own
    figures contradict."""
    return verdict(round(value, digits), round(budget, digits))


def print_table(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], notes: Sequence[str] = ()
) -> None:
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "+".join("-" * (w + 2) for w in widths)
    print(f"\n{title}")
    print(" " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)))
    print(line)
    for row in cells[1:]:
        print(" " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    for note in notes:
        print(f"  {note}")
    sys.stdout.flush()


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def plan_actions(skip_first: int, wait: int, warmup: int, active: int, repeat: int, steps: int) -> list[str]:
    """The action of every step under a torch.profiler schedule (as npuprof.agent.schedule computes it)."""
    sys.path.insert(0, str(ROOT))
    from npuprof.agent.schedule import SchedulePlan
    from npuprof.config import Schedule

    plan = SchedulePlan(
        Schedule(skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=repeat)
    )
    return [plan.action_at(step).name for step in range(steps)]


# ---- the training worker ---------------------------------------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="bench worker")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", choices=sorted(MODELS), default="1ms")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument(
        "--hand", default=None, help="skip_first,wait,warmup,active,repeat: torch.profiler by hand"
    )
    parser.add_argument("--export-dir", type=Path, default=None)
    parser.add_argument("--gzip", action="store_true", help="hand-written export through torch's gzip path")
    args = parser.parse_args(argv)

    import torch
    from torch import nn

    torch.manual_seed(0)
    width, batch = MODELS[args.model]
    model = nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    inputs = torch.randn(batch, width)
    targets = torch.randint(0, 10, (batch,))
    prof = None
    if args.hand:
        skip_first, wait, warmup, active, repeat = (int(x) for x in args.hand.split(","))
        export_dir = args.export_dir or args.out.parent
        export_dir.mkdir(parents=True, exist_ok=True)

        def on_trace_ready(p: object) -> None:
            name = f"hand.{time.time_ns()}.pt.trace.json" + (".gz" if args.gzip else "")
            p.export_chrome_trace(str(export_dir / name))  # type: ignore[attr-defined]

        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(
                skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=repeat
            ),
            on_trace_ready=on_trace_ready,
        )
        prof.start()
    times = []
    rss_at_end = 0.0
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    cpu_times = []
    for _ in range(args.steps):
        start, cpu_start = clock(), cpu_clock()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        if prof is not None:
            prof.step()
        times.append(clock() - start)
        cpu_times.append(cpu_clock() - cpu_start)
    rss_at_end = _rss_mb()
    if prof is not None:
        prof.stop()
    args.out.write_text(json.dumps({"step_ns": times, "cpu_ns": cpu_times, "rss_mb": rss_at_end}))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        sys.exit(worker(sys.argv[2:]))
    sys.exit(
        "usage: python bench/_common.py worker --out FILE [--model 1ms|10ms] [--steps N] [--hand S,W,U,A,R]"
    )


def schedule_flags(skip_first: int, wait: int, warmup: int, active: int, repeat: int) -> list[str]:
    """`npuprof run` schedule flags."""
    values = {
        "--skip-first": skip_first,
        "--wait": wait,
        "--warmup": warmup,
        "--active": active,
        "--repeat": repeat,
    }
    return [item for flag, value in values.items() for item in (flag, str(value))]
