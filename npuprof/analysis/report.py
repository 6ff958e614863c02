"""The `npuprof analyse` report: parse what is unparsed (in parallel), then summarise per rank and across
ranks.

:func:`build_report` returns a :class:`~npuprof.analysis.report_schema.Report` (typed, versioned:
``REPORT_VERSION``; docs/formats.md, "The report"): per rank the steps and their breakdown, the mean step
time, the top operators and kernels, memory and communication; the rank dirs not analysed and why; across
ranks each step's durations, the slowest rank and the step start skew.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import multiprocessing
import os
import shlex
import stat
import statistics
import time
from collections.abc import Callable, Iterable, Sequence, Set
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from npuprof.analysis import pooling, runs
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.annotation_schema import (
    ANNOTATIONS_FILE,
    Annotations,
    AnnotationsError,
    StepRange,
    read_annotations,
)
from npuprof.analysis.forked import die_with
from npuprof.analysis.parse import (
    ANOTHER_PARSE_AT_WORK,
    EARLIER_TABLES_HELD,
    EARLIER_TABLES_KEPT,
    PARSED_MEANWHILE,
    SUMMARY_FILE,
    EarlierTables,
    ParsedMeanwhile,
    ParseOutcome,
    alone_in,
    drop_tables,
    failure_reason,
    parse_rank_dir,
    remove_leftovers,
    table_stamps,
    tables_still_there,
    write_outputs,
    written_file,
)
from npuprof.analysis.report_schema import (  # REPORT_VERSION: read from here too, as before
    REPORT_VERSION,  # noqa: F401
    CrossRange,
    CrossRank,
    CrossStep,
    Problem,
    RankReport,
    Report,
    ReportGc,
    ReportKernel,
    ReportOperator,
    ReportRange,
    ReportStep,
    Slowest,
    StartSkew,
    Straggler,
)
from npuprof.analysis.scratch import ScratchDirs
from npuprof.analysis.step_fields import SHARES, STEP_CSV_FIELDS
from npuprof.analysis.step_selection import StepSelection, of_range
from npuprof.analysis.summary_schema import Summary, SummaryError, TopKernel, TopOperator, read_summary
from npuprof.analysis.versioned import TRACE_GONE
from npuprof.results import layout
from npuprof.results.atomic import make_dir, write_text
from npuprof.results.handover import restart_count_of
from npuprof.results.paths import missing_home
from npuprof.results.rounds import latest_round_counts, latest_said

BARE_SUFFIX = layout.BARE_TABLES_SUFFIX  # a bare trace's tables go to <trace>.npuprof/
OUTLIER_Z = 3.5  # modified z-score (Iglewicz & Hoaglin) above which a rank is an outlier ...
# ... when it is also this much slower than the median: ranks that all sit within a fraction of a percent
# have a tiny deviation, and one 1% slower had a z-score of 50
OUTLIER_MIN_EXCESS = 0.05
SMALL_GROUP_EXCESS = 0.10  # with fewer than 3 ranks: slower than the median by more than this
SMALL_GROUP_STEPS = 5  # ... in at least this many shared steps ...
SMALL_GROUP_CONSISTENCY = 0.8  # ... and in this share of them


class NothingToAnalyse(Exception):
    pass


RECORD_SAYS = "its capture record says: "  # a rank's warning that repeats its capture record's note


def is_bare_trace(path: Path) -> bool:
    """A trace file to analyse on its own: named as Kineto names its traces (whatever it holds: a damaged
    one is reported as such), or any file whose content is a Chrome trace of either form
    (trace_loader.sniff_trace: ``trace.json``, ``chrome_trace_14.json``, torch_npu's ``trace_view.json``)."""
    if not path.is_file():
        return False
    if path.name.endswith(layout.KINETO_SUFFIXES):
        return True
    from npuprof.analysis.trace_loader import sniff_trace

    return sniff_trace(path, named=True) is not None


TRACES_DEPTH = 3  # logs/<run>/ (tensorboard_trace_handler's) to logs/plugins/profile/<date>/ (TensorBoard's)
TRACES_DIRS_SEEN = 200  # directories looked into at most, for that


def _dirs_with_traces(directory: Path, most: int) -> list[Path]:
    """Up to ``most`` directories below ``directory`` holding trace files, nearest first (by name order
    within a level), TRACES_DEPTH levels down at most."""
    found: list[Path] = []
    level, seen = [directory], 0
    for _ in range(TRACES_DEPTH):
        below: list[Path] = []
        for parent in level:
            try:
                below += sorted(d for d in parent.iterdir() if d.is_dir() and not d.is_symlink())
            except OSError:
                continue
        for d in below[: TRACES_DIRS_SEEN - seen]:
            if _trace_files_in(d):
                found.append(d)
                if len(found) == most:
                    return found
        seen += len(below)
        if found or seen >= TRACES_DIRS_SEEN:
            return found
        level = below
    return found


def _trace_files_in(directory: Path) -> list[Path]:
    """The trace files directly in ``directory``: named as Kineto names them (``*.pt.trace.json[.gz]``), or
    any other ``*.json[.gz]`` whose content is a trace (``chrome_trace_1.json``: told by content)."""
    from npuprof.analysis.trace_loader import sniff_trace

    names = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                kineto = entry.name.endswith(layout.KINETO_SUFFIXES)
                if not kineto and (
                    entry.name.startswith(".") or not entry.name.endswith((".json", ".json.gz"))
                ):
                    continue
                try:
                    regular = entry.is_file()
                except OSError as exc:  # a link in a loop (ELOOP): that entry, not the whole directory
                    layout.note_skipped(entry.path, exc.strerror or str(exc))
                    continue
                if not regular:
                    if kineto:
                        layout.note_skipped(entry.path, "not a regular file (a FIFO, a directory)")
                    continue
                if kineto or sniff_trace(entry.path) is not None:
                    names.append(entry.name)
    except OSError:
        return []
    return [directory / name for name in sorted(names)]


def bare_cache_dir(trace: Path) -> Path:
    """Where a bare trace's tables go when its own directory cannot take them (read-only): the user's
    cache, one directory per trace file and version (path, size, modification time)."""
    import hashlib

    info = trace.stat()
    key = f"{trace.resolve()}\0{info.st_size}\0{info.st_mtime_ns}".encode("utf-8", "surrogateescape")
    from npuprof.results.paths import trace_cache_root

    return trace_cache_root() / f"{trace.name[:64]}-{hashlib.sha1(key).hexdigest()[:16]}"


def _identity(trace: Path) -> str:
    """What tells one version of a trace file from another: its size, modification time, inode and
    change time (``cp -p`` or ``rsync -a`` of another trace keeps size and mtime the same: not those)."""
    info = trace.stat()
    return f"{info.st_size} {info.st_mtime_ns} {info.st_ino} {info.st_ctime_ns}\n"


def _made_from(done: Path, trace: Path) -> bool:
    """The tables ``done`` marks were made from ``trace`` as it is now: the identity written in ``done``
    is the trace's (an older npuprof wrote it empty: then the trace must be older than ``done``)."""
    try:
        written = done.read_text(errors="replace")
        if written:
            return written == _identity(trace)
        return trace.stat().st_mtime_ns <= done.stat().st_mtime_ns
    except OSError:
        return False


def _unwritable(path: Path) -> str:
    """Why a directory cannot be made at ``path`` (or take files there), or "" when it can. A folder that
    no one may write in (mode 555: its owner keeps it as it is) is not written in by root either."""
    try:
        folder = os.stat(path.parent)
        if not os.path.lexists(path) and stat.S_ISDIR(folder.st_mode) and not folder.st_mode & 0o222:
            return f"its folder is read-only (mode {folder.st_mode & 0o7777:o})"
    except OSError:
        pass  # said by make_dir
    try:
        make_dir(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return "" if os.access(path, os.W_OK | os.X_OK) else "not writable"


def _parse_bare(
    trace: Path,
    force: bool,
    workers: int,
    export_db: bool = False,
    on_note: Callable[[str], None] | None = None,
    in_cache: bool = False,
    only_alone: bool = False,
) -> tuple[ParseOutcome, Path]:
    """``trace``'s tables, beside it (``<trace>.npuprof/``), or in the user's cache where they cannot go
    there or ``in_cache`` asks for it (a folder of another tool's that is not ours to write in).
    ``only_alone``: as parse_rank_dir's."""
    out_dir = bare_cache_dir(trace) if in_cache else trace.parent / (trace.name + BARE_SUFFIX)
    beside = out_dir / layout.ANALYSE_DONE
    if in_cache:
        why = ""
    elif out_dir.is_symlink():  # tables are never written through a link planted beside the trace
        why = "a symbolic link (not followed)"
    else:
        why = "" if beside.exists() and _made_from(beside, trace) else _unwritable(out_dir)
    home = missing_home() if in_cache or why else None
    if why:
        cached = bare_cache_dir(trace)
        if on_note and home is None:  # else the scratch tables' note says where they went
            on_note(f"cannot write the tables beside the trace ({out_dir}: {why}): they go to {cached}")
        out_dir = cached
    outcome = ParseOutcome(trace, "failed")
    done = out_dir / layout.ANALYSE_DONE
    has_db = layout.holds_profiler_db(out_dir)
    if done.exists() and not force and (has_db or not export_db):
        if _made_from(done, trace):
            outcome.status = "cached"
            if _beside(trace, out_dir) and not (out_dir / layout.info_file_name(None)).exists():
                with contextlib.suppress(OSError):  # tables an older npuprof made: msprof-analyze's too
                    _profiler_info_for_msprof_analyze(out_dir)
            return outcome, out_dir
        if on_note:
            on_note(f"{trace} was written (or touched) since its tables in {out_dir} were made: parsed again")
    before = table_stamps(out_dir)
    alone = False
    try:
        from npuprof.analysis.trace_loader import TraceError

        if home is not None:  # read-only as the caller sees it: the scratch tables serve
            raise FileNotFoundError(errno.ENOENT, "the home directory does not exist", home)
        make_dir(out_dir)
        # a parse of the same trace at the same moment (two analyses of it) keeps its tables: only one
        # that has the folder to itself deletes a set it left short
        with alone_in(out_dir) as alone:
            if only_alone and not alone:
                outcome.status, outcome.reason = "in progress", ANOTHER_PARSE_AT_WORK
                return outcome, out_dir
            if alone:  # what a parse killed mid-way left, as parse_rank_dir removes it (helper-172)
                EarlierTables.of_a_killed_parse(out_dir).put_back()
                remove_leftovers(out_dir)
            earlier = EarlierTables(out_dir if alone else None)  # put back if this parse fails
            try:
                if done.exists():
                    done.unlink()
                identity = _identity(trace)
                outcome.files = write_outputs(trace, out_dir, None, workers, export_db or has_db)
                if _beside(trace, out_dir):
                    outcome.files.append(_profiler_info_for_msprof_analyze(out_dir))
                tables_still_there(out_dir, outcome.files)
                write_text(done, identity)  # inside the try: a full disk here puts the earlier set back too
            except BaseException:
                if alone and earlier.put_back():
                    outcome.kept_earlier = True
                    remove_leftovers(out_dir)
                outcome.held_earlier = earlier.held
                raise
            finally:
                earlier.drop()
        outcome.status = "parsed"
    except TraceError as exc:
        outcome.status, outcome.reason = exc.kind, str(exc)
        if alone and not outcome.kept_earlier:
            drop_tables(out_dir, before)  # the trace written while it was read: no table of it is kept
    except ParsedMeanwhile:  # (an OSError, not the folder's: taken for one, the tables went to scratch)
        outcome.status, outcome.reason, outcome.files = "cached", PARSED_MEANWHILE, []
    except Exception as exc:
        outcome.status, outcome.reason = "failed", failure_reason(exc)
        # an OSError here is the tables' folder's (the trace was readable): a scratch folder may take them
        outcome.no_space = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
        outcome.read_only = isinstance(exc, OSError) and not outcome.no_space
        if alone and not outcome.kept_earlier:
            drop_tables(out_dir, before)  # a set short of some tables does not look parsed
    if outcome.kept_earlier:
        outcome.reason += f"; {EARLIER_TABLES_KEPT}"
    elif outcome.held_earlier:
        outcome.reason += f"; {EARLIER_TABLES_HELD}"
    if outcome.status != "parsed":
        with contextlib.suppress(OSError):
            out_dir.rmdir()  # made for nothing (a trace that could not be read): not left behind empty
    return outcome, out_dir


def _beside(trace: Path, out_dir: Path) -> bool:
    """Whether ``out_dir`` is the tables' folder beside ``trace`` (not the user's cache)."""
    return out_dir == trace.parent / (trace.name + BARE_SUFFIX)


def _profiler_info_for_msprof_analyze(out_dir: Path) -> str:
    """A profiler_info.json in a bare trace's tables folder, as a rank dir has one: msprof-analyze's advisor
    finds the profiling data it gives its Overall Summary of by a file named profiler_info* (its
    get_profile_path), and gave none of ``<trace>.npuprof/`` without it. Its config is unknown, as that of
    a trace whose profiler npuprof did not start; npuprof's readers take the folder for no capture
    (layout.holds_a_capture). Returns the name written."""
    name = layout.info_file_name(None)
    write_text(out_dir / name, json.dumps({"config": {}}, indent=4))
    return name


def parse_all(
    rank_dirs: list[Path],
    jobs: int,
    force: bool,
    on_done: Callable[[ParseOutcome], None] | None = None,
    db_dirs: Set[Path] = frozenset(),
) -> list[ParseOutcome]:
    """Parse rank dirs, ``jobs`` at a time (one process each); a single dir gets ``jobs`` reader processes.
    Those in ``db_dirs`` also get the SQLite files of --export-type db (:func:`plan_db`)."""
    if len(rank_dirs) == 1 or jobs <= 1:
        outcomes = []
        for d in rank_dirs:
            workers = jobs if len(rank_dirs) == 1 else 1
            outcome = parse_rank_dir(d, force=force, workers=workers, export_db=d in db_dirs)
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
        return outcomes
    results: dict[Path, ParseOutcome] = {}
    todo: list[Path] = []
    for d in rank_dirs:
        if (
            not force
            and (d / layout.PARSED_DIR / layout.ANALYSE_DONE).exists()
            and (d not in db_dirs or layout.has_profiler_db(d))
        ):
            # already parsed: parse_rank_dir answers "cached" at once; no process is forked for it
            # (a report on 1,000 parsed ranks: ~0.3 s of pool round trips)
            results[d] = outcome = parse_rank_dir(d, force, 1, export_db=d in db_dirs)
            if on_done:
                on_done(outcome)
        else:
            todo.append(d)
    if not todo:
        return [results[d] for d in rank_dirs]
    ctx = multiprocessing.get_context("fork")
    # each worker dies with this process: an analyse ended by SIGTERM or kill -9 left them sleeping for good
    # (their queue's pipe held open by themselves), as it once left its forked children (forked.die_with)
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(todo)), mp_context=ctx, initializer=die_with, initargs=(os.getpid(),)
    )
    with pool:
        futures = {pool.submit(parse_rank_dir, d, force, 1, d in db_dirs): d for d in todo}
        for fut in as_completed(futures):
            d = futures[fut]
            try:
                outcome = fut.result()
            except Exception as exc:  # a worker killed (e.g. out of memory)
                outcome = ParseOutcome(d, "failed", f"the parsing process died: {exc}")
            results[d] = outcome
            if on_done:
                on_done(outcome)
    return [results[d] for d in rank_dirs]


