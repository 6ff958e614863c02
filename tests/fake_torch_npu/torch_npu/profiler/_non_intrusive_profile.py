"""Stand-in for ``torch_npu.profiler._non_intrusive_profile`` (tests only).

As in the real one, ``_NonIntrusiveProfile.init()`` runs when ``torch_npu.profiler`` is imported: when
``PROF_CONFIG_PATH`` is non-empty or ``MSMONITOR_USE_DAEMON`` (older: ``KINETO_USE_DAEMON``) is 1, it
starts the dynamic profiler and registers a global optimizer-step post-hook that steps it once per
training iteration (the most steps any one optimizer has taken), with no change to the script."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from torch.optim.optimizer import register_optimizer_step_post_hook

from .analysis.prof_common_func._constant import print_warn_msg
from .dynamic_profile import init as dp_init
from .dynamic_profile import step as dp_step

__all__: list[str] = []


class _NonIntrusiveProfile:
    _optimizer_step_hook_handle: Any = None
    _optimizer_steps: ClassVar[dict[int, int]] = {}
    _profiler_step = 0

    @staticmethod
    def _on_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        steps = _NonIntrusiveProfile._optimizer_steps
        steps[id(optimizer)] = steps.get(id(optimizer), 0) + 1
        if steps[id(optimizer)] > _NonIntrusiveProfile._profiler_step:
            _NonIntrusiveProfile._profiler_step = steps[id(optimizer)]
            dp_step()

    @staticmethod
    def _register_optimizer_step_hook() -> None:
        if _NonIntrusiveProfile._optimizer_step_hook_handle is not None:
            return
        _NonIntrusiveProfile._optimizer_step_hook_handle = register_optimizer_step_post_hook(
            _NonIntrusiveProfile._on_optimizer_step
        )

    @staticmethod
    def init() -> None:
        prof_config_path = os.getenv("PROF_CONFIG_PATH", "")
        kineto_value = os.getenv("KINETO_USE_DAEMON")
        msmonitor_value = os.getenv("MSMONITOR_USE_DAEMON")
        if kineto_value is not None:
            print_warn_msg(
                "Environment variable 'KINETO_USE_DAEMON' will be deprecated. "
                "Please use 'MSMONITOR_USE_DAEMON' instead."
            )
        try:
            dyno_enable_flag = int(msmonitor_value or kineto_value or 0)
        except ValueError:
            print_warn_msg("Environment variable 'MSMONITOR_USE_DAEMON' value not valid, will be set to 0 !")
            dyno_enable_flag = 0
        if not prof_config_path and dyno_enable_flag != 1:
            return
        if prof_config_path and (os.path.islink(prof_config_path) or os.path.isfile(prof_config_path)):
            print_warn_msg(f"The path '{prof_config_path}' is invalid, and profiler will not be enabled.")
            return
        dp_init(prof_config_path)
        _NonIntrusiveProfile._register_optimizer_step_hook()
