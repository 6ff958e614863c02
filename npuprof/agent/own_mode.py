"""Whether torch_npu's own no-code-change profiling will drive a profiler in this process.

Checked in every process that imports torch, so it imports nothing heavy (not the NPU backend).
"""

from __future__ import annotations

import os


def torch_npu_own_mode_active(
    environ: dict[str, str] | None = None, require_installed: bool = True
) -> str | None:
    """One line when torch_npu's own non-intrusive/dynamic profiling will be on in this process, else None.

    torch_npu's ``_NonIntrusiveProfile.init()`` (run by ``import torch_npu.profiler``) patches the optimizer
    step to drive its dynamic profiler when ``PROF_CONFIG_PATH`` is non-empty or
    ``MSMONITOR_USE_DAEMON`` (older: ``KINETO_USE_DAEMON``) is 1; two profilers must never run together.
    """
    env = os.environ if environ is None else environ
    config_path = env.get("PROF_CONFIG_PATH", "")
    daemon_var = next((n for n in ("MSMONITOR_USE_DAEMON", "KINETO_USE_DAEMON") if env.get(n)), None)
    daemon = False
    if daemon_var is not None:
        try:
            daemon = int(env[daemon_var]) == 1
        except ValueError:
            daemon = False
    if not config_path and not daemon:
        return None
    if require_installed:
        import importlib.util

        if importlib.util.find_spec("torch_npu") is None:
            return None
    if config_path:
        return (
            f"torch_npu's own dynamic profiling is on (PROF_CONFIG_PATH={config_path}); it steps its "
            "profiler on every optimizer step, so npuprof does not profile this process"
        )
    return (
        f"torch_npu's own profiling daemon mode is on ({daemon_var}=1); it steps its profiler on every "
        "optimizer step, so npuprof does not profile this process"
    )