def plan_db(rank_dirs: list[Path], export_db: bool) -> tuple[frozenset[Path], list[str]]:
    """The rank dirs to parse with the SQLite files (``export_db``: all of them), and what to tell the user.

    msprof-analyze takes a whole run as db data as soon as one rank dir holds a profiler db, and then
    silently leaves out the rank dirs without one (its cluster data preprocessor). So when some rank dirs
    already have a db, those npuprof parses get one too. Rank dirs torch_npu parsed are never written into:
    when they lack a db, the user hears that msprof-analyze will leave them out."""
    from npuprof.analysis.ascend_output import parsed_by_torch_npu

    have = {d for d in rank_dirs if layout.has_profiler_db(d)}
    if not export_db and (not have or len(have) == len(rank_dirs)):
        return frozenset(), []
    without = [d for d in rank_dirs if d not in have]
    theirs = {d for d in without if parsed_by_torch_npu(d)}
    notes: list[str] = []
    if export_db:
        wanted = frozenset(rank_dirs)  # parse_rank_dir leaves those torch_npu parsed as they are
    else:
        wanted = frozenset(d for d in without if d not in theirs)
        if wanted:
            notes.append(
                f"{len(wanted)} of {len(rank_dirs)} rank dirs had no profiler db: writing one for each "
                "parsed, so that msprof-analyze reads the whole run (it drops the ranks without one)"
            )
    if theirs:
        some_db = bool(have) or len(theirs) < len(without)
        notes.append(
            f"{len(theirs)} of {len(rank_dirs)} rank dirs were parsed by torch_npu without a db (npuprof "
            "does not write into them): "
            + (
                "msprof-analyze will use only the ranks with a db"
                if some_db
                else "torch_npu writes one when the capture runs with --export-type db"
            )
        )
    return wanted, notes


def _db_gaps(rank_dirs: list[Path]) -> list[str]:
    """After parsing: when some rank dirs of the run have a db and others still not (the export failed, a
    rank left no trace), the one line that says msprof-analyze will leave those out without a word."""
    from npuprof.analysis.ascend_output import parsed_by_torch_npu

    have = [d for d in rank_dirs if layout.has_profiler_db(d)]
    # those torch_npu parsed were named before parsing (plan_db)
    without = [d.name for d in rank_dirs if d not in have and not parsed_by_torch_npu(d)]
    if not have or not without:
        return []
    shown = ", ".join(without[:3]) + (f" and {len(without) - 3} more" if len(without) > 3 else "")
    return [
        f"{len(without)} of {len(rank_dirs)} rank dirs have no profiler db ({shown}): msprof-analyze's db "
        "recipes will leave them out of the run without a word (each one's report says why)"
    ]


def _load_summary(parsed_dir: Path) -> tuple[Summary | None, str]:
    """The rank's summary, or (None, why it cannot be used: missing, damaged, or written by another
    version; re-parsing with --force rewrites it)."""
    from npuprof.analysis import ascend_output

    if not (parsed_dir / SUMMARY_FILE).exists() and ascend_output.parsed_by_torch_npu(parsed_dir.parent):
        try:
            return ascend_output.summary_of(parsed_dir.parent), ""
        except ascend_output.AscendTableError as exc:
            return None, f"torch_npu's tables: {exc}"
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            # another tool's files: a form no reader foresaw costs this rank, never the whole report
            return None, f"torch_npu's tables are in a form npuprof cannot read ({type(exc).__name__}: {exc})"
    try:
        data = layout.read_regular(parsed_dir / SUMMARY_FILE)
    except OSError as exc:
        why = f"no readable {SUMMARY_FILE} ({exc.strerror or exc}; parsed by another tool?)"
        if (
            ascend_output.parsed_by_npuprof(parsed_dir.parent)
            and layout.find_raw_trace(parsed_dir.parent) is None
        ):
            # --force has nothing to parse again (helper-208)
            return (
                None,
                why + "; its raw trace is gone too (deleted since its parse?): nothing to report it from",
            )
        return None, why + "; re-run with --force"
    try:
        return read_summary(data), ""
    except SummaryError as exc:
        problem = exc
    # its fix's words depend on whether a trace is left to parse again: looked up only for a summary that
    # fails (a scan of the rank dir, for every rank of a big result otherwise)
    if not _raw_trace_gone(parsed_dir.parent):
        return None, f"{SUMMARY_FILE}: {problem}"
    try:
        return read_summary(data, trace_kept=False), ""
    except SummaryError as exc:
        return None, f"{SUMMARY_FILE}: {exc}"


def _parsed_again(
    outcome: ParseOutcome, out_dir: Path, why: str, jobs: int, on_note: Callable[[str], None] | None
) -> tuple[ParseOutcome, Path] | None:
    """A rank dir (or a bare trace) whose summary or annotations npuprof wrote are unreadable (cut short,
    damaged, an older version) while its raw trace is there: parsed again from that trace, as one missing
    its summary is, and said once (``why``: what was wrong); the outcome and its tables' folder. None where
    that is not for this report to do: --force parsed it already, the tables are another tool's or a newer
    npuprof's, or no trace is left to parse."""
    source = outcome.rank_dir
    bare = source.is_file()
    if (
        outcome.status != "cached"
        or outcome.reason  # --force found nothing to parse again
        or not os.path.lexists(out_dir / SUMMARY_FILE)  # torch_npu's tables
        or _written_by_newer(out_dir)
        or (not bare and (out_dir != source / layout.PARSED_DIR or layout.find_raw_trace(source) is None))
    ):
        return None
    if bare:
        again, out_dir = _parse_bare(source, True, jobs, only_alone=True)
    else:
        again = parse_rank_dir(source, force=True, workers=jobs, only_alone=True)
    if not again.ok:
        again.reason = f"{why}; not parsed again from its raw trace: {again.reason}"
    elif on_note:
        on_note(f"{source}: {why.split('; re-run with --force')[0]}: parsed again from its raw trace")
    return again, out_dir


def tables_remade(outcomes: list[ParseOutcome]) -> str:
    """One line for the rank dirs parsed again because tables an earlier parse wrote were gone (deleted by
    hand, a cleaning script), their raw traces still there; "" when there were none."""
    remade = [o for o in outcomes if o.status == "parsed" and o.tables_missing]
    if not remade:
        return ""
    first = remade[0]
    gone = ", ".join(first.tables_missing)
    if len(remade) == 1:
        return f"{first.rank_dir}: {gone} gone from its {layout.PARSED_DIR}/: parsed again from its raw trace"
    return (
        f"{len(remade)} rank dirs had tables gone from their {layout.PARSED_DIR}/ ({first.rank_dir}: "
        f"{gone}, ...): parsed again from their raw traces"
    )


def _written_by_newer(out_dir: Path) -> bool:
    """Whether the summary or the annotations in ``out_dir`` are a newer npuprof's: never written over."""
    from npuprof.analysis.annotation_schema import ANNOTATIONS_FILE, ANNOTATIONS_VERSION
    from npuprof.analysis.summary_schema import SUMMARY_VERSION
    from npuprof.analysis.versioned import written_by_newer

    for name, current in ((SUMMARY_FILE, SUMMARY_VERSION), (ANNOTATIONS_FILE, ANNOTATIONS_VERSION)):
        with contextlib.suppress(OSError):
            if written_by_newer(layout.read_regular(out_dir / name), current):
                return True
    return False


def _raw_trace_gone(rank_dir: Path) -> bool:
    """Whether ``rank_dir`` holds nothing to parse again (its raw trace deleted since its parse, to save
    space): --force cannot remake its tables."""
    return layout.find_raw_trace(rank_dir) is None and not layout.holds_ascend_raw_data(rank_dir)


def _load_annotations(parsed_dir: Path) -> tuple[Annotations | None, str]:
    """The rank's marks, ranges and GC pauses (None without them), or (None, why they cannot be used)."""
    try:
        data = layout.read_regular(parsed_dir / ANNOTATIONS_FILE)
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        fix = TRACE_GONE if _raw_trace_gone(parsed_dir.parent) else "re-run with --force"
        return None, f"{ANNOTATIONS_FILE}: {exc.strerror or exc}; {fix}"
    try:
        return read_annotations(data), ""
    except AnnotationsError as exc:
        why = str(exc)
    if _raw_trace_gone(parsed_dir.parent):  # asked only of an unreadable file: a report reads thousands
        try:
            read_annotations(data, trace_kept=False)
        except AnnotationsError as exc:
            why = str(exc)
    return None, f"{ANNOTATIONS_FILE}: {why}"


def _in_steps(step: Any, steps: StepSelection | None) -> bool:
    return steps is None or step in steps


def _no_step_column(items: Sequence[TopOperator] | Sequence[TopKernel]) -> bool:
    return bool(items) and all(item.step is None for item in items)


def _aggregate(
    items: Sequence[TopOperator] | Sequence[TopKernel], steps: StepSelection | None, times: tuple[str, ...]
) -> list[tuple[str, int, list[float]]]:
    """Per name over the steps chosen, in order of first appearance: the calls and each of ``times``
    summed (rounded to the ns at each addition), largest first by the first of ``times``."""
    counts: dict[str, int] = {}
    sums: dict[str, list[float]] = {}
    for item in items:
        if not _in_steps(item.step, steps):
            continue
        acc = sums.setdefault(item.name, [0.0] * len(times))
        for k, name in enumerate(times):
            acc[k] = round(acc[k] + getattr(item, name), 3)
        counts[item.name] = counts.get(item.name, 0) + item.count
    return [(name, counts[name], sums[name]) for name in sorted(sums, key=lambda name: -sums[name][0])]


def range_totals(items: Sequence[StepRange], steps: StepSelection | None) -> list[ReportRange]:
    """Per range name over the steps chosen: the calls, the time (rounded to the ns at each addition),
    its mean and the longest; largest total first (ties in order of first appearance)."""
    acc: dict[str, list[Any]] = {}
    for item in items:
        if not _in_steps(item.step, steps):
            continue
        entry = acc.setdefault(item.name, [item.kind, 0, 0.0, 0.0])
        entry[1] += item.count
        entry[2] = round(entry[2] + item.total_us, 3)
        entry[3] = max(entry[3], item.max_us)
    return [
        ReportRange(
            name=name, kind=kind, count=count, total_us=total, mean_us=round(total / count, 3), max_us=longest
        )
        for name, (kind, count, total, longest) in sorted(acc.items(), key=lambda kv: -kv[1][2])
        if count
    ]


def cross_ranges(per_rank: Sequence[tuple[int | None, list[ReportRange]]], top: int) -> list[CrossRange]:
    """Per range name over the ranks (each rank's totals over the steps chosen): on how many ranks,
    calls, time, mean, the longest and its rank; ``top`` of them, largest total first."""
    acc: dict[str, list[Any]] = {}
    on_ranks: dict[str, set[int | None]] = {}  # two captures of one rank count it once
    for rank, ranges in per_rank:
        for r in ranges:
            entry = acc.setdefault(r.name, [r.kind, 0, 0, 0.0, -1.0, None])
            on_ranks.setdefault(r.name, set()).add(rank)
            entry[1] = len(on_ranks[r.name])
            entry[2] += r.count
            entry[3] = round(entry[3] + r.total_us, 3)
            if r.max_us > entry[4]:
                entry[4], entry[5] = r.max_us, rank
    ordered = sorted(acc.items(), key=lambda kv: -kv[1][3])[:top]
    return [
        CrossRange(
            name=name,
            kind=kind,
            ranks=ranks,
            count=count,
            total_us=total,
            mean_us=round(total / count, 3),
            max_us=longest,
            max_rank=where,
        )
        for name, (kind, ranks, count, total, longest, where) in ordered
    ]


