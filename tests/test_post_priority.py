"""The post-processors' CPU priority: idle while the job trains, normal once `npuprof run` waits for them
after the job (helper-111: an idle-priority parse on a busy machine made the wait 7-8 s for 0.3 s of work),
and only theirs (helper-113: a lock file planted in a shared output dir named another user's process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import clean_env, sched

from npuprof.results import layout
from npuprof.results.postprocess import lift_idle_priority
from npuprof.results.priority import restore_normal_priority

# A process as the post-processor lowers itself (postprocess.yield_to_training), named as one on its command
# line, with a second thread and a forked child (the side tables' process); it prints its child's pid.
IDLE_FAMILY = textwrap.dedent(
    """
    import os, sys, threading, time
    from npuprof.results.postprocess import yield_to_training
    yield_to_training()
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    print(os.getpid(), child, flush=True)
    time.sleep(60)
    """
)
IDLE = (os.SCHED_IDLE, 19)
NORMAL = (os.SCHED_OTHER, 0)


def _policies(pid: int) -> set[tuple[int, int]]:
    """(scheduling policy, nice) of every thread of ``pid``."""
    found = set()
    for tid in map(int, os.listdir(f"/proc/{pid}/task")):
        found.add((os.sched_getscheduler(tid), os.getpriority(os.PRIO_PROCESS, tid)))
    return found


def _may_raise_priority() -> bool:
    """CAP_SYS_NICE in the effective set (root in most containers)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 23))
    return False


def _autogroup_nice(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except FileNotFoundError:  # no autogroups in this kernel
        return None


def _lower_autogroup(pid: int) -> bool:
    """The autogroup of ``pid`` to nice 19, waiting out the kernel's one write per 100 ms: whether this
    machine lets a process write an autogroup's nice at all."""
    deadline = time.monotonic() + 5
    while _autogroup_nice(pid) not in (None, 19) and time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/autogroup", "w") as autogroup:
                autogroup.write("19")
        except BlockingIOError:
            time.sleep(0.02)
        except OSError:
            return False
    assert _autogroup_nice(pid) in (None, 19)
    return True


def _idle_family(orphan: bool) -> tuple[subprocess.Popen[str], int, int]:
    """The family above, a child of this process, or (``orphan``) of none of ours (its shell has left)."""
    command = [sys.executable, "-c", IDLE_FAMILY, "npuprof.results.postprocess"]
    if orphan:
        command = ["sh", "-c", 'exec 3>&1; ("$@" &) ; exit 0', "sh", *command]
    # Its own session, as the spawner starts a post-processor: its autogroup is not the test run's.
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=clean_env(), start_new_session=True
    )
    pid, child = map(int, proc.stdout.readline().split())
    assert _policies(pid) == {IDLE} and _policies(child) == {IDLE}  # as yield_to_training leaves them
    return proc, pid, child


def _end(*pids: int) -> None:
    for pid in pids:
        subprocess.run(["kill", "-KILL", str(pid)], check=False, capture_output=True)


def test_an_idle_process_its_threads_and_its_children_get_normal_priority() -> None:
    proc, pid, child = _idle_family(orphan=False)
    try:
        # As yield_to_training did, unless the kernel's rate limit refused it then; the test's own write
        # comes the moment before npuprof's, which waits the limit out (CI, without it: False).
        writable = _lower_autogroup(pid)
        # to nice 0 and an autogroup of nice 0 (what a launcher at the default priority gives back; this
        # process's own autogroup may be lower: some sandboxes start sessions at nice 19)
        threads_raised, autogroup_raised = restore_normal_priority(pid, (0, 0))
        assert threads_raised is _may_raise_priority() and autogroup_raised is writable
        expected = {NORMAL} if threads_raised else {IDLE}
        assert _policies(pid) == expected and _policies(child) == expected
        if writable:  # one autogroup, the family's session: its nice 0 needs no privilege
            assert _autogroup_nice(pid) in (None, 0) and _autogroup_nice(child) in (None, 0)
    finally:
        _end(pid, child)
        proc.wait()


def test_the_priority_given_back_is_the_launchers_never_more() -> None:
    """helper-121: under `nice -n 10 npuprof run`, the post-processors were given nice 0 once the job ended,
    more than the user gave npuprof. They get the launcher's own nice (and its autogroup's) back."""
    proc, pid, child = _idle_family(orphan=False)
    try:
        threads_raised, _ = restore_normal_priority(pid, (7, 0))
        policy = NORMAL[0] if threads_raised else IDLE[0]
        assert {nice for _policy, nice in _policies(pid) | _policies(child)} == {7 if threads_raised else 19}
        assert {p for p, _nice in _policies(pid) | _policies(child)} == {policy}
    finally:
        _end(pid, child)
        proc.wait()
    launched_nice = subprocess.run(
        [sys.executable, "-c", "from npuprof.results.priority import own_priority; print(own_priority()[0])"],
        preexec_fn=lambda: os.nice(4),
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
    )
    assert int(launched_nice.stdout) == os.getpriority(os.PRIO_PROCESS, 0) + 4


