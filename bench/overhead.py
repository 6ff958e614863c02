"""What npuprof costs a training loop: per step outside captures, inside captures, and in memory.

    .venv/bin/python bench/overhead.py            # ~3 minutes on 2 quiet cores (8 at load 4)
    .venv/bin/python bench/overhead.py --quick    # a few seconds: smoke test only, figures meaningless

A small CPU MLP (steps of ~1 ms and ~10 ms) runs N steps in four ways, interleaved round by round:
bare; under `npuprof run` with no capture near (the agent counts steps, nothing else); under `npuprof run`
capturing a repeating schedule; and the same schedule written by hand with torch.profiler. Each run times
every step; the table compares medians (per round, then the median of the rounds). The hook's own cost is
measured in one process under npuprof, in paired blocks with npuprof's optimizer hook present / removed;
so is the cost of ``--step-on __main__:step`` (the script's own function, wrapped / bare). A recorded step's
work is measured the same way, inside one long capture: npuprof's boundary (the optimizer's hook, or the
``--step-on __main__:step`` wrapper) against the hooks removed and ``prof.step()`` written by hand, on the
same ``torch.profiler.profile`` (npuprof's, as the capture's state must be the same for both).
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
# hook cost: blocks of tiny optimizer steps with npuprof's step work (its post hook and its wrapper of the
# class's step, which takes the boundary) present / both removed (helper-133: the wrapper stayed in both
# arms, and the row read +0.2 µs of a step's ~1 µs)
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
wrapped = torch.optim.SGD.step
assert getattr(wrapped, "__npuprof_step__", False), "npuprof did not wrap SGD.step"
opt.step()  # step 0 arms npuprof, which starts its post-processor: let that start before the blocks
time.sleep(1.5)
on, off = [], []
clock = time.thread_time_ns  # this thread's CPU time: steadier than the wall clock on a shared machine
for b in range(2 * blocks):
    hooked = b % 2 == (b // 2) % 2  # ABBA order
    om._global_optimizer_post_hooks.clear()
    if hooked:
        om._global_optimizer_post_hooks.update(ours)
    torch.optim.SGD.step = wrapped if hooked else wrapped.__wrapped__
    start = clock()
    for _ in range(per_block):
        opt.step()
    (on if hooked else off).append((clock() - start) / per_block)
om._global_optimizer_post_hooks.update(ours)
torch.optim.SGD.step = wrapped
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
# nothing traces the interpreter once the name is bound (a trace or profile function would slow every call of
# the job, wrapped or not, and this pairing would not show it)
assert sys.gettrace() is None and sys.getprofile() is None, "a trace or profile function is on"
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

# A recorded step's npuprof work: blocks of steps inside one capture, taken by npuprof's boundary (A) / with
# npuprof's hooks out of the way and torch's own `profile.step` called by hand on the profiler npuprof opened
# (B: `type(prof).step`, without the SIGTERM guard npuprof puts around it), ABBA order, thread CPU time.
# SETUP, STEP_A, STEP_B, SWAP_OUT and SWAP_IN are filled in per path (RECORDED_PATHS).
RECORDED_BENCH = r"""
import json, sys, time
from npuprof.agent import entry
from npuprof.agent.schedule import Action
SETUP
blocks, per_block = int(sys.argv[1]), int(sys.argv[2])
STEP_A()  # step 0 arms npuprof, which opens its profiler (warm-up) and starts its post-processor
STEP_A()  # step 1: recording from here
controller = entry._state["agent"].controller  # npuprof's internals: the profiler it opened
prof = controller.prof
assert prof is not None and controller.action is Action.RECORD, controller.action
hand_step = type(prof).step
time.sleep(1.5)  # let the post-processor start before the blocks
on, off = [], []
clock = time.thread_time_ns
for b in range(2 * blocks):
    hooked = b % 2 == (b // 2) % 2  # ABBA order
    if hooked:
        start = clock()
        for _ in range(per_block):
            STEP_A()
        on.append((clock() - start) / per_block)
    else:
        SWAP_OUT
        start = clock()
        for _ in range(per_block):
            STEP_B()
            hand_step(prof)
        off.append((clock() - start) / per_block)
        SWAP_IN
assert controller.prof is prof and controller.action is Action.RECORD, "the capture changed under the bench"
print(json.dumps({"on": on, "off": off}))
"""
RECORDED_PATHS = {
    # the optimizer path: npuprof's post hook and its wrapper of SGD.step, removed for B
    "optimizer": {
        "SETUP": (
            "import torch\n"
            "import torch.optim.optimizer as om\n"
            "p = torch.nn.Parameter(torch.zeros(1))\n"
            "p.grad = torch.zeros(1)\n"
            "opt = torch.optim.SGD([p], lr=0.0)\n"
            "wrapped = torch.optim.SGD.step\n"
            "hooks = dict(om._global_optimizer_post_hooks)\n"
            "assert len(hooks) == 1 and wrapped.__npuprof_step__, 'npuprof did not hook the optimizer'\n"
        ),
        "STEP_A()": "opt.step()",
        "STEP_B()": "opt.step()",
        "SWAP_OUT": "om._global_optimizer_post_hooks.clear(); torch.optim.SGD.step = wrapped.__wrapped__",
        "SWAP_IN": "om._global_optimizer_post_hooks.update(hooks); torch.optim.SGD.step = wrapped",
        "flags": [],
    },
    # --step-on __main__:step: the wrapper npuprof bound at the def (A), the function it wraps (B)
    "__main__": {
        "SETUP": (
            "def step():\n"
            "    return None\n"
            "bare = getattr(step, '__wrapped__', None)\n"
            "assert bare is not None and bare is not step, 'npuprof did not wrap __main__:step'\n"
        ),
        "STEP_A()": "step()",
        "STEP_B()": "bare()",
        "SWAP_OUT": "pass",
        "SWAP_IN": "pass",
        "flags": ["--step-on", "__main__:step"],
    },
}
# one capture from step 1 to the end (warm-up at step 0), never ending within the blocks
RECORDED_SCHEDULE = (0, 0, 1, 10**8, 1)


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
                "per step outside captures: npuprof's step hook and step() wrapper",
                "both removed, same process",
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
        recorded = {
            path: _recorded_cost(
                tmp, env, path, blocks=4 if args.quick else 30, per_block=50 if args.quick else 300
            )
            for path in RECORDED_PATHS
        }
        actions = plan_actions(*SCHEDULE, steps=steps)
        model_steps: dict[str, float] = {}
        for model in models:
            samples = _model_rounds(tmp, env, model, steps, repeats)
            rows += _model_rows(model, samples, actions, steps)
            model_steps[model] = median([_median_of(r, _warm(steps)) for r in samples["bare"]])
        rows += [_recorded_row(path, *recorded[path], model_steps) for path in RECORDED_PATHS]
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
    """ns per step that npuprof's optimizer hook and step wrapper add (paired blocks in one process under
    npuprof)."""
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


def _recorded_cost(
    tmp: Path, env: dict[str, str], path: str, blocks: int, per_block: int
) -> tuple[list[float], list[float]]:
    """ns of CPU per recorded step: npuprof's boundary / the hooks removed and ``prof.step()`` by hand."""
    import subprocess

    spec = RECORDED_PATHS[path]
    code = RECORDED_BENCH
    for key in ("SETUP", "STEP_A()", "STEP_B()", "SWAP_OUT", "SWAP_IN"):
        code = code.replace(key, spec[key])
    script = tmp / f"recorded_{path.strip('_')}.py"
    script.write_text(code)
    flags = [
        "-o",
        str(tmp / f"recorded_{path.strip('_')}_out"),
        *spec["flags"],
        *schedule_flags(*RECORDED_SCHEDULE),
        "--no-gzip",
        "--no-analyse",
    ]
    cmd = npuprof_run(flags, [PYTHON, str(script), str(blocks), str(per_block)])
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"recorded-step bench ({path}) failed:\n{result.stderr[-3000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    return data["on"], data["off"]


