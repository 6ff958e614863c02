"""After a capture: write its small files, parse the trace and gzip it, in a background process,
never in the training step.

Each training process starts one post-processor at its first capture (``Postprocessor.start``), in
the step where the capture begins. At the end of a capture the step only exports the raw trace and
writes one line (a JSON job) into the post-processor's stdin pipe; the post-processor writes
``profiler_info``, ``profiler_metadata.json`` and the capture record, then parses and gzips. It ends
when the pipe closes, i.e. when the training process has ended.

It holds an exclusive lock on a file in ``<output>/.npuprof_pending/``; `npuprof run` waits until it
can take every such lock, so no post-processing outlives the run, and a killed one releases its lock
by dying.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from npuprof.results import layout
from npuprof.results.atomic import atomic_writer

GZIP_LEVEL = 6
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class Postprocessor:
    """The training process's handle on its background post-processor."""

    def __init__(self, output: Path) -> None:
        self.output = output
        self.pid: int | None = None
        self._pipe: int | None = None

    @property
    def running(self) -> bool:
        return self._pipe is not None

    def start(self) -> None:
        """Start the post-processor (once). posix_spawn (vfork + exec) costs ~0.1 ms in a big process."""
        if self._pipe is not None:
            return
        pending = self.output / layout.PENDING_DIR
        pending.mkdir(mode=0o750, exist_ok=True)
        lock_path = pending / f"{os.getpid()}.lock"
        lock = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o640)
        read_end, write_end = os.pipe()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            argv = [
                sys.executable, "-m", "npuprof.results.postprocess",
                "--lock-fd", str(lock), "--parent", str(os.getpid()),
            ]  # fmt: skip
            env = {k: v for k, v in os.environ.items() if not k.startswith("NPUPROF_")}
            pythonpath = _without_bootstrap(env.get("PYTHONPATH", ""))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, _PACKAGE_ROOT) if p)
            env.setdefault("OMP_NUM_THREADS", "1")
            os.set_inheritable(lock, True)  # the post-processor's copy of the lock; ours is closed below
            self.pid = os.posix_spawn(
                sys.executable,
                argv,
                env,
                file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_CLOSE, write_end)],
                setsid=True,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
            os.close(lock)
        self._pipe = write_end

    def submit(self, job: dict[str, Any]) -> bool:
        """Hand one job over (a few µs); False when the post-processor is not there to take it."""
        if self._pipe is None:
            return False
        import json

        data = (json.dumps(job, separators=(",", ":")) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._pipe, data) :]
        except OSError:
            self.forget()
            return False
        return True

    def forget(self) -> None:
        """Close our end (in a forked child, only the child's copy): the post-processor then sees EOF
        once every owner has closed it."""
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self._pipe)
            self._pipe = None


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


def _log(rank_dir: Path, message: str) -> None:
    log_path = rank_dir.parent / layout.RUN_LOG
    with contextlib.suppress(OSError), open(log_path, "a", encoding="utf-8") as handle:
        handle.write(f"[postprocess pid={os.getpid()}] {rank_dir.name}: {message}\n")


def run_job(job: dict[str, Any]) -> int:
    """Write the capture's files, then parse and gzip. Returns 0, or 1 when a part failed."""
    from npuprof.results.atomic import write_json

    rank_dir = Path(job["rank_dir"])
    status = 0
    try:
        for name, content in job.get("files", {}).items():
            write_json(rank_dir / name, content)
        write_json(rank_dir / layout.CAPTURE_RECORD, job["record"])
    except OSError as exc:
        _log(rank_dir, f"could not write the capture's files: {exc!r}")
        return 1
    if job.get("analyse"):
        try:
            from npuprof.analysis.parse import parse_rank_dir

            outcome = parse_rank_dir(rank_dir)
            _log(rank_dir, f"analysed: {outcome}")
        except Exception as exc:
            _log(rank_dir, f"analysis failed: {exc!r}")
            status = 1
    trace = Path(job["trace"]) if job.get("gzip") and job.get("trace") else None
    if trace is not None and trace.suffix == ".json" and trace.exists():
        try:
            packed = gzip_file(trace)
            # This process owns the record: rewrite it from the job, not by reading it back.
            write_json(rank_dir / layout.CAPTURE_RECORD, {**job["record"], "trace": packed.name})
        except OSError as exc:
            _log(rank_dir, f"gzip failed, the plain trace is kept: {exc!r}")
            status = 1
    return status


def read_jobs(fd: int, parent: int | None, poll_s: float = 1.0) -> Iterator[bytes]:
    """The lines written into ``fd`` until EOF, or until ``parent`` has died (a process it forked
    without Python's fork hooks may still hold the pipe open: that must not keep npuprof waiting)."""
    import select

    buffer = b""
    while True:
        ready, _, _ = select.select([fd], [], [], poll_s)
        if not ready:
            if parent is not None and os.getppid() != parent:
                return
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if buffer.strip():
                yield buffer
            return
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from (line for line in lines if line.strip())


def main(argv: list[str] | None = None) -> int:
    """The post-processor: one JSON job a line on stdin, until EOF or the training process's end."""
    import json

    args = list(sys.argv[1:] if argv is None else argv)
    parent = int(args[args.index("--parent") + 1]) if "--parent" in args else None
    # Training has priority: on a busy machine this waits for idle CPU rather than slowing the steps.
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)
    status = 0
    for line in read_jobs(sys.stdin.fileno(), parent):
        try:
            job = json.loads(line)
        except ValueError:
            continue
        status |= run_job(job)
    return status


if __name__ == "__main__":
    sys.exit(main())
