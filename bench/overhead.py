"""What npuprof costs a training loop: per step outside captures, inside captures, and in memory.

    .venv/bin/python bench/overhead.py            # ~2 minutes on 2 cores
    .venv/bin/python bench/overhead.py --quick    # a few seconds: smoke test only, figures meaningless

A small CPU MLP (steps of ~1 ms and ~10 ms) runs N steps in four ways, interleaved round by round:
bare; under `npuprof run` with no capture near (the agent counts steps, nothing else); under `npuprof run`
capturing a repeating schedule; and the same schedule written by hand with torch.profiler. Each run times
every step; the table compares medians (per round, then the median of the rounds). The hook's own cost is
measured in one process under npuprof, in paired blocks with npuprof's optimizer hook present / removed;
so is the cost of ``--step-on __main__:step`` (the script's own function, wrapped / bare).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PYTHON,
    bench_env,
    interleaved,
    median,
    npuprof_run,
    paired_diff,
    paired_ratio,
    plan_actions,
    print_table,
    run,
    schedule_flags,
    verdict,
    worker_cmd,
)

# a capture of 5 steps every 17 (skip 20, wait 10, warm up 2), until training ends
SCHEDULE = (20, 10, 2, 5, 0)
IDLE_FLAGS = ["--skip-first", "1000000000"]
# hook cost: blocks of tiny optimizer steps with npuprof's post hook present / removed
HOOK_BENCH = r"""
import json, sys, time
import torch
import torch.optim.optimizer as om
blocks, per_block = int(sys.argv[1]), int(sys.argv[2])
p = torch.nn.Parameter(torch.zeros(1))
p.grad = torch.zeros(1)
opt = torch.optim.SGD([p], lr=0.0)
ours = dict(om._global_optimizer_post_hooks)
assert len(ours) == 1, f"expected npuprof's hook only, found {len(ours)}"
opt.step()  # step 0 arms npuprof, which starts its post-processor: let that start before the blocks
time.sleep(1.5)
on, off = [], []
clock = time.thread_time_ns  # this thread's CPU time: steadier than the wall clock on a shared machine
for b in range(2 * blocks):
    hooked = b % 2 == (b // 2) % 2  # ABBA order
    om._global_optimizer_post_hooks.clear()
    if hooked:
        om._global_optimizer_post_hooks.update(ours)
    start = clock()
    for _ in range(per_block):
        opt.step()
    (on if hooked else off).append((clock() - start) / per_block)
om._global_optimizer_post_hooks.update(ours)
print(json.dumps({"on": on, "off": off}))
"""
# --step-on __main__:step: blocks of calls of the script's own step through npuprof's wrapper (bound at the
# def, so that `step` is the wrapper) / of the bare function it wraps, in the same process, in CPU time
MAIN_STEP_BENCH = r"""
import json, sys, time
def step():
    return None
bare = getattr(step, "__wrapped__", None)
assert bare is not None and bare is not step, "npuprof did not wrap __main__:step"
blocks, per_block = int(sys.argv[1]), int(sys.argv[2])
step()  # step 0 arms npuprof, which starts its post-processor: let that start before the blocks
time.sleep(1.0)
on, off = [], []
clock = time.thread_time_ns  # this thread's CPU time: steadier than the wall clock on a shared machine
for b in range(2 * blocks):
    hooked = b % 2 == (b // 2) % 2  # ABBA order
    call = step if hooked else bare
    start = clock()
    for _ in range(per_block):
        call()
    (on if hooked else off).append((clock() - start) / per_block)
print(json.dumps({"on": on, "off": off}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the bench runs, nothing more"
    )
    parser.add_argument("--steps", type=int, default=340)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    steps, repeats, models = args.steps, args.repeats, ["1ms", "10ms"]
    if args.quick:
        steps, repeats, models = 40, 1, ["1ms"]
    env = bench_env()
    rows: list[list[object]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="npuprof_bench_") as tmp_name:
        tmp = Path(tmp_name)
        hook_ns = _hook_cost(
            tmp, env, blocks=4 if args.quick else 40, per_block=2000 if args.quick else 20000
        )
        rows.append(
            [
                "per step outside captures: npuprof's step hook",
                "hook removed, same process",
                f"+{hook_ns / 1000:.2f} µs",
                "<= 2 µs",
                verdict(hook_ns / 1000, 2.0),
            ]
        )
        main_on, main_off = _main_step_cost(
            tmp, env, blocks=4 if args.quick else 40, per_block=2000 if args.quick else 20000
        )
        main_added, main_ratio = paired_diff(main_on, main_off), paired_ratio(main_on, main_off)
        rows.append(
            [
                "per step outside captures: --step-on __main__:step",
                f"the bare function, same process: {median(main_off):.0f} ns CPU a call",
                f"+{main_added / 1000:.2f} µs a call (x{main_ratio:.1f} an empty function)",
                "<= 2 µs",
                verdict(main_added / 1000, 2.0),
            ]
        )
        actions = plan_actions(*SCHEDULE, steps=steps)
        for model in models:
            samples = _model_rounds(tmp, env, model, steps, repeats)
            rows += _model_rows(model, samples, actions, steps)
    notes.append(
        f"{steps} steps a run, {repeats} round(s) of 4 interleaved runs; OMP_NUM_THREADS=1; "
        "step = the training thread's CPU time (time.thread_time_ns: steady on a shared machine); "
        "ratio = median over rounds of (median step of A / median step of B)"
    )
    notes.append(
        f"capture schedule: skip_first={SCHEDULE[0]} wait={SCHEDULE[1]} warmup={SCHEDULE[2]} "
        f"active={SCHEDULE[3]} repeat=0 (until the end); npuprof runs with --no-gzip --no-analyse here "
        "so that no background job competes with the hand-written run (export_stall.py covers them)"
    )
    print_table(
        "npuprof overhead on a training loop (bench/overhead.py)",
        ["what", "baseline (same run)", "npuprof", "budget", "verdict"],
        rows,
        notes,
    )
    return 0


def _hook_cost(tmp: Path, env: dict[str, str], blocks: int, per_block: int) -> float:
    """ns per step that npuprof's optimizer hook adds (paired blocks in one process under npuprof)."""
    import subprocess

    script = tmp / "hook_bench.py"
    script.write_text(HOOK_BENCH)
    cmd = npuprof_run(
        ["-o", str(tmp / "hook_out"), *IDLE_FLAGS], [PYTHON, str(script), str(blocks), str(per_block)]
    )
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"hook bench failed:\n{result.stderr[-3000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    return paired_diff(data["on"], data["off"])


def _main_step_cost(tmp: Path, env: dict[str, str], blocks: int, per_block: int) -> tuple[list, list]:
    """ns per call of a function of the script itself, with npuprof's --step-on wrapper and without."""
    import subprocess

    script = tmp / "main_step_bench.py"
    script.write_text(MAIN_STEP_BENCH)
    flags = ["-o", str(tmp / "main_step_out"), "--step-on", "__main__:step", *IDLE_FLAGS]
    cmd = npuprof_run(flags, [PYTHON, str(script), str(blocks), str(per_block)])
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"--step-on __main__ bench failed:\n{result.stderr[-3000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    return data["on"], data["off"]


def _model_rounds(
    tmp: Path, env: dict[str, str], model: str, steps: int, repeats: int
) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {"bare": [], "idle": [], "capture": [], "hand": []}
    capture_flags = [
        *schedule_flags(*SCHEDULE),
        "--no-gzip",
        "--no-analyse",
    ]

    def variant(name: str):
        def go(round_no: int) -> float:
            out = tmp / f"{model}_{name}_{round_no}.json"
            work = worker_cmd(
                out,
                model,
                steps,
                hand=",".join(map(str, SCHEDULE)) if name == "hand" else None,
                export_dir=tmp / f"hand_{model}_{round_no}",
            )
            result_dir = tmp / f"npuprof_{model}_{name}_{round_no}"
            if name == "bare" or name == "hand":
                cmd = work
            else:
                cmd = npuprof_run(
                    ["-o", str(result_dir), *(IDLE_FLAGS if name == "idle" else capture_flags)], work
                )
            wall = run(cmd, env)
            results[name].append(json.loads(out.read_text()))
            return wall

        return go

    interleaved({name: variant(name) for name in results}, repeats)
    return results


def _median_of(run: dict, steps: list[int]) -> float:
    return median([run["cpu_ns"][s] for s in steps]) / 1e6  # ms of the training thread's CPU time


def _model_rows(
    model: str, samples: dict[str, list[dict]], actions: list[str], steps: int
) -> list[list[object]]:
    warm = list(range(min(20, steps // 4), steps))
    # recorded steps, without the one where a capture ends (export: see export_stall.py) and the next one
    inside = [
        s for s in range(steps) if actions[s] == "RECORD" and (s == 0 or actions[s - 1] != "RECORD_AND_SAVE")
    ]
    bare = [_median_of(r, warm) for r in samples["bare"]]
    idle = [_median_of(r, warm) for r in samples["idle"]]
    cap = [_median_of(r, inside) for r in samples["capture"]]
    hand = [_median_of(r, inside) for r in samples["hand"]]
    idle_ratio = paired_ratio(idle, bare)
    inside_ratio = paired_ratio(cap, hand)
    rss = paired_diff([r["rss_mb"] for r in samples["idle"]], [r["rss_mb"] for r in samples["bare"]])
    rows: list[list[object]] = [
        [
            f"{model} model: step outside captures",
            f"bare {median(bare):.3f} ms",
            f"{median(idle):.3f} ms (x{idle_ratio:.4f}, {(median(idle) - median(bare)) * 1000:+.1f} µs)",
            "<= x1.01",
            verdict(idle_ratio, 1.01),
        ],
        [
            f"{model} model: step inside a capture",
            f"hand-written torch.profiler {median(hand):.3f} ms",
            f"{median(cap):.3f} ms (x{inside_ratio:.4f})",
            "<= x1.02",
            verdict(inside_ratio, 1.02),
        ],
        [
            f"{model} model: RSS added outside captures",
            f"bare {median([r['rss_mb'] for r in samples['bare']]):.0f} MB",
            f"{rss:+.1f} MB",
            "<= 20 MB",
            verdict(rss, 20.0),
        ],
    ]
    if not inside:
        rows = [rows[0], rows[2]]
    return rows


if __name__ == "__main__":
    sys.exit(main())
