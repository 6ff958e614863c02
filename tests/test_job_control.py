"""Job control through a real terminal: an interactive bash in a pty (its controlling terminal), `npuprof run`
of a plain Python job (no torch), Ctrl-Z, `fg`, `bg` as a user types them (docs/architecture.md, Launcher)."""

from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import WAITS_FOR_POST_PROCESSING, clean_env, hold_a_run_lock

import npuprof

ROOT = Path(npuprof.__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash for an interactive shell")


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


def _parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[1])


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _kill_quietly(pid: int | None, group: bool = False) -> None:
    if pid is not None:
        try:
            (os.killpg if group else os.kill)(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Terminal:
    """An interactive bash on a pty: what is typed, and what the terminal shows."""

    def __init__(self) -> None:
        import pty

        env = clean_env(PS1="prompt> ", TERM="dumb")
        pid, master = pty.fork()
        if pid == 0:  # a session leader with the pty as its controlling terminal
            os.execve("/bin/bash", ["bash", "--norc", "--noprofile", "-i"], env)
        self.pid, self.master, self.seen, self.read_to = pid, master, bytearray(), 0
        self.expect(b"prompt> ")

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def expect(self, needle: bytes, timeout: float = 20.0) -> None:
        """Wait until the terminal shows ``needle`` after what was expected before."""
        deadline = time.monotonic() + timeout
        while (found := self.seen.find(needle, self.read_to)) < 0:
            left = deadline - time.monotonic()
            shown = bytes(self.seen[-1500:])
            assert left > 0, f"timed out waiting for {needle!r}; the terminal shows {shown!r}"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.2))
            if ready:
                try:
                    self.seen.extend(os.read(self.master, 65536))
                except OSError:  # EIO: the shell is gone
                    break
        self.read_to = found + len(needle)

    def foreground(self) -> int:
        self.drain()  # (what the shell and npuprof print is read as it comes: a full pty would block them)
        return os.tcgetpgrp(self.master)

    def drain(self) -> None:
        while select.select([self.master], [], [], 0)[0]:
            try:
                self.seen.extend(os.read(self.master, 65536))
            except OSError:  # EIO: the shell is gone
                return

    def close(self) -> None:
        _kill_quietly(self.pid)
        os.waitpid(self.pid, 0)
        os.close(self.master)


def _job(tmp_path: Path, code: int) -> tuple[str, Path, Path]:
    """`npuprof run` of a job that writes its pid to ``started``, then sleeps until the file ``go`` exists
    and exits with ``code``."""
    started, go = tmp_path / "started", tmp_path / "go"
    script = tmp_path / "job.py"
    script.write_text(
        "import os, pathlib, sys, time\n"
        f"pathlib.Path({str(started)!r} + '.tmp').write_text(str(os.getpid()))\n"
        f"os.replace({str(started)!r} + '.tmp', {str(started)!r})\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.02)\n"
        f"sys.exit({code})\n"
    )
    run = [sys.executable, "-m", "npuprof", "run", "-o", str(tmp_path / "out"), "--no-analyse", "--"]
    return shlex.join([*run, sys.executable, str(script)]), started, go


def _job_handling(tmp_path: Path, handler: str) -> tuple[str, Path]:
    """`npuprof run` of a job that runs ``handler`` (Python lines installing a signal handler), writes its
    pid to ``started``, then sleeps until a signal ends it."""
    started = tmp_path / "started"
    script = tmp_path / "job.py"
    script.write_text(
        "import os, pathlib, signal, sys, time\n"
        + handler
        + f"pathlib.Path({str(started)!r} + '.tmp').write_text(str(os.getpid()))\n"
        f"os.replace({str(started)!r} + '.tmp', {str(started)!r})\n"
        "while True:\n    time.sleep(0.02)\n"
    )
    run = [sys.executable, "-m", "npuprof", "run", "-o", str(tmp_path / "out"), "--no-analyse", "--"]
    return shlex.join([*run, sys.executable, str(script)]), started


