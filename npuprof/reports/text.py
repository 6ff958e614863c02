"""Small text helpers for what npuprof prints on a terminal."""

from __future__ import annotations

import re

# C0 and C1 control characters and DEL: in a name read from someone's trace, an escape sequence would act
# on the terminal (clear it, recolour it, retitle it) instead of being read
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# the bidirectional controls (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), which reorder the
# text after them where it is shown (a terminal that does bidi, a browser showing the flame graph:
# "safe\u202egnp.exe" reads "safeexe.png"), the line and paragraph separators (U+2028, U+2029) and the
# invisible ones (U+200B-U+200D, U+2060-U+2064, U+FEFF), which make two names look alike
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def printable(text: str) -> str:
    """``text`` with its control characters written as ``\\xNN`` and its bidirectional controls and
    invisible characters as ``\\uNNNN``: shown, never acted on."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if text.isascii():  # (a flag of the string's: most names cost no second search)
        return text
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def printable_lines(text: str) -> str:
    """``text`` with each line's control characters written as ``\\xNN``, its line breaks kept: a note of
    several lines stays lines."""
    return "\n".join(printable(line) for line in text.split("\n"))


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut in its middle to ``width`` characters, an ellipsis in place of what is cut: the start
    and the end of an operator or directory name are what tell it apart."""
    if len(text) <= width:
        return text
    keep = max(width - 1, 2)
    head = keep // 2
    return text[:head] + "…" + text[len(text) - (keep - head) :]


COMM_PREFIX = "comm:"  # --msprof-tx's ranges: comm:{op},{group},{dtype},{count} (docs/formats.md)


def shorten_range_name(name: str, width: int) -> str:
    """A range's name cut to ``width`` characters. A ``comm:{op},{group},{dtype},{count}`` range loses its
    group and dtype first, then the middle of ``{op},{count}``: cut in its middle as other names are, at
    an 80-column terminal ``comm:recv,...`` and ``comm:reduce_scatter,...`` both read ``comm:re…`` in the
    table across ranks, and two sizes of one op read alike."""
    parts = name.split(",")
    if len(name) <= width or not name.startswith(COMM_PREFIX) or len(parts) < 4:
        return shorten_middle(name, width)
    head, middle, tail = parts[0] + ",", ",".join(parts[1:-1]), "," + parts[-1]
    room = width - len(head) - len(tail)
    if room >= 3:
        return head + shorten_middle(middle, room) + tail
    if len(head) + 1 + len(parts[-1]) <= width:
        return head + "…" + parts[-1]
    rest = parts[0][len(COMM_PREFIX) :] + tail  # its ellipsis stands for the group and dtype too: always one
    return COMM_PREFIX + shorten_middle(rest, min(width - len(COMM_PREFIX), len(rest) - 1))
