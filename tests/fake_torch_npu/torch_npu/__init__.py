"""A STAND-IN FOR TESTS ONLY -- not Huawei's torch_npu, and no NPU support of any kind.

npuprof's tests put ``tests/fake_torch_npu`` first on ``PYTHONPATH`` so that ``import torch_npu`` finds
this package. It mirrors the module paths, names and signatures of the real torch_npu profiler API
(Ascend/pytorch: ``torch_npu/profiler/{__init__,profiler,profiler_interface,experimental_config,
scheduler,_profiler_path_creator,_profiler_action_controller}.py``) and its step/schedule semantics, and
records on the CPU with torch's Kineto profiler underneath. Its ``FRAMEWORK/`` and ``PROF_*`` directories
hold placeholder data, not torch_npu's binary formats.

Environment knobs (tests only):
- ``FAKE_TORCH_NPU_LOG``: a JSON-lines file that receives every call and its arguments.
- ``FAKE_TORCH_NPU_API``: which released signature of ``_ExperimentalConfig`` /
  ``tensorboard_trace_handler`` to mimic: ``latest`` (default; with host_sys, mstx domains, sys_io),
  ``6.0.0`` (the documented one: export_type .. gc_detect_threshold, no host_sys), ``5.0.0`` (CANN 7.0
  era: level, aic_metrics, l2_cache, data_simplification, record_op_args; no Level_none, no ExportType,
  no analyse_flag),
  ``mstx`` (``msprof_tx`` renamed ``mstx``).
- ``FAKE_TORCH_NPU_IMPORT_ERROR``: when set, ``import torch_npu`` raises ImportError with that text (as the
  real wheel does without CANN: ``libhccl.so: cannot open shared object file``).
- ``FAKE_TORCH_NPU_AVAILABLE=0``: ``torch.npu.is_available()`` returns False.

As in the real package (since August 2024; not the 5.0.0 API), the profiler's public functions and methods
(``tensorboard_trace_handler``, ``profile.start/stop/step``, the exports, ``supported_activities``, ...) are
under ``@no_exception_func``: an error is printed as ``[ERROR] ... Call <name> failed. Exception: ...`` and
they return None (``set()``) instead of raising. Paths are checked as torch_npu's PathManager checks them:
releases before June 2026 (the APIs other than ``latest``) refuse a path too long, a soft link or one with a
character outside ``[._/~0-9a-zA-Z-]``, whitespace and CJK; the latest only warns; a file is refused by all.

torch_npu's own variables act as in the real package: ``MSMONITOR_USE_DAEMON=1`` (``KINETO_USE_DAEMON=1``)
or ``PROF_CONFIG_PATH`` start its no-code-change profiling when ``torch_npu.profiler`` is imported
(``profiler/_non_intrusive_profile.py``); each of its steps is recorded as ``dynamic_profile.step``.
"""

from __future__ import annotations

import os

if os.environ.get("FAKE_TORCH_NPU_IMPORT_ERROR"):
    raise ImportError(os.environ["FAKE_TORCH_NPU_IMPORT_ERROR"])

import torch

from . import _calls, npu

# Marked as a stand-in so that no report can mistake it for a real release.
__version__ = "0.0.0+standin." + os.environ.get("FAKE_TORCH_NPU_API", "latest").replace("-", ".")
IS_STANDIN = True

# The real torch_npu renames the PrivateUse1 backend to "npu" and registers its device module as torch.npu.
if torch._C._get_privateuse1_backend_name() != "npu":
    torch.utils.rename_privateuse1_backend("npu")
if not hasattr(torch, "npu"):
    torch._register_device_module("npu", npu)


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    """The real wheel registers its PrivateUse1 hooks in C++: without any, torch.distributed.barrier()
    (torch._C._get_accelerator()) raises 'Please register PrivateUse1HooksInterface'."""

    def is_available(self) -> bool:
        return npu.is_available()

    def has_primary_context(self, dev_id: int) -> bool:
        return False

    def is_built(self) -> bool:
        return True


if hasattr(torch._C, "_acc"):
    try:
        torch._C._acc.register_python_privateuseone_hook(_Hooks())
    except RuntimeError:  # already registered (a reload)
        pass

_calls.record("import torch_npu", version=__version__)

from . import profiler  # noqa: E402  (the real package imports its profiler at import time too)

__all__ = ["npu", "profiler"]
