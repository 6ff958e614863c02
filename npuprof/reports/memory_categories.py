"""torch's memory categories, computed away from the training step from the snapshot the step wrote
(npuprof.agent.memory_snapshot; docs/formats.md, "Stacks and memory timeline files").

The snapshot is turned back into an event tree of plain objects with the attributes torch's memory profiler
reads, and torch's own ``torch.profiler._memory_profiler`` runs on it: a private copy of that module whose
``_TensorMetadata`` (the one type it tests with ``isinstance``) is the stand-in below. The raw events it
gives are what ``export_memory_timeline(... .raw.json.gz)`` writes for the same capture.
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

from npuprof.agent.memory_snapshot import ALLOCATION, FORMAT, OP, PYCALL, VERSION
from npuprof.reports.memory_timeline import (
    SOURCE_CATEGORISED,
    MemoryData,
    MemoryTimelineError,
    RawEvent,
    _choose_device,
    _sorted_devices,
    normalise_device,
)

SNAPSHOT_LIMIT = 4 << 30  # a snapshot larger than this is not one npuprof wrote


class _Tensor:
    """Stands for torch's ``_TensorMetadata``."""

    __slots__ = ("allocation_id", "device", "dtype", "id", "layout", "sizes", "storage_data_ptr", "strides")

    def __init__(self, row: list[Any], devices: Any, dtypes: Any, layouts: Any) -> None:
        self.id, self.storage_data_ptr, self.allocation_id = row[0], row[1], row[2]
        device, layout, self.sizes, self.strides, dtype = row[3:8]
        self.device, self.layout, self.dtype = devices(device), layouts(layout), dtypes(dtype)


class _Fields:
    """Stands for the ``extra_fields`` of an event (TorchOp, Allocation or PyCall)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


class _Event:
    """Stands for torch's ``_ProfilerEvent``."""

    __slots__ = ("children", "name", "parent", "start_time_ns", "tag", "typed")

    def __init__(self, tag: Any, fields: Any, parent: _Event | None, name: str, start_ns: int) -> None:
        self.tag = tag
        self.typed = (tag, fields)
        self.children: list[_Event] = []
        self.parent = parent
        self.name = name
        self.start_time_ns = start_ns


class _Result:
    def __init__(self, roots: list[_Event]) -> None:
        self._roots = roots

    def experimental_event_tree(self) -> list[_Event]:
        return self._roots


class _Opaque:
    """An operator input torch's analysis only tells apart by its type (a string, a dict, ...)."""


def load_snapshot(path: Path) -> dict[str, Any]:
    import msgspec

    from npuprof.results.layout import read_small

    try:
        value = msgspec.msgpack.decode(read_small(path, SNAPSHOT_LIMIT))
    except FileNotFoundError:
        # the training process writes it (its hand-over thread): a full disk there left none, and the line
        # said "cannot read PATH: [Errno 2] No such file or directory: 'PATH'", the cause only in the log
        raise MemoryTimelineError(
            f"the training process did not write {path.name} (a full disk? npuprof.log says why)"
        ) from None
    except (OSError, msgspec.DecodeError) as exc:
        raise MemoryTimelineError(f"cannot read {path}: {exc}") from None
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise MemoryTimelineError(f"{path} is not a memory snapshot npuprof wrote")
    if value.get("version") != VERSION:
        raise MemoryTimelineError(
            f"{path} is a memory snapshot of version {value.get('version')!r}; this npuprof reads {VERSION}"
        )
    if "error" in value:
        raise MemoryTimelineError(f"the training process could not copy the memory data: {value['error']}")
    if not isinstance(value.get("events"), list) or not isinstance(value.get("tensors"), list):
        raise MemoryTimelineError(f"{path} is a damaged memory snapshot")
    return value


