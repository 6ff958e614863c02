"""Issue 9, the launcher's part: the job must never die of, or hang because of, npuprof.

Real subprocesses throughout: `npuprof run` around real CPU training, real shells, a real pty, a real
full filesystem (a tiny tmpfs).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SCRIPTS, capture_record, clean_env, npuprof, rank_dirs, sched, small_tmpfs, wait_for_end

from npuprof import runner
from npuprof.config import (
    METADATA_TOTAL_LIMIT,
    METADATA_VALUE_LIMIT,
    ConfigError,
    ProfileConfig,
    decode_env_payload,
    required_free_bytes,
)
from npuprof.launch import (
    BOOTSTRAP_DIR,
    config_payload,
    injection_warnings,
    shown_local_ranks,
    with_bootstrap,
)

NPUPROF = [sys.executable, "-m", "npuprof"]
# The last line of a job script below whose end is not what its test checks: what it made (torch's objects
# above all) is kept out of the interpreter's last collection, which walks them all (~0.5 CPU-s a process);
# atexit, npuprof's finalisation, runs before that collection, as before. (Not where the test is that npuprof
# writes nothing into the script's files: the end of the job is in it.)
FREEZE_AT_EXIT = "import gc; gc.freeze()\n"


def _wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _state(pid: int) -> str:
    """The process state letter of /proc/PID/stat (R, S, T, Z, ...)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