def _add_gc(chosen: list[ReportStep], annotations: Annotations) -> ReportGc | None:
    """Each chosen step's GC time (0 where no pause fell), and the rank's GC over them."""
    gc = annotations.gc
    if gc is msgspec.UNSET:
        return None
    by_step = {g.step: g for g in gc.steps}
    total = 0.0
    for s in chosen:
        g = by_step.get(s.step)
        s.gc_us, s.gc_pauses = (g.gc_us, g.pauses) if g is not None else (0.0, 0)
        total = round(total + s.gc_us, 3)
    return ReportGc(
        threshold_ms=gc.threshold_ms,
        pauses=sum(int(s.gc_pauses) for s in chosen),
        gc_us=total,
        dropped=gc.dropped,
    )


def _add_shares(chosen: list[ReportStep]) -> None:
    """Each step's percents of its duration (step_fields.SHARES), where the time is known."""
    for s in chosen:
        for key, share in SHARES:
            part = getattr(s, key)
            if part is not msgspec.UNSET:
                setattr(s, share, round(100 * part / s.duration_us, 1) if s.duration_us else 0.0)


def _trace_name(rank_dir: Path, name: str) -> str:
    """The raw trace's name as it is now: the post-processor gzips it after the parse that named it."""
    if name and not (rank_dir / name).exists() and (rank_dir / f"{name}.gz").exists():
        return f"{name}.gz"
    return name


def rank_report(
    summary: Summary,
    rank_dir: Path,
    status: str,
    steps: StepSelection | None,
    top: int,
    annotations: Annotations | None = None,
) -> RankReport:
    """One rank's part of the report, from its summary: the steps chosen and the ``top`` operators and
    kernels over them; with ``annotations``, the ``top`` ranges and each step's GC time."""
    chosen = [ReportStep(**msgspec.structs.asdict(s)) for s in summary.steps if _in_steps(s.step, steps)]
    _add_shares(chosen)
    durations = [s.duration_us for s in chosen]
    peaks = [p for s in chosen if (p := s.memory_peak_mb) is not None and p is not msgspec.UNSET]
    reserved = [p for s in chosen if (p := s.memory_peak_reserved_mb) is not None and p is not msgspec.UNSET]
    whole: list[str] = []  # tables without a step column (torch_npu's operator_details.csv): whole capture
    op_steps = None if steps and _no_step_column(summary.top_operators) else steps
    kernel_steps = None if steps and _no_step_column(summary.top_kernels) else steps
    if op_steps is None and steps:
        whole.append("operators")
    if kernel_steps is None and steps:
        whole.append("kernels")
    communication = summary.communication
    if steps:
        by_step = summary.communication_by_step
        if by_step is msgspec.UNSET:  # a summary of an older npuprof: no step's own figures
            if summary.communication.get("operators"):
                whole.append("communication")
        else:
            from npuprof.analysis.communication import add_summaries

            communication = add_summaries([by_step[str(s.step)] for s in chosen if str(s.step) in by_step])
    operators = _aggregate(summary.top_operators, op_steps, ("self_us", "total_us", "device_us"))
    kernels = _aggregate(summary.top_kernels, kernel_steps, ("total_us",))
    report = RankReport(
        rank=summary.rank,
        rank_dir=str(rank_dir),
        status=status,
        device=summary.device,
        trace=_trace_name(rank_dir, summary.trace),
        steps=chosen,
        step_time_mean_us=round(statistics.fmean(durations), 3) if durations else None,
        top_operators=[
            ReportOperator(name=name, count=count, self_us=s, total_us=t, device_us=d)
            for name, count, (s, t, d) in operators[:top]
        ],
        top_kernels=[ReportKernel(name=name, count=count, total_us=t) for name, count, (t,) in kernels[:top]],
        # over the steps reported; the capture's peak when no step has one of its own, unless --steps
        # chose steps (a summary of an older npuprof has no step's reserved peak)
        memory_peak_mb=max(peaks) if peaks else None if steps else summary.memory.get("peak_allocated_mb"),
        memory_peak_reserved_mb=max(reserved)
        if reserved
        else None
        if steps
        else summary.memory.get("peak_reserved_mb"),
        communication=communication,
        # what the parser could not fully understand (device work of unknown categories: Extract.warnings())
        warnings=[str(w) for w in summary.warnings] if summary.warnings else msgspec.UNSET,
        time_base_ns=summary.time_base_ns,
        cut_short=summary.cut_short,
    )
    _preparing_unknown_where_nothing_ran(summary, chosen)
    if empty := empty_steps(summary, chosen):
        report.warnings = [*(report.warnings or []), empty]
    if whole:
        said = " and ".join(whole)
        report.warnings = [
            *(report.warnings or []),
            f"{'top ' if whole[0] != 'communication' else ''}{said} are of the whole capture, not of "
            "--steps: their table has no step column",
        ]
    if annotations is not None:
        if annotations.ranges is not msgspec.UNSET:
            report.ranges = range_totals(annotations.ranges, steps)[:top]
        gc = _add_gc(chosen, annotations)
        if gc is not None:
            report.gc = gc
        if annotations.warnings:
            report.warnings = [*(report.warnings or []), *annotations.warnings]
    return report


def _preparing_unknown_where_nothing_ran(summary: Summary, chosen: list[ReportStep]) -> None:
    """A step in which nothing ran (no computing, no communication, no operator or kernel of it: a capture
    in which no operator ran) has no first task for its Preparing to run to, and the summary's 0 there
    (docs/formats.md, "Step breakdown") is no measurement: it is unknown (None) in the report. Items of no
    step (a table without a step column) may be of any step: then every step keeps its figure."""
    busy = {item.step for item in [*summary.top_operators, *summary.top_kernels]}
    if None in busy and any(s.step is not None for s in chosen):
        return
    for s in chosen:
        if not s.computing_us and not s.communication_us and s.step not in busy:
            s.preparing_us = None


STUB_SHARE = 0.1  # a last step shorter than this share of the median step, with nothing in it, is a stub


def trailing_stub(summary: Summary) -> tuple[int, str] | None:
    """The last step of a trace, and why, when it is a stub: nothing ran in it (no computing, no
    communication, no operator or kernel of it) and it lasted less than STUB_SHARE of the median of the
    others. torch.profiler writes one when the profiler stops right after a ``prof.step()`` (a loop ending
    inside the schedule's window, ``with profile()`` around a loop that calls step() last)."""
    numbered = [s for s in summary.steps if isinstance(s.step, int)]
    if len(numbered) < 2:
        return None
    last = max(numbered, key=lambda s: s.step)
    if last.computing_us or last.communication_us:
        return None
    if any(item.step == last.step for item in [*summary.top_operators, *summary.top_kernels]):
        return None  # a host operator ran (its kernel after the trace's step: a device trace)
    others = statistics.median(s.duration_us for s in numbered if s is not last)
    if last.duration_us >= STUB_SHARE * others:
        return None
    took = last.duration_us
    return last.step, f"nothing ran in it: the trace ends {took:.3f} µs after it began (the profiler stopped)"


def empty_steps(summary: Summary, chosen: list[ReportStep]) -> str | None:
    """A warning for the steps before the last in which nothing ran and that lasted less than STUB_SHARE of
    the median of the others: a script calling ``prof.step()`` more than once an iteration (helper-137: 5 µs
    steps between the real ones, not flagged, lowered the mean step time)."""
    numbered = [s for s in chosen if isinstance(s.step, int)]
    if len(numbered) < 3:
        return None
    last = max(s.step for s in summary.steps if isinstance(s.step, int))
    busy = {item.step for item in [*summary.top_operators, *summary.top_kernels]}
    idle = {
        s.step
        for s in numbered
        if s.step != last and not s.computing_us and not s.communication_us and s.step not in busy
    }
    others = [s.duration_us for s in numbered if s.step not in idle]
    if not idle or not others:
        return None
    typical = statistics.median(others)
    empty = [s.step for s in numbered if s.step in idle and s.duration_us < STUB_SHARE * typical]
    if not empty:
        return None
    shown = ", ".join(map(str, empty[:10])) + (", ..." if len(empty) > 10 else "")
    mean = statistics.fmean(s.duration_us for s in numbered)
    kept = [s.duration_us for s in numbered if s.step not in set(empty)]
    without = statistics.fmean(kept)
    return (
        f"{len(empty)} step(s) ran nothing and lasted under {STUB_SHARE:.0%} of the median step "
        f"(steps {shown}): prof.step() called more than once an iteration? They lower the mean step time "
        f"({mean / 1000:.3f} ms; {without / 1000:.3f} ms without them)"
    )


def partial_steps(rank_dir: Path, summary: Summary) -> list[tuple[int, str]]:
    """The steps of a capture that are not whole, and why: a stub torch.profiler wrote
    (:func:`trailing_stub`), then the step the capture ended inside of (its record's, when it was finished
    early: training ended, SIGTERM). The last one listed is the one a report names."""
    found = [stub] if (stub := trailing_stub(summary)) is not None else []
    record = layout.read_capture_record(rank_dir)
    if (began := layout.partial_first_step(record)) is not None:
        found.append((began, layout.FIRST_STEP_PARTIAL_WHY))
    cut = layout.partial_step(record)
    if cut is not None:
        found.append((cut, str((record or {}).get("detail") or "the capture ended during this step")))
    return found


def capture_end_cost(rank_dir: Path) -> tuple[int, float] | None:
    """The capture's last step and the ms its end took the training process after that step closed (the
    record's ``export_ms``: torch's stop, the trace export), or None when not recorded."""
    record = layout.read_capture_record(rank_dir) or {}
    took, steps = record.get("export_ms"), record.get("steps")
    if not isinstance(took, int | float) or isinstance(took, bool) or not math.isfinite(took) or took < 0:
        return None
    last = steps[-1] if isinstance(steps, list) and steps else None
    if not isinstance(last, int) or isinstance(last, bool):
        return None
    return last, float(took)


def capture_start_cost(rank_dir: Path) -> tuple[int, float, str | msgspec.UnsetType | None] | None:
    """The step whose boundary started the capture's profiler, the ms that start took the training
    process (the record's ``start_after_step``, ``start_ms``) and the call it ran inside (``step_on``: the
    --step-on function, None for optimizer.step(), UNSET where the record does not say), or None when not
    recorded."""
    record = layout.read_capture_record(rank_dir) or {}
    took, after = record.get("start_ms"), record.get("start_after_step")
    if not isinstance(took, int | float) or isinstance(took, bool) or not math.isfinite(took) or took < 0:
        return None
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        return None
    step_on = record.get("step_on", msgspec.UNSET)
    return after, float(took), step_on if step_on is None or isinstance(step_on, str) else msgspec.UNSET


SCRATCH_ROOTS = ("/dev/shm", None)  # None: the system's temporary directory (TMPDIR)
SCRATCH_SHARE = 2.0  # the scratch room asked for, as a multiple of the raw trace's (plain) size


def _in_scratch(
    outcome: ParseOutcome,
    out_dir: Path,
    scratch: ScratchDirs,
    on_note: Callable[[str], None] | None,
    trace: Path | None = None,
) -> Path:
    """Where ``outcome``'s report is read from: ``out_dir``, or, for a capture whose tables could be
    written neither there nor in the user's cache (a full disk; read-only results and a read-only or
    missing home), tables made in a scratch directory, removed after the report (:func:`_tables_elsewhere`).
    ``trace``: a bare trace's file (a rank dir's is found in it)."""
    if not (outcome.no_space or outcome.read_only):
        return out_dir
    why_not: list[str] = []
    elsewhere = _tables_elsewhere(outcome, scratch, trace, why_not)
    if elsewhere is None:
        if outcome.read_only:  # its advice, its trace analysed alone, would meet the same walls
            outcome.reason = _no_scratch_either(outcome.reason, why_not)
        return out_dir
    if on_note and outcome.no_space:
        kept = (
            f"its new tables are not kept there ({EARLIER_TABLES_KEPT})"
            if outcome.kept_earlier
            else "its tables are not kept there"
        )
        on_note(
            f"{outcome.rank_dir}: the disk is full: {kept}; this report is made from "
            f"tables in {elsewhere.parent}, removed afterwards (free some space, then npuprof analyse it "
            "again to keep them)"
        )
    elif on_note:
        from npuprof.results.paths import trace_cache_root

        on_note(
            f"{outcome.rank_dir}: its tables can be written neither there nor in the user's cache "
            f"({trace_cache_root()}): this report is made from tables in {elsewhere.parent}, removed "
            "afterwards (set XDG_CACHE_HOME to a writable folder to keep them)"
        )
    return elsewhere


def _no_scratch_either(reason: str, why_not: list[str]) -> str:
    """A read-only capture's failure (parse.failure_reason) once no scratch directory could take its tables
    either (``why_not``: why each, :func:`_tables_elsewhere`): the advice to analyse its trace file alone
    (tables in the user's cache) is left out, as that cache could not take them (helper-156)."""
    from npuprof.results.paths import trace_cache_root

    said = reason.split("; its tables cannot be written there", 1)[0]
    roots = "; ".join(why_not) or ", ".join(root or "TMPDIR" for root in SCRATCH_ROOTS)
    return (
        f"{said}; its tables can be written neither there, nor in the user's cache ({trace_cache_root()}), "
        f"nor in {roots}: analyse a copy in a writable place, or set XDG_CACHE_HOME to a writable folder"
    )


