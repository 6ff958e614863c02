"""What a memory timeline needs from the live profiler, copied out of the training process.

torch's memory profiler (``export_memory_timeline``) categorises memory from the profiler's event tree,
which exists only in the training process; done there, it took seconds of the step that ends a capture.
The trace does not hold what it needs (tensor and storage identities), so that much is copied out of the
tree, and nothing else; the post-processor replays torch's own categorisation on the copy
(npuprof.reports.memory_categories), so the files come out as torch writes them.

The step itself only takes the tree's roots (``experimental_event_tree()``: references that keep the tree
alive after the profiler moves on, ~20 µs). The copy is made by a :class:`SnapshotTask` run by the
capture's hand-over thread before it hands the job to the post-processor (npuprof.results.postprocess), in
slices of ``SLICE_EVENTS`` events with a pause of ``PAUSE_FACTOR`` times the slice's CPU time after each,
so that the training thread waits at most one short slice for the GIL, and rarely. At exit or on SIGTERM
(or without a hand-over thread), or when more than ``WAITING_SNAPSHOTS`` captures' snapshots wait behind
it, it runs at once, without pauses.

The copy (``memory_timeline.snapshot.msgpack``; docs/formats.md) holds, in the tree's depth-first order:

- operators: ``[0, parent, start ns, name, backward?, inputs, tensor mask, list mask]``; a tensor input is
  an index into ``tensors``, a tensor list a list of them; the masks' bits say which inputs those are;
- allocations: ``[1, parent, start ns, id, ptr, allocation id, bytes, device, total allocated, reserved]``;
- Python calls of an ``nn.Module`` or an optimizer: ``[2, parent, start ns, module params, optimizer
  params]``, each parameter as tensor indexes (``[p, grad]``, ``[p, grad, [state...]]``);

and ``tensors``: ``[id, storage ptr, allocation id, device, layout, sizes, strides, dtype]``. Other events
(plain Python calls) are left out; their children hang from the nearest kept ancestor (``parent`` is an
index into the events, -1 for none), which is all torch's analysis looks at. A copy that failed is written
as ``{"format", "version", "error"}``, so that whoever waits for the file learns why.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SNAPSHOT_FILE = "memory_timeline.snapshot.msgpack"
FORMAT = "npuprof-memory-snapshot"
VERSION = 1
OP, ALLOCATION, PYCALL = 0, 1, 2
SLICE_EVENTS = 10  # ~15-50 µs of copying: the longest the training thread waits for the GIL
# After a slice the copy sleeps this many times the slice's own CPU time (at least PAUSE_S): it holds the
# GIL ~2 % of the time, so the training thread, which takes the GIL back after each operator, rarely finds
# it taken (helper-99: 200-event slices with 0.5 ms pauses made the steps after a capture 2-3x longer)
PAUSE_FACTOR = 49
PAUSE_S = 0.0005
# snapshots waiting behind the one being copied before that one goes at full speed (each holds its
# capture's event tree; npuprof.results.postprocess bounds them)
WAITING_SNAPSHOTS = 2
TASK_KEY = "_snapshot_task"  # in a job's "exports": the task, for the hand-over thread (never sent)


def pop_task(job: dict[str, Any]) -> SnapshotTask | None:
    """The snapshot task a job carries, taken out of it (it cannot travel in the job's JSON line)."""
    exports = job.get("exports")
    return exports.pop(TASK_KEY, None) if isinstance(exports, dict) else None


class SnapshotTask:
    """The copy of one capture's event tree into ``path``; run once, by whoever comes first."""

    def __init__(self, prof: Any, path: Path, log: Callable[[str], None], min_free_space: str = "0") -> None:
        """``log`` takes the problems; the copy's figures go to the agent's log as information. The file is
        not written where it would take the disk below ``min_free_space`` (--min-free-space)."""
        self.roots = prof.profiler.kineto_results.experimental_event_tree()
        self.path = path
        self.log = log
        self.min_free_space = min_free_space
        self.left_for_room = ""  # why the file was not written for --min-free-space, said in the log
        self.events: list[tuple[Any, ...]] = []
        self.tensors: list[tuple[Any, ...]] = []
        self.cpu_s = 0.0
        self._lock = threading.Lock()
        self._done = False
        self._hurry = threading.Event()

    def hurry(self) -> None:
        """No more pauses: training has ended (or waits for this)."""
        self._hurry.set()

    def run(self, pause: bool = True) -> None:
        """Make the copy and write it (never raises). With ``pause``, slice by slice; a second caller
        (training has ended) makes the first one hurry and waits for it."""
        if not pause:
            self._hurry.set()
        with self._lock:
            if self._done:
                return
            self._done = True
            try:
                self._copy()
                data = self.encode()
            except Exception as exc:
                self.log(f"{self.path.parent.name}: memory snapshot failed: {exc!r}")
                data = _failure(exc)
            finally:
                self.roots = []  # the tree can go now
            self.events, self.tensors = [], []  # in ``data`` now: the job may wait long in a full pipe
            if not self._room_for(data):
                return
            try:
                from npuprof.results.atomic import write_bytes

                write_bytes(self.path, data, fsync=False)
            except OSError as exc:
                self.log(f"{self.path.parent.name}: memory snapshot not written: {exc!r}")

    def _room_for(self, data: bytes) -> bool:
        """Whether ``data`` leaves the room --min-free-space keeps; else said, the categorised timeline
        not produced. A statvfs: this runs off the step (the hand-over thread, or the process's end), but
        where no post-processor took the capture, in the step that ended it, beside the write itself."""
        from npuprof.results.free_space import short_of_room

        short = short_of_room(self.path.parent, self.min_free_space, len(data))
        if not short:
            return True
        from npuprof.results.extras import memory_from_trace_fix, not_produced_line

        self.left_for_room = f"its memory snapshot was not written ({short})"
        rank_dir = self.path.parent
        self.log(
            not_produced_line(
                rank_dir, "memory_timeline.*", self.left_for_room, memory_from_trace_fix(rank_dir)
            )
        )
        return False

    def _copy(self) -> None:
        from npuprof.agent.untraced import leave_trace

        leave_trace()
        started = time.thread_time()
        for _ in _walk(self.roots, self.events, self.tensors):
            if not self._hurry.is_set():
                spent = time.thread_time() - started
                self.cpu_s += spent
                time.sleep(max(PAUSE_S, spent * PAUSE_FACTOR))
                started = time.thread_time()
        self.cpu_s += time.thread_time() - started
        from npuprof.agent.log import get_log

        get_log().info(
            f"{self.path.parent.name}: memory snapshot: {len(self.events)} events, {len(self.tensors)} "
            f"tensors, {self.cpu_s * 1e3:.1f} ms of CPU in {_thread_name()}"
        )

    def encode(self) -> bytes:
        import msgspec
        import torch

        return msgspec.msgpack.encode(
            {
                "format": FORMAT,
                "version": VERSION,
                "torch": str(torch.__version__),
                "events": self.events,
                "tensors": self.tensors,
            },
            enc_hook=_encode_hook(),
        )


def _thread_name() -> str:
    from npuprof.agent import threads

    return "the training thread" if threads.on_main_thread() else "the hand-over thread"


def _failure(exc: BaseException) -> bytes:
    import msgspec

    return msgspec.msgpack.encode({"format": FORMAT, "version": VERSION, "error": repr(exc)})


def _walk(roots: list[Any], events: list[tuple[Any, ...]], tensors: list[tuple[Any, ...]]) -> Iterator[None]:
    """Copy the tree into ``events`` and ``tensors``, yielding every ``SLICE_EVENTS`` events."""
    from torch._C._profiler import (
        RecordScope,
        _ExtraFields_Allocation,
        _ExtraFields_PyCall,
        _ExtraFields_TorchOp,
        _TensorMetadata,
    )

    # Types and ints are compared, never the tree's enums: a pybind enum's == costs ~1.5 µs.
    op_fields, alloc_fields, py_fields = _ExtraFields_TorchOp, _ExtraFields_Allocation, _ExtraFields_PyCall
    metadata = _TensorMetadata
    backward = int(RecordScope.BACKWARD_FUNCTION)
    add_event, add_tensor = events.append, tensors.append

    def tensor(t: Any) -> int | None:
        if t is None:
            return None
        row = (t.id, t.storage_data_ptr, t.allocation_id, t.device, t.layout, t.sizes, t.strides, t.dtype)
        add_tensor(row)
        return len(tensors) - 1

    stack: list[tuple[Any, int]] = [(root, -1) for root in reversed(roots)]
    pop, push = stack.pop, stack.append
    traced, untrace = sys.getprofile, functools.partial(sys.setprofile, None)
    count = 0
    while stack:
        count += 1
        if count % SLICE_EVENTS == 0:
            yield
        # a capture started (most often during the pause after a slice): its Python tracer must not see
        # this copy, not even the tensors of the event taken on resuming
        if traced() is not None:
            untrace()
        event, parent = pop()
        fields = event.extra_fields
        kind = type(fields)
        index = len(events)
        if kind is op_fields:
            inputs: list[Any] = []
            tensor_mask = list_mask = 0
            for position, value in enumerate(fields.inputs):
                if type(value) is metadata:
                    tensor_mask |= 1 << position
                    inputs.append(tensor(value))
                elif type(value) is list and value and all(type(i) is metadata or i is None for i in value):
                    list_mask |= 1 << position
                    inputs.append([tensor(item) for item in value])
                else:
                    inputs.append(value)
            scope = int(fields.scope) == backward
            add_event((OP, parent, event.start_time_ns, event.name, scope, inputs, tensor_mask, list_mask))
        elif kind is alloc_fields:
            add_event(
                (
                    ALLOCATION,
                    parent,
                    event.start_time_ns,
                    fields.id,
                    fields.ptr,
                    fields.allocation_id,
                    fields.alloc_size,
                    fields.device,
                    fields.total_allocated,
                    fields.total_reserved,
                )
            )
        elif kind is py_fields and (fields.module is not None or fields.optimizer is not None):
            module, optimizer = fields.module, fields.optimizer
            module_params = (
                None if module is None else [[tensor(p), tensor(g)] for _, p, g in module.parameters]
            )
            optimizer_params = (
                None
                if optimizer is None
                else [
                    [tensor(p), tensor(g), [tensor(t) for _, t in state]]
                    for p, g, state in optimizer.parameters
                ]
            )
            add_event((PYCALL, parent, event.start_time_ns, module_params, optimizer_params))
        else:
            index = parent  # left out: its children hang from its parent
        children = event.children
        if children:
            for child in reversed(children):
                push((child, index))


def _encode_hook() -> Any:
    """Devices, dtypes and layouts as their names (each name made once); any other input value as
    ``{"opaque": type name}`` (torch's analysis tells such values apart by type only), complex numbers as
    ``{"complex": [re, im]}``."""
    import torch

    known = (torch.device, torch.dtype, torch.layout)
    names: dict[Any, str] = {}

    def hook(value: Any) -> Any:
        if isinstance(value, known):
            name = names.get(value)
            if name is None:
                name = names[value] = str(value)
            return name
        if isinstance(value, complex):
            return {"complex": [value.real, value.imag]}
        return {"opaque": type(value).__name__}

    return hook