def _gone(pid: int, wait: float = 10.0) -> bool:
    """True once ``pid`` no longer runs (exited, or a zombie nobody has reaped yet)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if _state(pid) == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def _parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[1])


def _kill_quietly(pid: int | None, group: bool = False) -> None:
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def _job_script(tmp_path: Path, body: str) -> Path:
    """A job that writes its pid to ``started`` first, then runs ``body``."""
    script = tmp_path / "job.py"
    started = tmp_path / "started"
    script.write_text(
        "import os, pathlib, signal, sys, time\n"
        f"pathlib.Path({str(started)!r} + '.tmp').write_text(str(os.getpid()))\n"
        f"os.replace({str(started)!r} + '.tmp', {str(started)!r})\n" + body
    )
    return script


# ---- #7 empty PYTHONPATH entries --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, ""),
        ("", ""),
        (":/x", "::/x"),
        ("/x:", ":/x:"),
        ("/x::/y", ":/x::/y"),
        (f"{BOOTSTRAP_DIR}::/x", "::/x"),  # an outer npuprof's bootstrap is not doubled
    ],
)
def test_pythonpath_is_kept_exactly_behind_the_bootstrap(given: str | None, expected: str) -> None:
    assert with_bootstrap(given) == str(BOOTSTRAP_DIR) + expected


def test_an_empty_pythonpath_entry_still_means_the_current_directory(out: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "helper_in_cwd.py").write_text("VALUE = 'found in cwd'\n")
    script = tmp_path / "elsewhere.py"  # sys.path[0] is the script's dir, not the cwd
    script.write_text(
        "import os, helper_in_cwd\nprint(os.environ['PYTHONPATH'])\nprint(helper_in_cwd.VALUE)\n"
    )
    result = npuprof(
        "run",
        "-o",
        str(out),
        "--",
        sys.executable,
        str(script),
        cwd=workdir,
        env=clean_env(PYTHONPATH=":/nowhere"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{BOOTSTRAP_DIR}::/nowhere", "found in cwd"]


# ---- #8a Ctrl-C in a shell loop: wait and cooperative exit ---------------------------------------
def test_a_job_killed_by_sigint_kills_npuprof_by_sigint_after_its_record(out: Path) -> None:
    kill_self = "import os, signal; os.kill(os.getpid(), signal.SIGINT); import time; time.sleep(5)"
    proc = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), "--", sys.executable, "-c", kill_self],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGINT, proc.stderr  # WIFSIGNALED, as the job itself
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 128 + signal.SIGINT


def test_ctrl_c_stops_a_shell_loop_around_npuprof(out: Path, tmp_path: Path) -> None:
    # the first run waits for the Ctrl-C (a run of 3 s ended by itself under a test starved that long: the
    # loop went on, as if past the Ctrl-C); a second run, the loop gone on, ends at once
    flag = tmp_path / "ran-once"
    script = _job_script(
        tmp_path,
        f"if os.path.exists({str(flag)!r}):\n    sys.exit(0)\nopen({str(flag)!r}, 'w')\ntime.sleep(60)\n",
    )
    run = shlex.join([*NPUPROF, "run", "-o", str(out), "--", sys.executable, str(script)])
    loop = f'for i in 1 2; do {run}; echo "after-$i"; done'
    shell = subprocess.Popen(
        ["bash", "-c", loop], env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for((tmp_path / "started").exists, "the job to start")
        os.killpg(shell.pid, signal.SIGINT)  # what Ctrl-C does: the shell's foreground group (npuprof too)
        stdout, stderr = shell.communicate(timeout=30)
    finally:
        _kill_quietly(shell.pid, group=True)
    assert "after-" not in stdout, f"the loop went on after Ctrl-C: {stdout!r} {stderr[-2000:]}"
    assert shell.returncode == -signal.SIGINT


def _loop_over_npuprof_at_a_terminal(
    out: Path, tmp_path: Path, interrupt: Callable[[int, int], None], until: bytes
) -> tuple[bytes, int]:
    """`bash -c 'for i in 1 2; do npuprof run ...; echo "after-$i"; done'` on a pty (the shell not
    interactive, in npuprof's process group); the first run's job waits 60 s, the second's exits at once.
    ``interrupt(master, job)`` once npuprof has given the job the terminal; what the terminal showed until
    ``until`` (or the shell's end), and the shell's wait status."""
    import pty

    flag = tmp_path / "ran-once"
    script = _job_script(
        tmp_path,
        f"if os.path.exists({str(flag)!r}):\n    sys.exit(0)\nopen({str(flag)!r}, 'w')\ntime.sleep(60)\n",
    )
    run = shlex.join([*NPUPROF, "run", "-o", str(out), "--", sys.executable, str(script)])
    loop = f'for i in 1 2; do {run}; echo "after-$i"; done'
    pid, master = pty.fork()
    if pid == 0:  # a session leader with the pty as its terminal; the shell is not interactive
        os.execve("/bin/bash", ["bash", "-c", loop], clean_env(TERM="dumb"))
    seen = bytearray()
    job = status = None
    try:
        _wait_for((tmp_path / "started").exists, "the job to start")
        job = int((tmp_path / "started").read_text())
        _wait_for(lambda: os.tcgetpgrp(master) == job, "npuprof to give the job the terminal")
        interrupt(master, job)
        deadline = time.monotonic() + 60
        while until not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the shell and all it ran are gone
                    break
                seen.extend(chunk)
        _, status = os.waitpid(pid, 0)
    finally:
        _kill_quietly(job, group=True)
        if status is None:  # not reaped: still the shell's pid
            _kill_quietly(pid)
            os.waitpid(pid, 0)
        os.close(master)
    return bytes(seen), status


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_ctrl_c_at_a_terminal_stops_a_shell_script_looping_over_npuprof(out: Path, tmp_path: Path) -> None:
    """helper-203: `bash train_all.sh` at a terminal, its loop running `npuprof run`: npuprof gives the
    terminal to the job, so Ctrl-C reached the job alone, not the shell (in npuprof's process group, as a
    shell without job control runs its commands); the job and npuprof died of SIGINT, and the shell, which
    stops at Ctrl-C only when it got SIGINT too, went on with the next run. Without npuprof it stops."""
    seen, status = _loop_over_npuprof_at_a_terminal(
        out,
        tmp_path,
        lambda master, job: os.write(master, b"\x03"),
        b"after-",  # Ctrl-C
    )
    assert b"after-" not in seen, f"the loop went on after Ctrl-C: {seen[-2000:]!r}"
    assert os.waitstatus_to_exitcode(status) == -signal.SIGINT
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 128 + signal.SIGINT


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_a_sigint_sent_to_npuprof_at_a_terminal_leaves_the_shell_looping_over_it(
    out: Path, tmp_path: Path
) -> None:
    """The same loop, its job holding the terminal, but `kill -INT` of npuprof itself (no Ctrl-C): npuprof
    passes it on, the job dies of it, and npuprof dies of it alone. Its shell did not get the signal, so it
    goes on with the next run, as it does without npuprof when the job is sent SIGINT: only a Ctrl-C (which
    npuprof's group would have had too) is sent on to npuprof's group (JobEnd.terminal_signal)."""

    def kill_npuprof(master: int, job: int) -> None:
        with open(f"/proc/{job}/status") as status:
            launcher = next(int(line.split()[1]) for line in status if line.startswith("PPid:"))
        os.kill(launcher, signal.SIGINT)

    seen, status = _loop_over_npuprof_at_a_terminal(out, tmp_path, kill_npuprof, b"after-2")
    assert b"after-1" in seen and b"after-2" in seen, f"the loop stopped: {seen[-2000:]!r}"
    assert os.waitstatus_to_exitcode(status) == 0
    first = json.loads((out / "npuprof_run.json").read_text())  # (the second run's: npuprof_run.<time>.json)
    assert (first["exit_code"], first["signals_forwarded"]) == (128 + signal.SIGINT, [signal.SIGINT])


def test_sighup_to_npuprof_ends_the_job_and_npuprof_dies_of_it(out: Path, tmp_path: Path) -> None:
    script = _job_script(tmp_path, "time.sleep(30)\n")
    proc = subprocess.Popen(
        [*NPUPROF, "run", "-o", str(out), "--", sys.executable, str(script)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for((tmp_path / "started").exists, "the job to start")
        proc.send_signal(signal.SIGHUP)
        _, stderr = proc.communicate(timeout=30)
    finally:
        _kill_quietly(proc.pid, group=True)
    assert proc.returncode == -signal.SIGHUP, stderr
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["exit_code"] == 128 + signal.SIGHUP and record["signals_forwarded"] == [signal.SIGHUP]


# ---- must-have: SIGINT once forwards, twice kills ------------------------------------------------
def test_a_second_sigint_kills_the_jobs_process_group(out: Path, tmp_path: Path) -> None:
    """... and the run's processes outside it: torchrun starts each worker in a session of its own, and
    killing torchrun left them running (hung in a collective, npuprof waiting for them)."""
    from npuprof import launch

    heard = tmp_path / "heard"
    script = _job_script(
        tmp_path,
        "import subprocess\n"
        f"signal.signal(signal.SIGINT, lambda *_: open({str(heard)!r}, 'a').write('SIGINT\\n'))\n"
        "sleeper = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "child = subprocess.Popen(sleeper, start_new_session=True)\n"
        # written whole, then named: the test reads it as soon as the name is there
        f"pathlib.Path({str(tmp_path / 'grandchild.tmp')!r}).write_text(str(child.pid))\n"
        f"os.replace({str(tmp_path / 'grandchild.tmp')!r}, {str(tmp_path / 'grandchild')!r})\n"
        "time.sleep(60)\n",
    )
    proc = subprocess.Popen(
        [*NPUPROF, "run", "-o", str(out), "--", sys.executable, str(script)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    job = None
    try:
        _wait_for((tmp_path / "grandchild").exists, "the job's child to start")
        job = int((tmp_path / "started").read_text())
        grandchild = int((tmp_path / "grandchild").read_text())
        proc.send_signal(signal.SIGINT)
        _wait_for(heard.exists, "the job to get the first SIGINT")
        # npuprof noted the first before passing it on: a second one SAME_CTRL_C_S after it is a Ctrl-C of
        # its own (a fixed 0.5 s from the send was none for a launcher off the CPU meanwhile)
        time.sleep(launch.SAME_CTRL_C_S + 0.05)
        assert proc.poll() is None and _state(job) != "Z", "one SIGINT must only be forwarded"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    finally:
        _kill_quietly(proc.pid, group=True)
        _kill_quietly(job, group=True)
    said = [line for line in stderr.splitlines() if "killed the job's processes" in line]
    assert len(said) == 1 and said[0].startswith("npuprof: second SIGINT"), stderr
    assert proc.returncode == -signal.SIGINT
    assert _gone(grandchild)


# ---- #8b Ctrl-Z --------------------------------------------------------------------------------
def _stoppable_training(tmp_path: Path) -> Path:
    """A job that waits for the file ``go`` (so it can be stopped while waiting), then trains 4 steps."""
    go = tmp_path / "go"
    return _job_script(
        tmp_path,
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.02)\n"
        "import runpy\n"
        f"sys.argv = ['trainer.py', '--steps', '4']\n"
        f"runpy.run_path({str(SCRIPTS / 'trainer.py')!r}, run_name='__main__')\n",
    )


def _stoppable_run(out: Path, tmp_path: Path) -> list[str]:
    """`npuprof run` of the stoppable training, one step recorded."""
    script = str(_stoppable_training(tmp_path))
    return [*NPUPROF, "run", "-o", str(out), "--no-analyse", *sched(1, 0, 1), "--", sys.executable, script]


@pytest.mark.parametrize("nested", [False, True])
def test_a_stopped_job_stops_npuprof_and_sigcont_resumes_both(
    out: Path, tmp_path: Path, nested: bool
) -> None:
    inner = _stoppable_run(out, tmp_path)
    command = [*NPUPROF, "run", "-o", str(tmp_path / "outer"), "--", *inner] if nested else inner
    # Its own process group in pytest's session, as a shell runs a job (a group outside any session is
    # orphaned: the kernel does not stop it at SIGTSTP), a terminal on its stdin (job control needs one:
    # without, npuprof leaves a stop of its job to whoever made it, see the test below).
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        command, env=clean_env(), stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=os.setpgrp,  # process_group=0 from 3.11 on
    )  # fmt: skip
    os.close(slave)
    job = None
    try:
        _wait_for((tmp_path / "started").exists, "the job to start")
        job = int((tmp_path / "started").read_text())
        os.killpg(job, signal.SIGTSTP)  # what Ctrl-Z does to the job's group, which owns the terminal
        _wait_for(lambda: _state(proc.pid) == "T", "npuprof to stop with its job", timeout=10)
        assert _state(job) == "T" and _state(_parent(job)) == "T"
        (tmp_path / "go").touch()
        os.killpg(proc.pid, signal.SIGCONT)  # what `fg` does to npuprof's group
        _, stderr = proc.communicate(timeout=60)
    finally:
        _kill_quietly(proc.pid, group=True)
        _kill_quietly(job, group=True)
        os.close(master)
    assert proc.returncode == 0, stderr
    assert len(rank_dirs(out)) == 1


def test_without_a_terminal_a_job_stopped_and_continued_by_another_process_ends_normally(
    out: Path, tmp_path: Path
) -> None:
    """A scheduler (no terminal, no job control) sends the job SIGTSTP, then SIGCONT to the job alone:
    npuprof mirrored the stop, stopped itself, and nothing ever continued it (the run hung)."""
    command = _stoppable_run(out, tmp_path)
    proc = subprocess.Popen(
        command, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=os.setpgrp,  # process_group=0 from 3.11 on
    )  # fmt: skip
    job = None
    try:
        _wait_for((tmp_path / "started").exists, "the job to start")
        job = int((tmp_path / "started").read_text())
        os.kill(job, signal.SIGTSTP)
        _wait_for(lambda: _state(job) == "T", "the job to stop", timeout=10)
        time.sleep(0.3)
        assert _state(proc.pid) != "T", "npuprof stopped itself with no terminal to be continued from"
        (tmp_path / "go").touch()
        os.kill(job, signal.SIGCONT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        _kill_quietly(proc.pid, group=True)
        _kill_quietly(job, group=True)
    assert proc.returncode == 0, stderr
    assert len(rank_dirs(out)) == 1


def _read_until(fd: int, needle: bytes, seen: bytearray, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, (
            f"timed out waiting for {needle!r} on the terminal; it shows: {bytes(seen[-1500:])!r}"
        )
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if ready:
            try:
                seen.extend(os.read(fd, 65536))
            except OSError:  # EIO: the terminal's other side is gone
                break


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash for an interactive shell")
def test_ctrl_z_in_an_interactive_shell_gives_the_terminal_back_and_fg_resumes(
    out: Path, tmp_path: Path
) -> None:
    import pty

    command = shlex.join(_stoppable_run(out, tmp_path))
    env = clean_env(PS1="prompt> ", TERM="dumb")
    pid, master = pty.fork()
    if pid == 0:  # the child: a session leader with the pty as its controlling terminal
        os.execve("/bin/bash", ["bash", "--norc", "--noprofile", "-i"], env)
    seen = bytearray()
    job = launcher = None
    try:
        _read_until(master, b"prompt> ", seen)
        os.write(master, command.encode() + b"\n")
        _wait_for((tmp_path / "started").exists, "the job to start")
        job = int((tmp_path / "started").read_text())
        launcher = _parent(job)
        os.write(master, b"\x1a")  # Ctrl-Z
        _read_until(master, b"Stopped", seen)
        assert _state(launcher) == "T" and _state(job) == "T"
        os.write(master, b"echo shell-has-the-terminal-$((40 + 2))\n")
        _read_until(master, b"shell-has-the-terminal-42", seen)
        (tmp_path / "go").touch()
        os.write(master, b"fg; echo exit-code-$?\n")
        _read_until(master, b"exit-code-0", seen, timeout=60)
        os.write(master, b"exit\n")
    finally:
        _kill_quietly(job, group=True)
        _kill_quietly(launcher)
        _kill_quietly(pid)
        os.waitpid(pid, 0)
        os.close(master)
    assert len(rank_dirs(out)) == 1


# ---- #11 a full disk at the start ------------------------------------------------------------------
@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, filled up."""
    with small_tmpfs(tmp_path / "tiny", "64k") as mount:
        with contextlib.suppress(OSError), open(mount / "filler", "wb") as handle:
            for _ in range(64):
                handle.write(b"\0" * 4096)
                handle.flush()
        assert os.statvfs(mount).f_bavail == 0
        yield mount


@pytest.mark.parametrize("existing_output", [False, True])
def test_a_full_disk_at_the_start_still_runs_the_job(
    full_disk: Path, tmp_path: Path, existing_output: bool
) -> None:
    out = full_disk / "result"
    if existing_output:
        out.mkdir()
    marker = tmp_path / "job-ran"
    result = npuprof(
        "run", "-o", str(out), "--", sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"
    )
    assert result.returncode == 0, result.stderr
    assert marker.exists(), "the job did not run"
    assert "Traceback" not in result.stderr
    records = list(out.glob("npuprof_run*.json")) + list(out.glob(".npuprof_run*"))
    assert records == [], f"a record was left: {[(p.name, p.stat().st_size) for p in records]}"
    assert [p.name for p in out.iterdir() if p.is_file() and p.stat().st_size == 0] == []
    lines = result.stderr.splitlines()
    (record_line,) = [line for line in lines if "run record" in line]
    assert record_line.startswith("npuprof:") and "No space left" in record_line
    (space_line,) = [line for line in lines if "captures will be skipped" in line]
    assert space_line.startswith("npuprof:") and "--min-free-space" in space_line
    # and the last line names the full disk as the reason no capture was written
    said = " ".join(result.stderr.split())
    assert "no capture was written (exit code 0): only" in said and "so the captures were skipped" in said


# ---- #12 metadata at the documented limits ------------------------------------------------------
def _metadata_at_the_limits() -> dict[str, str]:
    """Values of 4096 characters, 50 KiB in all; 3- and 4-byte UTF-8 characters (JSON escapes them
    into 6 and 12 bytes)."""
    alphabet = "汉字测试データ😀🚀"
    entries = {}
    for i in range(12):
        key = f"k{i:02d}"
        entries[key] = "".join(alphabet[(i + j) % len(alphabet)] for j in range(METADATA_VALUE_LIMIT))
    assert sum(len(k) + len(v) for k, v in entries.items()) <= METADATA_TOTAL_LIMIT
    return entries


@pytest.fixture(scope="module")
def metadata_and_nested(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """One `npuprof run` read by two tests: --metadata at the limits (--no-analyse --no-gzip, skip 1, record
    1), its job printing how its payload came (file or inline, the file's mode), then training 4 steps
    itself and at last running `npuprof run -o INNER -- python -c pass`. The output dir, INNER, the run."""
    tmp_path = tmp_path_factory.mktemp("metadata-and-nested")
    out, inner = tmp_path / "result", tmp_path / "inner"
    script = tmp_path / "check_payload_and_nest.py"
    script.write_text(
        "import os, stat, subprocess, sys, torch\n"
        "value = os.environ['NPUPROF_CONFIG']\n"
        "mode = oct(stat.S_IMODE(os.stat(value[1:]).st_mode)) if value.startswith('@') else '-'\n"
        "print('file' if value.startswith('@') else 'inline', mode, flush=True)\n"
        "m = torch.nn.Linear(4, 4); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(4):\n"
        "    opt.zero_grad(); m(torch.randn(2, 4)).sum().backward(); opt.step()\n"
        f"subprocess.run([sys.executable, '-m', 'npuprof', 'run', '-o', {str(inner)!r}, '--', sys.executable,"
        " '-c', 'pass'], check=True)\n" + FREEZE_AT_EXIT
    )
    flags = [
        arg for key, value in _metadata_at_the_limits().items() for arg in ("--metadata", f"{key}={value}")
    ]
    result = npuprof(
        "run", "-o", str(out), "--no-analyse", "--no-gzip", *sched(1, 0, 1), *flags, "--",
        sys.executable, str(script),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return out, inner, result


def test_metadata_at_the_limits_with_non_ascii_values_reaches_the_capture(
    metadata_and_nested: tuple[Path, Path, subprocess.CompletedProcess],
) -> None:
    """(Its job, metadata_and_nested's, trains 4 steps itself, was trainer.py's 3, and runs npuprof run at
    its end, for the test of a job that captures and runs npuprof itself.)"""
    metadata = _metadata_at_the_limits()
    out, _, result = metadata_and_nested
    assert result.stdout.split()[:2] == ["file", "0o640"]
    (d,) = rank_dirs(out)
    written = json.loads((d / "profiler_metadata.json").read_text(encoding="utf-8"))
    assert {key: written.get(key) for key in metadata} == metadata
    assert list(out.glob(".npuprof_payload*")) == [], "the payload file outlived the run"


def test_a_daemon_that_outlives_the_job_is_profiled_with_a_large_configuration(tmp_path: Path) -> None:
    """A process of the job that outlives it (a daemon it forked) and imports torch after npuprof run has
    ended was said to capture into -o ("what they capture lands in ... as they go"), but with a
    configuration too large for the environment (64 KiB: metadata of quotes, each written \\") its agent
    found the payload file removed at the run's end: "profiling is off in this process", no capture. The
    file is kept while such a process runs, and the next run into -o removes it once they have ended."""
    go, done = tmp_path / "go", tmp_path / "done"
    job = tmp_path / "job.py"
    job.write_text(
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:  # the daemon: its own session, off the job's output\n"
        "        null = os.open(os.devnull, os.O_RDWR)\n"
        "        for fd in (0, 1, 2):\n"
        "            os.dup2(null, fd)\n"
        "        deadline = time.monotonic() + 120\n"
        f"        while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:\n"
        "            time.sleep(0.05)\n"
        "        import torch\n"
        "        model = torch.nn.Linear(4, 2)\n"
        "        opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "        for _ in range(4):\n"
        "            model(torch.randn(2, 4)).sum().backward(); opt.step(); opt.zero_grad()\n"
        f"        open({str(done)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
        f"        os.rename({str(done)!r} + '.tmp', {str(done)!r})\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    metadata = {f"key{i}": '"' * 4000 for i in range(12)}
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"metadata": metadata}))
    config.chmod(0o600)
    out = tmp_path / "out"
    result = npuprof(
        "run", "-o", str(out), "--no-analyse", "--config", str(config), *sched(1, 0, 1), "--",
        sys.executable, str(job),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "still run" in result.stderr, result.stderr[-2000:]
    go.touch()  # npuprof run has ended: the daemon trains now
    _wait_for(done.exists, "the daemon's training", timeout=120)
    wait_for_end(int(done.read_text()))
    (rank_dir,) = rank_dirs(out)
    written = json.loads((rank_dir / "profiler_metadata.json").read_text())
    assert {key: written.get(key) for key in metadata} == metadata
    again = npuprof("run", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert again.returncode == 0, again.stderr[-2000:]
    assert list(out.glob(".npuprof_payload*")) == [], "the payload file outlived the daemon's next run"


def test_a_payload_kept_for_another_hosts_processes_is_left_to_them(out: Path) -> None:
    """A shared -o (the nodes of a multi-node job): a run kept its payload file for processes of its job
    that outlived it (above), on its own host, where this host cannot see them: the next run here leaves
    that file alone; one kept by a run of this host whose processes have all ended is removed."""
    out.mkdir()
    here = os.uname().nodename
    kept = {}
    for i, (run_id, host) in enumerate([("a1a1a1a1a1a1", here + "-other-node"), ("b2b2b2b2b2b2", here)]):
        kept[host] = out / f".npuprof_payload.{run_id}.json"
        kept[host].write_text("{}")
        record = {
            "run_id": run_id,
            "host": host,
            "payload_kept": kept[host].name,
            "end": "2026-01-01T00:00:00",
        }
        (out / f"npuprof_run.{i + 1}.json").write_text(json.dumps(record))
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0, result.stderr
    assert kept[here + "-other-node"].exists() and not kept[here].exists()


def test_env_payload_round_trips_inline_and_through_a_file(tmp_path: Path) -> None:
    run = {"run_id": "abc123", "log": "x", "output": str(tmp_path)}
    small = config_payload(ProfileConfig(metadata={"team": "性能"}), run, tmp_path)
    assert small.file is None and "性能" in small.value  # not \\u-escaped
    assert decode_env_payload(small.value)["config"]["metadata"] == {"team": "性能"}
    cfg = ProfileConfig(metadata=_metadata_at_the_limits())
    large = config_payload(cfg, run, tmp_path)
    assert large.file == tmp_path / ".npuprof_payload.abc123.json"
    assert large.value == "@" + str(large.file)
    assert decode_env_payload(large.value)["config"]["metadata"] == cfg.metadata
    large.remove_file()
    assert not large.file.exists()


def test_a_payload_file_that_cannot_be_written_never_fails_the_launch(tmp_path: Path) -> None:
    cfg = ProfileConfig(metadata=_metadata_at_the_limits())
    run = {"run_id": "r", "log": "x", "output": "y"}
    payload = config_payload(cfg, run, tmp_path / "missing-dir")
    assert payload.file is None and payload.problem and "--metadata" in payload.problem
    assert len(payload.value.encode()) < 128 * 1024
    assert decode_env_payload(payload.value)["config"]["metadata"] == {}


def test_a_payload_file_the_disk_cut_short_is_not_left_behind(tmp_path: Path) -> None:
    """A disk that fills inside the payload's write (a 64 KiB tmpfs, the payload ~4 times that): the launch
    goes on without the file (the metadata left out, as above), and no partial payload is left in -o, where
    no run would remove it (only a run record's payload_kept is removed later)."""
    cfg = ProfileConfig(metadata=_metadata_at_the_limits())
    with small_tmpfs(tmp_path / "tiny", "64k") as mount:
        payload = config_payload(cfg, {"run_id": "r", "log": "x", "output": str(mount)}, mount)
        assert payload.file is None and payload.problem and "No space left" in payload.problem
        assert decode_env_payload(payload.value)["config"]["metadata"] == {}
        assert sorted(p.name for p in mount.iterdir()) == []


def _filled(env: dict[str, str], size: int) -> dict[str, str]:
    """``env`` with ``size`` bytes more of variables (each under Linux's 128 KiB a string)."""
    filled = dict(env)
    for i in range(0, size, 100_000):
        filled[f"FILLER{i // 100_000}"] = "x" * min(100_000, size - i)
    return filled


def _most_filler_that_starts(command: list[str], env: dict[str, str]) -> int | None:
    """The most bytes of filler variables with which ``command`` still starts (execve's E2BIG beyond it),
    found by bisection; None where even 8 MB starts (a stack limit so large that no limit is near)."""
    import errno

    def starts(size: int) -> bool:
        try:
            subprocess.run(command, env=_filled(env, size), check=True, capture_output=True, timeout=60)
        except OSError as exc:
            assert exc.errno == errno.E2BIG, exc
            return False
        return True

    low, high = 0, 8 << 20
    if starts(high):
        return None
    while high - low > 64:
        middle = (low + high) // 2
        low, high = (middle, high) if starts(middle) else (low, middle)
    return low


def test_an_environment_near_the_exec_limit_starts_the_job_as_it_would_without_npuprof(
    tmp_path: Path,
) -> None:
    """A job whose environment fits the kernel's limit on execve's arguments and environment, and would
    start without npuprof, did not start under it: npuprof's configuration inline in the environment
    (a few KiB; 24 KiB with this metadata) took it over the limit and npuprof said "cannot start 'python':
    Argument list too long", exit 127, as if the command were not there. The configuration is passed in a
    file then, and the job runs and is profiled, its metadata in the capture."""
    job, probe = tmp_path / "job.py", tmp_path / "nop.py"  # names of one length: the same argv size
    job.write_text(
        "import torch\n"
        "model = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(3):\n"
        "    model(torch.randn(2, 4)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "import signal\n"
        "print('trained', sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))\n" + FREEZE_AT_EXIT
    )
    probe.write_text("")
    base = clean_env()
    most = _most_filler_that_starts([sys.executable, str(probe)], base)
    if most is None:
        pytest.skip("no limit on execve's arguments and environment is near here")
    metadata = {f"key{i}": "m" * 4000 for i in range(6)}
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"metadata": metadata}))
    config.chmod(0o600)
    out = tmp_path / "out"
    # 4 KiB below the limit: npuprof's own longer command line starts, and the job does bare (the probe did)
    env = _filled(base, most - 4096)
    result = npuprof(
        "run", "-o", str(out), "--no-analyse", "--config", str(config), *sched(1, 0, 1), "--",
        sys.executable, str(job), env=env,
    )  # fmt: skip
    # the job, started again with its configuration in a file, has the signal mask npuprof was started
    # with (helper-342: npuprof blocks its forwarded signals while a start fails)
    blocked = sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))  # what npuprof inherits from here
    assert (result.returncode, result.stdout) == (0, f"trained {blocked}\n"), result.stderr[-2000:]
    (rank_dir,) = rank_dirs(out)
    written = json.loads((rank_dir / "profiler_metadata.json").read_text())
    assert {key: written.get(key) for key in metadata} == metadata
    assert list(out.glob(".npuprof_payload*")) == [], "the payload file outlived the run"