def from_snapshot(path: Path, device: str | None = None, *, strict: bool = True) -> MemoryData:
    """The categorised timeline of ``device`` (default: the first accelerator in the data, else cpu) from
    a snapshot file, with the allocator's peaks. A ``device`` the data does not hold is refused, unless
    not ``strict`` (the run's own device: an empty timeline then)."""
    snapshot = load_snapshot(path)
    try:
        devices = _sorted_devices(_devices(snapshot))
        if device is not None and not strict:
            chosen = normalise_device(device)
        else:
            chosen = _choose_device(device, devices or ["cpu"])
        roots, allocations = _tree(snapshot)
        raw = _raw_events(_Result(roots), chosen)
    except MemoryTimelineError:
        raise
    except Exception as exc:  # a damaged snapshot, or torch's own consistency checks
        raise MemoryTimelineError(f"{path.name}: torch's memory categorisation failed: {exc!r}") from None
    allocated, reserved = _peaks(allocations, chosen)
    return MemoryData(chosen, SOURCE_CATEGORISED, raw, allocated, reserved, devices=devices or [chosen])


def _devices(snapshot: dict[str, Any]) -> set[str]:
    """Every device of the snapshot's allocations and tensors, as ``normalise_device`` names them."""
    found = {row[7] for row in snapshot["events"] if row[0] == ALLOCATION}
    found |= {row[3] for row in snapshot["tensors"]}
    return {normalise_device(str(name)) for name in found}


def _tree(snapshot: dict[str, Any]) -> tuple[list[_Event], list[list[Any]]]:
    import torch
    from torch._C._profiler import RecordScope, _EventType

    devices = functools.cache(torch.device)
    tensors = [_Tensor(row, devices, _dtype, _layout) for row in snapshot["tensors"]]

    def tensor(index: int | None) -> _Tensor | None:
        return None if index is None else tensors[index]

    backward, other_scope = RecordScope.BACKWARD_FUNCTION, RecordScope.FUNCTION
    op_tag, alloc_tag, py_tag = _EventType.TorchOp, _EventType.Allocation, _EventType.PyCall
    events: list[_Event] = []
    roots: list[_Event] = []
    allocations: list[list[Any]] = []
    for row in snapshot["events"]:
        kind, parent_index, start_ns = row[0], row[1], row[2]
        parent = events[parent_index] if parent_index >= 0 else None
        if kind == OP:
            name, is_backward, inputs, tensor_mask, list_mask = row[3:8]
            values = [
                _input(value, position, tensor_mask, list_mask, tensor)
                for position, value in enumerate(inputs)
            ]
            scope = backward if is_backward else other_scope
            event = _Event(op_tag, _Fields(name=name, scope=scope, inputs=values), parent, name, start_ns)
        elif kind == ALLOCATION:
            alloc_id, ptr, allocation_id, size, device = row[3:8]
            allocations.append(row)
            fields = _Fields(
                id=alloc_id, ptr=ptr, allocation_id=allocation_id, alloc_size=size, device=devices(device)
            )
            event = _Event(alloc_tag, fields, parent, "[memory]", start_ns)
        elif kind == PYCALL:
            module_params, optimizer_params = row[3], row[4]
            module = optimizer = None
            if module_params is not None:
                module = _Fields(parameters=[(None, tensor(p), tensor(g)) for p, g in module_params])
            if optimizer_params is not None:
                optimizer = _Fields(
                    parameters=[
                        (tensor(p), tensor(g), [(None, tensor(t)) for t in state])
                        for p, g, state in optimizer_params
                    ]
                )
            event = _Event(py_tag, _Fields(module=module, optimizer=optimizer), parent, "", start_ns)
        else:
            raise MemoryTimelineError(f"unknown event kind {kind!r} in the memory snapshot")
        events.append(event)
        (parent.children if parent is not None else roots).append(event)
    return roots, allocations


