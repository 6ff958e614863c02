"""Where a thread is: whether its stack runs code of some files (a signal handler looks at what it
interrupted before it starts or stops a profiler)."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

# Code in which a profiler must not start or stop: an import in progress (the agent wakes inside
# `import torch`; torch imports lazily during the first steps: starting the profiler there is a circular
# import), and the code of torch's profilers themselves.
IMPORTING = ("<frozen importlib", "importlib/")
PROFILER_UNSAFE = (*IMPORTING, "torch/profiler/", "torch/autograd/profiler")
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


def another_thread_imports() -> bool:
    """Whether a thread other than this one is inside an import. A profiler started now imports torch
    modules itself (torch._inductor): beside another thread's half-done import of torch._dynamo (an
    optimizer being made) that is a circular import, or a deadlock, in that thread."""
    me = threading.get_ident()
    return any(
        runs_code_of(frame, IMPORTING) for ident, frame in sys._current_frames().items() if ident != me
    )
