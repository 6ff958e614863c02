"""Scale: `npuprof analyse` over 16, 64 and 256 ranks, and 8 post-processors at once, on this machine.

    .venv/bin/python bench/scale.py                         # ~1 minute on 2 cores (quiet)
    .venv/bin/python bench/scale.py --ranks 16,64,256,1024  # further out (~1 GB of disk a 1024-rank run)
    .venv/bin/python bench/scale.py --ranks 4,8 --quick     # seconds: checks it runs, figures meaningless

Ranks: a pool of small synthetic CUDA traces (npuprof.analysis.synthetic: ~1 MB each, 5 steps of 64 layers,
4,200 events, a distinct rank and seed each, gzipped as the post-processor leaves them) is written once. Each
run gets a fresh result dir of N rank dirs laid out as `npuprof run` writes them
(``{worker}_{pid}_{17-digit stamp}_ascend_pt/`` with ``profiler_info_{rank}.json``,
``profiler_metadata.json``, ``npuprof_capture.json`` status complete and the ``.pt.trace.json.gz``,
hard-linked from the pool), then ``npuprof analyse DIR --format json`` (default ``-j``: one reader per core)
runs on it twice: unparsed (every rank parsed, then the report) and again (every rank cached: the report
alone). The output is checked (N ranks, no problems). Sizes are interleaved round by round, the order
rotating; medians. Each size is compared with the one before it, measured in the same run: linear in ranks
means time(4N) / time(N) <= 4 (less: start-up is a fixed cost); bounded memory means the peak of the process
tree (the sum of its processes' PSS, sampled every 50 ms, the readers included) grows,
from the smallest size to the largest, by less than one reader's working set (the largest process of the
smallest unparsed run).

Post-processors: 8 ``python -m npuprof.results.postprocess`` started at once, each handed one job as
``Postprocessor.submit`` writes it (write the capture's files, parse, gzip) for its own 40 MB plain trace
(~145,000 events: a capture of a few steps of a mid-size model with shapes, memory and stacks), against one
alone, in the same run. On 2 cores 8 jobs take ~4x one job's time; their memory should be at most 8 times
one job's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, ROOT, bench_env, interleaved, median, npuprof_launcher, print_table, verdict
from analyse_bench import _memory, _tree

sys.path.insert(0, str(ROOT))

SAMPLE_S = 0.05  # every 20 ms costs the measured run ~5 % of its CPU on 2 cores
TIME_SLACK = 1.10  # linear in ranks, +10 % for the noise of a shared machine
PP_MEMORY_SLACK = 1.10  # N post-processors at once: at most N times one alone, +10 %
STAMP0 = 1_767_225_600.0  # 2026-01-01: the rank dirs' time stamps (17 digits, local time)
RANKS_PER_NODE = 8


@dataclass
class Sample:
    """One measured run: wall and CPU seconds, peak memory of the process tree(s) (sum of PSS, MB) and
    of its largest process (MB)."""

    wall: float
    cpu: float
    peak_mb: float
    largest_mb: float


def watch(procs: Sequence[subprocess.Popen[bytes]], start: float, errors: Sequence[IO[bytes]]) -> Sample:
    """Sample the trees of ``procs`` until every one has ended; raise, with its stderr (``errors``, files
    rather than pipes: nobody reads a pipe meanwhile), if one failed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = largest = 0
    while True:
        running = [p for p in procs if p.poll() is None]
        if not running:
            break
        sizes = [_memory(pid) for p in running for pid in _tree(p.pid)]
        peak, largest = max(peak, sum(sizes)), max(largest, max(sizes, default=0))
        try:
            running[0].wait(timeout=SAMPLE_S)
        except subprocess.TimeoutExpired:
            pass
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    for p, err in zip(procs, errors, strict=True):
        if p.returncode:
            err.seek(0)
            text = err.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"{p.args} exited {p.returncode}:\n{text}")
    return Sample(wall, cpu, peak / 2**20, largest / 2**20)


# ---- rank dirs as `npuprof run` writes them ---------------------------------------------------------------
def worker_of(rank: int) -> str:
    return f"node{rank // RANKS_PER_NODE}"


