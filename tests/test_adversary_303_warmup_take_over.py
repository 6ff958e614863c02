"""agent/controller.py: an optimizer takes over counting while a capture's warm-up runs (steps_missed: the
iterations it missed are held while a profiler of ours runs). Nothing is recorded in a warm-up, so the
capture must still begin at the script's own iteration: it began at the profiler's count, two below, and
recorded iterations its record did not name (a window's record steps 5-6 held the script's 7-8).

In-process, through test_controller_units' rig (torch's own profiler and schedule); the script's iteration
is counted by the test itself."""

from __future__ import annotations

import pytest
from test_controller_units import TURNS, Rig, TorchPlan, _run_turns


@pytest.mark.parametrize(
    "schedule",
    [
        dict(skip_first=2, wait=1, warmup=2, active=2, repeat=3),  # the take-over in the first warm-up
        dict(skip_first=2, wait=2, warmup=2, active=2, repeat=0),  # in the first warm-up and a later one
    ],
)
def test_captures_begin_at_the_scripts_iteration_after_a_take_over_in_a_warm_up(
    schedule: dict[str, int],
) -> None:
    rig = Rig(TorchPlan(**schedule))
    begun = _run_turns(rig)  # (the script's iteration, the capture's first step, torch's ProfilerStep#)
    assert begun, "a capture began"
    assert [(first, step) for first, step, _ in begun] == [(first, first) for first, _, _ in begun]
    assert [numbered for _, _, numbered in begun] == [first for first, _, _ in begun]
    assert rig.c.step == len(TURNS)


def test_a_window_that_goes_on_after_the_iterations_missed_in_its_warm_up_says_so() -> None:
    rig = Rig(TorchPlan(skip_first=2, wait=0, warmup=2, active=3, repeat=1))  # warm-up 2-3, records 4-6
    rig.run(2)  # step 2, the first of the warm-up, under way
    rig.c.steps_missed(2, "B")  # the script's iterations 3 and 4 pass inside it
    for _ in range(5):  # the boundaries that begin the script's iterations 5 to 9
        rig.c.on_boundary()
    begins = [e for e in rig.sink.events if e[0] == "begin"]
    finishes = [e for e in rig.sink.events if e[0] == "finish"]
    assert begins == [("begin", 5)]  # the iteration the first boundary after the take-over begins
    assert len(finishes) == 1
    assert finishes[0][1] == 6
    assert finishes[0][2] == "steps 3-4 of its window passed uncounted (B): recorded from step 5"
    # the warm-up's profiler goes on (a warm-up stopped is "Incorrect schedule" to torch_npu, on the job's
    # output), renumbered: ProfilerStep#5 is the capture's first step
    assert len(rig.backend.created) == 1
    assert finishes[0][4] == 7  # torch's count in the step() that saved it, at the boundary into step 7
