"""`npuprof run` waits for its post-processors after the job; one that was stopped (SIGSTOP, Ctrl-Z) would
be waited for until it is continued, and the wait says so, with the pid and what to do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import post_processor_pid, post_processor_served, wait_for_end, wait_for_state

from npuprof.results import layout, postprocess, spawner

# a lock held as a post-processor holds it: its pid written inside; "npuprof.results.postprocess" in its
# command line (an argument here), as in a post-processor's. Held until its stdin closes, or for the seconds
# its second argument says.
HOLD_LOCK = (
    "import fcntl, os, select, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "os.write(fd, f'{os.getpid()}\\n'.encode())\n"
    "print('locked', flush=True)\n"
    "select.select([sys.stdin], [], [], float(sys.argv[2]))\n"
)


RUN_ID = "abcdef123456"


def _holding_the_lock(tmp_path: Path, seconds: float) -> subprocess.Popen[str]:
    """A process holding a post-processor's lock of run RUN_ID in ``tmp_path`` for ``seconds``."""
    pending = tmp_path / layout.PENDING_DIR
    pending.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(pending / "lock"), str(seconds), "npuprof.results.postprocess"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    os.rename(pending / "lock", pending / f"{RUN_ID}.{os.uname().nodename}.{holder.pid}.0a0b0c0d.lock")
    return holder


def test_a_stopped_post_processor_is_named_once_and_the_wait_ends_when_it_goes_on(tmp_path: Path) -> None:
    told: list[int] = []
    # it ends once told to, not after a time: a test descheduled that long stopped a process already gone
    holder = _holding_the_lock(tmp_path, 30.0)
    try:
        os.kill(holder.pid, signal.SIGSTOP)

        def on_stopped(pid: int) -> None:
            told.append(pid)
            os.kill(pid, signal.SIGCONT)  # what the note says to do
            assert holder.stdin is not None
            holder.stdin.close()  # its work done

        assert postprocess.wait_for_pending(tmp_path, RUN_ID, poll_s=0.05, on_stopped=on_stopped) == 1
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait()
    assert told == [holder.pid]


def test_a_running_post_processor_is_not_called_stopped(tmp_path: Path) -> None:
    holder = _holding_the_lock(tmp_path, 2.5)
    try:
        told: list[int] = []
        assert postprocess.wait_for_pending(tmp_path, RUN_ID, poll_s=0.05, on_stopped=told.append) == 1
        assert told == []
    finally:
        holder.kill()
        holder.wait()


def test_a_post_processor_removes_its_lock_file_when_its_work_is_done(tmp_path: Path) -> None:
    """A launcher that stopped waiting (SIGTERM, Ctrl-C) left `.npuprof_pending/<run>...lock` for ever:
    the post-processor itself removes it once its input ends."""
    post = postprocess.Postprocessor(tmp_path, RUN_ID)
    post.start()
    (lock,) = postprocess.pending_jobs(tmp_path, RUN_ID)
    assert lock.startswith(f"{RUN_ID}.")
    pid = post_processor_pid(post)
    os.close(post._pipe)  # the training process has ended: no more jobs  # type: ignore[arg-type]
    post._pipe = None
    wait_for_end(pid)
    assert postprocess.pending_jobs(tmp_path, RUN_ID) == []
    assert not (tmp_path / layout.PENDING_DIR).exists()  # the last one out removes the directory too


def test_captures_still_queued_at_the_end_are_parsed_after_it(tmp_path: Path) -> None:
    """Captures that came faster than they were parsed were still queued when the training process ended:
    they were written off as unparsed (751 of 1,666 in a long job) with the summary blaming a dead
    post-processor. They now reach it through its spool, read once the pipe is closed."""
    from analyse_support.handmade import cpu_trace, write_rank_dir

    from npuprof.results import handover

    post = postprocess.Postprocessor(tmp_path, RUN_ID)
    post.start()
    pid = post_processor_pid(post)
    assert post.spool is not None
    jobs = []
    for k in range(2):
        rank_dir = write_rank_dir(tmp_path, cpu_trace(), name=f"host_{k}_2025010100000000{k}")
        (trace,) = rank_dir.glob("*.pt.trace.json")
        record = handover.CaptureRecord(status="complete", trace=trace.name, steps=[7])
        jobs.append(
            {"rank_dir": str(rank_dir), "trace": str(trace), "record": handover.record_plain(record),
             "analyse": True, "written": True}
        )  # fmt: skip
    assert post.spool_left(jobs) == []
    post.forget()  # the training process ends: the pipe closes, the spool is read
    wait_for_end(pid)
    for job in jobs:
        assert (Path(job["rank_dir"]) / layout.PARSED_DIR / layout.ANALYSE_DONE).exists()
    assert not post.spool.exists()
    # the job the pipe's writer held at the end may reach the post-processor twice (pipe and spool): the
    # second time changes nothing (it put back a record naming the plain trace, gzipped away meanwhile)
    job = {**jobs[0], "gzip": True}
    assert postprocess.run_job(handover.job_from(job)) == 0
    record = json.loads((Path(job["rank_dir"]) / layout.CAPTURE_RECORD).read_text())
    assert record["trace"].endswith(".pt.trace.json.gz") and Path(job["rank_dir"], record["trace"]).exists()
    assert postprocess.run_job(handover.job_from(job)) == 0
    again = json.loads((Path(job["rank_dir"]) / layout.CAPTURE_RECORD).read_text())
    assert again == record