def _tables_elsewhere(
    outcome: ParseOutcome, scratch: ScratchDirs, trace: Path | None = None, why_not: list[str] | None = None
) -> Path | None:
    """A capture whose tables could not be written: its tables made in a new scratch directory (made by
    ``scratch``, which removes it), the first of SCRATCH_ROOTS with room for them; ``outcome``
    then reads as parsed. None when none has room or the parse fails there too; ``why_not`` gets why, a
    root each (before, every failure was said as "no room": a run under load saw a parse fail in both).
    ``trace``: a bare trace's file (a rank dir's is found in it)."""
    import tempfile

    raw = trace or layout.find_raw_trace(outcome.rank_dir)
    if raw is None:
        return None
    try:
        size = plain_size(raw)
    except OSError:
        return None
    why = why_not if why_not is not None else []
    for root in SCRATCH_ROOTS:
        where = root or "TMPDIR"
        try:  # gettempdir() raises when no temporary directory can take a file (all full)
            base = root or tempfile.gettempdir()
            where = root or f"TMPDIR ({base})"
            if not scratch_has_room(base, size):
                why.append(f"{where} (no room)")
                continue
            made = scratch.make(base)
        except OSError as exc:
            why.append(f"{where} ({exc.strerror or exc})")
            continue
        out_dir = made / layout.PARSED_DIR
        try:
            out_dir.mkdir()
            write_outputs(raw, out_dir, outcome.rank, 1)
        except Exception as exc:
            why.append(f"{where} ({_scratch_failure(exc)})")
            continue
        _keep_what_the_report_reads(out_dir)
        outcome.status = "parsed"
        return out_dir
    return None


def scratch_has_room(base: str, size: int) -> bool:
    """Whether ``base``'s filesystem has room for the tables of a trace of ``size`` plain bytes: its share
    of the size, and the fixed-size outputs' allowance the post-processor's parse asks for too (a tiny
    trace's tables, each a 4 KiB page at least, filled a nearly full tmpfs partway). Raises OSError."""
    import shutil

    return shutil.disk_usage(base).free >= SCRATCH_SHARE * size + layout.PARSE_SPACE_ALLOWANCE


def _scratch_failure(exc: Exception) -> str:
    """Why tables could not be made in a scratch root, in a few words."""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no room"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {written_file(exc.filename)}" if exc.filename else exc.strerror
    return f"{type(exc).__name__}: {exc}"


def plain_size(raw: Path) -> int:
    """The size of ``raw``'s JSON once read: a gzipped trace's from its gzip trailer (the size of its last
    member, modulo 4 GiB: exact for the single member torch and npuprof write), never less than 8 times the
    file (the 8x it was taken as: a capture's trace ran 16x, and a scratch root that fitted 8x filled
    partway, helper-156). Raises OSError."""
    size = raw.stat().st_size
    if not raw.name.endswith(".gz"):
        return size
    with open(raw, "rb") as handle:
        handle.seek(max(size - 4, 0))
        trailer = handle.read(4)
    stated = int.from_bytes(trailer, "little") if len(trailer) == 4 else 0
    return max(stated, 8 * size)


def _keep_what_the_report_reads(out_dir: Path) -> None:
    """Scratch tables are kept until the report is made, each rank's: all of them held every rank's whole
    set at once (a 60-step capture's: 20 MB, 18 of them trace_view.json; in /dev/shm, memory the training
    jobs beside it share); the report reads only the summary and the annotations."""
    import shutil

    for entry in out_dir.iterdir():
        if entry.name in (SUMMARY_FILE, ANNOTATIONS_FILE):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def _memory_snapshot_left(rank_dir: Path) -> str | None:
    """The note for a capture whose --memory-timeline was not made: its snapshot is still there (the
    post-processor removes it once the timeline is written; it stopped, or was killed, before). None while
    the capture's run goes on: its post-processor has yet to write it (said once by `npuprof analyse`)."""
    from npuprof.agent.memory_snapshot import SNAPSHOT_FILE
    from npuprof.results.extras import exports_not_made

    if "memory-timeline" not in exports_not_made(rank_dir, ()) or layout.run_of_capture_going(rank_dir):
        return None
    return (
        f"its memory timeline was not made ({SNAPSHOT_FILE} is left): npuprof memory-timeline "
        f"{shlex.quote(str(rank_dir))} -o memory.json makes it"
    )


def recorded_detail(rank_dir: Path) -> str:
    """What the record of a complete capture with whole steps says about it (a step that holds several
    optimizer steps, steps of its window passed uncounted), or ""."""
    record = layout.read_capture_record(rank_dir) or {}
    detail = record.get("detail")
    if record.get("status") != layout.STATUS_COMPLETE or not isinstance(detail, str):
        return ""
    return detail if layout.partial_step(record) is None else ""


def _of_steps(times: list[tuple[Any, float]], shared: set[Any]) -> list[float]:
    """The times of the steps in ``shared``, or all of them when no step is."""
    return [t for step, t in times if step in shared] if shared else [t for _step, t in times]


def start_known(start_us: float) -> bool:
    """False for the start a torch_npu step table could not give (ascend_output.UNKNOWN_START, -0.0)."""
    return not (start_us == 0 and math.copysign(1.0, start_us) < 0)


def slowest_rank(
    means: dict[int, float],
    medians: dict[int, float] | None = None,
    per_step: dict[int, dict[Any, float]] | None = None,
) -> Slowest | None:
    """The slowest rank by mean step time, and whether it is an outlier (modified z-score over the ranks'
    median absolute deviation, and more than 5% above the median; with fewer than 3 ranks, > 10% above the
    median, by its mean and, when ``medians`` gives each rank's median step, by that too: one slow step of
    a short capture, a warm-up or a checkpoint, lifts a mean by itself and does not make a rank slow; and
    for 2 ranks, when ``per_step`` gives each rank's time of each step, in at least SMALL_GROUP_STEPS steps
    they share and 80% of those: two ranks' few steps differ by chance that much on a loaded host)."""
    if len(means) < 2:
        return None
    undecided: int | None = None
    values = list(means.values())
    med = statistics.median(values)
    rank, worst = max(means.items(), key=lambda kv: kv[1])
    mad = statistics.median(abs(v - med) for v in values)
    excess = (worst - med) / med if med > 0 else 0.0
    if len(values) >= 3 and mad > 0:
        z = 0.6745 * (worst - med) / mad
        outlier = z > OUTLIER_Z and excess > OUTLIER_MIN_EXCESS
    else:
        z = None
        outlier = excess > SMALL_GROUP_EXCESS
        if outlier and medians:
            typical = statistics.median(medians.values())
            outlier = typical > 0 and (medians[rank] - typical) / typical > SMALL_GROUP_EXCESS
        if outlier and per_step and len(values) < 3:
            shared = set.intersection(*(set(times) for times in per_step.values()))
            if len(shared) < SMALL_GROUP_STEPS:
                undecided = len(shared)
            outlier = _slower_in_most_steps(rank, per_step)
    found = Slowest(
        rank=rank,
        mean_step_us=round(worst, 3),
        median_us=round(med, 3),
        slower_than_median_pct=round(excess * 100, 2),
        modified_z=None if z is None else round(z, 2),
        outlier=bool(outlier),
    )
    if undecided is not None:
        found.too_few_steps = undecided
    return found


def _slower_in_most_steps(rank: int, per_step: dict[int, dict[Any, float]]) -> bool:
    """Whether ``rank`` is > 10% above the median of the ranks in 80% of the steps they all have, and
    they have at least SMALL_GROUP_STEPS of them."""
    shared = set.intersection(*(set(times) for times in per_step.values()))
    if len(shared) < SMALL_GROUP_STEPS:
        return False
    slower = 0
    for step in shared:
        typical = statistics.median(times[step] for times in per_step.values())
        slower += typical > 0 and per_step[rank][step] > typical * (1 + SMALL_GROUP_EXCESS)
    return slower >= SMALL_GROUP_CONSISTENCY * len(shared)


def cross_rank(
    ranks: list[RankReport], ranges: list[CrossRange] | msgspec.UnsetType = msgspec.UNSET
) -> CrossRank:
    """The steps across ranks (a partial step is left out), the slowest rank and each step's start skew;
    ``ranges``: the ranges across ranks (:func:`cross_ranges`), when some rank has them."""
    by_step: dict[Any, dict[int, tuple[float, float]]] = {}
    means: dict[int, float] = {}
    # ranks count their starts from different epoch times (each trace's base): starts are compared after
    # the earliest base, the difference of two bases taken in integers first
    bases = {id(r): 0 if r.time_base_ns is msgspec.UNSET else r.time_base_ns for r in ranks}
    first_base = min(bases.values(), default=0)
    # a rank's mean is over the whole steps of all its captures (torch_npu's repeat=N: a dir per capture)
    # that every rank has, when there are such steps (ranks that captured different steps, a capture lost
    # with its rank, triggers that started on different steps: their means would not compare). A step a
    # rank has in two captures (a rank started again) counts once, the later capture's, as in the table.
    by_rank: dict[int, dict[Any, tuple[float, float]]] = {}  # step -> (step time, minus exposed comm)
    waited = False
    # a capture without ProfilerStep has one row, the whole capture (step None): beside ranks with steps it
    # is in the table but not compared, its time that of many steps (helper-206: a rank's whole capture of
    # 6 steps was "slowest rank: 3 (mean step 352 ms, +505.7% vs the median): an outlier")
    stepped = any(
        s.step is not None and s.partial is not True for r in ranks if r.rank is not None for s in r.steps
    )
    for r in ranks:  # in time order within a rank (rank dirs are named by their start)
        if r.rank is None:
            continue
        shift_us = (bases[id(r)] - first_base) / 1000
        for s in r.steps:
            if s.partial is not True:
                start = s.start_us + shift_us if start_known(s.start_us) else math.nan
                by_step.setdefault(s.step, {})[r.rank] = (s.duration_us, start)
                if s.step is None and stepped:
                    continue
                exposed = s.comm_not_overlapped_us or 0.0
                waited = waited or exposed > 0
                by_rank.setdefault(r.rank, {})[s.step] = (s.duration_us, s.duration_us - exposed)
    whole = {rank: [(step, t[0]) for step, t in steps.items()] for rank, steps in by_rank.items()}
    busy = {rank: [(step, t[1]) for step, t in steps.items()] for rank, steps in by_rank.items()}
    shared = set.intersection(*({step for step, _ in v} for v in whole.values())) if whole else set()
    medians: dict[int, float] = {}
    for rank, durations in whole.items():
        means[rank] = round(statistics.fmean(_of_steps(durations, shared)), 3)
        medians[rank] = statistics.median(_of_steps(durations, shared))
    steps_out, skew = [], []
    started = _profiler_starts(ranks)
    for step in sorted(by_step, key=lambda s: (s is None, s if isinstance(s, int) else 0)):
        per = by_step[step]
        durs = {k: v[0] for k, v in per.items()}
        steps_out.append(
            CrossStep(
                step=step,
                ranks={str(k): v for k, v in sorted(durs.items())},
                max_us=max(durs.values()),
                min_us=min(durs.values()),
            )
        )
        starts = {k: v[1] for k, v in per.items() if not math.isnan(v[1])}
        if len(starts) > 1:
            early = min(starts, key=starts.__getitem__)
            late = max(starts, key=starts.__getitem__)
            skew.append(
                StartSkew(
                    step=step,
                    skew_us=round(starts[late] - starts[early], 3),
                    earliest_rank=early,
                    latest_rank=late,
                )
            )
            _blame_profiler_start(skew[-1], started)
    step_times = {rank: dict(times) for rank, times in whole.items()}
    slowest = slowest_rank(means, medians, step_times)
    cross = CrossRank(steps=steps_out, slowest=slowest, start_skew=skew, ranges=ranges)
    if waited:
        mean_busy = {rank: statistics.fmean(_of_steps(times, shared)) for rank, times in busy.items()}
        median_busy = {rank: statistics.median(_of_steps(times, shared)) for rank, times in busy.items()}
        most = slowest_rank(mean_busy, median_busy, {rank: dict(times) for rank, times in busy.items()})
        tied = most is not None and sum(round(t, 3) == most.mean_step_us for t in mean_busy.values()) > 1
        if most is not None and most.slower_than_median_pct > 0 and not tied:  # a tie names no one
            cross.straggler = Straggler(
                rank=most.rank,
                busy_us=most.mean_step_us,
                median_busy_us=most.median_us,
                busier_than_median_pct=most.slower_than_median_pct,
                modified_z=most.modified_z,
                outlier=most.outlier,
                too_few_steps=most.too_few_steps,
            )
    return cross


def _profiler_starts(ranks: list[RankReport]) -> dict[tuple[int, Any], float]:
    """(rank, step) -> the ms the rank's profiler start took at the boundary right before that step (its
    capture's first recorded step when the capture has no warm-up), from the capture records."""
    started: dict[tuple[int, Any], float] = {}
    for r in ranks:
        if r.rank is not None and isinstance(r.start_after_step, int) and isinstance(r.start_ms, float | int):
            started[(r.rank, r.start_after_step + 1)] = float(r.start_ms)
    return started


def _blame_profiler_start(skew: StartSkew, started: dict[tuple[int, Any], float]) -> None:
    """Mark ``skew`` as the profiler's own when the latest rank's profiler start right before the step
    took at least half the skew more than the earliest rank's there (a rank's first capture starts slower
    than a later one: a --dynamic request, ranks starting on different captures)."""
    late_ms = started.get((skew.latest_rank, skew.step))
    if late_ms is None:
        return
    beyond_us = (late_ms - started.get((skew.earliest_rank, skew.step), 0.0)) * 1000
    if skew.skew_us > 0 and beyond_us >= skew.skew_us / 2:
        skew.profiler_start_ms = late_ms


