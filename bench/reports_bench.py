"""Benchmark `npuprof export-stacks` and `npuprof memory-timeline` on big traces against json.load.

    .venv/bin/python bench/reports_bench.py                  # 100 MB traces, ~1 minute on 2 cores
    .venv/bin/python bench/reports_bench.py --size-mb 500    # the 500 MB figures of bench/README.md
    .venv/bin/python bench/reports_bench.py --quick          # 2 MB, no .gz: checks it runs (test_bench_smoke)

The traces are analyse_bench.py's: ``mix``, the event mix of a ``--profile-memory --with-stack`` capture in
Kineto's form (a third ``[memory]`` instants, a third ``python_function`` frames, operators, launches,
kernels, flows), the same gzipped (``mix.gz``, left out with --quick), and ``string-ts``, torch_npu's bare
array with string times (``trace_view.json``). Each command runs in its own process; its wall time, CPU
time and peak RSS (``wait4``'s ``ru_maxrss``) are measured beside two baselines of the same run:
``json.load`` of the same trace (``gzip.open`` for the .gz: what a script reading it would pay), and the
same command on a trace of one step (its start-up: the interpreter, typer, the modules). The budgets (a
demanding user's): no more CPU time than json.load (seconds per 100 MB; CPU, not wall: the cores are
shared), and memory added over the one-step run at most twice the trace's uncompressed size (never in
multiples of it). At --quick sizes start-up and the reader's 16 MB blocks dominate: the figures mean
nothing there. Exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import ROOT, print_table, verdict  # noqa: E402
from analyse_bench import write_mix_trace, write_npu_trace  # noqa: E402

JSON_LOAD = (
    "import gzip, json, sys\np = sys.argv[1]\n"
    "with (gzip.open(p) if p.endswith('.gz') else open(p, 'rb')) as f:\n    d = json.load(f)\nprint(len(d))\n"
)
TIME_BUDGET = 1.0  # x json.load's time
MEMORY_BUDGET = 2.0  # x the trace's uncompressed size, added over the one-step run


def measure(cmd: list[str]) -> tuple[float, float, float, int]:
    """(wall s, peak RSS MB, CPU s, exit code) of one process, from wait4."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, proc.returncode


def best(runs: int, cmd: list[str]) -> tuple[float, float, float, int]:
    """The run with the least wall time of ``runs`` (other work on a shared machine only adds)."""
    return min((measure(cmd) for _ in range(max(1, runs))), key=lambda r: (r[3] != 0, r[0]))


def traces(work: Path, size_mb: float, gz: bool) -> dict[str, tuple[Path, float]]:
    """case -> (trace, its uncompressed size in MB)."""
    mix = work / "mix.pt.trace.json"
    write_mix_trace(mix, size_mb)
    npu = work / "npu" / "trace_view.json"
    npu.parent.mkdir()
    write_npu_trace(npu, size_mb)
    mix_mb, npu_mb = mix.stat().st_size / 1e6, npu.stat().st_size / 1e6
    made = {"mix": (mix, mix_mb), "string-ts": (npu, npu_mb)}
    if gz:
        with open(mix, "rb") as src, gzip.open(f"{mix}.gz", "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
        made["mix.gz"] = (Path(f"{mix}.gz"), mix_mb)
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=None, help="trace size (default 100; --quick 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command; the fastest counts")
    parser.add_argument("--quick", action="store_true", help="2 MB traces: checks it runs")
    args = parser.parse_args()
    size_mb = args.size_mb or (2.0 if args.quick else 100.0)
    work = Path(tempfile.mkdtemp(prefix="npuprof-reports-bench-"))
    load = os.getloadavg()
    rows = []
    try:
        made = traces(work, size_mb, gz=not args.quick)
        one_step = work / "one" / "one.pt.trace.json"
        one_step.parent.mkdir()
        write_mix_trace(one_step, 0.01)

        def command(name: str, trace: Path) -> list[str]:
            out = work / ("out.folded" if name == "export-stacks" else "out.json")
            return [sys.executable, "-m", "npuprof", name, str(trace), "-o", str(out)]

        names = ("export-stacks", "memory-timeline")
        base = {name: best(args.repeat, command(name, one_step))[1] for name in names}
        for case, (trace, mb) in made.items():
            j_wall, j_peak, j_cpu, _rc = best(args.repeat, [sys.executable, "-c", JSON_LOAD, str(trace)])
            for name in names:
                base_mb = base[name]
                wall, peak, cpu, rc = best(args.repeat, command(name, trace))
                failed = "" if rc == 0 else f" (exit {rc})"
                ratio = cpu / j_cpu  # CPU: other work on the 2 shared cores inflates wall times
                rows.append(
                    [
                        f"{name}, {case}, {mb:.0f} MB: CPU time",
                        f"json.load CPU {j_cpu:.2f} s (wall {j_wall:.2f} s)",
                        f"CPU {cpu:.2f} s ({cpu / mb * 100:.2f} s per 100 MB; wall {wall:.2f} s){failed}",
                        f"x{ratio:.2f}",
                        f"<= x{TIME_BUDGET:g}",
                        verdict(ratio, TIME_BUDGET),
                    ]
                )
                added = (peak - base_mb) * 2**20 / 1e6 / mb
                rows.append(
                    [
                        f"{name}, {case}, {mb:.0f} MB: memory",
                        f"one step {base_mb:.0f} MB; json.load {j_peak:.0f} MB",
                        f"{peak:.0f} MB{failed}",
                        f"x{added:.2f} memory (added, of the trace's size)",
                        f"memory <= x{MEMORY_BUDGET:g}",
                        verdict(added, MEMORY_BUDGET),
                    ]
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(
        f"npuprof export-stacks / memory-timeline, {size_mb:g} MB traces (peak RSS: wait4's ru_maxrss)",
        ["", "baseline (same run)", "npuprof", "ratio", "budget", "verdict"],
        rows,
        [f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