def write_pool(pool: Path, count: int, trace_mb: float, suffix: str) -> list[Path]:
    """``count`` distinct synthetic traces (rank r of a world of ``count``), written once."""
    from npuprof.analysis.synthetic import write_synthetic_trace

    pool.mkdir(parents=True, exist_ok=True)
    traces = []
    for rank in range(count):
        trace = pool / f"rank{rank}{suffix}"
        if not trace.exists():
            write_synthetic_trace(trace, trace_mb, rank=rank, world=count, seed=rank)
        traces.append(trace)
    return traces


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def capture_files(rank: int, world: int, steps: list[int]) -> tuple[dict[str, dict], dict]:
    """What a capture's post-processing job writes (``files``) and its capture record, as
    npuprof.agent.capture builds them (backend torch-cuda)."""
    from npuprof.config import ProfileConfig

    cfg = ProfileConfig(output="result")
    begin_ns = int(STAMP0 * 1e9) + rank * 1_000_000
    info = {
        "config": {"common_config": cfg.common_config(), "experimental_config": cfg.experimental_config()},
        "start_info": {
            "collectionTimeBegin": begin_ns,
            "MonotonicTimeBegin": begin_ns,
            "syscntEnable": False,
        },
        "end_info": {"collectionTimeEnd": begin_ns + 10**9, "MonotonicTimeEnd": begin_ns + 10**9},
        "torch_version": "2.5.1+cu124",
        "rank_id": rank,
    }
    metadata = {
        "ENV_VARIABLES": {"OMP_NUM_THREADS": "1"},
        "distributed_args": {"rank": rank, "world_size": world, "backend": "nccl"},
    }
    record = {
        "status": "complete",
        "run_id": "bench-scale",
        "pid": 10_000 + rank,
        "rank": rank,
        "worker": worker_of(rank),
        "backend": "torch-cuda",
        "device": f"cuda:{rank % RANKS_PER_NODE}",
        "updated_ns": begin_ns + 10**9,
        "steps": steps,
        "detail": "",
        "extras": [],
    }
    return {f"profiler_info_{rank}.json": info, "profiler_metadata.json": metadata}, record


def rank_dir_path(root: Path, rank: int) -> Path:
    from npuprof.results import layout

    stamp = layout.timestamp_ms(STAMP0 + rank / 1000)
    return root / layout.rank_dir_name(worker_of(rank), 10_000 + rank, stamp)


def make_result_dir(root: Path, traces: list[Path], ranks: int, steps: list[int]) -> Path:
    """A result dir of ``ranks`` finished, unparsed rank dirs (the traces hard-linked from the pool)."""
    for rank in range(ranks):
        rank_dir = rank_dir_path(root, rank)
        rank_dir.mkdir(parents=True)
        files, record = capture_files(rank, ranks, steps)
        trace_name = f"{worker_of(rank)}.{int(STAMP0 * 1e9) + rank}.pt.trace.json.gz"
        _link(traces[rank], rank_dir / trace_name)
        for name, content in {**files, "npuprof_capture.json": {**record, "trace": trace_name}}.items():
            (rank_dir / name).write_text(json.dumps(content, indent=4))
    return root


def run_analyse(result_dir: Path, ranks: int, out: Path) -> Sample:
    """``npuprof analyse result_dir --format json``, measured; checks it reported on every rank."""
    start = time.perf_counter()
    with open(out, "wb") as stdout, tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [*npuprof_launcher(), "analyse", str(result_dir), "--format", "json"],
            stdout=stdout,
            stderr=stderr,
            env=bench_env(),
        )
        sample = watch([proc], start, [stderr])
    report = json.loads(out.read_text())
    if len(report["ranks"]) != ranks or report["problems"]:
        raise RuntimeError(f"{result_dir}: {len(report['ranks'])} of {ranks} ranks, {report['problems']}")
    return sample


