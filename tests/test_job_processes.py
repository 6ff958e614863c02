"""The processes of one run (npuprof/job_processes.py), read from /proc of real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npuprof.job_processes import processes_of_the_run


def test_multiprocessings_own_helpers_are_not_processes_still_running() -> None:
    """helper-125: after an mp.spawn job, its resource tracker outlived the job by a moment and the summary
    said "no capture was written yet ... 1 process(es) of it still run", to wait for it. The summary leaves
    multiprocessing's helpers out; the second Ctrl-C's kill still ends them."""
    run_id = os.urandom(6).hex()  # of this test alone: another copy of it may run beside (helper-160)
    env = dict(os.environ, NPUPROF_CONFIG=f'{{"run": {{"id": "{run_id}"}}}}')
    sleep = "import time; time.sleep(60)"
    tracker = subprocess.Popen([sys.executable, "-c", sleep, "multiprocessing.resource_tracker"], env=env)
    trainer = subprocess.Popen([sys.executable, "-c", sleep, "train.py"], env=env)
    # a forkserver's workers keep its command line: they train (helper-127), so they are waited for
    forked = subprocess.Popen(
        [sys.executable, "-c", sleep, "from multiprocessing.forkserver import main"], env=env
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(processes_of_the_run(run_id)) < 3:
            time.sleep(0.05)
        assert processes_of_the_run(run_id) == sorted([tracker.pid, trainer.pid, forked.pid])
        assert processes_of_the_run(run_id, helpers=False) == sorted([trainer.pid, forked.pid])
        assert processes_of_the_run("cccc0000dddd") == []  # another run's
    finally:
        for proc in (tracker, trainer, forked):
            proc.kill()
            proc.wait()


def test_a_process_that_ends_a_moment_after_the_job_is_not_said_to_outlive_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-158: multiprocessing's forkserver with `set_forkserver_preload(["torch"])` ends when the
    job's first process has, a few hundred ms later (torch's teardown): every such run's summary said "the
    job's first process ended, but 1 process(es) of it still run (pid N)" of a process gone 15 ms later.
    One that is still there a second later is said."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    run_id = os.urandom(6).hex()
    env = dict(os.environ, NPUPROF_CONFIG=f'{{"run": {{"id": "{run_id}"}}}}')
    out = tmp_path / "out"
    (out / "h_1_x_ascend_pt").mkdir(parents=True)
    capture = CaptureSummary(out / "h_1_x_ascend_pt", "complete", None, 1, [1], 10, "", True)

    def said_still_running(code: str) -> bool:
        child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
        try:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
            print_run_summary(out, [capture], 0, ProfileConfig(), out / "npuprof.log", run_id=run_id)
            return "still run" in " ".join(capsys.readouterr().err.split())
        finally:
            child.kill()
            child.wait()

    assert not said_still_running("import time; print('ready', flush=True); time.sleep(0.2)")
    assert said_still_running("import time; print('ready', flush=True); time.sleep(60)")
