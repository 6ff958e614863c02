"""Benchmark `npuprof analyse` (parse + every table) against json.load and HolisticTraceAnalysis.

    .venv/bin/python bench/analyse_bench.py                 # 128 MB trace, well under 2 minutes
    .venv/bin/python bench/analyse_bench.py --size-mb 1024   # the 1 GB figure of the issue

Synthesises a realistic Kineto-style CUDA trace (npuprof.analysis.synthetic), then runs each contender in its
own subprocess and samples the RSS of its whole process tree (workers included) every 20 ms; prints one
table with wall time, peak memory and the ratios to npuprof. HTA runs when importable here or through
NPUPROF_HTA_PYTHON. Exits 0.
"""

from __future__ import annotations

import argparse
import os
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


def measure(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS of the process tree in MB, exit code)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = 0
    ps = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.02)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
    return wall, peak / 2**20, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=128, help="trace size (default 128)")
    parser.add_argument(
        "-j", "--jobs", type=int, default=os.cpu_count() or 1, help="npuprof reader processes"
    )
    parser.add_argument("--keep", type=Path, default=None, help="work in this dir and keep it")
    parser.add_argument("--no-json", action="store_true", help="skip json.load (slow at 1 GB: ~30 s, 5 GB)")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="npuprof-bench-"))
    rank_dir = work / "bench_1_20250101000000000_ascend_pt"
    rank_dir.mkdir(parents=True, exist_ok=True)
    (rank_dir / "profiler_info_0.json").write_text("{}")
    trace = rank_dir / "bench.1.pt.trace.json"
    t0 = time.perf_counter()
    counts = write_synthetic_trace(trace, args.size_mb)
    size_mb = trace.stat().st_size / 1e6
    print(
        f"synthesised {size_mb:.0f} MB, {counts['events']:,} events ({counts['steps']} steps, "
        f"{counts['kernels']:,} kernels, {counts['cpu_ops']:,} operators) in {time.perf_counter() - t0:.1f} s"
    )

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    results: list[tuple[str, float, float, int]] = []
    cmd = [sys.executable, "-m", "npuprof.analysis.parse", "--force", "-j", str(args.jobs), str(rank_dir)]
    results.append((f"npuprof analyse (-j {args.jobs})", *measure(cmd, env)))
    cmd1 = [sys.executable, "-m", "npuprof.analysis.parse", "--force", "-j", "1", str(rank_dir)]
    results.append(("npuprof analyse (-j 1)", *measure(cmd1, env)))
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
    print(f"\n{'':32} {'wall s':>8} {'peak MB':>9} {'s/GB':>7} {'x time':>7} {'x mem':>7}")
    for name, wall, peak, rc in results:
        note = "" if rc == 0 else f"  (exit {rc})"
        print(
            f"{name:32} {wall:8.2f} {peak:9.0f} {wall / size_mb * 1000:7.2f} {wall / base_t:7.2f} "
            f"{peak / base_m:7.2f}{note}"
        )
    if not has_hta:
        print("(HolisticTraceAnalysis not installed: set NPUPROF_HTA_PYTHON, see .ci/interop.sh)")
    print(f"target for 1 GB: < 5 s and < 1024 MB; work dir: {work}")
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
