"""`npuprof export-stacks`: folded stacks (and an SVG flame graph) from a capture's trace."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from npuprof.cli.completions import offering

T = TypeVar("T")

METRICS = ("self_cpu_time_total", "self_npu_time_total", "self_cuda_time_total")
# -o names of standard output (those of /dev are links, refused as output files otherwise: helper-100)
STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def register(app: typer.Typer) -> None:
    app.command(
        "export-stacks",
        help=(
            "Write folded stacks ('outer;...;inner <µs>', for flamegraph.pl / speedscope) rebuilt from "
            "a capture's trace, and optionally an interactive SVG flame graph. Without -o and --svg the "
            "stacks go to stdout. Exit 1 when the input lacks the data, 2 for a bad flag."
        ),
    )(export_stacks)


def _fail(message: str, code: int = 1) -> typer.Exit:
    """One line, its newlines written out too: the paths in it are the user's (cli/analyse.py)."""
    from npuprof.reports.text import printable

    print(printable(f"npuprof export-stacks: {message}"), file=sys.stderr)
    return typer.Exit(code)


def _say(text: str) -> None:
    """A line on stderr, a terminal's as often as not: the paths and names in it come from someone's rank
    dir or trace (a directory named with an escape sequence retitled the terminal), shown with their
    control characters written out, as analyse's are (cli/analyse.py)."""
    from npuprof.reports.text import printable_lines

    print(printable_lines(text), file=sys.stderr)


def _check_output(text: str | Path, flag: str) -> Path:
    from npuprof.results.paths import (
        UnsafePathError,
        descriptor_stream,
        directory_form_problem,
        is_stream,
        output_file_problem,
        resolve_output_path,
    )

    if (problem := directory_form_problem(text)) is not None:  # out/: Path drops the '/'
        raise _fail(f"{flag}: {problem}: give a file name", 2)
    path = Path(text)
    if descriptor_stream(path):  # -o >(...): the shell's pipe, a link to this process's own descriptor
        return path
    try:
        target = resolve_output_path(path, flag)
    except UnsafePathError as exc:
        raise _fail(str(exc), 2) from None
    if is_stream(target):  # -o /dev/null, a named pipe: written into as it is
        return target
    problem = output_file_problem(target)
    if problem is not None:
        missing = "does not exist" in problem
        fix = "make it first, or give a file in another" if missing else "give a file name"
        hint = f": {fix}" + (" (-o - writes the stacks to stdout)" if flag == "-o" else "")
        raise _fail(f"{flag} {path}: {problem}{hint}", 2)
    return target


def _same_file(first: Path, second: Path) -> bool:
    """Whether two output paths name one file (a stream such as /dev/null is written into, never replaced:
    both may name it)."""
    from npuprof.results.paths import is_stream

    if is_stream(first) or is_stream(second):
        return False
    if os.path.abspath(first) == os.path.abspath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one does not exist yet: distinct names in existing directories
        return False


def _write(path: Path, text: str, written: Path | None = None) -> None:
    """Write ``text`` to ``path``; on failure, one line that names ``written`` too (the folded stacks
    written before the SVG failed: a full disk took only the SVG, and the line said nothing of them)."""
    from npuprof.cli.main import exit_if_reader_gone
    from npuprof.results.atomic import write_text
    from npuprof.results.paths import is_stream

    try:
        if is_stream(path):
            with open(path, "w", encoding="utf-8") as stream:
                stream.write(text)
        else:
            write_text(path, text)
    except OSError as exc:
        exit_if_reader_gone(exc)
        kept = f" ({written} was written)" if written is not None else ""
        raise _fail(f"cannot write {path}: {exc.strerror or exc}{kept}") from None


def _read_whole(trace: Path, read: Callable[[], T]) -> T:
    """``read()`` of ``trace``, refused (TraceError) when the file was written meanwhile: stacks of a trace
    rewritten in place as they were read mix two versions (trace_loader.TraceVersion)."""
    from npuprof.analysis.trace_loader import TraceVersion

    version = TraceVersion(trace)
    try:
        result = read()
        version.still_the_same("the stacks")
    finally:
        version.close()
    return result


def _frames_missing(trace: Path) -> list[str]:
    """What the capture record of the trace's rank dir says of Python frames missing from the trace (the
    job's own profile hook replaced torch's tracer: agent/profile_hook.py)."""
    from npuprof.agent.profile_hook import FRAMES_MISSING
    from npuprof.results import layout

    rank_dir = trace.parent.parent if trace.parent.name == layout.PARSED_DIR else trace.parent
    detail = (layout.read_capture_record(rank_dir) or {}).get("detail")
    if not isinstance(detail, str):
        return []
    said = [part for part in detail.split("; ") if part.startswith(FRAMES_MISSING)]
    return [f"its capture record says: {part}" for part in said]


