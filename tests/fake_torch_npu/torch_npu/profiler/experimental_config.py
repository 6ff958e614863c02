"""Stand-in for ``torch_npu.profiler.experimental_config`` (tests only).

Names, defaults and parameter checks follow Ascend/pytorch ``torch_npu/profiler/experimental_config.py``;
``FAKE_TORCH_NPU_API`` picks which released ``__init__`` signature is exported as ``_ExperimentalConfig``.
"""

from __future__ import annotations

import os
from typing import Any

from .. import _calls
from .analysis.prof_common_func._constant import Constant, print_info_msg, print_warn_msg

API = os.environ.get("FAKE_TORCH_NPU_API", "latest")

__all__ = [
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "ProfilerLevel",
    "_ExperimentalConfig",
    "supported_ai_core_metrics",
    "supported_export_type",
    "supported_profiler_level",
]


class ProfilerLevel:
    Level0 = Constant.LEVEL0
    Level1 = Constant.LEVEL1
    Level2 = Constant.LEVEL2
    Level_none = Constant.LEVEL_NONE


class AiCMetrics:
    PipeUtilization = Constant.AicPipeUtilization
    ArithmeticUtilization = Constant.AicArithmeticUtilization
    Memory = Constant.AicMemory
    MemoryL0 = Constant.AicMemoryL0
    MemoryUB = Constant.AicMemoryUB
    ResourceConflictRatio = Constant.AicResourceConflictRatio
    L2Cache = Constant.AicL2Cache
    MemoryAccess = Constant.AicMemoryAccess
    AiCoreNone = Constant.AicMetricsNone


class ExportType:
    Db = Constant.Db
    Text = Constant.Text


class HostSystem:
    CPU = Constant.CPU
    MEM = Constant.MEM
    DISK = Constant.DISK
    NETWORK = Constant.NETWORK
    OSRT = Constant.OSRT


if API == "5.0.0":
    # The CANN 7.0 era had neither Level_none, AiCoreNone, MemoryAccess nor ExportType.
    del ProfilerLevel.Level_none, AiCMetrics.AiCoreNone, AiCMetrics.MemoryAccess
    del ExportType, HostSystem
elif API == "6.0.0":
    del AiCMetrics.MemoryAccess, HostSystem

_LEVELS = (Constant.LEVEL0, Constant.LEVEL1, Constant.LEVEL2, Constant.LEVEL_NONE)
_METRICS = (
    Constant.AicPipeUtilization,
    Constant.AicArithmeticUtilization,
    Constant.AicMemory,
    Constant.AicMemoryL0,
    Constant.AicMemoryUB,
    Constant.AicResourceConflictRatio,
    Constant.AicL2Cache,
    Constant.AicMemoryAccess,
    Constant.AicMetricsNone,
)


def supported_profiler_level() -> set:
    return {
        getattr(ProfilerLevel, n)
        for n in ("Level0", "Level1", "Level2", "Level_none")
        if hasattr(ProfilerLevel, n)
    }


def supported_ai_core_metrics() -> set:
    return {v for k, v in vars(AiCMetrics).items() if not k.startswith("_")}


def supported_export_type() -> set:
    return {Constant.Db, Constant.Text}


