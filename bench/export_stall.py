"""How long the step at which a capture ends blocks training, against a plain export_chrome_trace.

    .venv/bin/python bench/export_stall.py            # ~1 minute on 2 cores
    .venv/bin/python bench/export_stall.py --quick    # smoke test only

Three ways to capture the same schedule of the same CPU training loop, run interleaved round by round:
npuprof with its defaults (plain export in the step; gzip and analysis in a background process), the
schedule written by hand with torch.profiler and ``export_chrome_trace(path.json)`` in on_trace_ready, and
the same with ``path.json.gz`` (torch's gzip path, which compresses inside the step).

Then the exports (issue 12): npuprof with the capture flags a memory timeline needs (``--with-stack
--record-shapes --profile-memory``) and neither export, ``--export-stacks``, ``--memory-timeline``, or both,
interleaved again: the step where a capture ends with both against the same step with neither (the stacks
are rebuilt by the post-processor; for the memory timeline the step only takes the profiler's event tree,
the hand-over thread copies what torch's memory profiler needs out of it, in slices, and the
post-processor categorises it), and the steps right after it, while that copy is made.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    bench_env,
    interleaved,
    median,
    npuprof_run,
    plan_actions,
    print_table,
    run,
    schedule_flags,
    verdict,
    worker_cmd,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the bench runs, nothing more"
    )
    parser.add_argument("--repeats", type=int, default=6, help="rounds (each run ends 2 captures)")
    parser.add_argument("--active", type=int, default=5, help="recorded steps per capture")
    parser.add_argument("--model", default="10ms", choices=["1ms", "10ms"])
    parser.add_argument("--export-repeats", type=int, default=4, help="rounds of the exports comparison")
    args = parser.parse_args()
    repeats, active, model = (1, 2, "1ms") if args.quick else (args.repeats, args.active, args.model)
    # skip_first, wait, warmup, active, repeat; the wait lets the first capture's background job finish
    # before the second capture (on 2 cores it would otherwise slow the second one's steps)
    schedule = (6, 4 if args.quick else 60, 1, active, 2)
    steps = schedule[0] + (schedule[1] + schedule[2] + active) * 2 + 3
    actions = plan_actions(*schedule, steps=steps)
    ends = [s for s, a in enumerate(actions) if a == "RECORD_AND_SAVE"]
    recorded = [
        s for s, a in enumerate(actions) if a == "RECORD" and (s == 0 or actions[s - 1] != "RECORD_AND_SAVE")
    ]
    env = bench_env()
    found: dict[str, list[dict]] = {"npuprof": [], "plain": [], "gzip": []}
    trace_mb: list[float] = []
    with tempfile.TemporaryDirectory(prefix="npuprof_bench_") as tmp_name:
        tmp = Path(tmp_name)

        def variant(name: str):
            def go(round_no: int) -> float:
                out = tmp / f"{name}_{round_no}.json"
                export_dir = tmp / f"hand_{name}_{round_no}"
                if name == "npuprof":
                    flags = [
                        "-o",
                        str(tmp / f"npuprof_{round_no}"),
                        *schedule_flags(schedule[0], schedule[1], schedule[2], active, schedule[4]),
                    ]
                    cmd = npuprof_run(flags, worker_cmd(out, model, steps))
                else:
                    cmd = worker_cmd(
                        out,
                        model,
                        steps,
                        hand=",".join(map(str, schedule)),
                        export_dir=export_dir,
                        gzip=name == "gzip",
                    )
                wall = run(cmd, env)
                found[name].append(json.loads(out.read_text()))
                if name == "plain":
                    trace_mb.extend(p.stat().st_size / 2**20 for p in export_dir.glob("*.json"))
                return wall

            return go

        interleaved({name: variant(name) for name in found}, repeats)

    def end_steps(name: str, key: str = "step_ns") -> list[float]:
        return [r[key][s] / 1e6 for r in found[name] for s in ends]

    def after_steps(name: str, key: str = "step_ns") -> list[float]:
        return [r[key][s + 1] / 1e6 for r in found[name] for s in ends if s + 1 < steps]

    def normal(name: str) -> float:
        return median([r["step_ns"][s] / 1e6 for r in found[name] for s in recorded])

    plain_end, npu_end, gz_end = (
        median(end_steps("plain")),
        median(end_steps("npuprof")),
        median(end_steps("gzip")),
    )
    ratio = npu_end / plain_end
    plain_cpu, npu_cpu = median(end_steps("plain", "cpu_ns")), median(end_steps("npuprof", "cpu_ns"))
    rows = [
        [
            "step where a capture ends",
            f"plain export {plain_end:.2f} ms",
            f"{npu_end:.2f} ms (x{ratio:.3f})",
            "<= x1.2",
            verdict(ratio, 1.2),
        ],
        [
            "  same, torch's gzip handler (for scale)",
            f"plain export {plain_end:.2f} ms",
            f"gzip {gz_end:.2f} ms (x{gz_end / plain_end:.2f})",
            "-",
            "-",
        ],
        [
            "  same, training thread's CPU time",
            f"plain export {plain_cpu:.2f} ms",
            f"{npu_cpu:.2f} ms (x{npu_cpu / plain_cpu:.3f})",
            "<= x1.2",
            verdict(npu_cpu / plain_cpu, 1.2),
        ],
        [
            "step after the end",
            f"plain export {median(after_steps('plain')):.2f} ms",
            f"{median(after_steps('npuprof')):.2f} ms (CPU {median(after_steps('npuprof', 'cpu_ns')):.2f}"
            f" vs {median(after_steps('plain', 'cpu_ns')):.2f} ms)",
            "-",
            "-",
        ],
        [
            "a recorded step (for scale)",
            f"hand-written {normal('plain'):.2f} ms",
            f"{normal('npuprof'):.2f} ms",
            "-",
            "-",
        ],
    ]
    notes = [
        f"{model} model, schedule skip_first={schedule[0]} wait={schedule[1]} warmup={schedule[2]} "
        f"active={active} repeat=2; {repeats} round(s) x 3 interleaved runs; "
        f"medians of {len(ends) * repeats} capture ends each",
        f"raw trace per capture: {median(trace_mb):.1f} MB (plain json); npuprof runs with its defaults "
        "(gzip and analysis on, in a background process)",
    ]
    export_repeats = 1 if args.quick else args.export_repeats
    variants = ["neither", "both"] if args.quick else list(EXPORT_VARIANTS)
    export_rows, export_notes = exports_rows(schedule, steps, model, ends, export_repeats, env, variants)
    print_table(
        "the step at which a capture ends (bench/export_stall.py)",
        ["what", "baseline (same run)", "npuprof", "budget", "verdict"],
        rows + export_rows,
        notes + export_notes,
    )
    return 0


EXPORT_VARIANTS = {
    "neither": [],
    "stacks": ["--export-stacks", "self_cpu_time_total"],
    "memory": ["--memory-timeline", "json"],
    "both": ["--export-stacks", "self_cpu_time_total", "--memory-timeline", "json"],
}
CAPTURE_FLAGS = ["--with-stack", "--record-shapes", "--profile-memory"]


AFTER = 5  # steps after the capture end over which the background copy's cost is summed


def exports_rows(
    schedule: tuple[int, int, int, int, int],
    steps: int,
    model: str,
    ends: list[int],
    repeats: int,
    env: dict,
    variants: list[str],
) -> tuple[list[list[str]], list[str]]:
    """The capture-end step with --export-stacks / --memory-timeline against the same step with neither;
    the steps after it, where the hand-over thread copies the memory snapshot."""
    found: dict[str, list[dict]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="npuprof_bench_") as tmp_name:
        tmp = Path(tmp_name)

        def variant(name: str):
            def go(round_no: int) -> float:
                out = tmp / f"{name}_{round_no}.json"
                flags = [
                    "-o",
                    str(tmp / f"npuprof_{name}_{round_no}"),
                    *schedule_flags(*schedule),
                    *CAPTURE_FLAGS,
                    *EXPORT_VARIANTS[name],
                ]
                wall = run(npuprof_run(flags, worker_cmd(out, model, steps)), env)
                found[name].append(json.loads(out.read_text()))
                return wall

            return go

        interleaved({name: variant(name) for name in found}, repeats)

    def end(name: str, key: str = "step_ns") -> float:
        return median([r[key][s] / 1e6 for r in found[name] for s in ends])

    def after(name: str, key: str) -> float:
        return median(
            [sum(r[key][s + 1 : s + 1 + AFTER]) / 1e6 for r in found[name] for s in ends if s + AFTER < steps]
        )

    base, base_cpu = end("neither"), end("neither", "cpu_ns")
    rows = []
    labels = {"stacks": "--export-stacks", "memory": "--memory-timeline", "both": "both"}
    for name in [v for v in variants if v != "neither"]:
        label = labels[name]
        wall, cpu = end(name), end(name, "cpu_ns")
        budget = "<= x1.2" if name == "both" else "-"
        rows.append(
            [
                f"step where a capture ends, {label}",
                f"neither {base:.2f} ms",
                f"{wall:.2f} ms (x{wall / base:.3f}; CPU x{cpu / base_cpu:.3f})",
                budget,
                verdict(wall / base, 1.2) if name == "both" else "-",
            ]
        )
    both_cpu = end("both", "cpu_ns")
    rows.append(
        [
            "  same, training thread's CPU time, both",
            f"neither {base_cpu:.2f} ms",
            f"{both_cpu:.2f} ms (x{both_cpu / base_cpu:.3f})",
            "<= x1.2",
            verdict(both_cpu / base_cpu, 1.2),
        ]
    )
    rows.append(
        [
            f"  the {AFTER} steps after the end (sum), both",
            f"neither {after('neither', 'step_ns'):.2f} ms (CPU {after('neither', 'cpu_ns'):.2f})",
            f"{after('both', 'step_ns'):.2f} ms (CPU {after('both', 'cpu_ns'):.2f})",
            "-",
            "-",
        ]
    )
    notes = [
        f"exports: capture flags {' '.join(CAPTURE_FLAGS)}, same model and schedule, --memory-timeline json; "
        f"{repeats} round(s) x {len(variants)} interleaved runs; medians of {len(ends) * repeats} "
        "capture ends each",
    ]
    return rows, notes


if __name__ == "__main__":
    sys.exit(main())
