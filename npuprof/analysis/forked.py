"""Run a function in a forked child and collect its result later (or inline where fork is unavailable).

Unlike a process pool, nothing reads the child's result in the background: the parent reads it, in one
go, when it asks for it. A pool's result thread would read it while the parent is still busy, taking the
GIL for each 64 KB read of a large result, which slowed the parent's own work by up to a second.
"""

from __future__ import annotations

import contextlib
import os
import pickle
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
        pid = os.fork()
        if pid == 0:  # the child: run, send the pickled outcome, leave without any cleanup of the parent's
            code = 0
            try:
                os.close(read_fd)
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
        ok, value = pickle.loads(payload)
        if not ok:
            raise value if isinstance(value, BaseException) else RuntimeError(value)
        self.value = value
        return value


def _pickled_error(exc: BaseException) -> bytes:
    """The failure as (False, exception), or (False, its text) when it does not survive pickling."""
    try:
        payload = pickle.dumps((False, exc))
        pickle.loads(payload)
        return payload
    except Exception:
        return pickle.dumps((False, f"{type(exc).__name__}: {exc}"))