# ---- #13 injection warnings ------------------------------------------------------------------------
def _assert_warned(warnings: list[str], warned: str | None) -> None:
    """``warnings`` is one line naming Python's option ``warned`` as keeping npuprof out, or none."""
    if warned is None:
        assert warnings == []
    else:
        (line,) = warnings
        assert f"({warned}" in line and "cannot reach" in line


@pytest.mark.parametrize(
    ("args", "warned"),
    [
        (["-E", "-c", "pass"], "-E"),
        (["-uE", "train.py"], "-E"),
        (["-I", "train.py"], "-I"),
        (["-S", "train.py"], "-S"),
        (["-bsS", "train.py"], "-S"),
        (["-W", "error", "-E", "train.py"], "-E"),
        (["--check-hash-based-pycs", "always", "-E", "train.py"], "-E"),
        (["-Wignore::SyntaxWarning", "train.py"], None),
        (["-W", "ignore::SyntaxWarning", "train.py"], None),
        (["-Werror::ImportWarning", "train.py"], None),
        (["-XIS", "train.py"], None),
        (["-X", "importtime", "-P", "train.py"], None),  # -P (safe path) does not stop the injection
        (["--check-hash-based-pycs", "ESI", "train.py"], None),
        (["-c", "import sys", "-S"], None),
        (["-m", "pkg", "-E"], None),
        (["train.py", "-S"], None),
        (["-", "-S"], None),
        (["--help"], None),
    ],
)
def test_python_options_are_parsed_as_python_does(args: list[str], warned: str | None) -> None:
    warnings = injection_warnings(["python3", *args])
    _assert_warned(warnings, warned)


@pytest.mark.parametrize(
    ("shebang", "warned"),
    [
        ("#!/bin/bash", False),  # helper-178: ./train.sh that runs python was warned at every run
        ("#!/usr/bin/env bash", False),
        ("#!/bin/sh -e", False),
        ("#!/usr/bin/env -S uv run --script", False),
        ("#!/usr/bin/python3", False),
        ("#!/usr/bin/env python3", False),
        ("#!/opt/pypy/bin/pypy3", False),
        ("#!/usr/bin/perl", True),
        ("#!/usr/bin/env node", True),
        ("", True),
    ],
)
def test_a_script_run_by_a_shell_is_not_flagged(tmp_path: Path, shebang: str, warned: bool) -> None:
    script = tmp_path / "train.sh"
    script.write_text(f"{shebang}\necho hi\n")
    script.chmod(0o755)
    warnings = injection_warnings([str(script)])
    assert bool(warnings) is warned, warnings
    assert all("does not look like a Python program" in line for line in warnings)


@pytest.mark.parametrize(
    ("command", "warned"),
    [
        # helper-178: a wrapper's Python with -E/-I/-S was not warned, and the run ended saying "no process
        # of the job imported torch.optim" of a job that trained
        (["env", "FOO=1", "python3", "-I", "train.py"], "-I"),
        (["nice", "-n", "5", "/venv/bin/python", "-S", "train.py"], "-S"),
        (["timeout", "-s", "INT", "60", "python3.11", "-uE", "train.py"], "-E"),
        (["uv", "run", "python", "-I", "train.py"], "-I"),
        (["env", "FOO=x", "python3", "train.py", "-I"], None),  # the script's own argument
        (["nice", "python3", "-X", "importtime", "train.py"], None),
        (["bash", "-c", "python -I train.py"], None),  # what a shell runs is not read
        (["make", "python", "-I"], None),  # make's targets
    ],
)
def test_python_options_are_read_through_a_wrapper(command: list[str], warned: str | None) -> None:
    warnings = injection_warnings(command)
    _assert_warned(warnings, warned)


def test_a_link_to_python_under_another_name_is_python(tmp_path: Path) -> None:
    # helper-182: ./py3 (a link to the venv's python) was warned "does not look like a Python program"
    link = tmp_path / "py3"
    link.symlink_to(os.path.realpath(sys.executable))
    assert injection_warnings([str(link), "train.py"]) == []
    _assert_warned(injection_warnings([str(link), "-I", "train.py"]), "-I")
    other = tmp_path / "tool"
    other.symlink_to("/bin/true")
    assert "does not look like a Python program" in injection_warnings([str(other)])[0]


@pytest.mark.parametrize(
    ("command", "dropped"),
    [
        # helper-182: an env that drops npuprof's PYTHONPATH or NPUPROF_CONFIG was not warned; the run
        # ended saying that no process imported torch.optim
        (["env", "-i", "python3", "train.py"], "-i"),
        (["env", "-", "python3", "train.py"], "-"),
        (["env", "--ignore-environment", "PATH=/usr/bin", "torchrun", "train.py"], "--ignore-environment"),
        (["env", "--ignore-e", "bash", "train.sh"], "--ignore-e"),  # a prefix only it has
        (["env", "-vi", "python3", "train.py"], "-vi"),
        (["env", "-S", "-i python3", "train.py"], "-i"),  # -S's string is split into options
        (["timeout", "-s", "INT", "60", "env", "-i", "python3", "train.py"], "-i"),
        (["env", "-u", "PYTHONPATH", "python3", "train.py"], "-u PYTHONPATH"),
        (["env", "-uPYTHONPATH", "python3", "train.py"], "-u PYTHONPATH"),
        (["env", "--unset=PYTHONPATH", "python3", "train.py"], "-u PYTHONPATH"),
        (["env", "-C", "/tmp", "--unset", "NPUPROF_CONFIG", "python3", "t.py"], "-u NPUPROF_CONFIG"),
        # helper-186: of two, the last alone was named ("drop -u NPUPROF_CONFIG to profile it": it did not)
        (["env", "-u", "PYTHONPATH", "-u", "NPUPROF_CONFIG", "python3"], "-u PYTHONPATH and -u NPUPROF"),
        (["env", "PYTHONPATH=src", "python3", "train.py"], "PYTHONPATH=src npuprof run"),
        (["nice", "env", "A=1", "PYTHONPATH=src:lib", "python3", "t.py"], "PYTHONPATH=src:lib npuprof run"),
        (["env", "--ignore", "python3", "train.py"], None),  # env refuses an ambiguous option
        (["env", "-u", "FOO", "python3", "train.py"], None),
        (["env", "--", "-i", "python3"], None),
        (["bash", "-c", "env -i python3 train.py"], None),  # what a shell runs is not read
        (["python3", "train.py", "env", "-i"], None),  # the script's own arguments
        (["env", f"PYTHONPATH={BOOTSTRAP_DIR}:src", "python3", "train.py"], None),  # npuprof's kept
    ],
)
def test_an_env_that_drops_npuprofs_variables_is_warned(command: list[str], dropped: str | None) -> None:
    warnings = injection_warnings(command)
    if dropped is None:
        assert warnings == []
    else:
        (line,) = warnings
        assert "so nothing will be captured" in line and dropped in line.split(":", 1)[1], line