def test_a_memory_snapshot_still_being_copied_at_the_end_is_said_lost_for_that_reason(tmp_path: Path) -> None:
    """A job ending within 5 s of a capture whose event tree takes longer to copy (the exit's wait for the
    hand-over ran out) spooled its job without the snapshot file: the post-processor said the training
    process had not written it, "a full disk? npuprof.log says why" (nothing there said why), the spool's
    line blamed "captures came faster than they were parsed", and the record named the file. The end now
    says why the memory timeline is missing, with the fix, and the record names no such file."""
    from types import SimpleNamespace

    from analyse_support.handmade import cpu_trace, write_rank_dir

    from npuprof.agent.entry import Agent
    from npuprof.agent.log import AgentLog, get_log, set_log
    from npuprof.agent.memory_snapshot import SNAPSHOT_FILE
    from npuprof.results import handover
    from npuprof.results.extras import not_produced_notes

    log_path = tmp_path / layout.RUN_LOG
    rank_dir = write_rank_dir(tmp_path, cpu_trace(), name="host_1_20250101000000000")
    (trace,) = rank_dir.glob("*.pt.trace.json")
    record = handover.CaptureRecord(status="complete", trace=trace.name, steps=[7], extras=[SNAPSHOT_FILE])
    job = {
        "rank_dir": str(rank_dir), "trace": str(trace), "record": handover.record_plain(record),
        "written": True,
        "exports": {"memory_snapshot": SNAPSHOT_FILE, "memory_formats": ["json"], "memory_device": "cpu"},
    }  # fmt: skip
    previous = get_log()
    agent_log = AgentLog(str(log_path), "agent", RUN_ID)
    set_log(agent_log)
    try:
        post = postprocess.Postprocessor(tmp_path, RUN_ID)
        post.start()
        pid = post_processor_pid(post)
        post.drain = lambda copies_s=0.0: [job]  # type: ignore[method-assign]  # the exit's wait ran out
        Agent._hand_over_the_rest(SimpleNamespace(post=post, log=agent_log))  # type: ignore[arg-type]
        post.forget()  # the training process ends: the pipe closes, the spool is read
        wait_for_end(pid)
    finally:
        set_log(previous)
    lines = log_path.read_text().splitlines()
    (note,) = not_produced_notes(lines)  # what `npuprof run` shows at the end
    assert note.startswith(
        f"memory_timeline.* not produced ({rank_dir.name}): the process ended before the copy"
    )
    assert f"npuprof memory-timeline {rank_dir}" in note
    assert not any("full disk" in line or "faster than they were parsed" in line for line in lines)
    assert any("(a memory snapshot was still being copied)" in line for line in lines)
    assert json.loads((rank_dir / layout.CAPTURE_RECORD).read_text())["extras"] == []


def test_a_file_where_the_lock_folder_goes_is_named_when_no_post_processor_starts(tmp_path: Path) -> None:
    """A regular file at <output>/.npuprof_pending (a hostile or damaged output dir) left every capture
    unparsed and ungzipped, and the run said "no post-processor could be started (Not a directory)",
    naming nothing to fix; the path is said."""
    (tmp_path / layout.PENDING_DIR).write_text("not a folder")
    post = postprocess.Postprocessor(tmp_path, RUN_ID)
    with pytest.raises(NotADirectoryError) as raised:
        post.start()
    said = postprocess.not_started(raised.value)
    planted = tmp_path / layout.PENDING_DIR
    assert f"{postprocess.POST_NOT_STARTED} (Not a directory: {planted}): " in said, said