def ranks_not_here(read: list[_Read], cross: CrossRank) -> str | None:
    """One line when the captures here hold fewer ranks than the job had: the traces' world_size
    (docs/formats.md, "npuprof_summary.json"), the same in every capture compared, is larger than the
    number of ranks whose captures are here. The ranks that the run's --ranks left out (its record says
    it) are named as such, even beside one rank; the others (a capture lost, not analysed) are said when
    several ranks are compared: its statements, the slowest rank and the rank the others wait for, are of
    the ranks here only. None when the captures do not say the size or disagree on it."""
    # the captures of torchrun's latest round, whatever their counts (each node's own)
    kept = [r for r in read if r.rank.rank is not None and r.rank.earlier_round is not True]
    compared = {k for s in cross.steps for k in s.ranks}
    if any(s.step is not None for s in cross.steps):  # a whole capture's row beside steps: not compared
        compared = {k for s in cross.steps if s.step is not None for k in s.ranks}
    sizes = {r.summary.world_size for r in kept}
    if len(sizes) != 1 or None in sizes:
        return None
    (size,) = sizes
    here = {r.rank.rank for r in kept if r.rank.rank is not None}
    if not size or len(here) >= size or any(k >= size for k in here):  # a rank beyond the size: no job's
        return None
    absent = [k for k in range(size) if k not in here]
    picked = _ranks_picked(r.rank.rank_dir for r in kept)
    left_out = [k for k in absent if picked is not None and k not in picked[1]]
    if len(compared) < 2 and not left_out:
        return None
    # a rank here with no whole step in the comparison (--steps, a partial step) is not of it either
    # (helper-194: "is of the other 3" where ranks 0 and 1 only were compared)
    idle = sorted(k for k in here if str(k) not in compared)
    of = f"the other {len(here)}"
    if idle:
        of = (
            f"{len(here) - len(idle)} of the other {len(here)} (rank(s) {_spans_shown(idle)} have no whole "
            "step compared)"
        )
    comparison = (
        f"its comparison across ranks, the slowest rank and the rank the others wait for, is of {of}"
        if len(compared) >= 2
        else ""
    )
    size_said = f"the job had {size} ranks (its traces' world_size); "
    if picked is None:
        return (
            f"{size_said}rank(s) {_spans_shown(absent)} ({len(absent)} of them) have no capture in this "
            f"report (not recorded, with --ranks; lost; not analysed; or in another run's captures): "
            f"{comparison}"
        )
    run = f"run {'+'.join(picked[0])}"
    asked = f"--ranks {_step_spans(picked[1])}"
    said = []
    if left_out:
        said.append(
            f"rank(s) {_spans_shown(left_out)} ({len(left_out)} of them) were not captured: {run} was "
            f"started with {asked} (its npuprof_run.json)"
        )
    if lost := [k for k in absent if k not in left_out]:
        which = "it" if left_out else f"{run}'s {asked}"
        said.append(
            f"rank(s) {_spans_shown(lost)} ({len(lost)} of them), which {which} selected, have no capture in "
            "this report (lost; not analysed; or in another run's captures)"
        )
    return size_said + "; ".join([*said, *([comparison] if comparison else [])])


def _ranks_picked(rank_dirs: Iterable[str]) -> tuple[list[str], list[int]] | None:
    """(the run ids, the ranks their --ranks selected) when the runs of these captures were started with
    --ranks, as their records beside them say (npuprof_run*.json: the same --ranks in each, npuprof run
    inside torchrun writing one a worker); None when a record does not say, or they differ."""
    run_ids: set[str] = set()
    places: set[Path] = set()
    for rank_dir in rank_dirs:
        run_id = (layout.read_capture_record(Path(rank_dir)) or {}).get("run_id")
        if not isinstance(run_id, str):
            return None
        run_ids.add(run_id)
        places.add(Path(rank_dir).parent)
    picks: dict[str, tuple[int, ...] | None] = {}
    for place in places:
        for _path, record in layout.read_run_records(place):
            if record.get("run_id") in run_ids:
                config = record.get("config")
                ranks = config.get("ranks") if isinstance(config, dict) else None
                valid = isinstance(ranks, list) and all(type(k) is int for k in ranks)
                picks[record["run_id"]] = tuple(sorted(ranks)) if valid else None  # type: ignore[arg-type]
    chosen = set(picks.values())
    if set(picks) != run_ids or len(chosen) != 1 or None in chosen:
        return None
    (selected,) = chosen
    return sorted(run_ids), list(selected or ())


def _spans_shown(numbers: list[int]) -> str:
    """Sorted numbers as runs, the first 8 of them: a job of thousands of ranks stays one line."""
    spans = _step_spans(numbers).split(", ")
    return ", ".join(spans[:8]) + (", ..." if len(spans) > 8 else "")


def latest_attempt(ranks: list[RankReport]) -> int | None:
    """The highest of torchrun's counts (their records' restart_count) among the captures of its latest
    round of workers, when captures of an earlier round are left out (``earlier_round``); else None. The
    count is each node's own: the latest round's captures of another node may say a lower one."""
    if not any(r.earlier_round is True for r in ranks):
        return None
    return max(latest_round_counts(ranks), default=None)


def mark_earlier_rounds(ranks: list[RankReport], records: dict[str, dict[str, Any]]) -> None:
    """Mark the captures of a round of torchrun's workers before the latest (``records``: rank dir -> its
    capture record)."""
    from npuprof.results.handover import process_start_ns_of
    from npuprof.results.rounds import Made, earlier_rounds

    def made(r: RankReport) -> Made:
        record = records.get(r.rank_dir, {})
        updated = record.get("updated_ns")
        return Made(
            key=r.rank_dir,
            rank=r.rank,
            restart_count=r.restart_count if isinstance(r.restart_count, int) else None,
            process_start_ns=process_start_ns_of(record),
            updated_ns=updated if isinstance(updated, int) and not isinstance(updated, bool) else None,
        )

    earlier = earlier_rounds([made(r) for r in ranks])
    for r in ranks:
        if r.rank_dir in earlier:
            r.earlier_round = True


def _across_latest_attempt(
    ranks: list[RankReport], all_ranges: list[tuple[RankReport, list[ReportRange]]], top: int
) -> CrossRank:
    """The comparison across ranks of the captures of torchrun's latest round of workers, when the job was
    restarted between captures (an earlier round's ranks did not run beside the later's); captures of no
    known attempt stay in."""
    latest = latest_attempt(ranks)
    if latest is not None:
        ranks = [r for r in ranks if r.earlier_round is not True]
        all_ranges = [(r, found) for r, found in all_ranges if any(r is kept for kept in ranks)]
    by_rank = [(r.rank, found) for r, found in all_ranges]
    cross = cross_rank(ranks, cross_ranges(by_rank, top) if by_rank else msgspec.UNSET)
    if latest is not None:
        cross.restart_count = latest
    return cross


def _attempts_of(dirs: list[str], attempt_of: dict[str, int]) -> str:
    """The rank dirs, each with its attempt when its record says it: "attempt 0: D1; attempt 1: D2"."""
    return "; ".join(f"attempt {attempt_of[d]}: {d}" if d in attempt_of else d for d in dirs)


def repeated_steps(ranks: list[RankReport]) -> list[str]:
    """One line per rank whose captures look like different jobs: a step number in more than one capture
    (two runs' rank dirs under one directory, none with an npuprof run id to tell them apart: the table
    across ranks keeps the last capture's), or captures on different kinds of device; and one line when no
    step was captured on every rank (the slowest rank then compares means over different steps)."""
    seen: dict[tuple[int, Any], list[str]] = {}
    for r in ranks:
        if r.rank is None:
            continue
        for s in r.steps:
            if s.partial is not True:
                dirs = seen.setdefault((r.rank, s.step), [])
                if r.rank_dir not in dirs:
                    dirs.append(r.rank_dir)
    lines: dict[int, str] = {}
    attempt_of = {r.rank_dir: r.restart_count for r in ranks if isinstance(r.restart_count, int)}
    earlier = {r.rank_dir for r in ranks if r.earlier_round is True}
    for (rank, step), dirs in seen.items():
        if len(dirs) > 1 and rank not in lines:
            if earlier.intersection(dirs):  # torchrun restarted the job between them
                named = _attempts_of(dirs, attempt_of)
                latest, why = latest_said(ranks)
                lines[rank] = (
                    f"rank {rank} has step {step} in {len(dirs)} captures ({named}): "
                    f"torchrun restarted the job (TORCHELASTIC_RESTART_COUNT; attempt 0 is the first); the "
                    f"comparison across ranks takes {latest}'s captures" + (f" ({why})" if why else "")
                )
                continue
            lines[rank] = (
                f"rank {rank} has step {step} in {len(dirs)} captures ({', '.join(dirs)}): they may be "
                f"different runs; the comparison across ranks takes the last one's; analyse one at a time"
            )
    devices: dict[int, dict[str, list[str]]] = {}
    for r in ranks:
        if r.rank is not None:
            devices.setdefault(r.rank, {}).setdefault(r.device, []).append(r.rank_dir)
    for rank, by_device in devices.items():
        if len(by_device) > 1:
            kinds = "; ".join(f"{device}: {', '.join(dirs)}" for device, dirs in by_device.items())
            lines.setdefault(
                rank,
                f"rank {rank} has captures on {len(by_device)} kinds of device ({kinds}): they are different "
                "jobs; the steps across ranks pool them; analyse one at a time",
            )
    notes = list(lines.values())
    steps_of: dict[int, set[Any]] = {}
    for r in ranks:
        if r.rank is not None:
            steps_of.setdefault(r.rank, set()).update(s.step for s in r.steps if s.partial is not True)
    whole_only = sorted(k for k, steps in steps_of.items() if steps == {None})
    if whole_only and len(whole_only) < len(steps_of):  # cross_rank leaves them out beside ranks with steps
        notes.append(
            f"rank(s) {_spans_shown(whole_only)} have no step (no ProfilerStep: the row is the whole "
            "capture): left out of the slowest rank and the rank the others wait for"
        )
        steps_of = {k: steps for k, steps in steps_of.items() if steps != {None}}
    if len(steps_of) > 1 and all(steps_of.values()) and not set.intersection(*steps_of.values()):
        shown = "; ".join(f"rank {k}: {_step_list(v)}" for k, v in sorted(steps_of.items())[:4])
        notes.append(
            f"no step was captured on every rank ({shown}{'; ...' if len(steps_of) > 4 else ''}): the "
            "slowest rank is found from means over different steps"
        )
    return notes


SKEW_SUSPECT = 10  # a step started this many times its own length apart on two ranks: not one job's step


def host_of(report: Report, rank: int) -> str | None:
    """The worker (host) name the rank dirs of ``rank`` start with (``{worker}_{pid}_{time}_ascend_pt``,
    docs/formats.md), when they all have one and the same; else None."""
    names = [layout.parse_rank_dir_name(Path(r.rank_dir).name) for r in report.ranks if r.rank == rank]
    workers = {fields["worker"] if fields else None for fields in names}
    return workers.pop() if len(workers) == 1 else None


def on_two_hosts(report: Report, one: int, other: int) -> tuple[str, str] | None:
    """The hosts of ranks ``one`` and ``other`` when their rank dirs name different ones: their start
    times are then of two clocks."""
    first, second = host_of(report, one), host_of(report, other)
    return (first, second) if first is not None and second is not None and first != second else None


def far_apart_steps(report: Report) -> list[str]:
    """One line when some step started on two ranks further apart than SKEW_SUSPECT times the step's longest
    duration (and over a second): a synchronous job's ranks wait for each other every step, so such
    captures are likely of different runs (a reused log directory) and their comparison means nothing;
    or, when the two ranks ran on different hosts, of one run whose hosts' clocks differ."""
    cross = report.cross_rank
    longest = {s.step: s.max_us for s in cross.steps}
    far = [s for s in cross.start_skew if s.skew_us > max(1e6, SKEW_SUSPECT * longest.get(s.step, math.inf))]
    if not far:
        return []
    worst = max(far, key=lambda s: s.skew_us)
    said = (
        f"step {worst.step} started {worst.skew_us / 1000:.0f} ms later on rank {worst.latest_rank} than on "
        f"rank {worst.earliest_rank}, far longer than the step itself ({longest[worst.step] / 1000:.3f} ms)"
    )
    if (hosts := on_two_hosts(report, worst.latest_rank, worst.earliest_rank)) is not None:
        return [
            f"{said}: their rank dirs name two workers ({hosts[0]}, {hosts[1]}; by default their hosts), "
            "whose clocks may differ by that much if they are two hosts (each rank's start is read on its "
            "own host's clock), or these captures are of different runs (a reused directory?); the step "
            "start skew across hosts means little"
        ]
    return [
        f"{said}: these captures are likely of different runs (a reused directory?); the comparison across "
        "ranks means little: analyse one run's captures at a time"
    ]


STALL_FACTOR = 10  # a partial step this many times the rank's median whole step (and over a second)


def stalled_partial_steps(report: Report) -> list[str]:
    """One line per rank whose partial step (cut by the capture's end: SIGTERM, a crash, a timeout) lasted
    far longer than its whole steps: the incident itself (a hang, a stall) is left out of the comparison
    across ranks, whose verdict may then name a rank that was only waiting."""
    lines = []
    for rank in report.ranks:
        whole = [s.duration_us for s in rank.steps if s.partial is not True]
        if not whole:
            continue
        typical = statistics.median(whole)
        for s in rank.steps:
            if s.partial is True and s.duration_us > max(1e6, STALL_FACTOR * typical):
                who = "this process" if rank.rank is None else f"rank {rank.rank}"
                lines.append(
                    f"{who}'s step {s.step} lasted {s.duration_us / 1e6:.1f} s until the capture ended "
                    f"inside it, against {typical / 1000:.3f} ms for its whole steps (median): a hang or a "
                    f"stall ({rank.partial_reason or 'partial'}); partial steps are left out of the "
                    "comparison across ranks, which does not see it"
                )
    return lines


