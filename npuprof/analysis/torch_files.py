"""What a file torch writes beside its traces holds, told from its first bytes: the one line that refuses
it as a trace says what it is and what npuprof reads instead, rather than calling it corrupt."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from npuprof.analysis.gzip_members import GzipMembers, is_gzip

WANTED = (
    "npuprof reads the profiler's Chrome trace (prof.export_chrome_trace(...), tensorboard_trace_handler's "
    "*.pt.trace.json[.gz]) or a result directory"
)
_NUM = rb"\s*-?\d+\s*"
_RAW_TIMELINE = re.compile(rb"\[\s*\[" + rb",".join([_NUM] * 4) + rb"\]")  # [[ns, action, bytes, category]
_TIMELINE = re.compile(rb"\[\s*\[\s*-?\d")  # [[times...], [[sizes...]...]]
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
    """``describe`` of the file's first 64 KiB (decompressed when it is gzipped); None when unreadable."""
    try:
        with GzipMembers(path) if is_gzip(path) else open(path, "rb") as handle:
            return describe(handle.read(64 << 10))
    except (OSError, EOFError, zlib.error):
        return None