def _recorded_job(out: Path) -> int | None:
    """The job's pid as npuprof's run record in ``out`` names it, once it does."""
    try:
        return json.loads((out / "npuprof_run.json").read_text()).get("job_pid")
    except (OSError, ValueError):  # not there yet (written whole: atomic rename)
        return None


def _in_the_background_then_fg(terminal: _Terminal, command: str, started: Path) -> tuple[int, int]:
    """``command &`` at the shell (its output in ``out`` beside ``started``), then `fg` once its job has
    started and npuprof has started it: the job's pid and npuprof's (both killed here if `fg` does not give
    npuprof the terminal). npuprof, once it has started the job, gives the job the terminal if its own
    group holds it (run_child); then its run record names the job. An `fg` that came before that (the job
    started, npuprof not yet back from starting it: a loaded machine) gave npuprof's group the terminal for
    the moment until npuprof gave it to the job, and the wait below, looking every 20 ms, timed out (30 s)."""
    terminal.type(command.encode() + b" &\n")
    _wait_for(started.exists, "the job to start")
    job = int(started.read_text())
    launcher = _parent(job)
    try:
        _wait_for(
            lambda: _recorded_job(started.parent / "out") == job, "npuprof to record the job it started"
        )
        terminal.type(b"fg\n")
        try:
            _wait_for(lambda: terminal.foreground() == launcher, "fg to give npuprof's group the terminal")
        except AssertionError as missed:
            states = {p: _state(p) if Path(f"/proc/{p}").exists() else "gone" for p in (job, launcher)}
            raise AssertionError(
                f"{missed}: the terminal's group {terminal.foreground()}, npuprof {launcher} and the job"
                f" {job} in states {states}; the terminal shows {bytes(terminal.seen[-1500:])!r}"
            ) from None
    except BaseException:
        _kill_quietly(job, group=True)
        _kill_quietly(launcher)
        raise
    return job, launcher


def _both_stop_and_fg_ends_the_job(terminal: _Terminal, launcher: int, job: int, go: Path, code: int) -> None:
    """After a Ctrl-Z: the shell says Stopped, npuprof and the job stop; `fg` gives the job the terminal
    again, and the job, let go, ends with ``code`` as the shell sees it."""
    terminal.expect(b"Stopped")
    _wait_for(lambda: _state(launcher) == "T", "npuprof to stop")
    _wait_for(lambda: _state(job) == "T", "the job to stop with npuprof", timeout=30)
    terminal.type(b"fg\n")
    _wait_for(lambda: terminal.foreground() == job, "npuprof to give the job the terminal after fg")
    go.touch()
    terminal.type(b"echo exit-code-$?\n")
    terminal.expect(f"exit-code-{code}".encode(), timeout=60)


def test_ctrl_z_after_fg_of_a_job_run_in_the_background_stops_the_job_too(tmp_path: Path) -> None:
    """`npuprof run ... &` (or Ctrl-Z then `bg`), then `fg`: the shell gives the terminal to npuprof's process
    group, not the job's, and sends a running job no SIGCONT. Ctrl-Z then reached npuprof alone: the shell
    said "Stopped" while the job trained on (and a job reading the terminal was stopped by SIGTTIN)."""
    command, started, go = _job(tmp_path, 5)
    terminal = _Terminal()
    job = launcher = None
    try:
        job, launcher = _in_the_background_then_fg(terminal, command + " > /dev/null", started)
        terminal.type(b"\x1a")  # Ctrl-Z: to the terminal's foreground group, npuprof's
        _both_stop_and_fg_ends_the_job(terminal, launcher, job, go, 5)
    finally:
        _kill_quietly(job, group=True)
        _kill_quietly(launcher)
        terminal.close()


