"""--with-stack and a profile hook of the job's own (cProfile on Python < 3.12: `python -m cProfile`,
Lightning's AdvancedProfiler): torch's Python tracer takes the hook's place while it records and leaves
none, and a hook the job sets meanwhile takes the tracer's (helper-135, seen with Lightning's
AdvancedProfiler: its per-action cProfile left the capture's flame graph without the Python frames of
every later call, silently)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from conftest import capture_record, rank_dirs, run_script, sched

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="cProfile uses sys.monitoring from Python 3.12, not the profile hook"
)

JOB = """
import cProfile, json
import torch

def work(x):
    return (x @ x).sum()

def calls_seen(prof):
    return next(e.callcount for e in prof.getstats() if getattr(e.code, "co_name", "") == "work")

outer = cProfile.Profile()  # as `python -m cProfile` runs the whole job
outer.enable()
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 8)
seen = {}
for i in range(14):  # iteration i is step i; captures: steps 6-8 and 10-12
    work(x)
    if i == 9:  # after the first capture
        seen["calls_at_9"] = calls_seen(outer)
    if i == 11:  # one action of a per-action cProfile, inside the second capture
        inner = cProfile.Profile()
        inner.enable()
        work(x)
        inner.disable()
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
outer.disable()
print("SEEN " + json.dumps(seen))
import gc; gc.freeze()  # skip the exit-time collection over torch's objects
"""


def test_the_jobs_cprofile_runs_again_after_a_capture_and_one_set_during_it_is_said(tmp_path: Path) -> None:
    done, out = run_script(
        tmp_path, JOB, "--no-analyse", "--with-stack", *sched(5, 1, 3), "--repeat", "2", "--wait", "0"
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.split("SEEN ", 1)[1].splitlines()[0])
    # steps 0-5 and 9: torch's tracer had the hook in steps 6-8 only, not for the rest of the run
    assert seen == {"calls_at_9": 7}
    assert "takes the place of the job's own profile hook (cProfile, sys.setprofile)" in done.stderr
    assert "npuprof enables it again after each capture" in done.stderr
    dirs = {tuple(capture_record(d)["steps"]): d for d in rank_dirs(out)}
    records = {steps: capture_record(d) for steps, d in dirs.items()}
    assert set(records) == {(6, 7, 8), (10, 11, 12)}
    assert "missing" not in records[(6, 7, 8)]["detail"]
    lost = (
        "Python frames (--with-stack) are missing from step 11 on: the job removed torch's Python tracer, "
        "with sys.setprofile(None) (a cProfile enabled or disabled there does it"
    )
    assert lost in records[(10, 11, 12)]["detail"]
    assert records[(10, 11, 12)]["last_step_partial"] is False
    said = " ".join(done.stderr.split())
    assert said.count(lost) == 2, done.stderr  # the warning as it happens, and under the run's summary table
    # and export-stacks, where the frames are missed, says it of that capture only
    for steps, warned in (((6, 7, 8), False), ((10, 11, 12), True)):
        stacks = npuprof("export-stacks", str(dirs[steps]), "-o", str(tmp_path / "stacks.folded"))
        assert stacks.returncode == 0, stacks.stderr
        assert (lost in " ".join(stacks.stderr.split())) is warned, stacks.stderr


def _a_hook_of_the_job(frame, event, arg):  # as a script's own sys.setprofile function
    return None


class _HookObject:
    def __call__(self, frame, event, arg):
        return None


def test_the_warning_names_the_jobs_own_hook_function_not_its_type() -> None:
    """helper-136: a plain function set with sys.setprofile was named "builtins.function" in the warning; the
    function itself is named, a callable object by its class, cProfile as such."""
    import cProfile

    from npuprof.agent.profile_hook import _name

    assert _name(_a_hook_of_the_job) == f"{__name__}._a_hook_of_the_job"
    assert _name(_HookObject()) == f"{__name__}._HookObject"
    assert _name(cProfile.Profile()) == "cProfile"
