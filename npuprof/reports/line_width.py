"""The width of a report that goes to a file or a pipe: the run summary (stderr) and `npuprof analyse`
(stdout) keep each line whole there, as a reader of a saved report or log wants it; imports nothing."""

from __future__ import annotations

import os

NO_WRAP_WIDTH = 1 << 14  # the width where lines are not wrapped (unwrapped): wide enough for any line


def unwrapped(tty: bool) -> bool:
    """Whether lines are left whole: on a stream that is no terminal (a log, a pipe, `> report.txt`, a
    scheduler's capture) and no COLUMNS set. rich wraps there at 80 columns: a note split mid sentence,
    a name in a table cut short, a command split over two lines that could not be copied."""
    return not tty and not os.environ.get("COLUMNS", "").strip()
