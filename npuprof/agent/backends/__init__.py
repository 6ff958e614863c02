"""Pick the backend for this process: torch_npu on an NPU, else torch.profiler on CUDA or CPU."""

from __future__ import annotations

from npuprof.agent.backends.base import Backend
from npuprof.agent.log import AgentLog


def select_backend(log: AgentLog) -> Backend:
    import importlib.util

    if importlib.util.find_spec("torch_npu") is not None:
        try:
            from npuprof.agent.backends.npu_backend import NpuBackend, npu_available, unavailable_reason

            if npu_available():
                return NpuBackend()
            log.info(
                f"torch_npu is installed but not usable here ({unavailable_reason()}); using torch.profiler"
            )
        except Exception as exc:  # a broken torch_npu must not stop CPU/CUDA profiling
            log.warning(f"torch_npu could not be used ({exc!r}); using torch.profiler")
    import torch

    from npuprof.agent.backends.torch_backend import TorchBackend

    return TorchBackend(use_cuda=torch.cuda.is_available())
