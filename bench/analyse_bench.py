"""Benchmark `npuprof analyse` (parse + every table) against json.load and HolisticTraceAnalysis.

    .venv/bin/python bench/analyse_bench.py                 # 128 MB trace, well under 2 minutes
    .venv/bin/python bench/analyse_bench.py --size-mb 1024   # the 1 GB figure of the issue
    .venv/bin/python bench/analyse_bench.py --size-mb 256 --repeat 3 --no-json   # npuprof only, best of 3

Synthesises a realistic Kineto-style CUDA trace (npuprof.analysis.synthetic), then runs each contender in its
own subprocess and samples the memory of its whole process tree (workers included; the sum of their
proportional set sizes, so pages a forked worker shares with its parent count once) every 250 ms; prints one
table with wall time, CPU time (user + system, all processes), peak memory and the ratios to npuprof,
and the load average (other work on the machine inflates wall times: compare CPU times too). HTA runs
when importable here or through NPUPROF_HTA_PYTHON. Exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from npuprof.analysis.synthetic import write_synthetic_trace  # noqa: E402

JSON_LOAD = (
    "import json, sys\nwith open(sys.argv[1]) as f:\n    d = json.load(f)\nprint(len(d['traceEvents']))\n"
)
HTA_LOAD = (
    "import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
    "a = TraceAnalysis(trace_dir=sys.argv[1])\nprint(len(a.t.get_trace(0)))\n"
)


def _memory(pid: int) -> int:
    """Proportional set size (a page shared by n processes counts 1/n to each: forked workers share the
    parent's pages) from /proc/PID/smaps_rollup; the RSS where that is not available; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc/PID/task/TID/children: a few small reads (psutil's
    children() reads every process's stat file, ~1.5 ms a poll, which on 2 cores slows what is measured)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as handle:
                    todo.extend(int(c) for c in handle.read().split())
        except OSError:
            continue
    return found


def _tree_memory(proc: psutil.Process) -> int:
    if os.path.exists(f"/proc/{proc.pid}/task/{proc.pid}/children"):
        return sum(map(_memory, _tree(proc.pid)))
    return sum(_memory(p.pid) for p in [proc, *proc.children(recursive=True)])


def measure(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float, int]:
    """(wall seconds, peak memory of the process tree in MB (sum of PSS), CPU seconds of the tree
    (user + system), exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = 0
    ps = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, _tree_memory(ps))
        except psutil.Error:
            pass
        time.sleep(0.25)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
    return wall, peak / 2**20, cpu, proc.returncode


def best(runs: int, cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float, int]:
    """The run with the least wall time of ``runs`` (other processes on a shared machine only add)."""
    return min((measure(cmd, env) for _ in range(max(1, runs))), key=lambda r: (r[3] != 0, r[0]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=128, help="trace size (default 128)")
    parser.add_argument(
        "-j", "--jobs", type=int, default=os.cpu_count() or 1, help="npuprof reader processes"
    )
    parser.add_argument("--keep", type=Path, default=None, help="work in this dir and keep it")
    parser.add_argument("--no-json", action="store_true", help="skip json.load (slow at 1 GB: ~30 s, 5 GB)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of npuprof per setting; the fastest counts"
    )
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="npuprof-bench-"))
    rank_dir = work / "bench_1_20250101000000000_ascend_pt"
    rank_dir.mkdir(parents=True, exist_ok=True)
    (rank_dir / "profiler_info_0.json").write_text("{}")
    trace = rank_dir / "bench.1.pt.trace.json"
    made = work / f"synthetic-{args.size_mb:g}MB.json"  # with --keep: reuse the trace of the same size
    t0 = time.perf_counter()
    if trace.exists() and made.exists():
        counts = json.loads(made.read_text())
        verb = "reused"
    else:
        counts = write_synthetic_trace(trace, args.size_mb)
        made.write_text(json.dumps(counts))
        verb = "synthesised"
    size_mb = trace.stat().st_size / 1e6
    print(
        f"{verb} {size_mb:.0f} MB, {counts['events']:,} events ({counts['steps']} steps, "
        f"{counts['kernels']:,} kernels, {counts['cpu_ops']:,} operators) in {time.perf_counter() - t0:.1f} s"
    )

    load = os.getloadavg()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    results: list[tuple[str, float, float, float, int]] = []
    cmd = [sys.executable, "-m", "npuprof.analysis.parse", "--force", "-j", str(args.jobs), str(rank_dir)]
    results.append((f"npuprof analyse (-j {args.jobs})", *best(args.repeat, cmd, env)))
    cmd1 = [sys.executable, "-m", "npuprof.analysis.parse", "--force", "-j", "1", str(rank_dir)]
    results.append(("npuprof analyse (-j 1)", *best(args.repeat, cmd1, env)))
    if not args.no_json:
        results.append(("json.load", *measure([sys.executable, "-c", JSON_LOAD, str(trace)])))
    hta_python = os.environ.get("NPUPROF_HTA_PYTHON") or sys.executable
    has_hta = (
        subprocess.run([hta_python, "-c", "import hta.trace_analysis"], capture_output=True).returncode == 0
    )
    if has_hta:
        hta_dir = work / "hta"
        hta_dir.mkdir(exist_ok=True)
        link = hta_dir / trace.name
        if not link.exists():
            os.link(trace, link)
        results.append(("HolisticTraceAnalysis load", *measure([hta_python, "-c", HTA_LOAD, str(hta_dir)])))

    base_t, base_m = results[0][1], results[0][2]
    print(f"\n{'':32} {'wall s':>8} {'cpu s':>7} {'peak MB':>9} {'s/GB':>7} {'x time':>7} {'x mem':>7}")
    for name, wall, peak, cpu, rc in results:
        note = "" if rc == 0 else f"  (exit {rc})"
        print(
            f"{name:32} {wall:8.2f} {cpu:7.2f} {peak:9.0f} {wall / size_mb * 1000:7.2f} {wall / base_t:7.2f} "
            f"{peak / base_m:7.2f}{note}"
        )
    if not has_hta:
        print("(HolisticTraceAnalysis not installed: set NPUPROF_HTA_PYTHON, see .ci/interop.sh)")
    print(
        f"target for 1 GB: < 5 s and < 1024 MB; load average before: {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f} on {os.cpu_count()} cores; work dir: {work}"
    )
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
