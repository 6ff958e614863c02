"""The logs of dynamic capture, as torch_npu keeps them (docs/architecture.md, "Dynamic capture"):

- ``DIR/log/dp_{host}_{pid}_rank_{rank}.log``: every action of one process (INFO, WARNING, ERROR);
- ``DIR/log/monitor_dp_{host}_{pid}_rank_{rank}.log``: each change of the config file (loaded or rejected)
  and the end of the process.

Each rotates at 200 KB into one ``.1`` backup (the oldest lines are dropped). Written only from the
watcher thread (and at exit), never from a training step; a line that cannot be written is lost, the job
goes on. `npuprof status` reads them back with :func:`parse_line`.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from npuprof.results.logfile import log_records, open_regular, write_whole

ROTATE_BYTES = 200 * 1024
# a capture's end, as npuprof.agent.dynamic_plan logs it (the count since 2026-12: its captures so far)
ENDED_RE = re.compile(
    r"^capture (?:(?P<count>\d+) )?of steps (?P<first>\d+)-(?P<last>\d+) (?P<status>\S+) in "
    # a capture's directory (*_ascend_pt) whole, " (" in the prof_dir above it included ("run (2)": its
    # end was read as a note's start); else (torch_npu's layout: the prof_dir) up to the note
    r"(?P<where>.+?_ascend_pt|.+?)"
    r"(?: \((?P<note>.*)\))?$"  # the note: the capture's record's detail (a step cut short, ...)
)


def span_said(span: str) -> str:
    """A log line's span of steps ("6-7") in words: "steps 6-7", "step 275" for "275-275". The lines
    keep "A-B" (ENDED_RE and npuprof status's, an older npuprof's too, read them so)."""
    first, _, last = span.partition("-")
    return f"step {first}" if first == last else f"steps {span}"


ACTION_PREFIX = "dp_"
MONITOR_PREFIX = "monitor_dp_"
UNKNOWN_RANK = -1  # torch_npu's name for a process without a rank
# the writer's local time and, since 2026-12, its UTC offset: the job and `npuprof status` may be in two time
# zones (a TZ of the job's own, a login node's), and an hour repeats at the end of summer time
_LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})(?: (?P<offset>[+-]\d{4}))? "
    r"\[(?P<level>[A-Z]+)\] \[(?P<pid>\d+)\] "
    r"(?P<who>[^:]+): (?:\[step (?P<step>-?\d+)\] )?(?P<message>.*)$"
)
FILE_NAME = re.compile(
    r"^(?P<monitor>monitor_)?dp_(?P<host>.+)_(?P<pid>\d+)_rank_(?P<rank>-?\d+)\.log(?P<backup>\.1)?$"
)


def append(path: str, line: str, limit: int = ROTATE_BYTES) -> bool:
    """Append ``line`` to the log at ``path`` (never through a link, never blocking on a FIFO); first move
    a log that this line would take past ``limit`` to ``path.1``. False when nothing was written."""
    data = line.encode("utf-8", "replace")  # (its size, for the rotation)
    opened = open_regular(path)
    if opened is None:
        return False
    fd, info = opened
    try:
        if info.st_size and info.st_size + len(data) > limit:
            os.close(fd)
            fd = -1
            os.replace(path, path + ".1")  # replaces the old backup (or a link planted there), never follows
            opened = open_regular(path)
            if opened is None:
                return False
            fd = opened[0]
        return write_whole(fd, line)  # a line a full disk cut short is taken back: none joins the next
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def format_line(
    level: str, message: str, who: str = "npuprof.dynamic", step: int | None = None, when: float | None = None
) -> str:
    now = time.time() if when is None else when
    local = time.localtime(now)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", local) + f",{int(now * 1000) % 1000:03d} {_offset(local)}"
    where = f"[step {step}] " if step is not None else ""
    return f"{stamp} [{level}] [{os.getpid()}] {who}: {where}{' '.join(message.splitlines())}\n"


def _offset(local: time.struct_time) -> str:
    """``local``'s UTC offset as ``+HHMM`` (strftime's %z is not that on every platform)."""
    minutes = (local.tm_gmtoff or 0) // 60
    return f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"


def parse_line(line: str) -> dict[str, str] | None:
    """A log line's fields (time, level, pid, who, step or None, message), or None for another line."""
    match = _LINE.match(line.rstrip("\n"))
    return match.groupdict() if match else None


