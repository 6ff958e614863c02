"""Benchmark `npuprof analyse` (parse + every table) against json.load and HolisticTraceAnalysis.

    .venv/bin/python bench/analyse_bench.py                 # 128 MB traces, a few minutes
    .venv/bin/python bench/analyse_bench.py --size-mb 1024   # the 1 GB figures of the issue
    .venv/bin/python bench/analyse_bench.py --size-mb 256 --repeat 3 --no-json   # npuprof only, best of 3
    .venv/bin/python bench/analyse_bench.py --quick          # 8 MB, npuprof only: checks it runs
    .venv/bin/python bench/analyse_bench.py --cases kineto,mix   # some of the cases

One table per case, each trace synthesised at the size asked:

* ``kineto``: a realistic Kineto-style CUDA trace (npuprof.analysis.synthetic);
* ``mix``: the event mix of ``--profile-memory --with-stack`` (Kineto form): a third ``[memory]`` instant
  events, a third ``python_function`` frames, a third operators, runtime launches, kernels and their flows;
* ``string-ts``: torch_npu's form (``trace_view.json``: a bare JSON array, ``ts`` as strings of epoch µs
  with nanosecond decimals): operators with ``Call stack``, ``CANN`` runtime calls, ``Ascend Hardware``
  tasks (no category), ``async_npu`` flows and ``[memory]`` events.

Each contender runs in its own subprocess; the memory of its whole process tree is sampled (workers
included; the sum of their proportional set sizes, so pages a forked worker shares with its parent count
once) every 250 ms; the table has wall time, CPU time (user + system, all processes), peak memory and the
ratios to npuprof, and the load average (other work on the machine inflates wall times: compare CPU
times too). json.load and HTA run on the kineto case only; HTA when importable here or through
NPUPROF_HTA_PYTHON. Exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
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


# ---- the mix of --profile-memory --with-stack, Kineto form -------------------------------------------------
_MIX_HEADER = """{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA Synthetic", "totalGlobalMem": 85031714816}],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
  "profile_memory": 1,
  "with_stack": 1,
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}},
  {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}"""
_MIX_X = """,
  {
    "ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d,
    "ts": %.3f, "dur": %.3f,
    "args": {
      %s
    }
  }"""
_MIX_MEM = """,
  {
    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
    "pid": 4242, "tid": 4242,
    "ts": %.3f,
    "args": {
      "Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Device Id": 0, "Device Type": 1, \
"Addr": %d, "Ev Idx": %d
    }
  }"""
_MIX_FLOW = """,
  {
    "ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,
    "cat": "ac2g", "name": "ac2g"%s
  }"""
_FRAMES = [
    "train.py(88): <module>",
    "train.py(61): train_step",
    "torch/nn/modules/module.py(1773): _call_impl",
    "model.py(40): forward",
    "torch/nn/modules/linear.py(125): forward",
    "torch/nn/functional.py(2380): linear",
]


def write_mix_trace(path: Path, size_mb: float, seed: int = 0) -> dict[str, int]:
    """A Kineto trace of about ``size_mb`` MB whose events are a third ``python_function`` frames, a third
    ``[memory]`` instants and a third the rest (2 operators, a runtime launch, a kernel, its ac2g flow's two
    ends) per layer; ``ProfilerStep#N`` every 64 layers."""
    rng = random.Random(seed)
    target = int(size_mb * 1e6)
    counts = {"steps": 0, "kernels": 0, "cpu_ops": 0, "events": 2}
    t, t_gpu, ext, idx, addr, allocated = 1_000_000.0, 1_000_000.0, 0, 0, 1 << 40, 1 << 30
    with open(path, "w") as out:
        out.write(_MIX_HEADER)
        written, step = len(_MIX_HEADER), 1
        while written < target:
            parts, step_t0 = [""], t
            for _layer in range(64):
                for depth, frame in enumerate(_FRAMES):
                    args = f'"Python parent id": {idx}, "Python id": {idx + 1}, "Ev Idx": {idx}'
                    parts.append(
                        _MIX_X % ("python_function", frame, 4242, 4242, t + depth * 0.2, 40 - depth, args)
                    )
                    idx += 1
                ext += 1
                dur = 20.0 + rng.random() * 10
                shapes = '"Input Dims": [[64, 1024], [1024, 1024]], "Input type": ["float", "float"]'
                parts.append(
                    _MIX_X
                    % ("cpu_op", "aten::linear", 4242, 4242, t + 1.5, dur, f'"External id": {ext}, {shapes}')
                )
                parts.append(
                    _MIX_X
                    % ("cpu_op", "aten::addmm", 4242, 4242, t + 2, dur - 3, f'"External id": {ext}, {shapes}')
                )
                launch = t + 5
                parts.append(
                    _MIX_X
                    % (
                        "cuda_runtime",
                        "cudaLaunchKernel",
                        4242,
                        4242,
                        launch,
                        6.0,
                        f'"External id": {ext}, "correlation": {ext}',
                    )
                )
                t_gpu = max(t_gpu, launch + 8)
                kdur = 15.0 + rng.random() * 20
                kargs = (
                    f'"External id": {ext}, "device": 0, "stream": 7, "correlation": {ext}, "grid": [264, 1]'
                )
                parts.append(_MIX_X % ("kernel", "sm90_xmma_gemm_f16f16_f32_tn_n", 0, 7, t_gpu, kdur, kargs))
                parts.append(_MIX_FLOW % ("s", ext, 4242, 4242, launch, ""))
                parts.append(_MIX_FLOW % ("f", ext, 0, 7, t_gpu, ', "bp": "e"'))
                t_gpu += kdur + 1
                for k in range(3):  # an allocation and its free, three times
                    size = (k + 1) * 262144
                    allocated += size
                    parts.append(_MIX_MEM % (t + 3 + k, 2 << 30, allocated, size, addr, idx))
                    allocated -= size
                    parts.append(_MIX_MEM % (t + dur - k, 2 << 30, allocated, -size, addr, idx + 1))
                    idx += 2
                    addr += size
                counts["kernels"] += 1
                counts["cpu_ops"] += 2
                t += dur + 8
            t = max(t, t_gpu) + 50
            parts[0] = _MIX_X % (
                "user_annotation",
                f"ProfilerStep#{step}",
                4242,
                4242,
                step_t0,
                t - step_t0 - 1,
                "",
            )
            counts["steps"] += 1
            counts["events"] += len(parts)
            text = "".join(parts)
            out.write(text)
            written += len(text)
            step += 1
        out.write('\n  ],\n  "traceName": "mix.pt.trace.json"\n}\n')
    return counts


