"""A capture whose process died while torch wrote its trace (docs/formats.md, "Traces cut short").

torch writes the trace under a temporary name (npuprof's ``.NAME.PID-HEX12.tmp``, Kineto's own ``.tmp``
after it) and npuprof renames it once whole, so a job killed inside that export (OOM, kill -9, a node lost)
leaves its record "capturing" and the part written under the hidden name, which the cleanup of dead
writers' temporary files removed. That part is what a user who lost a long job wants to see: it is kept
under a name that says it is cut (``NAME`` with ``.cut`` before ``.pt.trace.json``), which every reader
finds and reads through the cut-trace reader; the record stays as the death left it (read as incomplete).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from pathlib import Path

from npuprof.results import layout
from npuprof.results.atomic import dead_writers_temps, file_mode, write_json

__all__ = [
    "CUT_BY_DEATH",
    "DIED_BEFORE_KEPT",
    "DIED_WHILE_WRITTEN",
    "died_while_written_line",
    "is_cut_by_death",
    "keep_trace_cut_by_death",
    "kept_part_said",
    "note_nothing_kept",
    "nothing_kept_said",
    "part_kept_later",
    "trace_of_temporary",
]

CUT_BY_DEATH = layout.CUT_BY_DEATH
DIED_WHILE_WRITTEN = "the job died while its trace was written"
# of a capture whose record says the export began and whose trace's temporary file its dead writer left
# empty: torch had opened it and written nothing (docs/formats.md, the capture record's export_began)
DIED_BEFORE_KEPT = "the job died while torch wrote its trace, before any of it was kept"
SUMMARY_LIMIT = 256 << 20  # a parse's npuprof_summary.json (its top operators per step) is read up to this


def is_cut_by_death(trace: Path) -> bool:
    return trace.name.endswith(CUT_BY_DEATH)


def died_while_written_line(size: int, events: int, whole: list[int], left_out: list[int]) -> str:
    """The one line analyse says of a capture whose job died while torch wrote its trace: what happened,
    what was kept (``size`` bytes, ``events`` complete events read) and which steps it holds whole; the
    cut-trace reader's own line (bytes, the rule for steps) is not said beside it: two lines on one death
    read as two problems (its figures stay in the summary's ``cut_short``)."""
    from npuprof.byte_sizes import human_bytes

    if whole:
        steps = f"it holds step(s) {_numbers(whole)} whole"
        if left_out:
            steps += f"; step(s) {_numbers(left_out)} cut short, left out"
    elif left_out:
        steps = (
            f"no step is whole in it (step(s) {_numbers(left_out)} cut short, left out): the figures are "
            "those of all the events read"
        )
    else:
        steps = "no step in it: the figures are those of all the events read"
    return (
        f"{DIED_WHILE_WRITTEN}: the part written ({human_bytes(size)}) is read up to its last complete "
        f"event ({events:,} events); {steps}"
    )


def _numbers(steps: list[int]) -> str:
    """``6-8`` for consecutive steps, else ``6, 8, 9`` (the first ten, then "...")."""
    if len(steps) > 1 and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}-{steps[-1]}"
    return ", ".join(map(str, steps[:10])) + (", ..." if len(steps) > 10 else "")


def kept_part_said(rank_dir: Path) -> str | None:
    """Of a capture whose job died while torch wrote its trace, kept (``NAME.cut.pt.trace.json``): that,
    the file kept and the steps whole in it, or where they are not known yet (``npuprof analyse`` reads it:
    the record, never finalised, names its first step only); of one whose job died before torch wrote a
    byte of it, that (:func:`nothing_kept_said`); None for any other capture."""
    trace = layout.find_raw_trace(rank_dir)
    if trace is None:
        return nothing_kept_said(rank_dir)
    if not is_cut_by_death(trace):
        return None
    return f"{DIED_WHILE_WRITTEN}: the part written kept as {trace.name}, {_steps_of_parse(rank_dir, trace)}"