def _input(value: Any, position: int, tensor_mask: int, list_mask: int, tensor: Any) -> Any:
    bit = 1 << position
    if tensor_mask & bit:
        return tensor(value)
    if list_mask & bit:
        return [tensor(index) for index in value]
    if isinstance(value, dict):
        parts = value.get("complex")
        if isinstance(parts, list) and len(parts) == 2:
            return complex(parts[0], parts[1])
        return _Opaque()
    return value


@functools.cache
def _dtype(name: str) -> Any:
    import torch

    value = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise MemoryTimelineError(f"unknown dtype {name!r} in the memory snapshot")
    return value


@functools.cache
def _layout(name: str) -> Any:
    import torch

    value = getattr(torch, name.removeprefix("torch."), None)
    return value if isinstance(value, torch.layout) else _Opaque()


@functools.lru_cache(maxsize=1)
def _torch_memory_profiler() -> Any:
    """A private copy of torch's memory profiler module that takes the stand-ins above for torch's types."""
    import importlib.util

    spec = importlib.util.find_spec("torch.profiler._memory_profiler")
    if spec is None or spec.loader is None:
        raise MemoryTimelineError("this torch has no memory profiler (torch.profiler._memory_profiler)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._TensorMetadata = _Tensor  # type: ignore[attr-defined]
    return module


def _raw_events(result: _Result, device: str) -> list[RawEvent]:
    """``(timestamp ns, action, numbytes, category)`` for ``device``, written by torch's own
    ``export_memory_timeline_raw`` and read back."""
    import warnings

    module = _torch_memory_profiler()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        timeline = module.MemoryProfileTimeline(module.MemoryProfile(result))
    with tempfile.TemporaryDirectory(prefix="npuprof_memory_") as tmp:
        path = Path(tmp) / "raw.json"
        timeline.export_memory_timeline_raw(str(path), device)
        events = json.loads(path.read_text())
    return [(int(t), int(a), int(n), int(c)) for t, a, n, c in events]


def _peaks(allocations: list[list[Any]], device: str) -> tuple[int | None, int | None]:
    """The allocator's peak total allocated / reserved bytes on ``device`` (what the trace's [memory]
    events carry)."""
    import torch

    wanted = torch.device(device)
    allocated: int | None = None
    reserved: int | None = None
    cpu_changes: list[tuple[int, int, int]] = []  # time ns, bytes, address
    for row in allocations:
        where = torch.device(row[7])
        if where.type != wanted.type or (wanted.type != "cpu" and (wanted.index or 0) != (where.index or 0)):
            continue
        if wanted.type == "cpu":
            cpu_changes.append((int(row[2]), int(row[6]), int(row[4])))
            continue
        allocated = max(allocated or 0, int(row[8]))
        reserved = max(reserved or 0, int(row[9]))
    if cpu_changes:
        # torch's CPU totals keep each block of an earlier capture freed between captures (helper-215,
        # analysis/memory.py's memory_columns): the capture's own changes, summed as analyse sums them,
        # from what they show was there
        allocated = _summed_peak(cpu_changes)
    if wanted.type == "cpu" and not reserved:
        reserved = None  # the CPU allocator keeps no cache
    return allocated, reserved


def _summed_peak(changes: list[tuple[int, int, int]]) -> int:
    """The most allocated of ``changes`` (time, bytes, address) summed in the order analyse sums them, from
    what they show was allocated before the first (analysis/memory.py: summing_keys, held_before)."""
    import numpy as np

    from npuprof.analysis.memory import held_before, missed_frees, summing_keys

    times, nbytes, addresses = (np.array(column) for column in zip(*changes, strict=True))
    sizes = nbytes.astype(np.float64)
    order = np.lexsort((summing_keys(times, sizes, addresses), times))
    # less each block allocated again at its address with no free seen between (memory.missed_frees)
    summed = sizes[order] - missed_frees(sizes[order], addresses[order].astype(np.int64))
    running = np.cumsum(summed)
    return round(held_before(summed, addresses[order]) + max(float(running.max()), 0.0))
