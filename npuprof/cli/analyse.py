"""`npuprof analyse`: parse rank dirs (or a bare Kineto trace) and report. Thin: the work is in
npuprof.analysis."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

_STEPS_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
FORMATS = ("table", "json", "csv")


def parse_steps(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    match = _STEPS_RE.match(value.strip())
    if not match:
        raise typer.BadParameter(
            f"{value!r} is not a step or range; use e.g. --steps 3 or --steps 3-4", param_hint="--steps"
        )
    lo = int(match.group(1))
    hi = int(match.group(2)) if match.group(2) else lo
    if hi < lo:
        raise typer.BadParameter(
            f"{value!r}: the range ends before it starts; use e.g. --steps 3-4", param_hint="--steps"
        )
    return lo, hi


def analyse(
    path: Annotated[
        Path,
        typer.Argument(
            help="A result dir (every *_ascend_pt below it), one rank dir, or a bare "
            "*.pt.trace.json(.gz) (its tables go to <trace>.npuprof/).",
        ),
    ],
    steps: Annotated[
        str | None, typer.Option("--steps", help="Only these steps in the report, e.g. 3 or 3-4.")
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Operators and kernels listed per rank.")] = 10,
    fmt: Annotated[
        str,
        typer.Option("--format", help="table (rich, the default), json or csv (one row per rank and step)."),
    ] = "table",
    jobs: Annotated[
        int | None, typer.Option("-j", "--jobs", help="Parallel parsing processes (default: the cores).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-parse rank dirs already parsed.")] = False,
) -> None:
    """Parse what is unparsed into ASCEND_PROFILER_OUTPUT/, then report step time breakdown, top operators
    and kernels, memory peak and, across ranks, the slowest rank and step start skew."""
    step_range = parse_steps(steps)
    if fmt not in FORMATS:
        raise typer.BadParameter(f"{fmt!r} is not one of {', '.join(FORMATS)}", param_hint="--format")
    if top < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--top")
    if jobs is not None and jobs < 1:
        raise typer.BadParameter("must be at least 1 (or leave it out for one per core)", param_hint="-j")

    from rich.console import Console

    from npuprof.analysis.report import NothingToAnalyse, build_report
    from npuprof.reports import terminal

    err = Console(stderr=True)
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

    try:
        report = build_report(
            path,
            steps=step_range,
            top=top,
            jobs=jobs or os.cpu_count() or 1,
            force=force,
            on_start=on_start,
            on_done=on_done,
        )
    except NothingToAnalyse as exc:
        print(f"npuprof analyse: nothing to analyse: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    except OSError as exc:  # a directory it may not list (each rank's own trouble is in its outcome)
        print(f"npuprof analyse: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    finally:
        if progress_ctx is not None:
            progress_ctx.stop()
    if fmt == "json":
        write_json(report)
    elif fmt == "csv":
        sys.stdout.write(terminal.render_csv(report))
    else:
        terminal.render_table(report, Console())
    for p in report["problems"]:
        print(
            f"npuprof analyse: not analysed: {p['rank_dir']}: {p['status']}"
            + (f": {p['reason']}" if p["reason"] else ""),
            file=sys.stderr,
        )
    if not report["ranks"]:
        print("npuprof analyse: nothing could be analysed (see the reasons above)", file=sys.stderr)
        raise typer.Exit(1)


def write_json(report: dict[str, Any], chunk_count: int = 8192) -> None:
    """``terminal.render_json(report)`` and a newline, the same bytes, written to stdout as they are
    encoded: joined whole, the text of a many-rank report takes ~2.5 times the report's own memory
    (bench/scale.py: +8 MB at 256 ranks, +31 MB at 1024)."""
    import json

    chunks: list[str] = []
    for chunk in json.JSONEncoder(indent=2).iterencode(report):
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
