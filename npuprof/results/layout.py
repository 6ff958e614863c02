"""Names and places in the result tree (docs/formats.md, "The result tree"). The one place that knows them.

Reading it is safe against what may be planted there (docs/architecture.md, "Safety"): files are opened
``O_NOFOLLOW | O_NONBLOCK`` and read only when the descriptor is a regular file (a FIFO never blocks a
reader, a symlink never leads out of the tree), small records are read up to a size cap, the walk for rank
dirs never enters a symlinked directory and stops at ``MAX_WALK_DEPTH``. Whatever is passed over is noted
(``note_skipped``) for the command to name in one warning line each (``take_skipped``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shlex
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npuprof.bounded_read import read_at_most
from npuprof.proc_stat import has_ended, start_ticks, state_of

RUN_RECORD = "npuprof_run.json"
RUN_LOG = "npuprof.log"
PENDING_DIR = ".npuprof_pending"  # lock files of background post-processors still running
REPORTED_DIR = ".npuprof_reported"  # warnings already shown on stderr in a run (one line per run)
ELSEWHERE_DIR = ".npuprof_elsewhere"  # per run and process: the directories it captured into besides -o
RANK_DIR_SUFFIX = "_ascend_pt"
PARSED_DIR = "ASCEND_PROFILER_OUTPUT"
PARSED_TRACE = "trace_view.json"  # torch_npu's parsed trace, in PARSED_DIR
BARE_TABLES_SUFFIX = ".npuprof"  # `npuprof analyse TRACE` writes a bare trace's tables to <trace>.npuprof/
CLUSTER_OUTPUT = "cluster_analysis_output"  # msprof-analyze's tables across ranks, in the result dir it read
ANALYSE_DONE = "analyse.done"
# What a parse writes whatever the trace's size: ~9 files and their directory (the tables with their
# headers, npuprof_summary.json, analyse.done) and a temp before its rename, each at least a 4 KiB page on
# tmpfs, and npuprof_summary.json's pages beyond its first (up to ~13 KiB). A 2.8 KiB capture on a 300 KiB
# tmpfs passed the check on its size alone, then hit ENOSPC. Asked for by the post-processor's parse and by
# analyse's scratch tables, beside their share of the trace's size.
PARSE_FIXED_FILES = 11
PARSE_FIXED_BYTES = 12 * 1024
PARSE_SPACE_ALLOWANCE = PARSE_FIXED_FILES * 4096 + PARSE_FIXED_BYTES
CAPTURE_RECORD = "npuprof_capture.json"  # {"status": "capturing"|"complete"|"incomplete", ...}
METADATA_FILE = "profiler_metadata.json"
KINETO_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")
CUT_BY_DEATH = ".cut.pt.trace.json"  # kept from a process killed as torch wrote it (cut_capture)

STATUS_CAPTURING = "capturing"
STATUS_COMPLETE = "complete"
STATUS_INCOMPLETE = "incomplete"
NOT_FINALISED = "the process ended before the capture was finalised"  # the detail of a record left capturing

# A capture record is ~500 bytes and ~15 a step it lists (a capture of 100,000 short steps, a --step-on
# function's or a time window's, wrote 1.5 MB: read as no record, it was called interrupted and never
# analysed; helper-152); a run record holds the configuration (metadata: at most 50 KiB of text, ~6x that
# JSON-escaped) and one line per capture.
RECORD_LIMIT = 1 << 20
RUN_RECORD_LIMIT = 16 << 20
CAPTURE_RECORD_LIMIT = 16 << 20
MAX_WALK_DEPTH = 12  # directory levels searched below the given path for rank dirs

_RANK_DIR_RE = re.compile(r"^(?P<worker>.+)_(?P<pid>\d+)_(?P<stamp>\d{17})_ascend_pt$")
_INFO_RE = re.compile(r"^profiler_info(?:_(?P<rank>\d+))?\.json$")
_RUN_RECORD_RE = re.compile(r"^npuprof_run(?:\.[0-9.]+)?\.json$")
# torch_npu's db export, in PARSED_DIR: the name msprof-analyze looks for to take a rank dir as db data
PROFILER_DB_RE = re.compile(r"^ascend_pytorch_profiler(?:_\d+)?\.db$")
ANALYSIS_DB = "analysis.db"
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def timestamp_ms(now: float | None = None) -> str:
    """Local time as YYYYmmddHHMMSSmmm (17 digits)."""
    now = time.time() if now is None else now
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"


def rank_dir_name(worker: str, pid: int, stamp: str) -> str:
    return f"{worker}_{pid}_{stamp}{RANK_DIR_SUFFIX}"


def new_rank_dir(output: Path, worker: str) -> Path:
    """Make this process's next rank dir in ``output`` (mode 0o750), named by the millisecond it begins, or
    the first one after it not taken: two captures begun within one millisecond (--wait 0 --warmup 0
    --active 1 on a fast step), or a clock set back, lost the second capture ("File exists": helper-129).
    Raises OSError."""
    now = time.time()
    for tick in range(1000):
        rank_dir = output / rank_dir_name(worker, os.getpid(), timestamp_ms(now + tick / 1000))
        try:
            rank_dir.mkdir(mode=0o750)
        except FileExistsError:
            continue
        return rank_dir
    raise FileExistsError(
        errno.EEXIST, "a rank dir of this process for each millisecond of a second", str(output)
    )


def info_file_name(rank: int | None) -> str:
    return "profiler_info.json" if rank is None else f"profiler_info_{rank}.json"


def trace_file_name(worker: str, time_ns: int, gzip: bool) -> str:
    return f"{worker}.{time_ns}.pt.trace.json" + (".gz" if gzip else "")


def profiler_db_name(rank: int | None) -> str:
    """torch_npu's per-rank db: ``ascend_pytorch_profiler_{rank}.db``, without a rank
    ``ascend_pytorch_profiler.db``."""
    return "ascend_pytorch_profiler.db" if rank is None else f"ascend_pytorch_profiler_{rank}.db"


def has_profiler_db(rank_dir: Path) -> bool:
    """A regular file named as torch_npu's per-rank db (PROFILER_DB_RE) in ``rank_dir/PARSED_DIR``: what
    msprof-analyze looks for. A symbolic link, of that name or as PARSED_DIR, does not count."""
    return holds_profiler_db(rank_dir / PARSED_DIR)


TORCH_NPU_TABLES = ("step_trace_time.csv", "kernel_details.csv")  # what tells a torch_npu parse that wrote


def has_torch_npu_tables(rank_dir: Path) -> bool:
    """torch_npu's parse wrote its tables (a step or kernel table, or its db) into ``rank_dir/PARSED_DIR``:
    its analyse.done alone says nothing (written whatever the outcome since 2026-01)."""
    parsed = rank_dir / PARSED_DIR
    return any((parsed / name).is_file() for name in TORCH_NPU_TABLES) or has_profiler_db(rank_dir)


# a torch_npu capture whose parse wrote its trace_view.json and neither table (helper-214: one that the
# script's own profiler cut off at a step's start, no device work in it, was said "not parsed ... npuprof
# analyse parses them", and analyse then said torch_npu's parser "wrote none of its tables")
TORCH_NPU_NO_DEVICE_TABLES = (
    "torch_npu parsed it but wrote no kernel_details.csv or step_trace_time.csv: it found no device work "
    "there (a capture cut off at a step's start holds none), or its device data did not parse (torch_npu's "
    "messages say which); npuprof analyse reads its trace_view.json instead"
)


# the same, of a capture whose profiler was not given the NPU activity: torch_npu collects no device data
# then and writes no device table by design (helper-218: the note above blamed its parse)
TORCH_NPU_CPU_ACTIVITY_ONLY = (
    "recorded with the CPU activity only (--activities cpu): torch_npu collects no device data then and "
    "writes no kernel_details.csv or step_trace_time.csv; npuprof analyse reads its trace_view.json (the "
    "host's side)"
)


def torch_npu_no_device_tables_note(rank_dir: Path) -> str:
    """What to say of a rank dir ``torch_npu_parsed_without_device_tables``: why it has no device table."""
    activities = torch_npu_activities(rank_dir)
    if activities is not None and "NPU" not in activities:
        return TORCH_NPU_CPU_ACTIVITY_ONLY
    return TORCH_NPU_NO_DEVICE_TABLES


def torch_npu_parsed_without_device_tables(rank_dir: Path) -> bool:
    """torch_npu's parse of ``rank_dir`` wrote its trace_view.json (host side) but neither of its step and
    kernel tables nor its db: parsed, with nothing of the device in its tables."""
    view = rank_dir / PARSED_DIR / "trace_view.json"
    return view.is_file() and not view.is_symlink() and not has_torch_npu_tables(rank_dir)


def holds_profiler_db(parsed: Path) -> bool:
    """:func:`has_profiler_db` for the directory the tables are in (a bare trace's ``<trace>.npuprof/``)."""
    if not _is_real_dir(parsed):
        return False
    try:
        with os.scandir(parsed) as entries:
            for entry in entries:
                if PROFILER_DB_RE.match(entry.name) is None:
                    continue
                if entry.is_file(follow_symlinks=False):
                    return True
    except OSError:
        return False
    return False


# ---- what was passed over -------------------------------------------------------------------------
_skipped: dict[str, str] = {}


def note_skipped(path: str | os.PathLike[str], why: str) -> None:
    """Remember an entry a reader passed over (a symlink, a FIFO, a record too large), once per path."""
    _skipped.setdefault(os.fspath(path), why)


def take_skipped() -> list[str]:
    """``"<path>: <why>"`` for each entry passed over since the last call, in the order met."""
    lines = [f"{path}: {why}" for path, why in _skipped.items()]
    _skipped.clear()
    return lines


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _not_regular(path: str | os.PathLike[str], mode: int) -> str:
    why = f"{_kind(mode)}, not a regular file: not read"
    if stat.S_ISLNK(mode):
        why = "a symbolic link: not followed"
    note_skipped(path, why)
    return why


# ---- safe reading ---------------------------------------------------------------------------------
class UnsafeFileError(OSError):
    """A result file that is not read: a symbolic link, a FIFO or another non-regular file, or one over
    its size cap. The message says which, in a few words."""


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor on ``path`` if it is a regular file, opened without following a final
    symbolic link and without blocking (a FIFO); raises UnsafeFileError (noted) or OSError."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symbolic link (O_NOFOLLOW), a socket
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(mode):
                raise UnsafeFileError(exc.errno, _not_regular(path, mode)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFileError(0, _not_regular(path, mode))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_small(path: str | os.PathLike[str], limit: int = RECORD_LIMIT) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` (UnsafeFileError beyond: a record that
    large is not one npuprof wrote)."""
    fd = open_regular(path)
    try:
        data = read_at_most(fd, limit)
    finally:
        os.close(fd)
    if len(data) > limit:
        why = f"over {limit >> 10} KiB, too large for an npuprof record: not read"
        note_skipped(path, why)
        raise UnsafeFileError(0, why)
    return data


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """All the bytes of the regular file ``path``, opened as :func:`open_regular` does (a FIFO planted in
    its place never blocks the reader: helper-129); raises UnsafeFileError (noted) or OSError."""
    with open(open_regular(path), "rb") as handle:
        return handle.read()


def read_json_record(path: str | os.PathLike[str], limit: int = RECORD_LIMIT) -> Any:
    """A small JSON record, read as ``read_small`` does; raises OSError or ValueError (RecursionError
    included) with a short message."""
    data = read_small(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _is_real_dir(path: Path) -> bool:
    """A directory, not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


# ---- rank dirs ------------------------------------------------------------------------------------
def is_rank_dir(path: Path) -> bool:
    return path.is_dir() and path.name.endswith(RANK_DIR_SUFFIX)


def is_bare_trace_tables(path: Path) -> bool:
    """Whether ``path`` is the folder `npuprof analyse TRACE` wrote a bare trace's tables to: beside the
    trace, or left behind by it (the trace gunzipped, renamed or moved since: its finished tables and no
    rank dir's own entries), which would otherwise be read as a capture by its profiler_info.json and
    report the old trace in place of a new one beside it."""
    trace = path.name.removesuffix(BARE_TABLES_SUFFIX)
    if not trace or trace == path.name:
        return False
    if (path.parent / trace).is_file():
        return True
    rank_dirs_own = (PARSED_DIR, "FRAMEWORK", CAPTURE_RECORD)
    return (path / ANALYSE_DONE).is_file() and not any((path / name).exists() for name in rank_dirs_own)


def holds_a_capture(path: Path) -> bool:
    """Whether ``path`` holds what a rank dir holds (a capture record, profiler_info*.json, torch_npu's
    ASCEND_PROFILER_OUTPUT/ or FRAMEWORK/), whatever its name: a rank dir renamed, or copied under
    another name. A bare trace's tables (:func:`is_bare_trace_tables`) are none, their profiler_info.json
    (written for msprof-analyze) notwithstanding."""
    if is_bare_trace_tables(path):
        return False
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name in (PARSED_DIR, "FRAMEWORK") and entry.is_dir(follow_symlinks=False):
                    return True
                if (entry.name == CAPTURE_RECORD or _INFO_RE.match(entry.name)) and entry.is_file(
                    follow_symlinks=False
                ):
                    return True
    except OSError:
        return False
    return False


def holds_ascend_raw_data(rank_dir: Path) -> bool:
    """Whether ``rank_dir`` holds torch_npu's raw data for its parser: FRAMEWORK/ or a PROF_* directory. A
    capture of the CPU activity alone has FRAMEWORK/ only (torch_npu collects no CANN data then)."""
    return (rank_dir / "FRAMEWORK").is_dir() or any(p.is_dir() for p in rank_dir.glob("PROF_*"))


def holds_rank_dirs_only(path: Path) -> bool:
    """A directory named like a rank dir that holds no capture of its own (no record, info, tables or
    trace) but rank dirs: a result dir renamed or copied as ``exp_ascend_pt``. It is searched, not read as
    a capture without a trace (helper-112: "missing: no trace in this directory", its ranks unread)."""
    if holds_a_capture(path):
        return False
    subdirs = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False) and entry.name.endswith(KINETO_SUFFIXES):
                    return False
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(Path(entry.path))
    except OSError:
        return False
    return any(sub.name.endswith(RANK_DIR_SUFFIX) or holds_a_capture(sub) for sub in subdirs)


def find_rank_dirs(root: Path, levels: int | None = None) -> list[Path]:
    """``root`` itself when it is a rank dir, else the rank dirs below it, sorted: at most ``levels``
    (default MAX_WALK_DEPTH) levels down, never through a symbolic link (noted), never into a rank dir.
    A rank dir is known by its name (``*_ascend_pt``) or by what it holds (:func:`holds_a_capture`: one
    renamed, or copied as ``rank1/``). ``root`` is followed as given."""
    if (is_rank_dir(root) and not holds_rank_dirs_only(root)) or (root.is_dir() and holds_a_capture(root)):
        return [root]
    found: list[Path] = []
    _walk(root, 1, found, MAX_WALK_DEPTH if levels is None else levels)
    return sorted(found)


def _walk(directory: Path, depth: int, found: list[Path], levels: int) -> None:
    try:
        with os.scandir(directory) as entries:
            listed = sorted(entries, key=lambda e: e.name)
    except OSError:
        if depth == 1:
            raise
        return
    for entry in listed:
        try:
            if entry.is_symlink():
                if entry.name.endswith(RANK_DIR_SUFFIX) or (depth < levels and entry.is_dir()):
                    note_skipped(entry.path, "a symbolic link to a directory: not followed")
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        path = Path(entry.path)
        by_name = entry.name.endswith(RANK_DIR_SUFFIX) and not holds_rank_dirs_only(path)
        if by_name or holds_a_capture(path):  # or renamed
            found.append(path)
        elif depth >= levels:
            if levels == MAX_WALK_DEPTH:
                note_skipped(path, f"deeper than {MAX_WALK_DEPTH} levels below the given path: not searched")
        else:
            _walk(path, depth + 1, found, levels)


def _regular_entries(directory: Path) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` that are regular files (not links to one); the others of a name npuprof
    reads (traces, records) are noted."""
    regular = []
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    regular.append(entry)
                elif is_result_file_name(entry.name):
                    _not_regular(entry.path, entry.stat(follow_symlinks=False).st_mode)
            except OSError:
                continue
    return regular


def is_run_file_name(name: str) -> bool:
    """A name of a run's own files in its output dir: its record (npuprof_run[.<stamp>].json) or its log."""
    return name == RUN_LOG or name.startswith(RUN_LOG + ".") or _RUN_RECORD_RE.match(name) is not None


def is_result_file_name(name: str) -> bool:
    """A name of the capture's own files: a Kineto trace, the capture record, metadata, profiler_info."""
    return (
        name.endswith(KINETO_SUFFIXES)
        or name in (CAPTURE_RECORD, METADATA_FILE)
        or _INFO_RE.match(name) is not None
    )


def _note_other_traces(rank_dir: Path, entries: list[os.DirEntry[str]], chosen: str) -> None:
    """Name the other Kineto traces of a rank dir, which are not read (one capture, one trace: a second
    was put there by hand). A trace and its ``.gz`` are one (the post-processor gzips it)."""
    base = chosen.removesuffix(".gz")
    for entry in entries:
        name = entry.name
        if name.endswith(KINETO_SUFFIXES) and not name.startswith(".") and name.removesuffix(".gz") != base:
            note_skipped(rank_dir / name, f"a second trace in the rank dir: only {chosen} is read")


def find_raw_trace(rank_dir: Path) -> Path | None:
    """The raw Kineto trace of a rank dir: the finished ``.gz`` if present, else the plain json. Only a
    regular file counts: a symbolic link or a FIFO of that name is passed over (noted)."""
    entries = _regular_entries(rank_dir)
    for suffix in KINETO_SUFFIXES:
        found = sorted(e.name for e in entries if e.name.endswith(suffix) and not e.name.startswith("."))
        if found:
            _note_other_traces(rank_dir, entries, found[-1])
            return rank_dir / found[-1]
    # A trace under another name (``prof.export_chrome_trace("trace.json")``): decided by its content.
    others = sorted(
        (
            e.name
            for e in entries
            if e.name.endswith((".json", ".gz"))
            and not e.name.startswith(".")
            and not is_result_file_name(e.name)
        ),
        reverse=True,
    )
    if others:
        from npuprof.analysis.trace_loader import sniff_trace

        for name in others:
            if sniff_trace(rank_dir / name):
                return rank_dir / name
    return None


def find_trace_of_rank(rank_dir: Path) -> Path | None:
    """The trace the reports read in a rank dir: its raw Kineto trace (:func:`find_raw_trace`), else the
    ``trace_view.json`` of torch_npu's parse (a regular file only)."""
    raw = find_raw_trace(rank_dir)
    if raw is not None:
        return raw
    parsed = rank_dir / PARSED_DIR / PARSED_TRACE
    return parsed if parsed.is_file() and not parsed.is_symlink() else None


def rank_of(rank_dir: Path) -> int | None:
    """The rank, taken (as msprof-analyze does) only from the name profiler_info_{rank}.json."""
    for p in rank_dir.iterdir():
        match = _INFO_RE.match(p.name)
        if match and match.group("rank") is not None:
            return int(match.group("rank"))
    return None


def torch_npu_activities(rank_dir: Path) -> set[str] | None:
    """The activities a torch_npu profiler was given, from its profiler_info*.json
    (``config.common_config.activities``, ``["ProfilerActivity.CPU", ...]``): ``{"CPU", "NPU"}`` or part
    of it; None when no such file says (none, not a regular file, over 1 MiB, damaged)."""
    listed = _common_config_value(rank_dir, "activities")
    if isinstance(listed, list) and all(isinstance(a, str) for a in listed):
        return {a.rsplit(".", 1)[-1].upper() for a in listed}
    return None


def recorded_option(rank_dir: Path, key: str) -> bool | None:
    """A collection option the capture was made with (profiler_info*.json's ``config.common_config``:
    ``with_stack``, ``profile_memory``...; with --dynamic each request sets them); None when no file says."""
    said = _common_config_value(rank_dir, key)
    return said if isinstance(said, bool) else None


def recorded_with_stack(rank_dir: Path) -> bool | None:
    """Whether the capture was recorded with Python stacks (its profiler_info's ``with_stack``, as npuprof
    and torch_npu write it); None where no profiler_info says (a bare trace, another tool's capture)."""
    value = _common_config_value(rank_dir, "with_stack")
    return value if isinstance(value, bool) else None


def _common_config_value(rank_dir: Path, key: str) -> Any:
    """``config.common_config[key]`` of the first profiler_info*.json of ``rank_dir`` that holds it, else
    None (none, not a regular file, over 1 MiB, damaged)."""
    return next(_profiler_info_values(rank_dir, "config", "common_config", key), None)


def _profiler_info_values(rank_dir: Path, *keys: str) -> Iterator[Any]:
    """The value under ``keys`` (nested) of each of ``rank_dir``'s profiler_info*.json files that holds
    one, in name order (a file that is not a regular file, over 1 MiB or damaged is passed over)."""
    try:
        infos = sorted(p for p in rank_dir.iterdir() if _INFO_RE.match(p.name))
    except OSError:
        return
    for path in infos:
        try:
            value = read_json_record(path, 1 << 20)
            for key in keys:
                value = value[key]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        yield value


def capture_began_ns(rank_dir: Path) -> int | None:
    """When the capture in ``rank_dir`` began, in ns since the epoch: its profiler_info*.json's
    ``start_info.collectionTimeBegin`` (torch_npu writes it too), else its name's local time; None when
    neither says. The name alone does not order a long job's captures: its local time goes back an hour
    at a daylight-saving change."""
    began = _start_info(rank_dir, "collectionTimeBegin", lowest=1)
    if began is not None:
        # npuprof's are ns; a value of microseconds (msprof's unit) is made ns, so that both order alike
        return began if began >= 10**17 else began * 1000
    named = parse_rank_dir_name(rank_dir.name)
    if named is None:
        return None
    stamp = named["stamp"]
    try:
        seconds = time.mktime(time.strptime(stamp[:14], "%Y%m%d%H%M%S"))
    except (ValueError, OverflowError):
        return None
    return int(seconds) * 1_000_000_000 + int(stamp[14:17] or 0) * 1_000_000


def capture_began_monotonic_ns(rank_dir: Path) -> int | None:
    """When the capture in ``rank_dir`` began on its process's monotonic clock (ns): its profiler_info*.json's
    ``start_info.MonotonicTimeBegin`` (npuprof's agent writes it, agent/capture.py); None where none says.
    Unlike ``collectionTimeBegin`` it never steps back (an NTP or hand-set clock), so it orders one process's
    captures; it says nothing across processes, hosts or reboots."""
    return _start_info(rank_dir, "MonotonicTimeBegin", lowest=0)


def _start_info(rank_dir: Path, key: str, lowest: int) -> int | None:
    """The first whole number of at least ``lowest`` (or a string of digits) under ``start_info.KEY`` of
    ``rank_dir``'s profiler_info*.json files, in name order; None where none has one."""
    for value in _profiler_info_values(rank_dir, "start_info", key):
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= lowest:
            return value
    return None


@dataclass(frozen=True)
class CaptureStatus:
    status: str  # complete | incomplete | capturing (still recording: its run is alive) | unknown
    detail: str = ""

    @property
    def complete(self) -> bool:
        return self.status == STATUS_COMPLETE

    @property
    def in_progress(self) -> bool:
        return self.status == STATUS_CAPTURING


def read_capture_record(rank_dir: Path) -> dict[str, Any] | None:
    """The capture record of ``rank_dir`` as a dict, or None when it is missing or cannot be read."""
    try:
        data = read_json_record(rank_dir / CAPTURE_RECORD, CAPTURE_RECORD_LIMIT)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def capture_status(rank_dir: Path) -> CaptureStatus:
    """Whether the capture in ``rank_dir`` finished. Dirs not written by npuprof count as complete
    when they hold a trace (e.g. torch_npu's own output). A record still "capturing" is in progress
    (status ``capturing``) while the launcher of its run still runs on this host, else incomplete."""
    record = rank_dir / CAPTURE_RECORD
    if not os.path.lexists(record):
        has_data = find_raw_trace(rank_dir) is not None or holds_ascend_raw_data(rank_dir)
        return CaptureStatus(STATUS_COMPLETE if has_data else "unknown", "no npuprof capture record")
    try:
        data = read_json_record(record, CAPTURE_RECORD_LIMIT)
    except UnsafeFileError as exc:
        return CaptureStatus(STATUS_INCOMPLETE, f"{CAPTURE_RECORD} is {exc.strerror}")
    except (OSError, ValueError) as exc:
        return CaptureStatus(STATUS_INCOMPLETE, f"unreadable {CAPTURE_RECORD}: {exc}")
    from npuprof.results.handover import HandoverError, record_from

    try:
        record = record_from(data)
    except HandoverError as exc:
        return CaptureStatus(STATUS_INCOMPLETE, f"unreadable {CAPTURE_RECORD}: {exc}")
    status, detail = record.status, record.detail
    if status == STATUS_CAPTURING and record_not_finalised_but_trace_whole(rank_dir, record.backend):
        return CaptureStatus(STATUS_COMPLETE, UNFINALISED_RECORD)
    if status == STATUS_CAPTURING:
        alive = live_launcher(rank_dir.parent, record.run_id)
        if alive and not _capturing_process_gone(rank_dir, record.pid, record.host, record.updated_ns):
            return CaptureStatus(STATUS_CAPTURING, f"in progress: its run is still going ({alive})")
        if (elsewhere := launcher_elsewhere(rank_dir.parent, record.run_id)) is not None:
            return CaptureStatus(STATUS_CAPTURING, f"in progress: {elsewhere}")
        if _capturing_process_lives(rank_dir, record.pid, record.run_id, record.updated_ns, record.host):
            still = f"in progress: its process (pid {record.pid}) still runs, " + (
                "after the job's first process ended"
                if _asked_by_its_launcher(rank_dir.parent, record.run_id)
                else "its npuprof run gone"
            )
            return CaptureStatus(STATUS_CAPTURING, still)
        return CaptureStatus(STATUS_INCOMPLETE, detail or NOT_FINALISED)
    return CaptureStatus(status, detail)


UNFINALISED_RECORD = (
    "its record was never finalised (the process was killed, or the disk was full, right after its trace was "
    "written), but its trace is whole"
)


def record_not_finalised_but_trace_whole(rank_dir: Path, backend: str | None) -> bool:
    """A record still "capturing" beside a whole Kineto trace: npuprof writes the trace only once the
    capture has ended (to a temporary name, then renamed), so the record's own update was what failed (a
    full disk took it and the post-processor's too). torch_npu writes no such trace (it is not asked)."""
    if backend == "torch_npu":
        return False
    trace = find_raw_trace(rank_dir)
    if trace is None or trace.name.endswith(CUT_BY_DEATH):  # its writer died inside it: never complete
        return False
    if trace.name.endswith(".gz"):
        return True  # gzipped by the post-processor from a whole trace, to a temporary name first
    try:
        return ends_like_json(trace, (b"}", b"]"))
    except OSError:
        return False


def ends_like_json(path: Path, closers: tuple[bytes, ...] = (b"}",)) -> bool:
    """The file ends as a whole JSON document does (whitespace and NUL padding aside): with one of
    ``closers`` (a Kineto trace is an object; torch_npu's trace_view.json an array). Raises OSError."""
    with open(path, "rb") as handle:
        handle.seek(max(handle.seek(0, os.SEEK_END) - 64, 0))
        return handle.read().rstrip(b" \t\r\n\x0b\x0c\x00").endswith(closers)


def short_host_name() -> str:
    """This host's name up to its first dot (as socket.gethostname() gives it, without the import): the
    prefix of the rank dirs npuprof names without --worker-name. A host named by its IP address keeps the
    whole address: cut, every node of 10.0.0.0/8 would be "10"."""
    name = os.uname().nodename
    return name if _is_ip_address(name) else name.split(".")[0] or "host"


def _is_ip_address(name: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _ran_here(rank_dir: Path, pid: Any, host: Any) -> bool:
    """Whether the process ``pid`` that captured into ``rank_dir`` ran on this host: its record's ``host``
    says so, or (a record of older npuprof, without one) the dir's name starts with this host's short
    name and its pid, as npuprof names it without --worker-name. A dir named by --worker-name was never
    taken to be this host's: its process killed (kill -9) read "in progress" as long as its run went on."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if isinstance(host, str):
        return host == os.uname().nodename
    return rank_dir.name.startswith(f"{short_host_name()}_{pid}_")


def _capturing_process_gone(rank_dir: Path, pid: Any, host: Any = None, began_ns: Any = None) -> bool:
    """The process that captured into ``rank_dir`` ran on this host (:func:`_ran_here`) and is gone:
    killed, while its run goes on (a subprocess of the script, a torchrun worker restarted). A zombie (killed,
    its parent not reaping it yet) is gone, and so is a pid a process begun after the record's ``began_ns``
    has now (a restarted worker can get it again): both read "in progress" for as long as the run went on."""
    if not _ran_here(rank_dir, pid, host):
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # a pid beyond any pid_t: none runs (helper-208)
        return True
    except OSError:
        return False
    from npuprof.job_processes import ended_unreaped

    ended = ended_unreaped(pid)
    if ended is not False:
        return bool(ended)  # None: /proc cannot tell
    return isinstance(began_ns, int) and started_after(pid, began_ns / 1e9)


def _asked_by_its_launcher(output: Path, run_id: Any) -> bool:
    """This process is the `npuprof run` of the run ``run_id`` (its summary, the job ended: torchrun
    killed, its ranks training on): that run is not gone, as live_launcher, asked by it, would say."""
    record = run_record_of(output, run_id) if isinstance(run_id, str) and run_id else None
    return (
        record is not None
        and record.get("launcher_pid") == os.getpid()
        and record.get("host") == os.uname().nodename
    )


def _capturing_process_lives(
    rank_dir: Path, pid: Any, run_id: str | None, began_ns: Any, host: Any = None
) -> bool:
    """The process that captured into ``rank_dir`` on this host still runs, though its launcher is gone: a
    job whose first process is not Python (`bash -c "python train.py; ..."`) runs on after `npuprof run`
    was killed, and its capture in flight was called interrupted while it recorded (helper-158). Told by
    the run's payload in its environment and a start before the capture's (not a pid used again)."""
    if not _ran_here(rank_dir, pid, host) or not isinstance(began_ns, int):
        return False
    from npuprof.job_processes import is_a_process_of_run

    started = process_start_time(pid)
    return started is not None and started <= began_ns / 1e9 and is_a_process_of_run(pid, run_id)


def owner_of_tables_folder(path: Path) -> Path | None:
    """The rank dir whose PARSED_DIR ``path`` is (named so, ``.`` inside it, or a link to it), resolved;
    None for any other path."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    return real.parent if real.name == PARSED_DIR and real.is_dir() else None


def owner_of_raw_data_folder(path: Path) -> Path | None:
    """The rank dir whose torch_npu raw data folder ``path`` is (its FRAMEWORK/ or a PROF_* folder, as
    torch_npu lays them out: docs/formats.md; ``.`` inside it, or a link to it, too), as the user named it;
    None for any other path."""
    try:
        real = path if path.name not in ("", ".") and not path.is_symlink() else path.resolve()
        if not real.is_dir() or not (real.name == "FRAMEWORK" or real.name.startswith("PROF_")):
            return None
    except (OSError, RuntimeError):
        return None
    owner = Path.cwd() if real.parent == Path(".") else real.parent  # PROF_x given from inside: named
    return owner if is_rank_dir(owner) or holds_a_capture(owner) else None


# Why a record's first_step_partial step is no whole step, for the run's summary and analyse. A capture from
# the start (--skip-first 0) begins with step 0 itself, which runs from the first optimizer's creation: the
# words were "the capture began inside this step", untrue there (docs/formats.md, first_step_partial).
FIRST_STEP_PARTIAL_WHY = (
    "not a whole training step: it holds the set-up since the first optimizer was made, or began where a "
    "time window opened"
)


def partial_first_step(record: dict[str, Any] | None) -> int | None:
    """The step a capture began inside of (a time window opened between two boundaries), or None."""
    if not record or record.get("first_step_partial") is not True:
        return None
    steps = record.get("steps")
    first = steps[0] if isinstance(steps, list) and steps else None
    return first if isinstance(first, int) and not isinstance(first, bool) else None


def partial_step(record: dict[str, Any] | None) -> int | None:
    """The step a finished capture ended inside of: the last of its steps, when the capture was finished
    early (training ended, SIGTERM, the script's own profiler: the record says why in ``detail``)."""
    if not record or record.get("status") != STATUS_COMPLETE:
        return None
    said = record.get("last_step_partial")
    if said is False or (said is None and not record.get("detail")):
        return None  # a stop at a step boundary ("the script started its own profiler") keeps it whole
    steps = record.get("steps")
    if not isinstance(steps, list) or not steps:
        return None
    last = steps[-1]
    return last if isinstance(last, int) and not isinstance(last, bool) else None


# ---- captures a run wrote outside its -o (--dynamic's prof_dir) -------------------------------------------
def note_capture_root(output: Path, run_id: str, root: Path) -> None:
    """Remember in ``output`` that run ``run_id`` captured into ``root`` (a --dynamic request's prof_dir
    outside ``output``), so that the run's summary, record and report find those captures too. One file
    per process, a line per directory, appended (never followed if it is a link)."""
    from npuprof.results.logfile import write_whole

    folder = output / ELSEWHERE_DIR
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o750)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)  # a link: ELOOP
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(f"{run_id}.{os.uname().nodename}.{os.getpid()}", flags, 0o640, dir_fd=dir_fd)
        try:
            # a line a full disk cut short is taken back: none joins the next into another path
            write_whole(fd, os.fspath(root) + "\n", "surrogateescape")
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def capture_roots(output: Path, run_id: str) -> list[Path]:
    """The directories besides ``output`` that run ``run_id`` captured into (:func:`note_capture_root`)."""
    folder = output / ELSEWHERE_DIR
    roots: list[Path] = []
    if not _is_real_dir(folder):  # never through a link planted there
        return roots
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(f"{run_id}."))
    except OSError:
        return roots
    for name in names:
        try:
            text = read_small(folder / name, RUN_RECORD_LIMIT).decode("utf-8", "surrogateescape")
        except (OSError, ValueError):
            continue
        for line in text.splitlines():
            root = Path(line)
            if line and root.is_absolute() and root not in roots:
                roots.append(root)
    return roots


