"""Stand-in only: records every public call into the JSON-lines file named by ``FAKE_TORCH_NPU_LOG``."""

from __future__ import annotations

import enum
import inspect
import json
import os
from typing import Any


def jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if inspect.isroutine(value) or isinstance(value, type):
        return f"<callable {type(value).__name__}>"
    state = getattr(value, "__dict__", None)
    if isinstance(state, dict):
        return {"__class__": type(value).__name__, **{k: jsonable(v) for k, v in state.items()}}
    return f"<callable {type(value).__name__}>" if callable(value) else repr(value)


def record(call: str, **args: Any) -> None:
    path = os.environ.get("FAKE_TORCH_NPU_LOG")
    if not path:
        return
    line = json.dumps({"call": call, "pid": os.getpid(), "args": jsonable(args)}, sort_keys=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def logged(name: str):
    """Record the exact positional and keyword arguments a caller passed; keeps the signature visible
    to ``inspect.signature`` (through ``__wrapped__``)."""
    import functools

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            shown = args[1:] if args and fn.__name__ == "__init__" else args
            record(name, args=list(shown), kwargs=kwargs)
            return fn(*args, **kwargs)

        return wrapper

    return decorate