# ---- post-processors ------------------------------------------------------------------------------------
def run_postprocessors(root: Path, traces: list[Path], jobs: int) -> Sample:
    """``jobs`` post-processors started at once, one job each (as Postprocessor.submit writes it)."""
    lines = []
    for rank in range(jobs):
        rank_dir = rank_dir_path(root, rank)
        rank_dir.mkdir(parents=True)
        files, record = capture_files(rank, jobs, steps=[])
        (rank_dir / "npuprof_capture.json").write_text(json.dumps({**record, "status": "capturing"}))
        trace = rank_dir / f"{worker_of(rank)}.{int(STAMP0 * 1e9) + rank}.pt.trace.json"
        _link(traces[rank], trace)
        record["trace"] = trace.name
        job = {
            "rank_dir": str(rank_dir),
            "trace": str(trace),
            "files": files,
            "record": record,
            "analyse": True,
            "gzip": True,
        }
        lines.append((json.dumps(job, separators=(",", ":"), ensure_ascii=False) + "\n").encode())
    with contextlib.ExitStack() as stack:
        errors = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(jobs)]
        start = time.perf_counter()
        procs = [
            subprocess.Popen(
                [PYTHON, "-m", "npuprof.results.postprocess"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=bench_env(),
                # each in a session of its own, as npuprof starts them: a post-processor lowers its session's
                # autogroup to nice 19 (docs/architecture.md, "Process model"), which was the bench's
                start_new_session=True,
            )
            for err in errors
        ]
        for proc, line in zip(procs, lines, strict=True):
            assert proc.stdin is not None
            proc.stdin.write(line)
            proc.stdin.close()  # EOF: the post-processor ends after this job
        sample = watch(procs, start, errors)
    for rank in range(jobs):
        rank_dir = rank_dir_path(root, rank)
        done = rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done"
        packed = list(rank_dir.glob("*.pt.trace.json.gz"))
        if not done.exists() or len(packed) != 1 or list(rank_dir.glob("*.pt.trace.json")):
            raise RuntimeError(
                f"{rank_dir}: not parsed and gzipped: {sorted(p.name for p in rank_dir.iterdir())}"
            )
    return sample


# ---- the table ------------------------------------------------------------------------------------------
def _med(samples: list[Sample], field: str) -> float:
    return median([getattr(s, field) for s in samples])


def _analyse_rows(
    label: str, sizes: list[int], samples: dict[int, list[Sample]], reader_mb: float
) -> list[list[object]]:
    """One row a size: time and memory against the size before it; the budget: time linear in ranks
    (+10 %), memory added since the smallest size at most one reader's working set (``reader_mb``)."""
    rows: list[list[object]] = []
    first_peak = _med(samples[sizes[0]], "peak_mb")
    for i, n in enumerate(sizes):
        wall, peak = _med(samples[n], "wall"), _med(samples[n], "peak_mb")
        figure = (
            f"{wall:.2f} s ({wall / n * 1000:.1f} ms/rank), {peak:.0f} MB "
            f"(largest process {_med(samples[n], 'largest_mb'):.0f} MB)"
        )
        if i == 0:
            rows.append([f"{label}, {n} ranks", "-", figure, "(the baseline)", "-", "-"])
            continue
        prev = sizes[i - 1]
        base_wall, base_peak = _med(samples[prev], "wall"), _med(samples[prev], "peak_mb")
        time_ratio, time_budget = wall / base_wall, n / prev * TIME_SLACK
        marginal = (wall - base_wall) / (n - prev) * 1000
        added = peak - first_peak
        rows.append(
            [
                f"{label}, {n} ranks",
                f"{prev} ranks: {base_wall:.2f} s, {base_peak:.0f} MB",
                figure,
                f"x{time_ratio:.2f} time for x{n / prev:g} ranks ({marginal:.1f} ms a rank added), "
                f"x{peak / base_peak:.2f} memory ({added:+.0f} MB since {sizes[0]} ranks)",
                f"time <= x{time_budget:.2f}, memory +{reader_mb:.0f} MB (a reader) since {sizes[0]} ranks",
                "met" if time_ratio <= time_budget and added <= reader_mb else "MISSED",
            ]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the bench runs, nothing more"
    )
    parser.add_argument("--ranks", default=None, help="rank counts, comma-separated (default 16,64,256)")
    parser.add_argument("--trace-mb", type=float, default=None, help="each rank's trace (default 1 MB)")
    parser.add_argument("--postprocessors", type=int, default=None, help="started at once (default 8)")
    parser.add_argument("--pp-trace-mb", type=float, default=None, help="their traces (default 40 MB)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 3)")
    parser.add_argument("--keep", type=Path, default=None, help="work in this dir and keep its trace pools")
    args = parser.parse_args()
    sizes = sorted({int(x) for x in (args.ranks or ("4,8" if args.quick else "16,64,256")).split(",")})
    trace_mb = args.trace_mb or (0.2 if args.quick else 1.0)
    pp_jobs = args.postprocessors or (2 if args.quick else 8)
    pp_mb = args.pp_trace_mb or (1.0 if args.quick else 40.0)
    repeats = args.repeats or (1 if args.quick else 3)
    if sizes[0] < 1 or pp_jobs < 1:
        parser.error("rank and job counts must be at least 1")

    work = args.keep or Path(tempfile.mkdtemp(prefix="npuprof_scale_"))
    load = os.getloadavg()
    try:
        t0 = time.perf_counter()
        traces = write_pool(work / f"pool-{trace_mb:g}MB", sizes[-1], trace_mb, ".pt.trace.json.gz")
        pp_traces = write_pool(work / f"pool-pp-{pp_mb:g}MB", pp_jobs, pp_mb, ".pt.trace.json")
        steps = _steps_of(traces[0])
        made = time.perf_counter() - t0
        cold: dict[int, list[Sample]] = {n: [] for n in sizes}
        warm: dict[int, list[Sample]] = {n: [] for n in sizes}

        def analyse_size(n: int, round_no: int) -> float:
            root = work / f"result-{n}-{round_no}"
            make_result_dir(root, traces, n, steps)
            try:
                cold[n].append(run_analyse(root, n, work / "report.json"))
                warm[n].append(run_analyse(root, n, work / "report.json"))
            finally:
                shutil.rmtree(root, ignore_errors=True)
            return cold[n][-1].wall

        pp: dict[int, list[Sample]] = {1: [], pp_jobs: []}

        def postprocess(jobs: int, round_no: int) -> float:
            root = work / f"pp-{jobs}-{round_no}"
            try:
                pp[jobs].append(run_postprocessors(root, pp_traces, jobs))
            finally:
                shutil.rmtree(root, ignore_errors=True)
            return pp[jobs][-1].wall

        variants = {f"{n} ranks": (lambda r, n=n: analyse_size(n, r)) for n in sizes}
        variants["1 post-processor"] = lambda r: postprocess(1, r)
        if pp_jobs > 1:
            variants[f"{pp_jobs} post-processors"] = lambda r: postprocess(pp_jobs, r)
        interleaved(variants, repeats)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)

    # one reader's working set: the largest process of the unparsed run at the smallest size
    reader_mb = _med(cold[sizes[0]], "largest_mb")
    rows = _analyse_rows("npuprof analyse, unparsed (parse + report)", sizes, cold, reader_mb)
    rows += _analyse_rows("npuprof analyse, parsed (report only)", sizes, warm, reader_mb)
    one, many = pp[1], pp[pp_jobs]
    wall1, cpu1, peak1 = _med(one, "wall"), _med(one, "cpu"), _med(one, "peak_mb")
    wall_n, cpu_n, peak_n = _med(many, "wall"), _med(many, "cpu"), _med(many, "peak_mb")
    cores = os.cpu_count() or 1
    rows.append(
        [
            f"{pp_jobs} post-processors at once ({pp_mb:g} MB plain trace each)",
            f"1 alone: {wall1:.2f} s ({cpu1:.2f} s CPU), {peak1:.0f} MB",
            f"{wall_n:.2f} s ({cpu_n:.2f} s CPU), {peak_n:.0f} MB "
            f"(largest process {_med(many, 'largest_mb'):.0f} MB)",
            f"x{wall_n / wall1:.2f} wall (x{pp_jobs / min(cores, pp_jobs):g} if the cores were all theirs), "
            f"x{cpu_n / cpu1:.2f} CPU, x{peak_n / peak1:.2f} memory",
            f"memory <= x{pp_jobs * PP_MEMORY_SLACK:g}",
            verdict(peak_n / peak1, pp_jobs * PP_MEMORY_SLACK),
        ]
    )
    rows.append(
        [
            "  one post-processor's peak against its trace",
            f"trace {pp_mb:g} MB",
            f"{peak1:.0f} MB",
            f"x{peak1 / pp_mb:.2f} the trace size",
            "-",
            "-",
        ]
    )
    notes = [
        f"{repeats} round(s), sizes and post-processor runs interleaved (order rotating), medians; "
        f"{trace_mb:g} MB gzipped trace a rank ({steps and len(steps)} steps), pool written in {made:.1f} s",
        "memory: peak over the run of the sum of the PSS of every process of the tree(s), sampled every "
        f"{SAMPLE_S * 1000:.0f} ms; 'largest process': the largest one PSS in a sample",
        f"linear: time(4N)/time(N) <= 4 (below: the start-up is a fixed cost); {cores} cores, load average "
        f"before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
    ]
    print_table(
        "scale (bench/scale.py)",
        ["what", "baseline (same run)", "npuprof", "ratio", "budget", "verdict"],
        rows,
        notes,
    )
    return 0


def _steps_of(trace: Path) -> list[int]:
    """The ProfilerStep numbers of a synthetic trace (its capture record lists them)."""
    import gzip
    import re

    opener = gzip.open if trace.name.endswith(".gz") else open
    with opener(trace, "rt") as handle:
        return sorted({int(m) for m in re.findall(r"ProfilerStep#(\d+)", handle.read())})


if __name__ == "__main__":
    sys.exit(main())