def _steps_of_parse(rank_dir: Path, trace: Path) -> str:
    """The steps its parse found whole in the kept ``trace`` and cut short (npuprof_summary.json's steps and
    cut_short, the parse of that very file), or that they are known once it is parsed."""
    from npuprof.invocation import npuprof_cmd

    parsed = rank_dir / layout.PARSED_DIR
    summary: object = None
    if (parsed / layout.ANALYSE_DONE).exists():
        with contextlib.suppress(OSError, ValueError):
            summary = layout.read_json_record(parsed / "npuprof_summary.json", SUMMARY_LIMIT)
    if not isinstance(summary, dict) or summary.get("trace") != trace.name:
        return f"the steps whole in it are named once `{npuprof_cmd('analyse ' + str(rank_dir))}` has read it"
    steps = summary.get("steps") if isinstance(summary.get("steps"), list) else []
    whole = sorted(s["step"] for s in steps if isinstance(s, dict) and isinstance(s.get("step"), int))
    cut = summary.get("cut_short") if isinstance(summary.get("cut_short"), dict) else {}
    left = [n for n in cut.get("steps_left_out") or [] if isinstance(n, int)]
    if not whole:
        return "no step whole in it" + (f" (step(s) {_numbers(left)} cut short)" if left else "")
    return f"step(s) {_numbers(whole)} whole in it" + (f", {_numbers(left)} cut short" if left else "")


def keep_trace_cut_by_death(rank_dir: Path, idle_s: float = 60.0) -> tuple[str, int] | None:
    """Rename the part of its trace that torch wrote into ``rank_dir`` before its process died to a name
    ending in :data:`CUT_BY_DEATH`; returns that name and its size, or None where there is none: the
    record says other than "capturing" (or torch_npu's, which writes no such file), a trace is already
    there, or no writer's temporary file of a trace whose writer is gone and that was not written for
    ``idle_s`` seconds (0 where the caller knows the dir's writers ran here). Where that file is empty
    (nothing of the trace written), :func:`note_nothing_kept` notes it in the record."""
    if not _left_capturing(rank_dir):
        return None
    if layout.find_raw_trace(rank_dir) is not None:
        return None
    best: tuple[int, str, str] | None = None  # (size, temporary name, trace name)
    now = time.time()
    for entry, info, name in _parts_of_dead_writers(rank_dir):
        if now - info.st_mtime >= idle_s and (best is None or info.st_size > best[0]):
            best = (info.st_size, entry.name, name)
    if best is None:
        note_nothing_kept(rank_dir, idle_s)
        return None
    size, temporary, name = best
    kept = name.removesuffix(".pt.trace.json") + CUT_BY_DEATH
    try:
        os.link(rank_dir / temporary, rank_dir / kept)  # never over a file of that name
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.unlink(rank_dir / temporary)
        os.chmod(rank_dir / kept, file_mode())  # as npuprof's own traces (torch made it by the umask)
    return kept, size


def nothing_kept_said(rank_dir: Path) -> str | None:
    """Of a capture whose job died in torch's export before torch wrote a byte of its trace, the line that
    says so (:data:`DIED_BEFORE_KEPT` and the steps it lost), read without writing: from its record (noted
    there by :func:`note_nothing_kept`), or from the empty temporary file of its trace its dead writer left;
    None for any other capture (one whose record says the export began but with no such file, an export
    that failed for want of a descriptor whose record could not be finalised either, is not known to be
    one)."""
    record = _export_began_record(rank_dir)
    if record is None:
        return None
    if isinstance(detail := record.get("detail"), str) and detail.startswith(DIED_BEFORE_KEPT):
        return detail
    if _empty_parts(rank_dir, idle_s=0.0) and not _parts_of_dead_writers(rank_dir):
        return _nothing_kept_line(record)
    return None


def note_nothing_kept(rank_dir: Path, idle_s: float = 60.0) -> str | None:
    """Where the job of a capture died in torch's export before torch wrote a byte (its record "capturing"
    with ``export_began``, the trace's temporary file empty, its writer gone and the file not written for
    ``idle_s`` seconds, no other part of it): write that in the record's ``detail``, which every reader then
    says (the empty file is the only proof, and it is removed as any dead writer's), remove the empty file,
    and return the line; None where it is not so. A record that cannot be written keeps the file."""
    record = _export_began_record(rank_dir)
    if record is None or layout.find_raw_trace(rank_dir) is not None or _parts_of_dead_writers(rank_dir):
        return None
    empty = _empty_parts(rank_dir, idle_s)
    if not empty:
        return None
    line = _nothing_kept_line(record)
    try:
        write_json(rank_dir / layout.CAPTURE_RECORD, {**record, "detail": line}, fsync=False)
    except OSError:
        return line
    for path in empty:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return line


