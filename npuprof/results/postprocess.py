"""After a capture: gzip the raw trace and parse it, in a background process, never in the step.

The training process starts one of these per capture and moves on. Each holds an exclusive lock on
a file in ``<output>/.npuprof_pending/``; `npuprof run` waits until it can take every such lock, so
no post-processing outlives the run, and a killed one releases its lock by dying.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path

from npuprof.results import layout
from npuprof.results.atomic import atomic_writer

GZIP_LEVEL = 6
_children: list[int] = []  # pids of the jobs started here, until reaped


def spawn(output: Path, rank_dir: Path, trace: Path | None, *, gzip_trace: bool, analyse: bool) -> None:
    """Start the background job for ``rank_dir``; its lock is taken before it starts.

    This runs inside the training step where a capture ends, so it uses posix_spawn (vfork + exec,
    ~0.1 ms) rather than subprocess.Popen (~0.7 ms of Python around the same fork)."""
    if not (gzip_trace and trace is not None and trace.suffix == ".json") and not analyse:
        return
    _reap()
    pending = output / layout.PENDING_DIR
    pending.mkdir(mode=0o750, exist_ok=True)
    lock_path = pending / f"{os.getpid()}_{rank_dir.name}.lock"
    fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        argv = [sys.executable, "-m", "npuprof.results.postprocess", str(rank_dir), "--lock-fd", str(fd)]
        if gzip_trace and trace is not None:
            argv += ["--gzip", str(trace)]
        if analyse:
            argv.append("--analyse")
        env = {k: v for k, v in os.environ.items() if not k.startswith("NPUPROF_")}
        env["PYTHONPATH"] = _without_bootstrap(env.get("PYTHONPATH", ""))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env["PYTHONPATH"], _PACKAGE_ROOT) if p)
        env.setdefault("OMP_NUM_THREADS", "1")
        os.set_inheritable(fd, True)  # the job's copy of the lock; ours is closed below
        pid = os.posix_spawn(
            sys.executable,
            argv,
            env,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)],
            setsid=True,
        )
        _children.append(pid)
    finally:
        os.close(fd)


_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def _reap() -> None:
    """Collect the jobs that have ended, so that a long training leaves no zombies behind."""
    for pid in list(_children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _children.remove(pid)


def _without_bootstrap(pythonpath: str) -> str:
    return os.pathsep.join(
        p for p in pythonpath.split(os.pathsep) if p and not p.rstrip("/").endswith("_bootstrap")
    )


def pending_jobs(output: Path) -> list[Path]:
    pending = output / layout.PENDING_DIR
    return sorted(pending.glob("*.lock")) if pending.is_dir() else []


def wait_for_pending(output: Path) -> int:
    """Block until every background job under ``output`` has ended; returns how many there were."""
    count = 0
    for lock_path in pending_jobs(output):
        try:
            fd = os.open(lock_path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            count += 1
        finally:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            lock_path.unlink()
    pending = output / layout.PENDING_DIR
    with contextlib.suppress(OSError):
        pending.rmdir()
    return count


def gzip_file(plain: Path) -> Path:
    """``x.json`` -> ``x.json.gz`` atomically; the plain file is removed only once the gz is complete."""
    import gzip
    import shutil

    target = plain.with_name(plain.name + ".gz")
    with (
        open(plain, "rb") as src,
        atomic_writer(target, "wb") as raw,
        gzip.GzipFile(filename=plain.name, mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as gz,
    ):
        shutil.copyfileobj(src, gz, 1 << 20)
    plain.unlink()
    return target


def _rename_in_record(rank_dir: Path, old: str, new: str) -> None:
    import json

    from npuprof.results.atomic import write_json

    record_path = rank_dir / layout.CAPTURE_RECORD
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return
    if record.get("trace") == old:
        record["trace"] = new
        write_json(record_path, record)


def _log(rank_dir: Path, message: str) -> None:
    log_path = rank_dir.parent / layout.RUN_LOG
    with contextlib.suppress(OSError), open(log_path, "a", encoding="utf-8") as handle:
        handle.write(f"[postprocess pid={os.getpid()}] {rank_dir.name}: {message}\n")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m npuprof.results.postprocess")
    parser.add_argument("rank_dir", type=Path)
    parser.add_argument("--gzip", type=Path, default=None)
    parser.add_argument("--analyse", action="store_true")
    parser.add_argument("--lock-fd", type=int, default=None)
    args = parser.parse_args(argv)
    # Training has priority: on a busy machine this job waits for idle CPU rather than slowing the steps.
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)
    status = 0
    if args.analyse:
        try:
            from npuprof.analysis.parse import parse_rank_dir

            outcome = parse_rank_dir(args.rank_dir)
            _log(args.rank_dir, f"analysed: {outcome}")
        except Exception as exc:
            _log(args.rank_dir, f"analysis failed: {exc!r}")
            status = 1
    if args.gzip is not None and args.gzip.exists():
        try:
            packed = gzip_file(args.gzip)
            _rename_in_record(args.rank_dir, args.gzip.name, packed.name)
        except OSError as exc:
            _log(args.rank_dir, f"gzip failed, the plain trace is kept: {exc!r}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