def roots_of_the_runs_in(path: Path) -> list[Path]:
    """The directories besides ``path`` that the runs recorded in it captured into (--dynamic prof_dir)."""
    roots: list[Path] = []
    for _record_path, record in read_run_records(path):
        run_id = record.get("run_id")
        if isinstance(run_id, str):
            roots += [r for r in capture_roots(path, run_id) if r not in roots]
    return roots


def parse_at_work(out_dir: Path) -> bool:
    """Whether a parse holds ``out_dir``'s lock now (``analysis.parse.alone_in``): an `npuprof analyse`
    (``--force`` takes ``analyse.done`` away while it writes), or a post-processor still at work. Asked
    without waiting; a parse that starts in that instant only takes itself for not alone."""
    import fcntl

    try:
        fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


# ---- runs still going -----------------------------------------------------------------------------
def run_records(output: Path) -> list[Path]:
    """The run records (npuprof_run.json, npuprof_run.<stamp>.json) directly in ``output``."""
    try:
        with os.scandir(output) as entries:
            return sorted(Path(e.path) for e in entries if _RUN_RECORD_RE.match(e.name))
    except OSError:
        return []


def read_run_records(output: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Each readable run record in ``output`` (:func:`run_records`) with its JSON object; the others passed
    over."""
    for path in run_records(output):
        try:
            record = read_json_record(path, RUN_RECORD_LIMIT)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            yield path, record


_LIVE_CACHE_S = 2.0
_live_cache: dict[tuple[str, str], tuple[float, str | None]] = {}


def live_launcher(output: Path, run_id: Any) -> str | None:
    """``"npuprof pid N on HOST"`` when the run ``run_id`` recorded in ``output`` has not ended and its
    launcher is alive on this host (the record's host is this one, the pid runs and started no later
    than the run), else None. A launcher asking about its own run is not "alive" here. Answers are
    kept for a moment: a thousand ranks of one run read its records once."""
    if not isinstance(run_id, str) or not run_id:
        return None
    key = (os.fspath(output), run_id)
    now = time.monotonic()
    cached = _live_cache.get(key)
    if cached is not None and now - cached[0] < _LIVE_CACHE_S:
        return cached[1]
    answer = _live_launcher(output, run_id)
    _live_cache[key] = (now, answer)
    return answer


def launcher_elsewhere(output: Path, run_id: Any) -> str | None:
    """Why a capture of the run ``run_id`` may still record, when its run record has no end and names
    another host (a multi-node job on a shared file system, analysed from a login node): nothing here can
    tell whether its launcher lives (helper-129: its captures read "the process ended" while they
    recorded). None for a run of this host, or one that has ended. No age ends this (helper-134): a
    heartbeat or the record's mtime stops as well for a launcher stopped (Ctrl-Z, a scheduler's suspend, a
    frozen cgroup) or stalled on the file system, which resumes; calling it dead would remove its
    post-processor's files under it (parse._run_goes_on_elsewhere)."""
    record = run_record_of(output, run_id) if isinstance(run_id, str) and run_id else None
    return record_elsewhere(record) if record is not None else None


