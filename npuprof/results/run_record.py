"""npuprof_run.json: npuprof's own record of a run, and the captures a run produced."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npuprof.results import layout


def claim_record_path(output: Path) -> Path:
    """npuprof_run.json, or npuprof_run.<stamp>.json when an earlier run's record is there
    (nothing already in the output directory is overwritten)."""
    stamp = f"{layout.timestamp_ms()}.{os.getpid()}"
    candidates = (
        output / layout.RUN_RECORD,
        *(output / f"npuprof_run.{stamp}{f'.{i}' if i else ''}.json" for i in range(100)),
    )
    for path in candidates:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise OSError(f"cannot create a run record in {output}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def record_bytes(content: Any) -> bytes:
    """``content`` as UTF-8 JSON (indent 4). Text that came from undecodable bytes (argv, the cwd, a path,
    --metadata, read by Python with surrogateescape) holds lone surrogates, which UTF-8 cannot encode:
    those alone are written as ``\\udcXX`` escapes, so the record stays valid JSON and
    ``os.fsencode(json.loads(...))`` gives the original bytes back."""
    return escape_surrogates(json.dumps(content, indent=4, ensure_ascii=False) + "\n").encode("utf-8")


def escape_surrogates(text: str) -> str:
    """JSON ``text`` with each lone surrogate written as its ``\\uXXXX`` escape (the same JSON value)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


class RunRecord:
    """The run record of one run, written whole at each ``write`` (atomic rename, no fsync: ~5 ms each on
    the launcher's start path). A full disk costs the record, never the job: a claimed file that could not
    be filled is removed (no empty or partial record is left), and the next ``write`` tries again."""

    def __init__(self, output: Path, content: dict[str, Any]) -> None:
        self.output = output
        self.content = content
        self.path: Path | None = None
        self._filled = False

    def write(self) -> str | None:
        """Write the record; None, or why it could not be written."""
        from npuprof.results.atomic import write_bytes

        try:
            data = record_bytes(self.content)
            if self.path is None:
                self.path = claim_record_path(self.output)
            write_bytes(self.path, data, fsync=False)
        except OSError as exc:
            self._release_empty_claim()
            return exc.strerror or str(exc)
        self._filled = True
        return None

    def _release_empty_claim(self) -> None:
        if self.path is None or self._filled:
            return  # an earlier, complete version stays
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_size == 0:
                os.unlink(self.path)
        self.path = None


@dataclass
class CaptureSummary:
    rank_dir: Path
    status: str
    rank: int | None
    pid: int | None
    steps: list[int]
    size_bytes: int
    detail: str
    parsed: bool
    # its record still says "capturing" from before its recording ended (the process died inside it):
    # ``steps`` holds only its first step; one rewritten as torch's export began lists them all
    open_ended: bool = False
    # nothing but its record (a capture skipped for want of disk space): nothing there to analyse
    record_only: bool = False
    parse_asked: bool | None = None  # False: --no-analyse, a trigger's "analyse": false; None: not said
    # torchrun's attempt its process ran in (the record's restart_count: 0 the first); None: not said
    restart_count: int | None = None
    # the record's process_start_ns and updated_ns: torchrun's rounds of workers (npuprof/results/rounds.py)
    process_start_ns: int | None = None
    updated_ns: int | None = None
    # the record's backend: "torch_npu" parses in the job's process (its own parser), not in a post-processor
    backend: str | None = None
    # the files asked of it that come after its trace, never made: its process died in (or failed) the export
    unmade: str = ""

    def as_dict(self) -> dict[str, Any]:
        found = {
            "rank_dir": str(self.rank_dir),
            "status": self.status,
            "rank": self.rank,
            "pid": self.pid,
            "steps": self.steps,
            "size_bytes": self.size_bytes,
            "detail": "; ".join(filter(None, (self.detail, self.unmade))),
            "parsed": self.parsed,
        }
        if self.restart_count is not None:
            found["restart_count"] = self.restart_count
        return found


