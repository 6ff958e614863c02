"""Plain-Python jobs that stand in for torch ones where no capture is recorded.

`--step-on __main__:train_step` wakes npuprof's agent at the script's `def train_step` and counts a step at
each of its returns (docs/architecture.md, "Step boundaries"): the agent logs, selects ranks and counts as
it does for optimizer steps, and needs torch only once a capture begins (its backend). A job that ends
before the schedule's first capture therefore runs the agent's path up to there without `import torch`,
at a tenth of a torch job's CPU time.
"""

from __future__ import annotations

import sys
from pathlib import Path

STEP_ON = ("--step-on", "__main__:train_step")


def stepping_script(directory: Path, name: str = "steps.py") -> Path:
    """A script that calls ``train_step`` ``argv[1]`` times (3 when not given) and exits 0."""
    script = directory / name
    script.write_text(
        "import sys\n"
        "def train_step(i):\n"
        "    return i * 2\n"
        "for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):\n"
        "    train_step(i)\n"
    )
    return script


def stepping_job(directory: Path, steps: int, name: str = "steps.py") -> list[str]:
    """``--step-on`` and the command of a job of ``steps`` steps, to follow ``npuprof run -o OUT``'s
    flags (the ``--`` included)."""
    return [*STEP_ON, "--", sys.executable, str(stepping_script(directory, name)), str(steps)]


def standin_torch(directory: Path) -> Path:
    """A stand-in ``torch`` package of empty modules (``torch.optim``, ``torch.optim.optimizer``) under
    ``directory``: the folder to put on the job's PYTHONPATH. Importing ``torch.optim.optimizer`` meets
    npuprof's default trigger (docs/architecture.md, "Process model") without torch; an agent that wakes
    there and reads its payload fails or steps aside as it would with torch."""
    package = directory / "standin" / "torch"
    (package / "optim").mkdir(parents=True, exist_ok=True)
    for module in ("__init__.py", "optim/__init__.py", "optim/optimizer.py"):
        (package / module).write_text("")
    return package.parent


def importing_torch_optim(directory: Path) -> tuple[list[str], dict[str, str]]:
    """A job that imports ``torch.optim.optimizer`` from standin_torch's package: its command and the
    PYTHONPATH that finds the stand-in (the job checks that it imported the stand-in)."""
    folder = standin_torch(directory)
    script = directory / "imports_torch_optim.py"
    script.write_text(
        "import sys\n"
        "import torch.optim.optimizer\n"
        "assert torch.optim.optimizer.__file__.startswith(sys.argv[1])\n"
    )
    return [sys.executable, str(script), str(folder)], {"PYTHONPATH": str(folder)}


# Pieces of the plain-Python scripts that drive npuprof's CaptureController with a profiler of the test's
# (tests/test_sigterm_*.py): a log that prints each call's level and words on stderr, a backend that makes the
# script's ``Profiler``, and a sink that writes the capture's last step and detail into the script's ``out``
# when the capture is finished.
CONTROLLER_LOG = """\
class Log:
    def __getattr__(self, name):
        return lambda *args: print(name, *args, file=sys.stderr, flush=True) or True
"""

CONTROLLER_BACKEND = """\
class Backend:
    name, device, writes_own_layout = "test", "cpu", False
    def ignored_flags(self, cfg):
        return []
    def create_profiler(self, cfg, schedule, on_trace_ready):
        return Profiler(on_trace_ready)
    def align(self, prof, step):
        pass
"""

CONTROLLER_SINK = """\
class Sink:
    rank_dir = out
    def begin(self, step, cfg):
        pass
    def finish(self, prof, last, detail="", status="complete", last_partial=False, ending_since=None):
        with open(out, "w") as f:
            f.write(f"{last} {detail}")
    def abandon(self, detail):
        pass
    def skipped(self, *args):
        pass
"""


def with_controller_pieces(script: str) -> str:
    """``script`` with each of its lines ``# (CONTROLLER_LOG)``, ``# (CONTROLLER_BACKEND)`` and
    ``# (CONTROLLER_SINK)`` made that piece."""
    for name, piece in (("LOG", CONTROLLER_LOG), ("BACKEND", CONTROLLER_BACKEND), ("SINK", CONTROLLER_SINK)):
        script = script.replace(f"# (CONTROLLER_{name})\n", piece)
    return script
