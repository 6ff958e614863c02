"""The processes of one run (npuprof/job_processes.py), read from /proc of real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from npuprof.job_processes import processes_of_the_run


def test_multiprocessings_own_helpers_are_not_processes_still_running() -> None:
    """helper-125: after an mp.spawn job, its resource tracker outlived the job by a moment and the summary
    said "no capture was written yet ... 1 process(es) of it still run", to wait for it. The summary leaves
    multiprocessing's helpers out; the second Ctrl-C's kill still ends them."""
    run_id = "aaaa0000bbbb"
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
