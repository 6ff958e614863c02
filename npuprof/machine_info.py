"""What `npuprof info` reports: the backend npuprof would use in this environment and why, the versions,
and what the profiler here supports (torch_npu's ``supported_*()`` answers, or what npuprof offers on
torch.profiler). Everything is asked, nothing assumed; a probe that fails says so in its answer.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

import npuprof
from npuprof.config import AIC_METRICS, EXPORT_TYPES, LEVELS

# Where a CANN install says its version (the toolkit's own files), first found wins.
_CANN_HOMES = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_AICPU_PATH")
_CANN_VERSION_FILES = (
    "version.cfg",
    "ascend_toolkit_install.info",
    "compiler/version.info",
    "runtime/version.info",
)


def gather() -> dict[str, Any]:
    info: dict[str, Any] = {
        "npuprof": npuprof.__version__,
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "torch": None,
        "torch_npu": None,
        "cann": _cann_version(),
        "matplotlib": _version_of("matplotlib"),
    }
    torch = _import("torch")
    if isinstance(torch, str):
        info["backend"] = {"name": None, "why": f"torch cannot be imported ({torch}); npuprof needs it"}
        info["supported"] = {}
        return info
    info["torch"] = torch.__version__
    info["torch_npu"] = _version_of("torch_npu")
    info["backend"] = _backend(torch)
    info["supported"] = _supported(info["backend"]["name"], torch)
    return info


def _backend(torch: Any) -> dict[str, Any]:
    """Which backend the agent would pick here, and why (agent/backends: backend_choice, the one rule)."""
    from npuprof.agent.backends import backend_choice

    name, passed_over = backend_choice()
    if name == "torch_npu":
        why = "torch_npu imports and sees an NPU"
    elif name == "torch-cuda":
        why = f"CUDA is available ({torch.cuda.get_device_name(0)})"
    else:
        why = "no usable accelerator: the CPU is profiled"
    return {"name": name, "why": why, "passed_over": passed_over}


def _supported(backend: str | None, torch: Any) -> dict[str, Any]:
    if backend == "torch_npu":
        import torch_npu.profiler as tp

        return {
            name: _ask(tp, name)
            for name in (
                "supported_activities",
                "supported_profiler_level",
                "supported_ai_core_metrics",
                "supported_export_type",
            )
        }
    activities = _ask(torch.profiler, "supported_activities")
    return {
        "supported_activities": activities,
        "supported_profiler_level": f"not on torch.profiler (--level {'/'.join(LEVELS)} is ignored)",
        "supported_ai_core_metrics": f"not on torch.profiler ({len(AIC_METRICS)} names, reported as ignored)",
        "supported_export_type": f"{', '.join(EXPORT_TYPES[:-1])} or {EXPORT_TYPES[-1]} (npuprof's parser "
        "writes the db files besides its text tables)",
    }


def _ask(module: Any, name: str) -> Any:
    function = getattr(module, name, None)
    if function is None:
        return f"this release has no {name}()"
    try:
        answer = function()
    except Exception as exc:
        return f"{name}() failed: {exc!r}"
    if isinstance(answer, (set, frozenset, list, tuple)):
        return sorted(str(getattr(a, "name", a)) for a in answer)
    return str(answer)


def _import(name: str) -> Any:
    try:
        return __import__(name)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _version_of(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cann_version() -> str | None:
    for variable in _CANN_HOMES:
        home = os.environ.get(variable)
        if not home:
            continue
        for relative in _CANN_VERSION_FILES:
            path = Path(home) / relative
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                key, sep, value = line.partition("=")
                if sep and "version" in key.lower() and value.strip():
                    return f"{value.strip()} ({path})"
        return f"installed at {home} (version file not found)"
    return None
