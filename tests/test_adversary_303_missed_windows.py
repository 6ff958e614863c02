"""agent/controller.py: iterations an optimizer's take-over left uncounted (steps_missed) that hold a whole
capture window and end where the next window begins (--wait 0, or a wait step among them): that window is
lost and said so in the log; the next capture, which records all of its own steps, says nothing of it.

Driven in-process through the rig of test_controller_units (torch's own profiler and schedule); the windows
expected come from torch's schedule alone."""

from __future__ import annotations

import warnings

import pytest
import torch.profiler as tp
from test_controller_units import Rig, TorchPlan

SAVE = tp.ProfilerAction.RECORD_AND_SAVE


def _torch_windows(schedule: dict[str, int], horizon: int = 30) -> list[list[int]]:
    """Each window of torch's schedule: its busy steps up to and including its RECORD_AND_SAVE step."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = tp.schedule(**schedule)
    windows: list[list[int]] = []
    current: list[int] = []
    for step in range(horizon):
        action = fn(step)
        if action is not tp.ProfilerAction.NONE:
            current.append(step)
        if action is SAVE:
            windows.append(current)
            current = []
    return windows


@pytest.mark.parametrize(
    ("schedule", "in_flight"),
    [
        # windows 1-2, 3-4, 5-6 back to back (the profiler kept open); the take-over in step 2, the last of
        # the first capture: iterations 3 and 4 (the second window, whole) pass inside it
        (dict(skip_first=1, wait=0, warmup=0, active=2, repeat=3), 2),
        # windows 2, 4, 6 with a wait step between (the profiler closed); the take-over in wait step 3:
        # iterations 4 (a window, whole) and 5 (a wait step) pass uncounted
        (dict(skip_first=1, wait=1, warmup=0, active=1, repeat=3), 3),
    ],
)
def test_a_window_that_passed_whole_is_logged_not_put_on_the_next_capture(
    schedule: dict[str, int], in_flight: int
) -> None:
    windows = _torch_windows(schedule)
    lost = next(w for w in windows if w[0] == in_flight + 1)
    after = windows[windows.index(lost) + 1]
    rig = Rig(TorchPlan(**schedule))
    rig.run(in_flight)  # steps 0..in_flight-1 done, step in_flight under way
    rig.c.steps_missed(2, "B")  # two more iterations ran inside it
    rig.run(after[-1] + 2 - rig.c.step)  # past the boundary that saves the capture after the lost window

    span = f"step {lost[0]}" if len(lost) == 1 else f"steps {lost[0]}-{lost[-1]}"
    assert (
        "warning",
        f"capture window not recorded: {span} of its window passed uncounted (B)",
    ) in rig.log.lines
    begun = [e[1] for e in rig.sink.events if e[0] == "begin"]
    assert lost[0] not in begun and after[0] in begun
    (finish,) = [e for e in rig.sink.events if e[0] == "finish" and e[1] == after[-1]]
    assert finish[2] == ""  # recorded whole: its record names no step of another window


def test_the_rest_of_a_window_cut_by_the_take_over_is_still_said_by_its_capture() -> None:
    """The window goes on after the iterations missed: its capture says which of its steps passed."""
    schedule = dict(skip_first=1, wait=0, warmup=0, active=3, repeat=2)  # windows 1-3, 4-6
    windows = _torch_windows(schedule)
    rig = Rig(TorchPlan(**schedule))
    rig.run(3)  # step 3, the last of the first capture, under way
    rig.c.steps_missed(2, "B")  # iterations 4 and 5 of the second window pass inside it
    rig.run(4)
    second = windows[1]
    (finish,) = [e for e in rig.sink.events if e[0] == "finish" and e[1] == second[-1]]
    said = f"steps {second[0]}-{second[1]} of its window passed uncounted (B): recorded from step {second[2]}"
    assert finish[2] == said
    assert not any(line[0] == "warning" for line in rig.log.lines)
