"""The step breakdown on hand-computed cases: disjoint steps, overlapping steps (a pipelined loop cut into
ProfilerSteps that overlap) and the lanes trace_view.json draws."""

from __future__ import annotations

import numpy as np
import pytest

from npuprof.analysis import intervals
from npuprof.analysis.step_breakdown import OVERLAP_LANES, StepWindows, Work, breakdown


def spans(*pairs: tuple[float, float]) -> intervals.Spans:
    return intervals.union(np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float))


# kernels [200, 500), [850, 1250), [1600, 1700); an all-reduce [900, 1400); no receive
OVERLAPPING_WORK = Work(
    computing=spans((200, 500), (850, 1250), (1600, 1700)),
    communication=spans((900, 1400)),
    receive=intervals.EMPTY,
    task_starts=np.array([200.0, 850.0, 900.0, 1600.0]),
)


def lanes_of(result, step: int) -> list[tuple[str, float, float]]:
    lanes = result.lanes
    mine = lanes.step == step
    return [
        (OVERLAP_LANES[k], s, e)
        for k, s, e in zip(
            lanes.lane[mine].tolist(), lanes.start[mine].tolist(), lanes.end[mine].tolist(), strict=True
        )
    ]


def test_overlapping_steps_are_each_measured_on_their_own() -> None:
    windows = StepWindows.of([(1, 0.0, 1000.0), (2, 800.0, 1800.0)])
    assert not windows.disjoint
    result = breakdown(windows, OVERLAPPING_WORK)
    # step 1 [0, 1000): computing [200, 500) + [850, 1000) = 450; all-reduce [900, 1000) = 100, all of it
    # under computing; busy 450 -> free 550; the first task starts at 200.
    # step 2 [800, 1800): computing [850, 1250) + [1600, 1700) = 500; all-reduce 500, of which [1250, 1400)
    # = 150 exposed; busy [850, 1400) + [1600, 1700) = 650 -> free 350; first task at 850 -> preparing 50.
    assert result.computing.tolist() == [450.0, 500.0]
    assert result.communication.tolist() == [100.0, 500.0]
    assert result.not_overlapped.tolist() == [0.0, 150.0]
    assert result.overlapped.tolist() == [100.0, 350.0]
    assert result.free.tolist() == [550.0, 350.0]
    assert result.preparing.tolist() == [200.0, 50.0]
    assert result.bubble.tolist() == [0.0, 0.0]
    assert lanes_of(result, 0) == [
        ("Computing", 200.0, 500.0),
        ("Computing", 850.0, 1000.0),
        ("Free", 0.0, 200.0),
        ("Free", 500.0, 850.0),
    ]
    assert lanes_of(result, 1) == [
        ("Computing", 850.0, 1250.0),
        ("Computing", 1600.0, 1700.0),
        ("Communication(Not Overlapped)", 1250.0, 1400.0),
        ("Free", 800.0, 850.0),
        ("Free", 1400.0, 1600.0),
        ("Free", 1700.0, 1800.0),
    ]


def test_overlapping_and_disjoint_paths_agree_step_by_step() -> None:
    """Each step measured alone (a one-window breakdown) gives what the many-window breakdown gives."""
    for bounds in ([(1, 0.0, 1000.0), (2, 800.0, 1800.0)], [(1, 0.0, 900.0), (2, 900.0, 1800.0)]):
        together = breakdown(StepWindows.of(bounds), OVERLAPPING_WORK)
        for k, bound in enumerate(bounds):
            alone = breakdown(StepWindows.of([bound]), OVERLAPPING_WORK)
            for name in ("computing", "communication", "not_overlapped", "free", "preparing"):
                assert getattr(together, name)[k] == getattr(alone, name)[0], (bounds, k, name)


@pytest.mark.parametrize(
    "bounds", [[(1, 0.0, 1000.0), (2, 800.0, 1800.0)], [(1, 0.0, 900.0), (2, 900.0, 1800.0)]]
)
def test_free_lane_pieces_add_up_to_the_free_column(bounds: list) -> None:
    result = breakdown(StepWindows.of(bounds), OVERLAPPING_WORK)
    for k in range(len(bounds)):
        free = sum(e - s for lane, s, e in lanes_of(result, k) if lane == "Free")
        assert free == pytest.approx(result.free[k])


def test_receive_is_the_bubble_and_leaves_the_exposed_rest() -> None:
    # one step [0, 1000): compute [0, 100); a receive [300, 500) and a send [600, 700), both exposed
    work = Work(
        computing=spans((0, 100)),
        communication=spans((300, 500), (600, 700)),
        receive=spans((300, 500)),
        task_starts=np.array([0.0, 300.0, 600.0]),
    )
    result = breakdown(StepWindows.of([(4, 0.0, 1000.0)]), work)
    assert result.bubble.tolist() == [200.0]
    assert result.stage.tolist() == [800.0]
    assert result.not_overlapped.tolist() == [300.0]
    assert result.not_overlapped_exclude_receive.tolist() == [100.0]
    assert result.ascend_rows(3) == [[3, 4, 100.0, 300.0, 0.0, 300.0, 600.0, 800.0, 200.0, 100.0, 0.0]]


def test_windows_index_times_outside_and_inside() -> None:
    windows = StepWindows.of([(5, 10.0, 20.0), (6, 30.0, 40.0)])
    assert windows.index_of(np.array([5.0, 10.0, 19.9, 20.0, 35.0, 40.0])).tolist() == [-1, 0, 0, -1, 1, -1]
    assert windows.labels() == [5, 6, None]