class _ConfigBase:
    """The attributes and checks of the real class; subclasses only differ in their signature."""

    def _setup(self, **values: Any) -> None:
        self._profiler_level = values["profiler_level"]
        self._aic_metrics = values["aic_metrics"]
        if self._profiler_level not in (Constant.LEVEL_NONE, Constant.LEVEL0) and (
            self._aic_metrics == Constant.AicMetricsNone
        ):
            self._aic_metrics = Constant.AicPipeUtilization
        self._l2_cache = values["l2_cache"]
        self._msprof_tx = values.get("msprof_tx", False)
        self._data_simplification = values["data_simplification"]
        self.record_op_args = values["record_op_args"]
        self._export_type = _to_list(values.get("export_type", Constant.Text))
        self._host_sys = values.get("host_sys") or []
        self._op_attr = values.get("op_attr", False)
        self._gc_detect_threshold = values.get("gc_detect_threshold")
        self._mstx_domain_include = values.get("mstx_domain_include") or []
        self._mstx_domain_exclude = values.get("mstx_domain_exclude") or []
        self._sys_io = values.get("sys_io", False)
        self._sys_interconnection = values.get("sys_interconnection", False)
        self._check_params()

    @property
    def export_type(self) -> list[str]:
        return self._export_type

    @property
    def with_gc(self) -> bool:
        return self._gc_detect_threshold is not None

    @property
    def gc_detect_threshold(self) -> float | None:
        return self._gc_detect_threshold

    def __call__(self) -> dict[str, Any]:
        # The real one returns torch_npu._C._profiler._ExperimentalConfig for the C++ profiler.
        return {"trace_level": self._profiler_level, "metrics": self._aic_metrics, "l2_cache": self._l2_cache}

    def _check_params(self) -> None:
        if self._profiler_level in (Constant.LEVEL0, Constant.LEVEL_NONE) and (
            self._aic_metrics != Constant.AicMetricsNone
        ):
            print_warn_msg(
                "Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!"
            )
            self._aic_metrics = Constant.AicMetricsNone
        for name in (
            "_l2_cache",
            "_msprof_tx",
            "record_op_args",
            "_op_attr",
            "_sys_io",
            "_sys_interconnection",
        ):
            if not isinstance(getattr(self, name), bool):
                print_warn_msg(
                    f"Invalid parameter {name.lstrip('_')}, which must be of boolean type, reset it to False."
                )
                setattr(self, name, False)
        if self._data_simplification is not None and not isinstance(self._data_simplification, bool):
            print_warn_msg(
                "Invalid parameter data_simplification, which must be of boolean type, reset it to default."
            )
            self._data_simplification = True
        if self._profiler_level not in _LEVELS:
            print_warn_msg("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.")
            self._profiler_level = Constant.LEVEL0
        if self._aic_metrics not in _METRICS:
            print_warn_msg("Invalid parameter aic_metrics, reset it to default.")
            self._aic_metrics = (
                Constant.AicMetricsNone
                if self._profiler_level == Constant.LEVEL0
                else Constant.AicPipeUtilization
            )
        if not all(t in (Constant.Text, Constant.Db) for t in self._export_type):
            print_warn_msg("Invalid parameter export_type, reset it to text.")
            self._export_type = [Constant.Text]
        if self._op_attr and Constant.Db not in self._export_type:
            print_warn_msg("op_attr switch is invalid with export type set as text.")
            self._op_attr = False
        if self._gc_detect_threshold is not None:
            if not isinstance(self._gc_detect_threshold, (int, float)) or isinstance(
                self._gc_detect_threshold, bool
            ):
                print_warn_msg("Parameter gc_detect_threshold is not int or float type, reset it to default.")
                self._gc_detect_threshold = None
            elif self._gc_detect_threshold < 0.0:
                print_warn_msg("Parameter gc_detect_threshold can not be negative, reset it to default.")
                self._gc_detect_threshold = None
            elif self._gc_detect_threshold == 0.0:
                print_info_msg("Parameter gc_detect_threshold is set to 0, it will collect all gc events.")
        if not self._msprof_tx:
            self._mstx_domain_include = []
            self._mstx_domain_exclude = []


def _to_list(export_type: Any) -> list[str]:
    if not export_type:
        print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.")
        return [Constant.Text]
    if isinstance(export_type, str):
        return [export_type]
    if isinstance(export_type, list):
        return sorted(set(export_type))
    print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.")
    return [Constant.Text]


class _ExperimentalConfigLatest(_ConfigBase):
    @_calls.logged("_ExperimentalConfig")
    def __init__(
        self,
        profiler_level: str = Constant.LEVEL0,
        aic_metrics: str = Constant.AicMetricsNone,
        l2_cache: bool = False,
        msprof_tx: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
        op_attr: bool = False,
        gc_detect_threshold: float | None = None,
        export_type: str | list | None = None,
        host_sys: list | None = None,
        mstx_domain_include: list | None = None,
        mstx_domain_exclude: list | None = None,
        sys_io: bool = False,
        sys_interconnection: bool = False,
    ) -> None:
        values = dict(locals())
        del values["self"]
        self._setup(**values)


class _ExperimentalConfigMstx(_ConfigBase):
    @_calls.logged("_ExperimentalConfig")
    def __init__(
        self,
        profiler_level: str = Constant.LEVEL0,
        aic_metrics: str = Constant.AicMetricsNone,
        l2_cache: bool = False,
        mstx: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
        op_attr: bool = False,
        gc_detect_threshold: float | None = None,
        export_type: str | list | None = None,
        host_sys: list | None = None,
        mstx_domain_include: list | None = None,
        mstx_domain_exclude: list | None = None,
        sys_io: bool = False,
        sys_interconnection: bool = False,
    ) -> None:
        values = dict(locals())
        del values["self"]
        values["msprof_tx"] = values.pop("mstx")
        self._setup(**values)


class _ExperimentalConfig600(_ConfigBase):
    @_calls.logged("_ExperimentalConfig")
    def __init__(
        self,
        profiler_level: str = Constant.LEVEL0,
        aic_metrics: str = Constant.AicMetricsNone,
        l2_cache: bool = False,
        msprof_tx: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
        op_attr: bool = False,
        gc_detect_threshold: float | None = None,
        export_type: str = Constant.Text,
    ) -> None:
        values = dict(locals())
        del values["self"]
        self._setup(**values)


class _ExperimentalConfig500(_ConfigBase):
    @_calls.logged("_ExperimentalConfig")
    def __init__(
        self,
        profiler_level: str = Constant.LEVEL0,
        aic_metrics: str = Constant.AicMetricsNone,
        l2_cache: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
    ) -> None:
        values = dict(locals())
        del values["self"]
        self._setup(**values)


_ExperimentalConfig: type[_ConfigBase] = {
    "latest": _ExperimentalConfigLatest,
    "mstx": _ExperimentalConfigMstx,
    "6.0.0": _ExperimentalConfig600,
    "5.0.0": _ExperimentalConfig500,
}[API]
_ExperimentalConfig.__name__ = "_ExperimentalConfig"
_ExperimentalConfig.__qualname__ = "_ExperimentalConfig"
