"""Stand-in for ``torch_npu.npu`` (tests only): device queries and the mstx marking API."""

from __future__ import annotations

import itertools
import os
from typing import Any

from .. import _calls

_device = 0


def is_available() -> bool:
    available = os.environ.get("FAKE_TORCH_NPU_AVAILABLE", "1") != "0"
    _calls.record("torch_npu.npu.is_available", result=available)
    return available


def device_count() -> int:
    return 1 if is_available() else 0


def current_device() -> int:
    return _device


def set_device(device: int | str) -> None:
    global _device
    _device = int(str(device).rsplit(":", 1)[-1])


def synchronize(device: Any = None) -> None:
    return None


def _lazy_init() -> None:
    return None


_range_ids = itertools.count(1)


class mstx:
    @staticmethod
    def mark(message: str = "", stream: Any = None, domain: str = "default") -> None:
        _calls.record("torch_npu.npu.mstx.mark", message=message, domain=domain)

    @staticmethod
    def range_start(message: str = "", stream: Any = None, domain: str = "default") -> int:
        range_id = next(_range_ids)
        _calls.record("torch_npu.npu.mstx.range_start", message=message, domain=domain, range_id=range_id)
        return range_id

    @staticmethod
    def range_end(range_id: int, domain: str = "default") -> None:
        _calls.record("torch_npu.npu.mstx.range_end", range_id=range_id, domain=domain)
