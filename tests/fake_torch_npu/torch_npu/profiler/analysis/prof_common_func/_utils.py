"""Stand-in (tests only) for torch_npu's ``prof_common_func/_utils.no_exception_func``: the profiler's public
methods print the error and return (``default_ret``) instead of raising (torch_npu since August 2024; the
stand-in's 5.0.0 API, a 2023 release, raises)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from ._constant import print_error_msg


def no_exception_func(default_ret: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        if os.environ.get("FAKE_TORCH_NPU_API", "latest") == "5.0.0":
            return func

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except Exception as ex:
                print_error_msg(f"Call {wrapper.__name__} failed. Exception: {ex!s}")
                return default_ret

        return wrapper

    return decorator
