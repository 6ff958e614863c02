"""Issue 9: the training job never hangs, deadlocks or dies of npuprof's agent and post-processor.

Each test reproduces one fault found by trying to break `npuprof run` (it failed before the fix), in real
subprocesses running real CPU training.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _standin_jobs import STEP_ON, stepping_job
from conftest import (
    SCRIPTS,
    WAITS_FOR_POST_PROCESSING,
    capture_record,
    clean_env,
    forked_job,
    hold_a_run_lock,
    npuprof,
    rank_dirs,
    sched,
    small_tmpfs,
    stderr_until,
    trainer,
    trainer_in_process,
)

DIST = str(SCRIPTS / "dist_trainer.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
# The last line of a job script below that ends as scripts do (its exit is not what the test checks), as
# tests/scripts/trainer.py ends: what it made (torch's objects above all) is kept out of the interpreter's
# last collection, which walks them all (~0.5 CPU-s a process, measured); atexit, npuprof's finalisation,
# runs before that collection, as before. (Not in the jobs whose test is that the job ends unharmed after a
# profiler of npuprof's failed in torch: there the job's whole end is the point.)
FREEZE_AT_EXIT = "import gc; gc.freeze()\n"


def _popen_npuprof(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "npuprof", *args],
        env=env if env is not None else clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, proc: subprocess.Popen[str], what: str, limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"npuprof ended ({proc.returncode}) before {what}: {err[-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _trainer_within(limit_s: int, args: list[str], env: dict[str, str] | None = None) -> str:
    """A conftest.forked_job scenario: tests/scripts/trainer.py ARGS (conftest.trainer_in_process) with
    ``env`` set in its environment first (RANK, say), killed by SIGALRM's default action if it has not
    ended ``limit_s`` after it began (a hang: the job then fails naming it, its exit code -14)."""
    return (
        f"import os, signal\nsignal.alarm({limit_s})\nos.environ.update({env or {}!r})\n"
        + trainer_in_process(*args)
    )


# ---- fault 1: --repeat 0 never returned ------------------------------------------------------------
@pytest.fixture(scope="module")
def repeat_0_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run --repeat 0 --skip-first 2 --ranks 0` of a job that imports torch once and forks a
    trainer of 14 steps for each scenario, one after the other (conftest.forked_job; each child a training
    process of its own to npuprof, killed if it has not ended within 60 s: _trainer_within): rank 0's
    'ends-inside-capture' and 'user-profiler' (the first test below), and 'unselected', rank 1 (the
    second). Its output directory is made first with links planted in it (_plant_links: the test of them
    below): none of the tests of --repeat 0 reads npuprof.log or the pending dir, and its captures are
    handed over to post-processors, as that test needs. Its result, output directory, each child's pid and
    the planted links' targets."""
    root = tmp_path_factory.mktemp("repeat_0")
    scenarios = {
        "ends-inside-capture": ["--steps", "14"],
        "user-profiler": ["--steps", "14", "--own-profiler-at", "6", "--marker", str(root / "m")],
        "unselected": ["--steps", "14"],
    }
    env = {"unselected": {"RANK": "1"}}
    job, pids = forked_job(
        root, {name: _trainer_within(60, args, env.get(name)) for name, args in scenarios.items()}
    )
    out = root / "result"
    victim = _plant_links(out, root / "victim")
    result = npuprof(
        "run", "-o", str(out), "--repeat", "0", "--skip-first", "2", "--ranks", "0", "--no-analyse", "--",
        *job, env=clean_env(RANK="0"), timeout=150,
    )  # fmt: skip
    assert pids.exists(), result.stderr
    pid_of = json.loads(pids.read_text())
    return {"result": result, "out": out, "pids": pid_of, "scenarios": scenarios, "victim": victim}


def _plant_links(out: Path, victim_dir: Path) -> Path:
    """``out`` made with its npuprof.log a link to a file of ``victim_dir`` ("keep me") and its pending dir a
    link to ``victim_dir`` (which holds someone.lock): ``victim_dir``."""
    victim_dir.mkdir()
    (victim_dir / "important.txt").write_text("keep me\n")
    (victim_dir / "someone.lock").write_text("")
    out.mkdir()
    (out / "npuprof.log").symlink_to(victim_dir / "important.txt")
    (out / ".npuprof_pending").symlink_to(victim_dir)
    return victim_dir


def _records_of(out: Path, pid: int) -> list[dict]:
    return [capture_record(d) for d in rank_dirs(out) if capture_record(d)["pid"] == pid]


def test_repeat_0_returns(repeat_0_run: dict) -> None:
    """Two of the ways --repeat 0 never returned, each in a forked child of one job (each a training process
    of its own to npuprof): training ends inside a capture (the atexit hook spun forever), and the user's
    own profiler (the "steps aside" path reached the same loop). Each child must end, its captures
    complete."""
    result, pid_of = repeat_0_run["result"], repeat_0_run["pids"]
    assert result.returncode == 0, result.stderr
    assert sorted(pid_of) == sorted(repeat_0_run["scenarios"])
    for scenario in ("ends-inside-capture", "user-profiler"):
        statuses = [r["status"] for r in _records_of(repeat_0_run["out"], pid_of[scenario])]
        assert statuses and all(s == "complete" for s in statuses), (scenario, statuses)


def test_repeat_0_returns_on_an_unselected_rank(repeat_0_run: dict) -> None:
    """--repeat 0: an unselected rank hung inside opt.step() at step 5. (repeat_0_run's 'unselected' child,
    rank 1 of --ranks 0: the job fails, naming it, if it has not ended within 60 s.)"""
    result = repeat_0_run["result"]
    assert result.returncode == 0 and "unselected" not in result.stderr, result.stderr
    assert _records_of(repeat_0_run["out"], repeat_0_run["pids"]["unselected"]) == []


