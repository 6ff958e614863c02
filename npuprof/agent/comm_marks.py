"""``--msprof-tx``: a range around every torch.distributed collective and point-to-point call, named
``comm:{op},{group},{dtype},{count}`` as torch_npu names its own (docs/formats.md, "Marks, communication
ranges and GC"), with no change to the training script.

The functions of ``torch.distributed`` (and of ``distributed_c10d``, where the others call them) are
replaced by thin wrappers when the agent wakes, or at the first capture that wants them. Outside a capture
a wrapper costs one check; the name is built only while a capture records. On NPU, torch_npu's HCCL process
groups mark their own collectives: npuprof marks the other groups' calls (gloo on the host).

``count`` is the element count of the op's data tensor (summed over a list): the tensor itself for in-place
ops and point-to-point, the input of gathers and all-to-all, the output of reduce-scatters (as HCCL counts
them); ``barrier`` has none (``na,0``). A call made with ``async_op=True`` is timed until it returns; a
call made inside another one's range (``send`` calls ``isend``) gets no range of its own.

Where a range goes: in an npuprof capture on the torch.profiler backends (CPU, CUDA) it is two clock
readings, kept in memory (``CommRanges``) and written at the capture's end as ``npuprof_comm_ranges.json``
(docs/formats.md), from which the parser makes the ``MsprofTx`` layer: a ``record_function`` span costs
~10-80 µs under the profiler (bench/README.md, "Marks and communication ranges"), too much for a job that
calls a collective every step. On NPU (torch_npu's mstx) and under a profiler of the script's own, the
range goes through ``npuprof.marks`` as the user's marks do.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
from threading import get_native_id
from time import perf_counter_ns
from typing import Any

from npuprof import marks
from npuprof.agent import epoch_clock

PREFIX = "comm:"
DEFAULT_GROUP = "default_pg"
NO_TENSOR = ("na", 0)

# op -> the parameter holding its data (None: no data); a list parameter's counts are summed
OPS: dict[str, str | None] = {
    "all_reduce": "tensor",
    "broadcast": "tensor",
    "reduce": "tensor",
    "send": "tensor",
    "recv": "tensor",
    "isend": "tensor",
    "irecv": "tensor",
    "all_gather": "tensor",
    "all_gather_into_tensor": "input_tensor",
    "all_gather_single": "input_tensor",  # torch 2.13's name for all_gather_into_tensor (FSDP calls it)
    "reduce_scatter": "output",
    "reduce_scatter_tensor": "output",
    "reduce_scatter_single": "output",  # torch 2.13's name for reduce_scatter_tensor (FSDP calls it)
    "all_to_all_single": "input",
    "all_to_all": "input_tensor_list",
    "gather": "tensor",
    "scatter": "tensor",
    "all_reduce_coalesced": "tensors",
    "all_gather_coalesced": "input_tensor_list",
    "barrier": None,
    "batch_isend_irecv": "p2p_op_list",
}
WRAPPED = "__npuprof_comm__"
FILE_NAME = "npuprof_comm_ranges.json"
VERSION = 1
# at most this many ranges a capture (a job making hundreds of small collectives a step); the rest counted
RANGES_LIMIT = 50_000

_state: dict[str, Any] = {"enabled": False}
_inside = threading.local()  # a call inside another one's range (send calls isend) gets no range of its own
_dtype_names: dict[Any, str] = {}
_collector: CommRanges | None = None  # the capture that records in this process, on torch.profiler


class CommRanges:
    """The ``comm:`` ranges of one capture: (call, thread, start, end), ``time.perf_counter_ns`` readings
    turned into epoch ns at the end (as agent/gc_watch.py does for GC pauses), so that they line up with
    the trace (Kineto's ``baseTimeNanoseconds`` + ``ts``); ``thread`` is the thread's native id, Kineto's
    ``tid``; ``call`` is (op, group, dtype, count), named at the end (a step's code runs cold: each thing
    left out of the call saves more than it costs in a loop). ``add`` is one append (atomic under the GIL:
    threads may call it together); ``busy`` holds the threads inside a recorded call."""

    def __init__(self, limit: int = RANGES_LIMIT) -> None:
        self._limit = limit
        self._ranges: list[tuple[Any, int, int, int]] = []
        self.busy: set[int] = set()
        self.dropped = 0
        self._offset = epoch_clock.read()

    def add(self, call: Any, tid: int, start: int, end: int) -> None:
        if len(self._ranges) < self._limit:
            self._ranges.append((call, tid, start, end))
        else:
            self.dropped += 1

    def record(self) -> dict[str, Any]:
        """The capture's ranges as ``npuprof_comm_ranges.json`` holds them."""
        offset = epoch_clock.over_a_capture(self._offset, epoch_clock.read())
        ranges, self._ranges = self._ranges, []
        c10d = sys.modules.get("torch.distributed.distributed_c10d")
        names: dict[Any, str] = {}  # by the group's id: a group object need not hash (all are alive here)
        out = []
        for call, tid, start, end in ranges:
            key = call if isinstance(call, str) else (call[0], id(call[1]), call[2], call[3])
            name = names.get(key)
            if name is None:
                name = names[key] = _call_name(call, c10d)
            out.append({"name": name, "tid": tid, "start_ns": start + offset, "end_ns": end + offset})
        return {
            "version": VERSION,
            "pid": os.getpid(),
            "clock": "epoch_ns",
            "ranges": out,
            "dropped": self.dropped,
        }


def start_collecting() -> None:
    """A capture on a torch.profiler backend begins: its ranges are kept here from now on."""
    global _collector
    _collector = CommRanges()


def stop_collecting() -> dict[str, Any] | None:
    """The capture ends: its ranges (``npuprof_comm_ranges.json``'s content), None when none was begun."""
    global _collector
    collector, _collector = _collector, None
    return collector.record() if collector is not None else None


def set_enabled(enabled: bool) -> None:
    """The capture that begins wants communication ranges (its ``msprof_tx``) or not."""
    _state["enabled"] = bool(enabled)


def install_at_wake(cfg: Any, log: Any) -> None:
    """When the agent wakes: wrap now if any capture may want the ranges (``--msprof-tx``, or a dynamic
    configuration that may turn it on), so that ``from torch.distributed import all_reduce`` in the script,
    which comes after ``import torch`` woke the agent, gets the wrapper. Never raises."""
    try:
        if cfg.msprof_tx:
            install(log)
        elif getattr(cfg, "dynamic", None):
            install(log, "ready for a dynamic request with msprof_tx; they record nothing until then")
    except Exception as exc:
        log.warning(f"communication ranges not installed: {exc!r}")


def install(log: Any, why: str = "--msprof-tx") -> bool:
    """Wrap the torch.distributed functions once; False when torch.distributed is not there yet."""
    dist = sys.modules.get("torch.distributed")
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if dist is None or c10d is None or not dist.is_available():
        return False
    done = 0
    for op, data in OPS.items():
        original = getattr(c10d, op, None)
        if original is None or getattr(original, WRAPPED, False):
            continue
        wrapped = _wrap(op, data, original, c10d)
        setattr(c10d, op, wrapped)
        if getattr(dist, op, None) is original:
            setattr(dist, op, wrapped)
        done += 1
    if done:
        log.info(f"communication ranges on {done} torch.distributed functions ({why})")
    return True


def _wrap(op: str, data: str | None, original: Any, c10d: Any) -> Any:
    try:
        params = list(inspect.signature(original).parameters)
    except (TypeError, ValueError):
        params = []
    data_at = params.index(data) if data in params else -1
    group_at = params.index("group") if "group" in params else -1
    is_compiling = _is_compiling_function()

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gate = marks._gate
        if gate is not None and not gate._is_profiler_enabled:  # the fast path: no profiler runs
            return original(*args, **kwargs)
        collector = _collector
        # npuprof's capture on torch.profiler (--msprof-tx): two clock readings around the call, no span
        if collector is not None and (gate is not None or marks.recording()) and not is_compiling():
            tid = get_native_id()
            busy = collector.busy
            call = None if tid in busy else _call(op, data, data_at, group_at, args, kwargs, c10d)
            if call is None:
                return original(*args, **kwargs)
            busy.add(tid)
            start = perf_counter_ns()
            try:
                result = original(*args, **kwargs)
            finally:
                end = perf_counter_ns()
                busy.discard(tid)
            collector.add(call, tid, start, end)  # a call that raised made no communication: no range
            return result
        if not _state["enabled"] or not marks.recording() or is_compiling():
            return original(*args, **kwargs)
        if getattr(_inside, "op", None) is not None:
            return original(*args, **kwargs)
        name = _range_name(op, data, data_at, group_at, args, kwargs, c10d)
        if name is None:
            return original(*args, **kwargs)
        range_id = marks.unlisted_range_start(name)
        _inside.op = op
        try:
            return original(*args, **kwargs)
        finally:
            _inside.op = None
            marks.range_end(range_id)

    setattr(wrapper, WRAPPED, True)
    return wrapper


def _call(
    op: str,
    data: str | None,
    data_at: int,
    group_at: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    c10d: Any,
) -> Any:
    """What names a recorded call, (op, group, dtype, count), left unnamed (``_call_name``); a name
    already made for the rare ops a tuple cannot hold; None when the call is not for npuprof to mark."""
    try:
        if op == "batch_isend_irecv":
            return _range_name(op, data, data_at, group_at, args, kwargs, c10d)
        group = args[group_at] if 0 <= group_at < len(args) else kwargs.get("group")
        if data is None:
            return (op, group, *NO_TENSOR)
        value = args[data_at] if 0 <= data_at < len(args) else kwargs.get(data)
        if hasattr(value, "numel"):  # one tensor, as most calls have
            return (op, group, value.dtype, int(value.numel()))
        return (op, group, *_dtype_and_count(value))
    except Exception:
        return None


def _call_name(call: Any, c10d: Any) -> str:
    """``comm:{op},{group},{dtype},{count}`` of a ``_call``."""
    if isinstance(call, str):
        return call
    op, group, dtype, count = call
    try:
        group_name = _group_name(group, c10d)
    except Exception:
        group_name = "unknown"
    try:
        dtype_name = dtype if isinstance(dtype, str) else _dtype_name(dtype)
    except Exception:
        dtype_name = "unknown"
    return f"{PREFIX}{op},{group_name},{dtype_name},{count}"


def _range_name(
    op: str,
    data: str | None,
    data_at: int,
    group_at: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    c10d: Any,
) -> str | None:
    """``comm:{op},{group},{dtype},{count}``; None when this call is not for npuprof to mark."""
    try:
        value = _argument(data, data_at, args, kwargs) if data is not None else None
        group = _argument("group", group_at, args, kwargs) if group_at >= 0 else None
        if op == "batch_isend_irecv":
            ops = list(value or ())
            group = getattr(ops[0], "group", None) if ops else None
            value = [getattr(p2p, "tensor", None) for p2p in ops]
        impl = marks._impl
        if impl is None or not impl.marks_group(group):
            return None
        dtype, count = _dtype_and_count(value) if data is not None else NO_TENSOR
        return f"{PREFIX}{op},{_group_name(group, c10d)},{dtype},{count}"
    except Exception:
        return None


def _argument(name: str | None, index: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if 0 <= index < len(args):
        return args[index]
    return kwargs.get(name) if name else None


def _dtype_and_count(value: Any) -> tuple[str, int]:
    if hasattr(value, "numel"):  # one tensor, as most calls have (this runs in every recorded call)
        return _dtype_name(value.dtype), int(value.numel())
    tensors = value if isinstance(value, (list, tuple)) else [value]
    tensors = [t for t in tensors if hasattr(t, "numel")]
    if not tensors:
        return NO_TENSOR
    return _dtype_name(tensors[0].dtype), sum(int(t.numel()) for t in tensors)


def _dtype_name(dtype: Any) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


def _group_name(group: Any, c10d: Any) -> str:
    world = c10d._world
    if group is None or group is getattr(world, "default_pg", None):
        return DEFAULT_GROUP
    name = world.pg_names.get(group) if hasattr(world, "pg_names") else None
    return str(name if name is not None else getattr(group, "group_name", "unknown"))


def _is_compiling_function() -> Any:
    """``torch.compiler.is_compiling`` where torch has it: a traced call goes to torch.distributed as is
    (dynamo maps the original functions to its own collectives)."""
    torch = sys.modules.get("torch")
    compiler = getattr(torch, "compiler", None)
    found = getattr(compiler, "is_compiling", None)
    return found if callable(found) else (lambda: False)


def _forget_in_child() -> None:
    """A forked child (a DataLoader worker) does not record the parent's capture."""
    global _collector
    _collector = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
