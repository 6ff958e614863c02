"""Damaged events: the few events of a trace that no reader can read (a number or a list where an event
should be, a ``dur`` that is a string, a ``pid`` that is an object, an ``External id`` beyond an int64) are
left out, counted and said in one line; a trace that is mostly such events is still refused
(docs/formats.md, "Damaged events").

:class:`Damaged` is what one reader left out: by what was wrong, with the first one quoted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# a reader that reads from the first event refuses the trace as soon as the events it left out outnumber
# those it read by this many (a file that is no trace is not read through one event at a time)
LEAD = 1000


@dataclass
class Damaged:
    """The events a reader left out: how many of each problem (``counts``), and the first one (``first``:
    what was wrong and its start, as the message that refused the whole trace said it)."""

    counts: Counter[str] = field(default_factory=Counter)
    first: str = ""
    # the DataLoader fetches among them (vocabulary.is_data_fetch): (ts, None where it was not readable,
    # pid, tid); their steps' data time is then not known, which a 0 would misstate (docs/formats.md)
    fetches: list[tuple[float | None, Any, Any]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.counts.total()

    def add(self, problem: str, described: str) -> None:
        """One more event left out; ``described``: it and what was wrong (kept for the first one)."""
        self.counts[problem] += 1
        if not self.first:
            self.first = described

    def merge(self, later: Damaged) -> None:
        """Add what the reader of a later part of the same trace left out."""
        self.counts.update(later.counts)
        self.fetches.extend(later.fetches)
        if not self.first:
            self.first = later.first

    def refused(self, read: int) -> str | None:
        """The message that refuses the trace when more than half of its events were left out (``read``:
        the events read); None when the rest is read."""
        if not self.total or self.total <= read:
            return None
        return self.refusal(read)

    def refusal(self, read: int, early: bool = False) -> str:
        """``early``: refused by the LEAD rule, the rest of the trace not read (its first events only are
        counted: the trace itself may hold many more)."""
        first = "first " if early else ""
        return (
            f"{self.first}; {self.total} of the trace's {first}{self.total + read} events are damaged so "
            "(corrupt trace)"
        )

    def note(self) -> str:
        """The one line a reader says of what it left out."""
        shown = "; ".join(f"{problem} x{n}" for problem, n in self.counts.most_common(3))
        more = f"; {len(self.counts) - 3} other problem(s)" if len(self.counts) > 3 else ""
        return (
            f"{self.total} damaged event(s) left out ({shown}{more}), the rest of the trace read as written; "
            f"the first: {self.first}"
        )


def negative_durations_note(count: int) -> str:
    """What a reader says of the events whose negative ``dur`` it read as 0 µs (no profiler writes one)."""
    return (
        f"{count} step, operator, device or Python event(s) with a negative duration (the trace is damaged "
        "or was edited) are counted as 0 µs long"
    )
