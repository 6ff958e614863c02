"""`npuprof memory-timeline`: a capture's memory over time by category (html, json, json.gz, raw.json.gz)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from npuprof.invocation import npuprof_cmd


def register(app: typer.Typer) -> None:
    app.command(
        "memory-timeline",
        help=(
            "Render a capture's memory timeline. From the run's kept categorised data "
            "(memory_timeline.raw.json.gz) when present, else from the trace's \\[memory] events "
            "(allocated and reserved; category UNKNOWN). The format follows -o's suffix: .html (plot; "
            "needs matplotlib: pip install 'npuprof\\[plot]'), .json, .json.gz, .raw.json.gz. Exit 1 when "
            "the input lacks the data or matplotlib is missing, 2 for a bad flag."
        ),
    )(memory_timeline)


_DEVICE = re.compile(r"cpu|(cuda|npu):\d{1,4}")


def _fail(message: str, code: int = 1) -> typer.Exit:
    """One line, its newlines written out too: the paths in it are the user's (cli/analyse.py)."""
    from npuprof.reports.text import printable

    print(printable(f"npuprof memory-timeline: {message}"), file=sys.stderr)
    return typer.Exit(code)


def _say(text: str) -> None:
    """A line on stderr, a terminal's as often as not: the paths and names in it come from someone's rank
    dir or trace (a directory named with an escape sequence retitled the terminal), shown with their
    control characters written out, as analyse's are (cli/analyse.py)."""
    from npuprof.reports.text import printable_lines

    print(printable_lines(text), file=sys.stderr)


def memory_timeline(
    source: Annotated[  # a str: a Path would have made "" the current directory (helper-211)
        str,
        typer.Argument(
            help="A rank directory (*_ascend_pt), a trace file or a *.raw.json.gz.",
            metavar="source",
            show_default=False,
        ),
    ],
    output: Annotated[  # a str: a Path drops the '/' that -o out/ ends with (directory_form_problem)
        str,
        typer.Option(
            "--output",
            "-o",
            help="memory.html | memory.json | memory.json.gz | memory.raw.json.gz; - (stdout: .json)",
            show_default=False,
        ),
    ],
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            "-d",
            help="cpu, cuda:N or npu:N (default: the first accelerator in the data, else cpu).",
        ),
    ] = None,
    rank: Annotated[
        int | None,
        typer.Option("--rank", help="With a result directory of several ranks: that rank's latest capture."),
    ] = None,
) -> None:
    from npuprof.cli.export_stacks import STDOUT_NAMES
    from npuprof.reports import memory_timeline as mt
    from npuprof.results.paths import (
        UnsafePathError,
        descriptor_stream,
        directory_form_problem,
        is_stream,
        output_file_problem,
        resolve_output_path,
    )

    if not source:
        raise _fail(
            "source: is empty; give a rank directory (*_ascend_pt), a trace file or a *.raw.json.gz", 2
        )
    if rank is not None and rank < 0:
        raise _fail(f"--rank {rank}: give a rank, 0 or more (as the run's summary numbers them)", 2)
    if not output:  # Path('') is the current directory, whose name is ''
        raise _fail(f"-o: is empty; give a file name: {_NAMES_TAKEN}", 2)
    if (problem := directory_form_problem(output)) is not None:
        raise _fail(f"-o: {problem}: give a file name (-o - writes .json to stdout)", 2)
    output = Path(output)
    to_stdout = str(output) in STDOUT_NAMES
    as_given = to_stdout or descriptor_stream(output)  # -o >(...): a link to this process's own pipe
    try:
        target = output if as_given else resolve_output_path(output, "-o")
    except UnsafePathError as exc:  # it names -o itself: "-o: -o 'm.json': cannot look up ..."
        raise _fail(str(exc), 2) from None
    stream = to_stdout or is_stream(target)  # stdout, /dev/null, a named pipe: written into as it is
    try:
        fmt = _stream_format(output) if stream else mt.format_of(output)
    except mt.MemoryTimelineError as exc:
        raise _fail(f"-o: {exc} (-o - writes .json to stdout)", 2) from None
    problem = None if stream else output_file_problem(target)
    if problem is not None:
        raise _fail(f"-o {output}: {problem}: give a file name (-o - writes .json to stdout)", 2)
    if device is not None and not _DEVICE.fullmatch(mt.normalise_device(device)):
        raise _fail(f"--device {device!r}: not a device; give cpu, cuda:N or npu:N", 2)
    if fmt == "html":
        import importlib.util

        try:
            have_plot = importlib.util.find_spec("matplotlib") is not None
        except (ImportError, ValueError):
            have_plot = False
        if not have_plot:
            raise _fail(
                f"the .html format needs matplotlib: install it with {mt.PLOT_INSTALL_HINT} "
                "(or ask for .json, .json.gz or .raw.json.gz, which need nothing more)"
            )

    from npuprof.cli.main import warn_flags_given_twice

    warn_flags_given_twice("memory-timeline")
    from npuprof.analysis.trace_loader import TraceError
    from npuprof.reports.inputs import InputError, overwrite_problem, single_rank_dir
    from npuprof.reports.trace_events import TraceReadError
    from npuprof.results import layout

    notes: list[str] = []
    try:
        rank_dir = single_rank_dir(Path(source), rank, notes)
        if rank_dir.is_dir() and (status := layout.capture_status(rank_dir)).in_progress:
            raise _fail(f"{rank_dir}: {status.detail}; run this again once the capture has ended")
        read = rank_dir if rank_dir.is_file() else layout.find_trace_of_rank(rank_dir)
        read = read or rank_dir / mt.RAW_FILE  # its categorised data, read before any trace
        if not stream and (problem := overwrite_problem(target, read)):
            raise _fail(f"-o {output}: {problem}: give another file name", 2)
        data = _load_whole(read, lambda: mt.load(rank_dir, device), mt.SOURCE_TRACE)
    except (InputError, TraceReadError, TraceError, mt.MemoryTimelineError) as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        if to_stdout:
            _write_stdout(mt.encoded(data, fmt))
        elif stream:
            with open(target, "wb") as into:
                into.write(mt.encoded(data, fmt))
        else:
            mt.render(data, target)
    except mt.MemoryTimelineError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        from npuprof.cli.main import exit_if_reader_gone

        exit_if_reader_gone(exc)
        raise _fail(f"cannot write {target}: {exc.strerror or exc}") from None
    for note in notes:
        _say(f"npuprof memory-timeline: note: {note}")
    if data.source == mt.SOURCE_TRACE:
        note = mt.source_note(data)
        if beside := _categories_beside(rank_dir, output):  # not: capture again with the flags it had
            note = f"{note.partition(' For categories: ')[0]} {beside}"
        elif lost := _categories_lost(rank_dir):  # not: capture again with the flags it had
            note = f"{note.partition(' For categories: ')[0]} {lost}"
        _say(f"npuprof memory-timeline: note: {_categories_pending(rank_dir) or note}")
    for note in data.notes:
        _say(f"npuprof memory-timeline: warning: {note}")
    events = len(data.raw) if data.events_read is None else data.events_read
    _say(
        f"wrote {'stdout' if to_stdout else target} ({data.device}, {events} memory events, from "
        f"{'categorised data' if data.source == mt.SOURCE_CATEGORISED else data.origin})"
    )


