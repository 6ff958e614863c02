"""The launcher mirrors a job-control stop of its job (Ctrl-Z: docs/architecture.md, "Process model"):
it stops itself once the job has stopped, and continues the job once it is continued. A signal that comes
between the job's stop and the launcher's own must not leave either of them stopped for good.

Each case runs `launch.run_child` in a small Python process (no torch, no npuprof CLI: ~0.1 s) whose
stdin is a terminal and whose process group is one of this session's, as a shell's job is; its job is a
Python that stops itself with SIGTSTP, then exits 7. The signal that races the launcher's stop is sent
from inside the window, through ``_Terminal.take_back``, which runs there."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import clean_env

import npuprof

ROOT = Path(npuprof.__file__).resolve().parent.parent

LAUNCHER = r"""
import os, signal, sys, time
from npuprof import launch

race = sys.argv[1]
take_back = launch._Terminal.take_back

def racing(self, job):  # once: at the job's stop (the job's end takes the terminal back too)
    global race
    take_back(self, job)
    if race == "sigcont":  # `kill -CONT` to npuprof, `timeout`'s SIGCONT, as the job has just stopped
        race = ""
        os.kill(os.getpid(), signal.SIGCONT)
    elif race == "ctrl-z":  # Ctrl-Z pressed again: the terminal's SIGTSTP now reaches npuprof's group
        race = ""
        os.killpg(os.getpgrp(), signal.SIGTSTP)

set_mask = signal.pthread_sigmask

def late(how, mask):  # the SIGCONT after npuprof stopped its group, as its own held stop is let go
    global race
    if race == "sigcont-late" and how == signal.SIG_SETMASK and signal.SIGTSTP in signal.sigpending():
        race = ""
        os.kill(os.getpid(), signal.SIGCONT)
    return set_mask(how, mask)

def failing(pid, terminal):  # npuprof's own failure in its wait: its fallback waits for the job
    raise RuntimeError("boom in the wait")

launch._Terminal.take_back = racing
signal.pthread_sigmask = late
if race == "wait-fails":
    launch._wait = failing
if len(sys.argv) > 2:  # another process of npuprof's group: a pipeline's `tee`, a `bash -c` around it
    sibling = os.fork()
    if sibling == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # (not holding our stderr's pipe)
        time.sleep(60)
        os._exit(0)
    with open(sys.argv[2], "w") as f:
        f.write(str(sibling))
job = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTSTP); raise SystemExit(7)"]
code = launch.run_child(job, dict(os.environ)).exit_code
if len(sys.argv) > 2:  # its state as npuprof ends (after, the kernel hangs up a stopped orphaned group)
    until = time.monotonic() + 2
    # "R" an instant after a SIGCONT, on a busy machine, before it sleeps again
    while (state := open(f"/proc/{sibling}/stat").read().rpartition(")")[2].split()[0]) in ("T", "R"):
        if time.monotonic() > until:
            break
        time.sleep(0.01)
    with open(sys.argv[2] + ".end", "w") as f:
        f.write(state)