def _dir_contents(path: Path) -> tuple[int, bool]:
    """The bytes under ``path``, and whether it holds nothing but its capture record (a capture skipped
    for want of disk space: nothing there to analyse), in one walk."""
    total, record_only = 0, False  # unreadable: not known to be empty
    for root, dirs, files in os.walk(path):
        if root == str(path):
            names = [*dirs, *files]
            record_only = all(name == layout.CAPTURE_RECORD or name.startswith(".") for name in names)
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total, record_only


def _parsed(rank_dir: Path, record: dict[str, Any]) -> bool:
    parsed = rank_dir / layout.PARSED_DIR
    if record.get("backend") == "torch_npu":
        return layout.has_torch_npu_tables(rank_dir) or layout.torch_npu_parsed_without_device_tables(
            rank_dir
        )
    return (parsed / layout.ANALYSE_DONE).exists()


def _remove_half_written(rank_dir: Path, status: str, record: dict[str, Any] | None = None) -> str:
    """Delete what a process of the run was writing into the capture when it died (kill -9 inside torch's
    export_chrome_trace, or of the post-processor while it gzipped: a hidden file of up to gigabytes that
    nothing would read), and say so. The run's processes ran on this host: a pid that is gone is theirs."""
    if status == layout.STATUS_CAPTURING:
        return ""
    from npuprof.byte_sizes import human_bytes
    from npuprof.results.atomic import remove_dead_writers_temps
    from npuprof.results.cut_capture import (
        DIED_BEFORE_KEPT,
        DIED_WHILE_WRITTEN,
        keep_trace_cut_by_death,
        note_nothing_kept,
        trace_of_temporary,
    )

    kept = ""
    if lost := note_nothing_kept(rank_dir, idle_s=0.0):
        # the trace's temporary file, empty, its writer gone: the job died in torch's export before it wrote
        # a byte (no descriptor left, EMFILE, leaves the same record without one: not known to be this)
        kept = lost
    elif cut := keep_trace_cut_by_death(rank_dir, idle_s=0.0):
        # which steps are whole in the part written is known once it is read (docs/formats.md, "Traces cut
        # short"), not at the job's end; the steps recorded are the record's, rewritten as the export began
        kept = (
            f"{DIED_WHILE_WRITTEN}: the part written kept as {cut[0]} ({human_bytes(cut[1])}); `npuprof "
            "analyse` reads it up to its last complete event and names the steps whole in it"
            + (
                ""
                if record and export_began(record)
                else " (its record, never finalised, names its first step only)"
            )
        )
    # a writer that could not write there could not remove its temporary file either (stuck): it ended,
    # but whether it died is not known (an output made read-only under the run's post-processor)
    stuck: dict[str, tuple[int, str]] = {}
    removed = remove_dead_writers_temps(rank_dir, idle_s=0.0, stuck=stuck)
    parsed = rank_dir / layout.PARSED_DIR
    if not parsed.is_symlink():  # the post-processor's tables: one killed while it wrote trace_view.json
        removed |= remove_dead_writers_temps(parsed, idle_s=0.0, stuck=stuck)
    if kept.startswith(DIED_BEFORE_KEPT):  # its empty file (left where the record could not say it) is said
        removed = {name: size for name, size in removed.items() if size or trace_of_temporary(name) is None}
    said = [kept] if kept else []
    if stuck:
        size = sum(size for size, _why in stuck.values())
        whys = sorted({why for _size, why in stuck.values()})
        said.append(
            f"half-written file(s) of a process of the run that has ended ({human_bytes(size)}) could not be "
            f"removed: {', '.join(whys)}"
        )
    if removed:
        size = sum(removed.values())
        if not size:  # "removed: 0 B" read as if nothing had been removed
            said.append("a process died while writing into it; its empty half-written file(s) removed")
        else:
            said.append(
                f"a process died while writing into it; the half-written file(s) removed: {human_bytes(size)}"
            )
    return "; ".join(said)


def export_began(record: dict[str, Any]) -> bool:
    """Whether a record still "capturing" was rewritten as torch's trace export began: its ``steps`` are
    all those recorded (docs/formats.md, the capture record's ``export_began``)."""
    return record.get("status") == layout.STATUS_CAPTURING and record.get("export_began") is True


