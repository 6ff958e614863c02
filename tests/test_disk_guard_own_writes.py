"""The disk guard counts the raw traces its own process wrote since it last measured the disk
(npuprof/agent/disk_guard.py): captures closer together than its 2 s measurements were all let begin on one
measurement, each trace taking the disk further below --min-free-space."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import capture_record, clean_env, forked_job, npuprof, rank_dirs

FLOOR = 100 * 1024 * 1024
MARGIN = 60 * 1024  # free above --min-free-space, as the job's statvfs says, for the whole run
# a child's windows: 3 steps each (--wait 1 --warmup 1 --active 1) after the step skipped (step 0), in its 40
# steps: steps 1-3, 4-6, ... 37-39
WINDOWS = 13

# A child's statvfs (patched before it trains: the agent's disk guard measures from its first step) says
# FREE less the traces written under the path asked about: a disk that nothing else writes to, whatever the
# timing of the disk guard's measurements (every 2 s; the child's steps take about a second in all).
CHILD = """
import os
real_statvfs = os.statvfs

def statvfs(path):
    real = real_statvfs(path)
    traces = sum(
        os.path.getsize(os.path.join(root, name))
        for root, _dirs, names in os.walk(path)
        for name in names
        if name.endswith(".pt.trace.json")
    )
    free = FREE - traces
    return os.statvfs_result((1, 1, 1 << 40, free, free, *real[5:]))

os.statvfs = statvfs
torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(40):
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.fixture(scope="module")
def own_writes_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run --min-free-space FLOOR --repeat 0` with a window every 3 steps (skip 1, wait 1, warm
    up 1, record 1) of a job that imports torch once and forks two children one after the other
    (conftest.forked_job, its sections on stdout and stderr), each a training process of its own to
    npuprof: 'room' (its disk MARGIN above the floor, less its traces: the first test) then 'full' (0 B
    free: the second). Its result, output directory and each child's pid."""
    root = tmp_path_factory.mktemp("own_writes")
    scenarios = {
        "room": "import torch\nFREE = " + str(FLOOR + MARGIN) + "\n" + CHILD,
        "full": "import torch\nFREE = 0\n" + CHILD,
    }
    job, pids = forked_job(root, scenarios, sections=True)
    out = root / "out"
    flags = ["--min-free-space", str(FLOOR), "--no-analyse", "--no-gzip", "--repeat", "0"]
    schedule = ["--skip-first", "1", "--wait", "1", "--warmup", "1", "--active", "1"]
    result = npuprof("run", "-o", str(out), *flags, *schedule, "--", *job, env=clean_env())
    assert pids.exists(), result.stderr[-3000:]
    return {"result": result, "out": out, "pids": json.loads(pids.read_text())}


def _section(text: str, scenario: str) -> str:
    """What a child wrote (and whatever else came meanwhile): from its scenario's line to the next's."""
    after = text.split(f"--- scenario {scenario} ---\n", 1)
    assert len(after) == 2, f"no output of scenario {scenario}: {text[-2000:]}"
    return after[1].split("--- scenario ", 1)[0]


def _made_by(out: Path, pid: int) -> tuple[list[Path], list[dict]]:
    """The capture directories ``pid`` recorded, in step order, and the records of the windows it skipped."""
    records = {d: capture_record(d) for d in rank_dirs(out) if capture_record(d)["pid"] == pid}
    made = sorted(
        (d for d, r in records.items() if r["status"] == "complete"), key=lambda d: records[d]["steps"]
    )
    return made, [r for r in records.values() if r["status"] != "complete"]


def test_captures_stop_once_their_own_traces_took_the_room_left(own_writes_run: dict) -> None:
    """helper-374: `--repeat 0` on a 20 MiB tmpfs with --min-free-space 10MiB and a capture every 0.1 s
    ended with 8.1 MiB free: every capture of the 2 s between two measurements began on the first one.
    (own_writes_run's 'room' child.)"""
    result = own_writes_run["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    made, skipped = _made_by(own_writes_run["out"], own_writes_run["pids"]["room"])
    sizes = [sum(f.stat().st_size for f in d.glob("*.pt.trace.json")) for d in made]
    assert made and all(sizes), (sizes, skipped)
    # the n-th capture began with the n-1 traces before it leaving MARGIN or more above the floor, the next
    # window did not: n traces left less
    n = len(made)
    assert sum(sizes[: n - 1]) <= MARGIN < sum(sizes), (n, sizes)
    assert n < 12, sizes  # fewer than the 13 windows of the 40 steps: the test means something
    assert skipped, sizes  # a skipped window leaves its record (once per directory)
    assert "below --min-free-space" in _section(result.stderr, "room"), result.stderr


def test_windows_skipped_for_the_same_reason_are_one_log_line(own_writes_run: dict) -> None:
    """helper-374: a disk below --min-free-space with a window at every step (`--repeat 0 --wait 0 --warmup
    0 --active 1`): each window skipped wrote its line into npuprof.log, in the training step (median step
    0.47 ms against 0.26 bare), and 12,613 of them in 6 s rotated the run's first lines out of the log.
    One line now, while the reason's words stay the same; the count at the process's end gives them all.
    (own_writes_run's 'full' child, its 13 windows every 3 steps; the run's summary counts the 'room'
    child's skipped windows too.)"""
    result, out, pids = own_writes_run["result"], own_writes_run["out"], own_writes_run["pids"]
    assert result.returncode == 0, result.stderr[-3000:]
    log = [
        line
        for line in (out / "npuprof.log").read_text().splitlines()
        if f"[agent pid={pids['full']} " in line
    ]
    skipped = [line for line in log if "] capture at step " in line and " skipped: " in line]
    # the first window begins at its warm-up step: step 2, after the skipped step 0 and the waiting step 1
    assert len(skipped) == 1 and "capture at step 2 skipped: only 0 B free" in skipped[0], skipped
    assert any(f"capture windows skipped in this process: {WINDOWS}" in line for line in log), log
    # the room child's windows that were not captures: skipped too
    room_skipped = WINDOWS - len(_made_by(out, pids["room"])[0])
    said = f"{WINDOWS + room_skipped} capture window(s) could not record"
    assert said in " ".join(result.stderr.split()), result.stderr