def test_repeat_0_unselected_rank_under_torchrun_does_not_deadlock(out: Path) -> None:
    result = npuprof(
        "run", "-o", str(out), "--ranks", "0", "--repeat", "0", *sched(1, 1, 2), "--no-analyse",
        "--", *TORCHRUN, DIST, "--steps", "10", timeout=150,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    ranks = {capture_record(d)["rank"] for d in rank_dirs(out)}
    assert ranks == {0}


# ---- fault 2: a rank blocked in C++ no longer died of SIGTERM ------------------------------------
def test_sigterm_kills_a_rank_blocked_in_a_collective_mid_capture(out: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = _popen_npuprof(
        "run", "-o", str(out), *sched(1, 1, 50), "--no-analyse", "--",
        *TORCHRUN, DIST, "--steps", "60", "--hang-rank", "1", "--at", "4", "--marks", str(marks),
    )  # fmt: skip
    try:
        _wait_for(lambda: (marks / "rank0.blocked").exists(), proc, "rank 0 blocks in all_reduce")
        time.sleep(1.0)  # rank 0 is now inside gloo's all_reduce, its peer never comes
        rank0 = int((marks / "rank0.pid").read_text())
        os.kill(rank0, signal.SIGTERM)
        sent = time.monotonic()
        while _alive(rank0) and time.monotonic() - sent < 20:
            time.sleep(0.05)
        died_after = time.monotonic() - sent
        assert not _alive(rank0), "rank 0 still alive 20 s after SIGTERM"
        assert died_after < 10, f"rank 0 took {died_after:.1f} s to die of SIGTERM"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_sigterm_to_the_job_keeps_the_capture_of_a_rank_blocked_while_its_peer_finalises(
    out: Path, tmp_path: Path
) -> None:
    """helper-134: SIGTERM to the whole job (torchrun passes it to each rank) while rank 0 waited in a
    collective for rank 1: rank 1 finalised its capture and died, which ended rank 0's collective, but a
    finalise longer than 1 s (a big trace: 44 steps with stacks took ~3 s) came after rank 0's watcher had
    given up on its handler and killed it: rank 0's capture was lost because of rank 1's. A rank of several
    now gives its handler 5 s: rank 0 finalises too once rank 1 is gone."""
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = _popen_npuprof(
        "run", "-o", str(out), *sched(1, 1, 50), "--no-analyse", "--",
        *TORCHRUN, DIST, "--steps", "60", "--hang-rank", "1", "--at", "4", "--marks", str(marks),
        "--slow-export-rank", "1",
    )  # fmt: skip
    try:
        _wait_for(lambda: (marks / "rank0.blocked").exists(), proc, "rank 0 blocks in all_reduce")
        time.sleep(1.0)  # rank 0 is inside gloo's all_reduce, rank 1 asleep in Python
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    records = {capture_record(d)["rank"]: capture_record(d) for d in rank_dirs(out)}
    assert sorted(records) == [0, 1], err[-2000:]
    for rank, record in records.items():
        assert (record["status"], record["detail"]) == ("complete", "stopped by SIGTERM"), (rank, record)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ---- faults 3 and 4: the post-processor inherited the training process's sockets; a pid-named lock ------
def _inherits_script(report: Path) -> str:
    """A training process with an inheritable listening socket and pipe end (as gloo's: no close-on-exec)
    that writes to ``report`` the links of its post-processor's descriptors, and its own socket's and
    pipe's."""
    return (
        "import json, os, socket, torch\n"
        "listener = socket.socket(); listener.bind(('127.0.0.1', 0)); listener.listen()\n"
        "os.set_inheritable(listener.fileno(), True)  # as gloo's sockets: no close-on-exec\n"
        "r, w = os.pipe(); os.set_inheritable(w, True)\n"
        "model = torch.nn.Linear(4, 4); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "from npuprof.agent import entry\n"
        "post = entry._state['agent'].post\n"
        "import time\n"
        "while not post._known_spawn(): time.sleep(0.01)  # `npuprof run` starts it and replies\n"
        "fds = f'/proc/{post.pid}/fd'\n"
        "def link(fd):  # an fd the post-processor closes between the listing and the read is gone\n"
        "    try: return os.readlink(f'{fds}/{fd}')\n"
        "    except FileNotFoundError: return None\n"
        "links = {fd: target for fd in map(int, os.listdir(fds)) if (target := link(fd))}\n"
        f"json.dump({{'links': links, 'socket': os.readlink(f'/proc/self/fd/{{listener.fileno()}}'),\n"
        f"           'pipe': os.readlink(f'/proc/self/fd/{{w}}')}}, open({str(report)!r}, 'w'))\n"
    )


def _same_pid_script(root: Path, out: Path) -> str:
    """A training process that first has another process (another container's, with its pid) hold
    '<its pid>.lock' in the output's pending dir for 600 s, then makes its model and optimizer, and writes
    how long they took to ``root/took``."""
    holder = root / "holder.py"
    holder.write_text(
        "import fcntl, os, sys, time\n"
        # the pending dir again: an earlier process's post-processor, ending, removes it once empty
        "os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o640)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "open(sys.argv[2], 'w').write('held')\n"
        "time.sleep(600)\n"
    )
    held = root / "held"
    return (
        "import os, subprocess, sys, time\n"
        f"pending = os.path.join({str(out)!r}, '.npuprof_pending'); os.makedirs(pending, exist_ok=True)\n"
        "same_pid = os.path.join(pending, f'{os.getpid()}.lock')\n"
        f"holder = subprocess.Popen([sys.executable, {str(holder)!r}, same_pid, {str(held)!r}])\n"
        f"while not os.path.exists({str(held)!r}):\n"
        "    assert holder.poll() is None, f'the lock holder ended ({holder.returncode})'\n"
        "    time.sleep(0.01)\n"
        "import torch\n"
        "start = time.monotonic()\n"
        "model = torch.nn.Linear(4, 4); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"open({str(root / 'took')!r}, 'w').write(str(time.monotonic() - start))\n"
        "holder.kill()\n"
    )


def _trains_in_a_forked_worker(pid_file: Path) -> str:
    """A script that trains 10 steps in a fork-started multiprocessing worker only (the schedule's first
    capture in it), and writes the worker's pid to ``pid_file``."""
    return (
        "import multiprocessing as mp, os, torch\n"
        "def train(steps):\n"
        "    model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for _ in range(steps):\n"
        "        opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        "if __name__ == '__main__':\n"
        # the parent's objects (torch's) out of the worker's collections, as the forked jobs here do; the
        # worker's own are collected as before
        "    import gc; gc.freeze()\n"
        "    worker = mp.get_context('fork').Process(target=train, args=(10,))\n"
        "    worker.start(); worker.join()\n"
        f"    open({str(pid_file)!r}, 'w').write(str(worker.pid))\n"
        "    raise SystemExit(worker.exitcode)\n"
    )


# A script that joins every thread but its own at its end, after 10 steps: the default schedule (README,
# "--skip-first") records steps 6-8, and it counts the threads at step 7, inside that capture
JOINS_ALL_THREADS = """
import threading, torch
model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(10):
    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
    if i == 7:
        print('during', threading.active_count(), flush=True)
names = sorted(t.name for t in threading.enumerate())
print('after', threading.active_count(), names, flush=True)
for t in threading.enumerate():
    if t is not threading.current_thread():
        t.join()
print('joined all', flush=True)
"""
MEMORY_TIMELINE = ("--with-stack", "--profile-memory", "--record-shapes", "--memory-timeline", "json")


@pytest.fixture(scope="module")
def post_processor_start_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run` (its default schedule) of a job that imports torch once and forks three children one
    after the other (conftest.forked_job), each a training process of its own to npuprof, which starts a
    post-processor for it: 'inherits' (_inherits_script), 'same-pid' (_same_pid_script), 'worker'
    (_trains_in_a_forked_worker: its worker's pid in ``root/worker.pid``) and 'joinall' (JOINS_ALL_THREADS,
    the only one that prints), under the flags of a memory timeline (MEMORY_TIMELINE, for 'joinall'). The
    job fails naming each child that did not exit 0. Its result, output directory, the files the children
    wrote (the directory ``root``) and each child's pid."""
    root = tmp_path_factory.mktemp("post_processor_start")
    out = root / "result"
    scenarios = {
        "inherits": _inherits_script(root / "fds.json"),
        "same-pid": _same_pid_script(root, out),
        "worker": _trains_in_a_forked_worker(root / "worker.pid"),
        "joinall": JOINS_ALL_THREADS,
    }
    job, pids = forked_job(root, scenarios)
    # the other holder keeps its lock 600 s: training blocked behind it times out. The model and optimizer
    # (torch._dynamo's import) took 9 s beside four busy loops (helper-196), more on a host more loaded
    result = npuprof("run", "-o", str(out), *MEMORY_TIMELINE, "--", *job, timeout=120)
    assert pids.exists(), result.stderr[-3000:]
    return {"result": result, "root": root, "out": out, "pids": json.loads(pids.read_text())}


def test_post_processor_inherits_no_descriptor_and_writes_no_output(post_processor_start_run: dict) -> None:
    result = post_processor_start_run["result"]
    assert result.returncode == 0, result.stderr
    data = json.loads((post_processor_start_run["root"] / "fds.json").read_text())
    links = {int(k): v for k, v in data["links"].items()}
    assert data["socket"] not in links.values()
    assert data["pipe"] not in links.values()
    assert links[1] == links[2] == "/dev/null"
    assert links[0].startswith("pipe:")


def test_same_pid_in_another_namespace_does_not_block_training(post_processor_start_run: dict) -> None:
    """Another container's process with our pid holds '<pid>.lock' in the shared pending dir."""
    result = post_processor_start_run["result"]
    assert result.returncode == 0, result.stderr
    assert float((post_processor_start_run["root"] / "took").read_text()) < 45


def _stops_its_post_processor(timings: Path) -> str:
    """A training script that stops its post-processor (SIGSTOP), then trains 14 steps and writes how long
    each optimizer step took to ``timings``; the post-processor is continued after them (or after 7 s)."""
    return (
        "import json, os, signal, threading, time, torch\n"
        "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "from npuprof.agent import entry\n"
        "import time\n"
        "while entry._state['agent'].post.pid is None: time.sleep(0.005)  # `npuprof run`'s reply\n"
        "post = entry._state['agent'].post.pid\n"
        "entry._state['agent'].post.hold = lambda held: None  # npuprof's hold would continue it\n"
        "os.kill(post, signal.SIGSTOP)\n"
        # resumed once the steps are done; a step blocked behind it is freed after 7 s (and fails the test)
        "resume = threading.Timer(7, os.kill, (post, signal.SIGCONT)); resume.start()\n"
        "durations = []\n"
        "for _ in range(14):\n"
        "    model(torch.randn(4, 8)).sum().backward()\n"
        "    t = time.monotonic(); opt.step(); durations.append(time.monotonic() - t)\n"
        f"json.dump(durations, open({str(timings)!r}, 'w'))\n"
        "resume.cancel(); os.kill(post, signal.SIGCONT)\n"
    )


@pytest.fixture(scope="module")
def foreign_locks_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run --no-analyse` (skip 1, warm up 1, record 1, 3 times; 48 KB of --metadata a capture)
    into an output directory whose .npuprof_pending holds another run's lock, held (its post-processor
    still busy), and a FIFO named like a lock: each is skipped by name alone, apart, so the tests below
    share the run. Its job imports torch once and forks a child (conftest.forked_job), a training process
    of its own to npuprof: 'stopped' (_stops_its_post_processor, timings in ``root/steps.json``, written as
    its training ends). Its result, output directory, root, the child's pid, how long the run took after
    the training, and whether the other run's lock was still there after it, while still held."""
    root = tmp_path_factory.mktemp("foreign_locks")
    out = root / "result"
    pending = out / ".npuprof_pending"
    pending.mkdir(parents=True)
    os.mkfifo(pending / "x.lock")
    other = pending / "0123456789ab.otherhost.77.abcd.lock"
    lock = os.open(other, os.O_WRONLY | os.O_CREAT, 0o640)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another run's post-processor, still busy
    # timed from the training's end (its timings file), not from the run's start: a run of this size took
    # 45 s on a host at 4 times its load (helper-196); a run that waits for the other run's lock times out
    trained = root / "steps.json"
    scenarios = {"stopped": _stops_its_post_processor(trained)}
    job, pids = forked_job(root, scenarios)
    metadata = [f"--metadata=k{i}={'x' * 4000}" for i in range(12)]  # 48 KB a capture
    try:
        result = npuprof(
            "run", "-o", str(out), "--no-analyse", *sched(1, 1, 1), "--repeat", "3", *metadata, "--", *job,
            timeout=120,
        )  # fmt: skip
        took = time.time() - trained.stat().st_mtime if trained.exists() else float("inf")
        kept = other.exists()
    finally:
        os.close(lock)
    assert pids.exists(), result.stderr[-3000:]
    pid_of = json.loads(pids.read_text())
    return {"result": result, "out": out, "root": root, "pids": pid_of, "took": took, "kept": kept}


def test_launcher_does_not_wait_for_another_runs_post_processor(foreign_locks_run: dict) -> None:
    """A wait for the other run's lock fails here only by the run's timeout (120 s); a count of it among the
    busy ones costs the run 2 s and a wrong 'waiting for N' line, which this run cannot tell from its own
    post-processors' (tests/test_dead_lock_holders.py checks both, in-process)."""
    result = foreign_locks_run["result"]
    assert result.returncode == 0, result.stderr
    assert foreign_locks_run["took"] < 40
    assert foreign_locks_run["kept"], "another run's lock was removed"


# ---- fault 5: a blocking pipe write in the training step -----------------------------------------
def test_a_stopped_post_processor_never_blocks_a_step(foreign_locks_run: dict) -> None:
    """(foreign_locks_run's 'stopped' child: its hand-over pipe fills after 2 captures of 48 KB.)"""
    result = foreign_locks_run["result"]
    assert result.returncode == 0, result.stderr
    durations = json.loads((foreign_locks_run["root"] / "steps.json").read_text())
    assert max(durations) < 4.0, f"a step took {max(durations):.1f} s behind a stopped post-processor"
    records = _records_of(foreign_locks_run["out"], foreign_locks_run["pids"]["stopped"])
    assert len(records) == 3 and all(r["status"] == "complete" for r in records)


# ---- fault 9 (agent side): links planted in the output dir are never followed ---------------------
def test_planted_links_and_fifos_in_the_output_dir_are_not_followed(repeat_0_run: dict) -> None:
    """(repeat_0_run's output directory: its npuprof.log and pending dir were planted links.)"""
    result, out, victim_dir = repeat_0_run["result"], repeat_0_run["out"], repeat_0_run["victim"]
    assert result.returncode == 0, result.stderr
    assert rank_dirs(out), result.stderr  # captures were made and handed over
    assert (victim_dir / "important.txt").read_text() == "keep me\n"
    assert (victim_dir / "someone.lock").exists()
    assert (out / "npuprof.log").is_symlink()


def test_a_fifo_named_like_a_lock_does_not_hang_the_launcher(foreign_locks_run: dict) -> None:
    result = foreign_locks_run["result"]  # .npuprof_pending/x.lock is a FIFO there
    assert result.returncode == 0, result.stderr


# ---- fault 10: training in a fork-started multiprocessing worker was not profiled -----------------
def test_training_in_a_forked_multiprocessing_worker_is_profiled(post_processor_start_run: dict) -> None:
    """(post_processor_start_run's 'worker' child, which trains in its worker only, under the default
    schedule: README, "--skip-first", which records steps 6-8.)"""
    result, out = post_processor_start_run["result"], post_processor_start_run["out"]
    assert result.returncode == 0, result.stderr
    worker = int((post_processor_start_run["root"] / "worker.pid").read_text())
    assert _records_of(out, post_processor_start_run["pids"]["worker"]) == []  # the worker's parent: none
    (d,) = [d for d in rank_dirs(out) if capture_record(d)["pid"] == worker]
    record = capture_record(d)
    assert record["status"] == "complete" and record["steps"] == [6, 7, 8]
    assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()


def test_a_child_forked_by_os_fork_that_trains_logs_its_step_count_once(out: Path, tmp_path: Path) -> None:
    """helper-121: a child of os.fork() that trained and ended by sys.exit logged "steps counted in this
    process" twice (atexit and multiprocessing's exit finalizers both ran the agent's exit). No torch: no
    capture is due (skip 100), and the agent counts the steps of --step-on's function as it counts an
    optimizer's (tests/_standin_jobs.py)."""
    script = tmp_path / "fork_train.py"
    script.write_text(
        "import multiprocessing.util, os, sys  # as torch imports it\n"
        "def train_step(i):\n"
        "    return i\n"
        "def train(n):\n"
        "    for i in range(n):\n"
        "        train_step(i)\n"
        "train(3)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    train(5); sys.exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    flags = [*sched(100, 0, 1), *STEP_ON]
    result = npuprof("run", "-o", str(out), *flags, "--", sys.executable, str(script), timeout=90)
    assert result.returncode == 0, result.stderr
    log = (out / "npuprof.log").read_text()
    counts = re.findall(r"\[agent pid=(\d+) run=\w+\] steps counted in this process: (\d+)", log)
    assert sorted(n for _pid, n in counts) == ["3", "5"], (
        counts
    )  # the parent's 3, the child's own 5, once each


# ---- fault 16: the profiler was stepped inside torch's Optimizer.step range -----------------------
SECOND_PREPARE_FAILS = """
import torch, torch.profiler.profiler as pp
original, calls = pp._KinetoProfile.prepare_trace, [0]
def prepare(self):
    calls[0] += 1
    if calls[0] == 2:
        raise RuntimeError('the next cycle could not prepare')
    return original(self)
pp._KinetoProfile.prepare_trace = prepare
model = torch.nn.Linear(8, 1); opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(20):
    model(torch.randn(4, 8)).sum().backward(); opt.step()
print('enabled after:', torch.autograd._profiler_enabled())
"""


@pytest.fixture(scope="module")
def armed_at_the_optimizer_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run --no-analyse --no-gzip` (skip 0, warm up 1, record 3, twice, no wait between: the
    first capture's warm-up begins as the optimizer is made, each capture's saving step() prepares the next
    cycle) of a job that imports torch once and forks two children one after the other
    (conftest.forked_job), each a training process of its own to npuprof: 'loader' (8 steps of
    tests/scripts/trainer.py with 2 DataLoader workers) then 'second-prepare-fails' (SECOND_PREPARE_FAILS:
    torch's prepare fails the second time, in the saving step() of the first capture). The job fails naming
    each child that did not exit 0. Its result, output directory and each child's pid."""
    root = tmp_path_factory.mktemp("armed_at_the_optimizer")
    out = root / "result"
    scenarios = {
        "loader": trainer_in_process("--steps", "8", "--loader-workers", "2"),
        "second-prepare-fails": SECOND_PREPARE_FAILS,
    }
    job, pids = forked_job(root, scenarios)
    result = npuprof(
        "run", "-o", str(out), "--skip-first", "0", "--wait", "0", "--warmup", "1", "--active", "3",
        "--repeat", "2", "--no-analyse", "--no-gzip", "--", *job, timeout=120,
    )  # fmt: skip
    assert pids.exists(), result.stderr[-3000:]
    return {"result": result, "out": out, "pids": json.loads(pids.read_text())}


def test_profiler_steps_outside_the_optimizer_step_range_and_dataloader_workers_forked_mid_capture_stay_idle(
    armed_at_the_optimizer_run: dict,
) -> None:
    """One job for two faults: its DataLoader workers are forked (at ``iter()``, before step 1) while the
    first capture's warm-up, begun when the optimizer was made, records; each of its two captures is the
    training process's alone, and no ProfilerStep of theirs begins inside an Optimizer.step.
    (armed_at_the_optimizer_run's 'loader' child.)"""
    run = armed_at_the_optimizer_run
    result, out, pid_of = run["result"], run["out"], run["pids"]
    assert result.returncode == 0, result.stderr
    assert {capture_record(d)["pid"] for d in rank_dirs(out)} <= set(pid_of.values())  # no worker's
    dirs = _dirs_of(out, pid_of["loader"])
    records = [capture_record(d) for d in dirs]
    assert [r["status"] for r in records] == ["complete", "complete"], records
    forked = "forked while a capture ran, records nothing"  # the premise: each worker forked mid-capture
    assert (out / "npuprof.log").read_text().count(forked) == 2
    checked = 0
    for d in dirs:
        (trace,) = d.glob("*.pt.trace.json")
        events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
        opt_spans = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("Optimizer.step#")]
        for step in (e for e in events if e["name"].startswith("ProfilerStep#")):
            assert not any(lo < step["ts"] < hi for lo, hi in opt_spans), step["name"]
            checked += 1
    assert checked >= 6


# ---- must-have 3: crashes ---------------------------------------------------------------------------
RAISES = """
model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    if step == 4:
        raise RuntimeError('boom at step 4')
    model(torch.randn(4, 8)).sum().backward(); opt.step()
"""

NO_THREAD = """
import torch.autograd.profiler as ap
def refuse(self):
    raise RuntimeError('Resource temporarily unavailable')
ap.profile._prepare_trace = refuse  # as torch's prepare fails when no thread can start
model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    model(torch.randn(4, 8)).sum().backward(); opt.step()
print('trained 10 steps')
"""


@pytest.fixture(scope="module")
def crashes_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run --no-analyse` (skip 1, warm up 1, record 10) of a job that imports torch once and
    forks two children one after the other (conftest.forked_job), each a training process of its own to
    npuprof: 'no-thread' (torch's profiler fails in its prepare; the test of it below) then 'raises' (the
    script raises at step 4, in the capture: exit code 1). The job ends with 1, the exit code of 'raises',
    when each child ended with its own, else with 99 and says so. Its result, output directory and each
    child's pid."""
    root = tmp_path_factory.mktemp("crashes")
    out = root / "result"
    scenarios = {"no-thread": "import torch\n" + NO_THREAD, "raises": "import torch\n" + RAISES}
    job, pids = forked_job(root, scenarios, codes={"raises": 1}, end=1)
    result = npuprof("run", "-o", str(out), "--no-analyse", *sched(1, 1, 10), "--", *job, timeout=90)
    assert pids.exists(), result.stderr[-3000:]
    return {"result": result, "out": out, "pids": json.loads(pids.read_text())}


def test_script_raising_mid_capture_keeps_the_capture_and_its_traceback(crashes_run: dict) -> None:
    result, out, pid = crashes_run["result"], crashes_run["out"], crashes_run["pids"]["raises"]
    assert result.returncode == 1, result.stderr[-3000:]  # the raising process's, passed through the job
    assert "Traceback" in result.stderr and "RuntimeError: boom at step 4" in result.stderr
    (d,) = [d for d in rank_dirs(out) if capture_record(d)["pid"] == pid]
    record = capture_record(d)
    assert record["status"] == "complete" and record["steps"] == [2, 3, 4]
    assert "partial" in record["detail"]


def test_a_profiler_start_that_fails_inside_torch_does_not_crash_the_job(crashes_run: dict) -> None:
    """helper-124: under a memory limit torch's profiler could not start its thread ("Resource temporarily
    unavailable", raised from its prepare); npuprof then stopped that profiler, whose stop() starts the
    unprepared trace: the job died of SIGSEGV after "training goes on". A profiler that failed inside is
    left as it is now, and the job ends as it would bare. (Its process is crashes_run's 'no-thread' child:
    the job fails with 99 if it did not end with 0.)"""
    result, out, pid = crashes_run["result"], crashes_run["out"], crashes_run["pids"]["no-thread"]
    assert result.returncode != 99, result.stderr[-3000:]
    assert "trained 10 steps" in result.stdout
    said = [line for line in result.stderr.splitlines() if "Resource temporarily unavailable" in line]
    assert said and "training goes on" in said[0], result.stderr[-3000:]
    log = [line for line in (out / "npuprof.log").read_text().splitlines() if f"[agent pid={pid} " in line]
    assert any("the profiler failed as it began: not stopped" in line for line in log), log


FAILS_LATE = """
import torch, torch.profiler.profiler as pp
original = pp._KinetoProfile._get_distributed_info
def broken(self):
    raise RuntimeError('broken process group')
pp._KinetoProfile._get_distributed_info = broken
model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(8):
    model(torch.randn(4, 8)).sum().backward(); opt.step()
print('enabled after:', torch.autograd._profiler_enabled())
pp._KinetoProfile._get_distributed_info = original
with torch.profiler.profile() as own:
    model(torch.randn(4, 8)).sum().backward()
print('own events:', len(own.events()) > 0)
"""

FILE_SIZE_LIMIT = 100 * 1024  # below the trace of 3 of tests/scripts/trainer.py's steps


@pytest.fixture(scope="module")
def late_failures_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run` (skip 1, record 3), under a file size limit (``ulimit -f``) of FILE_SIZE_LIMIT, of
    a job that imports torch once and forks two children one after the other (conftest.forked_job), each a
    training process of its own to npuprof: 'fails-late' (FAILS_LATE: torch's profiler fails after it was
    enabled; no trace) then 'too-big' (8 steps of tests/scripts/trainer.py: its trace is over the limit).
    The job fails naming each child that did not exit 0. Its result, output directory and each child's
    pid."""
    import resource

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, resource.RLIM_INFINITY))

    root = tmp_path_factory.mktemp("late_failures")
    out = root / "result"
    job, pids = forked_job(root, {"fails-late": FAILS_LATE, "too-big": trainer_in_process("--steps", "8")})
    command = [sys.executable, "-m", "npuprof", "run", "-o", str(out), *sched(1, 0, 3), "--", *job]
    result = subprocess.run(
        command, env=clean_env(), capture_output=True, text=True, timeout=120, preexec_fn=limit_file_size
    )
    assert pids.exists(), result.stderr[-3000:]
    return {"result": result, "out": out, "pids": json.loads(pids.read_text())}


def test_a_profiler_start_that_fails_after_torch_enabled_it_is_still_stopped(late_failures_run: dict) -> None:
    """helper-127: a failure inside torch's start_trace after it enabled the profiler (its distributed
    metadata) was taken as "failed as it began": not stopped, so torch recorded every operator of the job
    from then on. Stopped now; the script's own profiler works afterwards. (late_failures_run's
    'fails-late' child: the job fails naming it if it did not exit 0.)"""
    result = late_failures_run["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "enabled after: False" in result.stdout and "own events: True" in result.stdout, result.stdout
    assert "broken process group" in result.stderr


def test_a_next_cycles_prepare_that_fails_at_a_captures_end_does_not_crash_the_job(
    armed_at_the_optimizer_run: dict,
) -> None:
    """helper-128: with --wait 0 --repeat, the step() that saves a capture also prepares the next cycle; its
    prepare failing was taken as a failure "while recording" (the action before it), so npuprof stopped the
    profiler and torch's stop() started the unprepared trace: SIGSEGV. torch's own state decides now.
    (armed_at_the_optimizer_run's 'second-prepare-fails' child: the job fails naming it if it did not exit
    0.)"""
    run = armed_at_the_optimizer_run
    result = run["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "enabled after: False" in result.stdout, result.stdout
    assert "the next cycle could not prepare" in result.stderr
    # the first capture (warm-up step 0, steps 1-3 recorded), saved before the next cycle failed
    (first,) = _dirs_of(run["out"], run["pids"]["second-prepare-fails"])
    assert capture_record(first)["steps"] == [1, 2, 3]


def test_a_file_size_limit_is_named_when_torch_writes_no_trace(late_failures_run: dict) -> None:
    """helper-124: under `ulimit -f` torch wrote no trace and npuprof asked "is the disk full?".
    (late_failures_run's 'too-big' child.)"""
    proc = late_failures_run["result"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = "the job's file size limit of 102400 bytes (ulimit -f) too low?"
    assert said in proc.stderr, proc.stderr[-3000:]
    (record,) = _records_of(late_failures_run["out"], late_failures_run["pids"]["too-big"])
    assert record["status"] != "complete", record


def test_kill_9_of_one_torchrun_rank_mid_capture(out: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    result = npuprof(
        "run", "-o", str(out), *sched(1, 1, 20), "--", *TORCHRUN, DIST, "--steps", "30", "--sleep", "0.05",
        "--kill-rank", "1", "--at", "5", "--marks", str(marks), timeout=150,
    )  # fmt: skip
    assert result.returncode != 0  # torchrun reports the failed rank
    by_rank = {capture_record(d)["rank"]: d for d in rank_dirs(out)}
    assert set(by_rank) == {0, 1}
    assert capture_record(by_rank[1])["status"] == "capturing"
    assert capture_record(by_rank[0])["status"] == "complete"  # finalised by torchrun's SIGTERM
    # the summary's steps of the lost capture: from its first, to a last no record says (it said "2")
    rows = [line.split() for line in result.stderr.splitlines() if by_rank[1].name in line]
    (row,) = [r for r in rows if r[0] == "1"]  # the table's row (a note under the table names it too)
    assert row[:3] == ["1", "2-?", "incomplete*"], row
    analysed = npuprof("analyse", str(out), "--format", "json", timeout=120)
    assert by_rank[1].name in analysed.stderr and "interrupted" in analysed.stderr
    report = json.loads(analysed.stdout)
    assert analysed.returncode == 0, analysed.stderr
    assert [r["rank"] for r in report["ranks"]] == [0]


# ---- must-have 2 and faults 14, 15: full disks -------------------------------------------------------
@pytest.fixture
def tmpfs(tmp_path: Path):
    """A small real tmpfs; the test is skipped where mounting is not permitted."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()

    def make(size: str) -> Path:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        return mount

    yield make
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_capture_skipped_below_min_free_space(tmpfs, tmp_path: Path) -> None:
    """No torch: the window is skipped before its capture begins (tests/_standin_jobs.py)."""
    out = tmpfs("8m") / "result"
    result = npuprof(
        "run", "-o", str(out), "--min-free-space", "16MiB", *sched(1, 1, 2), *stepping_job(tmp_path, 6),
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "skipped" in line and "free" in line]
    assert len(warnings) >= 1
    (next_line,) = [line for line in result.stderr.splitlines() if line.startswith("next:")]
    assert "nothing to analyse" in next_line and "npuprof analyse" not in next_line
    (d,) = rank_dirs(out)
    record = capture_record(d)
    assert record["status"] == "incomplete" and "--min-free-space" in record["detail"]
    # a window skipped is no capture: the summary said "1 capture(s)", its row "incomplete*"
    lines = result.stderr.splitlines()
    assert f"npuprof: no capture, 1 capture window(s) skipped, in {out}" in lines, result.stderr
    (row,) = [line.split() for line in lines if line.endswith(d.name) and not line.startswith("*")]
    assert row[:3] == ["-", "1", "skipped*"], row
    analysed = npuprof("analyse", str(out), timeout=60)
    assert d.name in analysed.stderr and "skipped" in analysed.stderr  # never begun: not "interrupted"
    assert "interrupted" not in analysed.stderr


def test_the_run_summary_counts_windows_skipped_apart_from_captures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two captures made and a later window skipped for want of space: the title said "3 capture(s)"."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    output = tmp_path / "out"
    why = "capture at step 15 skipped: only 1.0 GiB free at /x, below --min-free-space (5.0 GiB)"
    captures = [
        CaptureSummary(
            rank_dir=output / f"vm_7_2026120212124548{i}_ascend_pt", status=status, rank=None, pid=7,
            steps=steps, size_bytes=size, detail=detail, parsed=size > 600, record_only=size < 600,
        )
        for i, (status, steps, size, detail) in enumerate(
            [("complete", [6, 7], 3 << 20, ""), ("complete", [10, 11], 3 << 20, ""),
             ("incomplete", [15], 530, why)]
        )
    ]  # fmt: skip
    print_run_summary(output, captures, 0, ProfileConfig(), output / "npuprof.log")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"npuprof: 2 capture(s), 1 capture window(s) skipped, in {output}", lines
    assert [line.split()[2] for line in lines[2:5]] == ["complete", "complete", "skipped*"], lines
    assert lines[-1].startswith(f"next: npuprof analyse {output}"), lines


def test_the_title_counts_the_windows_skipped_without_a_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-355: a disk filled during a --repeat 0 run: the first window skipped left its record (4 KiB
    were free), the next five could not (0 B): the title said "73 capture(s), 1 capture window(s) skipped"
    above "6 capture window(s) could not record". The title counts the windows the log says were skipped."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.logfile import WINDOWS_SKIPPED_AT_EXIT, format_line
    from npuprof.results.run_record import CaptureSummary

    output, run_id = tmp_path / "out", "0123456789ab"
    output.mkdir()
    why = "only 0 B free at /x, below --min-free-space (1.0 MiB)"
    steps = [15, 20, 25, 30, 35, 40]
    log = [format_line("WARNING", "agent", f"capture at step {n} skipped: {why}", run_id) for n in steps]
    log.append(format_line("INFO", "agent", f"{WINDOWS_SKIPPED_AT_EXIT}{len(steps)}", run_id))
    (output / "npuprof.log").write_text("".join(log))
    captures = [
        CaptureSummary(
            rank_dir=output / f"vm_7_2026120212124548{i}_ascend_pt", status=status, rank=None, pid=7,
            steps=steps, size_bytes=size, detail=detail, parsed=size > 600, record_only=size < 600,
        )
        for i, (status, steps, size, detail) in enumerate(
            [("complete", [6], 3 << 20, ""), ("complete", [10], 3 << 20, ""),
             ("incomplete", [15], 530, f"capture at step 15 skipped: {why}")]
        )
    ]  # fmt: skip
    print_run_summary(output, captures, 0, ProfileConfig(), output / "npuprof.log", run_id=run_id)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"npuprof: 2 capture(s), {len(steps)} capture window(s) skipped, in {output}", lines
    assert any(f"{len(steps)} capture window(s) could not record" in line for line in lines), lines


def test_a_window_skipped_below_min_free_space_imports_no_torch(tmp_path: Path) -> None:
    """A --step-on job that has not loaded torch, its window skipped by the disk check: the skip's record
    made torch's backend first, importing torch in the job's step (seconds, and a CUDA context) for a
    capture known not to run. The record is written without it, naming no backend."""
    out = tmp_path / "result"
    script = tmp_path / "job.py"
    script.write_text(
        "import sys\n"
        "def train_step(i):\n"
        "    return i\n"
        "for i in range(6):\n"
        "    train_step(i)\n"
        "print('torch loaded:', 'torch' in sys.modules)\n"
    )
    result = npuprof(
        "run", "-o", str(out), "--min-free-space", "100%", *sched(1, 1, 2), *STEP_ON,
        "--", sys.executable, str(script), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "torch loaded: False", result.stdout
    (d,) = rank_dirs(out)
    record = capture_record(d)
    assert record["status"] == "incomplete" and record["steps"] == [1], record
    assert "skipped" in record["detail"] and "--min-free-space" in record["detail"], record
    assert record["backend"] is None and record["device"] is None, record


def _full_disk(tmpfs) -> Path:
    """An output directory on a 2 MB tmpfs with no byte left."""
    return _fill(tmpfs("2m"))


def _fill(mount: Path) -> Path:
    """An output directory made on the tmpfs ``mount``, then every byte of it taken."""
    out = mount / "result"
    out.mkdir()
    with open(mount / "filler", "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"x" * 65536)
    return out


def test_a_disk_too_full_for_the_log_is_named_as_the_reason_no_capture_was_written(
    tmpfs, tmp_path: Path
) -> None:
    """A disk with no byte free: npuprof.log and the capture record cannot be written, and the last line said
    "the reason is not known" under the skip's own warning (helper-97); the free space is the reason. No
    torch: the windows are skipped before their captures begin (tests/_standin_jobs.py)."""
    out = _full_disk(tmpfs)
    assert os.statvfs(out).f_bavail == 0
    result = npuprof("run", "-o", str(out), *sched(1, 1, 2), *stepping_job(tmp_path, 6), timeout=120)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())  # the note may be wrapped to the terminal's width
    last = said[said.index("npuprof: no capture was written") :]
    assert last.startswith(
        "npuprof: no capture was written (exit code 0): only 0 B free on the filesystem"
    ), last
    assert "so the captures were skipped" in last and "not known" not in last, last


@pytest.fixture(scope="module")
def full_disk_min_free_0_run(tmp_path_factory: pytest.TempPathFactory):
    """One `npuprof run --min-free-space 0` (nothing skipped ahead) of 8 steps, a window of one step every
    other step (--repeat 0, --wait 1), into an output directory on a 2 MB tmpfs with no byte left: each
    window's capture fails for want of room, npuprof.log takes no line. Read by the two tests below while
    the tmpfs is mounted: its result and output directory."""
    scripts = tmp_path_factory.mktemp("full_disk")
    with small_tmpfs(scripts / "tmpfs", "2m") as mount:
        out = _fill(mount)
        assert os.statvfs(out).f_bavail == 0
        result = npuprof(
            "run", "-o", str(out), "--min-free-space", "0", "--repeat", "0", "--wait", "1", "--warmup", "0",
            "--active", "1", "--skip-first", "0", "--no-analyse", *stepping_job(scripts, 8), timeout=90,
        )  # fmt: skip
        yield {"result": result, "out": out}


def test_a_full_disk_is_named_as_the_reason_with_min_free_space_0(full_disk_min_free_0_run: dict) -> None:
    """helper-103: with --min-free-space 0 nothing is skipped ahead; the capture fails for want of room,
    npuprof.log takes no line, and the last line said "the reason is not known". (The run of the test of
    empty directories below: every one of its windows fails so.)"""
    result, out = full_disk_min_free_0_run["result"], full_disk_min_free_0_run["out"]
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    last = said[said.index("npuprof: no capture was written") :]
    assert f"the filesystem of --output '{out}' is full (0 B free)" in last and "not known" not in last, last


def test_a_shorter_record_rewritten_in_place_on_a_full_disk_is_whole_json(tmpfs) -> None:
    """On a full disk the capture's record is rewritten in the block it has (no room for a temporary file):
    the new record, shorter than the one it replaces (its long detail gone), must not keep the old one's
    tail after it (unreadable JSON: the capture's end lost)."""
    from npuprof.agent.capture import _write_record_even_on_a_full_disk

    mount = tmpfs("64k")
    path = mount / "npuprof_capture.json"
    path.write_text(json.dumps({"status": "capturing", "detail": "x" * 2000}))
    with contextlib.suppress(OSError), open(mount / "filler", "wb") as handle:
        for _ in range(64):
            handle.write(b"\0" * 4096)
            handle.flush()
    assert os.statvfs(mount).f_bavail == 0
    _write_record_even_on_a_full_disk(path, {"status": "complete", "steps": [3, 4]})
    assert json.loads(path.read_text()) == {"status": "complete", "steps": [3, 4]}


def test_capture_stopped_when_the_disk_fills_during_it(tmpfs, tmp_path: Path) -> None:
    mount = tmpfs("64m")
    out = mount / "result"
    script = tmp_path / "filler.py"
    script.write_text(
        "import glob, json, os, time, torch\n"
        "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "def stopped():\n"
        f"    for record in glob.glob({str(out / '*_ascend_pt' / 'npuprof_capture.json')!r}):\n"
        "        try:\n"
        "            return json.load(open(record)).get('status') == 'incomplete'\n"
        "        except (OSError, ValueError):\n"
        "            pass\n"
        "    return False\n"
        "after_stop = 0\n"
        "for step in range(60):\n"
        "    if step == 6:\n"
        f"        with open({str(mount / 'filler')!r}, 'wb') as f: f.write(b'x' * (40 << 20))\n"
        "    model(torch.randn(4, 8)).sum().backward(); opt.step(); time.sleep(0.1)\n"
        # training goes on a few steps after the capture was stopped, then ends (no need to run all 60)
        "    if after_stop or (step > 6 and stopped()):\n"
        "        after_stop += 1\n"
        "        if after_stop > 3:\n"
        "            break\n" + FREEZE_AT_EXIT
    )
    result = npuprof(
        "run", "-o", str(out), "--min-free-space", "32MiB", *sched(1, 1, 50), "--no-analyse",
        "--", sys.executable, str(script), timeout=90,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(out)
    record = capture_record(d)
    assert record["status"] == "incomplete", record
    assert "stopped at step" in record["detail"] and "--min-free-space" in record["detail"]
    assert 6 < record["steps"][-1] < 51
    assert list(d.glob("*.pt.trace.json*")), "the steps recorded before the stop are kept"
    # and they can be read: analyse reports them (it refused the capture as interrupted, for ever)
    (mount / "filler").unlink()
    report = npuprof("analyse", str(out), "--format", "json", timeout=60)
    assert report.returncode == 0, report.stderr
    (rank,) = json.loads(report.stdout)["ranks"]
    assert [s["step"] for s in rank["steps"]] == record["steps"]
    assert any("stopped before its planned end" in w for w in rank["warnings"]), rank


def test_disk_full_during_export_leaves_no_partial_trace(tmpfs) -> None:
    out = tmpfs("600k") / "result"
    result = npuprof(
        "run", "-o", str(out), "--min-free-space", "0", "--record-shapes", "--with-stack", *sched(1, 1, 4),
        "--", *trainer("--steps", "8"), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "was not written" in result.stderr
    (d,) = rank_dirs(out)
    assert capture_record(d)["status"] == "incomplete"
    assert "export failed" in capture_record(d)["detail"]
    assert capture_record(d)["steps"] == [2, 3, 4, 5]  # skip 1, warm up 1: the 4 steps it was to hold
    leftovers = [p.name for p in d.iterdir() if ".tmp" in p.name or ".pt.trace." in p.name]
    assert not leftovers


def test_sigint_during_an_export_is_delivered_after_it(tmp_path: Path) -> None:
    script = (
        "import os, signal, time\n"
        "from npuprof.agent.signals import sigint_held_back\n"
        "order = []\n"
        "try:\n"
        "    with sigint_held_back():\n"
        "        os.kill(os.getpid(), signal.SIGINT); time.sleep(0.2); order.append('export done')\n"
        "except KeyboardInterrupt:\n"
        "    order.append('interrupt')\n"
        "print(order)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "['export done', 'interrupt']", done.stderr


def _ends_then_holds_a_run_lock(out: Path, tmp_path: Path, then: str = "") -> Path:
    """A plain Python job (no torch: what these tests check is the launcher's wait after the job, the
    signal it is sent then and its record, no capture) that leaves a process holding a post-processor's
    lock of its run (conftest.hold_a_run_lock; its pid and the job's in ``tmp_path/post.pid``), so that
    `npuprof run` waits after it; ``then`` runs last."""
    script = tmp_path / "stall.py"
    script.write_text(hold_a_run_lock(out, tmp_path / "held", tmp_path / "post.pid") + then)
    return script


def test_sigterm_during_the_post_processing_wait_stops_it_and_keeps_the_record(
    out: Path, tmp_path: Path
) -> None:
    script = _ends_then_holds_a_run_lock(out, tmp_path)
    proc = _popen_npuprof("run", "-o", str(out), *sched(1, 1, 1), "--", sys.executable, str(script))
    post = tmp_path / "post.pid"
    try:
        _wait_for(lambda: post.exists() and not _alive(int(post.read_text().split()[1])), proc, "job end", 90)
        # the launcher says it waits for the lock's holder after a quiet half second (a SIGTERM before its
        # wait began would not stop it: the holder keeps its lock for 60 s)
        said = stderr_until(proc, WAITS_FOR_POST_PROCESSING)
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
        err = said + rest
    finally:
        if post.exists():
            os.kill(int(post.read_text().split()[0]), signal.SIGKILL)
    assert proc.returncode == -signal.SIGTERM
    assert "stopped waiting" in err
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["exit_code"] == 0 and record["end"] is not None


def test_a_job_stopped_by_sigterm_is_waited_for_only_so_long_after_its_end(out: Path, tmp_path: Path) -> None:
    """helper-100: SIGTERM to `npuprof run` (a batch system's stop, its SIGKILL ~30 s later) ended the job,
    then npuprof waited 27 s for a memory timeline to be post-processed, and would have been killed without
    its record. After a stop signal the wait lasts 10 s at most; the work goes on in the background."""
    script = _ends_then_holds_a_run_lock(out, tmp_path, then="time.sleep(60)\n")
    proc = _popen_npuprof("run", "-o", str(out), *sched(1, 1, 1), "--", sys.executable, str(script))
    post = tmp_path / "post.pid"
    try:
        _wait_for(lambda: post.exists() and post.read_text(), proc, "the job's lock holder", 90)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=40)
        took = time.monotonic() - sent
    finally:
        if post.exists():
            os.kill(int(post.read_text().split()[0]), signal.SIGKILL)
    assert proc.returncode == -signal.SIGTERM, err
    text = " ".join(err.split())
    # said when the quiet first 2 s of the wait are over: what is left of its 10 s; then the whole wait
    (more,) = re.findall(r"to finish, at most (\d+) s more after SIGTERM", text)
    (waited,) = re.findall(r"stopped waiting after (\d+) s \(the job was stopped by SIGTERM\)", text)
    assert int(more) <= 8 and 9 <= int(waited) <= 11, text
    assert 10 <= took < 25, took
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["exit_code"] == 128 + signal.SIGTERM and record["end"] is not None


REAP_EVERY_CHILD = """def reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
signal.signal(signal.SIGCHLD, reap)
"""


def _kills_its_post_processor(kill_at: int, steps: int, prelude: str = "") -> str:
    """A training script that runs ``prelude``, then kills its post-processor (kill -9) after step
    ``kill_at`` of ``steps``, and trains on once it has died: a SCHED_IDLE post-processor beside a busy loop
    on its core took up to 0.47 s to die of the kill (the 0.5 s sleep that stood here), and one still dying
    takes the next hand-over into its pipe, that capture then unparsed (docs/architecture.md, "Process
    model")."""
    return (
        "import os, select, signal, time, torch\n"
        f"{prelude}"
        "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"for step in range({steps}):\n"
        "    model(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        f"    if step == {kill_at}:\n"
        "        from npuprof.agent import entry\n"
        "        while entry._state['agent'].post.pid is None: time.sleep(0.005)  # `npuprof run`'s reply\n"
        "        post = entry._state['agent'].post.pid\n"
        "        gone = os.pidfd_open(post)\n"
        "        os.kill(post, signal.SIGKILL)\n"
        "        select.select([gone], [], []); os.close(gone)  # dead before the next hand-over\n"
        "    time.sleep(0.05)\n"
    )


@pytest.fixture(scope="module")
def killed_post_processors_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `npuprof run` (a capture of steps 5-6, then every 7 steps) of a job that imports torch once and
    forks two children one after the other (conftest.forked_job), each a training process of its own to
    npuprof, with a post-processor of its own that it kills (kill -9): 'killed' after step 6 of 40,
    'reaped' after step 5 of 20 (inside steps 5-6) once it has set a SIGCHLD handler that reaps every
    child. The job must exit 0. Its result, output directory and each child's pid."""
    root = tmp_path_factory.mktemp("killed_post_processors")
    scenarios = {
        "killed": _kills_its_post_processor(kill_at=6, steps=40),
        "reaped": _kills_its_post_processor(kill_at=5, steps=20, prelude=REAP_EVERY_CHILD),
    }
    job, pids = forked_job(root, scenarios)
    out = root / "result"
    result = npuprof(
        "run", "-o", str(out), "--repeat", "0", "--wait", "4", "--warmup", "1", "--active", "2",
        "--skip-first", "0", "--", *job, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return {"result": result, "out": out, "pids": json.loads(pids.read_text())}


def _unparsed(dirs: list[Path]) -> list[str]:
    return [d.name for d in dirs if not (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()]


def _dirs_of(out: Path, pid: int) -> list[Path]:
    return [d for d in rank_dirs(out) if capture_record(d)["pid"] == pid]


def test_a_post_processor_killed_mid_run_is_replaced_for_the_next_captures(
    killed_post_processors_run: dict,
) -> None:
    """A job of days with periodic captures: one kill -9 of the post-processor (an OOM kill, say) left
    every later capture unparsed and its raw trace plain. A new one takes the next captures."""
    run = killed_post_processors_run
    dirs = _dirs_of(run["out"], run["pids"]["killed"])
    assert len(dirs) >= 5, dirs
    # at most the capture in the pipe when it died is left unparsed, and none after it
    assert len(_unparsed(dirs)) <= 1, _unparsed(dirs)
    assert (dirs[-1] / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()
    assert list(dirs[-1].glob("*.pt.trace.json.gz"))
    said = " ".join(run["result"].stderr.split())  # the run summary, whatever its width
    # one kill -9 in each of the job's two training processes
    assert "a background post-processor was found dead 2 time(s)" in said, run["result"].stderr


def test_a_post_processor_the_script_reaped_is_replaced_before_the_next_capture(
    killed_post_processors_run: dict,
) -> None:
    """A script that reaps every child (a SIGCHLD handler calling waitpid(-1)) reaped our killed
    post-processor before we could: the capture handed over next went into its closed pipe, unparsed."""
    out, pid = killed_post_processors_run["out"], killed_post_processors_run["pids"]["reaped"]
    dirs = _dirs_of(out, pid)
    assert len(dirs) >= 2, dirs
    log = [line for line in (out / "npuprof.log").read_text().splitlines() if f"[agent pid={pid} " in line]
    assert not _unparsed(dirs), log
    assert any("takes the next captures" in line for line in log), log


def test_windows_skipped_on_a_full_disk_leave_no_empty_directories(full_disk_min_free_0_run: dict) -> None:
    """Each window on a disk too full for its record left an empty *_ascend_pt directory (and a log line
    blaming a missing file)."""
    result, out = full_disk_min_free_0_run["result"], full_disk_min_free_0_run["out"]
    assert result.returncode == 0, result.stderr
    empty = [d for d in out.glob("*_ascend_pt") if not any(d.iterdir())]
    assert empty == [], empty


def test_a_script_that_joins_every_thread_at_its_end_sees_only_its_own(
    post_processor_start_run: dict,
) -> None:
    """helper-98: npuprof's daemons (the disk guard, the SIGTERM watcher, the hand-over) were in
    threading.enumerate(): a script joining every thread but its own at its end waited for ever, and
    active_count() was off. They are not listed now, in and after a capture, with a memory timeline.
    (post_processor_start_run's 'joinall' child: the job fails naming it if it did not end within the run's
    120 s.)"""
    run = post_processor_start_run
    result = run["result"]
    assert result.returncode == 0, result.stderr
    # what the script prints run bare (one thread, its own): under npuprof the same
    assert result.stdout.splitlines() == ["during 1", "after 1 ['MainThread']", "joined all"], result.stderr
    (d,) = _dirs_of(run["out"], run["pids"]["joinall"])
    assert capture_record(d)["steps"] == [6, 7, 8]  # the premise: 'during' was counted inside the capture
    assert (d / "memory_timeline.json").is_file(), result.stderr