def test_ctrl_z_of_npuprof_run_by_a_script_stops_the_script_too(tmp_path: Path) -> None:
    """`bash train.sh` at an interactive shell, the script running `npuprof run` (no job control: npuprof is
    in the script's process group): npuprof gives the job the terminal, so Ctrl-Z reached the job alone, and
    npuprof mirrored the stop on itself alone. The script ran on, waiting for it, and the interactive shell,
    which reports a job stopped only once all its processes are, waited on: no prompt, the terminal taken
    from the job. Without npuprof Ctrl-Z stops the script with its command."""
    command, started, go = _job(tmp_path, 5)
    terminal = _Terminal()
    job = script = None
    try:
        terminal.type(f"bash -c {shlex.quote(f'{command}; echo script-exit-code-$?')}\n".encode())
        _wait_for(started.exists, "the job to start")
        job = int(started.read_text())
        launcher = _parent(job)
        script = _parent(launcher)
        _wait_for(lambda: terminal.foreground() == job, "npuprof to give the job the terminal")
        terminal.type(b"\x1a")  # Ctrl-Z: to the job's group, which holds the terminal
        terminal.expect(b"Stopped", timeout=30)
        # the shell says so once the script has stopped: npuprof, which stopped it, lets its own held stop
        # go a moment later
        for pid, who in ((script, "the script"), (launcher, "npuprof"), (job, "the job")):
            _wait_for(lambda pid=pid: _state(pid) == "T", f"{who} to stop", timeout=30)
        go.touch()
        terminal.type(b"fg\n")
        terminal.expect(b"script-exit-code-5", timeout=60)
    finally:
        _kill_quietly(job, group=True)
        _kill_quietly(script, group=True)  # the script's group: the script and npuprof
        terminal.close()


def test_a_script_run_in_the_background_stops_with_its_job_at_a_read_of_the_terminal(tmp_path: Path) -> None:
    """`bash train.sh &`, the script running `npuprof run` of a job that reads the terminal: the kernel stops
    the reader's whole process group (SIGTTIN), and the shell says the script stopped; `fg` then lets the
    job read. Through npuprof the SIGTTIN reaches the job's group alone: npuprof mirrors it on its whole
    process group too, not on itself alone (the script ran on, the shell said it was running, and nothing
    did until a `kill -CONT`)."""
    started = tmp_path / "started"
    script = tmp_path / "job.py"
    script.write_text(
        "import os, pathlib, sys\n"
        f"pathlib.Path({str(started)!r} + '.tmp').write_text(str(os.getpid()))\n"
        f"os.replace({str(started)!r} + '.tmp', {str(started)!r})\n"
        "sys.exit(len(input()))\n"
    )
    run = [sys.executable, "-m", "npuprof", "run", "-o", str(tmp_path / "out"), "--no-analyse", "--"]
    command = shlex.join([*run, sys.executable, str(script)]) + " > /dev/null"
    terminal = _Terminal()
    job = shell_script = None
    try:
        terminal.type(f"bash -c {shlex.quote(f'{command}; echo script-exit-code-$?')} &\n".encode())
        _wait_for(started.exists, "the job to start")
        job = int(started.read_text())
        launcher = _parent(job)
        shell_script = _parent(launcher)
        _wait_for(lambda: _state(job) == "T", "the job to stop reading the terminal (SIGTTIN)")
        _wait_for(lambda: _state(shell_script) == "T", "the script to stop with npuprof", timeout=30)
        _wait_for(lambda: _state(launcher) == "T", "npuprof to stop with its script", timeout=30)
        terminal.type(b"jobs\n")
        terminal.expect(b"Stopped")
        terminal.type(b"fg\n")
        _wait_for(lambda: terminal.foreground() == job, "npuprof to give the job the terminal after fg")
        terminal.type(b"four\n")
        terminal.expect(b"script-exit-code-4", timeout=60)
    finally:
        _kill_quietly(job, group=True)
        _kill_quietly(shell_script, group=True)
        terminal.close()


