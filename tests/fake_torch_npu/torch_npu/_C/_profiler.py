"""Stand-in for ``torch_npu._C._profiler`` (tests only). The real one is a pybind11 module."""

from __future__ import annotations

import enum


class ProfilerActivity(enum.Enum):
    CPU = 0
    NPU = 1


def _supported_npu_activities() -> set[ProfilerActivity]:
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}
