"""The post-processors' CPU priority: idle while the job trains, normal once `npuprof run` waits for them
after the job (helper-111: an idle-priority parse on a busy machine made the wait 7-8 s for 0.3 s of
work). Where raising it is not allowed (no CAP_SYS_NICE) it stays idle and the log says why."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import clean_env, sched

from npuprof.results.priority import restore_normal_priority

# A process as the post-processor lowers itself (postprocess.yield_to_training), with a second thread and
# a forked child (the side tables' process): each reports its policy and nice value on request.
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
    print(child, flush=True)
    time.sleep(60)
    """
)


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


def test_an_idle_process_its_threads_and_its_children_get_normal_priority(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", IDLE_FAMILY], stdout=subprocess.PIPE, text=True, env=clean_env()
    )
    try:
        child = int(proc.stdout.readline())
        idle = {(os.SCHED_IDLE, 19)}
        assert _policies(proc.pid) == idle and _policies(child) == idle  # as yield_to_training leaves them
        allowed = restore_normal_priority(proc.pid)
        assert allowed is _may_raise_priority()
        expected = {(os.SCHED_OTHER, 0)} if allowed else idle
        assert _policies(proc.pid) == expected and _policies(child) == expected
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)


@pytest.mark.parametrize("privilege", ["as-is", "without-cap-sys-nice"])
def test_the_launcher_raises_its_post_processors_priority_once_the_job_ends(
    out: Path, tmp_path: Path, privilege: str
) -> None:
    """The job leaves a stand-in post-processor holding a lock of its run, lowered as the real one is
    (and named so on its command line); it waits for its priority to change, at most ``wait_s``, and writes
    what it had then. Where the change is not allowed, the launcher's log says why."""
    prefix: list[str] = []
    wait_s = 15  # for the change; where it is refused, the log line comes before the wait
    if privilege == "without-cap-sys-nice":
        setpriv = shutil.which("setpriv")
        if not _may_raise_priority() or setpriv is None:
            pytest.skip("CAP_SYS_NICE is not held here: the as-is case is this one")
        prefix, wait_s = [setpriv, "--bounding-set", "-sys_nice"], 2
    result_file, ready = tmp_path / "policy", tmp_path / "ready"
    holder = textwrap.dedent(
        f"""
        import fcntl, os, sys, time
        from npuprof.results.postprocess import yield_to_training
        fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, f"{{os.getpid()}}\\n".encode(), 0)
        yield_to_training()
        open({str(ready)!r}, "w").close()
        deadline = time.monotonic() + float(sys.argv[2])
        while os.sched_getscheduler(0) == os.SCHED_IDLE and time.monotonic() < deadline:
            time.sleep(0.02)
        now = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))
        open({str(result_file)!r}, "w").write(f"{{now[0]}} {{now[1]}}")
        """
    )
    script = tmp_path / "train.py"
    script.write_text(
        "import os, subprocess, sys, time, torch\n"
        "model = torch.nn.Linear(4, 4); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(3):\n"
        "    opt.zero_grad(); model(torch.randn(2, 4)).sum().backward(); opt.step()\n"
        "from npuprof.agent import entry\n"
        "run_id = entry._state['agent'].run['run_id']\n"
        f"pending = os.path.join({str(out)!r}, '.npuprof_pending')\n"
        "os.makedirs(pending, exist_ok=True)\n"
        "lock = os.path.join(pending, f'{run_id}.{os.uname().nodename}.1.0a0b0c0d.lock')\n"
        f"subprocess.Popen([sys.executable, '-c', {holder!r}, lock, '{wait_s}',\n"
        "    'npuprof.results.postprocess'],\n"
        "    start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"while not os.path.exists({str(ready)!r}):\n"
        "    time.sleep(0.01)\n"
    )
    command = [
        *prefix,
        sys.executable,
        "-m",
        "npuprof",
        "run",
        "-o",
        str(out),
        "--no-analyse",
        *sched(0, 1, 1),
    ]
    command += ["--", sys.executable, str(script)]
    result = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    policy, nice = map(int, result_file.read_text().split())
    log = (out / "npuprof.log").read_text()
    if _may_raise_priority() and not prefix:
        assert (policy, nice) == (os.SCHED_OTHER, 0), (policy, nice)
        assert "keeps its idle CPU priority" not in log
    else:
        assert (policy, nice) == (os.SCHED_IDLE, 19), (policy, nice)
        assert "post-processing keeps its idle CPU priority: raising it needs CAP_SYS_NICE" in log, log
