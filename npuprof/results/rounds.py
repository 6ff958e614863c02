"""Which captures of a job torchrun restarted were made before its latest round of workers (docs/formats.md,
"The capture record": ``restart_count``, ``process_start_ns``).

torchrun counts restarts per node: when a node's worker fails, every node stops its workers and starts them
again, but only the failed node's count goes up (a node whose workers did not fail starts them as the attempt
it was). One node's count says nothing of another's; the workers' times do. A rank is one process a round, and
a round's workers begin after the previous round's have ended: a capture of a rank whose process began after
another capture of that rank was last written is of a later round than it. The latest round is the captures
whose process began after the last capture so shown to be of an earlier one (across hosts, their clocks are
taken to agree within a restart's time: seconds). A host's counts are not compared either: the agents of two
nodes may share a host (a job's nodes simulated on one machine, helper-380's run), and their counts are not
one sequence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Made:
    """What a capture's record says of the process that made it."""

    key: str  # the capture's rank dir
    rank: int | None
    restart_count: int | None  # TORCHELASTIC_RESTART_COUNT; None: not under torchrun (never judged)
    process_start_ns: int | None  # None: an older npuprof's record
    updated_ns: int | None  # the record's last write by its process


def earlier_rounds(made: list[Made]) -> set[str]:
    """The keys of the captures made under torchrun in a round of workers before the latest; empty when no
    restart is seen. Records without the process's start (an older npuprof's) are judged by their counts
    alone, as before: those below the highest count are earlier."""
    counted = [m for m in made if m.restart_count is not None]
    if any(m.process_start_ns is None or m.updated_ns is None for m in counted):
        counts = {m.restart_count for m in counted}
        if len(counts) < 2:
            return set()
        latest = max(c for c in counts if c is not None)
        return {m.key for m in counted if m.restart_count != latest}
    timed = [(m, m.process_start_ns or 0, m.updated_ns or 0) for m in counted]
    ended = [  # the last writes of captures shown to be of a round before another capture's
        q_written
        for q, _, q_written in timed
        if q.rank is not None and any(p.rank == q.rank and p_began > q_written for p, p_began, _ in timed)
    ]
    if not ended:
        return set()
    restarted = max(ended)
    return {m.key for m, began, _ in timed if began <= restarted}


def latest_round_counts(ranks: list[Any]) -> set[int]:
    """The counts (``restart_count``) the captures of torchrun's latest round say (report RankReports,
    marked ``earlier_round``): one, unless its nodes' counts differ."""
    latest = [r for r in ranks if r.earlier_round is not True]
    return {r.restart_count for r in latest if isinstance(r.restart_count, int)}


def latest_said(ranks: list[Any]) -> tuple[str, str]:
    """torchrun's latest round in words, and where its nodes' counts differ why: ("attempt 1", ""), or ("the
    latest attempt", "attempt 1 on some nodes, 0 on others: ...")."""
    counts = sorted(latest_round_counts(ranks), reverse=True)
    if len(counts) < 2:
        return (f"attempt {counts[0]}" if counts else "the latest attempt"), ""
    others = ", ".join(map(str, counts[1:]))
    return "the latest attempt", (
        f"attempt {counts[0]} on some nodes, {others} on others: torchrun counts each node's restarts, and a "
        "node whose workers did not fail keeps its count"
    )