def test_a_second_ctrl_c_after_fg_of_a_job_run_in_the_background_reaches_the_job(tmp_path: Path) -> None:
    """`npuprof run ... &` then `fg`: npuprof's group holds the terminal, so the first Ctrl-C came to npuprof
    (passed on), and the second one, which a job that stops gracefully at the first takes as "now", made
    npuprof kill the job's processes with SIGKILL (exit 137, its capture lost). Without npuprof both reach the
    job; the job gets the terminal at the first one now."""
    command, started = _job_handling(
        tmp_path,
        "def interrupted(signum, frame):\n"
        "    interrupted.count += 1\n"
        "    print(f'interrupted-{interrupted.count}', file=sys.stderr, flush=True)\n"
        "    if interrupted.count == 2:\n"
        "        sys.exit(9)\n"
        "interrupted.count = 0\n"
        "signal.signal(signal.SIGINT, interrupted)\n",
    )
    terminal = _Terminal()
    job = launcher = None
    try:
        job, launcher = _in_the_background_then_fg(terminal, command, started)
        terminal.type(b"\x03")  # Ctrl-C: to npuprof's group, passed on
        terminal.expect(b"interrupted-1")
        time.sleep(0.3)  # a Ctrl-C of its own, not a copy of the first (launch.SAME_CTRL_C_S)
        terminal.type(b"\x03")
        terminal.expect(b"interrupted-2")
        terminal.type(b"echo exit-code-$?-of-$((40 + 2))\n")
        terminal.expect(b"exit-code-9-of-42")
    finally:
        _kill_quietly(job, group=True)
        _kill_quietly(launcher)
        terminal.close()


