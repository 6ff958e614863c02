"""export-stacks: a call and the call it makes with the same start and duration (whole-µs traces)."""

from __future__ import annotations

import json
from pathlib import Path

from npuprof.reports import stacks as st


def _py(name: str, ts: int, dur: int, pid: int, parent: int | None) -> dict:
    args = {"Python id": pid, "Python parent id": parent}
    return {
        "ph": "X",
        "cat": "python_function",
        "name": name,
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _op(name: str, ts: int, dur: int, ext: int) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": {"External id": ext},
    }


def test_calls_sharing_start_and_duration_nest_as_the_trace_links_them_in_any_order(tmp_path: Path) -> None:
    """helper-209: torch before 2.0 writes whole µs, so a Python call and the one it makes (``_ops.py``'s
    ``__call__`` and ``_record_function_enter_new``), or an operator and the one it calls, often share
    start and duration. The file's order decided which was the caller: reversed, the callee was above its
    caller. ``Python parent id`` and ``External id`` say which called which."""
    events = [
        _py("train.py(1): <module>", 0, 100, 1, None),
        _py("torch/_ops.py(1267): __call__", 10, 30, 2, 1),
        _py("<built-in method _record_function_enter_new>", 10, 30, 3, 2),
        _py("inner.py(5): deeper", 10, 30, 4, 3),
        _op("aten::to", 50, 20, 7),
        _op("aten::_to_copy", 50, 20, 8),
    ]
    expected = {
        ("train.py(1):_<module>",): 50.0,
        (
            "train.py(1):_<module>",
            "torch/_ops.py(1267):___call__",
            "<built-in_method__record_function_enter_new>",
            "inner.py(5):_deeper",
        ): 30.0,
        ("train.py(1):_<module>", "aten::to", "aten::_to_copy"): 20.0,
    }
    for order in (events, events[::-1], [events[k] for k in (3, 0, 5, 2, 4, 1)]):
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": order}))
        values = {path: value for path, value in st.folded_from_trace(path).values.items() if value}
        assert values == expected
