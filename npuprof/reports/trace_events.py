"""Trace reading for the reports (export-stacks, memory-timeline).

``load_events`` goes through the project's one trace reader (npuprof.analysis.trace_loader), which takes
both forms (Kineto's ``{"traceEvents": [...]}`` and torch_npu's bare array), gzipped or not, with number or
string times, keeping only the events the reports need. Events are trace_loader's
:class:`~npuprof.analysis.trace_loader.Event` (``name ph cat ts dur pid tid id args`` and ``args_dict()``);
``args`` stay undecoded (``msgspec.Raw``) and are decoded only for the few events that need them: decoding
every event's args costs 4x the time and twice the memory on big traces (bench/README.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.trace_loader import (
    DEFAULT_BLOCK,
    END_PROBLEM,
    Event,
    Trace,
    TraceError,
    described_event,
    ends_past_limit,
    load_trace,
    no_time,
)

TraceEvent = Event  # the reports' name for it


class TraceReadError(ValueError):
    """The file is not a readable Chrome trace."""


def wanted(ev: Any) -> bool:
    """The events the reports use: durations, flows, metadata and ``[memory]`` records. A complete event
    without a ts or a dur is not (read at time 0 it nested every such event in the one before)."""
    if ev.ph == "X":
        return not (no_time(ev.ts) or no_time(ev.dur))
    return ev.ph in ("s", "f", "t", "M") or ev.name == vocab.MEMORY_EVENT


def span_or_flow(ev: Any) -> bool:
    """The events export-stacks reads: ``wanted``'s but its ``[memory]`` instants, which no stack is made of
    (a third of a ``--profile-memory`` capture's events, kept for nothing: bench/README.md)."""
    if ev.ph == "X":
        return not (no_time(ev.ts) or no_time(ev.dur))
    return ev.ph in ("s", "f", "t", "M")


def memory_record(ev: Any) -> bool:
    """The events memory-timeline reads from a trace: the ``[memory]`` records ``wanted`` keeps. Keeping the
    spans too held ~3x the trace's size in memory on a 500 MB trace for nothing (bench/README.md)."""
    return ev.name == vocab.MEMORY_EVENT and wanted(ev)


def timeless_note(count: int) -> str:
    """What a reader says of the complete events without a ts or a dur it left out (analyse's words)."""
    return (
        f"{count} complete event(s) without a ts or a dur were left out (no profiler writes them so: the "
        "trace was edited or damaged)"
    )


def load(
    path: Path,
    timeless: list[int] | None = None,
    keep: Callable[[Any], bool] = wanted,
    block: int = DEFAULT_BLOCK,
) -> Trace:
    """The trace with the events ``keep`` accepts (default ``wanted``; in file order; times as trace_loader
    gives them: string times relative to ``Trace.ts_base``). ``timeless``: a one-item list the complete
    events without a ts or a dur (left out) are counted into. The complete events that end past TIME_LIMIT
    are left out and counted in ``Trace.damaged`` (docs/formats.md, "Damaged events"). Raises
    TraceReadError. ``block``: load_trace's."""

    far: list[Any] = []  # the complete events ending past TIME_LIMIT: [the first, then None per other]

    def counted(ev: Any) -> bool:  # keep, counting the complete events it leaves out for want of a time
        if ev.ph == "X" and (no_time(ev.ts) or no_time(ev.dur)):
            if timeless is not None:
                timeless[0] += 1
            return False
        if not keep(ev):
            return False
        if ev.ph == "X" and ends_past_limit(ev.ts, ev.dur):  # as analyse leaves them out (helper-243)
            far.append(None if far else described_event(ev))
            return False
        return True

    try:
        loaded = load_trace(path, keep=counted, block=block)
    except TraceError as exc:
        raise TraceReadError(str(exc)) from exc
    except OSError as exc:
        raise TraceReadError(f"cannot read {path}: {exc.strerror or exc}") from exc
    for first in far:
        loaded.damaged.add(END_PROBLEM, f"cannot read the event {first}: {END_PROBLEM}")
    return loaded


def load_events(path: Path) -> list[Event]:
    """``load(path).events``."""
    return load(path).events


def process_names(events: list[Any]) -> dict[int | str | None, str]:
    """pid -> the name from the ``process_name`` metadata events."""
    names: dict[int | str | None, str] = {}
    for ev in events:
        if ev.ph == "M" and ev.name == "process_name":
            name = ev.args_dict().get("name")
            if isinstance(name, str):
                names[ev.pid] = name
    return names


def device_labelled(events: list[Any]) -> set[int | str | None]:
    """The pids whose ``process_labels`` metadata names a device ("GPU 0"): Kineto names a GPU's process
    after the host's ("python") and says which device it is only there."""
    from npuprof.analysis.vocabulary import GPU_LABEL_RE

    found: set[int | str | None] = set()
    for ev in events:
        if ev.ph == "M" and ev.name == "process_labels":
            labels = ev.args_dict().get("labels")
            if isinstance(labels, str) and GPU_LABEL_RE.search(labels):
                found.add(ev.pid)
    return found