def record_elsewhere(record: dict[str, Any]) -> str | None:
    """:func:`launcher_elsewhere` for a run record already read."""
    host, pid = record.get("host"), record.get("launcher_pid")
    if record.get("end") is not None or not isinstance(host, str) or host == os.uname().nodename:
        return None
    return (
        f"its run has not ended on {host} (npuprof pid {pid} there, which this host cannot check: still "
        "recording, or stopped with that host)"
    )


def run_of_capture_going(rank_dir: Path) -> str | None:
    """Why the run that made the capture ``rank_dir`` has not ended (``"npuprof pid N on HOST"``, or the
    other host's words), or None: while it goes, its post-processor may still write into the capture."""
    run_id = (read_capture_record(rank_dir) or {}).get("run_id")
    return live_launcher(rank_dir.parent, run_id) or launcher_elsewhere(rank_dir.parent, run_id)


def _claimed_at(record_path: Path) -> str:
    """The stamp of a run record's name (``npuprof_run.<YYYYmmddHHMMSSmmm>.<pid>.json``), which orders the
    records claimed within one second; ``""`` for ``npuprof_run.json``, the first run's."""
    return record_path.name.removeprefix("npuprof_run").removesuffix(".json")


def run_without_captures(output: Path) -> str | None:
    """What to say of ``output`` when a report command finds no capture in it but run records: the latest
    run's command and why it wrote none, as its end said (the record's ``no_capture``). None when
    ``output`` holds no run record, or when that run still goes (its captures may yet come: each command
    says so its own way)."""
    records = list(read_run_records(output))
    if not records:
        return None
    # a record's start is to the second: two runs started within one (a script's loop of short runs) are
    # told apart by the time of day its name took when claimed (results/run_record.claim_record_path)
    _path, latest = max(
        records, key=lambda found: (iso_seconds(found[1].get("start")) or 0.0, _claimed_at(found[0]))
    )
    if record_launcher_alive(latest) or record_elsewhere(latest):
        return None
    command = latest.get("command")
    ran = "npuprof run" + (f" -- {shlex.join(map(str, command))}" if isinstance(command, list) else "")
    said = latest.get("no_capture")
    if isinstance(said, str) and said:
        return f"{output} is the output of {ran}, whose end said: {said}"
    return (
        f"{output} is the output of {ran}, which wrote no capture; {output / 'npuprof.log'} tells what "
        "its processes did"
    )


