"""helper-336: steps taken in an atexit handler that runs after npuprof's own exit hook."""

from __future__ import annotations

from pathlib import Path

from conftest import rank_dirs, run_script

# The script's atexit handler, registered before torch is imported, runs after npuprof's (atexit calls the
# last registered first): its 4 steps take the job from step 4 into the default window (steps 5-8)
STEPS_IN_AN_EXIT_HANDLER = """
import atexit


def more_steps():
    for _ in range(4):
        step()
    print("4 more in atexit", flush=True)


atexit.register(more_steps)

import torch

model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def step():
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()


for _ in range(4):
    step()
print("4 in main", flush=True)
"""


def test_a_window_after_npuprofs_exit_hook_is_skipped_not_a_crash(tmp_path: Path) -> None:
    """The job ran bare; under npuprof it died of SIGSEGV (exit 139) and its capture was "incomplete":
    the window opened in the script's atexit handler, after npuprof's exit hook had finalised what there
    was, so nothing stopped torch's profiler before the interpreter's end. Nothing opens after that hook
    (as its docstring said): the window is skipped with one line, and the job ends as it would."""
    result, out = run_script(tmp_path, STEPS_IN_AN_EXIT_HANDLER)
    assert (result.returncode, result.stdout) == (0, "4 in main\n4 more in atexit\n"), result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines() if "the process is exiting" in line]
    assert said and said[0].startswith("npuprof: capture at step 5 skipped: "), result.stderr[-3000:]
    assert rank_dirs(out) == []
