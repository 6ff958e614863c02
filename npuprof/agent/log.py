"""The agent's log: lines appended to the run's npuprof.log; problems reported once on stderr."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from npuprof.owned_fd import OwnedFd, above_stdio
from npuprof.results import logfile

F = TypeVar("F", bound=Callable[..., Any])


class AgentLog:
    def __init__(self, path: str | None, who: str, run_id: str = "", output_hidden: bool = False) -> None:
        self.path = path
        self.who = who
        self.run_id = run_id
        # torchrun's --local-ranks-filter leaves this process's output unseen: it leaves the run's one
        # showing of a warning to a process whose output is seen
        self.output_hidden = output_hidden
        self._reported: set[str] = set()
        self._logged: dict[str, str] = {}  # each key's last warning in the log: the same one is not repeated
        self._kept: OwnedFd | None = None

    def keep_a_descriptor(self) -> int | None:
        """Hold the log open for the process's life, written only when the log cannot be opened: a job that
        takes every descriptor left (EMFILE) would otherwise leave no trace of what npuprof met there, and
        the run's summary would guess. Once the log is rotated or removed it is no longer written (never
        closed either: the number may be the script's by then). The descriptor kept, or None."""
        if self.path is None or self._kept is not None:
            return self._kept.fd if self._kept is not None else None
        opened = logfile.open_regular(self.path)
        if opened is not None:
            with contextlib.suppress(OSError):
                self._kept = OwnedFd(above_stdio(opened[0]))
        return self._kept.fd if self._kept is not None else None

    def write(self, level: str, message: str) -> bool:
        """Append a line to npuprof.log; whether it is there now (a full disk: not)."""
        if self.path is None:
            return False
        line = logfile.format_line(level, self.who, message, self.run_id)
        return logfile.append_line(self.path, line) or self._write_kept(line)

    def _write_kept(self, line: str) -> bool:
        """Through the kept descriptor, only while it is the file at the log's path: the script may have
        closed the number (``os.closerange``) and opened a file of its own on it, which a removed log's
        freed inode number can be too (helper-108: npuprof's lines landed in the script's data); a log
        rotated since is not written there either (its lines would read as older than they are)."""
        kept = self._kept
        if kept is None or self.path is None or not kept.ours():
            return False
        try:
            held, here = os.fstat(kept.fd), os.lstat(self.path)
            if (held.st_dev, held.st_ino) != (here.st_dev, here.st_ino):
                return False
            return logfile.write_whole(kept.fd, line)
        except OSError:
            return False

    def info(self, message: str) -> bool:
        return self.write("INFO", message)

    def warning(self, message: str) -> bool:
        return self.write("WARNING", message)

    def error(self, message: str) -> bool:
        return self.write("ERROR", message)

    def warn_once(self, key: str, message: str) -> None:
        """Log a warning and show it once on stderr: once per process, and once per run when several
        processes (torchrun workers) say the same thing. The log has it again only when it changed
        (a window skipped for another reason)."""
        if self._logged.get(key) != message:
            self._logged[key] = message
            self.warning(message)
        if key in self._reported:
            return
        self._reported.add(key)
        if not self._first_in_run(message):
            return
        try:
            sys.stderr.write(f"npuprof: {message}\n")
            sys.stderr.flush()
        except Exception:
            pass

    def _first_in_run(self, message: str) -> bool:
        if self.path is None:
            return True
        import hashlib

        name = hashlib.sha1(message.encode("utf-8", "replace")).hexdigest()[:16]
        if self.output_hidden:
            # shown in this rank's own output, which the user does not see (torchrun's log file): kept for
            # the launcher, which repeats at the run's end a warning no process showed (helper-182)
            import time

            held = f"{time.time_ns()}\t{_rank_stderr_file()}\t{message}"
            self._mark(HIDDEN_MARK + name, held.encode("utf-8", "replace"))
            return True
        return self._mark(name, b"")

    def _mark(self, name: str, content: bytes) -> bool:
        """Make the run's mark ``name`` (holding ``content``); False when another process made it first."""
        try:
            marks = _open_subdir(_open_subdir(None, os.path.dirname(self.path or "") or "."), REPORTED_DIR)
            marks = _open_subdir(marks, self.run_id or "run")
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                made = os.open(name, flags, 0o640, dir_fd=marks)
                try:
                    if content:
                        os.write(made, content[:HIDDEN_MARK_LIMIT])
                finally:
                    os.close(made)
            finally:
                os.close(marks)
        except FileExistsError:
            return False
        except OSError:
            return True
        return True


