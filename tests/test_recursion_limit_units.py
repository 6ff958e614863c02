"""The agent's moves of the recursion limit (npuprof/agent/recursion_limit.py) where a take-back cannot be
made at once: deep in a recursion, the limit cannot go under the depth there, so the frames are owed and
taken back by the next move, never from a limit the job set itself. These are fast tests of
bench/mutation.py's "recursion_limit" group (no subprocess)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest
from conftest import recursion_depth_of_caller

from npuprof.agent import recursion_limit


def _deeper(levels: int, then: Callable[[], None]) -> None:
    """``then()`` called ``levels`` frames deeper than the caller."""
    if levels:
        _deeper(levels - 1, then)
    else:
        then()


@pytest.fixture
def job_limit() -> Iterator[int]:
    """A limit the job set itself, 30 frames above the test's depth; the limit as it was is put back."""
    limit = sys.getrecursionlimit()
    low = recursion_depth_of_caller() + 30
    sys.setrecursionlimit(low)
    try:
        yield low
    finally:
        sys.setrecursionlimit(limit)
        del recursion_limit._OWED[:]


def test_a_take_back_deeper_than_the_limit_allows_is_made_by_the_next_move(job_limit: int) -> None:
    assert recursion_limit.move(100)
    assert sys.getrecursionlimit() == job_limit + 100
    _deeper(60, lambda: recursion_limit.take_back(100))  # the limit cannot go under the depth there
    assert sys.getrecursionlimit() == job_limit + 100  # owed, not taken
    assert recursion_limit.move(1)  # the next move takes it back with its own
    assert sys.getrecursionlimit() == job_limit + 1
    recursion_limit.take_back(1)
    assert sys.getrecursionlimit() == job_limit and not recursion_limit._OWED


def test_frames_owed_never_take_from_a_limit_the_job_set_since(job_limit: int) -> None:
    """Frames moved before the job set its limit are not taken back from it, owed frames or not."""
    sys.setrecursionlimit(job_limit + 500)  # a limit of before
    assert recursion_limit.move(50)  # before the job's own limit ...
    sys.setrecursionlimit(job_limit)  # ... which the job sets here
    assert recursion_limit.move(100)
    _deeper(60, lambda: recursion_limit.take_back(100))  # owed
    recursion_limit.take_back(50)  # the move made before the job's limit: nothing to take from it
    assert sys.getrecursionlimit() == job_limit and not recursion_limit._OWED
