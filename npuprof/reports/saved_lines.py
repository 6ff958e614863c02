"""A report saved to a file or a pipe (`npuprof analyse DIR > report.txt`, the run summary in a job's log)
without the blanks rich pads a line with: a table's title is padded to the table's width, a plain table's
last column to its widest cell. No line of a saved report ends in spaces (a diff, `grep ' $'`, an editor
that strips them all see the report as written). Imports nothing."""

from __future__ import annotations

import re
from typing import Any, TextIO

# blanks before a line's end, the colour codes rich closes a styled line with (FORCE_COLOR) kept
_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)\n")
# what may end a write and turn out to be trailing blanks once the next write brings its newline
_OPEN_TAIL = re.compile(r"(?: |\x1b\[[0-9;]*m)*\Z")


class WithoutTrailingBlanks:
    """``stream`` (a file rich's Console writes to) with the blanks at each line's end left out. Blanks
    that end a write are held until the next write says whether a newline follows them, or a flush (rich
    flushes after each print, whose text ends in a newline but with ``end=""``): what others write to the
    stream meanwhile keeps its place after them."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._held = ""

    def write(self, text: str) -> int:
        whole = self._held + text
        tail = _OPEN_TAIL.search(whole)
        cut = tail.start() if tail is not None and tail.group() else len(whole)
        self._held = whole[cut:]
        self._stream.write(_TRAILING.sub(r"\1\n", whole[:cut]))
        return len(text)

    def flush(self) -> None:
        held, self._held = self._held, ""
        if held:
            self._stream.write(held)
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding: the stream's own
        return getattr(self._stream, name)
