"""Notes on captures (under the run summary's table, analyse's warnings), one for a row of like ones.

A job captured again and again (``--repeat 0``) gets the same note under most of its captures ("the
post-processor ran during this capture (3 earlier captures waited for it): ..."): one line each was a wall
of text that hid the notes that differ. Three or more consecutive notes that differ only in their numbers
are one footnote, named by the first and last capture and their count, each number that differs given as
its range.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

# a number standing alone, its sign with it: not one inside a name or path (a pid in vm_4242_..._ascend_pt,
# /tmp/run3/x.json, thread Thread-3), nor a part of a span, a time, a version or a grouped figure (steps 5-9,
# 12:30:01, 2.1.0, 1,234): those tell notes of other captures apart, never merge into a range ("-5", "-3"
# read "-3 to 5", "steps 5-9", "15-19" read "steps 5 to 15-9 to 19")
_NUMBER = re.compile(r"(?<![\w./:,-])-?\d+(?:\.\d+)?(?![\w/]|[-:,.]\d)")
GROUPED_FROM = 3  # like notes of this many captures in a row are one footnote


def numbers_hidden(note: str) -> str:
    """``note`` with each number standing alone (as grouped() reads them) as ``#``: notes alike but for
    their numbers read the same."""
    return _NUMBER.sub("#", note)


def grouped(notes: Iterable[tuple[T, str | None]]) -> list[tuple[list[T], str]]:
    """``(item, note)`` pairs in their order as ``(items, note)`` footnotes: a run of GROUPED_FROM items or
    more whose notes have the same words (numbers aside) is one, a run broken by an item without a note;
    each other item keeps its note as it is."""
    runs: list[tuple[list[T], list[str]]] = []
    shape: str | None = None
    for item, note in notes:
        if not note:
            shape = None
            continue
        own = numbers_hidden(note)
        if runs and own == shape:
            runs[-1][0].append(item)
            runs[-1][1].append(note)
        else:
            runs.append(([item], [note]))
        shape = own
    footnotes: list[tuple[list[T], str]] = []
    for items, texts in runs:
        if len(items) >= GROUPED_FROM:
            footnotes.append((items, _merged(texts)))
        else:  # two lines read as well as one, and each keeps its own numbers
            footnotes += [([item], text) for item, text in zip(items, texts, strict=True)]
    return footnotes


def _merged(texts: Sequence[str]) -> str:
    """One text for notes of the same words: each number as in the first where all agree, else ``low to
    high`` (as written in the notes)."""
    first = texts[0]
    if len(texts) == 1:
        return first
    columns = list(zip(*(_NUMBER.findall(text) for text in texts), strict=True))
    said = iter(columns)

    def number(match: re.Match[str]) -> str:
        values = next(said)
        if len(set(values)) == 1:
            return match.group()
        low, high = min(values, key=float), max(values, key=float)
        return low if float(low) == float(high) else f"{low} to {high}"

    return _NUMBER.sub(number, first)
