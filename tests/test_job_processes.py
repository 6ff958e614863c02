"""The processes of one run (npuprof/job_processes.py), read from /proc of real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from npuprof.job_processes import (
    is_a_process_of_run,
    is_a_run_process,
    outliving_the_job,
    pid_alive,
    processes_of_the_run,
)


def test_multiprocessings_own_helpers_are_not_processes_still_running() -> None:
    """helper-125: after an mp.spawn job, its resource tracker outlived the job by a moment and the summary
    said "no capture was written yet ... 1 process(es) of it still run", to wait for it. The summary leaves
    multiprocessing's helpers out; the second Ctrl-C's kill still ends them."""
    run_id = uuid.uuid4().hex[:12]  # its own: sleepers left by a test killed before (a mutant's) never count
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
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-158: multiprocessing's forkserver with `set_forkserver_preload(["torch"])` ends when the
    job's first process has, a few hundred ms later (torch's teardown): every such run's summary said "the
    job's first process ended, but 1 process(es) of it still run (pid N)" of a process gone 15 ms later.
    One that is still there a second later is said."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    run_id = uuid.uuid4().hex[:12]
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

    import npuprof.job_processes as job_processes

    # the wait ends once it has gone: made long, a loaded host's slow exit is not taken for one that stays
    with monkeypatch.context() as patched:
        patched.setattr(job_processes, "OUTLIVE_SETTLE_S", 30.0)
        assert not said_still_running("import time; print('ready', flush=True); time.sleep(0.2)")
    assert said_still_running("import time; print('ready', flush=True); time.sleep(60)")


def _ready(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    """A sleeping Python process with ``env`` and ``args`` on its command line, once it runs."""
    code = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_a_process_is_of_a_run_while_it_runs_with_the_runs_payload() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NPUPROF_CONFIG"}
    run_id, other_id = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    ours = _ready(dict(env, NPUPROF_CONFIG=f'{{"run": {{"id": "{run_id}"}}}}'))
    plain = _ready(env)
    try:
        assert is_a_process_of_run(ours.pid, run_id) and is_a_run_process(ours.pid) and pid_alive(ours.pid)
        assert not is_a_process_of_run(ours.pid, other_id)  # another run's
        assert not is_a_process_of_run(ours.pid, None) and not is_a_process_of_run(ours.pid, "")  # no run
        assert not is_a_process_of_run(plain.pid, run_id) and not is_a_run_process(plain.pid)
        with pytest.raises(subprocess.TimeoutExpired):  # asked, never signalled
            ours.wait(0.1)
    finally:
        for proc in (ours, plain):
            proc.kill()
            proc.wait()
    # gone: nothing to read
    assert not pid_alive(ours.pid)
    assert not is_a_process_of_run(ours.pid, run_id) and not is_a_run_process(ours.pid)


def test_only_multiprocessings_helpers_left_are_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the job's end, a resource tracker still there is no process of the job left: the summary says
    nothing of it and does not wait for it to end."""
    import npuprof.job_processes as job_processes

    waits: list[float] = []
    monkeypatch.setattr(job_processes.time, "sleep", waits.append)
    run_id = uuid.uuid4().hex[:12]
    env = dict(os.environ, NPUPROF_CONFIG=f'{{"run": {{"id": "{run_id}"}}}}')
    tracker = _ready(env, "multiprocessing.resource_tracker")
    try:
        assert processes_of_the_run(run_id) == [tracker.pid]
        assert outliving_the_job(run_id) == [] and waits == []
    finally:
        tracker.kill()
        tracker.wait()


def test_a_process_of_another_user_is_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not ours to signal (EPERM, as a non-root user asking of init): it exists."""
    import npuprof.job_processes as job_processes

    def not_permitted(pid: int, signum: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(job_processes.os, "kill", not_permitted)
    assert pid_alive(1)


def test_a_helper_left_once_the_job_has_ended_is_not_said_to_outlive_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trainer that ends a moment after the job, beside a resource tracker that stays: none outlives it,
    said as soon as the trainer has ended (not at the end of the wait, with the tracker). The wait is made
    long here: on busy cores (a CI run) the trainer's own exit once took more than the 1 s it has."""
    import time

    import npuprof.job_processes as job_processes

    monkeypatch.setattr(job_processes, "OUTLIVE_SETTLE_S", 30.0)
    run_id = uuid.uuid4().hex[:12]
    env = dict(os.environ, NPUPROF_CONFIG=f'{{"run": {{"id": "{run_id}"}}}}')
    tracker = _ready(env, "multiprocessing.resource_tracker")
    code = "import time; print('ready', flush=True); time.sleep(0.1)"
    trainer = subprocess.Popen([sys.executable, "-c", code, "train.py"], env=env, stdout=subprocess.PIPE)
    try:
        assert trainer.stdout is not None and trainer.stdout.readline() == b"ready\n"
        began = time.monotonic()
        assert outliving_the_job(run_id) == []
        assert time.monotonic() - began < 20  # not the whole wait, which the tracker would take
    finally:
        for proc in (tracker, trainer):
            proc.kill()
            proc.wait()


def test_the_launcher_waits_for_a_post_processor_the_job_started_itself(tmp_path: Path) -> None:
    """CI (3 test workers on 2 cores): the launcher's spawner did not answer a training process within its
    second, the process started its post-processor itself, the script then removed the locks' folder, and
    `npuprof run` returned while that post-processor still parsed (the summary: "being parsed as npuprof
    ended, by another process"). The launcher now finds this run's post-processors by their `--run` once the
    locks' folder is gone, and waits for them."""
    from npuprof import runner
    from npuprof.results.postprocess import _is_zombie, own_post_processors_at_work

    run_id = uuid.uuid4().hex[:12]
    out = tmp_path / "out"
    out.mkdir()
    gone = 2**22 + 1  # above Linux's largest pid: its training process has ended

    def post_processor(run: str, seconds: float) -> subprocess.Popen[bytes]:
        code = f"import time; time.sleep({seconds})"
        args = ["npuprof.results.postprocess", "--parent", str(gone), "--run", run]
        return subprocess.Popen([sys.executable, "-c", code, *args])

    other = post_processor(uuid.uuid4().hex[:12], 60)  # another run's
    ours = post_processor(run_id, 3.0)
    try:
        deadline = time.monotonic() + 30  # until both have exec'd (their command lines are the fork's before)
        while time.monotonic() < deadline and not (_runs(other) and _runs(ours)):
            time.sleep(0.02)
        assert own_post_processors_at_work(out, run_id) == [ours.pid]
        (out / ".npuprof_pending").mkdir()  # its locks tell then: no look in /proc
        assert own_post_processors_at_work(out, run_id) == []
        (out / ".npuprof_pending").rmdir()
        held = runner._HeldSignals()
        try:
            runner._wait_for_post_processing(out, out / "npuprof.log", run_id, held)
        finally:
            held.restore()
        # it had ended when the wait returned: a zombie (not yet reaped: our child), or still exiting, its
        # memory given back and so its arguments gone from /proc (seen under load in CI)
        assert _is_zombie(ours.pid) or Path(f"/proc/{ours.pid}/cmdline").read_bytes() == b""
        assert other.poll() is None  # not waited for
    finally:
        for proc in (other, ours):
            proc.kill()
            proc.wait()


def _runs(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ``proc`` has exec'd the command it was given (/proc shows its arguments)."""
    try:
        return b"--run" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    except OSError:
        return False
