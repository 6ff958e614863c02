"""`npuprof analyse --steps`: one step, a range, an open end, a list; sorted and merged."""

from __future__ import annotations

import pytest

from npuprof.analysis.step_selection import of_range, parse_steps


@pytest.mark.parametrize(
    ("text", "inside", "outside", "normal", "pair"),
    [
        ("7", [7], [6, 8], "7", (7, 7)),
        ("3-5", [3, 4, 5], [2, 6], "3-5", (3, 5)),
        ("10-", [10, 11, 10**9], [9, 0], "10-", None),
        ("8-10, 3,5", [3, 5, 8, 9, 10], [4, 6, 7, 11], "3,5,8-10", None),
        ("3,4,5", [3, 4, 5], [2, 6], "3-5", (3, 5)),  # neighbours merge
        ("2-6,4-9,20-,25", [2, 9, 20, 25, 99], [10, 19], "2-9,20-", None),
        ("0", [0], [1], "0", (0, 0)),
        ("12", [12], [3], "12", (12, 12)),
    ],
)
def test_what_a_selection_keeps(
    text: str, inside: list[int], outside: list[int], normal: str, pair: tuple[int, int] | None
) -> None:
    chosen = parse_steps(text)
    assert all(step in chosen for step in inside)
    assert not any(step in chosen for step in outside)
    assert chosen.text == normal and chosen.one_range == pair


def test_only_numbered_steps_are_chosen() -> None:
    chosen = parse_steps("1-")
    assert None not in chosen and "3" not in chosen and True not in chosen and 3.0 not in chosen
    assert of_range(2, 4) == parse_steps("4,2-3")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x", "is not a step, range or list of them"),
        ("", "is not a step, range or list of them"),
        ("3,,4", "is not a step, range or list of them"),
        ("-5", "is not a step, range or list of them"),
        ("3-x", "is not a step, range or list of them"),
        ("\u0663", "is not a step, range or list of them"),  # an Arabic-Indic 3 (helper-81)
        ("5-3", "the range 5-3 ends before it starts"),
        ("1-" + "9" * 5000, "is not a step, range or list of them"),  # no step; not int()'s own words
    ],
)
def test_what_is_refused_says_how_to_write_it(text: str, why: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_steps(text)
    assert why in str(caught.value) and str(caught.value).endswith("use e.g. 3, 3-5, 10- or 3,5,8-10")