def test_the_post_processor_is_held_while_a_capture_records_and_goes_on_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its work on an earlier capture made the steps of the next 3-25x slower on 2 cores (nice 10, and
    SCHED_IDLE too: disk writes and their kernel threads): it is stopped while a profiler records (one
    started by `npuprof run`, here a service of this process's)."""
    post, pid = post_processor_served(tmp_path, RUN_ID, monkeypatch)  # hold() needs the spawner
    try:
        post.hold(True)  # in its first moments it is not held: a stop could outlive us (see hold)
        _hold_when_ready(post)
        assert wait_for_state(pid, {"T"}) == "T"
        post.hold(False)
        assert wait_for_state(pid, {"S", "R", "D"}) in {"S", "R", "D"}
    finally:
        post.hold(False)
        post.forget()
    assert postprocess.wait_for_pending(tmp_path, RUN_ID, poll_s=0.05) == 1  # it ends at EOF


def _hold_when_ready(post: postprocess.Postprocessor) -> None:
    import time

    deadline = time.monotonic() + 20
    while not post._held and time.monotonic() < deadline:
        post.hold(True)
        time.sleep(0.01)
    assert post._held


def test_a_stopped_post_processor_whose_training_process_is_gone_is_continued(tmp_path: Path) -> None:
    """The launcher continues, before it waits, a post-processor left stopped (its training process killed
    while the launcher could not: tests/test_spawner.py has the launcher's own watch)."""
    holder = _holding_the_lock(tmp_path, 5.0)  # stopped with no parent-death signal
    try:
        os.kill(holder.pid, signal.SIGSTOP)
        assert wait_for_state(holder.pid, {"T"}) == "T"
        postprocess.continue_held(tmp_path, RUN_ID)
        assert wait_for_state(holder.pid, {"S", "R"}) in {"S", "R"}
    finally:
        holder.kill()
        holder.wait()


WAITS_FOR_ALL_CHILDREN = (
    "import os, signal, sys, time\n"
    "from pathlib import Path\n"
    "from npuprof.results.postprocess import Postprocessor\n"
    "post = Postprocessor(Path(sys.argv[1]), sys.argv[2])\n"
    "post.start()\n"
    "for _ in range(300):\n"
    "    post.hold(True)  # never held: no launcher would continue it after our death\n"
    "    if post.pid is not None:\n"
    "        break\n"
    "    time.sleep(0.01)\n"
    "reaped = []\n"
    "while True:\n"
    "    try:\n"
    "        reaped.append(os.wait()[0])\n"
    "    except ChildProcessError:\n"
    "        break\n"
    "time.sleep(0.5)\n"
    "print(post.pid is not None, post._held, len(reaped), post._has_exited(), flush=True)\n"
    "post.forget()\n"
)


def test_without_a_launcher_a_script_that_waits_for_all_its_children_does_not_wait_for_it(
    tmp_path: Path,
) -> None:
    """Where `npuprof run` cannot be asked (a node of a multi-node job, another network namespace), the
    training process started its post-processor as its child: a script waiting for all its children
    (`os.wait()` until none is left) waited for ever (helper-80). It is started through sh now, never
    our child, and never held."""
    env = {k: v for k, v in os.environ.items() if k != spawner.ENV_SPAWN}
    job = subprocess.run(
        [sys.executable, "-c", WAITS_FOR_ALL_CHILDREN, str(tmp_path), RUN_ID],
        capture_output=True, text=True, timeout=60, env={**env, "NPUPROF_CONFIG": "{}"},
    )  # fmt: skip
    assert job.returncode == 0, job.stderr
    known, held, reaped, ended = job.stdout.split()
    assert (known, held, ended) == ("True", "False", "False")  # it waits for jobs on its pipe
    assert reaped in {"0", "1"}  # the sh that started it, when we had not reaped it yet
    postprocess.wait_for_pending(tmp_path, RUN_ID, poll_s=0.05)  # it ends with the script
    assert postprocess.pending_jobs(tmp_path, RUN_ID) == []


def test_the_post_processor_competes_as_the_weakest_of_autogroups() -> None:
    """Its own session is its own autogroup where the kernel groups tasks by session: SCHED_IDLE then ranked
    it against itself only, and its group took 75% of a core from a busy job (helper-78)."""
    code = (
        "import os; from npuprof.results.postprocess import yield_to_training; yield_to_training(); "
        "print(os.sched_getscheduler(0)); a = '/proc/self/autogroup'; "
        "print(open(a).read().strip() if os.path.exists(a) else 'none')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, start_new_session=True
    )
    assert done.returncode == 0, done.stderr
    policy, group = done.stdout.splitlines()[:2]
    assert int(policy) == os.SCHED_IDLE
    enabled = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if enabled.exists() and enabled.read_text().strip() == "1":  # else the policy applies as it is
        assert group.endswith("nice 19"), group


def test_a_post_processor_at_its_exit_still_holding_its_lock_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A post-processor ending at EOF has no command line left (Linux frees its memory before its
    descriptors) while it still holds its lock for a moment: read as a dead one whose lock a copy holds,
    it was not waited for and counted 0 (test_the_post_processor_is_held_... failed so once in a fresh-clone
    run). Its lock freed within the grace, it is waited for and counted."""
    pending = tmp_path / layout.PENDING_DIR
    pending.mkdir()
    lock = pending / f"{RUN_ID}.{os.uname().nodename}.{os.getpid()}.0badf00d.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_WRONLY | os.O_CREAT, 0o640)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.pwrite(fd, f'{os.getpid()}\\n'.encode(), 0)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n"
            "time.sleep(0.3)\n",  # at its exit, the lock still held
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        # what /proc says of a process at its exit: its command line gone
        monkeypatch.setattr(postprocess, "_command_line", lambda pid: [])
        monkeypatch.setattr(postprocess, "EXITING_GRACE_S", 30.0)  # a loaded host's moment
        assert holder.stdin is not None
        holder.stdin.close()
        assert postprocess.wait_for_pending(tmp_path, RUN_ID, poll_s=0.01) == 1
    finally:
        holder.kill()
        holder.wait()
