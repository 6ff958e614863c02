"""What a file torch writes beside its traces holds, told from its first bytes: the one line that refuses
it as a trace says what it is and what npuprof reads instead, rather than calling it corrupt."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from npuprof.analysis.gzip_members import GzipMembers, is_gzip
from npuprof.results import layout

WANTED = (
    "npuprof reads the profiler's Chrome trace (prof.export_chrome_trace(...), tensorboard_trace_handler's "
    "*.pt.trace.json[.gz]) or a result directory"
)
_NUM = rb"\s*-?\d+\s*"
_RAW_TIMELINE = re.compile(rb"\[\s*\[" + rb",".join([_NUM] * 4) + rb"\]")  # [[ns, action, bytes, category]
# [[times...], [[sizes...]...]]: the list of times, then a list of lists (or the times run past the head);
# a list of number pairs ([[1, 0.05], [2, 0.04]]: a script's own timings) is not one
_TIMELINE = re.compile(rb"\[\s*\[\s*-?\d[^\[\]]*(?:\]\s*,\s*\[\s*\[|\Z)")
_EXECUTION_TRACE = re.compile(rb'"schema"\s*:\s*"[^"]*chakra|"nodes"\s*:\s*\[')
_FOLDED_LINE = re.compile(rb"[^\s{\[\"][^\n]*\S \d+\r?")  # frame;frame;... 123


def describe(head: bytes) -> str | None:
    """What ``head`` (a file's first bytes, decompressed) is when torch wrote it and it is not a trace:
    the thing, then what npuprof reads; None when it is none of those."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{") and _EXECUTION_TRACE.search(text[:4096]) and b'"traceEvents"' not in text:
        return (
            "a PyTorch execution trace (ExecutionTraceObserver: the graph of operators and their inputs, "
            f"without their times), not a profiler trace: {WANTED}"
        )
    if _RAW_TIMELINE.match(text):
        return (
            "torch's raw memory timeline (export_memory_timeline's .raw.json.gz: [time, action, bytes, "
            "category] rows), not a trace: npuprof memory-timeline FILE draws it"
        )
    if _TIMELINE.match(text):
        return (
            "torch's memory timeline plot data (export_memory_timeline's .json: times and sizes by "
            "category), not a trace: npuprof memory-timeline reads the .raw.json.gz form of it, or the trace"
        )
    if text[:512].lower().lstrip().startswith((b"<html", b"<!doctype html")):
        return f"an HTML page (export_memory_timeline's .html plot is one), not a trace: {WANTED}"
    first = text.split(b"\n", 1)[0]
    if _FOLDED_LINE.fullmatch(first):
        return (
            "folded stacks ('frame;frame;... value' lines: prof.export_stacks', npuprof export-stacks' "
            f"output, flamegraph.pl's input), not a trace: {WANTED}"
        )
    return None


def describe_file(path: Path) -> str | None:
    """``describe_at`` of the file's first 64 KiB (decompressed when it is gzipped); None when unreadable."""
    try:
        with GzipMembers(path) if is_gzip(path) else open(path, "rb") as handle:
            return describe_at(path, handle.read(64 << 10))
    except (OSError, EOFError, zlib.error):
        return None


def describe_at(path: str | Path, head: bytes) -> str | None:
    """``describe`` of a file refused as a trace, knowing where it lies: npuprof run's record or log by its
    name first (a log line ending in a number reads as folded stacks), then what torch writes by its
    content, then any other file of a capture by its place (:func:`describe_place`)."""
    path = Path(path)
    if layout.is_run_file_name(path.name):
        return describe_place(path)
    return describe(head) or describe_place(path)


def describe_place(path: Path) -> str | None:
    """What a file of npuprof's result layout that is no trace is, told from its name and where it lies,
    with the directory to give instead: the run's record or log in its output dir, a capture's record,
    metadata or side file in its rank dir, a table of its parse in ``ASCEND_PROFILER_OUTPUT/``; None for
    any other file. For a file already refused as a trace: the readers take a rank dir's traces,
    ``trace_view.json``, ``memory_record.csv`` and the memory timeline's raw file themselves. A file given
    where its directory was meant was told to be renamed *.pt.trace.json if it was a trace (helper-174)."""
    path = Path(path)
    parent = path.parent
    if path.name.endswith(layout.KINETO_SUFFIXES) or path.name == layout.PARSED_TRACE:
        return None  # a trace, damaged: its reader says how
    if layout.is_run_file_name(path.name):
        what = "log" if path.name.startswith(layout.RUN_LOG) else "record"
        return f"npuprof run's {what} of the run in {parent}, not a trace: give that directory, {parent}"
    if parent.name == layout.PARSED_DIR and _holds_a_capture(parent.parent):
        return (
            f"a table of the parse of the capture in {parent.parent}, not a trace: give that directory, "
            f"{parent.parent}"
        )
    if _holds_a_capture(parent):
        return f"a file of the capture in {parent}, not a trace: give that directory, {parent}"
    if parent.name == layout.CLUSTER_OUTPUT:
        return f"a file of {cluster_output_note(parent)}"
    return None


def cluster_output_note(folder: Path) -> str:
    """What msprof-analyze's cluster output (``cluster_analysis_output/``, its tables across ranks, which it
    writes into the result directory it is given) is, and the directory to give instead."""
    return (
        f"msprof-analyze's cluster output of the result directory {folder.parent} (its tables across ranks), "
        f"not a capture: give that directory, {folder.parent}"
    )


def _holds_a_capture(directory: Path) -> bool:
    return layout.is_rank_dir(directory) or layout.holds_a_capture(directory)