@dataclass(frozen=True)
class UnreadRequest:
    path: Path  # DIR/profiler_config.json
    changed: float  # its last change (epoch s)
    trigger_id: str  # "" for a request written by hand


READ_LIMIT = 1 << 22  # each log rotates at 200 KB: a larger file is not one of ours
# the lines of a request that did not capture (written by npuprof/agent/dynamic_plan.py, read by status and
# the run's summary): a capture that could not begin, and a request that had no effect
SKIPPED_RE = re.compile(r"^capture at step (?P<step>\d+) skipped: (?P<why>.+)$")
NOT_EFFECTIVE = ": not effective"
# a request for other ranks, in the process's log: "rank R is not selected (capture ... on ranks 1 into
# DIR (trigger T)): no capture here" (written by dynamic_plan.py, read by status)
NOT_SELECTED = "rank {rank} is not selected ({request}): no capture here"
NOT_SELECTED_RE = re.compile(r"^rank (?P<rank>\S+) is not selected \((?P<request>.+)\): no capture here$")
# a process without a rank counts as rank 0 (README, --ranks): said so inside the brackets, so that a reader
# of NOT_SELECTED_RE (an older status) still reads the line ("rank None" was written before, helper-298)
RANKLESS = "a process without a rank counts as rank 0"


def not_selected(rank: int | None, request: str) -> str:
    """The NOT_SELECTED line of a process of ``rank`` (None: it has none) for the request ``request``."""
    if rank is None:
        return NOT_SELECTED.format(rank=0, request=f"{RANKLESS}; {request}")
    return NOT_SELECTED.format(rank=rank, request=request)


PROCESS_ENDS = "the process ends"  # a process image's last line
# before it, when a signal ends the process (read by status): "stopped by SIGTERM: the process dies of it"
STOPPED_BY = "stopped by {signal}: the process dies of it"
STOPPED_BY_RE = re.compile(r"^stopped by (?P<signal>\S+): the process dies of it$")
# "the capture planned from step N is cancelled: replaced by a later change (...)": the last change wins
REPLACED = "replaced by a later change"
# a process image's first line: after "the process ends" it is the process again, after an os.exec*
WATCHING = "watching "
# in that line and the heartbeat: the process's start in clock ticks after boot (/proc/PID/stat), by which
# status tells the writer from a later process given its pid, whatever the wall clock did since
STARTED_AT = "started at tick {ticks}"
STARTED_AT_RE = re.compile(r"started at tick (?P<ticks>\d+)")
# in both before it, under torchrun: the process's attempt (TORCHELASTIC_RESTART_COUNT, 0 the first; since
# 2026-12, a line without it names none), by which a restarted worker tells a request an earlier attempt read
ATTEMPT = ", attempt {attempt}"
ATTEMPT_RE = re.compile(r", attempt (?P<attempt>\d+)(?=, started at tick \d+$|$)")  # (a path may say it)
HEARTBEAT_RE = re.compile(r"^at step -?\d+(?:,|$)")
# "at step N" in the action log, at most this often while the steps pass: npuprof status reads a process of
# another host that logged nothing for many times this (or its step time) as silent
HEARTBEAT_S = 60.0


def skipped_line(step: int, why: str) -> str:
    return f"capture at step {step} skipped: {why}"


STARTED_WITH = "the file as the job started is not a request"  # then " (trigger ID)" when it holds one


def _request_file(directory: Path) -> tuple[Path, float, str] | None:
    """``directory``'s profiler_config.json, its last change (epoch s) and the trigger that sent it as the
    job's lines name it ("" for a request written or edited by hand: dynamic_files.request_trigger), when
    it asks for a capture (a start_step other than 0); else None."""
    import json

    from npuprof.agent.dynamic_files import CONFIG_NAME, request_trigger
    from npuprof.results.layout import read_small

    path = directory / CONFIG_NAME
    try:
        changed = os.stat(path).st_mtime
        raw = read_small(path, 1 << 20)
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("start_step", 0) in (0, None):
        return None
    return path, changed, request_trigger(data, raw)


