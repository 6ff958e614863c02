"""Byte-identical outputs of analyse, export-stacks and memory-timeline on fixed traces.

The expected digests in ``tests/golden/outputs.json`` were produced by the code before the analysis was
reshaped (issue 16): any change to a table, a report or the terminal output shows up as a digest change.
Regenerate only for an intended change: ``cd tests && python -m golden_support``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from analyse_support import handmade
from stacks_support import synthetic_cuda

from npuprof.analysis.synthetic import write_synthetic_trace

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "outputs.json"
ROOT_MARK = b"<ROOT>"


def overlapping_trace() -> dict:
    """Two ProfilerSteps that overlap ([0, 1000) and [800, 1800)), as a trace cut from a pipelined loop."""
    x = handmade.x
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "traceEvents": [
            x("ProfilerStep#1", "user_annotation", 0, 1000),
            x("ProfilerStep#2", "user_annotation", 800, 1000),
            x("aten::mm", "cpu_op", 50, 100, **{"External id": 1}),
            x("cudaLaunchKernel", "cuda_runtime", 60, 5, correlation=21, **{"External id": 1}),
            x("kernel_a", "kernel", 200, 300, pid=0, tid=7, correlation=21, stream=7, device=0),
            x("kernel_b", "kernel", 850, 400, pid=0, tid=7, correlation=22, stream=7, device=0),
            x("ncclKernel_AllReduce_RING_LL_Sum_float", "kernel", 900, 500, pid=0, tid=9, stream=9, device=0),
            x("kernel_c", "kernel", 1600, 100, pid=0, tid=7, correlation=23, stream=7, device=0),
        ],
    }


def build_inputs(root: Path) -> None:
    cluster = root / "cluster"
    handmade.write_rank_dir(cluster, handmade.cuda_trace(0), rank=0, name="host_1_20250101000000000")
    handmade.write_rank_dir(cluster, handmade.cuda_trace(1), rank=1, name="host_2_20250101000000000", gz=True)
    handmade.write_rank_dir(root / "cpu", handmade.cpu_trace(), rank=0)
    handmade.write_rank_dir(root / "overlap", overlapping_trace(), rank=0)
    for rank in range(3):
        rank_dir = root / "synthetic" / f"node{rank}_{100 + rank}_20250101000000000_ascend_pt"
        rank_dir.mkdir(parents=True)
        (rank_dir / f"profiler_info_{rank}.json").write_text(json.dumps({"config": {}}))
        name = "node.1.pt.trace.json" + (".gz" if rank == 2 else "")
        write_synthetic_trace(rank_dir / name, 0.4, rank=rank, world=3, seed=7)
    (root / "stacks").mkdir()
    synthetic_cuda.write(root / "stacks" / "cuda.pt.trace.json")


def _cli(*args: str, cwd: Path) -> bytes:
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1", "TERM": "dumb"}
    # this Python's bin first, as in an activated venv: the commands npuprof suggests are then bare `npuprof`,
    # not the interpreter's path, which differs from one clone to the next (npuprof/invocation.py)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    done = subprocess.run(
        [sys.executable, "-m", "npuprof", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    return b"rc=%d\n--stdout--\n%s--stderr--\n%s" % (done.returncode, done.stdout, done.stderr)


def _file_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)  # the gzip header holds a time stamp
    return data


def produce(root: Path) -> dict[str, bytes]:
    """Run every reader on the inputs under ``root``; return output name -> bytes, root paths masked."""
    build_inputs(root)
    before = {p for p in root.rglob("*") if p.is_file()}
    out: dict[str, bytes] = {}
    for name in ("cluster", "cpu", "overlap", "synthetic"):
        out[f"analyse {name} table"] = _cli("analyse", name, "-j", "1", cwd=root)
        out[f"analyse {name} json"] = _cli("analyse", name, "-j", "1", "--format", "json", cwd=root)
        out[f"analyse {name} csv"] = _cli("analyse", name, "-j", "1", "--format", "csv", cwd=root)
    out["analyse cluster steps 2"] = _cli(
        "analyse", "cluster", "-j", "1", "--steps", "2", "--top", "3", cwd=root
    )
    stacks = root / "stacks" / "cuda.pt.trace.json"
    out["stacks cpu"] = _cli("export-stacks", str(stacks), cwd=root)
    out["stacks cuda"] = _cli("export-stacks", str(stacks), "-m", "self_cuda_time_total", cwd=root)
    out["stacks synthetic"] = _cli(
        "export-stacks",
        "synthetic/node0_100_20250101000000000_ascend_pt",
        "-o",
        "s.folded",
        "--svg",
        "s.svg",
        cwd=root,
    )
    rank0 = "cluster/host_1_20250101000000000_ascend_pt"
    out["memory json"] = _cli("memory-timeline", rank0, "-o", "mem.json", cwd=root)
    out["memory synthetic"] = _cli(
        "memory-timeline", "synthetic/node1_101_20250101000000000_ascend_pt", "-o", "mem_s.json.gz", cwd=root
    )
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p not in before):
        if path.suffix == ".log" or path.name.endswith(".lock"):
            continue
        out[str(path.relative_to(root))] = _file_bytes(path)
    mark = str(root).encode()
    return {name: data.replace(mark, ROOT_MARK) for name, data in out.items()}


def digests(outputs: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in sorted(outputs.items())}


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        outputs = produce(Path(tmp))
        keep = os.environ.get("NPUPROF_GOLDEN_KEEP")
        if keep:
            for name, data in outputs.items():
                target = Path(keep) / name.replace(" ", "_")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(digests(outputs), indent=1) + "\n")
    print(f"{len(outputs)} outputs -> {GOLDEN}")


if __name__ == "__main__":
    main()
