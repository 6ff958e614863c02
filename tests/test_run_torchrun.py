"""npuprof around torchrun and inside it (2 ranks, gloo, CPU)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    capture_record,
    clean_env,
    npuprof,
    profiler_steps,
    rank_dirs,
    sched,
    torch_native_abort,
)

pytestmark = pytest.mark.torchrun
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _once_more_on_torch_abort(run: Callable[[], Any], out: Path) -> Any:
    """``run()``, and once more only when it failed of one of torch's own aborts (conftest's
    :func:`torch_native_abort`): any other failure, one npuprof could cause, fails at once."""
    result = run()
    if result.returncode != 0 and torch_native_abort(result.stderr):
        shutil.rmtree(out, ignore_errors=True)
        result = run()
    return result


def _job_with_a_rank_that_never_steps(never: int, late: int, first: int, stepped: Path) -> str:
    """A gloo job whose rank ``never`` loads its data, finds none, and leaves without a step, the others
    stepping 8 times, rank ``late`` only once rank ``first`` has stepped (and so met any warning of
    npuprof's capture first): it creates ``stepped``, for which rank ``late`` waits (60 s at most). (A
    second's sleep of rank ``late`` left the order to the host's load.)"""
    return (
        "import os, time, torch, torch.distributed as dist\n"
        'dist.init_process_group("gloo")\n'
        "rank = dist.get_rank()\n"
        f"if rank == {late}:\n"
        "    deadline = time.monotonic() + 60\n"
        f"    while not os.path.exists({str(stepped)!r}) and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
        "model = torch.nn.Linear(8, 8)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"if rank != {never}:\n"
        "    for _ in range(8):\n"
        "        opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        f"if rank == {first}:\n"
        f"    open({str(stepped)!r}, 'w').close()\n"
        "dist.barrier()\n"
        "dist.destroy_process_group()\n"
        "os._exit(0)\n"
    )


def test_around_torchrun_ranks_picks_the_ranks_that_record(
    four_ranks_under_srun: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """--ranks 0-2,SRUN_NODE of the 4-rank job: rank 3, which steps as rank 1 does, records nothing."""
    result, out = four_ranks_under_srun
    assert result.returncode == 0, result.stderr
    dirs = {capture_record(d)["rank"]: d for d in rank_dirs(out)}
    assert sorted(dirs) == [0, 1]  # rank 2 never steps; rank 3 is left out
    d = dirs[1]
    assert (d / "profiler_info_1.json").exists()
    assert not (d / "profiler_info_0.json").exists()
    assert profiler_steps(d) == [3, 4]
    meta = json.loads((d / "profiler_metadata.json").read_text())
    assert meta["distributed_args"]["world_size"] == 4
    assert meta["distributed_args"]["rank"] == 1
    group = meta["parallel_group_info"]["0"]
    assert group["global_ranks"] == [0, 1, 2, 3] and group["group_rank"] == 1
    info = json.loads((d / "profiler_info_1.json").read_text())
    assert info["rank_id"] == 1


LATE_PEER = """
import os, time
import torch, torch.distributed as dist
from torch import nn


class AllReduced(torch.autograd.Function):  # its backward waits for the other rank's gradient
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


dist.init_process_group("gloo")
rank = dist.get_rank()
layer = nn.Linear(32, 32)
opt = torch.optim.SGD(layer.parameters(), lr=0.01)
for step in range(8):
    loss = layer(AllReduced.apply(torch.randn(8, 32, requires_grad=True))).sum()
    if rank == 0:
        time.sleep(0.1)  # rank 0 is late: rank 1 waits ~100 ms a step inside the backward (a loaded host's
        # pause of rank 1 must pass 30 ms before rank 0 reads as waiting: 40 ms left it 12)
    loss.backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