def request_before_start(directory: Path) -> UnreadRequest | None:
    """``directory``'s profiler_config.json when the request it holds (by its trigger id) was there as the
    job's processes started, and so taken by them as no request (npuprof/agent/dynamic_plan.py); else
    None."""
    from npuprof.agent.dynamic_files import LOG_DIR
    from npuprof.results.layout import read_small

    found = _request_file(directory)
    if found is None:
        return None
    path, changed, trigger = found
    if not trigger:
        return None
    said = f"{STARTED_WITH} (trigger {trigger})"
    for log in sorted((directory / LOG_DIR).glob(f"{ACTION_PREFIX}*.log*")):
        try:
            text = read_small(log, READ_LIMIT).decode("utf-8", "replace")
        except OSError:
            continue
        if said in text:
            return UnreadRequest(path, changed, trigger)
    return None


@dataclass(frozen=True)
class Reader:
    """One process of this host between ``since`` and ``until`` (epoch s): its lines of before are another
    process's that had its pid."""

    host: str
    pid: int
    since: float
    until: float = float("inf")

    def wrote(self, name: str) -> bool:
        match = FILE_NAME.match(name)
        return match is not None and (match["host"], int(match["pid"])) == (self.host, self.pid)

    def covers(self, fields: dict[str, str]) -> bool:
        return self.since <= line_time(fields) <= self.until


def read_before_exec(directory: Path, reader: Reader) -> bool:
    """Whether ``directory``'s profiler_config.json asks for a capture that an earlier image of ``reader``
    read: one that has ended (its "the process ends" line) while the process goes on, as after
    ``os.exec*`` (same pid, same logs)."""
    if _request_file(directory) is None:
        return False
    ended = _last_end(directory, reader)
    return ended is not None and unread_request(directory, replace(reader, until=ended)) is None


def _last_end(directory: Path, reader: Reader) -> float | None:
    """When ``reader``'s last image ended ("the process ends"), None when none has."""
    last = None
    for _log, fields in _logged_lines(directory, f"{ACTION_PREFIX}*.log*", reader):
        if fields["message"] == PROCESS_ENDS:
            last = max(last or 0.0, line_time(fields))
    return last


def _logged_lines(
    directory: Path, pattern: str, reader: Reader | None
) -> Iterator[tuple[Path, dict[str, str]]]:
    """Each parsed line of ``directory``'s logs named by ``pattern``, with its log (in name order); with
    ``reader``, only the lines that process wrote since it began. A log that cannot be read is passed over."""
    from npuprof.agent.dynamic_files import LOG_DIR

    for log in sorted((directory / LOG_DIR).glob(pattern)):
        if reader is not None and not reader.wrote(log.name):
            continue
        for fields in _parsed_lines(log):
            if reader is None or reader.covers(fields):
                yield log, fields


