"""helper-336: steps whose boundary comes inside a backward pass (the optimizer-in-backward recipe)."""

from __future__ import annotations

from pathlib import Path

from conftest import profiler_steps, rank_dirs, run_script

# PyTorch's optimizer-in-backward recipe: one optimizer a parameter, each stepped by the parameter's
# post-accumulate-grad hook, inside loss.backward(); the job steps 12 times and says so
STEP_IN_BACKWARD = """
import torch
from torch import nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
optimizers = {p: torch.optim.SGD([p], lr=0.01) for p in model.parameters()}


def step_in_backward(p):
    optimizers[p].step()
    optimizers[p].zero_grad()


for p in model.parameters():
    p.register_post_accumulate_grad_hook(step_in_backward)
for _ in range(12):
    model(torch.randn(16, 32)).sum().backward()
print("trained 12")
"""


def test_a_window_whose_boundary_is_inside_backward_is_skipped_not_a_crash(tmp_path: Path) -> None:
    """The job ran bare; under npuprof it died of SIGSEGV (exit 139): the capture's profiler was started at
    the step boundary, inside backward, where torch's start runs in the autograd engine's copy of the
    thread's state ("Leaked callback handle", then the crash at the trace's export; a bare torch.profiler
    whose step() is called there crashes the same way). The window is skipped, one line says why and that
    --step-on captures such a job, and the job ends as it would."""
    result, out = run_script(tmp_path, STEP_IN_BACKWARD)
    assert (result.returncode, result.stdout) == (0, "trained 12\n"), result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines() if "inside a backward pass" in line]
    assert said and said[0].startswith("npuprof: capture at step 5 skipped: "), result.stderr[-3000:]
    assert "--step-on __main__:train_step" in said[0]
    assert "no capture was written (exit code 0)" in result.stderr
    assert "Leaked callback handle" not in result.stderr
    assert rank_dirs(out) == []


def test_a_window_that_would_restart_the_profiler_inside_backward_is_skipped(tmp_path: Path) -> None:
    """A profiler started outside backward (at the first optimizer's making, --skip-first 0) and kept for
    the next window (--wait 0) was restarted by torch's step() at the boundary inside backward: "Leaked
    callback handle" (the state the crash above comes from). The capture in flight is saved by a stop there
    and the next window is skipped, as above."""
    flags = ["--skip-first", "0", "--warmup", "0", "--active", "2", "--wait", "0", "--repeat", "3"]
    result, out = run_script(tmp_path, STEP_IN_BACKWARD, *flags, "--no-analyse")
    assert (result.returncode, result.stdout) == (0, "trained 12\n"), result.stderr[-3000:]
    assert "Leaked callback handle" not in result.stderr, result.stderr[-3000:]
    (rank_dir,) = rank_dirs(out)
    assert profiler_steps(rank_dir) == [0, 1]
    assert "capture at step 2 skipped: its step boundary came inside a backward pass" in result.stderr