def _step_list(steps: set[Any]) -> str:
    numbers = sorted(s for s in steps if isinstance(s, int))
    shown = ", ".join(map(str, numbers[:3])) + (" ..." if len(numbers) > 3 else "")
    return shown or "-"


def mark_partial(rank: RankReport, step: int, reason: str) -> bool:
    """Flag ``step`` of ``rank`` as partial (the capture ended inside it), with why: it leaves the rank's
    mean step time (and :func:`cross_rank`). False when the rank has no such step."""
    partial = [s for s in rank.steps if s.step == step]
    if not partial:
        return False
    for s in partial:
        s.partial = True
    rank.partial_step = step
    rank.partial_reason = reason
    _mean_of_whole_steps(rank)
    return True


def _mean_of_whole_steps(rank: RankReport) -> None:
    """The rank's mean step time over its steps not flagged partial, or over all of them when every one is
    (helper-96: the last one flagged was the mean)."""
    whole = [s.duration_us for s in rank.steps if s.partial is not True]
    if rank.steps:
        rank.step_time_mean_us = round(statistics.fmean(whole or [s.duration_us for s in rank.steps]), 3)


def build_report(
    path: Path,
    steps: StepSelection | tuple[int, int] | None = None,
    top: int = 10,
    jobs: int | None = None,
    force: bool = False,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[ParseOutcome], None] | None = None,
    export_db: bool = False,
    on_note: Callable[[str], None] | None = None,
    run: str | None = None,
) -> Report:
    """Parse (as needed) and report on ``path``: a result dir, one rank dir, or a bare Kineto trace.
    ``export_db``: also the SQLite files of --export-type db; some rank dirs of a run may
    get them without it (:func:`plan_db`), which ``on_note(line)`` hears of, before parsing starts.
    A directory holding the captures of several runs is reported on one run (npuprof.analysis.runs): the
    latest, or ``run`` (an id, a prefix of one, or ``all``). Raises NothingToAnalyse when ``path`` holds
    nothing to analyse, RunChoiceError when ``run`` names no run of it. ``steps``: --steps (a pair: A-B).
    A rank dir whose tables do not fit its disk is reported from tables made in a scratch directory,
    removed once the report is made (:func:`_tables_elsewhere`)."""
    scratch = ScratchDirs()
    try:
        return _build_report(
            path, steps, top, jobs, force, on_start, on_done, export_db, on_note, run, scratch
        )
    finally:
        scratch.remove_all()


def _build_report(
    path: Path,
    steps: StepSelection | tuple[int, int] | None,
    top: int,
    jobs: int | None,
    force: bool,
    on_start: Callable[[int], None] | None,
    on_done: Callable[[ParseOutcome], None] | None,
    export_db: bool,
    on_note: Callable[[str], None] | None,
    run: str | None,
    scratch: ScratchDirs,
) -> Report:
    if isinstance(steps, tuple):
        steps = of_range(*steps)
    jobs = jobs or os.cpu_count() or 1
    path = Path(path)
    if not path.exists():
        from npuprof.results.paths import why_missing

        raise NothingToAnalyse(f"{path} {why_missing(path)}")
    targets: list[tuple[ParseOutcome, Path]] = []
    if (rank_dir := _rank_dir_of_tables(path)) is not None:
        # a rank dir's tables folder (torch_npu's or ours): read as its rank dir, never as a folder of
        # traces (its trace_view.json would get tables of its own, torch_npu's tables unread)
        if on_note:
            on_note(f"{path} is the tables' folder of the rank directory {rank_dir}: that is analysed")
        path = rank_dir
    elif run is None and (rank_dir := _rank_dir_of_trace(path)) is not None:  # --run: a usage error below
        if on_note:
            on_note(f"{path} is the trace of the rank directory {rank_dir}: that is analysed")
        path = rank_dir
    elif run is None and (rank_dir := layout.owner_of_raw_data_folder(path)) is not None:
        if on_note:  # torch_npu's FRAMEWORK/ or PROF_*/: nothing npuprof reads is in it, its capture is
            on_note(
                f"{path} is torch_npu's raw data folder of the rank directory {rank_dir}: that is analysed"
            )
        path = rank_dir
    if is_bare_trace(path):
        if run is not None:
            why = "--run picks a run of a directory"
            raise runs.RunChoiceError(f"{path} is a trace file (one capture): {why}")
        if on_start:
            on_start(1)
        outcome, out_dir = _parse_bare(path, force, jobs, export_db, on_note)
        if on_done:
            on_done(outcome)
        targets.append((outcome, _in_scratch(outcome, out_dir, scratch, on_note, path)))
    elif path.name.endswith(BARE_SUFFIX) and (path / layout.ANALYSE_DONE).is_file():
        # the tables made for a bare trace: analysed again as a folder of traces, its trace_view.json would
        # get tables of its own inside it (helper-87)
        trace = path.with_name(path.name.removesuffix(BARE_SUFFIX))
        raise NothingToAnalyse(
            f"{path} holds the tables npuprof analyse made for {trace}: analyse that trace (they are "
            "reused), or the trace_view.json in it by its name"
        )
    elif path.is_dir() and not layout.find_rank_dirs(path) and (traces := _trace_files_in(path)):
        # torch's tensorboard_trace_handler layout: one trace file per rank and capture, side by side
        if run is not None:
            raise runs.RunChoiceError(f"{path} holds trace files, not rank dirs of runs: --run picks a run")
        if on_note:
            on_note(
                f"no *_ascend_pt rank directory under {path}: its {len(traces)} trace file(s) are analysed"
            )
        if on_start:
            on_start(len(traces))
        for trace in traces:
            outcome, out_dir = _parse_bare(trace, force, jobs, export_db, on_note)
            if on_done:
                on_done(outcome)
            targets.append((outcome, _in_scratch(outcome, out_dir, scratch, on_note, trace)))
    elif path.is_dir():
        rank_dirs = layout.find_rank_dirs(path)
        if not rank_dirs:
            elsewhere = layout.roots_of_the_runs_in(path)
            if elsewhere:
                raise NothingToAnalyse(
                    f"no *_ascend_pt rank directory under {path}; its run captured into "
                    f"{', '.join(map(str, elsewhere))} (a --dynamic prof_dir): analyse that instead"
                )
            below = _dirs_with_traces(path, 3)
            if below:  # tensorboard_trace_handler's dir per run: logs/<run>/*.pt.trace.json
                named = ", ".join(str(d) for d in below)
                raise NothingToAnalyse(
                    f"no rank directory (a capture) and no trace file in {path} itself; trace files are in "
                    f"its subdirectories ({named}{', ...' if len(below) == 3 else ''}): analyse one of them"
                )
            from npuprof.agent.dynamic_files import CONFIG_NAME, LOG_DIR

            if (path / CONFIG_NAME).is_file() and (path / LOG_DIR).is_dir():
                raise NothingToAnalyse(
                    f"no rank directory (a capture) under {path}: it is the directory npuprof run --dynamic "
                    "watches; the captures are in the run's output (its -o, default ./npuprof_result in the "
                    f"directory it ran in); npuprof status {shlex.quote(str(path))} tells what each process "
                    "did"
                )
            if path.name == layout.CLUSTER_OUTPUT:
                from npuprof.analysis.torch_files import cluster_output_note

                raise NothingToAnalyse(f"{path} is {cluster_output_note(path)}")
            if (said := layout.run_without_captures(path)) is not None:
                raise NothingToAnalyse(said)
            raise NothingToAnalyse(f"no rank directory (a capture) under {path}, and it is not a trace file")
        rank_dirs = _one_run(path, rank_dirs, run, on_note)
        db_dirs, notes = plan_db(rank_dirs, export_db)
        for note in notes:
            if on_note:
                on_note(note)
        if on_start:
            on_start(len(rank_dirs))
        outcomes = parse_all(rank_dirs, jobs, force, on_done, db_dirs)
        if on_note and (remade := tables_remade(outcomes)):
            on_note(remade)
        for outcome in outcomes if on_note else ():
            if outcome.trace_changed and outcome.ok:  # its tables were another trace's: remade, said once
                on_note(f"{outcome.rank_dir}: {outcome.trace_changed}: parsed again")
        for outcome in outcomes:
            if (instead := _trace_view_instead(outcome, force, jobs, export_db, on_note)) is not None:
                # the user's cache unusable too (a missing home): scratch tables, as for a bare trace
                view = outcome.rank_dir / layout.PARSED_DIR / layout.PARSED_TRACE
                targets.append((instead[0], _in_scratch(instead[0], instead[1], scratch, on_note, view)))
                continue
            if (instead := _cached_instead(outcome, force, jobs, export_db, on_note)) is not None:
                targets.append(instead)
                continue
            targets.append(
                (outcome, _in_scratch(outcome, outcome.rank_dir / layout.PARSED_DIR, scratch, on_note))
            )
        if on_note:
            for note in _db_gaps(rank_dirs):
                on_note(note)
    else:
        from npuprof.analysis import torch_files
        from npuprof.analysis.trace_loader import why_not_a_trace

        if path.is_file() and (what := torch_files.describe_file(path)) is not None:
            raise NothingToAnalyse(f"{path}: it is {what}")
        why = why_not_a_trace(path) if path.is_file() else ""
        raise NothingToAnalyse(
            f"{path} is neither a result directory nor a trace file (a Chrome trace: a JSON object with "
            "traceEvents, or a JSON array of events; gzipped or not)" + (f": {why}" if why else "")
        )
    ranks: list[RankReport] = []
    read: list[_Read] = []  # for the pooled sections
    records: dict[str, dict[str, Any]] = {}  # rank dir -> its capture record (torchrun's rounds)
    problems: list[Problem] = []
    all_ranges: list[tuple[RankReport, list[ReportRange]]] = []  # each rank's, before the --top cut
    steps_there: set[int] = set()
    steps_cut: set[int] = set()
    for outcome, out_dir in targets:
        summary, why = _load_summary(out_dir) if outcome.ok else (None, "")
        annotations, trouble = _load_annotations(out_dir) if summary is not None else (None, "")
        unreadable = why if summary is None else trouble
        if unreadable and (again := _parsed_again(outcome, out_dir, unreadable, jobs, on_note)) is not None:
            outcome, out_dir = again
            summary, why = _load_summary(out_dir) if outcome.ok else (None, "")
            annotations, trouble = _load_annotations(out_dir) if summary is not None else (None, "")
        if summary is None:
            status = outcome.status if not outcome.ok else "unreadable"
            # a parse that went well only notes (--force with no trace left): the summary's trouble is the why
            reason = why if outcome.ok and why else outcome.reason or why
            problems.append(Problem(rank_dir=str(outcome.rank_dir), status=status, reason=reason))
            continue
        if summary.rank is None and outcome.rank is not None:
            summary.rank = outcome.rank
        if (no_device := _npu_capture_without_device_work(outcome.rank_dir, summary)) is not None:
            summary.device = "NPU"
            summary.warnings = [*(summary.warnings or []), no_device]
            _memory_of_torch_npu(outcome.rank_dir, summary)
        steps_there.update(s.step for s in summary.steps if isinstance(s.step, int))
        if summary.cut_short is not msgspec.UNSET:  # docs/formats.md, "Traces cut short"
            steps_cut.update(summary.cut_short.steps_left_out)
        rank = rank_report(summary, outcome.rank_dir, outcome.status, steps, top, annotations)
        partials = partial_steps(outcome.rank_dir, summary)
        for step, reason in partials:
            mark_partial(rank, step, reason)
        end_cost = capture_end_cost(outcome.rank_dir)
        record = layout.read_capture_record(outcome.rank_dir) or {}
        records[rank.rank_dir] = record
        if (attempt := restart_count_of(record)) is not None:
            rank.restart_count = attempt
        # a capture ended inside its last step (the job ended, a signal) has no step boundary after it
        cut = {step for step, _why in partials}
        if end_cost is not None and end_cost[0] not in cut and any(s.step == end_cost[0] for s in rank.steps):
            rank.export_after_step, rank.export_ms = end_cost
        if (start_cost := capture_start_cost(outcome.rank_dir)) is not None:
            rank.start_after_step, rank.start_ms, rank.step_on = start_cost
        if outcome.status == "cached" and outcome.reason:  # --force with nothing to parse again
            rank.warnings = [*(rank.warnings or []), outcome.reason]
        if not partials and (said := recorded_detail(outcome.rank_dir)):
            rank.warnings = [*(rank.warnings or []), f"{RECORD_SAYS}{said}"]
        if trouble:
            rank.warnings = [*(rank.warnings or []), trouble]
        if (left := _memory_snapshot_left(outcome.rank_dir)) is not None:
            rank.warnings = [*(rank.warnings or []), left]
        if annotations is not None and annotations.ranges is not msgspec.UNSET:
            all_ranges.append((rank, range_totals(annotations.ranges, steps)))
        ranks.append(rank)
        read.append(_Read(rank, summary, annotations, partials))
    read = _copies_left_out(read)
    ranks = [item.rank for item in read]
    all_ranges = [(r, found) for r, found in all_ranges if any(r is kept for kept in ranks)]
    order = _in_time_order(r.rank_dir for r in ranks)
    ranks.sort(key=lambda r: (r.rank is None, r.rank or 0, order[r.rank_dir], r.rank_dir))
    mark_earlier_rounds(ranks, records)
    if steps is not None and ranks and not problems and not any(r.steps for r in ranks):
        there = "they have no step"
        if steps_there:
            there = f"their steps are {_spans_abridged(sorted(steps_there))}"
        asked = steps.text
        where = f"the {len(ranks)} capture(s) of {path}"
        if cut := sorted(n for n in steps_cut if n in steps):  # there, but left out: say why, not "no step"
            there += (
                f"; step(s) {_spans_abridged(cut)} left out: the trace is cut short, and the cut may have "
                "taken some of its events (the capture's warning says where; npuprof analyse without --steps)"
            )
        raise NothingToAnalyse(f"no step of --steps {asked} in {where}: {there}")
    report = Report(
        path=str(path),
        steps_filter=list(steps.one_range) if steps and steps.one_range else None,
        steps_asked=steps.text if steps else msgspec.UNSET,
        ranks=ranks,
        problems=problems,
        cross_rank=_across_latest_attempt(ranks, all_ranges, top),
    )
    pooled = _pooled(read, steps, top)
    if pooled:
        report.pooled = pooled
    if on_note and (line := ranks_not_here(read, report.cross_rank)) is not None:
        on_note(line)
    unranked = _processes_without_a_rank(ranks)
    ranked = sorted({r.rank for r in ranks if r.rank is not None})
    if on_note and unranked > 1:
        on_note(
            f"{unranked} processes' captures have no rank (no profiler_info_<rank>.json, no distributedInfo "
            "in the trace): they are not compared across ranks"
        )
    elif on_note and unranked and ranked:  # one rank's trace from a torch that wrote no distributedInfo
        shown = ", ".join(map(str, ranked[:8])) + (", ..." if len(ranked) > 8 else "")
        on_note(
            "1 process's captures have no rank (no profiler_info_<rank>.json, no distributedInfo in the "
            f"trace): they are not compared with those of rank(s) {shown} across ranks"
        )
    return report