def _parsed_lines(log: Path) -> Iterator[dict[str, str]]:
    """Each parsed line of the action log ``log``; none where it cannot be read or is over READ_LIMIT."""
    from npuprof.results.layout import read_small

    try:
        text = read_small(log, READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return
    for line in log_records(text):
        fields = parse_line(line)
        if fields is not None:
            yield fields


def line_time(fields: dict[str, str]) -> float:
    """A parsed line's moment (epoch s): by its UTC offset; a line without one (an older npuprof's) is
    taken in this process's time zone, as before."""
    day, ms = fields["time"].split(",")
    offset = fields.get("offset")
    if not offset:
        return time.mktime(time.strptime(day, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000
    return _second(day, offset) + int(ms) / 1000


@functools.lru_cache(maxsize=4096)
def _second(day: str, offset: str) -> float:
    """``day`` (``YYYY-mm-dd HH:MM:SS``) at UTC ``offset`` (``+HHMM``) as epoch s; the lines of a log share
    their seconds: strptime once for each (status reads thousands of lines a process)."""
    import calendar

    parsed = time.strptime(day, "%Y-%m-%d %H:%M:%S")
    sign = -1 if offset[0] == "-" else 1
    return calendar.timegm(parsed) - sign * (int(offset[1:3]) * 3600 + int(offset[3:5]) * 60)


def unread_request(directory: Path, reader: Reader | None = None) -> UnreadRequest | None:
    """``directory``'s profiler_config.json when it asks for a capture (a start_step other than 0) that no
    process has read yet, else None (nothing asked, read, or not to be told). Read is told by the request's
    trigger id when it has one (a process's log lines about it name it: npuprof/agent/dynamic_request.py),
    else by time: changed after every process's last ``loaded:`` line (the logs' clocks are the
    processes' own). ``reader``: only the lines that process wrote since it began count."""
    found = _request_file(directory)
    if found is None:
        return None
    return _unread_in(found, _logged_lines(directory, "*.log*", reader))  # action and monitor logs


def _unread_in(
    found: tuple[Path, float, str], lines: Iterator[tuple[Path, dict[str, str]]]
) -> UnreadRequest | None:
    """unread_request's test of the request ``found`` against the logged ``lines``."""
    path, changed, trigger = found  # as the watcher's lines name it
    last_read = 0.0
    for log, fields in lines:
        if trigger and f"(trigger {trigger})" in fields["message"]:
            return None  # loaded, queued, replaced, or not for this rank: read
        if log.name.startswith(ACTION_PREFIX) and fields["message"].startswith("loaded: "):
            last_read = max(last_read, line_time(fields))
    if not trigger and last_read >= changed - 1.0:  # the log's clock has ms; the file's may be a tick ahead
        return None
    return UnreadRequest(path, changed, trigger)


def read_by_earlier_attempt(directory: Path, host: str, attempt: int, since: float) -> bool:
    """Whether ``directory``'s profiler_config.json asks for a capture that a process of ``host`` of a
    torchrun attempt before ``attempt`` read, by its lines since ``since`` (epoch s): a worker torchrun
    restarted, starting within CLOCK_SLACK_S of a request the crashed attempt took, took it as its own (and
    a capture that crashed the job crashed each restart). Lines that name no attempt (an older npuprof's, a
    process outside torchrun) are no earlier attempt's. Only ``host``'s: torchrun counts the attempts of
    each node apart (a node whose workers did not fail restarts them with its count unchanged), so another
    node's count is no attempt of this one's."""
    found = _request_file(directory)
    if found is None or attempt <= 0:
        return False
    earlier = (i for i in _images(directory, host) if i.attempt is not None and i.attempt < attempt)
    return _read_by(found, earlier, since)


def read_by_ended_process(
    directory: Path,
    host: str,
    began: float,
    since: float,
    runs: Callable[[int, int], bool] | None = None,
) -> bool:
    """Whether ``directory``'s profiler_config.json asks for a capture that a process of ``host`` read (by
    its lines since ``since``, epoch s) and that ended before ``began`` (epoch s, this host's clock, as the
    lines'), the start of the process that asks: that one is a restart, or a later process, whatever its
    torchrun count says (torchrun restarts the workers of a node whose own did not fail with its count
    unchanged: docs/architecture.md, "Dynamic capture"). A rank of the same attempt started late finds the
    others running, and takes a request made just before it. ``runs(pid, ticks)``: whether that process
    (its start in ticks after boot) runs now, for one killed without its last line."""
    found = _request_file(directory)
    if found is None:
        return False
    runs = runs or _runs
    ended = (i for i in _images(directory, host) if i.ended_before(began, runs))
    return _read_by(found, ended, since)


def _read_by(found: tuple[Path, float, str], images: Iterator[_Image], since: float) -> bool:
    """Whether the lines since ``since`` of ``images`` read the request ``found`` (unread_request's test)."""
    lines = ((log, fields) for image in images for log, fields in image.lines if line_time(fields) >= since)
    return _unread_in(found, lines) is None


def _runs(pid: int, ticks: int) -> bool:
    """Whether the process that began ``ticks`` after boot with ``pid`` runs on this host (no zombie)."""
    from npuprof.proc_stat import has_ended, stat_fields

    fields = stat_fields(pid)
    try:
        return not has_ended(fields[0]) and int(fields[19]) == ticks
    except (IndexError, ValueError):
        return False


_STARTED_AT_END = re.compile(r", started at tick (?P<ticks>\d+)$")  # (a path in the line may say it)


@dataclass
class _Image:
    """One process image in its action log: its lines from its first ("watching ..."), or from the log's
    first where a rotation dropped it, to the next image's."""

    pid: int
    attempt: int | None = None  # torchrun's, as its first line and heartbeats name it
    ticks: int | None = None  # its start in ticks after boot, as they name it
    ended: float | None = None  # its "the process ends" (epoch s)
    last: float = 0.0  # its last line (epoch s)
    lines: list[tuple[Path, dict[str, str]]] = field(default_factory=list)

    def ended_before(self, began: float, runs: Callable[[int, int], bool]) -> bool:
        """Whether it ended before ``began``: its last line says so, or (killed: no such line) its process
        runs no more and wrote nothing since ``began``."""
        if self.ended is not None:
            return self.ended < began
        return self.ticks is not None and self.last < began and not runs(self.pid, self.ticks)


def _images(directory: Path, host: str) -> Iterator[_Image]:
    """The process images of ``host``'s action logs, as their lines tell them apart: each begins with its
    first line ("watching ..."); a heartbeat naming another start begins another (a pid given again, its
    first line rotated away). A log's backup is read before it, so that an image's lines follow the line
    that names it."""
    from npuprof.agent.dynamic_files import LOG_DIR

    logs = sorted(
        (
            log
            for log in (directory / LOG_DIR).glob(f"{ACTION_PREFIX}*.log*")
            if (named := FILE_NAME.match(log.name)) is not None and named["host"] == host
        ),
        key=lambda p: (p.name.removesuffix(".1"), not p.name.endswith(".1")),
    )
    image: _Image | None = None
    base = ""
    for log in logs:
        if log.name.removesuffix(".1") != base and image is not None:
            yield image
            image = None
        base = log.name.removesuffix(".1")
        named = FILE_NAME.match(log.name)
        pid = int(named["pid"]) if named is not None else 0
        for fields in _parsed_lines(log):
            message = fields["message"]
            first = message.startswith(WATCHING)
            naming = first or HEARTBEAT_RE.match(message) is not None
            started = _STARTED_AT_END.search(message) if naming else None
            ticks = int(started["ticks"]) if started else None
            if image is None or first or (ticks is not None and image.ticks not in (None, ticks)):
                if image is not None:
                    yield image
                image = _Image(pid)
            if naming:
                attempt = ATTEMPT_RE.search(message)
                image.attempt = int(attempt["attempt"]) if attempt else None
                image.ticks = ticks if ticks is not None else image.ticks
            when = line_time(fields)
            image.last = max(image.last, when)
            if message == PROCESS_ENDS:
                image.ended = when
            image.lines.append((log, fields))
    if image is not None:
        yield image


class DynamicLogs:
    """The two logs of one process. Their names carry the rank, known once the process has one."""

    def __init__(self, directory: Path, rank_fn: Callable[[], int | None]) -> None:
        self.directory = directory / "log"
        # the whole name, as torch_npu's dynamic_profile logs: `npuprof status` tells by it whether a process
        # is of this host (nodes named 10.0.0.1 and 10.0.0.2, or node1.a and node1.b, share a short one)
        self.host = os.uname().nodename
        self._rank_fn = rank_fn
        self._rank: int | None = None
        self.lost = 0  # lines that could not be written

    def rank(self) -> int:
        if self._rank is None:
            try:
                self._rank = self._rank_fn()
            except Exception:
                self._rank = None
        return UNKNOWN_RANK if self._rank is None else self._rank

    def path(self, prefix: str) -> str:
        return str(self.directory / f"{prefix}{self.host}_{os.getpid()}_rank_{self.rank()}.log")

    def action(self, level: str, message: str, step: int | None = None, when: float | None = None) -> None:
        self._write(ACTION_PREFIX, format_line(level, message, step=step, when=when))

    def monitor(self, level: str, message: str) -> None:
        self._write(MONITOR_PREFIX, format_line(level, message, who="npuprof.dynamic.monitor"))

    def _write(self, prefix: str, line: str) -> None:
        if os.path.islink(self.directory.parent) or os.path.islink(self.directory):
            # the directory (or log/) replaced by a link while the job runs: never written through, as the
            # watcher never reads through one (helper-119: the logs went where the link pointed)
            self.lost += 1
            return
        if append(self.path(prefix), line):
            return
        # the directory was removed and made again while the job runs: log/ is made again (0o750), once
        # per line at most, never through a link (mkdir does not follow one)
        if self.directory.parent.is_dir() and not os.path.lexists(self.directory):
            try:
                os.mkdir(self.directory, 0o750)
            except OSError:
                pass
            else:
                if append(self.path(prefix), line):
                    return
        self.lost += 1
