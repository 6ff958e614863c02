"""The width of a report that goes to a file or a pipe: the run summary (stderr) and `npuprof analyse`
(stdout) keep each line whole there, as a reader of a saved report or log wants it; imports nothing."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

NO_WRAP_WIDTH = 1 << 14  # the width where lines are not wrapped (unwrapped): wide enough for any line
SIZES = ("COLUMNS", "LINES", "TERMINAL_WIDTH")  # what rich reads a console's size from, and typer its help's


def columns() -> int | None:
    """COLUMNS as a width: a positive whole number, else None (unset, empty, ``0``, ``abc``)."""
    return _positive(os.environ.get("COLUMNS", ""))


def unwrapped(tty: bool) -> bool:
    """Whether lines are left whole: on a stream that is no terminal (a log, a pipe, `> report.txt`, a
    scheduler's capture) and no COLUMNS set. rich wraps there at 80 columns: a note split mid sentence,
    a name in a table cut short, a command split over two lines that could not be copied."""
    return not tty and columns() is None


def sizes_rich_can_use(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` less a COLUMNS, LINES or TERMINAL_WIDTH that is no positive whole number (typer reads the
    last when it is imported: ``0`` printed every help empty, ``abc`` a traceback). rich takes COLUMNS=0 for a
    console 0 wide, which prints nothing (the run summary's `next:` line, analyse's notes and every help
    were lost), and fails with a ValueError on a digit int() refuses (``²``); without it, rich sizes the
    console as it does where none is set."""
    return {k: v for k, v in environ.items() if k not in SIZES or _positive(v) is not None}


def drop_unusable_sizes(environ: MutableMapping[str, str]) -> None:
    """sizes_rich_can_use, in place: for a command that starts no job (whose environment stays the user's)."""
    for name in SIZES:
        if name in environ and _positive(environ[name]) is None:
            del environ[name]


def console(stderr: bool = False, **options: object):  # -> rich.console.Console
    """A rich console on stdout or stderr, sized as sizes_rich_can_use says, and left unwrapped where
    ``unwrapped`` says; on a stream that is no terminal, its lines without trailing blanks."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = isatty(stream)
    if not tty:  # a saved report: no line ends in the blanks rich pads titles and last columns with
        from npuprof.reports.saved_lines import WithoutTrailingBlanks

        options = {"file": WithoutTrailingBlanks(stream), **options}
    made = Console(stderr=stderr, _environ=sizes_rich_can_use(os.environ), **options)
    # the stream's own word, not rich's is_terminal: FORCE_COLOR (CI logs in colour) makes that true in a
    # log, which then wrapped at 80 columns, a suggested command split over two lines
    if unwrapped(tty):
        made.width = NO_WRAP_WIDTH
    return made


def isatty(stream: object) -> bool:
    """Whether ``stream`` is a terminal (a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False


def _positive(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and int(text) > 0 else None
