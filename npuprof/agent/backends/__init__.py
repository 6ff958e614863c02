"""Pick the backend for this process: torch_npu on an NPU, else torch.profiler on CUDA or CPU."""

from __future__ import annotations

import importlib.util
import sys

from npuprof.agent.backends.base import Backend
from npuprof.agent.log import AgentLog


def backend_choice() -> tuple[str, list[str]]:
    """The backend this process gets ("torch_npu", "torch-cuda" or "torch-cpu") and, for each one passed
    over, why (the one rule: the agent and `npuprof info` both ask here)."""
    passed_over: list[str] = []
    if importlib.util.find_spec("torch_npu") is not None:
        try:
            from npuprof.agent.backends.npu_backend import npu_available, unavailable_reason

            if npu_available():
                return "torch_npu", passed_over
            passed_over.append(f"torch_npu: {unavailable_reason()}")
        except Exception as exc:  # a broken torch_npu must not stop CPU/CUDA profiling
            passed_over.append(f"torch_npu: could not be used ({exc!r})")
    import torch

    try:
        if torch.cuda.is_available():
            return "torch-cuda", passed_over
        why = "torch.cuda.is_available() is False"
    except Exception as exc:
        why = f"torch.cuda.is_available() failed: {exc!r}"
    built = getattr(torch.version, "cuda", None)
    passed_over.append(f"CUDA: {why}" + (f" (torch built with CUDA {built})" if built else " (a CPU build)"))
    return "torch-cpu", passed_over


def chosen_only_by_importing_torch() -> bool:
    """Whether this process's backend is one of torch.profiler's, which write npuprof's layout, and choosing
    it would import torch, not loaded yet (a --step-on job's). With torch_npu installed the choice is no
    longer known without torch: its backend writes its own layout."""
    return "torch" not in sys.modules and importlib.util.find_spec("torch_npu") is None


def select_backend(log: AgentLog) -> Backend:
    name, passed_over = backend_choice()
    for reason in passed_over:
        if reason.startswith("torch_npu:"):
            log.info(f"{reason}; using torch.profiler")
    if name == "torch_npu":
        from npuprof.agent.backends.npu_backend import NpuBackend

        return NpuBackend()
    from npuprof.agent.backends.torch_backend import TorchBackend

    return TorchBackend(use_cuda=name == "torch-cuda")
