"""A report saved to a file or a pipe (`npuprof analyse DIR > report.txt`, the run summary in a job's log)
without the blanks rich pads a line with: a table's title is padded to the table's width, a plain table's
last column to its widest cell. No line of a saved report ends in spaces (a diff, `grep ' $'`, an editor
that strips them all see the report as written). Imports nothing."""

from __future__ import annotations

from typing import Any, TextIO

# what a colour code holds between its "\x1b[" and its "m" (FORCE_COLOR: rich closes a styled line with one)
_CODE_DIGITS = frozenset("0123456789;")


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
        cut = _open_tail(whole)
        self._held = whole[cut:]
        self._stream.write(_without_trailing_blanks(whole[:cut]))
        return len(text)

    def flush(self) -> None:
        held, self._held = self._held, ""
        if held:
            self._stream.write(held)
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding: the stream's own
        return getattr(self._stream, name)


def _without_trailing_blanks(text: str) -> str:
    """``text`` with the blanks that end each of its lines left out (the colour codes among them kept)."""
    if " \n" not in text and "m\n" not in text:
        return text
    lines = text.split("\n")
    for index, line in enumerate(lines[:-1]):
        cut = _open_tail(line)
        if cut < len(line):
            lines[index] = line[:cut] + line[cut:].replace(" ", "")
    return "\n".join(lines)


def _open_tail(text: str) -> int:
    """Where the blanks and colour codes that end ``text`` begin (``len(text)``: none), found from the end
    in one pass: a regular expression tried at each blank of a long run took its length squared (a table
    whose one long kernel name pads each other row with thousands of blanks: seconds a row)."""
    end = len(text)
    while end:
        if text[end - 1] == " ":
            end -= 1
        elif (
            text[end - 1] == "m"
            and (start := text.rfind("\x1b[", 0, end)) >= 0
            and _CODE_DIGITS.issuperset(text[start + 2 : end - 1])
        ):
            end = start
        else:
            break
    return end
