"""`npuprof analyse`: parse rank dirs (or a bare Kineto trace) and report. Thin: the work is in
npuprof.analysis."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from npuprof.cli.completions import offering
from npuprof.config import EXPORT_TYPES

if TYPE_CHECKING:
    from rich.console import Console

    from npuprof.analysis.report_schema import Report
    from npuprof.analysis.step_selection import StepSelection

FORMATS = ("table", "json", "csv")
CSV_TABLES = ("steps", "ranges")


def parse_steps(value: str | None) -> StepSelection | None:
    if value is None:
        return None
    from npuprof.analysis import step_selection

    try:
        return step_selection.parse_steps(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--steps") from None


def analyse(
    path: Annotated[
        str,
        typer.Argument(
            help="A result dir (every *_ascend_pt below it), one rank dir, or a trace file of any name "
            "(its tables go to <trace>.npuprof/).",
            show_default=False,
        ),
    ],
    steps: Annotated[
        str | None,
        typer.Option(
            "--steps",
            help="Only these steps in the report: one, a range, an open end or a list, e.g. 3, 3-5, 10- "
            "or 3,5,8-10.",
        ),
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Operators and kernels listed per rank.")] = 10,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="table (rich, the default), json or csv (one row per rank and step).",
            autocompletion=offering(FORMATS),
        ),
    ] = "table",
    csv_table: Annotated[
        str | None,
        typer.Option(
            "--csv-table",
            metavar="steps|ranges",
            help="With --format csv: steps (the default) or ranges (the marks' and --msprof-tx's ranges "
            "per capture (rank_dir) and name, then across ranks).",
            show_default=False,
            autocompletion=offering(CSV_TABLES),
        ),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("-j", "--jobs", help="Parallel parsing processes (default: the cores).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-parse rank dirs already parsed.")] = False,
    export_type: Annotated[
        str,
        typer.Option(
            "--export-type",
            metavar="text|db|text,db",
            help="db or text,db: also write each rank dir's SQLite files (ascend_pytorch_profiler_{rank}.db, "
            "analysis.db) that msprof-analyze's db recipes read, re-parsing a dir that lacks them.",
            autocompletion=offering(EXPORT_TYPES),
        ),
    ] = "text",
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="ID|all",
            help="When the directory holds the captures of several runs (each is reported alone; the latest "
            "by default): the run id (or its start) to report on, or all to pool them.",
        ),
    ] = None,
) -> None:
    """Parse what is unparsed into ASCEND_PROFILER_OUTPUT/, then report step time breakdown, top operators
    and kernels, memory peak and, across ranks, the slowest rank and step start skew."""
    if not path:  # (a Path would have made it ".", the current directory)
        raise typer.BadParameter("is empty; give a result dir, a rank dir or a trace", param_hint="PATH")
    target = Path(path)
    step_range = parse_steps(steps)
    if fmt not in FORMATS:
        raise typer.BadParameter(f"{fmt!r} is not one of {', '.join(FORMATS)}", param_hint="--format")
    if csv_table is not None and csv_table not in CSV_TABLES:
        raise typer.BadParameter(
            f"{csv_table!r} is not one of {', '.join(CSV_TABLES)}", param_hint="--csv-table"
        )
    if csv_table is not None and fmt != "csv":
        raise typer.BadParameter(
            f"picks a table of --format csv: add --format csv (not {fmt})", param_hint="--csv-table"
        )
    if top < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--top")
    if jobs is not None and jobs < 1:
        raise typer.BadParameter("must be at least 1 (or leave it out for one per core)", param_hint="-j")
    if run is not None and not run.strip():  # "" was taken as no --run: the latest run, without a word
        raise typer.BadParameter("is empty; give a run id (or its start), or all", param_hint="--run")
    export_db = _export_db(export_type)
    from npuprof.cli.main import warn_flags_given_twice

    warn_flags_given_twice("analyse")

    from npuprof.analysis.report import (
        NothingToAnalyse,
        build_report,
        far_apart_steps,
        repeated_steps,
        stalled_partial_steps,
    )
    from npuprof.analysis.runs import RunChoiceError
    from npuprof.analysis.summary_schema import TOP_PER_STEP
    from npuprof.reports import line_width, terminal

    err = line_width.console(stderr=True)
    progress_ctx = None
    task = None
    if err.is_terminal and fmt == "table":
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress_ctx = Progress(
            TextColumn("parsing"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )

    def on_start(n: int) -> None:
        nonlocal task
        if progress_ctx is not None:
            progress_ctx.start()
            task = progress_ctx.add_task("parse", total=n)

    def on_done(outcome) -> None:  # type: ignore[no-untyped-def]
        if progress_ctx is not None and task is not None:
            progress_ctx.advance(task)

    from npuprof.results import layout

    layout.take_skipped()  # what an earlier call in this process passed over (a test's FIFO) is not ours
    if target.is_dir():
        _check_tree(target)  # names what the readers will pass over: links, FIFOs, records too large
    try:
        report = build_report(
            target,
            steps=step_range,
            top=top,
            jobs=jobs or os.cpu_count() or 1,
            force=force,
            on_start=on_start,
            on_done=on_done,
            export_db=export_db,
            on_note=_note,
            run=run,
        )
    except RunChoiceError as exc:
        _say_one_line(f"npuprof analyse: error: --run: {exc}")
        raise typer.Exit(2) from None
    except NothingToAnalyse as exc:
        _warn_skipped(layout.take_skipped())
        _say_one_line(f"npuprof analyse: nothing to analyse: {exc}{_runs_still_going(target)}")
        raise typer.Exit(1) from None
    except OSError as exc:  # a directory it may not list (each rank's own trouble is in its outcome)
        _say_one_line(f"npuprof analyse: cannot read {target}: {exc.strerror or exc}")
        raise typer.Exit(1) from None
    finally:
        if progress_ctx is not None:
            progress_ctx.stop()
    _mark_in_progress(report)
    _warn_skipped(layout.take_skipped())
    if fmt == "json":
        write_json(report)
    elif fmt == "csv":
        sys.stdout.write(terminal.render_csv(report, csv_table or "steps"))
        if csv_table == "ranges" and not any(r.ranges for r in report.ranks):
            _note(
                "no ranges in these captures: the table holds npuprof.mark / npuprof.range marks and "
                "--msprof-tx's communication ranges; torch's record_function ranges are in the trace "
                "(and as frames in npuprof export-stacks)"
            )
    else:
        terminal.render_table(report, _report_console())
    sys.stdout.flush()
    from npuprof.analysis.ascend_output import PARSED_BY_TORCH_NPU
    from npuprof.analysis.report import RECORD_SAYS
    from npuprof.reports.footnotes import grouped

    without: list[str] = []
    by_torch_npu = 0
    # the captures' own notes, said after the others: a --repeat 0 job gives most captures the same one
    recorded: list[tuple[str, str]] = []
    for r in report.ranks:
        for note in r.warnings or []:
            if note == PARSED_BY_TORCH_NPU:
                by_torch_npu += 1
                continue
            if note.startswith(RECORD_SAYS):
                # a capture --steps left out has its record's note (about its steps) in the JSON only: it
                # is named once below among those without a step asked
                if step_range is None or r.steps:
                    recorded.append((r.rank_dir, note))
                continue
            _say_one_line(f"npuprof analyse: warning: {r.rank_dir}: {note}")
        if step_range is not None and not r.steps:
            without.append(r.rank_dir)
    for dirs, note in grouped(recorded):
        named = dirs[0] if len(dirs) == 1 else f"{dirs[0]} .. {dirs[-1]} ({len(dirs)} captures)"
        _say_one_line(f"npuprof analyse: warning: {named}: {note}")
    if by_torch_npu:
        _note(
            f"{by_torch_npu} rank dir(s) parsed by torch_npu: read from their tables in "
            "ASCEND_PROFILER_OUTPUT/, not re-parsed"
        )
    if without:  # one line, whatever the number of captures (a job of days has thousands)
        asked = step_range.text if step_range is not None else ""
        shown = ", ".join(without[:3]) + (f" and {len(without) - 3} more" if len(without) > 3 else "")
        which = "this capture" if len(without) == 1 else f"{len(without)} of the {len(report.ranks)} captures"
        _say_one_line(f"npuprof analyse: note: no step of --steps {asked} in {which}: {shown}")
    for line in [*repeated_steps(report.ranks), *far_apart_steps(report), *stalled_partial_steps(report)]:
        _say_one_line(f"npuprof analyse: note: {line}")
    if top > TOP_PER_STEP:
        _note(
            f"--top {top}: the parse keeps each step's top {TOP_PER_STEP} operators and kernels, so at most "
            f"those are shown (the CSVs of ASCEND_PROFILER_OUTPUT hold all)"
        )
    for p in report.problems:
        _say_one_line(
            f"npuprof analyse: not analysed: {p.rank_dir}: {p.status}" + (f": {p.reason}" if p.reason else "")
        )
    if report.ranks:
        _say_runs_going(target, run)
    from npuprof.cli.main import check_stdout

    check_stdout("npuprof analyse", "the report")
    if not report.ranks:
        print("npuprof analyse: nothing could be analysed (see the reasons above)", file=sys.stderr)
        raise typer.Exit(1)


def _export_db(export_type: str) -> bool:
    """--export-type as `npuprof run` reads it (npuprof.config.parse_export_type): whether db is in it."""
    from npuprof.config import ConfigError, parse_export_type

    try:
        return "db" in parse_export_type(export_type).split(",")
    except ConfigError as exc:
        raise typer.BadParameter(f"{exc.problem}; {exc.fix}", param_hint="--export-type") from None


def _note(line: str) -> None:
    _say(f"npuprof analyse: note: {line}")


def _say(text: str) -> None:
    """Lines on stderr, a terminal's as often as not: names from someone's trace in them are shown, their
    control characters never acted on; the lines of a note of several stay lines (helper-109: the runs of
    a shared output directory were listed after a literal "\\x0a")."""
    from npuprof.reports.text import printable

    print("\n".join(printable(line) for line in text.split("\n")), file=sys.stderr)


def _report_console() -> Console:
    """stdout's console for the table report: a file or a pipe (`> report.txt`) gets each note on one
    line and each name whole, as the run summary's lines are (npuprof/reports/line_width.py); a
    terminal, or COLUMNS, sets the width as before."""
    from npuprof.reports.line_width import console

    return console()


def _say_one_line(text: str) -> None:
    """An error line, or a warning or note naming a rank dir: the path in it is the user's, a newline or an
    escape sequence in it written out (``npuprof analyse $'a\\nb'`` said "a", then "b does not exist", on a
    line of its own; helper-273: a rank dir named so split each of its warnings in two)."""
    from npuprof.reports.text import printable

    print(printable(text), file=sys.stderr)


def _check_tree(path: Path) -> None:
    """Walk the rank dirs as the report will, and look at the files it reads, so that whatever is passed
    over (noted in npuprof.results.layout) is named here: parsing may run in other processes."""
    from npuprof.results import layout

    try:
        rank_dirs = layout.find_rank_dirs(path)
    except OSError:
        return  # build_report says why
    for rank_dir in rank_dirs:
        try:
            layout.find_raw_trace(rank_dir)
        except OSError:
            continue
        layout.read_capture_record(rank_dir)


def _warn_skipped(lines: list[str]) -> None:
    for line in lines:
        _say_one_line(f"npuprof analyse: warning: skipped {line}")


def _runs_still_going(target: Path) -> str:
    """``; run ID is still going (...)`` for each run recorded in ``target`` whose launcher still runs
    here: no capture yet is no verdict on it (helper-117)."""
    going = [f"run {run_id} is still going ({why})" for run_id, why in _going_runs(target)]
    if not going:
        return ""
    return f"; {', '.join(going)}: its captures land here as it records, analyse them then"


def _going_runs(target: Path, run: str | None = None) -> list[tuple[str, str]]:
    """(run id, why it has not ended) for each run recorded in ``target`` (or beside the rank dir
    ``target``) whose launcher runs on this host, or whose record names another host and has no end;
    with ``run`` (``--run``, not ``all``) only the runs it picks."""
    from npuprof.results import layout

    if not target.is_dir():
        return []
    output = target.parent if layout.is_rank_dir(target) else target
    going = []
    for _path, record in layout.read_run_records(output):
        run_id = record.get("run_id")
        if not isinstance(run_id, str) or (run not in (None, "all") and not run_id.startswith(run)):
            continue
        why = layout.record_launcher_alive(record) or layout.record_elsewhere(record)
        if why:
            going.append((run_id, why))
    return going


def _say_runs_going(target: Path, run: str | None) -> None:
    """A report made while its run goes on is of what the run had written so far (helper-139: said
    nothing, exit 0, as of a finished run)."""
    for run_id, why in _going_runs(target, run):
        _note(
            f"run {run_id} is still going ({why}): this report holds what it had written so far; the "
            "captures it makes from now on, and what its post-processor has yet to write (tables, stacks, "
            "memory timelines), are not in it: analyse again once the run has ended"
        )


def _mark_in_progress(report: Report) -> None:
    """A capture still recording, in a run whose launcher is alive on this host, is "in progress", not
    an interrupted capture (its process has not ended)."""
    from npuprof.results import layout

    for problem in report.problems:
        if problem.status != "incomplete":
            continue
        rank_dir = Path(problem.rank_dir)
        record = layout.read_capture_record(rank_dir)
        if not record or record.get("status") != layout.STATUS_CAPTURING:
            continue
        status = layout.capture_status(rank_dir)
        if status.in_progress:
            problem.status = "in progress"
            problem.reason = (
                f"{status.detail.removeprefix('in progress: ')}; analyse it once the run has ended"
            )


def write_json(report: Report | dict[str, Any], chunk_count: int = 8192) -> None:
    """``terminal.render_json(report)`` and a newline, the same bytes, written to stdout as they are
    encoded: joined whole, the text of a many-rank report takes ~2.5 times the report's own memory
    (bench/scale.py: +8 MB at 256 ranks, +31 MB at 1024)."""
    import json

    from npuprof.analysis.report_schema import json_value

    chunks: list[str] = []
    for chunk in json.JSONEncoder(indent=2, default=json_value).iterencode(report):
        chunks.append(chunk)
        if len(chunks) >= chunk_count:
            sys.stdout.write("".join(chunks))
            chunks.clear()
    chunks.append("\n")
    sys.stdout.write("".join(chunks))


def register(app: typer.Typer) -> None:
    app.command(
        "analyse",
        help="Parse rank dirs into the Ascend tables and report step time, top operators "
        "and kernels, memory and cross-rank skew.",
    )(analyse)
