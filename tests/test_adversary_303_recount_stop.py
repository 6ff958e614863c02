"""agent/controller.py: at the boundary where a capture ends with iterations counted late (an optimizer took
over while it recorded), the controller stops torch's profiler itself (_recount_after_capture). When that
stop raises, the capture is marked incomplete before the next one begins: its record said "capturing" for
as long as the job ran on, as if it still recorded. Driven in-process (test_controller_units' rig: torch's own
profiler and schedule)."""

from __future__ import annotations

from test_controller_units import Rig, TorchPlan


def test_a_capture_whose_stop_fails_at_the_recount_is_marked_incomplete() -> None:
    rig = Rig(TorchPlan(skip_first=1, wait=0, warmup=0, active=2, repeat=3))  # windows 1-2, 3-4, 5-6
    rig.run(2)  # step 2, the last of the first capture, under way
    rig.c.steps_missed(2, "B")  # two iterations more ran inside it
    rig.c.prof.fail_stop = True  # torch's stop raises (RecordingProfile)
    rig.run(1)  # the boundary that ends the capture: its profiler stopped there
    assert rig.sink.events[0] == ("begin", 1)
    assert rig.sink.events[1] == ("abandon", "finalising failed: RuntimeError('stop failed')")
    assert ("warning", "profiler stop failed: RuntimeError('stop failed')") in rig.log.lines
    # training goes on and the next window is recorded where the job's iterations put it
    rig.run(2)
    assert rig.sink.events[2] == ("begin", 5)
    assert rig.sink.events[3][:4] == ("finish", 6, "", "complete")
    assert rig.c.step == 7
