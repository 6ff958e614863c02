"""Dynamic capture (`npuprof run --dynamic DIR`): what the watcher costs a step, and how long a trigger
takes to become a capture.

    .venv/bin/python bench/dynamic_latency.py            # ~1.5 minutes on 2 cores
    .venv/bin/python bench/dynamic_latency.py --quick    # seconds: smoke test only, figures meaningless

1. Per step outside captures: a small CPU MLP runs N steps bare and under `npuprof run --dynamic DIR` (the
   watcher thread polls DIR/profiler_config.json every 2 s, then every step-10-to-11 interval, at least
   1 s), interleaved round by round; the ratio of the median step (the training thread's CPU time) under
   --dynamic to the bare one, median over rounds.
2. Trigger to capture: a job runs under --dynamic with the default poll interval; once its watcher has
   measured its interval, the file is rewritten (atomically, as `npuprof trigger` does) several times, each
   after the previous capture ended. Latency = the capture's start (profiler_info's collectionTimeBegin)
   minus the file's mtime. Budget: the poll interval + one step (the issue's), against the worst trigger.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PYTHON,
    ROOT,
    bench_env,
    interleaved,
    median,
    npuprof_run,
    paired_ratio,
    print_table,
    run,
    verdict,
    worker_cmd,
)

STEP_BUDGET = 1.01  # as bench/overhead.py's "step outside captures"
# a training loop that runs until a stop file appears; prints each step's wall time (ns) at the end
LOOP = r"""
import json, sys, time
from pathlib import Path
import torch
from torch import nn
stop, out, width, batch = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))
times = []
while not stop.exists() and len(times) < 200000:
    start = time.perf_counter_ns()
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    times.append(time.perf_counter_ns() - start)
out.write_text(json.dumps(times))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the bench runs, nothing more"
    )
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--triggers", type=int, default=4)
    args = parser.parse_args()
    steps, repeats, triggers, model = args.steps, args.repeats, args.triggers, "10ms"
    poll: float | None = None
    if args.quick:
        steps, repeats, triggers, model, poll = 40, 1, 1, "1ms", 0.2
    env = bench_env()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="npuprof_bench_") as tmp_name:
        tmp = Path(tmp_name)
        rows.append(_step_cost(tmp, env, model, steps, repeats))
        rows.append(_latency(tmp, env, triggers, poll))
    print_table(
        "dynamic capture (bench/dynamic_latency.py)",
        ["what", "baseline (same run)", "npuprof --dynamic", "budget", "verdict"],
        rows,
        [
            f"step cost: {model} model, {steps} steps a run, {repeats} round(s) of bare / --dynamic "
            "interleaved; step = the training thread's CPU time; ratio = median over rounds of the median "
            "steps' ratio",
            "latency: from the config file's mtime to profiler_info's collectionTimeBegin, each trigger "
            "after the previous capture ended; budget = the poll interval the watcher logged + one median "
            "step",
        ],
    )
    return 0


