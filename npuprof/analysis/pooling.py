"""One process's captures as one: a job captured again and again (``--repeat 0`` for days, or a
``--dynamic`` job triggered often) leaves hundreds of rank dirs per rank, and a section each in the report
nobody reads. :func:`pool` merges the summaries (and marks) of one process's captures into one, which
``rank_report`` turns into one section: every step of every capture, and the operators, kernels, ranges
and GC over all of them (docs/formats.md, "The report").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from npuprof.analysis.annotation_schema import Annotations, GcSummary
from npuprof.analysis.summary_schema import Summary
from npuprof.results import layout

POOL_AFTER = 3  # a process with more captures than this gets one pooled section in the report


def process_key(rank_dir: Path, rank: int | None) -> tuple[str, str]:
    """Which process (or rank: a torchrun restart is the same rank) a capture belongs to: its rank, else
    the worker name and pid its dir is named by, or the worker a trace of torch's tensorboard_trace_handler
    is named by (``<worker>.<ns>.pt.trace.json``, its worker ``<host>_<pid>``); always within one folder."""
    if rank is not None:
        return str(rank_dir.parent), f"rank {rank}"
    named = layout.parse_rank_dir_name(rank_dir.name)
    if named is not None:
        return str(rank_dir.parent), f"{named['worker']}_{named['pid']}"
    handler = _HANDLER_TRACE.match(rank_dir.name)
    return str(rank_dir.parent), handler["worker"] if handler else rank_dir.name


_HANDLER_TRACE = re.compile(r"^(?P<worker>.+)\.\d+\.pt\.trace\.json(?:\.gz)?$")


def pool(
    captures: Sequence[tuple[Summary, Annotations | None]], whole: bool = True
) -> tuple[Summary, Annotations | None]:
    """The summaries (in the captures' order) as one: their steps in turn, start times on one time base,
    the operators and kernels (``whole``: of the whole captures, from every name's totals where each
    summary has them; else of every step, each step's kept top), the highest memory peaks, the
    communication summed."""
    first = captures[0][0]
    bases = [s.time_base_ns if s.time_base_ns is not msgspec.UNSET else 0 for s, _a in captures]
    base = min(bases)
    steps = []
    for (summary, _a), own in zip(captures, bases, strict=True):
        shift = (own - base) / 1000
        for step in summary.steps:
            moved = msgspec.structs.replace(step, start_us=round(step.start_us + shift, 3)) if shift else step
            steps.append(moved)
    memory: dict[str, int | float | None] = {}
    for key in ("peak_allocated_mb", "peak_reserved_mb"):
        peaks = [p for s, _a in captures if isinstance(p := s.memory.get(key), int | float)]
        if peaks:
            memory[key] = max(peaks)
    from npuprof.analysis.communication import add_summaries

    communication = add_summaries([s.communication for s, _a in captures])
    by_step: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    if all(s.communication_by_step is not msgspec.UNSET for s, _a in captures):
        parts: dict[str, list[dict[str, Any]]] = {}
        for s, _a in captures:
            for step, figures in s.communication_by_step.items():  # type: ignore[union-attr]
                parts.setdefault(step, []).append(figures)
        by_step = {step: add_summaries(figures) for step, figures in parts.items()}
    warnings = list(dict.fromkeys(w for s, _a in captures for w in (s.warnings or [])))
    pooled = Summary(
        rank=first.rank,
        trace=f"{len(captures)} traces",
        events=sum(s.events for s, _a in captures),
        device=first.device,
        device_id=first.device_id,
        steps=steps,
        top_operators=_items(captures, "top_operators", "operator_totals", whole),
        top_kernels=_items(captures, "top_kernels", "kernel_totals", whole),
        memory=memory,
        communication=communication,
        communication_by_step=by_step,
        world_size=first.world_size,
        warnings=warnings or msgspec.UNSET,
        time_base_ns=base if base else msgspec.UNSET,
    )
    return pooled, _pool_annotations([a for _s, a in captures if a is not None])


def _items(
    captures: Sequence[tuple[Summary, Annotations | None]], kept: str, totals: str, whole: bool
) -> list[Any]:
    if whole and all(getattr(s, totals) is not msgspec.UNSET for s, _a in captures):
        return [item for s, _a in captures for item in getattr(s, totals)]
    return [item for s, _a in captures for item in getattr(s, kept)]


def _pool_annotations(marks: list[Annotations]) -> Annotations | None:
    if not marks:
        return None
    ranges = [r for a in marks if a.ranges is not msgspec.UNSET for r in a.ranges]
    gcs = [a.gc for a in marks if a.gc is not msgspec.UNSET]
    gc: GcSummary | msgspec.UnsetType = msgspec.UNSET
    if gcs:
        gc = GcSummary(
            threshold_ms=gcs[0].threshold_ms,
            pauses=sum(g.pauses for g in gcs),
            dropped=sum(g.dropped for g in gcs),
            steps=[s for g in gcs for s in g.steps],
        )
    warnings = list(dict.fromkeys(w for a in marks for w in (a.warnings or [])))
    return Annotations(
        ranges=ranges if any(a.ranges is not msgspec.UNSET for a in marks) else msgspec.UNSET,
        gc=gc,
        warnings=warnings or msgspec.UNSET,
    )
