"""npuprof.log: the one writer every part of npuprof appends through (launcher, agents, post-processors).

Safety (docs/architecture.md, "Safety"): the log is opened with ``O_NOFOLLOW | O_NONBLOCK`` and written
only when it is a regular file, so a symlink or a FIFO planted under that name is never followed and
never blocks. It rotates at ``ROTATE_BYTES`` into one ``.1`` backup, as torch_npu's own logs do (with a
larger size). Writing never raises: a full disk loses log lines, never the job; a line it cut short is
taken back, so that the next writer's line does not join it.
"""

from __future__ import annotations

import os
import re
import stat
import time

ROTATE_BYTES = 1 << 20  # 1 MiB, then one ".1" backup: at most ~2 MiB of log per output dir
# How an agent that could not start is logged (by the bootstrap, in its own words, and by the agent when its
# configuration cannot be read), for the run's last line (reports/run_summary.py) to name it
AGENT_START_FAILED = "agent failed to start, training goes on without profiling: "
# said in an outer run's log by a `npuprof run` its job started: that run profiles the job's processes
NESTED_RUN = "a nested npuprof run profiles the job's processes from here: "
# ends the agent's line for --step-on __main__:NAME in a process multiprocessing's spawn started (entry)
SPAWNED_CHILD = "; no steps counted in spawned processes"
# logged by each agent at its process's exit (entry), for the run's summary to count and explain
STEPS_AT_EXIT = "steps counted in this process: "
# logged instead by a rank's agent that had nothing to count steps on (no optimizer made, the --step-on
# function never loaded), so that the summary does not take its silence for an os._exit or a kill
NOTHING_COUNTED_AT_EXIT = "no step counted in this process: "
WINDOWS_SKIPPED_AT_EXIT = "capture windows skipped in this process: "
STARTS_WORKERS_AT_EXIT = "this process started the job's workers (torchrun): they record, not it"
# logged at the process's exit for the captures not handed over yet: to the spool, or kept unparsed
SPOOLED_AT_EXIT = " capture(s) still queued at the process's end go to the post-processor through "
KEPT_UNPARSED = ": not parsed or gzipped (no post-processor); run npuprof analyse"
# the script's own profiler (npuprof/agent/user_profiler.py): a window it kept from opening, and its stop
OWN_PROFILER_KEPT_OUT = ": the training script's own profiler runs"  # after "no capture at step N"
OWN_PROFILER_STOPPED = "the training script's own profiler stopped; npuprof resumes at its next window"
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def format_line(level: str, who: str, message: str, run_id: str = "") -> str:
    """``run_id`` tags the line with its run: the runs sharing one output directory (the nodes of a
    multi-node job) append to one log, and their pids may be the same (containers: a pid namespace each)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    run = f" run={run_id}" if run_id else ""
    return f"{stamp} [{level}] [{who} pid={os.getpid()}{run}] {message}\n"


# the start of a record (npuprof.log's or a --dynamic log's: a time, a level, the writer) inside a line
# (a --dynamic log's time has its UTC offset after it: npuprof/agent/dynamic_log.py)
_RECORD_INSIDE = re.compile(
    r"(?<=.)(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3})?(?: [+-]\d{4})? \[[A-Z]+\] \[)"
)


def log_records(text: str) -> list[str]:
    """``text``'s lines, each split where another record begins inside it: a line a full disk cut short
    (its take back can fail: another process appended after it) runs into the next writer's, and both were
    misread as one record, the second's fields lost."""
    return [part for line in text.splitlines() for part in _RECORD_INSIDE.split(line)]


def open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result] | None:
    """The log at ``path`` opened for appending (created when absent) and its status, or None when it cannot
    be opened or is not a regular file: a planted link is never followed, a FIFO never blocks."""
    try:
        fd = os.open(path, _FLAGS, 0o640)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return fd, info


def append_line(path: str | os.PathLike[str], line: str) -> bool:
    """Append ``line`` to the log at ``path``; False when it could not be written (never raises)."""
    opened = open_regular(path)
    if opened is None:
        return False
    fd, info = opened
    try:
        if info.st_size >= ROTATE_BYTES:
            _rotate(os.fspath(path), info)
        return write_whole(fd, line)
    except OSError:
        return False
    finally:
        os.close(fd)


def write_whole(fd: int, line: str, errors: str = "replace") -> bool:
    """Append ``line`` through ``fd`` (opened O_APPEND); False, and no part of it left, when a disk that
    filled inside it cut it short: no torn line for the next writer's to join. Raises OSError."""
    data = line.encode("utf-8", errors)
    written = os.write(fd, data)
    if written < len(data):
        _take_back(fd, written)
        return False
    return True


def _take_back(fd: int, written: int) -> None:
    """Remove the ``written`` bytes of a line cut short, when nothing was appended after them (a writer
    of another process may have been: its line is kept, ours is then left cut)."""
    try:
        end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just after our bytes
        if os.fstat(fd).st_size == end:
            os.ftruncate(fd, end - written)
    except OSError:
        pass


def log(path: str | os.PathLike[str] | None, level: str, who: str, message: str, run_id: str = "") -> bool:
    if path is None:
        return False
    return append_line(path, format_line(level, who, message, run_id))


def _rotate(path: str, opened: os.stat_result) -> None:
    """Move the full log to ``<path>.1`` (replacing the old backup) when it is still the file we opened;
    our line then goes to the end of the backup, the next writer starts a new log."""
    try:
        current = os.lstat(path)
        backup = path + ".1"
        if (current.st_dev, current.st_ino) != (opened.st_dev, opened.st_ino):
            return  # another process rotated it first
        os.rename(path, backup)  # replaces whatever is at backup (a planted link included), never follows it
    except OSError:
        pass
