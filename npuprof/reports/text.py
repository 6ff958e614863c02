"""Small text helpers for what npuprof prints on a terminal."""

from __future__ import annotations

import re

# C0 and C1 control characters and DEL: in a name read from someone's trace, an escape sequence would act
# on the terminal (clear it, recolour it, retitle it) instead of being read
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters written as ``\\xNN``: shown, never acted on."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut in its middle to ``width`` characters, an ellipsis in place of what is cut: the start
    and the end of an operator or directory name are what tell it apart."""
    if len(text) <= width:
        return text
    keep = max(width - 1, 2)
    head = keep // 2
    return text[:head] + "…" + text[len(text) - (keep - head) :]