# ---- torch_npu's form: a bare array, string times ------------------------------------------------------
_EPOCH_NS = 1_704_161_511_000_000_000  # 2024-01-02, as in the real trace_view.json of tests/fixtures
_NPU_OP = (
    '{"ph": "X", "name": "%s", "pid": 437675, "tid": 437675, "ts": "%s", "dur": %.3f, "cat": "cpu_op", '
    '"args": {"Sequence number": %d, "Fwd thread id": 0%s}}'
)
_NPU_CANN = (
    '{"name": "AscendCL@%s", "pid": 43767502, "tid": 437675, "ts": "%s", "dur": %.3f, "args": {"Thread Id": '
    '437675, "Mode": "ACL_OP", "level": "acl", "id": "%s", "item_id": "0", "connection_id": %d}, "ph": "X"}'
)
_NPU_TASK = (
    '{"name": "%s", "pid": 800, "tid": 3, "ts": "%s", "dur": %.3f, "args": {"Model Id": 4294967295, '
    '"Task Type": "AI_CORE", "Stream Id": 3, "Task Id": %d, "Batch Id": 0, "Subtask Id": 4294967295, '
    '"connection_id": %d}, "ph": "X"}'
)
_NPU_FLOW = (
    '{"ph": "%s", "bp": "e", "name": "torch_to_npu", "id": %d, "pid": %d, "tid": %d, "ts": "%s", '
    '"cat": "async_npu"}'
)
_NPU_MEM = (
    '{"ph": "i", "name": "[memory]", "pid": 437675, "tid": 437675, "ts": "%s", "s": "t", "args": {'
    '"Addr": %d, "Bytes": %d, "Total Allocated": %d, "Total Reserved": %d, "Total Active": %d, '
    '"Device Type": 20, "Device Id": 0}, "cat": "cpu_instant_event"}'
)
_NPU_META = [
    '{"ph": "M", "name": "process_name", "pid": 437675, "tid": 0, "args": {"name": "Python"}}',
    '{"ph": "M", "name": "process_name", "pid": 43767502, "tid": 0, "args": {"name": "CANN"}}',
    '{"ph": "M", "name": "process_name", "pid": 800, "tid": 0, "args": {"name": "Ascend Hardware"}}',
    '{"ph": "M", "name": "thread_name", "pid": 800, "tid": 3, "args": {"name": "Stream 3"}}',
]
_STACK = ";".join(reversed(_FRAMES)).replace('"', "")


