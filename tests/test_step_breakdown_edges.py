"""The step breakdown's edges, by hand: "Preparing" at every boundary, a rank without device tasks, the
3-decimal rounding of step_trace_time.csv and the summary, a trace without steps, the global order of the
Overlap Analysis lanes, exposed communication, an idle rank, and step lookup with no steps or no times
(docs/formats.md, "Step breakdown")."""

from __future__ import annotations

import numpy as np

from npuprof.analysis import intervals
from npuprof.analysis.step_breakdown import OVERLAP_LANES, StepBreakdown, StepWindows, Work, breakdown


def spans(*pairs: tuple[float, float]) -> intervals.Spans:
    return intervals.union(np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float))


def lanes_listed(result: StepBreakdown) -> list[tuple[int, str, float, float]]:
    lanes = result.lanes
    return [
        (step, OVERLAP_LANES[lane], s, e)
        for step, lane, s, e in zip(
            lanes.step.tolist(), lanes.lane.tolist(), lanes.start.tolist(), lanes.end.tolist(), strict=True
        )
    ]


def test_preparing_at_every_boundary() -> None:
    """Preparing = from a step's start to its first task, 0 when no task starts inside the step."""
    # steps 1-5: [0, 100), [100, 200), ..., [400, 500)
    windows = StepWindows.of([(n, 100.0 * (n - 1), 100.0 * n) for n in range(1, 6)])
    work = Work(
        computing=spans((10, 20), (200, 210), (350, 360)),
        communication=intervals.EMPTY,
        receive=intervals.EMPTY,
        task_starts=np.array([10.0, 200.0, 350.0]),
    )
    result = breakdown(windows, work)
    # step 1: first task at 10 -> 10; step 2 [100, 200): the task at 200 is the next step's -> 0;
    # step 3: its first task at its very start -> 0; step 4: the last task, at 350 -> 50;
    # step 5: after every task -> 0
    assert result.preparing.tolist() == [10.0, 0.0, 0.0, 50.0, 0.0]
    assert result.computing.tolist() == [10.0, 0.0, 10.0, 10.0, 0.0]
    assert result.free.tolist() == [90.0, 100.0, 90.0, 90.0, 100.0]


def test_a_rank_without_device_tasks_prepares_nothing() -> None:
    work = Work(
        computing=spans((10, 20)),
        communication=intervals.EMPTY,
        receive=intervals.EMPTY,
        task_starts=np.zeros(0),
    )
    result = breakdown(StepWindows.of([(1, 0.0, 100.0), (2, 100.0, 200.0)]), work)
    assert result.preparing.tolist() == [0.0, 0.0]
    assert result.summary_steps()[1]["preparing_us"] == 0.0


def test_step_trace_time_and_summary_round_to_three_decimals() -> None:
    # one step [0, 1000.0004) computing [0, 0.1236): free 999.8768, all rounded to 3 decimals
    work = Work(
        computing=spans((0.0, 0.1236)),
        communication=intervals.EMPTY,
        receive=intervals.EMPTY,
        task_starts=np.zeros(1),
    )
    result = breakdown(StepWindows.of([(7, 0.0, 1000.0004)]), work)
    # Device_id, Step, Computing, Not Overlapped, Overlapped, Communication, Free, Stage, Bubble,
    # Not Overlapped and Exclude Receive, Preparing
    assert result.ascend_rows(2) == [[2, 7, 0.124, 0.0, 0.0, 0.0, 999.877, 1000.0, 0.0, 0.0, 0.0]]
    assert result.summary_steps() == [
        {
            "step": 7,
            "start_us": 0.0,
            "duration_us": 1000.0,
            "computing_us": 0.124,
            "communication_us": 0.0,
            "comm_not_overlapped_us": 0.0,
            "overlapped_us": 0.0,
            "free_us": 999.877,
            "bubble_us": 0.0,
            "preparing_us": 0.0,
        }
    ]


def test_a_trace_without_steps_is_one_unnumbered_step() -> None:
    work = Work(
        computing=spans((2, 5)),
        communication=intervals.EMPTY,
        receive=intervals.EMPTY,
        task_starts=np.array([2.0]),
    )
    result = breakdown(StepWindows.of([(None, 0.0, 10.0)]), work)
    assert result.ascend_rows(0) == [[0, "", 3.0, 0.0, 0.0, 0.0, 7.0, 10.0, 0.0, 0.0, 2.0]]
    assert result.summary_steps()[0]["step"] is None


def test_lanes_are_ordered_by_step_then_lane_then_time() -> None:
    """Two overlapping steps [0, 1000) and [800, 1800); kernels [200, 500), [850, 1250), [1600, 1700), an
    all-reduce [900, 1400) (the lanes of each step by hand in tests/test_step_breakdown.py): every lane of
    step 1 comes before any of step 2, whatever the lanes."""
    work = Work(
        computing=spans((200, 500), (850, 1250), (1600, 1700)),
        communication=spans((900, 1400)),
        receive=intervals.EMPTY,
        task_starts=np.array([200.0, 850.0, 900.0, 1600.0]),
    )
    result = breakdown(StepWindows.of([(1, 0.0, 1000.0), (2, 800.0, 1800.0)]), work)
    assert lanes_listed(result) == [
        (0, "Computing", 200.0, 500.0),
        (0, "Computing", 850.0, 1000.0),
        (0, "Free", 0.0, 200.0),
        (0, "Free", 500.0, 850.0),
        (1, "Computing", 850.0, 1250.0),
        (1, "Computing", 1600.0, 1700.0),
        (1, "Communication(Not Overlapped)", 1250.0, 1400.0),
        (1, "Free", 800.0, 850.0),
        (1, "Free", 1400.0, 1600.0),
        (1, "Free", 1700.0, 1800.0),
    ]


def test_step_lookup_with_no_steps_or_no_times() -> None:
    assert StepWindows.of([]).index_of(np.array([5.0, 7.0])).tolist() == [-1, -1]
    assert StepWindows.of([(1, 0.0, 10.0)]).index_of(np.zeros(0)).tolist() == []


def test_communication_without_computing_is_all_exposed() -> None:
    # one step [0, 100); an all-reduce [20, 50) and no kernel
    work = Work(
        computing=intervals.EMPTY,
        communication=spans((20, 50)),
        receive=intervals.EMPTY,
        task_starts=np.array([20.0]),
    )
    result = breakdown(StepWindows.of([(1, 0.0, 100.0)]), work)
    assert [result.computing[0], result.communication[0], result.not_overlapped[0], result.free[0]] == [
        0.0,
        30.0,
        30.0,
        70.0,
    ]
    assert lanes_listed(result) == [
        (0, "Communication(Not Overlapped)", 20.0, 50.0),
        (0, "Free", 0.0, 20.0),
        (0, "Free", 50.0, 100.0),
    ]


def test_an_idle_rank_and_a_zero_length_step() -> None:
    idle = Work(intervals.EMPTY, intervals.EMPTY, intervals.EMPTY, np.zeros(0))
    result = breakdown(StepWindows.of([(1, 0.0, 100.0), (2, 100.0, 100.0)]), idle)
    assert result.free.tolist() == [100.0, 0.0]
    assert lanes_listed(result) == [(0, "Free", 0.0, 100.0)]  # no piece for the zero-length step
