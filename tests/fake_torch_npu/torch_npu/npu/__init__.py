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


def _stream_seen(stream: Any) -> Any:
    return None if stream is None else repr(stream)


class mstx:
    """The signatures of Ascend/pytorch ``torch_npu/npu/mstx.py``: host-only without a stream, an invalid
    message gives 0 (range_start) or nothing; records only what it is asked (the stand-in has no device)."""

    @staticmethod
    def mark(message: str, stream: Any = None, domain: str = "default") -> None:
        if not message or not isinstance(message, str):
            return
        _calls.record("torch_npu.npu.mstx.mark", message=message, stream=_stream_seen(stream), domain=domain)

    @staticmethod
    def range_start(message: str, stream: Any = None, domain: str = "default") -> int:
        if not message or not isinstance(message, str):
            return 0
        range_id = next(_range_ids)
        _calls.record(
            "torch_npu.npu.mstx.range_start",
            message=message,
            stream=_stream_seen(stream),
            domain=domain,
            range_id=range_id,
        )
        return range_id

    @staticmethod
    def range_end(range_id: int, domain: str = "default") -> None:
        if not isinstance(range_id, int):
            return
        _calls.record("torch_npu.npu.mstx.range_end", range_id=range_id, domain=domain)

    @staticmethod
    def mstx_range(message: str, stream: Any = None, domain: str = "default") -> Any:
        def wrapper(func: Any) -> Any:
            def inner(*args: Any, **kwargs: Any) -> Any:
                range_id = mstx.range_start(message, stream, domain)
                result = func(*args, **kwargs)
                mstx.range_end(range_id, domain)
                return result

            return inner

        return wrapper