def _recorded_row(
    path: str, on: list[float], off: list[float], model_steps: dict[str, float]
) -> list[object]:
    """The recorded step's added cost, and what it makes of a step of each model (its bare median)."""
    added_ms = paired_diff(on, off) / 1e6
    ratios = {model: (step + added_ms) / step for model, step in model_steps.items()}
    worst = max(ratios.values())
    on_models = ", ".join(f"x{ratio:.4f} on the {model} model" for model, ratio in ratios.items())
    what = "optimizer step" if path == "optimizer" else "--step-on __main__:step"
    return [
        f"a recorded step, {what}: npuprof's boundary",
        f"hooks removed + prof.step() by hand, same capture: {median(off) / 1e6:.3f} ms CPU",
        f"{median(on) / 1e6:.3f} ms ({added_ms * 1000:+.1f} µs: {on_models})",
        "<= x1.02",
        verdict(worst, 1.02),
    ]


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


def _warm(steps: int) -> list[int]:
    return list(range(min(20, steps // 4), steps))


def _median_of(run: dict, steps: list[int]) -> float:
    return median([run["cpu_ns"][s] for s in steps]) / 1e6  # ms of the training thread's CPU time


def _model_rows(
    model: str, samples: dict[str, list[dict]], actions: list[str], steps: int
) -> list[list[object]]:
    warm = _warm(steps)
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