def export_stacks(
    source: Annotated[  # a str: a Path would have made "" the current directory (helper-211)
        str,
        typer.Argument(
            help="A rank directory (*_ascend_pt) or a trace file.", metavar="source", show_default=False
        ),
    ],
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            "-m",
            help="self_cpu_time_total (host self time), self_cuda_time_total or self_npu_time_total "
            "(device kernel time, given to the stack that launched each kernel; either name gives the "
            "trace's device's, as torch's export_stacks).",
            autocompletion=offering(METRICS),
        ),
    ] = "self_cpu_time_total",
    output: Annotated[  # str, as source: a Path made "-o ''" the current directory
        str | None, typer.Option("--output", "-o", help="Folded stacks file ('-' = stdout).")
    ] = None,
    svg: Annotated[
        str | None, typer.Option("--svg", help="Also write an interactive SVG flame graph.")
    ] = None,
    min_width: Annotated[
        float, typer.Option("--min-width", help="SVG: leave out frames narrower than this (px).")
    ] = 0.1,
    keep_idle_threads: Annotated[
        bool,
        typer.Option(
            "--keep-idle-threads",
            help="Keep threads that ran no torch work and only waited (left out by default).",
        ),
    ] = False,
    rank: Annotated[
        int | None,
        typer.Option("--rank", help="With a result directory of several ranks: that rank's latest capture."),
    ] = None,
) -> None:
    if not source:
        raise _fail("source: is empty; give a rank directory (*_ascend_pt) or a trace file", 2)
    if metric not in METRICS:
        raise _fail(f"--metric {metric!r}: use one of {', '.join(METRICS)}", 2)
    if rank is not None and rank < 0:
        raise _fail(f"--rank {rank}: give a rank, 0 or more (as the run's summary numbers them)", 2)
    if output == "":
        raise _fail("-o: is empty; give a file name (-o - writes the stacks to stdout)", 2)
    if svg == "":
        raise _fail("--svg: is empty; give a file name", 2)
    if output is not None and str(output).lower().endswith(".svg"):  # memory-timeline's -o picks by suffix
        raise _fail(
            f"-o {output}: -o writes the folded stacks (text), not an SVG; give --svg {output} for the "
            "flame graph (and -o with another name, such as cpu.stacks, for the stacks)",
            2,
        )
    if not 0 <= min_width < float("inf"):  # nan, inf and negatives are no width
        raise _fail(f"--min-width {min_width}: give a width in pixels, 0 or more (e.g. 0.1)", 2)
    to_stdout = (output is None and svg is None) or (output is not None and str(output) in STDOUT_NAMES)
    out_path = None if to_stdout or output is None else _check_output(output, "-o")
    svg_path = None if svg is None else _check_output(svg, "--svg")
    if out_path is not None and svg_path is not None and _same_file(out_path, svg_path):
        # the SVG, written second, replaced the stacks, and both "wrote" lines named that file
        raise _fail(
            f"-o {output} and --svg {svg} name the same file: the flame graph would replace the stacks; give "
            "each its own name (e.g. -o cpu.folded --svg flame.svg)",
            2,
        )
    from npuprof.cli.main import warn_flags_given_twice

    warn_flags_given_twice("export-stacks")

    from npuprof.analysis.trace_loader import TraceError
    from npuprof.reports import stacks as st
    from npuprof.reports.inputs import InputError, find_trace, overwrite_problem
    from npuprof.reports.trace_events import TraceReadError

    notes: list[str] = []
    try:
        trace = find_trace(Path(source), rank, notes)
        for flag, path in (("-o", out_path), ("--svg", svg_path)):
            if path is not None and (problem := overwrite_problem(path, trace)):
                raise _fail(f"{flag} {path}: {problem}: give another file name", 2)
        folded = _read_whole(trace, lambda: st.folded_from_trace(trace, metric, keep_idle_threads))
    except (InputError, TraceReadError, TraceError, st.StacksError) as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:  # listing a directory it may not read
        raise _fail(f"cannot read {source}: {exc.strerror or exc}") from None
    for note in notes:
        _say(f"npuprof export-stacks: note: {note}")
    for note in [*folded.notes, *_frames_missing(trace)]:
        _say(f"npuprof export-stacks: warning: {note}")
    if not folded.has_python_frames:
        print(
            "npuprof export-stacks: note: the trace has no Python stacks (python_function events), so "
            "the stacks are operator nesting only; capture with --with-stack for Python frames",
            file=sys.stderr,
        )
    text = folded.text()
    if not text:
        raise _fail(f"no {metric} time in {trace}")

    if to_stdout:
        from npuprof.cli.main import check_stdout

        sys.stdout.write(text)
        check_stdout("npuprof export-stacks", "the stacks")
    elif out_path is not None:
        _write(out_path, text)
    if svg_path is not None:
        from npuprof.reports.flamegraph_svg import render_svg

        kind = "host self time" if metric == st.HOST_METRIC else "device kernel time"
        title = f"{trace.parent.name if trace.parent.name else trace.name}: {metric}"
        _write(
            svg_path,
            render_svg(folded.integer_values(), title=title, unit_label=kind, min_width_px=min_width),
            None if to_stdout else out_path,
        )
    summary = f"{len(folded.integer_values())} stacks, {folded.total_us:,.0f} µs of {metric} from {trace}"
    for path in (out_path, svg_path):
        if path is not None:
            _say(f"wrote {path} ({summary})")