def _cached_instead(
    outcome: ParseOutcome, force: bool, jobs: int, export_db: bool, on_note: Callable[[str], None] | None
) -> tuple[ParseOutcome, Path] | None:
    """A rank dir whose tables cannot be written there (someone else's results, a read-only mount): its
    trace analysed as a trace of its own, the tables in the user's cache, the rank kept. None for any
    other outcome."""
    if not outcome.read_only or (raw := layout.find_raw_trace(outcome.rank_dir)) is None:
        return None
    bare, out_dir = _parse_bare(raw, force, jobs, export_db, None, in_cache=True)
    if not bare.ok:
        return None  # the rank dir's own reason stands
    if on_note:
        on_note(
            f"{outcome.rank_dir}: its tables cannot be written there ({outcome.reason.split(';')[0]}): this "
            f"report is made from tables in the user's cache ({out_dir})"
        )
    bare.rank_dir, bare.rank = outcome.rank_dir, outcome.rank
    return bare, out_dir


def _trace_view_instead(
    outcome: ParseOutcome, force: bool, jobs: int, export_db: bool, on_note: Callable[[str], None] | None
) -> tuple[ParseOutcome, Path] | None:
    """A torch_npu rank dir whose parse stopped after trace_view.json (no step_trace_time.csv, no raw trace
    npuprof could parse): its trace_view.json analysed as a trace of its own, the tables in the user's cache
    (torch_npu's folder is left as it is), the rank dir's rank kept. None for any other rank dir."""
    from npuprof.analysis import ascend_output

    rank_dir = outcome.rank_dir
    if outcome.status not in ("cached", "missing", "needs_torch_npu"):
        return None
    tables = rank_dir / layout.PARSED_DIR
    view = tables / ascend_output.TRACE_VIEW_FILE
    if (
        (tables / ascend_output.STEP_FILE).exists()
        or (tables / SUMMARY_FILE).exists()
        or layout.find_raw_trace(rank_dir) is not None
        or view.is_symlink()
        or not is_bare_trace(view)
    ):
        return None
    if on_note:
        activities = layout.torch_npu_activities(rank_dir)
        why = (
            "torch_npu writes no step_trace_time.csv for a capture of the CPU activity only"
            if activities is not None and "NPU" not in activities
            else "torch_npu's tables stop short of step_trace_time.csv"
        )
        on_note(
            f"{rank_dir}: {why}: its {layout.PARSED_DIR}/trace_view.json is analysed instead (the tables "
            "made from it go to the user's cache, not into torch_npu's folder)"
        )
    bare, out_dir = _parse_bare(view, force, jobs, export_db, on_note, in_cache=True)
    bare.rank_dir, bare.rank = rank_dir, outcome.rank  # parse_rank_dir read it (profiler_info_<rank>.json)
    return bare, out_dir


def _npu_capture_without_device_work(rank_dir: Path, summary: Summary) -> str | None:
    """What to say of a torch_npu capture whose trace_view.json (analysed instead of its tables,
    ``_trace_view_instead``) holds no device work, or None for any other: its device is the NPU, never
    "CPU-only" (the operators only launched what the NPU computed, unrecorded). torch_npu records none when
    its profiler was not given the NPU activity (its parse then writes no device table: README, "Analysing:
    npuprof analyse"), or when the capture held no launch."""
    if summary.device != "CPU" or not layout.torch_npu_parsed_without_device_tables(rank_dir):
        return None
    if layout.find_raw_trace(rank_dir) is not None:
        return None
    activities = layout.torch_npu_activities(rank_dir)
    if activities is not None and "NPU" not in activities:
        why = "its profiler was given the CPU activity only (--activities cpu)"
    else:
        why = "none in this capture"
    return (
        f"{vocab.NO_NPU_WORK}: {why}; comp is its host operators' time (they launch what the NPU "
        "computes, not recorded here), free the rest of the step: no time here is the NPU's"
    )


def _memory_of_torch_npu(rank_dir: Path, summary: Summary) -> None:
    """The memory figures of a torch_npu capture analysed from its trace_view.json, which holds no memory
    event, from the memory_record.csv torch_npu wrote beside it (with profile_memory, whatever the
    activities): as ``ascend_output.summary_of`` reads them, each step's peak over its ProfilerStep span
    and the last record before it (what it started with). The figures ``summary`` has are kept."""
    from bisect import bisect_left

    from npuprof.analysis import ascend_output

    path = rank_dir / layout.PARSED_DIR / ascend_output.MEMORY_FILE
    if summary.memory.get("peak_allocated_mb") is not None or path.is_symlink() or not path.is_file():
        return
    said: list[str] = []
    try:
        rows = ascend_output.memory_records(path, said)
    except (ascend_output.AscendTableError, OSError) as exc:
        rows, said = [], [f"{ascend_output.MEMORY_FILE}: {exc}: no memory figures"]
    if said:
        summary.warnings = [*(summary.warnings or []), *said]
    if not rows:
        return
    base_us = (summary.time_base_ns or 0) / 1000
    times = [t - base_us for t, _a, _r in rows]
    for step in summary.steps:
        if math.copysign(1.0, step.start_us) < 0:  # a start not known (ascend_output.UNKNOWN_START)
            continue
        first = bisect_left(times, step.start_us)
        end = bisect_left(times, step.start_us + step.duration_us)
        inside = rows[max(first - 1, 0) : end] if end > 0 else []
        step.memory_peak_mb = round(max(a for _t, a, _r in inside), 3) if inside else None
        reserved = [r for _t, _a, r in inside if r is not None]
        step.memory_peak_reserved_mb = round(max(reserved), 3) if reserved else None
    reserved = [r for _t, _a, r in rows if r is not None]
    summary.memory = {
        "peak_allocated_mb": round(max(a for _t, a, _r in rows), 3),
        "peak_reserved_mb": round(max(reserved), 3) if reserved else None,
    }


def _rank_dir_of_tables(path: Path) -> Path | None:
    """The rank dir whose ASCEND_PROFILER_OUTPUT/ ``path`` is (``.`` or a link to it too), when that rank
    dir can be analysed: it holds a raw trace, or the folder holds torch_npu's tables or npuprof's."""
    owner = layout.owner_of_tables_folder(path)
    if owner is None:
        return None
    tables = ("step_trace_time.csv", "kernel_details.csv", layout.ANALYSE_DONE)
    if layout.find_raw_trace(owner) is None and not any(
        (owner / layout.PARSED_DIR / t).is_file() for t in tables
    ):
        return None
    # as the user named it where that is the same folder (a relative path stays relative in the report)
    return path.parent if path.name == layout.PARSED_DIR and not path.is_symlink() else owner


def _rank_dir_of_trace(path: Path) -> Path | None:
    """The rank dir whose trace ``path`` is (its raw trace, or its tables' trace_view.json). Read as a bare
    trace, the capture's record went unread: a last step the job died in counted in the mean step time,
    unmarked, the export's cost went unsaid, and the trace's tables were written into the rank dir."""
    if not path.is_file():
        return None
    if path.name == layout.PARSED_TRACE and (owner := _rank_dir_of_tables(path.parent)) is not None:
        return owner
    if not layout.holds_a_capture(path.parent):
        return None
    raw = layout.find_raw_trace(path.parent)
    return path.parent if raw is not None and raw.resolve() == path.resolve() else None


def _processes_without_a_rank(ranks: list[RankReport]) -> int:
    """How many processes (by the rank dirs' worker and pid) the captures without a rank are of."""
    processes = set()
    for r in ranks:
        if r.rank is None:
            processes.add(pooling.process_key(Path(r.rank_dir), None))
    return len(processes)


@dataclass
class _Read:
    """A capture's report as build_report made it, with what pooling needs of it."""

    rank: RankReport
    summary: Summary
    annotations: Annotations | None
    partials: list[tuple[int, str]]  # partial_steps()


def _started(rank_dir: str) -> int:
    """When a rank dir's capture started (ns since the epoch: layout.capture_began_ns): a rank's captures in
    time order, whatever their pids (-1 where nothing says: first). Not by the local time its name holds:
    a daylight-saving change inside the job put the later captures first (helper-355)."""
    began = layout.capture_began_ns(Path(rank_dir))
    return -1 if began is None else began


def _in_time_order(rank_dirs: Iterable[str]) -> dict[str, int]:
    """Each rank dir's place in time: by :func:`_started` (then name), except that the captures of one
    process (worker and pid, in one folder) that all hold ``MonotonicTimeBegin`` take their places among
    themselves by it: a wall clock set back inside the job (NTP, by hand) put its later captures first and
    cut the process in two pooled sections."""
    ordered = sorted(set(rank_dirs), key=lambda d: (_started(d), Path(d).name))
    by_process: dict[tuple[str, str, str], list[str]] = {}
    for rank_dir in ordered:
        if (named := layout.parse_rank_dir_name(Path(rank_dir).name)) is not None:
            key = (str(Path(rank_dir).parent), named["worker"], named["pid"])
            by_process.setdefault(key, []).append(rank_dir)
    place = {rank_dir: k for k, rank_dir in enumerate(ordered)}
    for members in by_process.values():
        ticks = {d: layout.capture_began_monotonic_ns(Path(d)) for d in members}
        if len(members) < 2 or any(tick is None for tick in ticks.values()):
            continue
        slots = sorted(place[d] for d in members)
        for slot, rank_dir in zip(
            slots, sorted(members, key=lambda d: (ticks[d], Path(d).name)), strict=True
        ):
            place[rank_dir] = slot
    return place


def _copies_left_out(read: list[_Read]) -> list[_Read]:
    """``read`` less the copies of a capture read from another directory (``cp -r`` of a rank dir under the
    result dir): the same rank and the same summary, whose steps and operators were counted once per copy,
    pooled too. The one kept is named as a rank dir is (else the first by path) and its warnings name the
    copies left out."""
    by_capture: dict[tuple[Any, bytes], list[_Read]] = {}
    for item in read:
        by_capture.setdefault((item.rank.rank, msgspec.json.encode(item.summary)), []).append(item)
    left_out: set[int] = set()
    for same in by_capture.values():
        if len(same) < 2:
            continue
        kept, *copies = sorted(same, key=_kept_first)
        copies = [copy for copy in copies if _may_be_a_copy_of(copy, kept)]
        if not copies:
            continue
        left_out.update(id(copy) for copy in copies)
        named = ", ".join(copy.rank.rank_dir for copy in copies)
        kept.rank.warnings = [
            *(kept.rank.warnings or []),
            f"{kept.rank.rank_dir} and {named}: the same capture (a copy?); counted once, from "
            f"{kept.rank.rank_dir}, the other{'s' if len(copies) > 1 else ''} left out of the report",
        ]
    return [item for item in read if id(item) not in left_out]


def _may_be_a_copy_of(copy: _Read, kept: _Read) -> bool:
    """Whether ``copy`` may be a copy of ``kept``: not when npuprof named both, for two captures (another
    process or another start: two captures of one process that recorded alike, a made-up pair in a test).
    A copy keeps its original's name in another directory, or is given one of the user's."""
    named = layout.parse_rank_dir_name(Path(copy.rank.rank_dir).name)
    return named is None or named == layout.parse_rank_dir_name(Path(kept.rank.rank_dir).name)


def _kept_first(item: _Read) -> tuple[bool, str]:
    """Of copies of one capture, the one named as npuprof names a rank dir first, then by path."""
    return layout.parse_rank_dir_name(Path(item.rank.rank_dir).name) is None, item.rank.rank_dir