def run_record_of(output: Path, run_id: Any) -> dict[str, Any] | None:
    """The run record of ``run_id`` in ``output``, or None."""
    for _path, record in read_run_records(output):
        if isinstance(run_id, str) and record.get("run_id") == run_id:
            return record
    return None


def _live_launcher(output: Path, run_id: str) -> str | None:
    record = run_record_of(output, run_id)
    return record_launcher_alive(record) if record is not None else None


def record_launcher_alive(record: dict[str, Any]) -> str | None:
    """``"npuprof pid N on HOST"`` when the run of this run record has not ended and its launcher is
    alive on this host (see live_launcher), else None."""
    pid, host = record.get("launcher_pid"), record.get("host")
    if record.get("end") is not None or not isinstance(pid, int) or isinstance(pid, bool):
        return None
    if host != os.uname().nodename or pid == os.getpid() or pid <= 0:
        return None
    if _alive_since(pid, record.get("start")):
        return f"npuprof pid {pid} on {host}"
    return None


def _alive_since(pid: int, start: Any) -> bool:
    """``pid`` runs (not a zombie) and, where /proc tells, is an npuprof that started no later than
    ``start`` (the record's ISO time, to the second): a pid reused by a later process does not count."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # a record's pid beyond any pid_t (helper-208)
        return False
    except PermissionError:
        pass
    except OSError:
        return False
    state = state_of(pid)
    if state is None:
        return True  # no /proc: the signal check is all there is
    if has_ended(state):
        return False
    with contextlib.suppress(OSError):  # another program under a pid that collides (a container's)
        if b"npuprof" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
    started = process_start_time(pid)
    recorded = iso_seconds(start)
    return started is None or recorded is None or started <= recorded + 2


def process_start_time(pid: int | str = "self") -> float | None:
    """When process ``pid`` began (epoch s, to the clock tick), from /proc; None where that is not known."""
    ticks = start_ticks(pid)
    return None if ticks is None else _process_start(ticks)


def started_after(pid: int, when: float) -> bool:
    """Whether the process that has ``pid`` now began after ``when`` (epoch s): it is then another one than
    a writer seen before ``when``, given the pid again (a container's pids start again at 1). 2 s of slack:
    /proc's boot time is whole seconds. False where /proc cannot tell."""
    started = process_start_time(pid)
    return started is not None and started > when + 2


def _process_start(ticks: int) -> float | None:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/stat", encoding="ascii", errors="replace") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    return None


def iso_seconds(value: Any) -> float | None:
    """A run record's ISO time (``now_iso``'s form) as epoch seconds, or None."""
    if not isinstance(value, str):
        return None
    from datetime import datetime

    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


def parse_rank_dir_name(name: str) -> dict[str, str] | None:
    match = _RANK_DIR_RE.match(name)
    return match.groupdict() if match else None
