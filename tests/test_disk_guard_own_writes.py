"""The disk guard counts the raw traces its own process wrote since it last measured the disk
(npuprof/agent/disk_guard.py): captures closer together than its 2 s measurements were all let begin on one
measurement, each trace taking the disk further below --min-free-space."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import rank_dirs, run_script

FLOOR = 100 * 1024 * 1024
MARGIN = 60 * 1024  # free above --min-free-space, as the job's statvfs says, for the whole run

# The job's statvfs (the agent wakes at `import torch`, after this) says MARGIN above the floor less the
# traces written under the path asked about: a disk that nothing else writes to, whatever the timing of the
# disk guard's measurements (every 2 s; the job's steps take about a second in all).
JOB = f"""
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
    free = {FLOOR + MARGIN} - traces
    return os.statvfs_result((1, 1, 1 << 40, free, free, *real[5:]))

os.statvfs = statvfs
import torch
torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(40):
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def test_captures_stop_once_their_own_traces_took_the_room_left(tmp_path: Path) -> None:
    """helper-374: `--repeat 0` on a 20 MiB tmpfs with --min-free-space 10MiB and a capture every 0.1 s
    ended with 8.1 MiB free: every capture of the 2 s between two measurements began on the first one."""
    flags = ["--min-free-space", str(FLOOR), "--no-analyse", "--no-gzip", "--repeat", "0"]
    schedule = ["--skip-first", "1", "--wait", "1", "--warmup", "1", "--active", "1"]
    result, out = run_script(tmp_path, JOB, *flags, *schedule)
    assert result.returncode == 0, result.stderr
    records = {d: json.loads((d / "npuprof_capture.json").read_text()) for d in rank_dirs(out)}
    made = [d for d, r in records.items() if r["status"] == "complete"]
    skipped = [r for r in records.values() if r["status"] != "complete"]
    made.sort(key=lambda d: records[d]["steps"][0])
    sizes = [sum(f.stat().st_size for f in d.glob("*.pt.trace.json")) for d in made]
    assert made and all(sizes), (sizes, records)
    # the n-th capture began with the n-1 traces before it leaving MARGIN or more above the floor, the next
    # window did not: n traces left less
    n = len(made)
    assert sum(sizes[: n - 1]) <= MARGIN < sum(sizes), (n, sizes)
    assert n < 12, sizes  # fewer than the 13 windows of the 40 steps: the test means something
    assert skipped, records  # a skipped window leaves its record (once per directory)
    assert "below --min-free-space" in result.stderr, result.stderr


def test_windows_skipped_for_the_same_reason_are_one_log_line(tmp_path: Path) -> None:
    """helper-374: a disk below --min-free-space with a window at every step (`--repeat 0 --wait 0 --warmup
    0 --active 1`): each window skipped wrote its line into npuprof.log, in the training step (median step
    0.47 ms against 0.26 bare), and 12,613 of them in 6 s rotated the run's first lines out of the log.
    One line now, while the reason's words stay the same; the count at the process's end gives them all."""
    job = JOB.replace(f"free = {FLOOR + MARGIN} - traces", "free = 0")
    flags = ["--min-free-space", str(FLOOR), "--no-analyse", "--repeat", "0"]
    schedule = ["--skip-first", "1", "--wait", "0", "--warmup", "0", "--active", "1"]
    result, out = run_script(tmp_path, job, *flags, *schedule)
    assert result.returncode == 0, result.stderr
    log = (out / "npuprof.log").read_text()
    skipped = [line for line in log.splitlines() if "] capture at step " in line and " skipped: " in line]
    windows = 40  # one at each of the 40 optimizer steps' ends: steps 1 to 40 would have recorded
    assert len(skipped) == 1 and "capture at step 1 skipped: only 0 B free" in skipped[0], skipped
    assert f"capture windows skipped in this process: {windows}" in log, log
    assert f"{windows} capture window(s) could not record" in " ".join(result.stderr.split()), result.stderr
