"""Small text helpers for what npuprof prints on a terminal."""

from __future__ import annotations


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut in its middle to ``width`` characters, an ellipsis in place of what is cut: the start
    and the end of an operator or directory name are what tell it apart."""
    if len(text) <= width:
        return text
    keep = max(width - 1, 2)
    head = keep // 2
    return text[:head] + "…" + text[len(text) - (keep - head) :]
