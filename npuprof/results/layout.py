"""Names and places in the result tree (output-format.md §1). The one place that knows them."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

RUN_RECORD = "npuprof_run.json"
RUN_LOG = "npuprof.log"
PENDING_DIR = ".npuprof_pending"  # lock files of background post-processors still running
REPORTED_DIR = ".npuprof_reported"  # warnings already shown on stderr in a run (one line per run)
RANK_DIR_SUFFIX = "_ascend_pt"
PARSED_DIR = "ASCEND_PROFILER_OUTPUT"
ANALYSE_DONE = "analyse.done"
CAPTURE_RECORD = "npuprof_capture.json"  # {"status": "capturing"|"complete"|"incomplete", ...}
METADATA_FILE = "profiler_metadata.json"
KINETO_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")

STATUS_CAPTURING = "capturing"
STATUS_COMPLETE = "complete"
STATUS_INCOMPLETE = "incomplete"

_RANK_DIR_RE = re.compile(r"^(?P<worker>.+)_(?P<pid>\d+)_(?P<stamp>\d{17})_ascend_pt$")
_INFO_RE = re.compile(r"^profiler_info(?:_(?P<rank>\d+))?\.json$")


def timestamp_ms(now: float | None = None) -> str:
    """Local time as YYYYmmddHHMMSSmmm (17 digits)."""
    now = time.time() if now is None else now
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"


def rank_dir_name(worker: str, pid: int, stamp: str) -> str:
    return f"{worker}_{pid}_{stamp}{RANK_DIR_SUFFIX}"


def info_file_name(rank: int | None) -> str:
    return "profiler_info.json" if rank is None else f"profiler_info_{rank}.json"


def trace_file_name(worker: str, time_ns: int, gzip: bool) -> str:
    return f"{worker}.{time_ns}.pt.trace.json" + (".gz" if gzip else "")


def is_rank_dir(path: Path) -> bool:
    return path.is_dir() and path.name.endswith(RANK_DIR_SUFFIX)


def find_rank_dirs(root: Path) -> list[Path]:
    """``root`` itself when it is a rank dir, else the rank dirs below it (any depth), sorted."""
    if is_rank_dir(root):
        return [root]
    return sorted(p for p in root.rglob(f"*{RANK_DIR_SUFFIX}") if p.is_dir())


def find_raw_trace(rank_dir: Path) -> Path | None:
    """The raw Kineto trace of a rank dir: the finished ``.gz`` if present, else the plain json."""
    for suffix in KINETO_SUFFIXES:
        found = sorted(
            p for p in rank_dir.iterdir() if p.name.endswith(suffix) and not p.name.startswith(".")
        )
        if found:
            return found[-1]
    return None


def rank_of(rank_dir: Path) -> int | None:
    """The rank, taken (as msprof-analyze does) only from the name profiler_info_{rank}.json."""
    for p in rank_dir.iterdir():
        match = _INFO_RE.match(p.name)
        if match and match.group("rank") is not None:
            return int(match.group("rank"))
    return None


@dataclass(frozen=True)
class CaptureStatus:
    status: str  # complete | incomplete | capturing | unknown
    detail: str = ""

    @property
    def complete(self) -> bool:
        return self.status == STATUS_COMPLETE


def capture_status(rank_dir: Path) -> CaptureStatus:
    """Whether the capture in ``rank_dir`` finished. Dirs not written by npuprof count as complete
    when they hold a trace (e.g. torch_npu's own output)."""
    record = rank_dir / CAPTURE_RECORD
    if not record.exists():
        has_data = find_raw_trace(rank_dir) is not None or any(rank_dir.glob("PROF_*"))
        return CaptureStatus(STATUS_COMPLETE if has_data else "unknown", "no npuprof capture record")
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        return CaptureStatus(STATUS_INCOMPLETE, f"unreadable {CAPTURE_RECORD}: {exc}")
    if not isinstance(data, dict):
        return CaptureStatus(STATUS_INCOMPLETE, f"unreadable {CAPTURE_RECORD}: not a JSON object")
    status = str(data.get("status", "unknown"))
    detail = str(data.get("detail", ""))
    if status == STATUS_CAPTURING:
        return CaptureStatus(
            STATUS_INCOMPLETE, detail or "the process ended before the capture was finalised"
        )
    return CaptureStatus(status, detail)


def parse_rank_dir_name(name: str) -> dict[str, str] | None:
    match = _RANK_DIR_RE.match(name)
    return match.groupdict() if match else None