def _us(ns: int) -> str:
    whole, frac = divmod(ns, 1000)
    return f"{whole}.{frac:03d}"


def write_npu_trace(path: Path, size_mb: float, seed: int = 0) -> dict[str, int]:
    """torch_npu's trace_view.json form of about ``size_mb`` MB: per layer an operator with its Call stack
    and an inner one, the CANN call, the Ascend Hardware task, the async_npu flow's two ends and two
    [memory] events; a ``ProfilerStep#N`` operator every 64 layers. In torch_npu's order: the Python
    process's events, the metadata, then the CANN calls, the device tasks and the flows."""
    rng = random.Random(seed)
    target = int(size_mb * 1e6)
    counts = {"steps": 0, "kernels": 0, "cpu_ops": 0, "events": len(_NPU_META)}
    t = t_dev = 420_306_491  # ns after _EPOCH_NS
    task, allocated, addr = 0, 1 << 30, 1 << 40
    sections = [path.with_name(f"{path.name}.{k}") for k in range(4)]  # python, CANN, device, flows
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(section, "w")) for section in sections]
        written, step, first = 1, 1, True
        while written < target:
            host: list[str] = [""]
            cann: list[str] = []
            device: list[str] = []
            flows: list[str] = []
            step_t0 = t
            for _layer in range(64):
                task += 1
                dur = 20_000 + rng.randrange(10_000)
                stack = f', "Call stack": "{_STACK}"'
                host.append(_NPU_OP % ("aten::linear", _us(_EPOCH_NS + t + 1_000), dur / 1000, task, stack))
                host.append(_NPU_OP % ("aclnnMm", _us(_EPOCH_NS + t + 2_000), (dur - 3_000) / 1000, -1, ""))
                launch = t + 5_123
                cann.append(_NPU_CANN % ("aclnnMm", _us(_EPOCH_NS + launch), 6.017, "aclnnMm", task))
                t_dev = max(t_dev, launch + 8_000)
                kdur = 15_000 + rng.randrange(20_000)
                flow_id = _EPOCH_NS + t_dev
                device.append(
                    _NPU_TASK
                    % ("aclnnMm_MatMulCommon_MatMulV2", _us(_EPOCH_NS + t_dev), kdur / 1000, task, task)
                )
                flows.append(_NPU_FLOW % ("s", flow_id, 437675, 437675, _us(_EPOCH_NS + t + 2_500)))
                flows.append(_NPU_FLOW % ("f", flow_id, 800, 3, _us(_EPOCH_NS + t_dev)))
                t_dev += kdur + 1_000
                size = 262144
                host.append(
                    _NPU_MEM
                    % (_us(_EPOCH_NS + t + 3_000), addr, size, allocated + size, 2 << 30, allocated + size)
                )
                host.append(_NPU_MEM % (_us(_EPOCH_NS + t + dur), addr, -size, allocated, 2 << 30, allocated))
                addr += size
                counts["kernels"] += 1
                counts["cpu_ops"] += 2
                t += dur + 8_000
            t = max(t, t_dev) + 50_000
            host[0] = _NPU_OP % (
                f"ProfilerStep#{step}",
                _us(_EPOCH_NS + step_t0),
                (t - step_t0 - 1_000) / 1000,
                -1,
                "",
            )
            counts["steps"] += 1
            for handle, part in zip(handles, (host, cann, device, flows), strict=True):
                counts["events"] += len(part)
                text = ("" if first else ", ") + ", ".join(part)
                handle.write(text)
                written += len(text)
            first = False
            step += 1
    with open(path, "wb") as out:
        out.write(b"[")
        for k, section in enumerate(sections):
            if k == 1:
                out.write(b", " + ", ".join(_NPU_META).encode())
            if k:
                out.write(b", ")
            with open(section, "rb") as part:
                while block := part.read(8 << 20):
                    out.write(block)
            section.unlink()
        out.write(b"]")
    return counts