def never_made(record: dict[str, Any]) -> str:
    """Of a record left "capturing" as torch's export began: the files asked of the capture that come after
    its trace (its ``exports_asked``), never made; "" for any other record."""
    asked = record.get("exports_asked") if export_began(record) else None
    flags = [flag for flag in asked if isinstance(flag, str)] if isinstance(asked, list) else []
    if not flags:
        return ""
    named = flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"
    files = "file was" if flags == ["--export-chrome-trace"] else "files were"
    return f"its {named} {files} never made (they come after the trace)"


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def captures_of_run(output: Path, run_id: str) -> list[CaptureSummary]:
    """The captures of run ``run_id``: in ``output``, and in the directories besides it that the run
    captured into (--dynamic's prof_dir, noted in ``output``)."""
    from npuprof.results.cut_capture import DIED_BEFORE_KEPT, DIED_WHILE_WRITTEN
    from npuprof.results.handover import process_start_ns_of, restart_count_of

    found: list[CaptureSummary] = []
    if not output.is_dir():
        return found
    rank_dirs: list[Path] = []
    for root in [output, *layout.capture_roots(output, run_id)]:
        try:
            # a run writes its captures right into -o (or a prof_dir): -o / is not searched whole
            rank_dirs += [d for d in layout.find_rank_dirs(root, levels=1) if d not in rank_dirs]
        except OSError:
            continue
    for rank_dir in rank_dirs:
        # read without following a link or blocking on a FIFO; a record too large is no record
        record = layout.read_capture_record(rank_dir)
        if record is None or record.get("run_id") != run_id:
            # torch_npu writes its own dirs (no record); another run's are not this run's
            continue
        status = layout.capture_status(rank_dir)
        detail = status.detail or str(record.get("detail") or "")
        steps = list(record.get("steps") or [])
        if record.get("first_step_partial") is True and steps and f"step {steps[0]} is partial" not in detail:
            # recording began inside its first step (at the optimizer's creation, or a time window's
            # start): analyse marks it and leaves it out of the means; the summary's star says so too
            first = f"step {steps[0]} is partial: {layout.FIRST_STEP_PARTIAL_WHY}"
            detail = f"{first}; {detail}" if detail else first
        last = layout.partial_step(record)
        if last is not None and f"step {last} is partial" not in detail:
            # a capture SIGTERM finalised says only "stopped by SIGTERM": its last step read as whole
            detail = f"{detail}; step {last} is partial" if detail else f"step {last} is partial"
        if record.get("backend") == "torch_npu" and layout.torch_npu_parsed_without_device_tables(rank_dir):
            note = layout.torch_npu_no_device_tables_note(rank_dir)
            detail = f"{detail}; {note}" if detail else note
        if half_written := _remove_half_written(rank_dir, status.status, record):
            # why it was not finalised: said once, not twice
            if half_written.startswith((DIED_WHILE_WRITTEN, DIED_BEFORE_KEPT)):
                detail = "; ".join(part for part in detail.split("; ") if part != layout.NOT_FINALISED)
            detail = f"{detail}; {half_written}" if detail else half_written
        size, record_only = _dir_contents(rank_dir)
        found.append(
            CaptureSummary(
                rank_dir=rank_dir,
                status=status.status,
                rank=record.get("rank"),
                pid=record.get("pid"),
                steps=steps,
                size_bytes=size,
                detail=detail,
                parsed=_parsed(rank_dir, record),
                open_ended=record.get("status") == layout.STATUS_CAPTURING and not export_began(record),
                record_only=record_only,
                parse_asked=record.get("parse") if isinstance(record.get("parse"), bool) else None,
                restart_count=restart_count_of(record),
                process_start_ns=process_start_ns_of(record),
                updated_ns=_whole(record.get("updated_ns")),
                backend=record.get("backend") if isinstance(record.get("backend"), str) else None,
                unmade=never_made(record) if status.status != layout.STATUS_COMPLETE else "",
            )
        )
    # a rank's captures of a job torchrun restarted: the first attempt's before the next's (a dir's name
    # begins with its pid, not its time)
    found.sort(
        key=lambda c: (
            c.rank if c.rank is not None else -1,
            c.restart_count if c.restart_count is not None else -1,
            c.steps[:1],
            str(c.rank_dir),
        )
    )
    return found


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