_NAMES_TAKEN = "one ending in .html, .json, .json.gz or .raw.json.gz (-o - writes .json to stdout)"


def _stream_format(output: Path) -> str:
    """The format of a stream given as -o: its name's suffix where it has one (a named pipe m.json.gz),
    else .json, the text one (``-o -``, ``/dev/stdout``, a shell's ``>(...)``)."""
    from npuprof.reports import memory_timeline as mt

    try:
        return mt.format_of(output)
    except mt.MemoryTimelineError:
        return "json"


def _write_stdout(content: bytes) -> None:
    """The timeline on stdout (its .json: text), lost to no failed write without a word."""
    from npuprof.cli.main import check_stdout

    sys.stdout.write(content.decode("utf-8"))
    check_stdout("npuprof memory-timeline", "the timeline")


def _load_whole(read: Path, load: Callable[[], Any], from_trace: str) -> Any:
    """``load()``, refused (TraceError) when it read the trace ``read`` (its ``source`` is ``from_trace``)
    and that file was written meanwhile: a timeline of a trace rewritten in place as it was read mixes two
    versions (trace_loader.TraceVersion)."""
    from npuprof.analysis.trace_loader import TraceVersion

    try:
        version = TraceVersion(read)
    except OSError:  # not there (a rank dir of categorised data alone): load() says what it lacks
        return load()
    try:
        data = load()
        if getattr(data, "source", None) == from_trace:
            version.still_the_same("the memory timeline")
    finally:
        version.close()
    return data


def _categories_beside(trace: Path, output: Path) -> str | None:
    """For a trace given whose rank dir holds the capture's categorised timeline (a run with
    --memory-timeline): where the categories are. The note told to capture again with the flags the run
    had (helper-223)."""
    import shlex

    from npuprof.reports import memory_timeline as mt

    if not trace.is_file() or not (trace.parent / mt.RAW_FILE).is_file():
        return None
    return (
        f"For categories: {npuprof_cmd(f'memory-timeline {shlex.quote(str(trace.parent))}')} -o "
        f"{shlex.quote(str(output))} (its rank dir holds the capture's categorised timeline, {mt.RAW_FILE})."
    )


def _categories_pending(rank_dir: Path) -> str | None:
    """The note for a capture whose run asked for --memory-timeline (or --dynamic, whose triggers may) and
    goes on: its post-processor writes the categorised data later (helper-139: the note said to capture with
    the flags the run had)."""
    from npuprof.results import layout

    if not rank_dir.is_dir() or not (going := layout.run_of_capture_going(rank_dir)):
        return None
    run_id = (layout.read_capture_record(rank_dir) or {}).get("run_id")
    config = (layout.run_record_of(rank_dir.parent, run_id) or {}).get("config")
    if not isinstance(config, dict) or not (config.get("memory_timeline") or config.get("dynamic")):
        return None
    return (
        "Categories UNKNOWN for now: rendered from the trace's [memory] events (allocator totals only), as "
        f"its run is still going ({going}) and its post-processor has not yet written this capture's "
        "categorised timeline (memory_timeline.raw.json.gz): run this again once the run has ended"
    )


def _categories_lost(rank_dir: Path) -> str | None:
    """The note for a capture whose run asked for --memory-timeline and whose job died while torch wrote
    its trace: the categorised data is taken after the trace (agent/capture_exports.py), so none was; the
    note told to capture with the flags the run had."""
    from npuprof.results import layout
    from npuprof.results.cut_capture import DIED_WHILE_WRITTEN, is_cut_by_death

    if (
        not rank_dir.is_dir()
        or (trace := layout.find_raw_trace(rank_dir)) is None
        or not is_cut_by_death(trace)
    ):
        return None
    run_id = (layout.read_capture_record(rank_dir) or {}).get("run_id")
    config = (layout.run_record_of(rank_dir.parent, run_id) or {}).get("config")
    if not isinstance(config, dict) or not config.get("memory_timeline"):
        return None
    return (
        f"No categories: {DIED_WHILE_WRITTEN}, and the categorised timeline its run asked for "
        "(--memory-timeline) is taken after the trace: there is none of this capture."
    )