CASES = {"kineto": write_synthetic_trace, "mix": write_mix_trace, "string-ts": write_npu_trace}


def run_case(case: str, args: argparse.Namespace, work: Path) -> list[tuple[str, float, float, float, int]]:
    rank_dir = work / case / "bench_1_20250101000000000_ascend_pt"
    rank_dir.mkdir(parents=True, exist_ok=True)
    (rank_dir / "profiler_info_0.json").write_text("{}")
    trace = rank_dir / "bench.1.pt.trace.json"  # whatever the form: analyse tells forms by content
    made = work / case / f"synthetic-{args.size_mb:g}MB.json"  # with --keep: reuse the trace of the size
    t0 = time.perf_counter()
    if trace.exists() and made.exists():
        counts = json.loads(made.read_text())
        verb = "reused"
    else:
        counts = CASES[case](trace, args.size_mb)
        made.write_text(json.dumps(counts))
        verb = "synthesised"
    size_mb = trace.stat().st_size / 1e6
    print(
        f"\n[{case}] {verb} {size_mb:.0f} MB, {counts['events']:,} events ({counts['steps']} steps, "
        f"{counts['kernels']:,} kernels, {counts['cpu_ops']:,} operators) in {time.perf_counter() - t0:.1f} s"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    _drop_databases(rank_dir)  # left by _db_cost of a run with --keep: a parse rewrites a db it finds
    results: list[tuple[str, float, float, float, int]] = []
    cmd = [sys.executable, "-m", "npuprof.analysis.parse", "--force", "-j", str(args.jobs), str(rank_dir)]
    results.append((f"npuprof analyse (-j {args.jobs})", *best(args.repeat, cmd, env)))
    cmd1 = [sys.executable, "-m", "npuprof.analysis.parse", "--force", "-j", "1", str(rank_dir)]
    results.append(("npuprof analyse (-j 1)", *best(args.repeat, cmd1, env)))
    if case == "kineto":
        results += _others(args, work / case, trace)
    _table(results, size_mb)
    _db_cost(rank_dir, env)
    return results


def _drop_databases(rank_dir: Path) -> None:
    """The SQLite files of an earlier `--db` parse: a parse that finds one writes it again, so the text
    tables' figures would carry the db export's time (the bench measured that with --keep until now)."""
    from npuprof.results import layout

    parsed = rank_dir / layout.PARSED_DIR
    if parsed.is_dir():
        for path in parsed.iterdir():
            if path.name == layout.ANALYSIS_DB or layout.PROFILER_DB_RE.match(path.name):
                path.unlink()


def _db_cost(rank_dir: Path, env: dict[str, str]) -> None:
    """The db export's time in one parse with it (``--db``, NPUPROF_TIMING=1's phases; ``-j 1``: one phase
    after the other, none sharing the CPU with another; with ``-j`` > 1 the db is written by a forked
    process beside trace_view.json's events), against the text tables' (every phase after the scan): the
    budget is the db at most as long."""
    cmd = [sys.executable, "-m", "npuprof.analysis.parse", "--force", "--db", "-j", "1", str(rank_dir)]
    proc = subprocess.run(cmd, env={**env, "NPUPROF_TIMING": "1"}, capture_output=True, text=True)
    phases: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if line.startswith("npuprof timing:"):
            label, wall = line[len("npuprof timing:") :].rsplit(" s wall", 1)[0].rsplit(None, 1)
            phases[label.strip()] = phases.get(label.strip(), 0.0) + float(wall)
    db = phases.pop("wait for the db", None)  # -j 1: the db is written there
    phases.pop("(db)", None)
    phases.pop("scan", None)
    phases.pop("(side tables)", None)  # inside "wait for side tables"
    text = sum(phases.values())
    if proc.returncode != 0 or db is None:
        print(f"db export: not measured (exit {proc.returncode}) {proc.stderr[-300:]}")
        return
    verdict = "met" if db <= text else "MISSED"
    ratio = db / text if text > 0 else float("inf")
    print(
        f"db export (--export-type db): {db:.2f} s wall; the text tables {text:.2f} s: "
        f"x{ratio:.2f} ({verdict})"
    )


def _others(args: argparse.Namespace, work: Path, trace: Path) -> list[tuple[str, float, float, float, int]]:
    results: list[tuple[str, float, float, float, int]] = []
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
    else:
        print("(HolisticTraceAnalysis not installed: set NPUPROF_HTA_PYTHON, see .ci/interop.sh)")
    return results


def _table(results: list[tuple[str, float, float, float, int]], size_mb: float) -> None:
    base_t, base_m = results[0][1], results[0][2]
    print(f"{'':32} {'wall s':>8} {'cpu s':>7} {'peak MB':>9} {'s/GB':>7} {'x time':>7} {'x mem':>7}")
    for name, wall, peak, cpu, rc in results:
        note = "" if rc == 0 else f"  (exit {rc})"
        print(
            f"{name:32} {wall:8.2f} {cpu:7.2f} {peak:9.0f} {wall / size_mb * 1000:7.2f} {wall / base_t:7.2f} "
            f"{peak / max(base_m, 1e-9):7.2f}{note}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=None, help="trace size (default 128; --quick 8)")
    parser.add_argument(
        "-j", "--jobs", type=int, default=os.cpu_count() or 1, help="npuprof reader processes"
    )
    parser.add_argument("--keep", type=Path, default=None, help="work in this dir and keep it")
    parser.add_argument("--no-json", action="store_true", help="skip json.load (slow at 1 GB: ~30 s, 5 GB)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of npuprof per setting; the fastest counts"
    )
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)} (default: all)"
    )
    parser.add_argument("--quick", action="store_true", help="8 MB traces, npuprof only: checks it runs")
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; use {', '.join(CASES)}")
    if args.size_mb is None:
        args.size_mb = 8.0 if args.quick else 128.0
    if args.quick:
        args.no_json = True

    work = args.keep or Path(tempfile.mkdtemp(prefix="npuprof-bench-"))
    load = os.getloadavg()
    summary = []
    for case in cases:
        results = run_case(case, args, work)
        summary.append((case, results[0]))
    label = f"npuprof analyse (-j {args.jobs})"
    print(f"\n{'case':12} {label:>28}   target for 1 GB: < 5 s and < 1024 MB")
    for case, (_name, wall, peak, cpu, rc) in summary:
        note = "" if rc == 0 else f"  (exit {rc})"
        print(f"{case:12} {wall:10.2f} s wall {cpu:7.2f} s cpu {peak:7.0f} MB{note}")
    print(
        f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores "
        f"(other work on the machine inflates wall times); work dir: {work}"
    )
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