def test_an_env_in_a_scripts_shebang_that_drops_npuprofs_variables_is_warned(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("#!/usr/bin/env -S -i python3\nprint('hi')\n")
    script.chmod(0o755)
    (line,) = injection_warnings([str(script)])
    assert line.startswith(f"{script} (#!/usr/bin/env -S -i python3): env -S -i:"), line
    assert "nothing will be captured" in line


@pytest.mark.parametrize(
    ("shebang", "warned"),
    [
        ("#!/usr/bin/python3 -E", "-E"),  # helper-178: ./train.py of this #! line was not warned
        ("#!/usr/bin/env -S python3 -I", "-I"),
        ("#!/usr/bin/python3 -u", None),
        ("#!/usr/bin/env python3", None),
    ],
)
def test_python_options_of_a_scripts_shebang_are_read(
    tmp_path: Path, shebang: str, warned: str | None
) -> None:
    script = tmp_path / "train.py"
    script.write_text(f"{shebang}\nprint('hi')\n")
    script.chmod(0o755)
    warnings = injection_warnings([str(script)])
    _assert_warned(warnings, warned)
    assert all(shebang in line for line in warnings)


@pytest.mark.parametrize(
    ("command", "environ", "shown"),
    [
        (["torchrun", "--nproc-per-node", "2", "--local-ranks-filter", "0", "t.py"], {}, [0]),
        (["torchrun", "--local_ranks_filter=0,1", "t.py", "--local-ranks-filter", "1"], {}, [0, 1]),
        # the script's own argument of that name: torchrun shows every rank
        (["torchrun", "--nproc-per-node", "2", "-m", "pkg.train", "--local-ranks-filter", "1"], {}, None),
        (["torchrun", "--no-python", "train", "--local_ranks_filter", "1"], {}, None),
        (["python", "t.py", "torchrun", "--local-ranks-filter", "0"], {}, None),
        # torchrun's other spellings of it: python's options before -m, argparse's prefixes, its env var
        (["python3", "-u", "-m", "torch.distributed.run", "--local-ranks-filter", "0", "t.py"], {}, [0]),
        (["python", "-mtorch.distributed.launch", "--use-env", "--local-ranks-filter", "1", "t.py"], {}, [1]),
        (["env", "A=1", "/bin/torchrun", "--stan", "-r", "0", "--local-r=1", "t.py"], {}, [1]),
        (["torchrun", "--local", "0", "t.py"], {}, None),  # --local-addr's prefix too: torchrun refuses it
        (["torchrun", "t.py"], {"PET_LOCAL_RANKS_FILTER": "1"}, [1]),
        (["torchrun", "--local-ranks-filter", "0", "t.py"], {"PET_LOCAL_RANKS_FILTER": "1"}, [0]),
        (["torchrun", "--local-ranks-filter", "", "t.py"], {}, None),  # torchrun: every rank
        (["torchrun", "--local-ranks-filter", "x", "t.py"], {}, None),  # torchrun refuses it
        # helper-163: --redirects sends a rank's stderr to its log file only, unless --tee shows it too
        (["torchrun", "--nproc-per-node", "2", "--redirects", "3", "--tee", "0:3", "t.py"], {}, [0]),
        (["torchrun", "--nproc_per_node=4", "-r3", "-t", "1:2,3:3", "t.py"], {}, [1, 3]),
        (["torchrun", "--nproc-per-node", "2", "--redirects", "3", "t.py"], {}, []),  # none on the console
        (["torchrun", "--nproc-per-node", "2", "--redir=1", "t.py"], {}, None),  # stdout only: stderr shown
        (["torchrun", "--nproc-per-node", "3", "--redirects", "1:2", "t.py"], {}, [0, 2]),
        (["torchrun", "--nproc-per-node", "2", "--redirects", "3", "--tee", "3", "t.py"], {}, None),
        (["torchrun", "--redirects", "3", "--tee", "3", "--local-ranks-filter", "0", "t.py"], {}, [0]),
        (["torchrun", "--redirects", "0:2", "--local-ranks-filter", "0,1", "t.py"], {}, [1]),
        (["torchrun", "--nproc-per-node", "2", "t.py"], {"PET_REDIRECTS": "3", "PET_TEE": "1:3"}, [1]),
        (["torchrun", "--redirects", "9", "t.py"], {}, None),  # torchrun refuses it
        (["torchrun", "--nproc-per-node", "2", "t.py", "--redirects", "3"], {}, None),  # the script's own
        # helper-165: --log-dir /dev/null: torchrun redirects nothing and filters nothing, every rank shows
        (
            ["torchrun", "--nproc-per-node", "2", "--log-dir", "/dev/null", "--redirects", "3", "t.py"],
            {},
            None,
        ),
        (["torchrun", "--log_dir=/dev/null", "--local-ranks-filter", "1", "t.py"], {}, None),
        (["torchrun", "--log-d", "/dev/null", "-r3", "t.py"], {}, None),
        (["torchrun", "-r3", "t.py"], {"PET_LOG_DIR": "/dev/null"}, None),
        (["torchrun", "--log-dir", "/tmp/logs", "-r", "0:2", "t.py"], {"PET_LOG_DIR": "/dev/null"}, []),
    ],
)
def test_the_local_ranks_torchrun_shows_are_read_as_torchrun_reads_them(
    command: list[str], environ: dict[str, str], shown: list[int] | None
) -> None:
    """A warning shown once per run is left to a rank whose output torchrun shows: the ranks read must be
    torchrun's (a script's argument of that name read as the filter made rank 0 take itself for hidden;
    a filter spelled otherwise was not read, and a hidden rank took the one showing)."""
    assert shown_local_ranks(command, environ) == shown


def test_python_dash_E_is_flagged_and_a_warning_filter_is_not(out: Path) -> None:
    result = npuprof(
        "run",
        "-o",
        str(out),
        "--",
        sys.executable,
        "-E",
        "-c",
        "import sys; print('sitecustomize' in sys.modules)",
    )
    assert result.returncode == 0
    assert result.stdout.strip() == "False"  # nothing was injected
    assert "(-E)" in result.stderr and "cannot reach" in result.stderr
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-Wignore::SyntaxWarning", "-c", "pass")
    assert result.returncode == 0
    assert "cannot reach" not in result.stderr


# ---- must-have 4: directory modes -------------------------------------------------------------------
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o750), (0o000, 0o750), (0o077, 0o700)])
def test_output_directories_are_0o750_or_stricter(tmp_path: Path, umask: int, mode: int) -> None:
    out = tmp_path / "a" / "b" / "result"
    result = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), "--", sys.executable, "-c", "pass"],
        env=clean_env(), capture_output=True, text=True, timeout=60, preexec_fn=lambda: os.umask(umask),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for directory in (tmp_path / "a", tmp_path / "a" / "b", out):
        assert oct(directory.stat().st_mode & 0o777) == oct(mode), directory
    assert (out / "npuprof_run.json").stat().st_mode & 0o777 == 0o640 & ~umask  # a stricter umask is kept


def test_a_planted_log_symlink_is_never_followed(out: Path, tmp_path: Path) -> None:
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (out / "npuprof.log").symlink_to(victim)
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious\n"
    (line,) = [x for x in result.stderr.splitlines() if "npuprof.log" in x and "not a regular file" in x]
    assert line.startswith("npuprof:")


def test_a_log_whose_directory_the_job_removed_is_said_so_once_the_job_has_ended(
    out: Path, tmp_path: Path
) -> None:
    """helper-116: the job moved the output dir away; after its end the launcher said "cannot write to the
    log ... (not writable); the job goes on", though the job had ended and the file was merely gone."""
    moved = tmp_path / "moved"
    job = f"import os; os.rename({str(out)!r}, {str(moved)!r})"
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-c", job)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "npuprof.log" in x]
    log = str(out / "npuprof.log")
    assert line == f"npuprof: cannot write to the log {log!r} (its directory was removed)"
    assert "the job goes on" not in result.stderr and (moved / "npuprof.log").is_file()


@pytest.mark.parametrize("shared", [False, True], ids=["own-output", "same-output"])
def test_a_job_that_is_npuprof_run_itself_is_named_in_the_outer_summary(
    out: Path, tmp_path: Path, shared: bool
) -> None:
    """helper-110: `npuprof run -- npuprof run -o inner -- python train.py`: the inner run profiles the job
    (its hook replaces the outer's) and the outer said "no process of the job imported torch.optim";
    helper-118: so it still did when both shared -o."""
    inner = out if shared else tmp_path / "inner"
    nested = [sys.executable, "-m", "npuprof", "run", "-o", str(inner), "--", sys.executable, "-c", "pass"]
    result = npuprof("run", "-o", str(out), "--", *nested)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())  # the note is wrapped at the terminal's width
    assert (
        "npuprof: no capture was written (exit code 0): the job ran npuprof run itself, which profiled its "
        f"processes instead of this run: its captures are in {inner}. See {out / 'npuprof.log'}."
    ) in said, said
    assert said.count("imported torch.optim") == 1  # the inner run's own reason, of its own job
    assert said.count("ran npuprof run itself") == 1  # not said by the inner run of itself


def test_a_job_that_captures_and_runs_npuprof_itself_names_both(
    metadata_and_nested: tuple[Path, Path, subprocess.CompletedProcess],
) -> None:
    """helper-118: a job that trained (its capture listed) and also ran npuprof run on another program:
    the summary listed its own capture and never named the other run's output. (Its job is
    metadata_and_nested's: the same script, recording 1 step, was 2, with --metadata at the limits,
    --no-analyse and --no-gzip.)"""
    out, inner, result = metadata_and_nested
    said = " ".join(result.stderr.split())
    assert f"npuprof: 1 capture(s) in {out}" in said, said
    assert f"npuprof: the job ran npuprof run itself: what it profiled is in {inner}, not listed here" in said


# ---- must-have 2: the disk guard flag ----------------------------------------------------------------
def test_required_free_bytes() -> None:
    gib = 1024**3
    assert required_free_bytes("auto", 1000 * gib) == 5 * gib  # 5 GiB < 5 %
    assert required_free_bytes("auto", 10 * gib) == gib // 2  # 5 % < 5 GiB
    assert required_free_bytes("0", 10 * gib) == 0
    assert required_free_bytes("500MiB", 1) == 500 * 1024**2
    assert required_free_bytes("2G", 1) == 2 * gib
    assert required_free_bytes("10GB", 1) == 10 * 1000**3
    assert required_free_bytes("3%", 100 * gib) == 3 * gib
    for bad in ("", "lots", "-1", "5XB", "101%", "1e9"):
        with pytest.raises(ConfigError, match="--min-free-space"):
            required_free_bytes(bad, gib)


