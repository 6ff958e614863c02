"""Launcher manners: exit codes, signals, injection reach, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    ROOT,
    capture_record,
    clean_env,
    npuprof,
    rank_dirs,
    sched,
    trainer,
)


def test_exit_code_passes_through(out: Path, tmp_path: Path) -> None:
    """The job's exit code is npuprof's and the run record's. No torch: the launcher passes on the code it
    waited for (the job had no capture either: 2 steps, the default schedule skips 5); a torch job with
    npuprof's agent exiting 1 is test_fault_agent's crashes_run."""
    script = tmp_path / "exits.py"
    script.write_text("import sys\nsys.exit(3)\n")
    result = npuprof("run", "-o", str(out), "--no-analyse", "--", sys.executable, str(script))
    assert result.returncode == 3
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 3


# (a job dead of SIGTERM inside its capture: test_fault_signals' test_signal_death_gives_128_plus_n_and_...,
# a child of its sigterm_run's torch job)


def test_a_job_killed_by_a_sigusr2_passed_on_kills_npuprof_by_it(out: Path, tmp_path: Path) -> None:
    """SIGUSR2 to npuprof reaches the job, whose default action is to die of it: npuprof exited 140 where
    the job alone dies of the signal (a Python caller saw 140, not -12)."""
    started = tmp_path / "started"
    script = tmp_path / "job.py"
    script.write_text(
        f"import pathlib, time\npathlib.Path({str(started)!r}).write_text('1')\ntime.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuprof", "run", "-o", str(out), "--", sys.executable, str(script)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "job did not start"
        time.sleep(0.05)
    proc.send_signal(signal.SIGUSR2)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGUSR2, stderr
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 128 + signal.SIGUSR2


def test_sigterm_to_npuprof_reaches_the_whole_job(out: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    script = tmp_path / "job.py"
    script.write_text(
        "import subprocess, sys, time, pathlib\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(started)!r}).write_text(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuprof", "run", "-o", str(out), "--", sys.executable, str(script)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not started.exists() or not started.read_text():
        assert time.monotonic() < deadline, "job did not start"
        time.sleep(0.05)
    grandchild = int(started.read_text())
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM, stderr  # npuprof dies of the signal it got, as the job did
    assert _gone(grandchild)
    assert json.loads((out / "npuprof_run.json").read_text())["signals_forwarded"] == [signal.SIGTERM]


def _gone(pid: int, wait: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (exited, or a zombie nobody has reaped yet)."""
    import psutil

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_script_that_never_imports_torch_runs_untouched(out: Path, tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text("import sys\nprint('hello', sys.argv[1:])\nprint('torch' in sys.modules)\n")
    result = npuprof("run", "-o", str(out), "--", sys.executable, str(script), "a", "b")
    assert result.returncode == 0
    assert result.stdout == "hello ['a', 'b']\nFalse\n"
    assert "agent" not in (out / "npuprof.log").read_text()


def test_user_sitecustomize_still_runs(out: Path, tmp_path: Path) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    script = tmp_path / "check.py"
    script.write_text(
        "import os, sys\nprint(os.environ.get('USER_SITE_RAN'))\n"
        "print(sys.modules['sitecustomize'].__file__)\n"
    )
    result = npuprof(
        "run", "-o", str(out), "--", sys.executable, str(script), env=clean_env(PYTHONPATH=str(site))
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "yes"
    assert lines[1] == str(site / "sitecustomize.py")


# with profiling: tests/test_run_extras.py, ..._the_users_sitecustomize_runs_where_it_profiles


def test_python_dash_S_and_non_python_commands_are_flagged(out: Path) -> None:
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-S", "-c", "pass")
    assert result.returncode == 0
    assert result.stderr.count("-S") >= 1 and "cannot reach" in result.stderr
    result = npuprof("run", "-o", str(out), "--", "true")
    assert result.returncode == 0
    assert "does not look like a Python program" in result.stderr
    # a shell or wrapper starts what it is given: its Python is reached (helper-121: warned each run)
    for wrapper in (["bash", "-c", "exit 3"], ["env", "true"]):
        result = npuprof("run", "-o", str(out), "--", *wrapper)
        assert result.returncode == (3 if wrapper[0] == "bash" else 0)
        assert "does not look like a Python program" not in result.stderr, result.stderr


def test_symlinked_output_is_refused_only_where_it_can_be_abused(tmp_path: Path) -> None:
    def refused(target: Path) -> bool:
        result = npuprof("run", "-o", str(target), "--", sys.executable, "-c", "pass")
        lines = result.stderr.strip().splitlines()
        if result.returncode != 2:
            return False
        assert len(lines) == 1 and "symbolic link" in lines[0] and "--output" in lines[0], lines
        return True

    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert refused(link)  # the last component: we would write wherever it points
    assert list(real.iterdir()) == []
    assert not refused(link / "sub")  # a symlinked parent (home, scratch) is fine, and resolved once
    record = json.loads((real / "sub" / "npuprof_run.json").read_text())
    assert record["config"]["output"] == str(real / "sub")
    if os.geteuid() != 0:
        return  # planting another user's link needs root
    # A link in a sticky world-writable directory (/tmp) is followed only as fs.protected_symlinks does:
    # when we own it, or the directory's owner does.
    for dir_owner, link_owner, safe in ((0, 65534, False), (0, 0, True), (65534, 65534, True)):
        shared = tmp_path / f"shared_{dir_owner}_{link_owner}"
        shared.mkdir()
        os.chmod(shared, 0o1777)
        os.chown(shared, dir_owner, dir_owner)
        planted = shared / "planted"
        planted.symlink_to(real)
        os.lchown(planted, link_owner, link_owner)
        assert refused(planted / f"out_{link_owner}") is not safe, (dir_owner, link_owner)
        assert (real / f"out_{link_owner}").exists() is safe


# above the kernel's largest pid_max (2**22): no process can have it, the writer is gone
_NO_PROCESS_PID = 2**22 + 1


@pytest.mark.parametrize(
    ("sizes", "said"), [((0, 0), "its empty half-written file(s) removed"), ((0, 2048), "2.0 KiB")]
)
def test_half_written_files_removed_are_said_empty_when_they_were(
    tmp_path: Path, sizes: tuple[int, ...], said: str
) -> None:
    """A kill before the first byte left empty temps: "the half-written file(s) removed: 0 B" read as if
    nothing had been removed."""
    from npuprof.results import layout
    from npuprof.results.run_record import _remove_half_written

    temps = [tmp_path / f".w.{n}.json.{_NO_PROCESS_PID}-0123456789ab.tmp" for n in range(len(sizes))]
    for temp, size in zip(temps, sizes, strict=True):
        temp.write_bytes(b" " * size)
    detail = _remove_half_written(tmp_path, layout.STATUS_INCOMPLETE)
    assert detail.startswith("a process died while writing into it; ") and detail.endswith(said)
    assert "0 B" not in detail
    assert not any(temp.exists() for temp in temps)


@pytest.mark.parametrize("how", ["a read-only bind mount", "unlink refused"])
def test_half_written_files_that_could_not_be_removed_claim_no_death(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o made read-only while a capture was parsed: the post-processor could not remove its own temporary
    file, and the summary said "a process died while writing into it; the half-written file(s) removed",
    though nothing died and nothing was removed. It says they could not be removed, and why."""
    import errno

    from npuprof.results import layout
    from npuprof.results.run_record import _remove_half_written

    rank_dir = tmp_path / "rank"
    tables = rank_dir / layout.PARSED_DIR
    tables.mkdir(parents=True)
    temp = tables / f".trace_view.json.{_NO_PROCESS_PID}-0123456789ab.tmp"
    temp.write_bytes(b" " * 2048)
    if how == "unlink refused":
        real_unlink = os.unlink

        def refused(path: object, *args: object, **kwargs: object) -> None:
            if str(path).endswith(".tmp"):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "unlink", refused)
        detail = _remove_half_written(rank_dir, layout.STATUS_INCOMPLETE)
    else:
        bound = subprocess.run(
            ["mount", "--bind", str(rank_dir), str(rank_dir)], capture_output=True, text=True
        )
        if bound.returncode != 0:
            pytest.skip(f"cannot bind-mount here (needs root or CAP_SYS_ADMIN): {bound.stderr.strip()}")
        try:
            made = subprocess.run(
                ["mount", "-o", "remount,ro,bind", str(rank_dir)], capture_output=True, text=True
            )
            assert made.returncode == 0, made.stderr
            detail = _remove_half_written(rank_dir, layout.STATUS_INCOMPLETE)
        finally:
            subprocess.run(["umount", "-l", str(rank_dir)], capture_output=True, check=False)
    assert temp.exists()  # it could not be removed, and was not
    assert "died" not in detail and "file(s) removed" not in detail, detail
    assert detail.endswith("(2.0 KiB) could not be removed: read-only file system"), detail


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--level", "3"], "--level"),
        (["--aic-metrics", "Nope"], "--aic-metrics"),
        (["--activities", "tpu"], "--activities"),
        (["--ranks", "1-x"], "--ranks"),
        (["--active", "0"], "--active"),
        (["--skip-first", "-1"], "--skip-first"),
        (["--export-type", "csv"], "--export-type"),
        (["--step-on", "nocolon"], "--step-on"),
        (["--metadata", "novalue"], "--metadata"),
        (["--gc-detect-threshold", "-5"], "--gc-detect-threshold"),
        (["--memory-timeline", "html"], "--memory-timeline"),
        (["--export-stacks", "self_cpu_time_total"], "--export-stacks"),
        (["--config", "/nonexistent/profiler_config.json"], "--config"),
        (["--worker-name", "a/b"], "--worker-name"),
    ],
)
def test_bad_flag_values_exit_2_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    result = npuprof("run", "-o", str(tmp_path / "r"), *args, "--", sys.executable, "-c", "pass")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert not (tmp_path / "r").exists()


def test_bad_config_file_content(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    for text, needle in (
        ("{not json", "not valid JSON"),
        ('{"active": "three"}', "active"),
        ('{"with_stak": true}', "did you mean with_stack"),  # a newer release's key would be warned only
        ('{"activities": ["CPU", "TPU"]}', "activities"),
    ):
        config.write_text(text)
        result = npuprof("run", "--config", str(config), "--", sys.executable, "-c", "pass")
        assert result.returncode == 2
        (line,) = [x for x in result.stderr.splitlines() if x.strip()]
        assert needle in line and str(config) in line


def test_missing_command() -> None:
    result = npuprof("run", "--active", "2")
    assert result.returncode == 2
    assert "COMMAND" in result.stderr


def test_unknown_command_gives_127(out: Path) -> None:
    result = npuprof("run", "-o", str(out), "--", "/nonexistent/bin/trainer")
    assert result.returncode == 127
    assert "command not found" in result.stderr
    assert not out.exists()  # checked before anything is made
    # a flag of npuprof's put after -- (helper-121): said where it belongs
    result = npuprof("run", "-o", str(out), "--", "--active", "3", sys.executable, "t.py")
    assert result.returncode == 127
    assert "'--active' (npuprof's flags go before --, the command after it)" in result.stderr
    # a script of the current directory given by its bare name (helper-135): as a shell, $PATH is searched
    (out.parent / "train.py").write_text("print(1)\n")
    result = npuprof("run", "-o", str(out), "--", "train.py", cwd=out.parent)
    assert result.returncode == 127
    assert "'train.py' (not on $PATH; the file here runs as `-- python train.py`)" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("kind", ["not executable", "a directory", "with a #! line"])
def test_a_command_that_cannot_run_gives_126_as_a_shell_does(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "train.py"
    if kind == "a directory":
        target.mkdir()
    else:
        target.write_text("print(1)\n")
        target.chmod(0o755 if kind == "with a #! line" else 0o644)  # executable, no #!: exec() fails
    out = tmp_path / "out"
    result = npuprof("run", "-o", str(out), "--", str(target))
    assert result.returncode == 126, result.stderr
    assert kind in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_script_with_no_interpreter_line_is_told_to_run_with_one(tmp_path: Path) -> None:
    """helper-231: `-- ./train.py` of a script with no #! line was told "chmod +x it", after which it was
    refused as "neither a binary nor a script with a #! line": it runs by its interpreter only."""
    from npuprof.runner import command_problem

    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    for mode in (0o644, 0o755):
        script.chmod(mode)
        message, code = command_problem(str(script)) or ("", 0)
        assert code == 126 and "chmod" not in message, message
        assert f"run it with its interpreter: `-- python {script}`" in message, message
    script.write_text("#!/bin/sh\necho hi\n")  # a #! script: making it executable is the fix
    script.chmod(0o644)
    message, code = command_problem(str(script)) or ("", 0)
    assert code == 126 and "chmod +x it" in message, message


def test_a_script_whose_interpreter_is_missing_is_not_said_not_found(tmp_path: Path) -> None:
    from npuprof.runner import command_problem

    # helper-178: ./train.sh with Windows line endings (#!/bin/bash\r) was "command not found" of a file
    # that is there; a shell says "cannot execute: required file not found" (127)
    script = tmp_path / "train.sh"
    for first, missing in (("#!/bin/sh\r", "'/bin/sh\\r'"), ("#! /nowhere/python3 -u", "'/nowhere/python3'")):
        script.write_bytes(f"{first}\necho hi\n".encode())
        script.chmod(0o755)
        message, code = command_problem(str(script)) or ("", 0)
        assert code == 127 and "command not found" not in message, message
        assert f"its #! interpreter {missing} is not found" in message
        assert ("Windows line endings" in message) is first.endswith("\r")
    script.write_text("#!/bin/sh -e\necho hi\n")
    assert command_problem(str(script)) is None


def test_module_entry_and_console_script_agree() -> None:
    console = Path(sys.executable).with_name("npuprof")
    assert console.is_file(), "the npuprof console script is not installed beside this Python"
    outputs = []
    for cmd in ([sys.executable, "-m", "npuprof", "--help"], [str(console), "--help"]):
        result = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "100"}
        )
        assert result.returncode == 0, result.stderr
        for command in ("run", "analyse", "export-stacks", "memory-timeline"):
            assert command in result.stdout
        outputs.append(result.stdout.replace("python -m npuprof", "npuprof"))
    assert outputs[0] == outputs[1]


def test_kill_9_mid_capture_leaves_a_capture_marked_incomplete(out: Path) -> None:
    from npuprof.results.layout import capture_status

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "npuprof",
            "run",
            "-o",
            str(out),
            *sched(1, 0, 50),
            "--",
            *trainer("--steps", "60", "--sleep", "0.1"),
        ],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out.exists() and rank_dirs(out) and (rank_dirs(out)[0] / "npuprof_capture.json").exists()):
        assert time.monotonic() < deadline and proc.poll() is None, "no capture started"
        time.sleep(0.05)
    (d,) = rank_dirs(out)
    pid = capture_record(d)["pid"]
    # what torch's export_chrome_trace leaves when the kill lands inside it (Kineto's temporary of ours)
    half_written = d / f".w.pt.trace.json.{pid}-0123456789ab.tmp.tmp"
    half_written.write_bytes(b'{"traceEvents": [' + b"{}," * 300_000)
    # and what a post-processor killed while it gzipped leaves (its own pid, gone: a process reaped here)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    half_gzipped = d / f".w.pt.trace.json.gz.{int(gone.stdout)}-0123456789ab.tmp"
    half_gzipped.write_bytes(b"\x1f\x8b" + b"\0" * 102_398)
    # or while it wrote a table (helper-106: ASCEND_PROFILER_OUTPUT was not looked in)
    (d / "ASCEND_PROFILER_OUTPUT").mkdir()
    half_table = d / "ASCEND_PROFILER_OUTPUT" / f".trace_view.json.{int(gone.stdout)}-0123456789ab.tmp"
    half_table.write_bytes(b"[" + b" " * 20_479)
    os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL
    status = capture_status(d)
    assert not status.complete and "before the capture was finalised" in status.detail
    assert "capturing" in stderr or "incomplete" in stderr
    assert not half_written.exists() and not half_gzipped.exists() and not half_table.exists()
    # the part of the trace torch wrote is kept for analyse under a name that says it is cut
    trace = 17 + 3 * 300_000
    assert (d / "w.cut.pt.trace.json").stat().st_size == trace
    said = " ".join(stderr.split())
    assert "the part written kept as w.cut.pt.trace.json" in said
    kib = (102_400 + 20_480) / 1024
    assert f"a process died while writing into it; the half-written file(s) removed: {kib:.1f} KiB" in said
    (summary,) = json.loads((out / "npuprof_run.json").read_text())["captures"]
    assert summary["size_bytes"] < trace + 100_000 and "half-written" in summary["detail"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--levle", "2", "--", "python", "-c", "pass"], "--levle"),
        (["analyse", "--format", "xml", "."], "--format"),
        (["export-stacks", "--metric", "nope", "."], "--metric"),
        (["bogus"], "bogus"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = npuprof(*args)
    assert result.returncode == 2
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert needle in line


def test_a_leaked_child_holding_the_post_processor_pipe_does_not_hang_npuprof(
    out: Path, tmp_path: Path
) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(
        "import subprocess, runpy, sys\n"
        f"sys.argv = ['trainer.py', '--steps', '4']\n"
        "try:\n"
        f"    runpy.run_path({str(Path(__file__).parent / 'scripts' / 'trainer.py')!r},\n"
        "                   run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "from npuprof.agent import entry\n"
        "fd = entry._state['agent'].post._pipe\n"
        "leak = subprocess.Popen(['sleep', '600'], pass_fds=(fd,), start_new_session=True,\n"
        "                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(tmp_path / 'leak.pid')!r}, 'w').write(str(leak.pid))\n"
    )
    # The leaked child holds the pipe 600 s from the job's end (killed once npuprof is done): a run that waits
    # for it times out. Timed from the job's end (when it wrote leak.pid), not from the run's start: the run
    # took 45 s on a host at 4 times its load (helper-196: busy loops beside two test files).
    try:
        job = [sys.executable, str(script)]
        result = npuprof("run", "-o", str(out), *sched(1, 0, 1), "--", *job, timeout=240)
        ended = time.time()
    finally:
        if (tmp_path / "leak.pid").exists():
            os.kill(int((tmp_path / "leak.pid").read_text()), signal.SIGKILL)
    after_job = ended - (tmp_path / "leak.pid").stat().st_mtime
    log = (out / "npuprof.log").read_text() if (out / "npuprof.log").exists() else "(no npuprof.log)"
    assert result.returncode == 0, result.stderr
    assert after_job < 60, f"npuprof waited {after_job:.0f} s after the job for a pipe a leaked child held"
    (d,) = rank_dirs(out)
    assert capture_record(d)["status"] == "complete", log
    assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists(), log