def _step_cost(tmp: Path, env: dict[str, str], model: str, steps: int, repeats: int) -> list[object]:
    results: dict[str, list[dict]] = {"bare": [], "dynamic": []}

    def variant(name: str):
        def go(round_no: int) -> float:
            out = tmp / f"{name}_{round_no}.json"
            work = worker_cmd(out, model, steps)
            flags = [
                "-o",
                str(tmp / f"res_{round_no}"),
                "--dynamic",
                str(tmp / f"cfg_{round_no}"),
                "--no-gzip",
            ]
            wall = run(work if name == "bare" else npuprof_run(flags, work), env)
            results[name].append(json.loads(out.read_text()))
            return wall

        return go

    interleaved({name: variant(name) for name in results}, repeats)
    warm = range(min(20, steps // 4), steps)

    def medians(name: str) -> list[float]:
        return [median([r["cpu_ns"][s] for s in warm]) / 1e6 for r in results[name]]

    bare, dynamic = medians("bare"), medians("dynamic")
    ratio = paired_ratio(dynamic, bare)
    return [
        f"{model} model: step outside captures, watcher running",
        f"bare {median(bare):.3f} ms",
        f"{median(dynamic):.3f} ms (x{ratio:.4f})",
        f"<= x{STEP_BUDGET:.2f}",
        verdict(ratio, STEP_BUDGET),
    ]


def _latency(tmp: Path, env: dict[str, str], triggers: int, poll: float | None) -> list[object]:
    cfg, out, stop, times = tmp / "lat_cfg", tmp / "lat_out", tmp / "lat_stop", tmp / "lat_times.json"
    script = tmp / "loop.py"
    script.write_text(LOOP)
    flags = ["-o", str(out), "--no-gzip", "--no-analyse", "--dynamic", str(cfg)]
    flags += ["--poll-interval", str(poll)] if poll is not None else []
    job = subprocess.Popen(
        npuprof_run(flags, [PYTHON, str(script), str(stop), str(times), "512", "160"]),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        interval = _wait_for_interval(cfg, poll, job)
        latencies = []
        for number in range(triggers):
            _trigger(cfg, number)
            changed_ns = (cfg / "profiler_config.json").stat().st_mtime_ns
            _wait(lambda n=number: _log(cfg).count("complete in") > n, job, "a capture")
            latencies.append((_capture_starts(out)[number] - changed_ns) / 1e9)
    finally:
        stop.touch()
        _, err = job.communicate(timeout=120)
    if job.returncode != 0:
        raise RuntimeError(f"the --dynamic job failed:\n{err.decode(errors='replace')[-3000:]}")
    step_s = median(json.loads(times.read_text())) / 1e9
    budget = interval + step_s
    worst = max(latencies)
    how = "--poll-interval" if poll is not None else "auto: 2 s, then step 10 to 11, >= 1 s"
    return [
        f"trigger to capture start ({how})",
        f"poll {interval:.3f} s, step {step_s * 1000:.1f} ms",
        f"{worst:.3f} s worst (median {median(latencies):.3f} s, {len(latencies)} trigger(s))",
        f"<= {budget:.3f} s",
        verdict(worst, budget),
    ]


def _log(cfg: Path) -> str:
    return "".join(p.read_text() for p in sorted((cfg / "log").glob("dp_*.log")))


def _wait(check, job: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if job.poll() is not None:
            break
        time.sleep(0.02)
    raise RuntimeError(f"{what}: not seen in time (the job {'ended' if job.poll() is not None else 'runs'})")


def _wait_for_interval(cfg: Path, poll: float | None, job: subprocess.Popen) -> float:
    """The poll interval the watcher uses from now on: --poll-interval, or the one it measured."""
    if poll is not None:
        _wait(lambda: "is not a request" in (_log(cfg) if (cfg / "log").is_dir() else ""), job, "the watcher")
        return poll
    pattern = re.compile(r"poll interval now (\d+\.\d+) s")
    _wait(lambda: (cfg / "log").is_dir() and pattern.search(_log(cfg)), job, "the measured poll interval")
    measured = float(pattern.search(_log(cfg))[1])  # type: ignore[index]
    time.sleep(2.5)  # the sleep the watcher began before it measured (2 s) is over: it polls at the new pace
    return measured


def _trigger(cfg: Path, number: int) -> None:
    sys.path.insert(0, str(ROOT))
    from npuprof.config import template_json

    document = {**template_json(), "start_step": -1, "active": 2, "trigger_id": f"bench-{number}"}
    tmp = cfg / ".bench.tmp"
    tmp.write_text(json.dumps(document))
    os.replace(tmp, cfg / "profiler_config.json")


def _capture_starts(out: Path) -> list[int]:
    starts = []
    for info in out.glob("*_ascend_pt/profiler_info*.json"):
        starts.append(json.loads(info.read_text())["start_info"]["collectionTimeBegin"])
    return sorted(starts)


if __name__ == "__main__":
    sys.exit(main())