def test_too_little_free_space_warns_once_and_the_job_runs(out: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    job = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    result = npuprof("run", "-o", str(out), "--min-free-space", "100%", "--", *job)
    assert result.returncode == 0 and marker.exists()
    (line,) = [x for x in result.stderr.splitlines() if "--min-free-space" in x]
    assert line.startswith("npuprof:") and "captures will be skipped" in line
    assert line.endswith("0 turns the check off)"), line
    result = npuprof("run", "-o", str(out), "--min-free-space", "0", "--", *job)
    assert result.returncode == 0 and "--min-free-space" not in result.stderr


def test_the_start_warning_of_a_disk_below_the_default_floor_says_what_lets_captures_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-298: 3.9 GiB free on a 100 GiB disk is below the default floor (5 GiB): every capture was
    skipped, and the line named --min-free-space with no value that would let them run."""
    from npuprof.agent.disk_guard import DiskGuard
    from npuprof.agent.log import AgentLog
    from npuprof.results.free_space import skip_warning

    gib = 1 << 30
    free = 39 * gib // 10

    def statvfs(path: object) -> os.statvfs_result:
        return os.statvfs_result((1024, 1024, 100 * gib // 1024, free // 1024, free // 1024, 0, 0, 0, 0, 255))

    monkeypatch.setattr(os, "statvfs", statvfs)
    line = skip_warning(tmp_path, "auto")
    assert line == (
        f"only 3.9 GiB free on the filesystem of --output {str(tmp_path)!r}, below --min-free-space auto "
        "(5.0 GiB): captures will be skipped; the job runs (--min-free-space 1.9GiB lets them run, half the "
        "free space left to them; 0 turns the check off)"
    )
    assert skip_warning(tmp_path, "1.9GiB") is None and skip_warning(tmp_path, "0") is None  # as it says
    guard = DiskGuard(str(tmp_path), "auto", AgentLog(None, "test"))
    guard.check()  # the agent's warning of a capture skipped says the same
    assert not guard.ok_for(str(tmp_path))
    assert guard.fix(str(tmp_path)).startswith("--min-free-space 1.9GiB lets them run")
    free = 915 * gib // 10  # from 10 of the unit on, a whole number
    assert skip_warning(tmp_path, "95%").endswith(
        "the job runs (--min-free-space 45GiB lets them run, half the "
        "free space left to them; 0 turns the check off)"
    )
    free = 300 << 10  # under 1 MiB: no floor is worth suggesting
    assert skip_warning(tmp_path, "auto").endswith("the job runs (--min-free-space 0 turns the check off)")


@pytest.mark.parametrize("value", ["lots", "5XB", "101%", "-1"])
def test_a_bad_min_free_space_exits_2_with_one_line(tmp_path: Path, value: str) -> None:
    result = npuprof(
        "run", "-o", str(tmp_path / "r"), "--min-free-space", value, "--", sys.executable, "-c", "pass"
    )
    assert result.returncode == 2
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert "--min-free-space" in line and "e.g." in line
    assert not (tmp_path / "r").exists()


def test_min_free_space_from_the_config_file(out: Path, tmp_path: Path) -> None:
    config = tmp_path / "profiler_config.json"
    config.write_text(json.dumps({"min_free_space": "100%"}))
    result = npuprof("run", "--config", str(config), "-o", str(out), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0 and "captures will be skipped" in result.stderr
    config.write_text(json.dumps({"min_free_space": "lots"}))
    result = npuprof("run", "--config", str(config), "-o", str(out), "--", sys.executable, "-c", "pass")
    assert result.returncode == 2
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert str(config) in line and "min_free_space" in line


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--with-stack", "true"], "'true': before -- is not a command: --with-stack takes no value"),
        (["--ranks", "0", "1"], "'1': before -- is not a command: --ranks takes one value"),
        (["--ranks", "0-3", "4-5"], "'4-5': before -- is not a command: --ranks takes one value"),
        (["--ranks", "0", "all"], "'all': before -- is not a command: --ranks takes one value"),
        (["--worker-name", "--ranks", "0"], "--worker-name: took '--ranks' as its value"),
        (["--metadata", "a=1", "b=2"], "'b=2': before -- is not a command: --metadata takes one value"),
        (["-o"], "--output: took '--' as its value"),
        (["-o", "--with-stack"], "--output: took '--with-stack' as its value"),
        (["-o", "--no-gzip"], "--output: took '--no-gzip' as its value"),
        (["--export-chrome-trace"], "--export-chrome-trace: took '--' as its value"),
    ],
)
def test_a_word_taken_for_the_command_or_a_flag_taken_as_a_value_exits_2(
    tmp_path: Path, flags: list[str], said: str
) -> None:
    """`--with-stack true -- python train.py` ran `true` (exit 0, no training), `-o -- python ...` made a
    directory named `--`: one line, exit 2, nothing run or made."""
    marker = tmp_path / "ran"
    job = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    result = npuprof("run", *flags, "--", *job, cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert list(tmp_path.iterdir()) == []  # the job never ran, no directory made


def test_a_command_with_its_own_double_dash_still_runs(tmp_path: Path) -> None:
    """Without npuprof's own --, a command's -- is the command's."""
    result = npuprof(
        "run", "-o", str(tmp_path / "out"), "--", sys.executable, "-c", "import sys; print(sys.argv[1:])",
        "--", "1", timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "['--', '1']" in result.stdout


@pytest.mark.parametrize(
    "args, command",
    [
        (["run", "--active"], "run"),
        (["run", "--with-stack=yes", "--", "x"], "run"),
        (["analyse", "--force=1", "x"], "analyse"),
    ],
)
def test_an_option_the_parser_refuses_names_its_command(args: list[str], command: str) -> None:
    result = npuprof(*args)
    assert result.returncode == 2
    assert (
        result.stderr.startswith(f"npuprof {command}: error: ")
        and f"see npuprof {command} --help" in result.stderr
    )


def test_a_failing_run_summary_keeps_the_jobs_exit_code(out: Path, tmp_path: Path) -> None:
    """An exception in npuprof's own work after the job ended (the run summary here) made npuprof exit 1
    with a traceback: the job's exit code is kept and the fault is said in one line."""
    launcher = (
        "import sys, npuprof.reports.run_summary as r\n"
        "def broken(*a, **k):\n    raise RuntimeError('summary broke')\n"
        "r.print_run_summary = broken\n"
        "from npuprof.cli.main import main\n"
        "sys.argv = ['npuprof', *sys.argv[1:]]\n"
        "main()\n"
    )
    job = tmp_path / "job.py"
    job.write_text("import sys\nsys.exit(7)\n")
    result = subprocess.run(
        [sys.executable, "-c", launcher, "run", "-o", str(out), "--", sys.executable, str(job)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 7, result.stderr
    assert "Traceback" not in result.stderr
    said = [line for line in result.stderr.splitlines() if "internal error" in line]
    assert said == [
        "npuprof: internal error after the job ended (RuntimeError: summary broke); "
        "the exit code is the job's"
    ]
    assert "summary broke" in (out / "npuprof.log").read_text()
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 7


@pytest.mark.parametrize(("flag", "value"), [("--skip-first", "x"), ("--active", "1.5")])
def test_a_number_flag_given_no_whole_number_says_so_in_its_words(flag: str, value: str) -> None:
    result = npuprof("run", flag, value, "--", sys.executable, "-c", "pass")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"npuprof run: error: Invalid value for '{flag}': '{value}' is not a whole number; "
        "see npuprof run --help"
    ]


def test_ctrl_c_while_npuprof_starts_dies_of_it_without_a_traceback() -> None:
    """SIGINT in npuprof's first ~50 ms (its imports) printed a traceback ending in KeyboardInterrupt; it
    dies of SIGINT, as after the job's start, so that a shell loop around it stops."""
    launcher = (
        "import sys\n"
        "class Interrupted:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'npuprof.cli.run_flags':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupted())\n"
        "from npuprof.cli.main import main\n"
        "sys.argv = ['npuprof', 'run', '--', sys.executable, '-c', 'pass']\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", launcher], env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (-signal.SIGINT, "npuprof: aborted\n")


def _stopped_before_the_job(
    out: Path, marker: Path, signame: str, patch: str = ""
) -> subprocess.CompletedProcess[str]:
    """``npuprof run`` that gets ``signame`` between its run record and the job's start (``patch``: more
    Python run in the launcher first); the job would create ``marker``."""
    launcher = (
        "import os, signal, sys\n"
        "import npuprof.runner as runner\n"
        f"{patch}"
        "def signalled(command):\n"
        f"    os.kill(os.getpid(), signal.{signame})\n"
        "    return []\n"
        "runner.injection_warnings = signalled\n"
        "from npuprof.cli.main import main\n"
        "sys.argv = ['npuprof', *sys.argv[1:]]\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", launcher, "run", "-o", str(out), "--", sys.executable, "-c",
         f"open({str(marker)!r}, 'w')"],
        env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGQUIT", "SIGUSR1"])
def test_a_signal_before_the_job_starts_ends_the_run_record(out: Path, tmp_path: Path, signame: str) -> None:
    """SIGTERM between the run record and the job's start killed npuprof with a record saying nothing of
    the run's end (exit code null): the record now says why, and npuprof dies of the signal. helper-342:
    so did a Ctrl-\\ (SIGQUIT) or SIGUSR1 there, which that handler left out."""
    marker = tmp_path / "ran"
    result = _stopped_before_the_job(out, marker, signame)
    signum = getattr(signal, signame)
    assert result.returncode == -signum, result.stderr
    assert "Traceback" not in result.stderr and not marker.exists()
    record = json.loads((out / "npuprof_run.json").read_text())
    said = f"stopped by {signame} before the job started"
    assert (record["exit_code"], record["error"]) == (128 + signum, said)
    assert record["end"] is not None and not list(out.glob(".npuprof_payload*"))


def test_a_signal_as_the_forwarders_take_over_reaches_the_job(out: Path, tmp_path: Path) -> None:
    """helper-342: between the put-down of the handler that ends the record before the job starts and
    run_child's forwarders, SIGTERM had its default action: npuprof died of it, its record saying nothing of
    the run's end. Held over that hand-over now, it is passed on once the job runs, as one that comes while
    the job is started. The signal is sent as run_child sets the terminal up, in that gap."""
    in_the_gap = (
        "from npuprof import launch\n"
        "class Terminal(launch._Terminal):\n"
        "    def __init__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        super().__init__()\n"
        "launch._Terminal = Terminal\n"
    )
    result = _stopped_before_the_job(out, tmp_path / "ran", "SIGCHLD", in_the_gap)  # (SIGCHLD: nothing)
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert "Traceback" not in result.stderr
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["end"] is not None and record["exit_code"] == 128 + signal.SIGTERM, record
    assert "before the job started" not in str(record.get("error")), record  # it reached the job


def test_a_signal_that_comes_while_a_job_fails_to_start_ends_npuprof_once_the_record_says_so(
    out: Path, tmp_path: Path
) -> None:
    """helper-342: a SIGTERM that came while the job was being started was held for the job; when the exec
    then failed (ENOEXEC, E2BIG, ...) it was dropped: npuprof exited 126 as if nothing had asked it to stop,
    and a later one met SIG_DFL in the middle of the record's write. Held (blocked) now until the record says
    why the start failed, npuprof then dies of it."""
    failing_start = (
        "import errno\n"
        "from npuprof import launch\n"
        "def spawn(command, env, reset):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    raise OSError(errno.ENOEXEC, os.strerror(errno.ENOEXEC))\n"
        "launch._spawn = spawn\n"
    )
    result = _stopped_before_the_job(out, tmp_path / "ran", "SIGCHLD", failing_start)  # (SIGCHLD: nothing)
    assert result.returncode == -signal.SIGTERM, (result.returncode, result.stderr)
    assert "cannot start" in result.stderr and "Traceback" not in result.stderr, result.stderr
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["end"] is not None and record["exit_code"] == 126, record
    assert "cannot start" in record["error"], record


_E2BIG_THEN_RETRY_FAILS = (
    "import errno\n"
    "from npuprof import launch\n"
    "def spawn(command, env, reset):\n"
    "    os.kill(os.getpid(), signal.SIGTERM)  # held for the job, which never runs\n"
    "    raise OSError(errno.E2BIG, os.strerror(errno.E2BIG))\n"
    "launch._spawn = spawn\n"
    "payload = runner.config_payload\n"
    "def in_file_fails(*args, in_file=False, **kwargs):\n"
    "    if in_file:\n"
    "        raise RuntimeError('boom in the retry')\n"
    "    return payload(*args, **kwargs)\n"
    "runner.config_payload = in_file_fails\n"
)
_SPAWN_FAILS = (
    "from npuprof import launch\n"
    "def spawn(command, env, reset):\n"
    "    raise ValueError('boom in the spawn')\n"
    "launch._spawn = spawn\n"
)


@pytest.mark.parametrize(
    ("patch", "boom", "died_of"),
    [
        (_E2BIG_THEN_RETRY_FAILS, "boom in the retry", signal.SIGTERM),
        (_SPAWN_FAILS, "boom in the spawn", None),
    ],
    ids=["retry", "spawn"],
)
def test_npuprofs_own_failure_as_the_job_starts_ends_the_record_in_one_line(
    out: Path, tmp_path: Path, patch: str, boom: str, died_of: int | None
) -> None:
    """helper-345: an exception other than LaunchError from run_child (its E2BIG retry's own, a spawn's
    ValueError) printed a traceback and left the record with no end; a signal held for the job then killed
    npuprof at its default action. Now the record ends (exit code 1, the error), one line names the internal
    error and the log, and npuprof exits 1 (dies of the held signal once the record is written)."""
    marker = tmp_path / "ran"
    result = _stopped_before_the_job(out, marker, "SIGCHLD", patch)  # (SIGCHLD: nothing)
    assert result.returncode == (-died_of if died_of else 1), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and not marker.exists(), result.stderr
    said = [line for line in result.stderr.splitlines() if "internal error" in line]
    assert len(said) == 1 and boom in said[0] and str(out / "npuprof.log") in said[0], result.stderr
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["end"] is not None and record["exit_code"] == 1 and boom in record["error"], record
    assert "Traceback" in (out / "npuprof.log").read_text()
    assert not list(out.glob(".npuprof_payload*"))


_WAIT_FAILS = (
    "from npuprof import launch\n"
    "def wait(pid, terminal):\n"
    "    raise RuntimeError('boom in the wait')\n"
    "launch._wait = wait\n"
)
_PUT_DOWN_FAILS = (  # the forwarders' put-down, once the job was reaped
    "import contextlib\n"
    "from npuprof import launch\n"
    "resizes = launch._resizes_reach_the_job\n"
    "@contextlib.contextmanager\n"
    "def failing(*args):\n"
    "    with resizes(*args):\n"
    "        yield\n"
    "    raise RuntimeError('boom in the wait')\n"
    "launch._resizes_reach_the_job = failing\n"
)


@pytest.mark.parametrize(
    ("patch", "when"),
    [(_WAIT_FAILS, "while the job ran"), (_PUT_DOWN_FAILS, "after the job ended")],
    ids=["wait", "put-down"],
)
def test_npuprofs_own_failure_while_the_job_runs_waits_for_it_and_passes_its_exit_code_on(
    out: Path, tmp_path: Path, patch: str, when: str
) -> None:
    """helper-345: npuprof's own failure in its wait for the job (or in the job's hand-over just before)
    left the job running orphaned, its exit code lost, npuprof's traceback the run's end; one as the
    forwarders were put down after the job's end lost its exit code too. The job is waited for now, its
    exit code passed on, the record ended with the error. helper-347: the put-down's, after the job's end,
    was said "internal error while the job ran" and "the job ran to its end", of a job already ended."""
    marker = tmp_path / "ran"
    launcher = (
        "import sys\n"
        f"{patch}"
        "from npuprof.cli.main import main\n"
        "sys.argv = ['npuprof', *sys.argv[1:]]\n"
        "main()\n"
    )
    job = f"import sys, time; time.sleep(1); open({str(marker)!r}, 'w'); sys.exit(3)"
    result = subprocess.run(
        [sys.executable, "-c", launcher, "run", "-o", str(out), "--", sys.executable, "-c", job],
        env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 3 and marker.exists(), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    said = [line for line in result.stderr.splitlines() if "internal error" in line]
    assert len(said) == 1 and f"internal error {when} (RuntimeError: boom in the wait)" in said[0], said
    assert ("ran to its end" in said[0]) == (when == "while the job ran"), said
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["end"] is not None and record["exit_code"] == 3, record
    assert record["error"] == f"internal error {when} (RuntimeError: boom in the wait)", record


def test_a_ctrl_cs_copy_while_the_record_is_ended_before_the_job_starts_keeps_the_records_end(
    out: Path, tmp_path: Path
) -> None:
    """helper-203: under `timeout`, one Ctrl-C reaches npuprof twice; the copy that landed while npuprof
    wrote the run record's end (stopped before the job started) raised KeyboardInterrupt inside that write:
    "npuprof: aborted", and a record saying nothing of the run's end (exit code null)."""
    copy_at_the_end = (
        "from npuprof.results import run_record\n"
        "write = run_record.RunRecord.write\n"
        "def copy_then_write(self, *args, **kwargs):\n"
        "    if self.content.get('end') is not None:  # the end's write: timeout's copy lands now\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return write(self, *args, **kwargs)\n"
        "run_record.RunRecord.write = copy_then_write\n"
    )
    marker = tmp_path / "ran"
    result = _stopped_before_the_job(out, marker, "SIGINT", copy_at_the_end)
    assert result.returncode == -signal.SIGINT, result.stderr
    assert "aborted" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not marker.exists()
    record = json.loads((out / "npuprof_run.json").read_text())
    assert (record["exit_code"], record["error"]) == (130, "stopped by SIGINT before the job started")


def test_a_sigint_flood_while_the_job_is_killed_does_not_enter_the_kill_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helper-96: SIGINTs arriving while the handler listed and killed the run's processes ran the handler
    inside itself, again and again (a flood: as deep as it lasts). One kill runs at a time; the SIGINTs that
    land meanwhile are counted as received, and the job is still killed."""
    from npuprof import job_processes, launch

    ignore_sigint = functools.partial(signal.signal, signal.SIGINT, signal.SIG_IGN)  # kept across exec
    job = subprocess.Popen(["sleep", "30"], start_new_session=True, preexec_fn=ignore_sigint)
    listings: list[int] = []

    def flooded(run_id: str | None) -> list[int]:
        listings.append(1)
        for _ in range(50):  # SIGINTs that land while the run's processes are listed
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # type: ignore[operator]
        return []

    monkeypatch.setattr(job_processes, "processes_of_the_run", flooded)
    monkeypatch.setattr(launch, "SAME_CTRL_C_S", -1.0)  # every SIGINT a Ctrl-C of its own
    try:
        with launch._forward_signals([job.pid], "run-x") as forwarding:
            handler = signal.getsignal(signal.SIGINT)
            handler(signal.SIGINT, None)  # type: ignore[operator]
            handler(signal.SIGINT, None)  # type: ignore[operator]
        assert job.wait(timeout=10) == -signal.SIGKILL
        assert len(listings) == 1
        assert len(forwarding.received) == 52
    finally:
        _kill_quietly(job.pid, group=True)


def test_one_ctrl_c_received_twice_reaches_the_job_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI failure of stop 50: under `timeout`, one Ctrl-C reaches the launcher twice (the terminal's and
    the one timeout passes on); both were passed on, and the second raised KeyboardInterrupt again inside
    the job's own `except KeyboardInterrupt:` handler. Counted as one Ctrl-C, it is passed on once."""
    from npuprof import launch

    # however slow this machine: the same Ctrl-C (a fixed SAME_CTRL_C_S / 2 between the two calls was over
    # SAME_CTRL_C_S for a test process off the CPU meanwhile: the copy then killed the job)
    monkeypatch.setattr(launch, "SAME_CTRL_C_S", 60.0)
    counter = (
        "import signal, sys, time\n"
        "n = 0\n"
        "def count(*_):\n"
        "    global n\n"
        "    n += 1\n"
        "    print('got', n, flush=True)\n"
        "def report(*_):\n"
        "    print(n, flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGINT, count)\n"
        "signal.signal(signal.SIGUSR1, report)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    job = subprocess.Popen([sys.executable, "-c", counter], stdout=subprocess.PIPE, text=True,
                           start_new_session=True)  # fmt: skip
    try:
        assert job.stdout is not None and job.stdout.readline() == "ready\n"
        with launch._forward_signals([job.pid]) as forwarding:
            handler = signal.getsignal(signal.SIGINT)
            handler(signal.SIGINT, None)  # type: ignore[operator]
            assert job.stdout.readline() == "got 1\n"  # its handler has run: a second copy would count
            handler(signal.SIGINT, None)  # type: ignore[operator]  # the same Ctrl-C, passed on by a wrapper
        os.kill(job.pid, signal.SIGUSR1)  # after the SIGINTs sent: Python runs SIGINT's handler first
        assert job.wait(timeout=10) == 0
        assert job.stdout.read() == "1\n"
        assert forwarding.received == [signal.SIGINT]  # the copy was not passed on: not among those received
    finally:
        _kill_quietly(job.pid, group=True)


def test_one_sigterm_received_twice_reaches_the_job_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-378: `timeout 8 npuprof run -- python train.py` sends SIGTERM to the launcher and again to its
    own process group, the launcher in it: both were passed on, and the job's handler (sys.exit on SIGTERM)
    ran again inside its `finally`, whose checkpoint was lost (2 runs of 3; none without npuprof, where the
    kernel merges the two). Passed on once; a real-time signal, queued by the kernel, each time."""
    from npuprof import launch

    monkeypatch.setattr(launch, "SAME_SIGNAL_S", 60.0)  # the same signal, however slow this machine
    monkeypatch.setattr(launch, "_a_group_copy_can_come", lambda: True)  # under `timeout`, its group's
    counter = (
        "import signal, sys, time\n"
        "n = {}\n"
        "def count(signum, _):\n"
        "    n[signum] = n.get(signum, 0) + 1\n"
        "    print('got', signum, n[signum], flush=True)\n"
        "def report(*_):\n"
        "    print(n[signal.SIGTERM], n[signal.SIGRTMIN], flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, count)\n"
        "signal.signal(signal.SIGRTMIN, count)\n"
        "signal.signal(signal.SIGUSR1, report)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    job = subprocess.Popen([sys.executable, "-c", counter], stdout=subprocess.PIPE, text=True,
                           start_new_session=True)  # fmt: skip
    term, rt = int(signal.SIGTERM), int(signal.SIGRTMIN)
    try:
        assert job.stdout is not None and job.stdout.readline() == "ready\n"
        with launch._forward_signals([job.pid]) as forwarding:
            handler = signal.getsignal(signal.SIGTERM)
            handler(signal.SIGTERM, None)  # type: ignore[operator]
            assert job.stdout.readline() == f"got {term} 1\n"  # its handler has run: a copy would count
            handler(signal.SIGTERM, None)  # type: ignore[operator]  # timeout's second copy
            for n in (1, 2):
                handler(signal.SIGRTMIN, None)  # type: ignore[operator]
                assert job.stdout.readline() == f"got {rt} {n}\n"
        os.kill(job.pid, signal.SIGUSR1)
        assert job.wait(timeout=10) == 0
        assert job.stdout.read() == "1 2\n"
        assert forwarding.received == [signal.SIGTERM, signal.SIGRTMIN, signal.SIGRTMIN]
    finally:
        _kill_quietly(job.pid, group=True)


class _Clock:
    """launch's `time`, its monotonic() set by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize("leads_its_group", [False, True])
def test_a_signal_sent_again_on_purpose_reaches_the_job_each_time(
    monkeypatch: pytest.MonkeyPatch, leads_its_group: bool
) -> None:
    """helper-381: a cluster manager's second SIGTERM 0.1 s after its first (a job's "stop now"), a job that
    counts SIGUSR1s: within 0.2 s of the first, the second was taken for `timeout`'s copy and dropped
    (`kill -TERM; sleep 0.1; kill -TERM` of a job counting them: 2 without npuprof, 1 with it). A copy comes
    as the first is handled (0.2 ms after its end under timeout); each signal sent later is passed on, and
    none is taken for a copy where no group's copy can come (npuprof leading its group)."""
    from npuprof import launch

    clock = _Clock()
    monkeypatch.setattr(launch, "time", clock)
    monkeypatch.setattr(launch, "_a_group_copy_can_come", lambda: not leads_its_group)
    counter = (
        "import signal, time\n"
        "n = [0]\n"
        "def count(signum, _):\n"
        "    n[0] += 1\n"
        "    print('got', n[0], flush=True)\n"
        "signal.signal(signal.SIGUSR1, count)\n"
        "print('ready', flush=True)\n"
        "end = time.monotonic() + 60\n"  # a lost signal fails the test, never hangs it
        "while time.monotonic() < end:\n"
        "    time.sleep(0.1)\n"
    )
    job = subprocess.Popen([sys.executable, "-c", counter], stdout=subprocess.PIPE, text=True,
                           start_new_session=True)  # fmt: skip
    try:
        assert job.stdout is not None and job.stdout.readline() == "ready\n"
        with launch._forward_signals([job.pid]) as forwarding:
            handler = signal.getsignal(signal.SIGUSR1)
            handler(signal.SIGUSR1, None)  # type: ignore[operator]
            assert job.stdout.readline() == "got 1\n"
            clock.now += 0.1  # the sender's second, 0.1 s after the first
            handler(signal.SIGUSR1, None)  # type: ignore[operator]
            assert job.stdout.readline() == "got 2\n"
            clock.now += 0.0002  # timeout's copy of that one, as its handler ends
            handler(signal.SIGUSR1, None)  # type: ignore[operator]
            if leads_its_group:  # no copy comes: one sent to npuprof again
                assert job.stdout.readline() == "got 3\n"
            clock.now += 1.0
            handler(signal.SIGUSR1, None)  # type: ignore[operator]
            assert job.stdout.readline() == ("got 4\n" if leads_its_group else "got 3\n")
        assert forwarding.received == [signal.SIGUSR1] * (4 if leads_its_group else 3)
    finally:
        _kill_quietly(job.pid, group=True)


def test_a_second_ctrl_c_after_the_job_was_reaped_kills_nothing_and_says_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-203's leftover: a second Ctrl-C that came once the job was reaped (before the launcher took
    its signals over) said "killed the job's processes" though none was left; it is the launcher's own,
    as any signal that finds the job gone (it stops the post-processing wait)."""
    from npuprof import launch

    job = subprocess.Popen(["true"], start_new_session=True)
    job.wait(timeout=10)
    monkeypatch.setattr(launch, "SAME_CTRL_C_S", -1.0)  # every SIGINT a Ctrl-C of its own
    unreached: list[int] = []
    with launch._forward_signals([job.pid], "run-gone", unreached) as forwarding:
        handler = signal.getsignal(signal.SIGINT)
        handler(signal.SIGINT, None)  # type: ignore[operator]
        handler(signal.SIGINT, None)  # type: ignore[operator]
    assert "killed" not in capsys.readouterr().err
    assert forwarding.received == unreached == [signal.SIGINT, signal.SIGINT]


@pytest.mark.parametrize("limit", [40, 66])
def test_a_low_open_file_limit_still_gets_the_capture_parsed_and_never_hangs(out: Path, limit: int) -> None:
    """helper-98: the post-processor's descriptors were copied above 63 on their way into it: under `ulimit
    -n 64` or less every copy failed (captures never parsed), at 66-67 some did and leaked, a copy of the
    pending lock among them: `npuprof run` waited for ever for a post-processor that never started. The
    bare job runs at either limit."""
    import resource

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    result = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), *sched(2, 1, 2), "--", sys.executable, str(SCRIPTS / "trainer.py"),
         "--steps", "8"],
        env=clean_env(), capture_output=True, text=True, timeout=120, preexec_fn=low_limit,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(out)
    assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file(), result.stderr


_HOG = (
    "held = []\n"
    "try:\n"
    "    while True:\n"
    "        held.append(os.open(os.devnull, os.O_RDONLY))\n"
    "except OSError:\n"
    "    pass\n"
)  # the job takes every descriptor it may open: its script lets go of some after, as it needs
_TRAINS = (
    "import os, signal, torch\n"
    "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "def step():\n"
    "    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()\n"
)


def _run_holding_descriptors(
    tmp_path: Path, script_text: str, flags: list[str]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``npuprof run`` of the script under `ulimit -n 256`; the result and the output directory."""
    import resource

    script = tmp_path / "hog.py"
    script.write_text(script_text)

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    out = tmp_path / "out"
    result = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), *flags, "--", sys.executable, str(script)],
        env=clean_env(), capture_output=True, text=True, timeout=120, preexec_fn=low_limit,
    )  # fmt: skip
    return result, out


def test_a_job_that_holds_nearly_all_its_descriptors_trains_on_and_is_told_why_nothing_was_parsed(
    tmp_path: Path,
) -> None:
    """helper-98/100: a job holding all but two of its descriptors left npuprof none for a post-processor:
    the arm step raised, the warnings named a "start hook", and the last line blamed a post-processor
    "stopped, killed, or still at work". The capture is written in the step, the job ends as bare, and
    the summary says why it is unparsed; `npuprof analyse` parses it afterwards."""
    script = (
        "import os, torch\n" + _HOG + "for fd in held[-2:]:\n"
        "    os.close(fd)\n"
        "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(8):\n"
        "    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        "print('done')\n" + FREEZE_AT_EXIT
    )  # fmt: skip
    result, out = _run_holding_descriptors(tmp_path, script, sched(1, 0, 2))
    assert result.returncode == 0 and result.stdout.endswith("done\n"), result.stderr
    (d,) = rank_dirs(out)
    assert json.loads((d / "npuprof_capture.json").read_text())["status"] == "complete"
    text = " ".join(result.stderr.split())
    why = "no post-processor could be started (Too many open files)"
    assert f"1 complete capture(s) not parsed when npuprof ended ({why}" in text, text
    assert text.count("no post-processor could be started") == 2, text  # once from the agent, once at the end
    assert "hook failed" not in text
    assert "too few file descriptors left to the job for npuprof's SIGTERM handler" in text, text
    assert not (out / ".npuprof_pending").exists()  # no lock of a post-processor that never started
    analysed = subprocess.run(
        [*NPUPROF, "analyse", str(out), "--format", "json"], env=clean_env(), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert analysed.returncode == 0, analysed.stderr
    assert [s["step"] for s in json.loads(analysed.stdout)["ranks"][0]["steps"]] == [1, 2]


def test_a_job_that_leaves_no_descriptor_at_all_for_a_while_is_told_why_and_recorded_after(
    tmp_path: Path,
) -> None:
    """helper-107: a job holding every descriptor it may open: npuprof's lazy import failed (EMFILE), the
    log could take no line, and the summary said "the job ended before the schedule's first capture" of a
    job that ran 9 steps. helper-108: that failure stopped profiling for good, though the job freed its
    descriptors later. The agent holds the log open from its start for such a case, and a window that cannot
    load npuprof's modules is skipped as one that cannot make its files: the next one records."""
    script = (
        _TRAINS
        + "step()\n"
        + _HOG
        + (
            "for i in range(1, 12):\n"
            "    if i == 5:\n"
            "        for fd in held:\n"
            "            os.close(fd)\n"
            "    step()\n"
            "print('done')\n" + FREEZE_AT_EXIT
        )
    )
    flags = ["--no-analyse", *sched(2, 0, 2), "--wait", "1", "--repeat", "3"]  # (its captures are not parsed)
    result, out = _run_holding_descriptors(tmp_path, script, flags)
    assert result.returncode == 0 and result.stdout.endswith("done\n"), result.stderr
    text = " ".join(result.stderr.split())
    assert "1 capture window(s) could not record (the last: [Errno 24] Too many open files" in text, text
    records = sorted(capture_record(d)["steps"] for d in rank_dirs(out))
    assert records == [[6, 7], [9, 10]], records  # the window of steps 3-4 could not begin
    logged = (out / "npuprof.log").read_text()
    assert "capture at step 3 skipped: [Errno 24] Too many open files" in logged, logged


def test_npuprofs_kept_log_descriptor_never_writes_into_a_file_of_the_script(tmp_path: Path) -> None:
    """helper-108: the log removed while the job ran, the script closed every descriptor and opened a file
    of its own, which took the kept descriptor's number and the removed log's freed inode number: npuprof's
    lines, written there when the log could not be opened (the job holding every descriptor), landed in the
    script's data. The kept descriptor is written only while it is the file at the log's path."""
    mine = tmp_path / "mydata.txt"
    log = tmp_path / "out" / "npuprof.log"
    script = (
        _TRAINS
        + (
            "for _ in range(5):\n"
            "    step()\n"
            f"os.remove({str(log)!r})\n"
            "os.closerange(3, 4096)\n"
            f"mine = open({str(mine)!r}, 'w')\n"
            "mine.write('MY DATA 1\\n'); mine.flush()\n"
        )
        + _HOG
        + (
            "for _ in range(12):\n"
            "    step()\n"
            "for fd in held:\n"
            "    os.close(fd)\n"
            "mine.write('MY DATA 2\\n'); mine.close()\n"
        )
    )
    flags = ["--skip-first", "1", "--wait", "2", "--warmup", "1", "--active", "2", "--repeat", "3"]
    result, _ = _run_holding_descriptors(tmp_path, script, flags)
    assert result.returncode == 0, result.stderr
    assert mine.read_text() == "MY DATA 1\nMY DATA 2\n"


def test_the_sigterm_guard_left_out_for_want_of_descriptors_comes_back_at_the_next_cycle(
    tmp_path: Path,
) -> None:
    """helper-107: the guard left out at a capture's start (2 descriptors free) was never tried again while
    the same profiler ran the next cycles (--repeat, --wait 0), after the job had freed 50: a SIGTERM in a
    later capture lost it ("incomplete"). Each cycle's start tries again; the capture is finalised."""
    script = (
        _TRAINS
        + "step()\n"
        + _HOG
        + (
            "for _ in range(2):\n"
            "    os.close(held.pop())\n"
            "for i in range(2, 12):\n"
            "    if i == 5:\n"
            "        for _ in range(50):\n"
            "            os.close(held.pop())\n"
            "    if i == 9:\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "    step()\n"
        )
    )
    flags = ["--no-analyse", *sched(3, 0, 2), "--repeat", "3"]  # (its captures are not parsed)
    result, out = _run_holding_descriptors(tmp_path, script, flags)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert "too few file descriptors left to the job for npuprof's SIGTERM handler" in result.stderr
    records = sorted((json.loads((d / "npuprof_capture.json").read_text()) for d in rank_dirs(out)),
                     key=lambda r: r["steps"][0])  # fmt: skip
    assert [r["steps"] for r in records] == [[3, 4], [5, 6], [7, 8]], records
    assert records[-1]["status"] == "complete" and records[-1]["detail"] == "stopped by SIGTERM", records[-1]


def test_a_post_processor_that_cannot_start_gives_back_every_descriptor_and_its_lock(tmp_path: Path) -> None:
    """CI caught it: a start that ran out of descriptors (EMFILE) after making its lock kept the lock's
    descriptor, held, for the job's life, and a retry kept another; the job's own imports and the trace
    write then failed in turn. With 0 to 6 descriptors to spare, a failed start leaves the job's
    descriptors and the pending dir as they were."""
    code = (
        "import os, resource, sys\n"
        "from pathlib import Path\n"
        "from npuprof.results.postprocess import Postprocessor\n"
        "out = Path(sys.argv[1])\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "for spare in range(7):\n"
        "    before = sorted(os.listdir('/proc/self/fd'))\n"
        "    top = max(int(n) for n in before)\n"
        "    resource.setrlimit(resource.RLIMIT_NOFILE, (top + 1 + spare, hard))\n"
        "    post = Postprocessor(out, 'r1')\n"
        "    try:\n"
        "        post.start()\n"
        "        started = True\n"
        "    except OSError:\n"
        "        started = False\n"
        "    resource.setrlimit(resource.RLIMIT_NOFILE, (top + 64, hard))\n"
        "    after = sorted(os.listdir('/proc/self/fd'))\n"
        "    pending = out / '.npuprof_pending'\n"
        "    locks = os.listdir(pending) if pending.exists() else []\n"
        "    print(spare, started, after == before, len(locks))\n"
        "    if started:\n"
        "        break\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    failed = [row for row in rows if row[1] == "False"]
    assert len(failed) >= 3, rows  # the lock, the two pipes and the pidfd need more than 2 spare
    assert all(row[2] == "True" and row[3] == "0" for row in failed), rows


def test_descriptors_placed_for_a_spawn_that_do_not_fit_are_all_closed() -> None:
    """The copies made before one fails (EMFILE) are closed, never left to hold a lock or a pipe open."""
    code = (
        "import os, resource\n"
        "from npuprof.results.spawner import placed\n"
        "fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]\n"
        "soft = max(fds) + 3  # room for two copies above them, not four\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "before = sorted(os.listdir('/proc/self/fd'))\n"
        "try:\n"
        "    placed(fds, [3, 4, 5, 6])\n"
        "except OSError as exc:\n"
        "    after = sorted(os.listdir('/proc/self/fd'))\n"
        "    print('refused', exc.errno == __import__('errno').EMFILE, after == before)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "high, moves = placed(fds, [3, 4, 5, 6])\n"
        "print('placed', all(h > max(fds) for h in high), [m[2] for m in moves])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refused True True", "placed True [3, 4, 5, 6]"], done.stdout


def test_a_removed_working_directory_still_runs_the_job(tmp_path: Path) -> None:
    """helper-98: in a working directory removed meanwhile, `-o ABSOLUTE` was refused ("cannot create
    --output"), and the bootstrap failed in the job (its sys.path check looked up the directory), leaving
    "Error in sitecustomize" in the job's stderr. `python -c` runs there; so does npuprof now. A relative -o
    cannot be placed: one line, exit 2."""
    out = tmp_path / "out"
    gone = tmp_path / "gone"
    npuprof_cmd = shlex.join([*NPUPROF, "run", "-o", str(out), "--", sys.executable, "-c", "print(1)"])
    relative = shlex.join([*NPUPROF, "run", "-o", "rel", "--", sys.executable, "-c", "print(1)"])
    for command, code in ((npuprof_cmd, 0), (relative, 2)):
        shell = f"mkdir {shlex.quote(str(gone))} && cd {shlex.quote(str(gone))} && rmdir ../gone && {command}"
        env = clean_env(PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr and "sitecustomize" not in done.stderr, done.stderr
        if code == 0:
            assert done.stdout == "1\n" and "bootstrap failed" not in done.stderr, done.stderr
        else:
            assert len(done.stderr.strip().splitlines()) == 1 and "--output 'rel'" in done.stderr, done.stderr


# The job's last act: a process of its own session sends SIGHUP to `npuprof run` without pause from the job's
# end until the launcher has gone (the logout a nohup'd run outlives).
_HANGS_UP_AFTER = (
    "import os, subprocess\n"
    "loop = f'while kill -HUP {os.getppid()} 2>/dev/null; do :; done'\n"
    "quiet = subprocess.DEVNULL\n"
    "subprocess.Popen(['sh', '-c', loop], start_new_session=True, stdout=quiet, stderr=quiet)\n"
)


def test_a_signal_ignored_when_npuprof_started_stays_ignored_after_the_job(out: Path, tmp_path: Path) -> None:
    """helper-136: under nohup (SIGHUP ignored) the launcher handled SIGHUP again once the job had ended
    (while it waited for post-processing and wrote its record): a hang-up then killed it (exit 129 for a job
    that exited 0). The same held for every forwarded signal ignored at its start (SIGRTMIN+N, SIGIO...)."""
    script = tmp_path / "job.py"
    script.write_text(_HANGS_UP_AFTER)
    nohup = functools.partial(signal.signal, signal.SIGHUP, signal.SIG_IGN)  # kept across exec
    result = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), "--", sys.executable, str(script)],
        env=clean_env(), capture_output=True, text=True, timeout=60, preexec_fn=nohup,
    )  # fmt: skip
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 0


def test_the_job_gets_sigpipe_and_sigxfsz_at_their_defaults_as_without_npuprof(out: Path) -> None:
    """Python (npuprof's launcher) ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across
    exec: the job's `yes | head -1` said "yes: standard output: Broken pipe", a write past `ulimit -f` got
    EFBIG instead of the signal. Neither is in the job's SigIgn mask (/proc), as without npuprof."""
    command = ["grep", "^SigIgn:", "/proc/self/status"]
    both = 1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)
    bare = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert not int(bare.stdout.split()[1], 16) & both, bare.stdout
    result = npuprof("run", "-o", str(out), "--", *command)
    assert result.returncode == 0, result.stderr
    assert not int(result.stdout.split()[1], 16) & both, result.stdout


def test_the_signals_held_before_the_job_leave_one_ignored_at_the_start_ignored() -> None:
    """helper-136: from the run record's writing to the job's start, npuprof's handler took SIGTERM, SIGHUP
    and SIGINT, ignored ones too: under nohup a hang-up in that moment killed npuprof, whose job would have
    ignored it. One ignored when npuprof started stays ignored; the others get the handler and back."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGHUP, signal.SIGTERM)}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        held = runner._SignalsBeforeTheJob(record=None)  # (the record is only written when a signal comes)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == held._stop
        held.restore()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == before[signal.SIGTERM]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_signal_that_comes_after_the_jobs_end_is_the_launchers_and_stops_the_wait_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-170: a SIGUSR1 that reached `npuprof run` between the job's reap and the post-processing wait
    (a batch system's warning, just late) was only noted: the wait went on (4 of 4 runs still waiting 30 s
    later); a SIGTERM there was counted as passed on to the job, which had ended: "stopped waiting after
    10 s (the job was stopped by SIGTERM)", then the job's exit code instead of the launcher's death by it.
    In-process: the signal is sent to this process right after the job is reaped."""
    import uuid

    from npuprof import launch

    reaped = launch._wait

    def reaped_then_signalled(pid: int, terminal: object) -> int:
        code = reaped(pid, terminal)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGUSR1)  # its handler (run_child's forwarder) runs before the return
        return code

    monkeypatch.setattr(launch, "_wait", reaped_then_signalled)
    try:
        end = launch.run_child(["true"], dict(os.environ))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, launch.FORWARDED_SIGNALS)  # run_child leaves them held
    assert (end.returncode, end.forwarded, end.after_the_end) == (0, [], [signal.SIGUSR1])

    # the launcher's wait for a post-processor of 60 s more: ended at once by that signal
    out, run_id = tmp_path / "out", uuid.uuid4().hex[:12]
    out.mkdir()
    code = "import time; time.sleep(60)"
    args = ["npuprof.results.postprocess", "--parent", str(2**22 + 1), "--run", run_id]
    post = subprocess.Popen([sys.executable, "-c", code, *args])
    try:
        deadline = time.monotonic() + 30  # until it has exec'd (its command line is the fork's before)
        while b"--run" not in Path(f"/proc/{post.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        held = runner._HeldSignals(end.after_the_end)
        try:
            began = time.monotonic()
            runner._wait_for_post_processing(out, out / "npuprof.log", run_id, held)
            took = time.monotonic() - began
        finally:
            held.restore()
        assert took < 20 and post.poll() is None, took
        assert "stopped waiting: post-processing goes on in the background" in capsys.readouterr().err
        assert held.stopper == signal.SIGUSR1 and held.death() is None  # SIGUSR1 ends the wait only
        late_sigterm = runner._HeldSignals([signal.SIGTERM])
        late_sigterm.restore()
        assert late_sigterm.death() == signal.SIGTERM  # the launcher dies of it, once its record is written
    finally:
        post.kill()
        post.wait()


def test_one_ctrl_c_received_twice_after_the_jobs_end_stops_the_wait_and_kills_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helper-203: under `timeout`, one Ctrl-C reaches npuprof twice (the terminal's, then timeout's copy).
    Dropped as a copy while the job ran, it was counted again once the job had ended: the copy that came
    after the job's end, or during the post-processing wait, made npuprof die of SIGINT where one Ctrl-C
    only stops the wait (the job's exit code stands, and a shell loop around it goes on)."""
    from npuprof import launch

    monkeypatch.setattr(launch, "SAME_CTRL_C_S", 60.0)  # however slow this machine: the same Ctrl-C
    reaped = launch._wait

    def reaped_then_interrupted(pid: int, terminal: object) -> int:
        code = reaped(pid, terminal)  # type: ignore[arg-type]
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # type: ignore[operator]  # the Ctrl-C
        return code

    monkeypatch.setattr(launch, "_wait", reaped_then_interrupted)
    try:
        end = launch.run_child(["true"], dict(os.environ))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, launch.FORWARDED_SIGNALS)  # run_child leaves them held
    assert (end.returncode, end.after_the_end, len(end.interrupts)) == (0, [signal.SIGINT], 1)
    held = runner._HeldSignals(end.after_the_end, end.interrupts)
    try:
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # type: ignore[operator]  # timeout's copy
        with pytest.raises(runner._StopWaiting):
            held.begin_waiting()
    finally:
        held.restore()
    assert held.death() is None

    # during the wait: the copy neither stops it again nor counts
    held = _two_sigints_while_waiting()
    assert held.received == [signal.SIGINT] and held.death() is None

    # a Ctrl-C of its own after the one that stopped the wait: npuprof dies of it, as before
    monkeypatch.setattr(launch, "SAME_CTRL_C_S", -1.0)
    held = _two_sigints_while_waiting()
    assert held.death() == signal.SIGINT


def _two_sigints_while_waiting() -> Any:
    """The launcher's post-processing wait (runner._HeldSignals) given two SIGINTs, the first stopping it."""
    from npuprof import runner

    held = runner._HeldSignals()
    try:
        held.begin_waiting()
        handler = signal.getsignal(signal.SIGINT)
        with pytest.raises(runner._StopWaiting):
            handler(signal.SIGINT, None)  # type: ignore[operator]
        handler(signal.SIGINT, None)  # type: ignore[operator]
    finally:
        held.restore()
    return held


def test_a_ctrl_cs_copy_after_the_jobs_end_is_not_recorded_as_passed_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helper-203: the copy of a Ctrl-C (`timeout`'s) was among the signals received: npuprof_run.json's
    signals_forwarded said SIGINT twice where the job got it once, and a copy that came after a SIGINT that
    found the job gone (reaped) put that one among those passed on to the job (the unreached ones are taken
    to be the last received)."""
    from npuprof import launch

    monkeypatch.setattr(launch, "SAME_CTRL_C_S", 60.0)  # however slow this machine: the same Ctrl-C
    reaped = launch._wait

    def reaped_then_interrupted(pid: int, terminal: object) -> int:
        code = reaped(pid, terminal)  # type: ignore[arg-type]
        handler = signal.getsignal(signal.SIGINT)
        handler(signal.SIGINT, None)  # type: ignore[operator]  # the Ctrl-C: the job is gone
        handler(signal.SIGINT, None)  # type: ignore[operator]  # timeout's copy of it
        return code

    monkeypatch.setattr(launch, "_wait", reaped_then_interrupted)
    try:
        end = launch.run_child(["true"], dict(os.environ))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, launch.FORWARDED_SIGNALS)  # run_child leaves them held
    assert (end.returncode, end.forwarded, end.after_the_end) == (0, [], [signal.SIGINT])


def test_a_sigcont_to_the_launcher_continues_a_stopped_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-203: `timeout -s INT 5 npuprof run` of a stopped job (SIGSTOP) never ended: timeout follows
    its signal with SIGCONT to npuprof and its own process group, not to the job's, and npuprof passed on
    the SIGINT alone (without npuprof, the job ends: SIGCONT reaches it in timeout's group)."""
    import threading

    from npuprof import launch

    reaped = launch._wait

    def stopped_then_timed_out(pid: int, terminal: object) -> int:
        os.kill(pid, signal.SIGSTOP)
        _wait_for(lambda: _state(pid) == "T", "the job to stop")
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # type: ignore[operator]  # timeout's signal
        os.kill(os.getpid(), signal.SIGCONT)  # then timeout's SIGCONT, to npuprof
        never_continued = threading.Timer(30, _kill_quietly, (pid,))
        never_continued.start()
        try:
            return reaped(pid, terminal)  # type: ignore[arg-type]
        finally:
            never_continued.cancel()

    monkeypatch.setattr(launch, "_wait", stopped_then_timed_out)
    try:
        end = launch.run_child(["sleep", "60"], dict(os.environ))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, launch.FORWARDED_SIGNALS)  # run_child leaves them held
    assert (end.returncode, end.forwarded) == (-signal.SIGINT, [signal.SIGINT])


@pytest.mark.parametrize(
    ("sent", "ends_by"),
    [
        ((signal.SIGTERM,), -signal.SIGTERM),
        ((signal.SIGINT, signal.SIGINT), -signal.SIGKILL),
        ((signal.SIGUSR1, signal.SIGCONT), -signal.SIGUSR1),  # `timeout -s USR1`: its SIGCONT follows
    ],
    ids=["SIGTERM", "two Ctrl-Cs", "SIGUSR1 then SIGCONT"],
)
def test_a_signal_that_comes_while_the_job_is_started_is_passed_on_as_any_other(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sent: tuple[int, ...],
    ends_by: int,
) -> None:
    """helper-334 (the SIGSTKFLT test's CI failure): a signal that came between the job's spawn and the
    launcher's noting its pid was passed on bare, where one that came later was followed by SIGCONT for a
    job that was stopped: a job that stopped itself at once (SIGSTOP, waiting for a debugger) never took a
    SIGTERM, and `npuprof run` never ended; two Ctrl-Cs there reached it as one SIGINT, never the
    second-Ctrl-C kill; a SIGCONT there (`timeout`'s, after its signal) was dropped, where a later one
    continues a stopped job. In-process: the signals reach this process as the spawn returns, the job
    stopped."""
    import threading

    from npuprof import launch

    monkeypatch.setattr(launch, "SAME_CTRL_C_S", -1.0)  # every SIGINT a Ctrl-C of its own
    job_code = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
        "time.sleep(60)\n"
    )
    spawn = launch._spawn
    never_continued: list[threading.Timer] = []
    fired: list[bool] = []

    def started_stopped_then_signalled(*args: Any) -> int:
        pid = spawn(*args)
        never_continued.append(threading.Timer(30, lambda: (fired.append(True), _kill_quietly(pid))))
        never_continued[0].start()
        _wait_for(lambda: _state(pid) == "T", "the job to stop itself")
        for signum in sent:
            os.kill(os.getpid(), signum)  # its handler (run_child's forwarder) runs before the return
        return pid

    monkeypatch.setattr(launch, "_spawn", started_stopped_then_signalled)
    try:
        end = launch.run_child([sys.executable, "-c", job_code], dict(os.environ))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, launch.FORWARDED_SIGNALS)  # run_child leaves them held
        for timer in never_continued:
            timer.cancel()
    assert not fired, "the job stayed stopped with the signal pending (killed after 30 s)"
    assert (end.returncode, end.forwarded) == (ends_by, [s for s in sent if s != signal.SIGCONT])
    assert ("second SIGINT (Ctrl-C): killed" in capsys.readouterr().err) == (sent.count(signal.SIGINT) == 2)


def test_the_time_the_job_was_stopped_is_said_apart_from_the_time_it_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """npuprof_run.json's wall_seconds counts the time the job was stopped (Ctrl-Z and `fg` an hour later,
    kill -STOP, a scheduler's suspend) and nothing said so; the launcher's wait now sees the job's stops
    and continuations, and the record gives their time as stopped_seconds. In-process: a job stopped for
    about a second, then running 1.5 s more; counted until its end, the stop would take that too. Each
    step waits until the wait has reported the one before (a wait off the CPU for the 1.5 s saw no
    continuation before the job's death, and counted the stop to its end)."""
    import threading

    from npuprof import launch

    reported = {"stopped": threading.Event(), "continued": threading.Event()}

    class Reported(launch._JobStops):
        def stopped(self) -> None:
            super().stopped()
            reported["stopped"].set()

        def continued(self) -> None:
            super().continued()
            reported["continued"].set()

    monkeypatch.setattr(launch, "_JobStops", Reported)
    at: dict[str, float] = {}
    job: list[int] = []

    def stop_continue_end() -> None:
        _wait_for(lambda: bool(job), "the job to start")
        at["stop"] = time.monotonic()
        os.kill(job[0], signal.SIGSTOP)
        reported["stopped"].wait(30)
        at["stop reported"] = time.monotonic()
        time.sleep(1.0)
        at["continue"] = time.monotonic()
        os.kill(job[0], signal.SIGCONT)
        reported["continued"].wait(30)
        at["continue reported"] = time.monotonic()
        time.sleep(1.5)
        os.kill(job[0], signal.SIGTERM)

    driver = threading.Thread(target=stop_continue_end, daemon=True)
    driver.start()
    try:
        end = launch.run_child(["sleep", "60"], dict(os.environ), on_start=job.append)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, launch.FORWARDED_SIGNALS)  # run_child leaves them held
        _kill_quietly(job[0] if job else None)
    driver.join(5)
    assert end.returncode == -signal.SIGTERM
    # from the stop the wait reported to the continuation it reported: at least from the report of the stop
    # to the SIGCONT (the second the test held it stopped), at most from the SIGSTOP to the report of the
    # continuation, nothing of the 1.5 s it ran after
    least, most = at["continue"] - at["stop reported"], at["continue reported"] - at["stop"]
    assert 1.0 <= least <= end.stopped_s <= most, (end.stopped_s, at)


@pytest.mark.parametrize(("given", "shown"), [("-1", []), ("1,-1", [1]), ("0,1048576", [0])])
def test_a_local_ranks_filter_naming_no_rank_leaves_profiling_on(given: str, shown: list[int]) -> None:
    """`torchrun --local-ranks-filter -1` (torchrun takes it, and shows no rank's output) went into the
    job's payload as is, which every process then refused as damaged: profiling was off in all of them."""
    from npuprof.config import ProfileConfig
    from npuprof.payload import read_payload

    command = ["torchrun", "--nproc-per-node", "2", "--local-ranks-filter", given, "t.py"]
    ranks = shown_local_ranks(command, {})
    assert ranks == shown
    _config, run = read_payload(ProfileConfig().to_env({"run_id": "r", "shown_local_ranks": ranks}))
    assert run.shown_local_ranks == shown


# A job that waits (up to 30 s) for ``SIGNAL`` once its handler is in place (the ``ready`` file says so):
# exit 0 when it came, 3 when it did not.
_WAITS_FOR_A_SIGNAL = (
    "import os, signal, sys, time\n"
    "came = []\n"
    "signal.signal(signal.{signame}, lambda *_: came.append(1))\n"
    "open(sys.argv[1], 'w').close()\n"
    "deadline = time.monotonic() + 30\n"
    "while not came and time.monotonic() < deadline:\n"
    "    time.sleep(0.01)\n"
    "sys.exit(0 if came else 3)\n"
)


def _signalled_as_the_job_starts(
    out: Path, tmp_path: Path, signame: str, failing_first: bool
) -> subprocess.CompletedProcess[str]:
    """``npuprof run`` of _WAITS_FOR_A_SIGNAL whose launcher gets ``signame`` while it starts the job: after
    the spawn, before run_child knows the job's pid (the job's handler in place by then); ``failing_first``:
    during a first spawn that fails with E2BIG (the environment over the kernel's limit with the inline
    configuration: started again with it in a file)."""
    ready = tmp_path / "ready"
    launcher = (
        "import errno, os, signal, sys, time\n"
        "from npuprof import launch\n"
        "spawn, spawns = launch._spawn, []\n"
        "def spawned(command, env, reset):\n"
        "    spawns.append(1)\n"
        f"    if {failing_first} and len(spawns) == 1:\n"
        f"        os.kill(os.getpid(), signal.{signame})\n"
        "        raise OSError(errno.E2BIG, os.strerror(errno.E2BIG))\n"
        "    pid = spawn(command, env, reset)\n"
        "    deadline = time.monotonic() + 60\n"
        f"    while not os.path.exists({str(ready)!r}) and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
        f"    if not {failing_first}:\n"
        f"        os.kill(os.getpid(), signal.{signame})\n"
        "    return pid\n"
        "launch._spawn = spawned\n"
        "from npuprof.cli.main import main\n"
        "sys.argv = ['npuprof', *sys.argv[1:]]\n"
        "main()\n"
    )
    job = _WAITS_FOR_A_SIGNAL.replace("{signame}", signame)
    return subprocess.run(
        [sys.executable, "-c", launcher, "run", "-o", str(out), "--", sys.executable, "-c", job, str(ready)],
        env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_signal_during_a_start_over_the_exec_limit_reaches_the_job_started_again(
    out: Path, tmp_path: Path
) -> None:
    """A job whose environment was over the kernel's exec limit with the inline configuration (E2BIG) is
    started again with it in a file; a signal that came during the first, failed start was held for that
    start alone: the job started again ran without it (a SIGUSR1 asking for a checkpoint, a SIGTERM). It
    reaches the job as one that comes during any start does: without npuprof the job would have got it."""
    result = _signalled_as_the_job_starts(out, tmp_path, "SIGUSR1", failing_first=True)
    assert result.returncode == 0, (result.returncode, result.stderr)  # 3: the job never got it
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record["exit_code"] == 0 and record["signals_forwarded"] == [signal.SIGUSR1], record
    assert "configuration is passed to the job in" in (out / "npuprof.log").read_text()


def test_a_window_resize_as_the_job_starts_reaches_it(out: Path, tmp_path: Path) -> None:
    """Every signal npuprof passes on that came while the job was being started is passed on once it runs
    (_Forwarding.job_started), but a SIGWINCH then was dropped: the job kept the terminal's old size."""
    result = _signalled_as_the_job_starts(out, tmp_path, "SIGWINCH", failing_first=False)
    assert result.returncode == 0, (result.returncode, result.stderr)  # 3: the job never got it


def test_a_launcher_that_fails_before_it_passes_signals_on_is_not_left_deaf_to_them(
    out: Path, tmp_path: Path
) -> None:
    """The runner blocks the signals it passes on until run_child's forwarders take them over (mask=);
    run_child failing before that (an OSError as it set the terminal up) left them blocked in a launcher
    that went on to report its error: a SIGTERM that came meanwhile, or during the report, did nothing
    and npuprof exited 1. Unblocked, it ends npuprof."""
    failing_setup = (
        "import errno\n"
        "from npuprof import launch\n"
        "class Terminal(launch._Terminal):\n"
        "    def __init__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)  # blocked by the runner: pending\n"
        "        raise OSError(errno.EIO, os.strerror(errno.EIO))\n"
        "launch._Terminal = Terminal\n"
    )
    marker = tmp_path / "ran"
    result = _stopped_before_the_job(out, marker, "SIGCHLD", failing_setup)  # (SIGCHLD: nothing)
    assert result.returncode == -signal.SIGTERM, (result.returncode, result.stderr)
    assert not marker.exists()
