"""Resolving a report command's input (a rank directory or a trace file) to the trace to read."""

from __future__ import annotations

import os
import time
from pathlib import Path

from npuprof.results import layout

PARSED_TRACE = layout.PARSED_TRACE


class InputError(ValueError):
    """The input is not usable; the message is one line for the user."""


def single_rank_dir(source: Path, rank: int | None = None, notes: list[str] | None = None) -> Path:
    """``source`` itself when it is a rank dir (or a dir holding a trace); else the one rank dir below it, or
    with ``rank`` the latest capture of that rank below it (said in ``notes`` when it had several)."""
    found = _single_rank_dir(source, rank, notes)
    if found.is_dir() and layout.is_rank_dir(found):
        from npuprof.results.cut_capture import keep_trace_cut_by_death

        keep_trace_cut_by_death(found)  # its job died while torch wrote the trace: the part written is read
    return found


def _single_rank_dir(source: Path, rank: int | None, notes: list[str] | None) -> Path:
    if not source.exists():
        from npuprof.results.paths import why_missing

        raise InputError(f"{source} {why_missing(source)}")
    if (owner := layout.owner_of_raw_data_folder(source)) is not None:
        if notes is not None:  # torch_npu's FRAMEWORK/ or PROF_*/: its capture is the rank dir above it
            notes.append(
                f"{source} is torch_npu's raw data folder of the rank directory {owner}: that is read"
            )
        source = owner
    if not source.is_dir() and not source.is_file():  # said "cannot read SOURCE: Not a directory"
        from npuprof.results.paths import not_a_plain_file

        kind = not_a_plain_file(os.stat(source)) or "not a regular file"
        raise InputError(f"{source} is {kind}, neither a rank directory nor a trace file")
    if source.is_dir() and source.name == layout.CLUSTER_OUTPUT and not layout.find_rank_dirs(source):
        from npuprof.analysis.torch_files import cluster_output_note

        raise InputError(f"{source} is {cluster_output_note(source)}")
    if source.is_dir() and not layout.is_rank_dir(source):
        traces = sorted(p.name for p in source.iterdir() if p.name.endswith(layout.KINETO_SUFFIXES))
        if len(traces) > 1:  # torch's tensorboard_trace_handler: a trace per rank and capture, side by side
            names = ", ".join(traces[:3]) + (f" and {len(traces) - 3} more" if len(traces) > 3 else "")
            raise InputError(f"{source} holds {len(traces)} traces ({names}): give one of them")
    if not source.is_dir() or layout.is_rank_dir(source) or layout.find_raw_trace(source) is not None:
        capture = source.parent if source.is_file() or source.name == layout.PARSED_DIR else source
        if capture.name == layout.PARSED_DIR:  # its trace_view.json given
            capture = capture.parent
        if rank is not None and not (layout.is_rank_dir(capture) or layout.holds_a_capture(capture)):
            raise InputError(f"--rank {rank}: {source} is no capture of a result directory")
        own = layout.rank_of(capture)
        if rank is not None and own != rank and not (rank == 0 and own is None):
            raise InputError(
                f"{source} is the capture of rank {'-' if own is None else own}, not of rank {rank}"
            )
        return source
    found = layout.find_rank_dirs(source)
    if not found and (elsewhere := layout.roots_of_the_runs_in(source)):
        # a run whose captures all went to --dynamic prof_dirs: "no trace" here, or memory-timeline's "capture
        # with --profile-memory ...", sent the user to capture again what was captured there
        raise InputError(
            f"no rank directory under {source}; its run captured into {', '.join(map(str, elsewhere))} (a "
            "--dynamic prof_dir): give a capture there"
        )
    if not found and (said := layout.run_without_captures(source)) is not None:
        # "has no trace", or memory-timeline's "capture with --profile-memory ...", read as if the flags
        # were wrong where the run captured nothing at all
        raise InputError(said)
    if rank is not None:
        return _latest_of_rank(source, found, rank, notes)
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(str(p.relative_to(source)) for p in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        if any(layout.rank_of(d) is not None for d in found):
            pick = "give one of them, or pick a rank's latest with --rank N"
        else:  # no rank: one process's captures (--repeat), or a script run twice into one output
            latest = max(found, key=_capture_time).relative_to(source)
            pick = f"give one of them, or --rank 0 for the latest ({latest})"
            raise InputError(f"{source} holds {_rankless_captures(found)} ({names}{more}): {pick}")
        raise InputError(f"{source} holds {len(found)} rank directories ({names}{more}): {pick}")
    return source


def _rankless_captures(found: list[Path]) -> str:
    """``"3 captures of one process, pid 4242, no rank"``, or of how many processes: captures without a rank
    are no ranks' directories (helper-371: a --repeat 3 run was said to hold "3 rank directories")."""
    names = [layout.parse_rank_dir_name(d.name) for d in found]
    processes = {(n["worker"], n["pid"]) for n in names if n is not None}
    if len(processes) == 1 and None not in names:
        return f"{len(found)} captures of one process, pid {next(iter(processes))[1]}, no rank"
    if None not in names:
        return f"{len(found)} captures of {len(processes)} processes, none with a rank"
    return f"{len(found)} captures, none with a rank"


def _latest_of_rank(source: Path, found: list[Path], rank: int, notes: list[str] | None) -> Path:
    ranks = {d: layout.rank_of(d) for d in found}
    mine = [d for d, r in ranks.items() if r == rank]
    if rank == 0 and all(r is None for r in ranks.values()):
        mine = found  # a single-process run's captures have no rank: its one process is rank 0
    if not mine:
        seen = sorted({r for r in ranks.values() if r is not None})
        there = f"ranks there: {', '.join(map(str, seen))}" if seen else "none of its captures has a rank"
        raise InputError(f"{source} holds no capture of rank {rank} ({there})")
    latest = max(mine, key=_capture_time)
    if len(mine) > 1 and notes is not None:
        notes.append(f"rank {rank} has {len(mine)} captures in {source}: the latest, {latest.name}, is read")
    return latest


def _capture_time(rank_dir: Path) -> str:
    """A capture's time for "the latest": its name's (``{worker}_{pid}_{YYYYmmddHHMMSSmmm}_ascend_pt``), else
    its folder's change (helper-128: a renamed capture's name sorted as a time)."""
    stamp = rank_dir.name.removesuffix(layout.RANK_DIR_SUFFIX).rpartition("_")[2]
    if len(stamp) == 17 and stamp.isdigit():
        return stamp
    try:
        return time.strftime("%Y%m%d%H%M%S000", time.localtime(rank_dir.stat().st_mtime))
    except OSError:
        return ""


def find_trace(source: Path, rank: int | None = None, notes: list[str] | None = None) -> Path:
    """The trace of a rank directory (the raw Kineto trace, else the parsed trace_view.json), or the file
    (``rank``, ``notes``: as :func:`single_rank_dir`)."""
    source = single_rank_dir(source, rank, notes)
    if source.is_file():
        return source
    if not source.is_dir():
        raise InputError(f"{source} is neither a rank directory nor a trace file")
    trace = layout.find_trace_of_rank(source)
    if trace is None and (unparsed := unparsed_raw_data(source)):
        raise InputError(f"{source} has no trace yet: {unparsed}")
    if trace is None and (db_only := parsed_into_db_only(source)):
        raise InputError(f"{source} has no trace: {db_only}")
    if trace is None:
        status = layout.capture_status(source)
        why = f" (capture {status.status}: {status.detail})" if not status.complete and status.detail else ""
        raise InputError(
            f"{source} has no trace (*.pt.trace.json[.gz] or {layout.PARSED_DIR}/{PARSED_TRACE}){why}"
        )
    return trace


def unparsed_raw_data(rank_dir: Path) -> str | None:
    """What to do with a rank dir holding torch_npu's raw data (FRAMEWORK/, PROF_*) that no parse has turned
    into its trace_view.json yet (helper-273: said to have no trace, or to need capturing again); None for
    any other."""
    if not layout.holds_ascend_raw_data(rank_dir) or layout.has_torch_npu_tables(rank_dir):
        return None  # (parsed: its db, or tables without the trace, are said as they were)
    if (rank_dir / layout.PARSED_DIR / PARSED_TRACE).is_file():
        return None
    from npuprof.reports.run_summary import shell_quote

    return (
        "it holds torch_npu's raw data (FRAMEWORK/, PROF_*), unparsed: run "
        f"`npuprof analyse {shell_quote(str(rank_dir))}` where torch_npu and CANN are installed (torch_npu's "
        f"parser writes {layout.PARSED_DIR}/{PARSED_TRACE} from it), then this again"
    )


def parsed_into_db_only(rank_dir: Path) -> str | None:
    """What to do with a rank dir torch_npu parsed into its db alone (``export_type=Db``: no
    trace_view.json, which export-stacks and memory-timeline read; helper-349: said to be no npuprof
    capture, "capture unknown"); None for any other."""
    from npuprof.analysis.ascend_output import db_only_by_torch_npu

    if not db_only_by_torch_npu(rank_dir):
        return None
    return (
        f"torch_npu parsed it into its db only (export_type db: {layout.PARSED_DIR}/"
        f"ascend_pytorch_profiler_*.db), without the {PARSED_TRACE} this reads: capture with "
        "--export-type text,db (torch_npu: export_type=[ExportType.Text, ExportType.Db]) for both"
    )


def overwrite_problem(target: Path, trace: Path) -> str | None:
    """Why writing an output at ``target`` would destroy what ``trace`` (the input read) belongs to: the trace
    itself, a file of its capture (the trace, its record and info files, its memory timeline's data,
    torch_npu's parsed tables and trace; helper-124: -o RANKDIR/<trace> replaced the only raw trace with
    folded text), or its run's record and log beside the rank dir (helper-127). None when it may."""
    target = Path(os.path.abspath(target))
    try:
        if target.exists() and os.path.samefile(target, trace):
            return "is the trace being read"
    except OSError:
        pass
    parsed = trace.parent.name == layout.PARSED_DIR
    rank_dir = trace.parent.parent if parsed else trace.parent
    return _capture_file_problem(Path(os.path.realpath(target.parent)), target.name, rank_dir)


def _capture_file_problem(here: Path, name: str, rank_dir: Path) -> str | None:
    """Why a file ``name`` in the folder ``here`` is one of a capture's or a run's: in any capture's dir
    (helper-128: a sibling rank's trace was overwritten), its parser's or raw data's folders, or the run's
    own files beside the capture read."""
    from npuprof.reports.memory_timeline import META_FILE, RAW_FILE, SNAPSHOT_FILE

    for level, folder in enumerate([here, *list(here.parents)[:3]]):
        if not (layout.is_rank_dir(folder) or layout.holds_a_capture(folder)):
            continue
        if level == 0:
            kept = layout.is_result_file_name(name) or name in (RAW_FILE, META_FILE, SNAPSHOT_FILE)
            return "is a file of the capture" if kept else None  # a name of its own beside them: allowed
        top = here.relative_to(folder).parts[0]
        if top in (layout.PARSED_DIR, "FRAMEWORK") or top.startswith("PROF_"):
            return f"is in a capture's {top}/ (its parser's or profiler's files)"
        return None
    if here == Path(os.path.realpath(rank_dir.parent)) and layout.is_run_file_name(name):
        return "is a file of the run (its record or log)"
    return None


def run_output_hint(directory: Path, command: str) -> str | None:
    """What to run instead when ``npuprof status``/``trigger`` (``command``) is given a run's output (-o: its
    record beside its captures) rather than the directory of ``--dynamic DIR``: the watched directory the
    latest run recorded, or ``npuprof analyse`` for a run without --dynamic (what its end said, when it wrote
    no capture: analyse would find none). None for any other folder."""
    from npuprof.reports.run_summary import shell_quote

    records = sorted(layout.read_run_records(directory), key=lambda pr: _mtime(pr[0]))
    if not records:
        return None
    config = records[-1][1].get("config")
    dynamic = config.get("dynamic") if isinstance(config, dict) else None
    if isinstance(dynamic, str) and dynamic:
        if _same_directory(Path(dynamic), directory):  # -o DIR --dynamic DIR: its log/ is what is missing
            return None
        return (
            f"{directory} is the output of npuprof run --dynamic {dynamic}, not the directory it watches: "
            f"npuprof {command} {shell_quote(dynamic)}"
        )
    if not layout.find_rank_dirs(directory) and (said := layout.run_without_captures(directory)):
        return f"{said}; it ran without --dynamic: nothing to {command}"
    return (
        f"{directory} is the output of npuprof run, which ran without --dynamic (nothing to {command}): "
        f"npuprof analyse {shell_quote(str(directory))} reads its captures"
    )


def _same_directory(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
