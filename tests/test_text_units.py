"""The terminal's text helpers (npuprof/reports/text.py) on hand-computed names: control characters shown,
never acted on; a name cut in its middle to the width asked, an ellipsis for what is cut; a
``comm:{op},{group},{dtype},{count}`` range losing its group and dtype first, then the middle of
``{op},{count}``, at each width where the cut changes. These are the fast tests of bench/mutation.py's "text"
group (no subprocess)."""

from __future__ import annotations

import pytest

from npuprof.reports.text import printable, shorten_middle, shorten_range_name


def test_control_characters_are_shown_as_escapes_and_others_kept() -> None:
    assert printable("aten::mm\x1b[2J\x07") == "aten::mm\\x1b[2J\\x07"  # C0: clear screen, bell
    assert printable("a\x7fb\x9fc\x85") == "a\\x7fb\\x9fc\\x85"  # DEL and C1
    assert printable("\xa0é…") == "\xa0é…"  # printable beyond ASCII: as it is
    assert printable("") == ""


def test_bidirectional_controls_and_invisible_characters_are_shown_as_escapes() -> None:
    """helper-189: an operator named "safe" RLO "gnp.exe" (someone's trace) reads "safeexe.png" wherever
    the text is shown with bidi (some terminals, the browser showing export-stacks' SVG), and a line
    separator or a zero-width space hides in a name; printable wrote C0 and C1 controls out only."""
    assert printable("safe\u202egnp.exe") == "safe\\u202egnp.exe"  # right-to-left override
    assert printable("a\u2066b\u2069c\u200fd\u061c") == "a\\u2066b\\u2069c\\u200fd\\u061c"  # isolates, marks
    assert printable("ls\u2028sep\u2029") == "ls\\u2028sep\\u2029"  # line, paragraph separators
    assert printable("a\u200bb\ufeffc\u2060") == "a\\u200bb\\ufeffc\\u2060"  # zero-width
    assert printable("é\x1b\u202e") == "é\\x1b\\u202e"


@pytest.mark.parametrize(
    ("text", "width", "shown"),
    [
        ("abcd", 4, "abcd"),  # exactly the width: whole
        ("abcde", 4, "a…de"),  # one over: one character and the ellipsis in place of two
        ("abcdef", 3, "a…f"),
        ("abcdef", 1, "a…f"),  # never less than a first and a last character
    ],
)
def test_a_name_is_cut_in_its_middle(text: str, width: int, shown: str) -> None:
    assert shorten_middle(text, width) == shown


@pytest.mark.parametrize(
    ("name", "width", "shown"),
    [
        ("aten::convolution_backward", 10, "aten…kward"),
        ("aten::x,group,float32,16384", 16, "aten::x…32,16384"),  # commas, not a comm: range: its middle
        ("comm:x,,,1", 10, "comm:x,,,1"),  # a comm: range that fits (empty group and dtype): whole
    ],
)
def test_other_names_and_names_that_fit_are_cut_as_any_name(name: str, width: int, shown: str) -> None:
    assert shorten_range_name(name, width) == shown


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (25, "comm:recv,g,float32,16384"),  # fits
        (24, "comm:recv,g,f…at32,16384"),  # the group and dtype cut in their middle
        (19, "comm:recv,g…2,16384"),  # 3 characters left for them: still cut in their middle
        (18, "comm:recv,…16384"),  # fewer: the ellipsis stands for both
        (16, "comm:recv,…16384"),
        (15, "comm:recv…6384"),  # no room for `{op},…{count}`: `{op},{count}` cut, always with an ellipsis
        (14, "comm:recv…6384"),
        (10, "comm:re…84"),
    ],
)
def test_a_comm_range_loses_its_group_and_dtype_first(width: int, shown: str) -> None:
    name = "comm:recv,g,float32,16384"
    assert shorten_range_name(name, width) == shown
    assert len(shown) <= width