sys.exit(code)
"""


def _state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "gone"
    return text[text.rindex(")") + 2]


def _run(
    race: str, continues: int, sibling: Path | None = None, group: bool = True
) -> tuple[int, list[str], str]:
    """Run the launcher with ``race``; send SIGCONT to its group (what `fg` does; ``group`` False: to
    npuprof's pid alone, as `kill -CONT` or `timeout` does) each time it is found stopped, ``continues``
    times at most. How often it stopped, the state of the other process of its group (``sibling``: where
    its pid is written) at each stop and as the job has ended ("S" once running on, asleep: it sleeps);
    it must end with the job's exit code."""
    master, slave = pty.openpty()  # its other side open throughout: a closed one is no terminal
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, race, *([str(sibling)] if sibling else [])],
            env=clean_env(PYTHONPATH=str(ROOT)), stdin=slave, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, preexec_fn=os.setpgrp,  # process_group=0: 3.11
        )  # fmt: skip
    finally:
        os.close(slave)
    stops = 0
    sibling_states: list[str] = []
    deadline = time.monotonic() + 20
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if _state(proc.pid) == "T":
                if stops == continues:  # left stopped: give it a moment, a stop may be on its way out
                    time.sleep(0.5)
                    if _state(proc.pid) == "T":
                        break
                    continue
                if sibling is not None:  # sent its stop with ours: it stops once scheduled
                    other, until = int(sibling.read_text()), time.monotonic() + 5
                    while _state(other) != "T" and time.monotonic() < until:
                        time.sleep(0.005)
                    sibling_states.append(_state(other))
                stops += 1
                (os.killpg if group else os.kill)(proc.pid, signal.SIGCONT)
                while _state(proc.pid) == "T" and time.monotonic() < deadline:
                    time.sleep(0.005)
            time.sleep(0.005)
        stuck = proc.poll() is None
        stderr = b"" if stuck else proc.communicate()[1]
        sibling_end = "" if sibling is None else Path(f"{sibling}.end").read_text()
    finally:
        state = _state(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # (the sibling too)
        proc.wait()
        os.close(master)
    assert not stuck, f"npuprof left in state {state} after {stops} SIGCONT(s)"
    assert proc.returncode == 7, stderr.decode(errors="replace")
    return stops, sibling_states, sibling_end


@pytest.mark.parametrize("race", ["none", "sigcont"])
def test_a_sigcont_as_the_job_stops_leaves_neither_stopped(race: str) -> None:
    """Without a race npuprof stops with its job and one SIGCONT (`fg`) ends both. A SIGCONT that came
    between the job's stop and npuprof's own was lost: its handler continued the job, then npuprof stopped
    itself, and nothing continued it (the job's end and exit code waited for a second `fg`)."""
    stops, _, _ = _run(race, continues=1)
    assert stops == (1 if race == "none" else 0)


def test_ctrl_z_pressed_twice_needs_one_fg() -> None:
    """A second Ctrl-Z once npuprof has taken the terminal back stopped it there; `fg` continued it, its
    SIGCONT handler continued the job, and npuprof then stopped itself again: the job ran on in the
    background while the shell said npuprof was stopped, and its exit code waited for another `fg`."""
    stops, _, _ = _run("ctrl-z", continues=1)
    assert stops == 1


def test_npuprofs_fallback_wait_still_stops_with_its_job() -> None:
    """helper-347: after npuprof's own failure in its wait for the job, the fallback wait (which passes the
    job's exit code on) waited without seeing the job's stops: at Ctrl-Z the job stopped alone and npuprof
    waited on, the shell's terminal with it, until the job was continued from elsewhere."""
    stops, _, _ = _run("wait-fails", continues=1)
    assert stops == 1


def test_the_stop_reaches_the_rest_of_npuprofs_process_group(tmp_path: Path) -> None:
    """`npuprof run ... | tee log`, `bash -c 'npuprof run ...; echo done'`, `timeout 60 npuprof run ...`: the
    terminal's Ctrl-Z reaches the job's group alone (npuprof gave it the terminal), and npuprof stopped
    itself alone. The shell, which reports a job stopped once all its processes are, waited on while tee,
    bash or timeout ran: it hung, holding no terminal, until a second Ctrl-Z. Without npuprof the one
    Ctrl-Z stops them all."""
    stops, sibling_states, _ = _run("none", continues=1, sibling=tmp_path / "sibling")
    assert (stops, sibling_states) == (1, ["T"])


@pytest.mark.parametrize("race", ["none", "sigcont-late"])
def test_a_sigcont_to_npuprof_alone_continues_the_rest_of_its_group(tmp_path: Path, race: str) -> None:
    """npuprof stops its whole process group with its job (`npuprof run ... | tee log`: tee stops too). A
    SIGCONT to npuprof's pid alone (`kill -CONT`, `timeout`'s) once it had stopped ("none"), or in the
    instant between its stop of the group and its own held stop ("sigcont-late": the SIGCONT discards
    that stop), continued npuprof and its job but left tee stopped until `fg`: the job, writing into
    the pipe, hung once it was full. What npuprof stopped goes on with it now."""
    stops, _, sibling_end = _run(race, continues=1, sibling=tmp_path / "sibling", group=False)
    assert stops == (1 if race == "none" else 0)
    assert sibling_end == "S"


ORPHANED = r"""
import os, sys
from npuprof import launch

calls = sys.argv[1]
on_job_stopped = launch._on_job_stopped

def counted(pgid, stop_signal, terminal):
    with open(calls, "a") as f:
        f.write(f"stop {stop_signal}\n")
    on_job_stopped(pgid, stop_signal, terminal)

def started(pid):
    with open(calls, "a") as f:
        f.write(f"job {pid}\n")

launch._on_job_stopped = counted
job = [sys.executable, "-c", "input()"]
sys.exit(launch.run_child(job, dict(os.environ), on_start=started).exit_code)
"""


def test_a_job_that_reads_the_terminal_is_left_stopped_where_npuprof_cannot_stop(tmp_path: Path) -> None:
    """`(npuprof run -- python -c 'input()' < /dev/tty &)` in an interactive shell: npuprof's process group
    is orphaned (its parent gone), the shell holds the terminal, the job reads it and stops (SIGTTIN). The
    kernel discards npuprof's own stop there; npuprof then continued the job, which stopped again at once:
    both spun for ever at full CPU. Without npuprof the read fails (EIO); here the job is left stopped, and
    npuprof says so once. npuprof here leads the terminal's session: its group is orphaned (pytest, its
    parent, is of another session); another group holds the terminal, as a shell would."""
    calls, stderr, holder_pid = tmp_path / "calls", tmp_path / "stderr", tmp_path / "holder"
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            holder = os.fork()
            if holder == 0:
                os.setpgid(0, 0)
                time.sleep(60)  # (ends at the terminal's hang-up, when npuprof, its session leader, ends)
                os._exit(0)
            os.setpgid(holder, holder)
            os.tcsetpgrp(0, holder)
            holder_pid.write_text(str(holder))
            os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT, 0o600), 2)
            env = clean_env(PYTHONPATH=str(ROOT))
            os.execve(sys.executable, [sys.executable, "-c", ORPHANED, str(calls)], env)
        finally:
            os._exit(127)
    job = holder = None
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (calls.exists() and "stop" in calls.read_text()):
            time.sleep(0.02)
        job = int(calls.read_text().split()[1])
        holder = int(holder_pid.read_text())
        # the note comes once npuprof has left the job stopped; a spin (before) never says it
        while time.monotonic() < deadline and "left stopped" not in stderr.read_text():
            time.sleep(0.02)
        time.sleep(0.3)  # a spin would stop it again and again meanwhile
        said = calls.read_text()
        assert said.count("stop") == 1, f"npuprof continued the job {said.count('stop')} times"
        assert _state(job) == "T" and _state(pid) != "T"
        note = stderr.read_text()
        assert note.count("is left stopped") == 1 and f"kill -CONT -{job}" in note, note
    finally:
        for group in (job, holder):
            if group is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(master)
