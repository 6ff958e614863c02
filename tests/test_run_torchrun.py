"""npuprof around torchrun and inside it (2 ranks, gloo, CPU)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ROOT,
    TEARDOWN_ABORT,
    capture_record,
    clean_env,
    npuprof,
    profiler_steps,
    rank_dirs,
    sched,
)

pytestmark = pytest.mark.torchrun
EXAMPLE = str(ROOT / "examples" / "train.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _once_more_on_teardown_abort(run: Callable[[], Any], out: Path) -> Any:
    """``run()``, and once more only when it failed with gloo's known teardown abort (a worker can abort at
    interpreter exit after destroy_process_group; the example exits with os._exit(0) to avoid it): any
    other failure, one npuprof could cause, fails at once."""
    result = run()
    if result.returncode != 0 and TEARDOWN_ABORT in result.stderr:
        shutil.rmtree(out, ignore_errors=True)
        result = run()
    return result


def test_around_torchrun_ranks_1_only(out: Path) -> None:
    args = [
        "run",
        "-o",
        str(out),
        "--ranks",
        "1",
        *sched(2, 1, 2),
        "--no-analyse",
        "--",
        *TORCHRUN,
        EXAMPLE,
        "--steps",
        "8",
    ]
    result = _once_more_on_teardown_abort(lambda: npuprof(*args, timeout=180), out)
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(out)
    assert (d / "profiler_info_1.json").exists()
    assert not (d / "profiler_info_0.json").exists()
    assert capture_record(d)["rank"] == 1
    assert profiler_steps(d) == [3, 4]
    meta = json.loads((d / "profiler_metadata.json").read_text())
    assert meta["distributed_args"]["world_size"] == 2
    assert meta["distributed_args"]["rank"] == 1
    group = meta["parallel_group_info"]["0"]
    assert group["global_ranks"] == [0, 1] and group["group_rank"] == 1
    info = json.loads((d / "profiler_info_1.json").read_text())
    assert info["rank_id"] == 1


def test_inside_torchrun_each_worker_runs_npuprof(out: Path) -> None:
    args = [
        *TORCHRUN,
        "--no-python",
        sys.executable,
        "-m",
        "npuprof",
        "run",
        "-o",
        str(out),
        *sched(2, 0, 1),
        "--no-analyse",
        "--",
        sys.executable,
        EXAMPLE,
        "--steps",
        "5",
    ]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=180)

    result = _once_more_on_teardown_abort(run, out)
    assert result.returncode == 0, result.stderr
    dirs = rank_dirs(out)
    assert sorted(capture_record(d)["rank"] for d in dirs) == [0, 1]
    assert {p.name for d in dirs for p in d.glob("profiler_info_*.json")} == {
        "profiler_info_0.json",
        "profiler_info_1.json",
    }
    assert all(profiler_steps(d) == [2] for d in dirs)
