"""A capture open when the script leaves by os._exit (which skips atexit) is finalised first: --delay
without --duration records until the process ends, however it ends (a real run)."""

from __future__ import annotations

import json
from pathlib import Path

from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from conftest import capture_record, clean_env, rank_dirs, run_script

# npuprof's own analysis of the captures in the run (the post-processor's) is not what these tests check: the
# os._exit test analyses its capture itself, with `npuprof analyse`
NO_ANALYSE = "--no-analyse"

JOB = """
import os, time, torch
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
end = time.monotonic() + 1.2
steps = 0
while time.monotonic() < end:
    loss = model(torch.randn(8, 16)).sum()
    opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(0.02)
    steps += 1
print(steps, flush=True)
os._exit(7)
"""


def test_a_window_open_at_os_exit_is_finalised_and_the_exit_code_kept(tmp_path: Path) -> None:
    result, out = run_script(tmp_path, JOB, "--delay", "0.3", NO_ANALYSE)
    assert result.returncode == 7, result.stderr
    steps = int(result.stdout.split()[-1])
    (rank_dir,) = rank_dirs(out)
    record = capture_record(rank_dir)
    assert record["status"] == "complete", record
    assert record["steps"][-1] == steps  # recorded up to the last step, which os._exit left partial
    assert f"step {steps} is partial" in record["detail"], record
    report = npuprof("analyse", str(out), "--format", "json", env=clean_env())
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["ranks"][0]["steps"]


# JOB in a child forked after the job's `import torch`, where npuprof's agent woke (and, with a time window,
# wrapped os._exit for that process); the job ends with the child's exit code
FORKED_JOB = (
    "import os, torch\npid = os.fork()\nif pid == 0:\n"
    + "".join(f"    {line}\n" for line in JOB.strip().splitlines())
    + "print(pid, flush=True)\nraise SystemExit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
)


def test_a_forked_childs_window_open_at_its_os_exit_is_finalised(tmp_path: Path) -> None:
    """helper-370: os._exit wrapped as the agent woke in the parent (a time window's clock starts there)
    exited at once in a forked child, for the parent's pid alone, and the child's capture was lost
    ("incomplete: the process ended before the capture was finalised"); the child now wraps it anew."""
    result, out = run_script(tmp_path, FORKED_JOB, "--delay", "0.3", NO_ANALYSE)
    assert result.returncode == 7, result.stderr
    child, steps = map(int, result.stdout.split()[-2:])  # the parent prints first: the child trains 1.2 s
    (rank_dir,) = [d for d in rank_dirs(out) if capture_record(d)["pid"] == child]
    record = capture_record(rank_dir)
    assert record["status"] == "complete", record
    assert record["steps"][-1] == steps, record
    assert f"step {steps} is partial" in record["detail"], record


EXEC_JOB = """
import os, sys, torch
generation = int(os.environ.get("GENERATION", "0"))
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(12):
    loss = model(torch.randn(8, 16)).sum()
    opt.zero_grad(); loss.backward(); opt.step()
    if generation == 0 and i == 6:  # a script restarting itself in place: same pid, no atexit
        os.environ["GENERATION"] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])
import gc; gc.freeze()  # torch's objects out of the exit's collection (~0.5 CPU-s); atexit runs first
sys.exit(4)
"""


def test_a_capture_open_when_the_script_execs_itself_is_finalised(tmp_path: Path) -> None:
    """os.execv in the middle of a capture (steps 6-8 planned, exec after step 7's boundary) lost steps 6
    and 7: the record said "incomplete", the trace was never written."""
    result, out = run_script(tmp_path, EXEC_JOB, NO_ANALYSE)
    assert result.returncode == 4, result.stderr
    records = sorted((capture_record(d) for d in rank_dirs(out)), key=lambda r: r["updated_ns"])
    first, second = records
    assert first["pid"] == second["pid"]  # one process, two images
    assert (first["status"], first["steps"]) == ("complete", [6, 7]), first
    assert first["last_step_partial"] is True
    assert first["detail"].startswith("the process replaced itself (os.execv) before"), first
    assert (second["status"], second["steps"]) == ("complete", [6, 7, 8]), second