def _nothing_kept_line(record: dict) -> str:
    steps = [n for n in record.get("steps") or [] if type(n) is int]
    lost = f"step {steps[0]}" if len(steps) == 1 else f"steps {_numbers(steps)}" if steps else "its steps"
    return f"{DIED_BEFORE_KEPT}: no trace for {lost}"


def _export_began_record(rank_dir: Path) -> dict | None:
    """``rank_dir``'s record where it was left "capturing" as torch's export of its trace began."""
    if not _left_capturing(rank_dir):
        return None
    record = layout.read_capture_record(rank_dir)
    return record if record and record.get("export_began") is True else None


def _empty_parts(rank_dir: Path, idle_s: float) -> list[str]:
    """The empty temporary files of Kineto traces in ``rank_dir`` whose writer has ended, not written for
    ``idle_s`` seconds."""
    now = time.time()
    return [
        entry.path
        for entry, info in dead_writers_temps(rank_dir)
        if not info.st_size and now - info.st_mtime >= idle_s and trace_of_temporary(entry.name) is not None
    ]


def part_kept_later(rank_dir: Path, idle_s: float = 60.0) -> str:
    """Where a dead writer's part of a trace is still inside its ``idle_s`` guard (written to less than a
    minute ago: the directory may be shared with a host where that pid is alive), a clause saying when
    ``npuprof analyse`` reads it; else "". A user who analysed right after the death was told only
    "interrupted capture", with the part written on disk. Where torch's file is empty (the job may have died
    as its export began: :func:`note_nothing_kept` says so for sure once the guard has passed), the moment
    it is said; "ended before the capture was finalised" alone was all a user heard of it for that minute."""
    if not _left_capturing(rank_dir):
        return ""
    now = time.time()
    parts = _parts_of_dead_writers(rank_dir)
    for _entry, info, _name in parts:
        if now - info.st_mtime >= idle_s:
            continue
        from npuprof.byte_sizes import human_bytes

        left = max(1, round(idle_s - (now - info.st_mtime)))
        return (
            f"; the part of its trace written before the process died ({human_bytes(info.st_size)}, under a "
            f"temporary name) is read once nothing has written it for {idle_s:.0f} s (another host may share "
            f"the directory): analyse it again in {left} s"
        )
    if parts or _export_began_record(rank_dir) is None or layout.find_raw_trace(rank_dir) is not None:
        return ""
    recent = [
        info.st_mtime
        for entry, info in dead_writers_temps(rank_dir)
        if not info.st_size and now - info.st_mtime < idle_s and trace_of_temporary(entry.name) is not None
    ]
    if not recent:
        return ""
    sure = time.strftime("%H:%M:%S", time.localtime(math.ceil(max(recent) + idle_s)))
    return (
        "; the job may have died as torch began writing its trace (its file, under a temporary name, is "
        f"empty; another host may share the directory): said for sure after {sure}"
    )


def _left_capturing(rank_dir: Path) -> bool:
    """Whether ``rank_dir``'s record says "capturing" of a backend that writes a Kineto trace (torch_npu's
    writes no such file)."""
    record = layout.read_capture_record(rank_dir)
    return (
        bool(record)
        and record.get("status") == layout.STATUS_CAPTURING
        and record.get("backend") != "torch_npu"
    )


def _parts_of_dead_writers(rank_dir: Path) -> list[tuple[os.DirEntry[str], os.stat_result, str]]:
    """The non-empty temporary files of Kineto traces in ``rank_dir`` whose writer has ended, with their
    ``stat`` and trace name."""
    return [
        (entry, info, name)
        for entry, info in dead_writers_temps(rank_dir)
        if info.st_size and (name := trace_of_temporary(entry.name)) is not None
    ]


def trace_of_temporary(temporary: str) -> str | None:
    """The trace name ``NAME`` of a temporary file ``.NAME.PID-HEX12.tmp`` (or Kineto's ``.tmp.tmp``) when
    it is a Kineto trace's, else None."""
    base = temporary.removesuffix(".tmp").removesuffix(".tmp")
    name = base[1:].rsplit(".", 1)[0]
    return name if name.endswith(".pt.trace.json") and not name.endswith(CUT_BY_DEATH) else None
