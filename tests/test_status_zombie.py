"""`npuprof status` of a --dynamic process killed with kill -9 (its log has no end line) that its parent
has not reaped yet: "gone", not "running" (docs/architecture.md, "Dynamic capture": a process whose log
has no end line and whose pid no longer exists on this host)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from npuprof.cli import status


def test_a_killed_process_not_reaped_yet_is_gone(tmp_path: Path) -> None:
    logs = tmp_path / "log"
    logs.mkdir()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()) + ",469"
        line = f"{stamp} [INFO] [{child.pid}] npuprof.dynamic: [step 0] watching it every 1 s\n"
        (logs / f"dp_{os.uname().nodename}_{child.pid}_rank_0.log").write_text(line)
        assert [p["state"] for p in status._processes(logs)] == ["running"]
        child.kill()  # not waited for: a zombie until its parent reaps it
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert [p["state"] for p in status._processes(logs)] == ["gone (no end line: killed?)"]
    finally:
        child.kill()
        child.wait()


def test_a_dead_process_whose_pid_a_later_process_holds_is_gone(tmp_path: Path) -> None:
    """A rank killed (no end line) whose pid the kernel gave to a later process read "running" for as long
    as that process lived: the pid's process began after the log was last written, so it is not its
    writer. Told by the log's modification time, not its lines' (their local time is the job's time
    zone, which may not be status's)."""
    from npuprof.results.layout import process_start_time

    began = process_start_time()
    assert began is not None
    logs = tmp_path / "log"
    logs.mkdir()
    log = logs / f"dp_{os.uname().nodename}_{os.getpid()}_rank_0.log"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(began + 3600))  # its lines' times say nothing
    log.write_text(f"{stamp},000 [INFO] [{os.getpid()}] npuprof.dynamic: [step 0] watching it every 1 s\n")
    os.utime(log, (began - 600, began - 600))  # written 10 minutes before this process began
    assert [p["state"] for p in status._processes(logs)] == ["gone (no end line: killed?)"]
    # the later process is a watcher too, in the same log (same host, pid and rank): it runs
    with log.open("a") as handle:
        handle.write(f"{stamp},000 [INFO] [{os.getpid()}] npuprof.dynamic: [step 0] watching it every 1 s\n")
    assert [p["state"] for p in status._processes(logs)] == ["running"]


def test_a_stopped_process_is_stopped_and_told_how_to_resume(tmp_path: Path) -> None:
    """A job paused with kill -STOP (or Ctrl-Z) was shown "running", and a request written meanwhile "not
    read yet: each process reads the file at its poll interval", which it never did until resumed."""
    from conftest import npuprof

    logs = tmp_path / "log"
    logs.mkdir()
    (tmp_path / "profiler_config.json").write_text("{}")
    tmp_path.chmod(0o700)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()) + ",469"
        line = f"{stamp} [INFO] [{child.pid}] npuprof.dynamic: [step 0] watching it every 1 s\n"
        (logs / f"dp_{os.uname().nodename}_{child.pid}_rank_3.log").write_text(line)
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert [p["state"] for p in status._processes(logs)] == ["stopped"]
        triggered = npuprof("trigger", str(tmp_path), "--active", "2")
        assert triggered.returncode == 0, triggered.stderr
        told = " ".join(triggered.stderr.split())
        assert f"rank 3 (pid {child.pid}) is stopped" in told and f"kill -CONT {child.pid}" in told, told
        assert "no process watches" not in told, told
        shown = npuprof("status", str(tmp_path)).stdout
        assert "not read yet: the job's processes are stopped" in shown, shown
        assert "poll interval" not in shown, shown
        assert "rank 3: stopped" in shown and f"kill -CONT {child.pid}" in shown, shown
        os.kill(child.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while [p["state"] for p in status._processes(logs)] != ["running"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert "poll interval" in npuprof("status", str(tmp_path)).stdout
    finally:
        child.kill()
        child.wait()


def test_a_capture_ended_by_a_cancel_says_so(tmp_path: Path) -> None:
    """`npuprof trigger DIR --active 100`, then `--cancel` at its 17th step: status said "steps 169-185
    complete", read as the window asked for; the note says where the cancel ended it."""
    logs = tmp_path / "log"
    logs.mkdir()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()) + ",469"
    where = tmp_path / "vm_1_20261206234719959_ascend_pt"
    lines = [
        "[step 0] watching it every 1 s",
        f"[step 169] capture started at step 169 into {where}",
        "[step 185] the capture in flight ends with step 185, cancelled (start_step 0: no capture)",
        f"[step 186] capture 1 of steps 169-185 complete in {where}",
        f"[step 200] capture started at step 200 into {where}",
        f"[step 202] capture 2 of steps 200-201 complete in {where}",
    ]
    log = logs / f"dp_{os.uname().nodename}_{os.getpid()}_rank_0.log"
    log.write_text("".join(f"{stamp} [INFO] [{os.getpid()}] npuprof.dynamic: {line}\n" for line in lines))
    (process,) = status._processes(logs)
    assert [c.get("note") for c in process["captures"]] == ["cancelled at step 185", None], process
    report = {"config": {"file": "f", "start_step": 0}, "processes": [process]}
    assert f"steps 200-201 complete in {where}" in status.render(report)
    process["captures"].pop()
    assert f"steps 169-185 complete in {where} (cancelled at step 185)" in status.render(report)
