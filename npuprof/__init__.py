"""npuprof: profile PyTorch training without editing the training script.

``npuprof.mark``, ``npuprof.range_start`` / ``range_end`` and ``npuprof.range`` (npuprof/marks.py) are
loaded at their first use: this module is on the launcher's start-up path and imports nothing."""

from __future__ import annotations

__version__ = "0.1.0"

# The one environment variable that carries the whole configuration to child processes.
ENV_CONFIG = "NPUPROF_CONFIG"
# `npuprof run`'s pid, and the pid of the job's first process (its direct child) as that process's bootstrap
# found it (npuprof/_bootstrap/sitecustomize.py spells both: it imports nothing)
ENV_LAUNCHER_PID = "NPUPROF_LAUNCHER_PID"
ENV_JOB_PID = "NPUPROF_JOB_PID"

_MARKS_API = ("mark", "range", "range_end", "range_start")


def __getattr__(name: str) -> object:
    if name in _MARKS_API:
        from npuprof import marks

        value = getattr(marks, name)
        globals()[name] = value  # later lookups are plain module attributes
        return value
    raise AttributeError(f"module 'npuprof' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_MARKS_API])
