"""The runs a directory's rank dirs belong to, so that one report covers one run (docs/formats.md,
"Which run a report covers").

A directory may hold the captures of several runs: the default ``./npuprof_result`` of every run started in
one place, two runs sharing one ``-o``, a folder of result folders. Their steps and ranks must not be
pooled (rank 0's step 6 of one run beside rank 1's step 6 of another), and what ``analyse`` writes
(the db of ``--export-type db``) must not reach runs nobody asked about.

A part is the rank dirs of one directory with one npuprof run id (its capture records'; rank dirs without
one, torch_npu's own, traces from elsewhere or a capture whose record cannot be read, go with the latest
run of their directory, or make a part of their own). Parts that recorded at
the same time and whose ranks do not overlap are one run: npuprof started inside torchrun (a launcher, so a
run id, per worker) and the nodes of a multi-node job (their rank dirs copied side by side, ``node0/``
holding ranks 0-7, ``node1/`` ranks 8-15). A capture's time is from its directory's name (the time it
began, as torch_npu names them too) to its record's last update. Parts that share a rank, or recorded at
different times (two jobs one after the other, each with ``--ranks`` of its own), are different runs, and
so is each part with a process of no rank (a single-process job).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from npuprof.results import layout

ALL = "all"  # --run all: every run together (the report before runs were told apart)
SLACK_S = 2.0  # two parts recorded "at the same time" when their times overlap within this (clock skew)


@dataclass
class Run:
    """The rank dirs of one run, found under the directory analysed."""

    run_ids: list[str] = field(default_factory=list)  # of its parts that have one
    places: list[Path] = field(default_factory=list)  # the directories of its parts
    rank_dirs: list[Path] = field(default_factory=list)
    ranks: set[int | None] = field(default_factory=set)
    latest_ns: int = 0  # when its newest capture was last written
    began: float = float("inf")  # when its first capture began, epoch seconds
    ended: float = float("-inf")  # when its last capture was last written

    def label(self) -> str:
        return "+".join(self.run_ids) if self.run_ids else "(no run id)"

    def absorb(self, part: Run) -> None:
        self.run_ids += [i for i in part.run_ids if i not in self.run_ids]
        self.places += [p for p in part.places if p not in self.places]
        self.rank_dirs += part.rank_dirs
        self.ranks |= part.ranks
        self.latest_ns = max(self.latest_ns, part.latest_ns)
        self.began, self.ended = min(self.began, part.began), max(self.ended, part.ended)

    def may_take(self, part: Run) -> bool:
        """Whether ``part`` can be of this run: ranks apart, recorded at the same time, each process with a
        rank."""
        return (
            None not in part.ranks
            and None not in self.ranks
            and not self.ranks & part.ranks
            and part.began <= self.ended + SLACK_S
            and self.began <= part.ended + SLACK_S
        )


class RunChoiceError(ValueError):
    """``--run`` names no run (or more than one) of those found."""


def runs_of(rank_dirs: list[Path]) -> list[Run]:
    """The runs of ``rank_dirs``, oldest first (each keeps its rank dirs in the order given)."""
    parts: dict[tuple[str | None, Path], Run] = {}
    for rank_dir in rank_dirs:
        record = layout.read_capture_record(rank_dir) or {}
        run_id = record.get("run_id")
        run_id = run_id if isinstance(run_id, str) and run_id else None
        part = parts.setdefault((run_id, rank_dir.parent), Run([run_id] if run_id else [], [rank_dir.parent]))
        part.rank_dirs.append(rank_dir)
        part.ranks.add(_rank(rank_dir, record.get("rank")))
        written = _written_ns(rank_dir, record.get("updated_ns"))
        part.latest_ns = max(part.latest_ns, written)
        began = _began(rank_dir, written / 1e9)
        part.began = min(part.began, began, written / 1e9)
        part.ended = max(part.ended, began, written / 1e9)
    # first the parts of one directory (npuprof started inside torchrun: a launcher and run id per
    # worker), then across directories (the nodes of a multi-node job, copied side by side)
    by_place: dict[Path, list[Run]] = {}
    for part in sorted(parts.values(), key=lambda p: p.latest_ns):
        if part.run_ids:
            _place(by_place.setdefault(part.places[0], []), part)
    for (run_id, place), part in parts.items():
        if run_id is None:  # no record says otherwise: with the latest run of its directory, if any
            home = by_place.setdefault(place, [])
            if home:
                home[-1].absorb(part)
            else:
                home.append(part)
    runs: list[Run] = []
    for part in sorted((r for place in by_place.values() for r in place), key=lambda r: r.latest_ns):
        _place(runs, part)
    return sorted(runs, key=lambda r: r.latest_ns)


def _place(runs: list[Run], part: Run) -> None:
    """Add ``part`` to the first of ``runs`` it can belong to (:meth:`Run.may_take`), else as a run of its
    own."""
    home = next((r for r in runs if r.may_take(part)), None)
    if home is None:
        runs.append(part)
    else:
        home.absorb(part)


def _began(rank_dir: Path, default: float) -> float:
    """When the capture began, from its directory's name (``..._20261202073144342_ascend_pt``, local time)."""
    fields = layout.parse_rank_dir_name(rank_dir.name)
    if fields is None:
        return default
    stamp = fields["stamp"]
    try:
        return time.mktime(time.strptime(stamp[:14], "%Y%m%d%H%M%S")) + int(stamp[14:]) / 1000
    except (ValueError, OverflowError):
        return default