def test_a_resize_after_fg_of_a_job_run_in_the_background_reaches_the_job(tmp_path: Path) -> None:
    """`npuprof run ... &` then `fg`: the shell gives the terminal to npuprof's process group, so a resize
    of the terminal signalled npuprof (SIGWINCH, which it ignored), never the job: a progress bar or a
    curses UI kept the old width. Without npuprof the job gets it."""
    import fcntl
    import struct
    import termios

    command, started = _job_handling(
        tmp_path,
        "def resized(signum, frame):\n"
        "    size = os.get_terminal_size(sys.stderr.fileno())\n"
        "    print(f'resized-to-{size.columns}x{size.lines}', file=sys.stderr, flush=True)\n"
        "    sys.exit(4)\n"
        "signal.signal(signal.SIGWINCH, resized)\n",
    )
    terminal = _Terminal()
    job = launcher = None
    try:
        job, launcher = _in_the_background_then_fg(terminal, command, started)
        rows, columns = 31, 97
        fcntl.ioctl(terminal.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        terminal.expect(f"resized-to-{columns}x{rows}".encode())
        terminal.type(b"echo exit-code-$?-of-$((40 + 2))\n")
        terminal.expect(b"exit-code-4-of-42")
    finally:
        _kill_quietly(job, group=True)
        _kill_quietly(launcher)
        terminal.close()


def _type_launcher(terminal: _Terminal, launcher: Path, started: Path) -> None:
    """Run the launcher script at the shell, in the foreground (npuprof's code from this checkout)."""
    command = [sys.executable, str(launcher), str(started)]
    terminal.type(f"PYTHONPATH={shlex.quote(str(ROOT))} {shlex.join(command)}\n".encode())


def _fg_gives_exit_code_7(terminal: _Terminal) -> None:
    """`fg` continues the stopped job, whose exit code (7) the shell then has."""
    terminal.type(b"fg\n")
    terminal.type(b"echo exit-code-$?-of-$((40 + 2))\n")
    terminal.expect(b"exit-code-7-of-42")


def _lock_holder_job(tmp_path: Path, code: int) -> tuple[str, Path]:
    """`npuprof run` of a job that leaves a process holding a post-processor's lock of its run (npuprof
    waits for it after the job), then exits with ``code``; ``pids`` gets "HOLDER JOB"."""
    pids = tmp_path / "pids"
    out = tmp_path / "out"
    script = tmp_path / "job.py"
    script.write_text(hold_a_run_lock(out, tmp_path / "held", pids) + f"sys.exit({code})\n")
    run = [sys.executable, "-m", "npuprof", "run", "-o", str(out), "--no-analyse", "--"]
    return shlex.join([*run, sys.executable, str(script)]), pids


def test_ctrl_z_while_npuprof_waits_for_post_processing_stops_it_and_fg_gets_the_jobs_exit_code(
    tmp_path: Path,
) -> None:
    """The job has ended; npuprof waits for a post-processor of its run (it holds the terminal back):
    Ctrl-Z stops npuprof, the shell says so and gives a prompt; `fg` lets the wait go on, and the job's
    exit code comes out once the post-processor is done, as when nothing stopped it."""
    command, pids = _lock_holder_job(tmp_path, 3)
    terminal = _Terminal()
    holder = launcher = None
    try:
        terminal.type(f"{command}\n".encode())
        terminal.expect(WAITS_FOR_POST_PROCESSING.encode())
        holder = int(pids.read_text().split()[0])
        launcher = terminal.foreground()  # npuprof leads its shell job's group, which has the terminal back
        terminal.type(b"\x1a")  # Ctrl-Z: to npuprof's group, which holds the terminal again
        terminal.expect(b"Stopped")
        terminal.expect(b"prompt> ")
        _kill_quietly(holder)  # the post-processor is done meanwhile
        terminal.type(b"fg\n")
        terminal.type(b"echo exit-code-$?-of-$((40 + 2))\n")
        terminal.expect(b"exit-code-3-of-42", timeout=60)
    finally:
        _kill_quietly(holder)
        _kill_quietly(launcher)
        terminal.close()


def test_ctrl_z_of_npuprof_run_with_stdin_not_the_terminal_stops_the_job(tmp_path: Path) -> None:
    """`npuprof run ... < /dev/null > log 2>&1` at a shell (a long job whose output goes to a file): npuprof
    looked for the terminal on stdin alone, so it never gave it to the job. The terminal's Ctrl-Z reached
    npuprof's group and stopped npuprof alone: the shell said "Stopped" while the job trained on (and a
    second Ctrl-C killed the job with SIGKILL, where without npuprof both reach it). The job gets the
    controlling terminal, wherever stdin comes from."""
    command, started, go = _job(tmp_path, 5)
    terminal = _Terminal()
    job = launcher = None
    try:
        terminal.type(command.encode() + b" < /dev/null > /dev/null 2>&1\n")
        _wait_for(started.exists, "the job to start")
        job = int(started.read_text())
        launcher = _parent(job)
        _wait_for(lambda: terminal.foreground() == job, "npuprof to give the job the terminal")
        terminal.type(b"\x1a")  # Ctrl-Z
        _both_stop_and_fg_ends_the_job(terminal, launcher, job, go, 5)
    finally:
        _kill_quietly(job, group=True)
        _kill_quietly(launcher)
        terminal.close()


def test_a_hang_up_while_npuprof_waits_for_post_processing_keeps_the_record_and_kills_npuprof(
    tmp_path: Path,
) -> None:
    """The terminal goes away (ssh dropped, window closed) after the job has ended, while npuprof waits for
    a post-processor: the kernel's SIGHUP stops the wait, and every later write to the terminal fails (EIO).
    The run record still gets the job's end and exit code, and npuprof dies of SIGHUP, as it does of one
    sent while it waits, at once: its summary, which nobody can see, waited first for the run's processes
    that outlive the job (the lock holder here) to end, 1 s (OUTLIVE_SETTLE_S, made 60 s here so that the
    wait shows). npuprof leads the terminal's session here, as in `ssh -t host npuprof run ...`."""
    import json
    import pty

    command, pids = _lock_holder_job(tmp_path, 3)
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        argv = shlex.split(command)
        settle = "from npuprof import job_processes; job_processes.OUTLIVE_SETTLE_S = 60.0; import runpy"
        argv[1:3] = ["-c", f"{settle}; runpy.run_module('npuprof', run_name='__main__')"]
        os.execve(argv[0], argv, clean_env())
    holder = status = None
    try:
        seen = bytearray()
        deadline = time.monotonic() + 30
        while WAITS_FOR_POST_PROCESSING.encode() not in seen:
            assert time.monotonic() < deadline, f"npuprof never said it waits: {bytes(seen)!r}"
            if select.select([master], [], [], 0.2)[0]:
                seen.extend(os.read(master, 65536))
        holder = int(pids.read_text().split()[0])
        os.close(master)  # the hang-up
        master = -1
        deadline = time.monotonic() + 20
        while (ended := os.waitpid(pid, os.WNOHANG))[0] != pid and time.monotonic() < deadline:
            time.sleep(0.02)
        status = ended[1] if ended[0] == pid else None
    finally:
        _kill_quietly(holder)
        if status is None:
            _kill_quietly(pid)
            os.waitpid(pid, 0)
        if master >= 0:
            os.close(master)
    assert status is not None, "npuprof was still running 20 s after the hang-up"
    assert os.waitstatus_to_exitcode(status) == -signal.SIGHUP
    record = json.loads((tmp_path / "out" / "npuprof_run.json").read_text())
    assert record["exit_code"] == 3 and record["end"] is not None, record


STARTING = r"""
import os, signal, sys
from npuprof import launch

spawn = launch._spawn

def spawning(*args):  # Ctrl-Z as npuprof starts the job: the terminal's SIGTSTP, to npuprof's group, which
    pid = spawn(*args)  # holds the terminal until the job is given it
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(pid))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    os.killpg(os.getpgrp(), signal.SIGTSTP)
    return pid

launch._spawn = spawning
job = [sys.executable, "-c", "import time; time.sleep(1); raise SystemExit(7)"]
sys.exit(launch.run_child(job, dict(os.environ)).exit_code)
"""


def test_ctrl_z_as_npuprof_starts_the_job_stops_the_job_too(tmp_path: Path) -> None:
    """A Ctrl-Z that came while npuprof started the job (its SIGTSTP handled as the spawn returned, before
    the job was known) stopped npuprof alone: the shell said "Stopped" while the job trained on, here to its
    end. It is passed on once the job runs, as the signals that come while it starts are."""
    started = tmp_path / "started"  # the job's pid
    launcher = tmp_path / "launcher.py"
    launcher.write_text(STARTING)
    terminal = _Terminal()
    job = None
    try:
        _type_launcher(terminal, launcher, started)
        terminal.expect(b"Stopped")
        job = int(started.read_text())
        _wait_for(lambda: _state(job) == "T", "the job to stop with npuprof", timeout=30)
        _fg_gives_exit_code_7(terminal)
    finally:
        _kill_quietly(job, group=True)
        terminal.close()


def _launcher_of(job_code: str) -> str:
    """A launcher script running ``python -c job_code`` under npuprof's launch.run_child, the job's pid
    written to argv[1] once it starts, exiting with the job's exit code."""
    return (
        "import os, sys\n"
        "from npuprof import launch\n\n"
        "def started(pid):\n"
        "    with open(sys.argv[1] + '.tmp', 'w') as f:\n"
        "        f.write(str(pid))\n"
        "    os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n\n"
        f"job = [sys.executable, '-c', {job_code!r}]\n"
        "sys.exit(launch.run_child(job, dict(os.environ), on_start=started).exit_code)\n"
    )


SELF_STOPPING = _launcher_of("import os, signal; os.kill(os.getpid(), signal.SIGSTOP); raise SystemExit(7)")


def test_a_job_that_stops_itself_with_sigstop_at_the_terminal_is_shown_stopped(tmp_path: Path) -> None:
    """A job in the foreground stopped by SIGSTOP (its own, as one that waits for a debugger to attach;
    `kill -STOP` from elsewhere): a shell running it bare says "Stopped" and takes the terminal back.
    npuprof waited on, leaving the terminal with the stopped job: it froze, Ctrl-C and Ctrl-Z pending on
    the job. The stop is mirrored as a Ctrl-Z's is; `fg` continues the job, whose exit code comes back."""
    started = tmp_path / "started"
    launcher = tmp_path / "launcher.py"
    launcher.write_text(SELF_STOPPING)
    terminal = _Terminal()
    job = None
    try:
        _type_launcher(terminal, launcher, started)
        _wait_for(started.exists, "the job to start")
        job = int(started.read_text())
        terminal.expect(b"Stopped", timeout=30)
        assert _state(job) == "T"
        _fg_gives_exit_code_7(terminal)
    finally:
        _kill_quietly(job, group=True)
        terminal.close()


def test_a_job_stopped_by_sigstop_where_npuprof_cannot_stop_stays_stopped(tmp_path: Path) -> None:
    """npuprof leads the terminal's session (`ssh -t host npuprof run ...`): its process group is orphaned,
    where the kernel discards its own stop. A job that stopped itself with SIGSTOP (to wait for a debugger)
    must stay stopped with the terminal, not be continued by npuprof; a SIGCONT continues it."""
    import pty

    started = tmp_path / "started"
    launcher = tmp_path / "launcher.py"
    launcher.write_text(SELF_STOPPING)
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        env = clean_env(PYTHONPATH=str(ROOT))
        os.execve(sys.executable, [sys.executable, str(launcher), str(started)], env)
    job = status = None
    try:
        _wait_for(started.exists, "the job to start")
        job = int(started.read_text())
        _wait_for(lambda: _state(job) == "T", "the job to stop itself", timeout=30)
        time.sleep(0.5)  # npuprof, had it continued the job, would have by now
        assert _state(job) == "T" and os.tcgetpgrp(master) == job
        os.kill(job, signal.SIGCONT)
        deadline = time.monotonic() + 20
        while (ended := os.waitpid(pid, os.WNOHANG))[0] != pid and time.monotonic() < deadline:
            time.sleep(0.02)
        status = ended[1] if ended[0] == pid else None
    finally:
        if status is None:
            _kill_quietly(job, group=True)
            _kill_quietly(pid)
            os.waitpid(pid, 0)
        os.close(master)
    assert status is not None and os.waitstatus_to_exitcode(status) == 7


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
def test_timeout_ends_a_job_that_stopped_itself_with_sigstop_in_time(tmp_path: Path) -> None:
    """`timeout 2 npuprof run ...` at a prompt, of a job that stops itself with SIGSTOP: bare, `timeout 2
    python ...` ends it 2 s later (exit 124), the kernel's SIGSTOP stopping the job alone. npuprof stopped
    its whole process group, `timeout` with it, which then ended nothing: the shell said "Stopped". npuprof
    stops alone for a SIGSTOP."""
    _timeout_2_ends_it(tmp_path, SELF_STOPPING, in_a_script=False)


READING = _launcher_of("input()")


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
def test_timeout_in_a_script_ends_a_job_that_reads_the_terminal_in_time(tmp_path: Path) -> None:
    """`bash -c 'timeout 2 npuprof run ...'` (a script: `timeout` runs npuprof in a process group of its
    own, in the background) of a job that reads the terminal: the kernel stops the reader's group by
    SIGTTIN, which `timeout` ignores, ending the job 2 s later (exit 124) bare. npuprof stopped its group
    by SIGTSTP, `timeout` included: the job, npuprof and `timeout` stayed stopped for ever, the script
    waiting. The group gets SIGTTIN, as from the kernel."""
    _timeout_2_ends_it(tmp_path, READING, in_a_script=True)


def _timeout_2_ends_it(tmp_path: Path, source: str, in_a_script: bool) -> None:
    """`timeout 2` of the launcher ``source`` typed at the terminal's prompt (``in_a_script``: inside `bash
    -c`): it ends the job 2 s later, the shell seeing exit code 124."""
    started = tmp_path / "started"
    launcher = tmp_path / "launcher.py"
    launcher.write_text(source)
    terminal = _Terminal()
    job = None
    try:
        command = ["timeout", "2", "env", f"PYTHONPATH={ROOT}", sys.executable, str(launcher), str(started)]
        line = f"{shlex.join(command)}; echo exit-code-$?-of-$((40 + 2))"
        terminal.type(f"{f'bash -c {shlex.quote(line)}' if in_a_script else line}\n".encode())
        _wait_for(started.exists, "the job to start")
        job = int(started.read_text())
        terminal.expect(b"exit-code-124-of-42", timeout=15)
    finally:
        _kill_quietly(job, group=True)
        terminal.close()
