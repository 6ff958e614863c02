"""Where a thread is: whether its stack runs code of some files (a signal handler looks at what it
interrupted before it starts or stops a profiler)."""

from __future__ import annotations

from typing import Any


def runs_code_of(frame: Any, parts: tuple[str, ...]) -> bool:
    """Whether ``frame`` or a frame under it runs code from a file whose name holds one of ``parts``."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if any(part in filename for part in parts):
            return True
        frame = frame.f_back
    return False