os._exit(0)
"""


@pytest.fixture(scope="module")
def late_peer_inside_torchrun(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """torchrun of 2 workers, each `npuprof run` (skip 2, warm up 1, record 3) of LATE_PEER, into one
    output directory: the captures of the tests of both (each worker's npuprof, a rank waiting for its
    peer)."""
    root = tmp_path_factory.mktemp("late_peer")
    script, out = root / "late_peer.py", root / "out"
    script.write_text(LATE_PEER)
    npuprof_run = [sys.executable, "-m", "npuprof", "run", "-o", str(out), *sched(2, 1, 3), "--no-analyse"]
    args = [*TORCHRUN, "--no-python", *npuprof_run, "--", sys.executable, str(script)]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=180)

    return _once_more_on_torch_abort(run, out), out


def test_inside_torchrun_each_worker_runs_npuprof(
    late_peer_inside_torchrun: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, out = late_peer_inside_torchrun
    assert result.returncode == 0, result.stderr
    dirs = rank_dirs(out)
    assert sorted(capture_record(d)["rank"] for d in dirs) == [0, 1]
    assert {p.name for d in dirs for p in d.glob("profiler_info_*.json")} == {
        "profiler_info_0.json",
        "profiler_info_1.json",
    }
    assert all(profiler_steps(d) == [3, 4, 5] for d in dirs)


def test_a_rank_waiting_for_a_late_peer_shows_exposed_communication(
    late_peer_inside_torchrun: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """Real gloo: rank 1 spends most of each step in the backward of a Function that all-reduces, waiting
    for rank 0, which sleeps 100 ms first. Its steps are mostly exposed communication, not computing, and
    rank 0 is the rank the others wait for (before: rank 1 read ~95% computing, ~0% exposed, no rank
    named)."""
    result, out = late_peer_inside_torchrun
    assert result.returncode == 0, result.stderr
    report = npuprof("analyse", str(out), "--format", "json")
    assert report.returncode == 0, report.stderr
    ranks = {r["rank"]: r for r in json.loads(report.stdout)["ranks"]}
    waiting = [s for s in ranks[1]["steps"] if not s.get("partial")]
    assert len(waiting) == 3, ranks[1]["steps"]
    for s in waiting:  # rank 1 sleeps nowhere: what is not its computing is its wait
        assert s["comm_not_overlapped_us"] > 0.5 * s["duration_us"], s
        assert s["computing_us"] < 0.3 * s["duration_us"], s
    for s in ranks[0]["steps"]:  # rank 0 never waits long: the other rank is there before it
        assert s["comm_not_overlapped_us"] < 0.3 * s["duration_us"], s
    straggler = json.loads(report.stdout)["cross_rank"]["straggler"]
    assert straggler["rank"] == 0 and straggler["too_few_steps"] == 3, straggler


# torchrun's own process's SLURM_PROCID (its node's number), which --ranks picks too: a torchrun taken for a
# rank (helper-131) would be one --ranks selects, and so be named in the summary
SRUN_NODE = 4


@pytest.fixture(scope="module")
def four_ranks_under_srun(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`npuprof run --op-attr --ranks 0-2,SRUN_NODE` (skip 2, warm up 1, record 2) of a 4-rank job on a
    later srun node (SLURM_PROCID SRUN_NODE), torchrun showing rank 0's output alone: rank 0 steps late,
    rank 1 steps, rank 2 never steps, rank 3 steps and is left out by --ranks. One job serves the tests of
    the four (a rank costs less than a second job)."""
    root = tmp_path_factory.mktemp("four_ranks")
    script, out = root / "four_ranks.py", root / "out"
    # rank 1 meets npuprof's warning first: rank 0 steps once it has stepped
    stepped = root / "stepped"
    script.write_text(_job_with_a_rank_that_never_steps(2, late=0, first=1, stepped=stepped))
    torchrun = [*TORCHRUN[:-1], "4", "--local-ranks-filter", "0", str(script)]
    flags = [*sched(2, 1, 2), "--ranks", f"0-2,{SRUN_NODE}", "--op-attr", "--no-analyse"]
    args = ["run", "-o", str(out), *flags, "--", *torchrun]
    env = clean_env(SLURM_PROCID=str(SRUN_NODE))

    def run() -> subprocess.CompletedProcess[str]:
        stepped.unlink(missing_ok=True)  # a second run's rank 0 waits for its own rank 1
        return npuprof(*args, env=env, timeout=180)

    return _once_more_on_torch_abort(run, out), out


def test_a_rank_that_never_reaches_a_step_is_said_in_the_summary(
    four_ranks_under_srun: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """helper-129: with 2 ranks, rank 1 never stepping, the summary listed rank 0's capture alone (as if the
    job had one rank) and said nothing of rank 1. It names the rank (rank 2 here), the steps it counted and
    the step the schedule records from (a rank --ranks leaves out is not named: the test after this one)."""
    result, out = four_ranks_under_srun
    assert result.returncode == 0, result.stderr
    assert sorted(capture_record(d)["rank"] for d in rank_dirs(out)) == [0, 1]
    said = " ".join(result.stderr.split())
    # the script leaves by os._exit (gloo's teardown abort), which skips the count logged at exit
    lost = "it ended without logging the steps it counted (by os._exit, or killed)"
    assert f"rank 2 recorded nothing: {lost}; the schedule records from step 3 (pid " in said, said
    assert "rank 0 recorded nothing" not in said and "rank 1 recorded nothing" not in said, said


def test_a_rank_that_never_reaches_a_step_is_not_said_when_ranks_leaves_it_out(
    four_ranks_under_srun: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """helper-129's line names no rank that --ranks leaves out (rank 3 here, which steps and records
    nothing)."""
    result, _out = four_ranks_under_srun
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    # who each such line names: rank 2 alone (rank 3 in a line of its own or beside it: "ranks 2-3")
    named = re.findall(r"(ranks? [\d, -]+(?: \(\d+ of them\))?) recorded nothing", said)
    assert named == ["rank 2"], said


def test_a_warning_shown_once_is_shown_by_a_rank_whose_output_torchrun_shows(
    four_ranks_under_srun: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """torchrun --local-ranks-filter 0 hides rank 1's output. A warning is shown once per run: rank 1 met
    it first and showed it, where nobody sees it, and rank 0 then kept it to itself: the user never saw it.
    Rank 1 leaves the showing to rank 0 now."""
    result, out = four_ranks_under_srun
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("npuprof: ignored on the torch-cpu backend: --op-attr") == 1, result.stderr
    assert sorted(capture_record(d)["rank"] for d in rank_dirs(out)) == [0, 1]


def test_torchrun_of_a_later_srun_node_is_no_rank_that_recorded_nothing(
    four_ranks_under_srun: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """helper-131: under srun, torchrun's own process has SLURM_PROCID (its node's number, 3 then) and no
    RANK, so its agent said 'rank 3'; it never steps, and the summary said 'rank 3 recorded nothing' of a
    job whose two ranks (0 and 1) both recorded. torchrun's process says at exit that it started the
    workers, and is no rank of the job: the one rank said to have recorded nothing is rank 2, which never
    stepped (torchrun's SLURM_PROCID is SRUN_NODE here, which --ranks picks: it would be named too)."""
    result, out = four_ranks_under_srun
    assert result.returncode == 0, result.stderr
    assert sorted(capture_record(d)["rank"] for d in rank_dirs(out)) == [0, 1]
    said = " ".join(result.stderr.split())
    assert said.count("recorded nothing") == 1 and "rank 2 recorded nothing: " in said, said
