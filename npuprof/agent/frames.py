"""Where a thread is: whether its stack runs code of some files (a signal handler looks at what it
interrupted before it starts or stops a profiler)."""

from __future__ import annotations

import os
from typing import Any

# Code in which a profiler must not start or stop: an import in progress (the agent wakes inside
# `import torch`; torch imports lazily during the first steps: starting the profiler there is a circular
# import), and the code of torch's profilers themselves.
PROFILER_UNSAFE = ("<frozen importlib", "importlib/", "torch/profiler/", "torch/autograd/profiler")
# ... and, for a stop that a signal handler would make, npuprof's own capture code it may have interrupted
CAPTURE_CODE = tuple(
    os.path.join("npuprof", "agent", part) for part in ("capture", "backends", "controller.py")
)


def runs_code_of(frame: Any, parts: tuple[str, ...]) -> bool:
    """Whether ``frame`` or a frame under it runs code from a file whose name holds one of ``parts``."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if any(part in filename for part in parts):
            return True
        frame = frame.f_back
    return False
