"""Stand-in for ``torch_npu.profiler`` (tests only); exports the real package's public names."""

from .._C._profiler import ProfilerActivity
from . import experimental_config
from .experimental_config import (
    AiCMetrics,
    ProfilerLevel,
    _ExperimentalConfig,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from .profiler import _KinetoProfile, analyse, profile, tensorboard_trace_handler
from .profiler_interface import supported_activities
from .scheduler import ProfilerAction
from .scheduler import Schedule as schedule

__all__ = [
    "AiCMetrics",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerLevel",
    "_ExperimentalConfig",
    "_KinetoProfile",
    "analyse",
    "profile",
    "schedule",
    "supported_activities",
    "supported_ai_core_metrics",
    "supported_export_type",
    "supported_profiler_level",
    "tensorboard_trace_handler",
]

# ExportType and HostSystem are absent from older APIs.
for _name in ("ExportType", "HostSystem"):
    if hasattr(experimental_config, _name):
        globals()[_name] = getattr(experimental_config, _name)
        __all__.append(_name)

# As the real package: torch_npu's own no-code-change profiling starts here when its variables ask for it.
from ._non_intrusive_profile import _NonIntrusiveProfile  # noqa: E402

_NonIntrusiveProfile.init()
