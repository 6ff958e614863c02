"""helper-336: steps taken in a signal handler of the script (a timer that drives training)."""

from __future__ import annotations

from pathlib import Path

from conftest import capture_record, profiler_steps, rank_dirs, run_script

# Each SIGALRM of a 1 ms timer steps the optimizer, between the main loop's bytecodes (the gradients are
# set, not computed: a step anywhere in the loop is a valid one). npuprof's decision at a boundary (the
# profiler's start, its imports, the export) takes longer than 1 ms: further steps come inside it
TIMER_DRIVEN = """
import signal
import time

import torch

model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
steps = [0]


def on_alarm(signum, frame):
    optimizer.step()
    steps[0] += 1


signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
deadline = time.monotonic() + 120
while steps[0] < 60 and time.monotonic() < deadline:
    for p in model.parameters():
        p.grad = torch.ones_like(p)
signal.setitimer(signal.ITIMER_REAL, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
print("stepped", steps[0] >= 60)
"""


def test_steps_of_a_signal_handler_inside_a_decision_do_not_reenter_it(tmp_path: Path) -> None:
    """The job ran; under npuprof "profiling stopped after an internal error at step 6 (ImportError(\\"cannot
    import name 'TorchBackend' from partially initialized module ...\\"))", no capture: a step the handler
    took inside npuprof's decision (the re-entrant lock let it in) began a decision of its own, half way
    through the first one's imports. Such a step takes no decision and is part of the step in flight, and
    the capture's steps are the schedule's."""
    result, out = run_script(tmp_path, TIMER_DRIVEN, "--no-analyse")
    assert (result.returncode, result.stdout) == (0, "stepped True\n"), result.stderr[-3000:]
    assert "internal error" not in result.stderr, result.stderr[-3000:]
    (rank_dir,) = rank_dirs(out)
    assert capture_record(rank_dir)["status"] == "complete"
    assert profiler_steps(rank_dir) == [6, 7, 8]
