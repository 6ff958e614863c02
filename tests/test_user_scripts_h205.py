"""Findings of helper-205, a new user's training scripts (main() with argparse, gradient accumulation, GANs,
torch.compile, DataLoader workers, torchrun): each test fails without its fix."""

from __future__ import annotations

from typing import Any


class _Log:
    """A marks implementation that writes each range's start and end into a list."""

    gate = None

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.next_id = 0

    def range_start(self, name: str, stream: Any) -> int:
        self.next_id += 1
        self.log.append(f"[{name}")
        return self.next_id

    def range_end(self, range_id: int) -> None:
        self.log.append("]")


def test_a_range_called_with_no_name_is_named_by_its_function_and_never_raises() -> None:
    """``@npuprof.range()`` (the decorator called, as most decorators are) raised ``TypeError: missing 1
    required positional argument: 'name'`` at the script's import, under npuprof and without it, where the
    README says a call never raises and ``@npuprof.range`` with no name names the range by the function.
    So did ``with npuprof.range():``. Both are named now: by the function ranged, by the code of the
    ``with``."""
    from npuprof import marks

    log: list[str] = []
    saved = marks._impl
    marks._use(_Log(log))
    try:

        @marks.range()
        def load(x: int) -> int:
            log.append("body")
            return x + 1

        class Model:
            @marks.range()
            @staticmethod
            def fixed(x: int) -> int:
                return x * 2

        def train_step() -> None:
            with marks.range():
                log.append("block")

        assert load(1) == 2 and load.__name__ == "load"
        assert Model.fixed(3) == 6
        train_step()
        prefix = "test_a_range_called_with_no_name_is_named_by_its_function_and_never_raises.<locals>."
        assert log == [
            f"[{prefix}load",
            "body",
            "]",
            f"[{prefix}Model.fixed",
            "]",
            f"[{prefix}train_step",
            "block",
            "]",
        ], log
    finally:
        marks._use(saved)