def _pooled(read: list[_Read], steps: StepSelection | None, top: int) -> list[RankReport]:
    """One report per process with more than POOL_AFTER captures, over all of them (analysis/pooling.py)."""
    groups: dict[tuple[str, str], list[_Read]] = {}
    for item in read:
        groups.setdefault(pooling.process_key(Path(item.rank.rank_dir), item.rank.rank), []).append(item)
    out = []
    for group in groups.values():
        order = _in_time_order(m.rank.rank_dir for m in group)
        group.sort(key=lambda m: order[m.rank.rank_dir])
        for members in _programs(group):
            out.append(_pooled_process(members, steps, top))
    return out


def _programs(members: list[_Read]) -> list[list[_Read]]:
    """The runs of captures of one program, of those with more than POOL_AFTER: a rankless process that
    replaced itself (``os.exec``) keeps its pid but counts its steps from 0 again, a new program. A rank
    started again (torchrun's restarts) stays one: its repeated steps are said (:func:`repeated_steps`)."""
    runs: list[list[_Read]] = []
    last_first: int | None = None
    for member in members:
        numbered = [s.step for s in member.summary.steps if isinstance(s.step, int)]
        first = min(numbered) if numbered else None
        again = first is not None and last_first is not None and first <= last_first
        if not runs or (again and member.rank.rank is None):
            runs.append([])
        runs[-1].append(member)
        last_first = first if first is not None else last_first
    return [run for run in runs if len(run) > pooling.POOL_AFTER]


def _pooled_process(members: list[_Read], steps: StepSelection | None, top: int) -> RankReport:
    """The pooled section of one program's captures."""
    inputs = [(m.summary, m.annotations) for m in members]
    summary, annotations = pooling.pool(inputs, whole=steps is None)
    first = members[0].rank
    status = "parsed" if any(m.rank.status == "parsed" for m in members) else "cached"
    pooled = rank_report(summary, Path(first.rank_dir).parent, status, steps, top, annotations)
    pooled.captures = [m.rank.rank_dir for m in members]
    _mark_pooled_partials(pooled, members, steps)
    last = members[-1].rank  # the last capture's end, as each capture's section says its own (helper-95)
    if last.export_ms is not msgspec.UNSET and any(
        s.step == last.export_after_step and s.partial is not True for s in pooled.steps
    ):
        pooled.export_after_step, pooled.export_ms = last.export_after_step, last.export_ms
    return pooled


def _mark_pooled_partials(pooled: RankReport, members: list[_Read], steps: Any) -> None:
    """Each capture's partial steps flagged in the pooled steps of that capture only: two captures may
    have steps of the same number (a process started again, --run all)."""
    origin = [k for k, m in enumerate(members) for _step in m.summary.steps]
    numbers = [st.step for m in members for st in m.summary.steps]
    kept = [k for k, number in zip(origin, numbers, strict=True) if _in_steps(number, steps)]
    for k, member in enumerate(members):
        for step, reason in member.partials:
            for report_step, capture in zip(pooled.steps, kept, strict=True):
                if capture == k and report_step.step == step:
                    report_step.partial = True
                    pooled.partial_step, pooled.partial_reason = step, reason
    _mean_of_whole_steps(pooled)


def _step_spans(numbers: list[int]) -> str:
    """Sorted step numbers as runs: [1, 2, 3, 7] -> "1-3, 7"."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


SPANS_AT_EACH_END = 4


def _spans_abridged(numbers: list[int]) -> str:
    """Sorted step numbers as runs, the first and last few of them: a --repeat 0 job of days has thousands
    of captures, each its own run of steps, which made the error line of a --steps that none has kilobytes
    long (helper-374)."""
    spans = _step_spans(numbers).split(", ")
    if len(spans) <= 2 * SPANS_AT_EACH_END + 1:
        return ", ".join(spans)
    left = len(spans) - 2 * SPANS_AT_EACH_END
    return (
        f"{', '.join(spans[:SPANS_AT_EACH_END])}, ... ({left} more), {', '.join(spans[-SPANS_AT_EACH_END:])}"
    )


def _later_runs_without_captures(path: Path, reported: runs.Run) -> list[str]:
    """A note for each run recorded in ``path`` (its ``npuprof_run*.json``) after the run reported that
    wrote no capture: the default report is of the latest run that has captures, which is then not the
    latest run."""
    notes = []
    records = list(layout.read_run_records(path))
    finished = _ends_of_runs(records, reported.run_ids)
    for record_path, record in records:
        try:
            written = record_path.stat().st_mtime_ns
        except OSError:
            continue
        if record.get("captures") or written <= reported.latest_ns:
            continue
        run_id = record.get("run_id")
        if not isinstance(run_id, str) or run_id in reported.run_ids:
            continue
        if _started_s(record) <= reported.ended + runs.SLACK_S and not _began_after(
            record_path, finished.get(record.get("host"))
        ):
            continue  # began while the run reported recorded: a part of its job (inside torchrun, --ranks)
        ended = f", exit code {record['exit_code']}" if isinstance(record.get("exit_code"), int) else ""
        notes.append(
            f"a later run here, {run_id} (started {record.get('start', '?')}{ended}), wrote no capture "
            f"(see {record_path.name} and npuprof.log); this report is of an earlier run"
        )
    return notes


def _ends_of_runs(records: list[tuple[Path, dict[str, Any]]], run_ids: Sequence[str]) -> dict[Any, int]:
    """Per host, when the last of the ``run_ids`` recorded there ended: its record's last write (ns), made
    as its npuprof ends. A run begun after that is no part of their job, however soon after (runs one
    after the other in a script: its start is to the second, and within a few seconds of their last
    capture)."""
    ends: dict[Any, int] = {}
    for record_path, record in records:
        if record.get("run_id") not in run_ids or record.get("end") is None:
            continue
        try:
            written = record_path.stat().st_mtime_ns
        except OSError:
            continue
        ends[record.get("host")] = max(ends.get(record.get("host"), 0), written)
    return ends


def _began_after(record_path: Path, end_ns: int | None) -> bool:
    """Whether the run of ``record_path`` began after ``end_ns`` (a run of the same host), told by the
    local time to the millisecond its name holds (``npuprof_run.<YYYYmmddHHMMSSmmm>.<pid>.json``: the
    first run in a directory, ``npuprof_run.json``, holds none)."""
    stamp = record_path.name.split(".")[1] if record_path.name.count(".") >= 3 else ""
    if end_ns is None or len(stamp) != 17 or not stamp.isdigit():
        return False
    try:
        began = time.mktime(time.strptime(stamp[:14], "%Y%m%d%H%M%S")) + int(stamp[14:]) / 1000
    except (ValueError, OverflowError):
        return False
    return began * 1e9 > end_ns


def _started_s(record: dict[str, Any]) -> float:
    """When a run record's run began, epoch seconds (infinity when it does not say)."""
    started = layout.iso_seconds(record.get("start"))
    return math.inf if started is None else started


def _runs_without_an_end(path: Path, run_ids: list[str]) -> list[str]:
    """A note for each of ``run_ids`` whose record in ``path`` has no end while its npuprof is gone (it
    was killed, e.g. by kill -9, or its machine went down): its exit code is not known. Not of a run of
    another host, which this host cannot tell from one still going (`npuprof analyse` says it may be)."""
    notes = []
    for record_path, record in layout.read_run_records(path):
        if "end" not in record or record["end"] is not None:
            continue
        run_id = record.get("run_id")
        if run_id not in run_ids or layout.record_elsewhere(record) is not None:
            continue
        if layout.live_launcher(path, run_id) is None:
            notes.append(
                f"run {run_id}'s npuprof ended without recording how the job ended ({record_path.name} has "
                "no end: it was killed, its machine went down, or its disk was full): the job's exit code is "
                "not known"
            )
    return notes


def _captures_not_here(path: Path, run_ids: list[str], here: set[str]) -> list[str]:
    """A note for each of ``run_ids`` whose record in ``path`` lists captures of its output directory
    that are not among the rank dirs found (``here``, by name: the directory may have been moved): a rank
    deleted or moved away is otherwise left out of the report without a word."""
    notes = []
    for _record_path, record in layout.read_run_records(path):
        run_id = record.get("run_id")
        config = record.get("config")
        captures = record.get("captures")
        if run_id not in run_ids or not isinstance(config, dict) or not isinstance(captures, list):
            continue
        output = str(config.get("output") or "")
        gone = [
            c
            for c in captures
            if isinstance(c, dict)
            and isinstance(c.get("rank_dir"), str)
            and os.path.dirname(c["rank_dir"]) == output  # a --dynamic prof_dir elsewhere is said apart
            and os.path.basename(c["rank_dir"]) not in here
        ]
        if gone:
            shown = ", ".join(
                f"rank {c.get('rank')} ({os.path.basename(c['rank_dir'])})"
                if c.get("rank") is not None
                else os.path.basename(c["rank_dir"])
                for c in gone[:3]
            ) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
            notes.append(
                f"run {run_id}'s record lists {len(gone)} capture(s) that are not here (deleted or moved?), "
                f"left out of this report: {shown}"
            )
    return notes


def _one_run(
    path: Path, rank_dirs: list[Path], wanted: str | None, on_note: Callable[[str], None] | None
) -> list[Path]:
    """The rank dirs of the run(s) the report covers (:func:`runs.choose`); when ``path`` holds several
    runs, ``on_note`` hears which were left out and how to pick another."""
    found = runs.runs_of(rank_dirs)
    chosen = runs.choose(found, wanted)
    if wanted is None and on_note is not None and chosen:
        for line in _later_runs_without_captures(path, chosen[0]):
            on_note(line)
    if on_note is not None:
        run_ids = [i for r in chosen for i in r.run_ids]
        for line in _runs_without_an_end(path, run_ids):
            on_note(line)
        for line in _captures_not_here(path, run_ids, {d.name for d in rank_dirs}):
            on_note(line)
        reported = {d.resolve().parent for d in rank_dirs}
        for run_id in run_ids:
            for root in layout.capture_roots(path, run_id):
                if root in reported:
                    continue  # a prof_dir below the directory analysed: its captures are in this report
                there = "analyse it there" if root.is_dir() else "it is gone"
                on_note(f"run {run_id} also captured into {root} (a --dynamic prof_dir): {there}")
    if len(found) > 1 and on_note is not None:
        if len(chosen) > 1:
            head = (
                f"{path} holds the captures of {len(found)} runs; --run all: they are reported together "
                "(the same step or rank of two runs side by side)"
            )
        else:
            which = "the latest" if wanted is None else "the one asked for"
            head = (
                f"{path} holds the captures of {len(found)} runs; this report covers {which}, "
                f"{runs.describe(chosen[0])}; --run ID for another, --run all for all together; the others:"
            )
        others = [r for r in found if r is not chosen[0]]
        shown = [f"  {runs.describe(r)}" for r in reversed(others[-10:])]
        more = [f"  and {len(others) - 10} older"] if len(others) > 10 else []
        on_note("\n".join([head, *shown, *more]) if len(chosen) == 1 else head)
    return sorted(d for r in chosen for d in r.rank_dirs)


def csv_rows(report: Report) -> tuple[list[str], list[list[Any]]]:
    """One row per rank and step (the --format csv output); ``data_us`` and ``data_pct`` always, empty
    where not known; ``gc_us`` and ``gc_pauses`` columns when some rank detected GC (a report without GC
    keeps its layout)."""
    header = ["rank", "step", *STEP_CSV_FIELDS, "memory_peak_mb", "rank_dir"]
    rows = [
        [
            r.rank,
            s.step,
            *(None if (v := getattr(s, k)) is msgspec.UNSET else v for k in STEP_CSV_FIELDS),
            None if s.memory_peak_mb is msgspec.UNSET else s.memory_peak_mb,
            r.rank_dir,
        ]
        for r in report.ranks
        for s in r.steps
    ]
    if any(r.gc is not msgspec.UNSET for r in report.ranks):
        header += ["gc_us", "gc_pauses"]
        steps = [s for r in report.ranks for s in r.steps]
        for row, s in zip(rows, steps, strict=True):
            row += [None, None] if s.gc_us is msgspec.UNSET else [s.gc_us, s.gc_pauses]
    if any(r.cut_short is not msgspec.UNSET for r in report.ranks):  # docs/formats.md, "Traces cut short"
        header.append("trace_cut_short")
        cut = [r.cut_short is not msgspec.UNSET for r in report.ranks for _s in r.steps]
        for row, was_cut in zip(rows, cut, strict=True):
            row.append(1 if was_cut else 0)
    return header, rows


RANGE_CSV_HEADER = ["rank", "name", "kind", "count", "total_us", "mean_us", "max_us", "max_rank", "rank_dir"]


def csv_range_rows(report: Report) -> tuple[list[str], list[list[Any]]]:
    """The ranges (``--format csv --csv-table ranges``): one row per capture (rank dir) and name (its
    ``--top``), then one per name across the ranks (rank ``all``, with the rank of the longest, no rank dir).
    A rank captured more than once (``--repeat``) has rows of each capture: ``rank_dir`` tells them apart, as
    in the steps table."""
    rows: list[list[Any]] = [
        [r.rank, g.name, g.kind, g.count, g.total_us, g.mean_us, g.max_us, r.rank, r.rank_dir]
        for r in report.ranks
        if r.ranges is not msgspec.UNSET
        for g in r.ranges
    ]
    if report.cross_rank.ranges is not msgspec.UNSET:
        rows += [
            ["all", c.name, c.kind, c.count, c.total_us, c.mean_us, c.max_us, c.max_rank, None]
            for c in report.cross_rank.ranges
        ]
    return RANGE_CSV_HEADER, rows