def _rank(rank_dir: Path, recorded: object) -> int | None:
    if isinstance(recorded, int) and not isinstance(recorded, bool):
        return recorded
    try:
        return layout.rank_of(rank_dir)
    except OSError:
        return None


def _written_ns(rank_dir: Path, updated_ns: object) -> int:
    if isinstance(updated_ns, int) and not isinstance(updated_ns, bool):
        return updated_ns
    try:
        return os.stat(rank_dir).st_mtime_ns
    except OSError:
        return 0


def choose(runs: list[Run], wanted: str | None) -> list[Run]:
    """The runs a report covers: the latest when ``wanted`` is None, all of them for ``--run all``, else
    the one with a run id that is or starts with ``wanted``. Raises RunChoiceError."""
    if wanted is None:
        return runs[-1:]
    if wanted == ALL:
        return runs
    exact = [r for r in runs if wanted in r.run_ids]
    matching = exact or [r for r in runs if any(i.startswith(wanted) for i in r.run_ids)]
    if len(matching) == 1:
        return matching
    known = ", ".join(dict.fromkeys(r.label() for r in runs if r.run_ids)) or "none has an npuprof run id"
    if len({r.label() for r in matching}) == 1:  # one run in several places: a run's rank dirs copied
        places = ", ".join(str(p) for r in matching for p in r.places)
        label = matching[0].label()
        raise RunChoiceError(f"run {label} is in {len(matching)} places ({places}): analyse one of them")
    if matching:
        raise RunChoiceError(f"{wanted!r} starts the ids of {len(matching)} runs ({known}); give more of it")
    raise RunChoiceError(f"no run {wanted!r} here (runs: {known}); or --run all")


def describe(run: Run) -> str:
    """``"5a416f1a7fc8: 2 rank dirs in /out, last written 2026-12-02 07:34"``."""
    count = len(run.rank_dirs)
    more = f" (+{len(run.places) - 3})" if len(run.places) > 3 else ""
    places = ", ".join(map(str, run.places[:3])) + more
    text = f"{run.label()}: {count} rank dir{'s' if count != 1 else ''} in {places}"
    if run.latest_ns:
        text += f", last written {time.strftime('%Y-%m-%d %H:%M', time.localtime(run.latest_ns / 1e9))}"
    return text
