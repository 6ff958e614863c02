"""Work split across forked processes: :class:`Forked` runs a function in a child and collects its result
later (or runs it inline where fork is unavailable); :class:`SharedColumns` hands numpy columns computed
by the parent after the fork to the child, through shared memory.

Unlike a process pool, nothing reads a child's result in the background: the parent reads it, in one go,
when it asks for it (a pool's result thread reads it while the parent is still busy, taking the GIL for
each 64 KB of a large result).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import mmap
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any


class Forked:
    """Run ``job`` in a forked child, started now, when ``fork`` and the platform allow; else inline, when
    ``result()`` is first asked for. ``result()`` returns its value or raises what it raised (an exception
    that cannot be pickled comes back as RuntimeError with its text). ``after_fork(child)`` runs in both
    processes after the fork."""

    def __init__(
        self, fork: bool, job: Callable[[], Any], after_fork: Callable[[bool], None] | None = None
    ) -> None:
        self.pid = 0
        self.job: Callable[[], Any] | None = job
        if not (fork and hasattr(os, "fork")):
            return
        self.job = None
        read_fd, write_fd = os.pipe()
        # the parent's objects out of the collector's reach: a collection in the child would write to each
        # (its gc header) and so copy every page of the parent's heap into the child
        gc.freeze()
        parent = os.getpid()
        pid = os.fork()
        if pid:
            gc.unfreeze()
        if pid == 0:  # the child: run, send the pickled outcome, leave without any cleanup of the parent's
            code = 0
            try:
                os.close(read_fd)
                die_with(parent)
                if after_fork is not None:
                    after_fork(True)
                try:
                    payload = pickle.dumps((True, job()), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as exc:
                    payload = _pickled_error(exc)
                with os.fdopen(write_fd, "wb") as pipe:
                    pipe.write(payload)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        if after_fork is not None:
            after_fork(False)
        self.pid, self.read_fd = pid, read_fd

    def finished(self) -> bool:
        """Can ``result()`` answer without waiting? (The child has sent its outcome or died; an inline
        job always can.)"""
        if not self.pid:
            return True
        import select

        return bool(select.select([self.read_fd], [], [], 0)[0])

    def cancel(self) -> None:
        """Kill a forked child and wait for it; an inline job is not run."""
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        """Wait for a forked child, ignoring its outcome; an inline job is not run (the caller is failing)."""
        self.job = None
        if self.pid:
            with contextlib.suppress(Exception):
                self.result()

    def result(self) -> Any:
        if self.job is not None:
            self.value, self.job = self.job(), None
        if not self.pid:
            return self.value
        with os.fdopen(self.read_fd, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        if not payload:
            raise RuntimeError(f"a forked analysis process failed (wait status {status})")
        # only ever what our own forked child pickled, through a pipe made before the fork: never trace bytes
        ok, value = pickle.loads(payload)
        if not ok:
            raise value if isinstance(value, BaseException) else RuntimeError(value)
        self.value = value
        return value


def die_with(parent: int) -> None:
    """In a forked child: be killed when ``parent`` dies (Linux's PR_SET_PDEATHSIG). An analyse ended by
    SIGTERM (``timeout``, a scheduler) or kill -9 left its children working: their db renamed into a rank
    dir that the next analyse parses again, their scratch written after the parent had removed it
    (helper-172); so did it leave the processes of its parsing pool (report.parse_all), for good
    (helper-223). Where the call is not there, nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the call took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _pickled_error(exc: BaseException) -> bytes:
    """The failure as (False, exception), or (False, its text) when it does not survive pickling."""
    try:
        payload = pickle.dumps((False, exc))
        pickle.loads(payload)
        return payload
    except Exception:
        return pickle.dumps((False, f"{type(exc).__name__}: {exc}"))


class SharedColumns:
    """An instance of the dataclass ``kind`` whose fields are numpy arrays of ``rows`` items of at most 8
    bytes, computed by the parent after the fork and read by the child: ``publish(value)`` in the parent
    (copies the arrays into shared memory), ``get()`` in the child (waits for them; views, no copy).
    ``after_fork`` must run in both processes (pass it to :class:`Forked`). Without a fork, ``get()``
    returns what was published."""

    def __init__(self, kind: type, rows: int, fork: bool) -> None:
        self.kind, self.value = kind, None
        self.fields = [f.name for f in dataclasses.fields(kind)]
        self.forked = fork and hasattr(os, "fork")
        if self.forked:
            self.memory = mmap.mmap(-1, max(1, 8 * rows * len(self.fields)))
            self.read_fd, self.write_fd = os.pipe()

    def after_fork(self, child: bool) -> None:
        if self.forked:
            os.close(self.write_fd if child else self.read_fd)

    def publish(self, value: Any) -> None:
        self.value = value
        if not self.forked:
            return
        import numpy as np

        places: list[tuple[str, str, int, int]] = []
        offset = 0
        for name in self.fields:
            column = getattr(value, name)
            np.frombuffer(self.memory, column.dtype, len(column), offset)[:] = column
            places.append((name, column.dtype.str, len(column), offset))
            offset += column.nbytes
        with contextlib.suppress(BrokenPipeError):  # the child ended without needing them
            os.write(self.write_fd, pickle.dumps(places))
        self.close()

    def close(self) -> None:
        """Parent: nothing (more) to send; a child still waiting sees the end of the pipe."""
        if self.forked and self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def get(self) -> Any:
        if self.value is not None or not self.forked:
            return self.value
        import numpy as np

        with os.fdopen(self.read_fd, "rb") as pipe:
            message = pipe.read()
        if not message:
            raise RuntimeError(f"the parent process ended before handing over its {self.kind.__name__}")
        columns = {
            name: np.frombuffer(self.memory, dtype=np.dtype(dtype), count=count, offset=offset)
            for name, dtype, count, offset in pickle.loads(message)
        }
        self.value = self.kind(**columns)
        return self.value
