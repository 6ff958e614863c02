"""What `npuprof run` does once its flags are valid: prepare the output, launch, wait, report."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from npuprof import __version__
from npuprof.config import ProfileConfig
from npuprof.launch import LaunchError, child_environment, injection_warnings, new_run_id, run_child
from npuprof.results import layout, run_record
from npuprof.results.atomic import make_dir, write_json
from npuprof.results.paths import UnsafePathError, check_no_symlink


def _error(message: str, code: int = 2) -> int:
    sys.stderr.write(f"npuprof run: error: {message}\n")
    return code


def _note(message: str) -> None:
    sys.stderr.write(f"npuprof: {message}\n")
    sys.stderr.flush()


def _append_log(log_path: Path, message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, f"{stamp} [INFO] [launcher pid={os.getpid()}] {message}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def _write_record(path: Path, record: dict[str, object]) -> None:
    # No fsync (~5 ms each on the start path): the rename keeps it atomic for readers.
    write_json(path, record, fsync=False)


def prepare_output(cfg: ProfileConfig) -> Path:
    output = check_no_symlink(cfg.output, "--output")
    if output.exists() and not output.is_dir():
        raise UnsafePathError(f"--output {cfg.output!r} exists and is not a directory; give a directory")
    make_dir(output)
    if not os.access(output, os.W_OK):
        raise UnsafePathError(f"--output {cfg.output!r} is not writable; give a writable directory")
    return output


def _forget_reported_warnings(output: Path, run_id: str) -> None:
    marks = output / layout.REPORTED_DIR
    if marks.is_dir():
        import shutil  # only here: ~2 ms of start-up

        shutil.rmtree(marks / run_id, ignore_errors=True)
        with contextlib.suppress(OSError):
            marks.rmdir()


def execute(cfg: ProfileConfig, command: list[str]) -> int:
    try:
        output = prepare_output(cfg)
    except (UnsafePathError, OSError) as exc:
        return _error(str(exc))
    cfg.output = str(output)
    log_path = output / layout.RUN_LOG
    run_id = new_run_id()
    try:
        record_path = run_record.claim_record_path(output)
    except OSError as exc:
        return _error(f"cannot write to --output {str(output)!r}: {exc}")
    record = {
        "npuprof_version": __version__,
        "run_id": run_id,
        "command": command,
        "cwd": os.getcwd(),
        "host": os.uname().nodename,  # = socket.gethostname(), without importing socket
        "launcher_pid": os.getpid(),
        "config": cfg.to_payload(),
        "start": run_record.now_iso(),
        "end": None,
        "exit_code": None,
        "captures": [],
    }
    _write_record(record_path, record)
    _append_log(log_path, f"run {run_id} starts: {' '.join(command)}")
    for warning in injection_warnings(command):
        _note(warning)
        _append_log(log_path, "WARNING " + warning)
    run = {"run_id": run_id, "log": str(log_path), "output": str(output)}
    env = child_environment(cfg, run, dict(os.environ))
    started = time.monotonic()
    try:
        code, forwarded = run_child(command, env)
    except LaunchError as exc:
        record.update(end=run_record.now_iso(), exit_code=127, error=str(exc))
        _write_record(record_path, record)
        return _error(str(exc), 127)
    elapsed = time.monotonic() - started
    if (output / layout.PENDING_DIR).is_dir():
        from npuprof.results import postprocess

        pending = postprocess.pending_jobs(output)
        if pending:
            _note(
                f"waiting for {len(pending)} background post-processing job(s) (gzip / analyse) to finish "
                "(Ctrl-C stops waiting; they go on)..."
            )
        try:
            postprocess.wait_for_pending(output)
        except KeyboardInterrupt:
            _note(f"stopped waiting: post-processing goes on in the background (see {log_path})")
    _forget_reported_warnings(output, run_id)
    captures = run_record.captures_of_run(output, run_id)
    record.update(
        end=run_record.now_iso(),
        exit_code=code,
        wall_seconds=round(elapsed, 3),
        signals_forwarded=forwarded,
        captures=[c.as_dict() for c in captures],
    )
    try:
        _write_record(record_path, record)
    except OSError as exc:
        _note(f"could not update {record_path}: {exc}")
    _append_log(log_path, f"run {run_id} ends: exit code {code}, {len(captures)} capture(s)")
    from npuprof.reports.run_summary import print_run_summary

    print_run_summary(output, captures, code, cfg, log_path)
    return code