def _rank_stderr_file() -> str:
    """The file torchrun sends this worker's stderr to (beside the error file it names for the worker), or
    "" when there is none."""
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
    if not error_file:
        return ""
    path = os.path.join(os.path.dirname(error_file), "stderr.log")
    return path if os.path.isfile(path) else ""


def shown_nowhere(output: str, run_id: str) -> list[tuple[str, str]]:
    """The warnings of run ``run_id`` that only processes whose output is hidden met (torchrun's
    ``--redirects`` without ``--tee``, ``--local-ranks-filter``), with the file that holds the output of
    the first that met each ("" when unknown): no process showed them on the console."""
    found: list[tuple[int, str, str]] = []  # (when it was met, where it was shown, the warning)
    try:
        marks = _open_subdir(_open_subdir(None, output), REPORTED_DIR)
        marks = _open_subdir(marks, run_id or "run")
    except OSError:
        return []
    try:
        names = os.listdir(marks)
        for name in names:
            if not name.startswith(HIDDEN_MARK) or name.removeprefix(HIDDEN_MARK) in names:
                continue
            try:
                held = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=marks)
            except OSError:
                continue
            try:
                text = os.read(held, HIDDEN_MARK_LIMIT).decode("utf-8", "replace")
            except OSError:
                continue
            finally:
                os.close(held)
            when, _, rest = text.partition("\t")
            where, _, warning = rest.partition("\t")
            if warning:
                found.append((int(when) if when.isascii() and when.isdigit() else 0, where, warning))
    except OSError:
        pass
    finally:
        os.close(marks)
    return [(warning, where) for _, where, warning in sorted(found)]  # in the order they were met


def _open_subdir(parent: int | None, name: str) -> int:
    """Open (creating it if needed) the directory ``name`` under the open directory ``parent``,
    never through a symlink; ``parent`` is closed."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        if parent is not None:
            try:
                os.mkdir(name, 0o750, dir_fd=parent)
            except FileExistsError:
                pass
        return os.open(name, flags, dir_fd=parent) if parent is not None else os.open(name, flags)
    finally:
        if parent is not None:
            os.close(parent)


# Marks of the warnings already shown in this run; the launcher removes the folder at the end.
REPORTED_DIR = ".npuprof_reported"  # = npuprof.results.layout.REPORTED_DIR (kept import-free here)
HIDDEN_MARK = "hidden-"  # a warning met where the output is hidden: the mark holds it for the launcher
HIDDEN_MARK_LIMIT = 4096
_NULL = AgentLog(None, "agent")
_current: AgentLog = _NULL


def set_log(log: AgentLog) -> None:
    global _current
    _current = log


def get_log() -> AgentLog:
    return _current


def raised_by_a_signal_handler(exc: BaseException, caught_in_a_handler: bool = False) -> bool:
    """Was ``exc`` raised by one of the process's Python signal handlers (the script's, or torch's
    DataLoader SIGCHLD check) that happened to run while npuprof's code ran? Such an exception is the
    script's: it must reach the script exactly as it would without npuprof, not be taken for our failure.
    ``caught_in_a_handler``: caught in npuprof's own handler (the timed window's), whose frame is not it."""
    import signal

    handlers = set()
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        code = getattr(getattr(handler, "__func__", handler), "__code__", None)
        if code is not None:
            handlers.add(code)
    tb = exc.__traceback__
    if caught_in_a_handler and tb is not None:
        tb = tb.tb_next
    while tb is not None:
        if tb.tb_frame.f_code in handlers:
            return True
        tb = tb.tb_next
    return False


def report_failure(what: str, exc: Exception, log: AgentLog | None = None) -> None:
    """A failure of npuprof's own code inside the user's training (caught there): logged with its
    traceback (in ``log``, the process's by default), said once on stderr; training goes on."""
    import traceback

    log = log or get_log()
    logged = log.error(f"{what} failed: {exc!r}\n{traceback.format_exc()}")
    where = f"details in {log.path}" if logged else f"{log.path or 'the log'} could not take the details"
    log.warn_once(
        "failure:" + what,
        f"{what} failed ({exc!r}); profiling of this process may be incomplete, training goes on; {where}",
    )


def never_raise(what: str, on_error: Callable[[], None] | None = None) -> Callable[[F], F]:
    """Decorate code that runs inside the user's training: failures are logged, reported once,
    and never reach the user's code. ``on_error`` may switch the failing part off."""

    def decorate(func: F) -> F:
        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                if raised_by_a_signal_handler(exc):
                    raise
                report_failure(what, exc)
                if on_error is not None:
                    try:
                        on_error()
                    except Exception:
                        pass
                return None

        return wrapper  # type: ignore[return-value]

    return decorate