@pytest.mark.parametrize("whose", ["ours", "not-ours"])
def test_only_post_processors_the_launcher_started_are_raised(tmp_path: Path, whose: str) -> None:
    """The launcher raises the processes its spawner started, and of those only its own children named as
    post-processors: helper-113 planted a lock file of the run naming another user's idle process, which
    got SCHED_OTHER and nice 0 with its child when the pids were read from the locks."""
    proc, pid, child = _idle_family(orphan=whose == "not-ours")
    try:
        pending = tmp_path / layout.PENDING_DIR
        pending.mkdir()
        (pending / f"run1.{os.uname().nodename}.1.0a0b0c0d.lock").write_text(f"{pid}\n")
        assert lift_idle_priority() == []  # this process's spawner started nothing: locks are not read
        lifted = lift_idle_priority([pid])  # as if the spawner had started it
        if whose == "not-ours":  # not a child of this process: left alone
            assert lifted == [] and _policies(pid) == {IDLE} and _policies(child) == {IDLE}
        else:
            assert [p for p, *_ in lifted] == [pid]
            own = (os.SCHED_OTHER, os.getpriority(os.PRIO_PROCESS, 0))  # the launcher's own (a niced run's)
            expected = {own} if _may_raise_priority() else {IDLE}
            assert _policies(pid) == expected and _policies(child) == expected
    finally:
        _end(pid, child)
        proc.wait()


@pytest.mark.parametrize("privilege", ["as-is", "without-cap-sys-nice"])
def test_the_launcher_raises_its_post_processors_priority_once_the_job_ends(
    out: Path, tmp_path: Path, privilege: str
) -> None:
    """A real run whose capture is finalised at the job's end, with a memory timeline to make (seconds of
    post-processing after the job): the launcher raises its post-processor and says what it could do."""
    prefix: list[str] = []
    if privilege == "without-cap-sys-nice":
        setpriv = shutil.which("setpriv")
        if not _may_raise_priority() or setpriv is None:
            pytest.skip("CAP_SYS_NICE is not held here: the as-is case is this one")
        prefix = [setpriv, "--bounding-set", "-sys_nice"]
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "model = torch.nn.Linear(64, 64); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(12):\n"
        "    opt.zero_grad(); model(torch.randn(32, 64)).sum().backward(); opt.step()\n"
        "import os\n"
        "os._exit(0)  # npuprof finalises the capture first; no teardown after it: the parse is still on\n"
    )
    flags = [
        *sched(2, 0, 50),
        "--profile-memory",
        "--with-stack",
        "--record-shapes",
        "--memory-timeline",
        "json",
    ]
    command = [*prefix, sys.executable, "-m", "npuprof", "run", "-o", str(out), *flags]
    result = subprocess.run(
        [*command, "--", sys.executable, str(script)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    log = (out / "npuprof.log").read_text()
    lines = [line for line in log.splitlines() if "the job has ended: post-processor pid" in line]
    assert len(lines) == 1, log
    if _may_raise_priority() and not prefix:
        nice = os.getpriority(os.PRIO_PROCESS, 0)  # the launcher's, as this process's
        assert lines[0].endswith(f"gets npuprof's own CPU priority again (SCHED_OTHER, nice {nice})"), lines
    else:
        assert "needs CAP_SYS_NICE" in lines[0], lines  # the autogroup's part, where there is one, is done


def test_an_autogroup_write_refused_by_the_kernels_rate_limit_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without CAP_SYS_ADMIN the kernel takes one autogroup write per 100 ms machine-wide and answers
    EAGAIN between: two refusals, then the write goes through; a refusal for good is reported."""
    from npuprof.results import priority

    refusals = iter([BlockingIOError(11, "again"), BlockingIOError(11, "again")])
    written: list[str] = []

    class _Autogroup:
        def __enter__(self) -> _Autogroup:
            error = next(refusals, None)
            if error is not None:
                raise error
            return self

        def __exit__(self, *_: object) -> None:
            return None

        def write(self, text: str) -> None:
            written.append(text)

    monkeypatch.setattr(priority, "AUTOGROUP_RETRY_S", 0.001)
    monkeypatch.setattr(priority, "open", lambda *_a, **_k: _Autogroup(), raising=False)
    assert priority.set_autogroup_nice(os.getpid()) and written == ["0"]
    refusals = iter([PermissionError(1, "not permitted")] * 1)
    monkeypatch.setattr(priority, "_autogroup", lambda _pid: ("/autogroup-1", 19))
    assert not priority.set_autogroup_nice(os.getpid())
