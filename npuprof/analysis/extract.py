"""One pass over a trace's events: keep, in compact numpy columns, only what the tables need.

:class:`Extract` is filled chunk by chunk (``add_chunk``), closed with ``finish()`` (which turns the
collected parts into the column arrays) and several can be merged (``merge``), so a trace can be read in
bounded memory and in parallel pieces.

Speed: a chunk is handled column-wise. Category and phase of every event are mapped to small codes with
C-level ``map`` calls, numpy picks the events each table needs, and the ``args`` of the selected events are
decoded in one msgspec call per kind (their raw texts joined into one JSON array). No Python code runs per
event for the events no table uses (``python_function``, flows, ...), which are most of a real trace.
Strings and threads get their ids in the order of their first appearance in the file, exactly as an
event-by-event walk would number them (the tables break ties by these ids).

Forms: every category name of the trace vocabulary (torch 2.x, torch 1.8-1.10's ``Operator``/``Kernel``/...
with ``external id``, torch_npu's ``trace_view.json``). A step is a ``user_annotation`` named
``ProfilerStep#N``, or an operator of that name (torch_npu, torch 1.8-1.10), which is then no operator.
Complete events of no category the tables know (torch_npu's device tasks carry none) wait in ``pending``
until their process's name is known (``process_name`` metadata may come anywhere in a trace, or in another
worker's byte range): those of a device process (vocabulary.DEVICE_PROCESS_RE: ``Ascend Hardware``,
``GPU 0``, ...) become device tasks, kind = their ``args["Task Type"]`` (Ascend), else their category;
the others are left out. Device events of a category the vocabulary does not know are counted and named
in one warning (:meth:`Extract.warnings`), never left out silently.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import operator
import re
from collections import Counter
from itertools import repeat
from operator import attrgetter
from typing import Any, Literal

import msgspec
import numpy as np

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.damaged import Damaged, negative_durations_note
from npuprof.analysis.trace_cut import Cut
from npuprof.analysis.trace_loader import (
    EMPTY_RAW,
    END_PROBLEM,
    NO_TIME,
    TIME_LIMIT,
    Bytes,
    ScanEvent,
    Time,
    TimeOrText,
    described_event,
    no_time,
)
from npuprof.analysis.trace_repairs import NOT_A_NUMBER


class EventError(ValueError):
    """An event the tables cannot read: its ``args`` are not of the types the profiler writes, or hold a
    number out of range. The message names the event."""


SCAN_DECODER = msgspec.json.Decoder(list[ScanEvent])


class OpArgs(msgspec.Struct, gc=False):
    ext: int = msgspec.field(name="External id", default=-1)
    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    stack: list[str] | str | None = msgspec.field(name="Call stack", default=None)
    dims_old: msgspec.Raw = msgspec.field(name="Input dims", default=msgspec.Raw(b""))  # torch 1.8-1.10
    ext_old: int = msgspec.field(name="external id", default=-1)  # torch 1.8-1.10's tasks' spelling


class KernelArgs(msgspec.Struct, gc=False):
    ext: int = msgspec.field(name="External id", default=-1)
    correlation: int = -1
    stream: int = -1
    device: int = -1
    grid: list[int] | None = None
    nbytes: int = msgspec.field(name="bytes", default=0)
    ext_old: int = msgspec.field(name="external id", default=-1)  # torch 1.8-1.10's spelling


class TaskArgs(KernelArgs, gc=False):
    """A device task of no known category (torch_npu's Ascend Hardware tasks)."""

    stream_id: int = msgspec.field(name="Stream Id", default=-1)
    task_type: str = msgspec.field(name="Task Type", default="")
    event_type: str = ""  # CANN's MsprofTx layer's marks and ranges (vocabulary.MSTX_ARGS_KEY)


NS_EXACT_BELOW = float(1 << 43)  # µs: below this a double's step is under 1 ns (Kineto's relative times are)
MEMORY_WITHOUT_TOTALS = (
    "{count} [memory] event(s) without 'Total Allocated' (a torch before 1.10): the memory figures are "
    "the running sum of their Bytes from the capture's start, not the allocator's totals"
)


class LaunchArgs(msgspec.Struct, gc=False):
    correlation: int = -1


class MemArgs(msgspec.Struct, gc=False):
    # NaN when absent: torch before 1.10 wrote only Bytes (analysis/memory.py sums them instead)
    allocated: Bytes = msgspec.field(name="Total Allocated", default=math.nan)
    reserved: Bytes = msgspec.field(name="Total Reserved", default=math.nan)  # unknown before torch 1.10
    nbytes: Bytes = msgspec.field(name="Bytes", default=0)
    addr: int = msgspec.field(name="Addr", default=0)
    device_type: int = msgspec.field(name="Device Type", default=0)
    device_id: int = msgspec.field(name="Device Id", default=-1)


_OP_ARGS = msgspec.json.Decoder(list[OpArgs])
_KERNEL_ARGS = msgspec.json.Decoder(list[KernelArgs])
_LAUNCH_ARGS = msgspec.json.Decoder(list[LaunchArgs])
_MEM_ARGS = msgspec.json.Decoder(list[MemArgs])
_TASK_ARGS = msgspec.json.Decoder(list[TaskArgs])
_ANY = msgspec.json.Decoder()
_WS = b" \t\r\n"
_NO_ARGS = b"{}"


_CPU_OP, _KERNEL, _MEMCPY, _MEMSET, _ANNOT, _GPU_ANNOT, _RUNTIME, _DRIVER, _UNCOUNTED, _PYFUNC = range(1, 11)
_NPU_FLOW = 11
_X, _INSTANT, _INSTANT2, _META = range(1, 5)
_CAT_CODES = {
    vocab.CPU_OP: _CPU_OP,
    vocab.KERNEL: _KERNEL,
    vocab.MEMCPY: _MEMCPY,
    vocab.MEMSET: _MEMSET,
    vocab.USER_ANNOTATION: _ANNOT,
    vocab.GPU_USER_ANNOTATION: _GPU_ANNOT,
    vocab.RUNTIME: _RUNTIME,
    vocab.DRIVER: _DRIVER,
}
_CAT_CODES.update({old: _CAT_CODES[new] for old, new in vocab.OLD_NAMES.items()})
_CAT_CODES.update({cat: _UNCOUNTED for cat in vocab.UNCOUNTED_CATS})
_CAT_CODES[vocab.PYTHON_FUNCTION] = _PYFUNC  # counted by no table either, but kept for the call stacks
_CAT_CODES[vocab.FLOW_ASYNC_NPU] = _NPU_FLOW  # torch_npu's operator -> device task links (launch_flows.py)
# pending (see the module's doc): the class of a process, by its name
_P_UNKNOWN, _P_DEVICE, _P_OTHER, _P_COMM = 0, 1, 2, 3
MSTX_KIND = "MsprofTx"  # the kind of a pending event of CANN's MsprofTx layer: the host's marks, no work
_PH_CODES = {"X": _X, "i": _INSTANT, "I": _INSTANT2, "M": _META}
_KIND_OF = {
    _KERNEL: vocab.TASK_KIND[vocab.KERNEL],
    _MEMCPY: vocab.TASK_KIND[vocab.MEMCPY],
    _MEMSET: vocab.TASK_KIND[vocab.MEMSET],
}

_CAT, _PH, _TS, _DUR = attrgetter("cat"), attrgetter("ph"), attrgetter("ts"), attrgetter("dur")
_NAME, _ARGS, _PID, _TID = attrgetter("name"), attrgetter("args"), attrgetter("pid"), attrgetter("tid")
_PIDTID = attrgetter("pid", "tid")
_ID = attrgetter("id")
_FLOW_ENDS = {"s": 1, "f": 2}  # the two ends of a flow the launch links read
_FLOW_PHASES = frozenset("sftC")  # flows and counters: written by Kineto, read by no table by design
_EXT, _DIMS, _STACK = attrgetter("ext"), attrgetter("dims"), attrgetter("stack")
_GRID = attrgetter("grid")
_DIMS_OLD = attrgetter("dims_old")

# column name -> dtype; these become numpy arrays in finish()
_COLUMNS = {
    "op_thread": np.int32,
    "op_ts": np.float64,
    "op_dur": np.float64,
    "op_name": np.int32,
    "op_shapes": np.int32,
    "op_stack": np.int32,
    "op_ext": np.int64,
    "dev_name": np.int32,
    "dev_ts": np.float64,
    "dev_dur": np.float64,
    "dev_ext": np.int64,
    "dev_corr": np.int64,
    "dev_stream": np.int64,
    "dev_device": np.int64,
    "dev_blocks": np.int64,
    "launch_corr": np.int64,
    "launch_ts": np.float64,
    "launch_dur": np.float64,
    "launch_pid": np.int64,  # -1 where the trace's id is not a number
    "launch_tid": np.int64,
    "mem_ts": np.float64,
    "mem_thread": np.int32,
    "mem_alloc": np.float64,
    "mem_reserved": np.float64,
    "mem_bytes": np.float64,
    "mem_addr": np.int64,
    "mem_devtype": np.int32,
    "mem_devid": np.int32,
}
# X events of no known category, until their process is known (see the module's doc)
_PENDING = {
    "p_name": np.int32,
    "p_cat": np.int32,
    "p_kind": np.int32,
    "p_ts": np.float64,
    "p_dur": np.float64,
    "p_thread": np.int32,
    "p_ext": np.int64,
    "p_corr": np.int64,
    "p_stream": np.int64,
    "p_device": np.int64,
    "p_blocks": np.int64,
}
# the complete python_function events (frames), for call_stacks.PythonFrames; their threads and names are
# numbered apart (``frame_threads``, ``frame_names``) so that the tables' ids stay as they are without them
_FRAMES = {
    "f_thread": np.int32,
    "f_ts": np.float64,
    "f_dur": np.float64,
    "f_name": np.int32,
    "f_id": np.int64,
    "f_parent": np.int64,
}
# the ends of torch_npu's async_npu flows (launch_flows.py): flow id, start (1) or finish (0), where, when
_FLOWS = {
    "fl_id": np.int64,
    "fl_start": np.int8,
    "fl_pid": np.int64,
    "fl_tid": np.int64,
    "fl_ts": np.float64,
}
# the complete events of torch_npu's communication process (``HCCL`` / ``Communication``): its collectives
# (``hcom_allReduce__123_0`` on ``Group <g> Communication`` threads) and their tasks (``Plane <n>`` threads)
_COMM_TASKS = {
    "cx_name": np.int32,
    "cx_ts": np.float64,
    "cx_dur": np.float64,
    "cx_thread": np.int32,
}
_DTYPES = {**_COLUMNS, **_PENDING, **_FRAMES, **_FLOWS, **_COMM_TASKS}
_DURATIONS = [name for name in _DTYPES if name.endswith("_dur") and name != "p_dur"]  # p_: still pending
_STRING_COLUMNS = ("op_name", "op_shapes", "op_stack", "dev_name", "p_name", "p_cat", "p_kind", "cx_name")


def _task_kind(args: TaskArgs) -> str:
    """A pending event's kind: its ``Task Type``, else MSTX_KIND for a mark or range of CANN's MsprofTx
    layer, else none."""
    return args.task_type or (MSTX_KIND if args.event_type else "")


def _is_int64(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63


def _joined(raws: list[Any]) -> bytes:
    """The raw ``args`` texts as one JSON array (missing args as ``{}``)."""
    return b"[" + b",".join([r if r else _NO_ARGS for r in raws]) + b"]"


def _pick(seq: list[Any], idx: np.ndarray) -> list[Any]:
    return list(map(seq.__getitem__, idx.tolist()))


def positions(values: list[Any], wanted: Any) -> list[int]:
    """Indices of ``wanted`` in ``values`` (list.index: no Python code per element)."""
    found: list[int] = []
    at = -1
    while True:
        try:
            at = values.index(wanted, at + 1)
        except ValueError:
            return found
        found.append(at)


def _step_positions(names: list[str]) -> list[int]:
    """Indices of the names that are ``ProfilerStep#N`` (found in the joined text: no Python code per
    name; one at a time when a name holds the newline that joins them)."""
    joined = "\n".join(names)
    if joined.count("\n") != len(names) - 1:
        return [k for k, name in enumerate(names) if vocab.STEP_RE.match(name)]
    found: list[int] = []
    k = counted = 0
    at = joined.find(vocab.STEP_PREFIX)
    while at >= 0:
        if at == 0 or joined[at - 1] == "\n":
            k += joined.count("\n", counted, at)
            counted = at
            if vocab.STEP_RE.match(names[k]):
                found.append(k)
        at = joined.find(vocab.STEP_PREFIX, at + 1)
    return found


def _external_ids(kargs: list[Any]) -> np.ndarray:
    """The tasks' or operators' ``External id`` (torch 1.8-1.10: ``external id``); -1 when none."""
    ext = np.fromiter(map(_EXT, kargs), np.int64, len(kargs))
    if (ext < 0).any():
        old = np.fromiter(map(attrgetter("ext_old"), kargs), np.int64, len(kargs))
        ext = np.where(ext >= 0, ext, old)
    return ext


# What the reader reads an arg of NaN or Infinity as (trace_repairs: no JSON, read as unknown). Where the
# value is only shown, stands in for one the tables find elsewhere (a kernel's stream: its thread; its
# device: its process), or links an event to another (an External id, a correlation: the event is then
# linked to none, as one without it; helper-351: a kernel whose External id was NaN was left out, its device
# time lost from its step), it reads as absent and the event is kept; where a figure needs it (a [memory]
# event's Bytes and totals) the event is left out as damaged, said as NaN or Infinity (docs/formats.md,
# "Values torch wrote that are no JSON").
_NOT_A_NUMBER_TEXT = f'"{NOT_A_NUMBER}"'.encode()
_LINKS = ("External id", "external id", "correlation")
_READ_AS_ABSENT = {
    _KERNEL_ARGS: frozenset(("stream", "device", "grid", "bytes", *_LINKS)),
    _OP_ARGS: frozenset(_LINKS),
    _LAUNCH_ARGS: frozenset(_LINKS),
}


def _args_of(decoder: msgspec.json.Decoder, raws: list[Any]) -> list[Any]:
    """The raw ``args`` decoded together; args that are no object (``null``, ``[1, 2]``: a trace edited by
    hand) read as ``{}`` instead of making the whole trace unreadable, and an arg of NaN or Infinity that
    reads as absent (_READ_AS_ABSENT) as absent. Other faults raise as before."""
    try:
        return decoder.decode(_joined(raws))
    except msgspec.ValidationError:
        objects = [r if r and bytes(r).lstrip()[:1] == b"{" else _NO_ARGS for r in raws]
        absent = _READ_AS_ABSENT.get(decoder)
        if absent:
            objects = [_without_not_a_number(r, absent) for r in objects]
        return decoder.decode(_joined(objects))


def _without_not_a_number(raw: Any, keys: frozenset[str] | None) -> Any:
    """``raw`` (an event's ``args`` object) without the keys of ``keys`` (None: any key) whose value is an
    arg of NaN or Infinity, or a list holding one; ``raw`` itself when it has none."""
    if not raw or _NOT_A_NUMBER_TEXT not in bytes(raw):
        return raw
    args = _object_of(raw)
    unknown = [k for k, v in args.items() if (keys is None or k in keys) and _not_a_number(v)]
    if not unknown:
        return raw
    for key in unknown:
        del args[key]
    return msgspec.json.encode(args)


def _not_a_number(value: Any) -> bool:
    return value == NOT_A_NUMBER or (isinstance(value, list) and NOT_A_NUMBER in value)


def _task_args(raws: list[Any]) -> list[TaskArgs]:
    """The args of events of no known category, as TaskArgs; args of other shapes (these events belong to
    no table until their process says so) give the defaults instead of an error: the one of NaN or Infinity
    alone where it is one (a torch_npu task's Stream Id: its Task Type is kept)."""
    try:
        return _TASK_ARGS.decode(_joined(raws))
    except (msgspec.DecodeError, OverflowError):
        pass
    out = []
    for raw in raws:
        try:
            out.append(_TASK_ARGS.decode(_joined([_without_not_a_number(raw, None)]))[0])
        except (msgspec.DecodeError, OverflowError):
            out.append(TaskArgs())
    return out


def _blocks(grid: list[int] | None) -> int:
    """Thread blocks of a kernel launch: the product of its grid (0 when it has none)."""
    return math.prod(grid) if grid else 0


_FRAME_ID, _FRAME_PARENT = attrgetter("id"), attrgetter("parent")


def _frame_ids(raws: list[Any]) -> list[Any]:
    """The FrameIds of python_function events from their raw args; None for args that are no object."""
    try:
        return _FRAME_IDS.decode(_joined(raws))
    except msgspec.DecodeError:
        pass
    out = []
    for raw in raws:
        try:
            out.append(_FRAME_IDS.decode(_joined([raw]))[0])
        except msgspec.DecodeError:
            out.append(None)
    return out


def id_column(values: list[Any]) -> np.ndarray:
    """Python ids as int64, -1 for a missing one (None, or not a non-negative integer below 2**53)."""
    if set(map(type, values)) <= {int, type(None)}:
        column = np.array(values, dtype=np.float64)  # None -> nan
        ok = np.isfinite(column) & (column >= 0) & (column < 2.0**53)
        return np.where(ok, np.nan_to_num(column), -1).astype(np.int64)
    return np.array([_int_or(v) for v in values], dtype=np.int64)


def _id_or_none(value: Any) -> int:
    """A process or thread id as int64, -1 for one that is not a number in range ("stream 7")."""
    return value if type(value) is int and 0 <= value < 1 << 62 else -1


def _int_or(value: Any, default: int = -1) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62 else default
    )


def _first_bad_event(events: list[Any], error: Exception) -> str:
    """The first of ``events`` that an Extract cannot read on its own, described, with why."""
    for event in events:
        try:
            Extract()._add_chunk([event], None)
        except (msgspec.DecodeError, OverflowError) as exc:
            return f"cannot read the event {described_event(event)}: {_args_problem(exc, event)}"
    return f"cannot read the events: {_args_problem(error)}"


def first_unreadable(events: list[Any]) -> str | None:
    """The first of ``events`` (as the scan's decoder reads them) whose args an Extract cannot read,
    described as :meth:`Extract.add_chunk` says it when it leaves it out; None when it reads them all. The
    reader asks it of the events before the first it leaves out itself, so that the first damaged event
    quoted is the file's first (docs/formats.md, "Damaged events")."""
    try:
        Extract()._add_chunk(events, None)
        return None
    except (msgspec.DecodeError, OverflowError):
        pass
    for event in events:
        try:
            Extract()._add_chunk([event], None)
        except (msgspec.DecodeError, OverflowError) as exc:
            return f"cannot read the event {described_event(event)}: {_args_problem(exc, event)}"
    return None


_FAILED_KEY = re.compile(r" - at `\$\[0\]\.([^`\[]+)")  # msgspec's path: "... - at `$[0].Bytes`"


def _args_problem(exc: Exception, event: Any = None) -> str:
    if isinstance(exc, OverflowError):
        return "a number in its args is out of range"
    failed = _FAILED_KEY.search(str(exc))
    if failed and _not_a_number(_object_of(getattr(event, "args", None)).get(failed[1])):
        # read as "?" (trace_repairs), which the type's message would name as a string the trace lacks
        return f"args.{failed[1]} is NaN or Infinity"
    return str(exc).replace("`$[0]", "`args")


def _object_of(raw: Any) -> dict[str, Any]:
    """Raw JSON ``args`` (an event's as the scan's decoder reads them) decoded; {} when they are no
    object."""
    if not isinstance(raw, msgspec.Raw | bytes | bytearray) or not raw:
        return {}
    try:
        args = _ANY.decode(raw)
    except msgspec.DecodeError:
        return {}
    return args if isinstance(args, dict) else {}


class _DimsText(dict):
    """Raw ``Input Dims`` bytes -> the text the tables show, Kineto's (``[[4],[8,4],[]]``, spaces removed);
    b"" -> None. torch_npu's string (``"4;\r\n8,4;\r\n"``: each input's dims joined by ``,``, inputs by
    ``;``, docs/formats.md) is read into Kineto's form, so that every table reads one form."""

    def __missing__(self, key: bytes) -> str | None:
        value = key.translate(None, _WS).decode() if key else None
        if value is not None and value.startswith('"'):
            value = _kineto_dims(value)
        self[key] = value
        return value


def _kineto_dims(text: str) -> str:
    """torch_npu's ``Input Dims`` string (as JSON text) in Kineto's list form; as it is when it is not
    a ``;``-joined list of ``,``-joined integers (helper-122: read as no shapes)."""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
    dims = npu_dims(value) if isinstance(value, str) else None
    return text if dims is None else msgspec.json.encode(dims).decode()


def npu_dims(text: str) -> list[list[int]] | None:
    """torch_npu's ``Input Dims`` string (``"4;\r\n8,4;\r\n"``: each input's dims joined by ``,``, the
    inputs by ``;``) as Kineto's list (``[[4], [8, 4], []]``); None when it is not of that form."""
    parts = text.replace("\r", "").replace("\n", "").split(";")
    try:
        return [[int(d) for d in part.split(",")] if part else [] for part in parts] if parts != [""] else []
    except ValueError:
        return None


_CORR = attrgetter("correlation")
_ARGS_CORR = attrgetter("args.correlation")


class OpArgsTyped(OpArgs, gc=False):
    """OpArgs plus what communication needs of a ``record_param_comms`` operator."""

    coll: Any = msgspec.field(name="Collective name", default=None)
    in_nelems: Any = msgspec.field(name="In msg nelems", default=None)
    out_nelems: Any = msgspec.field(name="Out msg nelems", default=None)
    dtype: Any = None
    pg_name: Any = msgspec.field(name="Process Group Name", default=None)
    pg_ranks: Any = msgspec.field(name="Process Group Ranks", default=None)


_COMM_FIELDS = (
    ("Collective name", "coll"),
    ("In msg nelems", "in_nelems"),
    ("Out msg nelems", "out_nelems"),
    ("dtype", "dtype"),
    ("Process Group Name", "pg_name"),
    ("Process Group Ranks", "pg_ranks"),
)


def _comm_args(args: OpArgsTyped) -> dict[str, Any]:
    ext = args.ext if args.ext != -1 else args.ext_old
    out: dict[str, Any] = {"External id": ext} if ext != -1 else {}
    for key, attr in _COMM_FIELDS:
        value = getattr(args, attr)
        if value is not None:
            out[key] = value
    return out


class _Typed(msgspec.Struct, tag_field="cat", kw_only=True, gc=False):
    """Typed events, one struct per category (the ``cat`` tag): msgspec skips what a category does not
    need (all of a ``python_function`` event but its times) and decodes ``args`` in the same pass. Each
    category admits only the phases Kineto writes for it (complete events, flows, instants), so that a
    chunk decoded this way never needs the phase-dependent rules of the generic walk."""

    ts: TimeOrText = NO_TIME
    dur: Time = NO_TIME


class _TOp(_Typed, tag=vocab.CPU_OP, gc=False):
    ph: Literal["X"]
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: OpArgsTyped = msgspec.field(default_factory=OpArgsTyped)


class _TKernel(_Typed, tag=vocab.KERNEL, gc=False):
    ph: Literal["X"]
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: KernelArgs = msgspec.field(default_factory=KernelArgs)


class _TMemcpy(_TKernel, tag=vocab.MEMCPY, gc=False):
    pass


class _TMemset(_TKernel, tag=vocab.MEMSET, gc=False):
    pass


class _TAnnot(_Typed, tag=vocab.USER_ANNOTATION, gc=False):
    ph: Literal["X"]
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: msgspec.Raw = EMPTY_RAW


class _TGpuAnnot(_TAnnot, tag=vocab.GPU_USER_ANNOTATION, gc=False):
    pass


class _TRuntime(_Typed, tag=vocab.RUNTIME, gc=False):
    ph: Literal["X"]
    pid: int | str = 0
    tid: int | str = 0
    args: LaunchArgs = msgspec.field(default_factory=LaunchArgs)


class _TDriver(_TRuntime, tag=vocab.DRIVER, gc=False):
    pass


class _TInstant(_Typed, tag=vocab.CPU_INSTANT, gc=False):
    ph: Literal["i", "I"]
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: MemArgs | None = None


class FrameIds(msgspec.Struct, gc=False):
    """Kineto's ids of a ``python_function`` frame (any JSON value; see :func:`id_column`)."""

    id: Any = msgspec.field(name="Python id", default=None)
    parent: Any = msgspec.field(name="Python parent id", default=None)


_FRAME_IDS = msgspec.json.Decoder(list[FrameIds | None])
_NO_IDS = FrameIds()


class _TPython(_Typed, tag=vocab.PYTHON_FUNCTION, gc=False):
    """A Python frame: what the call stacks need (call_stacks.PythonFrames)."""

    ph: Literal["X"]
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: FrameIds | None = None


class _THost(_Typed, tag=vocab.OVERHEAD, gc=False):
    ph: Literal["X"]


class _TSync(_THost, tag=vocab.CUDA_SYNC, gc=False):
    pass


class _TRange(_THost, tag=vocab.PROFILER_RANGE, gc=False):
    pass


class _TTrace(_THost, tag=vocab.TRACE, gc=False):
    pass


class _TFlow(_Typed, tag=vocab.FLOW_LAUNCH, gc=False):
    ph: Literal["s", "f", "t"]


class _TFwdBwd(_TFlow, tag=vocab.FLOW_FWDBWD, gc=False):
    pass


_K_OP, _K_LAUNCH, _K_INST, _K_OTHER, _K_FLOW, _K_PY = _CPU_OP, 20, 21, 0, 22, 23
_KIND_CODES: dict[type, int] = {
    _TOp: _K_OP,
    _TKernel: _KERNEL,
    _TMemcpy: _MEMCPY,
    _TMemset: _MEMSET,
    _TAnnot: _ANNOT,
    _TGpuAnnot: _GPU_ANNOT,
    _TRuntime: _K_LAUNCH,
    _TDriver: _K_LAUNCH,
    _TInstant: _K_INST,
    _TPython: _K_PY,
    _THost: _K_OTHER,
    _TSync: _K_OTHER,
    _TRange: _K_OTHER,
    _TTrace: _K_OTHER,
    _TFlow: _K_FLOW,
    _TFwdBwd: _K_FLOW,
}
# Decodes chunks whose events all have a known category; any other chunk fails validation and is decoded
# with SCAN_DECODER instead (see TraceReader's ``fallback``).
TYPED_DECODER = msgspec.json.Decoder(list[functools.reduce(operator.or_, _KIND_CODES)])  # type: ignore[misc]


# what add_chunk changes, undone when a chunk fails half-way (Extract._mark, _rollback)
_SCALARS = ("event_count", "timeless", "first_ts", "last_ts", "mem_without_totals")
_GROWING = (
    "strings",
    "string_ids",
    "threads",
    "thread_names",
    "steps",
    "comm_spans",
    "data_fetches",
    "dev_kind",
    "dev_pid",
    "dev_tid",
    "mstx",
    "frame_threads",
    "frame_names",
    "_frame_name_ids",
)
_COUNTERS = ("unread_phases", "unread_categories", "unread_uncategorised")


class _Selection:
    """The events of one chunk each table uses (indices into the chunk, the events, their args)."""

    def __init__(self, events: list[Any]) -> None:
        empty = np.zeros(0, np.int64)
        self.events = events
        self.oi, self.ops, self.oargs = empty, [], []
        self.di, self.devs, self.dev_cats, self.kargs = empty, [], empty, []
        self.ai, self.ann_cats = empty, empty
        self.ri, self.corr = empty, empty
        self.mi, self.mems, self.margs = empty, [], []
        self.pi, self.pend, self.pargs = empty, [], []
        self.meta = empty


class Extract:
    """Columns of the events the tables use. Strings are interned into ``strings`` (index = id); threads
    ``(pid, tid)`` into ``threads``. After ``finish()`` every column named in ``_COLUMNS`` is a numpy array
    in file order; ``dev_kind`` and ``dev_pid`` are lists, ``dev_tid`` too (the tids of the tasks known by
    their category, in file order: all of them unless a process's name made others device tasks)."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.string_ids: dict[str, int] = {}
        self.threads: dict[tuple[Any, Any], int] = {}
        self.thread_names: dict[int, str] = {}
        self.process_names: dict[Any, str] = {}
        self.steps: list[tuple[int, float, float, int]] = []  # number, ts, dur, thread
        # spans named ProfilerStep#N inside a step of their thread: a record_function of the user's
        # (_drop_nested_steps), not a step
        self.nested_steps: list[tuple[int, float, float, int]] = []
        # host-side communication spans (gloo:..., record_param_comms): name, ts, dur, thread, args dict
        self.comm_spans: list[tuple[str, float, float, int, dict[str, Any]]] = []
        # the DataLoader's batch fetches recorded as user annotations (vocabulary.is_data_fetch): ts, dur,
        # thread (those recorded as operators are among the operators)
        self.data_fetches: list[tuple[float, float, int]] = []
        self.dev_kind: list[str] = []
        self.dev_pid: list[Any] = []
        self.dev_tid: list[Any] = []
        self.first_ts = float("inf")
        self.last_ts = float("-inf")
        self.event_count = 0
        # device events of a category the vocabulary does not know: (process name, category) -> count
        self.unknown_device_work: dict[tuple[str, str], int] = {}
        # events no table reads, said when they may be what the trace is made of: phases other than
        # torch's (Chrome's "B"/"E" pairs) by phase, and complete events of categories the vocabulary
        # does not know outside device processes (torch_npu's CANN calls among them) by category
        self.unread_phases: Counter[str] = Counter()
        self.timeless = 0  # complete events without a ts or a dur: left out
        self.repaired_strings = 0  # unpaired surrogate escapes and bytes not UTF-8 (TraceReader)
        self.repaired_names = 0  # names Kineto wrote with a '"' or a control character in them (TraceReader)
        self.repaired_values: Counter[str] = (
            Counter()
        )  # values torch wrote that are no JSON, by kind (TraceReader)
        self.negative_durations = 0  # events whose negative dur is read as 0 (_zero_negative_durations)
        self.damaged = Damaged()  # events left out as damaged (TraceReader's; analysis/damaged.py)
        self.unread_categories: Counter[str] = Counter()
        # complete events of no category left out of processes of no known kind (by process name): device
        # work, perhaps, of a process npuprof does not know as a device's
        self.unread_uncategorised: Counter[str] = Counter()
        # the marks and ranges of a trace_view.json's MsprofTx layer (CANN's mstx: no category, args
        # event_type): (name, pid, tid, ts, dur), read by analysis/annotations.py when no side file has them
        self.mstx: list[tuple[str, Any, Any, float, float]] = []
        self._pid_class: dict[Any, int] = {}  # pid -> _P_DEVICE, _P_COMM or _P_OTHER, once its name is known
        self.mem_without_totals = 0  # [memory] events with Bytes but no Total Allocated (torch < 1.10)
        # pids whose process_labels name a device ("GPU 0"): Kineto names a GPU's process after the host's
        # ("python") and says "GPU N" only there
        self.device_labelled: set[Any] = set()
        self.frame_threads: dict[tuple[Any, Any], int] = {}
        self.frame_names: list[str] = []
        self._frame_name_ids: dict[str, int] = {}
        # how reading the trace serially from its first event cuts it into chunks, as far as the scan's
        # first range tells (TraceReader.cuts): (where a chunk starts, bytes read when it was cut)
        self.cuts: list[tuple[int, int]] = []
        self.cut: Cut | None = None  # the trace is cut short (set by the scan: analysis/trace_cut.py)
        self.open_steps: list[int] = []  # the numbers of the steps the cut left open, left out
        # the cut is in a part Kineto writes after every operator (Cut.after_ops), all of them read: "memory"
        # (its [memory] events read up to memory_until, the Python functions none) or "python"; else ""
        self.ops_whole = ""
        self.memory_until: float | None = None
        self._parts: dict[str, list[np.ndarray]] = {name: [] for name in _DTYPES}
        self._dims = _DimsText()
        for name, dtype in _DTYPES.items():
            setattr(self, name, np.zeros(0, dtype))

    def intern(self, text: str) -> int:
        sid = self.string_ids.get(text)
        if sid is None:
            sid = self.string_ids[text] = len(self.strings)
            self.strings.append(text)
        return sid

    def thread(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        found = self.threads.get(key)
        if found is None:
            found = self.threads[key] = len(self.threads)
        return found

    def finish(self) -> Extract:
        """Turn the parts collected by ``add_chunk`` into the column arrays, and the pending events of
        processes now known into device tasks (or leave them out); returns self."""
        self._concatenate()
        if len(self.p_ts):
            self._resolve_pending()
            self._concatenate()
        self._zero_negative_durations()
        self._drop_nested_steps()
        return self

    def take_cut(self, cut: Cut | None, device_last: bool = False, device_possible: bool = False) -> None:
        """The trace is cut short (``cut``): the steps the cut may have left open are left out of
        ``steps`` (docs/formats.md, "Traces cut short"). Neither torch nor torch_npu writes its events in
        time order (each thread's operators, then the Python functions, the device's work...), but each
        part in it: a step that ends after the start of the last event read (in the file's order) may miss
        events the cut took; one that ends before it is read whole, as far as the parts written before the
        cut go: the device's work comes after the host's, so a step with a launch whose device work was not
        read is left out too. ``device_last``: the trace's device work, if any, comes after all its host
        events, with no launch of it among them that tells (torch_npu's trace_view.json: its NPU tasks after
        every host event, their flows last): while none of it is read, no step is whole. A cut after the
        events (in the keys after them) leaves every step whole. Kineto writes each thread's operators then
        its ``[memory]`` events, thread after thread, then every Python function: a cut in the Python
        functions, or in the [memory] events of the last thread (every thread its metadata names has events
        read), has all the operators: every step is whole for the operator and step tables
        (:meth:`after_ops_note` says what is partial), unless the trace may hold device work
        (``device_possible``: its header names a GPU; or device work, a launch, a device's [memory] event
        read), which Kineto writes after them: then the rule above."""
        self.cut = cut
        if cut is None or cut.in_keys:
            return
        if (
            cut.after_ops
            and not device_possible
            and not self._device_seen()
            and (cut.after_ops == "python" or self._every_thread_read())
        ):
            self.ops_whole = cut.after_ops
            self.memory_until = cut.last_ts if cut.after_ops == "memory" else None
            return
        if not self.steps:
            return
        last = cut.last_ts
        if last is None:  # no event read has a time: the latest step is the one the cut is likeliest in
            last = max(ts for _n, ts, _d, _t in self.steps)
        if device_last and not len(self.dev_ts):
            last = -math.inf
        unmatched = self._launches_without_device_work()
        kept = [
            s
            for s in self.steps
            if s[1] + s[2] <= last
            and s[1] < last
            and not ((unmatched >= s[1]) & (unmatched <= s[1] + s[2])).any()
        ]
        self.open_steps = sorted({s[0] for s in self.steps} - {s[0] for s in kept})
        self.steps = kept

    def _device_seen(self) -> bool:
        """Whether any event read is, or tells of, a device's work: a device task (or one pending its
        process's name), a runtime launch, a ``[memory]`` event of a device other than the CPU."""
        return bool(
            len(self.dev_ts)
            or len(self.p_ts)
            or len(self.launch_corr)
            or (np.asarray(self.mem_devtype) != 0).any()
        )

    def _every_thread_read(self) -> bool:
        """Whether every thread the trace's metadata names (Kineto names them all before its events) has
        events read: an operator, a [memory] event, a step or a collective's span."""
        named = set(self.thread_names)
        read = {int(t) for column in (self.op_thread, self.mem_thread) for t in np.unique(column).tolist()}
        read |= {s[3] for s in self.steps} | {span[3] for span in self.comm_spans}
        return bool(named) and named <= read

    def after_ops_note(self) -> str:
        """What a cut after every operator (:attr:`ops_whole`) leaves partial: a clause of the cut's line."""
        if self.ops_whole == "memory":
            return (
                "; the cut is in the last thread's [memory] events, which Kineto writes after every "
                "operator, all read: the operator and step (breakdown) tables are whole; memory_record.csv, "
                "operator_memory.csv and the memory peaks are partial (none for a step that ends after the "
                "last [memory] event read), and the call stacks lost (the Python functions come after)"
            )
        if self.ops_whole == "python":
            return (
                "; the cut is in the Python functions Kineto writes after every operator and [memory] event, "
                "all read: the operator, step (breakdown) and memory tables are whole; the call stacks are "
                "partial"
            )
        return ""

    def _launches_without_device_work(self) -> np.ndarray:
        """The start times of the launches read whose device work may not have been: in a trace cut short,
        the device's work is written after the host's (Kineto: every CPU activity, then the GPU's), so a
        step whose host events all came before the cut may still have lost its device work to it. A runtime
        call has a correlation whether it launches work or not (cudaStreamSynchronize), and correlations
        grow with the calls: those past the last one whose work was read may have lost it; all of them when
        none was read."""
        corr = np.asarray(self.launch_corr, dtype=np.int64)
        if not len(corr):
            return np.empty(0)
        done = np.concatenate(
            [np.asarray(self.dev_corr, dtype=np.int64), np.asarray(self.p_corr, dtype=np.int64)]
        )
        reached = int(done.max()) if len(done) else -1
        return np.asarray(self.launch_ts, dtype=np.float64)[corr > reached]

    def cut_summary(self) -> dict[str, Any]:
        """The summary's ``cut_short`` (summary_schema.CutShort); the trace is cut (``cut``)."""
        cut = self.cut
        assert cut is not None
        return {
            "text_bytes": cut.size - cut.nuls,
            "events_end": cut.events_end,
            "events_read": self.event_count,
            "after_events": cut.in_keys,
            "steps_left_out": self.open_steps,
        }

    def _open_steps_note(self) -> str:
        if not self.open_steps:
            return ""
        shown = ", ".join(map(str, self.open_steps[:10])) + (", ..." if len(self.open_steps) > 10 else "")
        rest = "" if self.steps else " (no step is whole: the figures are those of all the events read)"
        return (
            f"; step(s) {shown} left out of the steps: each ends after the start of the last event read, or "
            f"launched device work that was not read, so the cut may have taken some of its events{rest}"
        )

    def _drop_nested_steps(self) -> None:
        """torch's profiler steps follow one another on their thread (each ``prof.step()`` closes one and
        opens the next): a ``ProfilerStep#N`` span that lies inside another of the same thread is a
        ``record_function`` the script named so, not a step (helper-137: two such ranges were two steps of
        the table, and each iteration's real step overlapped them)."""
        spans = sorted(self.steps, key=lambda s: (s[3], s[1], -s[2]))
        nested: list[tuple[int, float, float, int]] = []
        holder: tuple[int, float, float, int] | None = None
        for step in spans:
            _num, ts, dur, thread = step
            inside = holder is not None and holder[3] == thread and vocab.step_inside(ts, dur, *holder[1:3])
            if inside:
                nested.append(step)
                continue
            holder = step
        if nested:
            dropped = set(map(id, nested))
            self.steps = [s for s in self.steps if id(s) not in dropped]
            self.nested_steps.extend(nested)

    def _time_grain(self) -> float | None:
        """The step of a double at the trace's times, when they are too large for it to hold each ns and
        they were written with decimals (helper-112: a Kineto of 2024 that wrote absolute epoch µs with ns
        decimals read 0.25 µs steps, unsaid); None otherwise. Whole µs (torch before 2.4) are exact."""
        top = max((float(a.max()) for a in (self.op_ts, self.dev_ts) if len(a)), default=0.0)
        if not math.isfinite(top) or top < NS_EXACT_BELOW:
            return None
        if not any(len(a) and bool((a != np.floor(a)).any()) for a in (self.op_ts, self.dev_ts)):
            return None
        return float(np.spacing(top))

    def _zero_negative_durations(self) -> None:
        """A negative ``dur`` (no profiler writes one: damage or an edit) counts as 0 µs in every table:
        the step figures' unions passed such an event over, while the kernel and operator tables summed
        it (a top kernel of -999994.528 ms beside the steps' own figures, helper-112)."""
        for name in _DURATIONS:
            values = getattr(self, name)
            negative = values < 0
            if negative.any():
                self.negative_durations += int(negative.sum())
                values[negative] = 0.0
        if any(dur < 0 for _num, _ts, dur, _t in self.steps):
            self.negative_durations += sum(1 for _num, _ts, dur, _t in self.steps if dur < 0)
            self.steps = [(num, ts, max(dur, 0.0), t) for num, ts, dur, t in self.steps]

    def _concatenate(self) -> None:
        for name, parts in self._parts.items():
            if parts:
                parts.insert(0, getattr(self, name))
                dtype = _DTYPES[name]
                setattr(self, name, np.concatenate(parts).astype(dtype, copy=False))
                parts.clear()

    def warnings(self) -> list[str]:
        """What the tables could not fully understand or had to pass over, one line each: device events
        of categories the vocabulary does not know (counted as device tasks), step numbers that repeat
        (the first span of each is the step), negative durations (no profiler writes them)."""
        notes = []
        if not self.event_count:
            notes.append(f"{vocab.NO_EVENTS}: nothing was recorded (an empty capture, or one emptied)")
        if self.hccl_without_tasks():
            notes.append(
                "torch_npu's HCCL process but no device task (no Ascend Hardware process): an NPU trace "
                "without its device's tasks; Computing is 0 (the host's operators are not the device's "
                "work), communication is HCCL's"
            )
        if self.unknown_device_work:
            notes.append(vocab.unknown_device_work_note(self.unknown_device_work, "counted as device tasks"))
        if self.mem_without_totals:
            notes.append(MEMORY_WITHOUT_TOTALS.format(count=self.mem_without_totals))
        if len(self.p_ts):  # still pending at the end: their process was never named
            keys = list(self.threads)
            pids = sorted({str(keys[t][0]) for t in self.p_thread.tolist()})
            cats = Counter(self.strings[c] if c >= 0 else "" for c in self.p_cat.tolist())
            shown = ", ".join(f"{cat or '(none)'} x{n}" for cat, n in cats.most_common(5))
            notes.append(
                f"{len(self.p_ts)} complete event(s) of categories the tables do not know ({shown}) in "
                f"process(es) {', '.join(pids[:5])} with no process_name: left out "
                f"({vocab.MAYBE_DEVICE_WORK}); device work there "
                'would be counted once its process is named (e.g. "GPU 0", "Ascend Hardware")'
            )
        if self.unread_uncategorised:
            shown = ", ".join(f'"{name}" x{k}' for name, k in self.unread_uncategorised.most_common(5))
            notes.append(
                f"{self.unread_uncategorised.total()} complete event(s) of no category in process(es) of no "
                f"kind npuprof knows ({shown}) were left out ({vocab.MAYBE_DEVICE_WORK}): device work is "
                "counted only in a process "
                'named as a device\'s ("Ascend Hardware", "GPU 0", "NPU 0", ...) and collectives in '
                '"HCCL" or "Communication"'
            )
        if self.repaired_strings:
            from npuprof.analysis.trace_repairs import not_text_note

            notes.append(not_text_note(self.repaired_strings))
        if self.repaired_names:
            from npuprof.analysis.trace_repairs import unescaped_note

            notes.append(unescaped_note(self.repaired_names))
        if self.repaired_values:
            from npuprof.analysis.trace_repairs import unwritten_notes

            notes.extend(unwritten_notes(self.repaired_values))
        if self.cut is not None:
            notes.append(self.cut.note(self.event_count) + self._open_steps_note() + self.after_ops_note())
        if self.damaged.total:
            notes.append(self.damaged.note())
        if self.timeless:
            notes.append(
                f"{self.timeless} complete event(s) without a ts or a dur were left out (no profiler writes "
                "them so: the trace was edited or damaged)"
            )
        if self.unread_phases:
            shown = ", ".join(f'"{p}" x{k}' for p, k in self.unread_phases.most_common(5))
            notes.append(
                f"{self.unread_phases.total()} event(s) of phases the tables do not read ({shown}) were "
                'left out: npuprof reads complete "X" events, as torch and torch_npu write them (a trace '
                "of begin/end pairs is read as empty)"
            )
        if self.unread_categories and not len(self.op_ts) and not len(self.dev_ts):
            shown = ", ".join(f"{c or '(none)'} x{k}" for c, k in self.unread_categories.most_common(5))
            notes.append(
                f"no operator or device events of the categories npuprof reads (cpu_op, kernel, ...): "
                f"{self.unread_categories.total()} complete event(s) of other categories ({shown}) were "
                "left out, so every step reads as free time"
            )
        if self.nested_steps:
            names = sorted({num for num, *_ in self.nested_steps})
            more = " ..." if len(names) > 5 else ""
            shown = ", ".join(f"ProfilerStep#{n}" for n in names[:5]) + more
            notes.append(
                f"{len(self.nested_steps)} span(s) named like a step ({shown}) lie inside another step of "
                "their thread: a record_function of that name, not one of the profiler's steps (they follow "
                "one another), so they are not steps of the table; their operators count in the step they "
                "are in"
            )
        counts = Counter(num for num, *_ in self.steps)
        repeated = sorted(n for n, k in counts.items() if k > 1)
        if repeated:
            more = " ..." if len(repeated) > 5 else ""
            shown = ", ".join(f"ProfilerStep#{n}" for n in repeated[:5]) + more
            keys = list(self.threads)
            pids = sorted({str(keys[t][0]) for *_, t in self.steps})
            whose = (
                f"; the steps are of {len(pids)} processes ({', '.join(pids[:5])}), read as one rank: their "
                "operators are counted together, in the step windows of the first spans and in the top "
                "operators (analyse each process's own trace apart)"
                if len(pids) > 1
                else "; the events inside the others still count, in the step windows they fall in"
            )
            notes.append(
                f"{len(repeated)} step number(s) appear more than once ({shown}): the first span of each is "
                f"the step, the other spans are left out of the step table{whose}"
            )
        overlapping = _overlapping_steps(self.steps)
        if overlapping:
            more = " ..." if len(overlapping) > 3 else ""
            shown = ", ".join(f"{a} and {b}" for a, b in overlapping[:3]) + more
            notes.append(
                f"{len(overlapping)} pair(s) of steps overlap in time (steps {shown}): time in both is "
                "counted in both (steps of two threads or two profilers in one trace, or an edited trace?)"
            )
        if (grain := self._time_grain()) is not None:
            notes.append(
                "the trace's times are epoch µs written as JSON numbers with decimals: a double holds "
                f"numbers of that size to {grain:g} µs, so every figure is rounded to that (torch_npu's "
                "string times and Kineto's times after its baseTimeNanoseconds keep each ns)"
            )
        if self.negative_durations:
            notes.append(negative_durations_note(self.negative_durations))
        return notes

    def _resolve_pending(self) -> None:
        """Pending events of a process whose name is known: device tasks when it is a device process, else
        left out. The others stay pending (their process may be named in a later part of the trace)."""
        keys = list(self.threads)
        classes = [self._pid_class.get(pid, _P_UNKNOWN) for pid, _tid in keys]
        cls = np.array(classes, np.int8)[self.p_thread]
        device = np.flatnonzero(cls == _P_DEVICE)
        if len(device):
            strings = self.strings
            pids = [keys[t][0] for t in self.p_thread[device].tolist()]
            cats = [strings[c] for c in self.p_cat[device].tolist()]
            kinds = [strings[k] if k >= 0 else "" for k in self.p_kind[device].tolist()]
            self.dev_kind.extend(
                kind or cat or vocab.DEVICE_TASK_KIND for kind, cat in zip(kinds, cats, strict=True)
            )
            self.dev_pid.extend(pids)
            unknown = self.unknown_device_work
            for pid, cat in zip(pids, cats, strict=True):
                if not vocab.is_device_task_category(cat):
                    key = (self.process_names.get(pid, str(pid)), cat)
                    unknown[key] = unknown.get(key, 0) + 1
            parts = self._parts
            for column in ("name", "ts", "dur", "ext", "corr", "stream", "device", "blocks"):
                parts[f"dev_{column}"].append(getattr(self, f"p_{column}")[device])
        comm = np.flatnonzero(cls == _P_COMM)
        if len(comm):
            parts = self._parts
            for column in ("name", "ts", "dur", "thread"):
                parts[f"cx_{column}"].append(getattr(self, f"p_{column}")[comm])
        dropped = np.flatnonzero(cls == _P_OTHER)
        if len(dropped):
            strings = self.strings
            cats = [strings[c] if c >= 0 else "" for c in self.p_cat[dropped].tolist()]
            self.unread_categories.update(cats)
            pids = [keys[t][0] for t in self.p_thread[dropped].tolist()]
            kinds = [strings[k] if k >= 0 else "" for k in self.p_kind[dropped].tolist()]
            self._note_uncategorised(pids, [c or (k == MSTX_KIND) for c, k in zip(cats, kinds, strict=True)])
            marks = [i for i, (c, k) in enumerate(zip(cats, kinds, strict=True)) if not c and k == MSTX_KIND]
            if marks:
                at = dropped[marks]
                self.mstx.extend(
                    (strings[n], *keys[t], ts, dur)
                    for n, t, ts, dur in zip(
                        self.p_name[at].tolist(),
                        self.p_thread[at].tolist(),
                        self.p_ts[at].tolist(),
                        self.p_dur[at].tolist(),
                        strict=True,
                    )
                )
        keep = cls == _P_UNKNOWN
        for name in _PENDING:
            setattr(self, name, getattr(self, name)[keep])

    def __getstate__(self) -> dict[str, Any]:
        self.finish()
        state = dict(self.__dict__)
        state["_dims"] = _DimsText()
        return state

    @staticmethod
    def _first_ids(table: dict[Any, int], streams: list[tuple[np.ndarray, int, list[Any]]]) -> list[Any]:
        """Keys of ``streams`` (positions, sub-order, values) not yet in ``table``, in order of first
        appearance (position, then sub-order); None is never a key."""
        found: dict[Any, tuple[int, int]] = {}
        for pos, sub, values in streams:
            new = [v for v in dict.fromkeys(values) if v is not None and v not in table]
            if not new:
                continue
            first = dict(zip(reversed(values), range(len(values) - 1, -1, -1), strict=True))
            for v in new:
                key = (int(pos[first[v]]), sub)
                if v not in found or key < found[v]:
                    found[v] = key
        return sorted(found, key=found.__getitem__)

    def _intern_all(self, streams: list[tuple[np.ndarray, int, list[Any]]]) -> None:
        for text in self._first_ids(self.string_ids, streams):
            self.intern(text)

    def _ids(self, values: list[Any]) -> np.ndarray:
        return np.fromiter(map(self.string_ids.get, values, repeat(-1)), np.int32, len(values))

    def add_chunk(self, events: list[Any], text: bytes | memoryview | None = None) -> None:
        """Add consecutive events: :class:`ScanEvent` structs (or anything with the same attributes), or
        the typed structs of :data:`TYPED_DECODER`; then ``text``, the ``{...},{...}`` they were decoded
        from, is needed too, for the rare chunk only the generic walk handles (decoded again).
        An event whose args it cannot read (an ``External id`` beyond an int64: damage) is left out, counted
        in ``damaged`` (docs/formats.md, "Damaged events"): the chunk is added again without it. Raises
        EventError when that fails too (this Extract is then unusable)."""
        mark = self._mark()
        try:
            self._add_chunk(events, text)
        except (msgspec.DecodeError, OverflowError):
            self._rollback(mark)
            kept = []
            for event in events:  # each on its own (the slow path of a damaged chunk only)
                try:
                    Extract()._add_chunk([event], None)
                except (msgspec.DecodeError, OverflowError) as exc:
                    problem = _args_problem(exc, event)
                    self.damaged.add(problem, f"cannot read the event {described_event(event)}: {problem}")
                    self._note_damaged_fetch(event)
                    continue
                kept.append(event)
            try:
                self._add_chunk(kept, None)
            except (msgspec.DecodeError, OverflowError) as exc:
                raise EventError(_first_bad_event(kept, exc)) from None

    def _note_damaged_fetch(self, event: Any) -> None:
        """A DataLoader fetch left out as damaged: its step's data time is not known (Damaged.fetches)."""
        name = getattr(event, "name", None)
        if isinstance(name, str) and vocab.is_data_fetch(name):
            ts = getattr(event, "ts", None)
            start = float(ts) if isinstance(ts, float | int) and math.isfinite(ts) else None
            self.damaged.fetches.append((start, getattr(event, "pid", None), getattr(event, "tid", None)))

    def _mark(self) -> tuple[list[Any], list[int], list[Counter[str]], list[int]]:
        """What :meth:`_rollback` needs to undo a chunk's partial addition (a few lengths: no copy)."""
        return (
            [getattr(self, name) for name in _SCALARS],
            [len(getattr(self, name)) for name in _GROWING],
            [Counter(getattr(self, name)) for name in _COUNTERS],
            list(map(len, self._parts.values())),
        )

    def _rollback(self, mark: tuple[list[Any], list[int], list[Counter[str]], list[int]]) -> None:
        """Back to ``mark``: what a chunk that failed half-way added is taken away (the process names its
        metadata set are set again, the same, when it is added again)."""
        scalars, lengths, counters, parts = mark
        for name, value in zip(_SCALARS, scalars, strict=True):
            setattr(self, name, value)
        for name, length in zip(_GROWING, lengths, strict=True):
            grown = getattr(self, name)
            if isinstance(grown, list):
                del grown[length:]
            else:  # a dict: its keys in the order they were added
                while len(grown) > length:
                    grown.popitem()
        for name, counter in zip(_COUNTERS, counters, strict=True):
            setattr(self, name, counter)
        for part, length in zip(self._parts.values(), parts, strict=True):
            del part[length:]

    def _add_chunk(self, events: list[Any], text: bytes | memoryview | None) -> None:
        n = len(events)
        if not n:
            return
        if isinstance(events[0], _Typed):
            if self._add_typed(events):
                return
            if text is None:
                raise ValueError("add_chunk needs the text of a chunk of typed events")
            events = SCAN_DECODER.decode(b"[" + bytes(text) + b"]")
        self.event_count += n
        cat = np.fromiter(map(_CAT_CODES.get, map(_CAT, events), repeat(0)), np.int8, n)
        ph = np.fromiter(map(_PH_CODES.get, map(_PH, events), repeat(0)), np.int8, n)
        is_x = self._timed(events, ph == _X)
        other = np.flatnonzero(ph == 0)
        if len(other):
            phases = Counter(str(p) if p else "(none)" for p in map(_PH, _pick(events, other)))
            self.unread_phases.update({p: k for p, k in phases.items() if p not in _FLOW_PHASES})
        sel = _Selection(events)
        sel.oi = np.flatnonzero(is_x & (cat == _CPU_OP))
        sel.ops = _pick(events, sel.oi)
        if sel.ops:
            sel.oargs = _args_of(_OP_ARGS, list(map(_ARGS, sel.ops)))
        sel.di = np.flatnonzero(is_x & (cat >= _KERNEL) & (cat <= _MEMSET))
        sel.devs = _pick(events, sel.di)
        if sel.devs:
            sel.dev_cats = cat[sel.di]
            sel.kargs = _args_of(_KERNEL_ARGS, list(map(_ARGS, sel.devs)))
        sel.ai = np.flatnonzero(is_x & ((cat == _ANNOT) | (cat == _GPU_ANNOT)))
        sel.ann_cats = cat[sel.ai]
        sel.meta = np.flatnonzero(ph == _META)
        if len(sel.meta):
            self._note_processes(events, sel.meta)
        pi = np.flatnonzero(is_x & (cat == 0))
        if len(pi):
            pend = _pick(events, pi)
            # events of a process already known to be no device (torch_npu's CANN, overlays) leave now
            cls = np.fromiter(map(self._pid_class.get, map(_PID, pend), repeat(_P_UNKNOWN)), np.int8, len(pi))
            keep = cls != _P_OTHER
            if not keep.all():
                left = list(itertools.compress(pend, (~keep).tolist()))
                cats = [str(c) if c is not None else "" for c in map(_CAT, left)]
                self.unread_categories.update(cats)
                self._note_left_out(left, cats)
                pi = pi[keep]
                pend = list(itertools.compress(pend, keep.tolist()))
            sel.pi, sel.pend = pi, pend
            if pend:
                sel.pargs = _task_args(list(map(_ARGS, pend)))
        ri = np.flatnonzero(is_x & ((cat == _RUNTIME) | (cat == _DRIVER)))
        if len(ri):
            raws = list(map(_ARGS, _pick(events, ri)))
            has = np.fromiter(map(len, raws), np.int64, len(raws)) > 0
            if has.any():
                sel.ri = ri[has]
                launches = _args_of(_LAUNCH_ARGS, [r for r in raws if r])
                sel.corr = np.fromiter(map(_CORR, launches), np.int64, len(sel.ri))
        mi = np.flatnonzero((ph == _INSTANT) | (ph == _INSTANT2))
        if len(mi):
            inst = _pick(events, mi)
            keep = [k for k, ev in enumerate(inst) if ev.name == vocab.MEMORY_EVENT and ev.args]
            sel.mi = mi[keep]
            sel.mems = [inst[k] for k in keep]
            if sel.mems:
                sel.margs = _args_of(_MEM_ARGS, list(map(_ARGS, sel.mems)))
        fi = np.flatnonzero(is_x & (cat == _PYFUNC))
        if len(fi):
            frames = _pick(events, fi)
            self._add_frames(frames, _frame_ids(list(map(_ARGS, frames))))
        li = np.flatnonzero(cat == _NPU_FLOW)
        if len(li):
            self._add_launch_flows(_pick(events, li))
        self._fill(sel)

    def _add_launch_flows(self, flows: list[Any]) -> None:
        """The start and finish events of ``async_npu`` flows with an integer id and integer pid/tid."""
        n = len(flows)
        values = [list(map(_ID, flows)), list(map(_PID, flows)), list(map(_TID, flows))]
        ends = np.fromiter(map(_FLOW_ENDS.get, map(_PH, flows), repeat(0)), np.int8, n)
        keep = ends > 0
        columns = None
        if set().union(*(map(type, v) for v in values)) == {int}:  # the rule: plain ints (never a bool)
            with contextlib.suppress(OverflowError):  # ... that an int64 holds
                columns = [np.fromiter(v, np.int64, n)[keep] for v in values]
        if columns is None:  # each event checked on its own
            for v in values:
                keep &= np.fromiter(map(_is_int64, v), bool, n)
            columns = [np.array(list(itertools.compress(v, keep.tolist())), np.int64) for v in values]
        if not keep.any():
            return
        parts = self._parts
        parts["fl_id"].append(columns[0])
        parts["fl_start"].append((ends[keep] == 1).astype(np.int8))
        parts["fl_pid"].append(columns[1])
        parts["fl_tid"].append(columns[2])
        kept = list(itertools.compress(flows, keep.tolist()))
        parts["fl_ts"].append(np.fromiter(map(_TS, kept), np.float64, len(kept)))

    def _note_processes(self, events: list[Any], meta: np.ndarray) -> None:
        """The process names of a chunk's metadata events (before its other events are sorted out)."""
        for i in meta.tolist():
            ev = events[i]
            if ev.name == "process_name" and ev.args:
                value = _ANY.decode(ev.args)
                self._set_process(ev.pid, str(value.get("name", "")) if isinstance(value, dict) else "")
            elif ev.name == "process_labels" and ev.args:
                value = _ANY.decode(ev.args)
                labels = value.get("labels") if isinstance(value, dict) else None
                if isinstance(labels, str) and vocab.GPU_LABEL_RE.search(labels):
                    self._label_device(ev.pid)

    def _note_left_out(self, events: list[Any], cats: list[str]) -> None:
        """Events of processes known to be neither host threads' nor a device's, left out of every table
        (their categories ``cats``): the MsprofTx layer's marks and ranges among them kept for the report's
        ranges, the others of no category counted (:meth:`_note_uncategorised`). Only the events of no
        category in a process that may be the host's are looked into: not the CANN runtime's calls, not an
        overlay (no step per event of those)."""
        pids = list(map(_PID, events))
        names = self.process_names
        host = {
            pid
            for pid in set(pids)
            if not vocab.RUNTIME_PROCESS_RE.search(names.get(pid, str(pid)))
            and not vocab.NOT_HOST_PROCESS_RE.search(names.get(pid, str(pid)))
        }
        marks = [False] * len(events)
        if host:
            for k, (ev, cat) in enumerate(zip(events, cats, strict=True)):
                if not cat and pids[k] in host and vocab.is_mstx_mark("", _ARGS(ev)):
                    marks[k] = True
                    ts, dur = _TS(ev), _DUR(ev)
                    if not no_time(ts) and not no_time(dur):  # one without a time is left out
                        self.mstx.append((str(ev.name), ev.pid, ev.tid, float(ts), float(dur)))
        self._note_uncategorised(pids, [c or m for c, m in zip(cats, marks, strict=True)])

    def _note_uncategorised(self, pids: list[Any], known: list[Any]) -> None:
        """Count the events of no category left out of a process of no known kind (by its name): not the
        CANN runtime's calls, not an overlay npuprof or torch_npu computed; ``known``: per event, true
        when it is known for what it is (a category, a mark of the MsprofTx layer)."""
        names = self.process_names
        wanted = {
            pid
            for pid in set(itertools.compress(pids, map(operator.not_, known)))
            if not vocab.RUNTIME_PROCESS_RE.search(names.get(pid, str(pid)))
            and not vocab.NOT_HOST_PROCESS_RE.search(names.get(pid, str(pid)))
        }
        if not wanted:
            return
        for k, pid in enumerate(pids):
            if pid in wanted and not known[k]:
                self.unread_uncategorised[names.get(pid, str(pid))] += 1

    def hccl_without_tasks(self) -> bool:
        """torch_npu's communication process (``HCCL``) is there, no device task is: an NPU's trace, not a
        CPU's (npuprof's CPU trace_view.json names its own ``Communication``)."""
        return not len(self.dev_ts) and any(
            vocab.HCCL_PROCESS_RE.search(n) for n in self.process_names.values()
        )

    def _label_device(self, pid: Any) -> None:
        self.device_labelled.add(pid)
        self._pid_class[pid] = _P_DEVICE

    def _set_process(self, pid: Any, name: str) -> None:
        self.process_names[pid] = name
        if vocab.DEVICE_PROCESS_RE.search(name) or pid in self.device_labelled:
            self._pid_class[pid] = _P_DEVICE
        elif vocab.COMM_PROCESS_RE.search(name):
            self._pid_class[pid] = _P_COMM
        else:
            self._pid_class[pid] = _P_OTHER

    def _timed(self, events: list[Any], is_x: np.ndarray) -> np.ndarray:
        """``is_x`` without the complete events that have no ts or no dur (counted in ``timeless``): read
        at time 0, or as 0 long, they would land outside every step or hide inside their parents."""
        n = len(events)
        dur = np.fromiter(map(_DUR, events), np.float64, n)
        missing = np.signbit(dur) & (dur == 0.0)  # NO_TIME is -0.0
        ts = list(map(_TS, events))
        if 0.0 in ts:  # C speed (NO_TIME == 0.0); real traces have no time 0, hand-made ones may
            missing |= np.fromiter(map(no_time, ts), bool, n)
        missing &= is_x
        if missing.any():
            self.timeless += int(missing.sum())
            is_x = is_x & ~missing
        is_x = self._ending_in_time(events, is_x, ts, dur)
        self._span(ts, dur, is_x)
        return is_x

    def _ending_in_time(
        self, events: list[Any], is_x: np.ndarray, ts: list[float], dur: np.ndarray
    ) -> np.ndarray:
        """``is_x`` without the complete events that end past TIME_LIMIT (each within its own bound, their
        sum is not): such an end plus Kineto's base passes an int64 of ns, wrapped in the tables (helper-243:
        trace_view.json's Free lane began at -8446744073709558.616 µs, the db export failed with
        OverflowError). Left out, counted in ``damaged`` (docs/formats.md, "Damaged events")."""
        if not ts:
            return is_x
        try:
            if max(ts) + float(dur.max()) <= TIME_LIMIT:  # C speed: the usual chunk
                return is_x
        except TypeError:  # a ts left as text (a chunk of timeless events in a trace of string times)
            pass
        start = np.fromiter((t if isinstance(t, float) else 0.0 for t in ts), np.float64, len(ts))
        far = np.flatnonzero(is_x & (start + dur > TIME_LIMIT))
        if not len(far):
            return is_x
        for i in far.tolist():
            said = f"cannot read the event {described_event(events[i])}: {END_PROBLEM}"
            self.damaged.add(END_PROBLEM, said)
            self._note_damaged_fetch(events[i])
        is_x = is_x.copy()
        is_x[far] = False
        return is_x

    def _span(self, ts: list[Any], dur: np.ndarray, is_x: np.ndarray) -> None:
        """First start and last end of the complete events (``is_x``; ``ts`` and ``dur`` of every event of
        the chunk), from every chunk, steps or not: the row of a trace without steps, or of one cut short
        whose steps were all left out (Extract.take_cut), and the db's session times. (Once skipped after
        the first step, they were the span of the chunks up to it: -j 1 and -j 3 gave different figures.)"""
        if not is_x.any():
            return
        try:
            start = np.array(ts, np.float64)[is_x]
        except (TypeError, ValueError):  # a ts left as text (timeless, so not in is_x)
            start = np.fromiter((t if isinstance(t, float) else 0.0 for t in ts), np.float64, len(ts))[is_x]
        self.first_ts = min(self.first_ts, float(start.min()))
        self.last_ts = max(self.last_ts, float((start + dur[is_x]).max()))

    def _add_typed(self, events: list[Any]) -> bool:
        """The fast path for a chunk decoded into typed structs (their phases are known by category);
        returns True when it added the chunk."""
        n = len(events)
        kind = np.fromiter(map(_KIND_CODES.__getitem__, map(type, events)), np.int8, n)
        self.event_count += n
        is_x = self._timed(events, (kind != _K_INST) & (kind != _K_FLOW))
        sel = _Selection(events)
        sel.oi = np.flatnonzero(is_x & (kind == _K_OP))
        sel.ops = _pick(events, sel.oi)
        sel.oargs = list(map(_ARGS, sel.ops))
        sel.di = np.flatnonzero(is_x & (kind >= _KERNEL) & (kind <= _MEMSET))
        sel.devs = _pick(events, sel.di)
        if sel.devs:
            sel.dev_cats = kind[sel.di]
            sel.kargs = list(map(_ARGS, sel.devs))
        sel.ai = np.flatnonzero(is_x & ((kind == _ANNOT) | (kind == _GPU_ANNOT)))
        sel.ann_cats = kind[sel.ai]
        ri = np.flatnonzero(is_x & (kind == _K_LAUNCH))
        if len(ri):
            corr = np.fromiter(map(_ARGS_CORR, _pick(events, ri)), np.int64, len(ri))
            sel.ri, sel.corr = ri, corr
        mi = np.flatnonzero(kind == _K_INST)
        if len(mi):
            inst = _pick(events, mi)
            margs = list(map(_ARGS, inst))
            if list(map(_NAME, inst)).count(vocab.MEMORY_EVENT) == len(inst) and None not in margs:
                sel.mi, sel.mems, sel.margs = mi, inst, margs  # all allocator records (the rule)
            else:
                keep = [k for k, e in enumerate(inst) if e.name == vocab.MEMORY_EVENT and e.args is not None]
                sel.mi = mi[keep]
                sel.mems = [inst[k] for k in keep]
                sel.margs = list(map(_ARGS, sel.mems))
        fi = np.flatnonzero(kind == _K_PY)
        if len(fi):
            frames = _pick(events, fi)
            self._add_frames(frames, list(map(_ARGS, frames)))
        self._fill(sel)
        return True

    def _add_frames(self, frames: list[Any], args: list[Any]) -> None:
        """Append complete python_function events (``args``: their FrameIds, or None)."""
        k = len(frames)
        parts = self._parts
        threads = self.frame_threads
        pids, tids = list(map(_PID, frames)), list(map(_TID, frames))
        if len(set(pids)) == 1 and len(set(tids)) == 1:  # the rule: a chunk of one thread's frames
            key = (pids[0], tids[0])
            parts["f_thread"].append(np.full(k, threads.setdefault(key, len(threads)), np.int32))
        else:
            keys = list(zip(pids, tids, strict=True))
            for key in dict.fromkeys(keys):
                threads.setdefault(key, len(threads))
            parts["f_thread"].append(np.fromiter(map(threads.__getitem__, keys), np.int32, k))
        names = list(map(_NAME, frames))
        name_ids = self._frame_name_ids
        for name in dict.fromkeys(names):
            if name not in name_ids:
                name_ids[name] = len(self.frame_names)
                self.frame_names.append(name)
        parts["f_name"].append(np.fromiter(map(name_ids.__getitem__, names), np.int32, k))
        parts["f_ts"].append(np.fromiter(map(_TS, frames), np.float64, k))
        parts["f_dur"].append(np.fromiter(map(_DUR, frames), np.float64, k))
        if None in args:
            args = [a if a is not None else _NO_IDS for a in args]
        parts["f_id"].append(id_column(list(map(_FRAME_ID, args))))
        parts["f_parent"].append(id_column(list(map(_FRAME_PARENT, args))))

    def _fill(self, sel: _Selection) -> None:
        """Give threads and strings their ids (in order of first appearance) and append the columns."""
        events = sel.events
        parts = self._parts
        thread_streams: list[tuple[np.ndarray, int, list[Any]]] = []
        comm: list[tuple[int, str, float, float, tuple[Any, Any], Any]] = []
        steps: list[tuple[int, float, float, tuple[Any, Any]]] = []
        fetches: list[tuple[float, float, tuple[Any, Any]]] = []
        ops, oi, oargs = sel.ops, sel.oi, sel.oargs
        op_names = list(map(_NAME, ops))
        at = _step_positions(op_names) if ops else []
        if at:  # torch_npu's and torch 1.8-1.10's steps are operators (and then no operators)
            for k in at:
                ev = ops[k]
                thread_streams.append((oi[k : k + 1], 0, [(ev.pid, ev.tid)]))
                steps.append((int(ev.name[len(vocab.STEP_PREFIX) :]), ev.ts, ev.dur, (ev.pid, ev.tid)))
            keep = [True] * len(ops)
            for k in at:
                keep[k] = False
            oi = oi[np.array(keep, dtype=bool)]
            ops = list(itertools.compress(ops, keep))
            oargs = list(itertools.compress(oargs, keep))
            op_names = list(itertools.compress(op_names, keep))
        op_keys = list(map(_PIDTID, ops))
        thread_streams.append((oi, 0, op_keys))
        shapes: list[Any] = []
        stacks: list[Any] = []
        if ops:
            dims = list(map(bytes, map(_DIMS, oargs)))
            if not all(dims):
                old = list(map(bytes, map(_DIMS_OLD, oargs)))
                if any(old):
                    dims = [d or o for d, o in zip(dims, old, strict=True)]
            shapes = list(map(self._dims.__getitem__, dims))
            stacks = list(map(_STACK, oargs))
            if any(stacks):
                stacks = [(s if isinstance(s, str) else ";".join(s)) if s else None for s in stacks]
            else:
                stacks = [None] * len(ops)
            # record_param_comms, and the backends' spans where they are operators (torch 1.8-1.10's
            # "Operator" category, docs/formats.md)
            wanted = [vocab.COMM_RECORD]
            wanted += [n for n in set(op_names) if n.startswith(vocab.COMM_ANNOTATION_PREFIXES)]
            for name in wanted:
                for k in positions(op_names, name):
                    ev = ops[k]
                    args = ev.args if isinstance(ev.args, msgspec.Raw) else _comm_args(oargs[k])
                    comm.append((int(oi[k]), ev.name, ev.ts, ev.dur, op_keys[k], args))
        dev_names = list(map(_NAME, sel.devs))
        # annotations: steps and host communication spans
        for i, code in zip(sel.ai.tolist(), sel.ann_cats.tolist(), strict=True):
            ev = events[i]
            name = ev.name
            if name.startswith(vocab.STEP_PREFIX):
                match = vocab.STEP_RE.match(name)
                if match and code == _ANNOT:
                    thread_streams.append((np.array([i]), 0, [(ev.pid, ev.tid)]))
                    steps.append((int(match.group(1)), ev.ts, ev.dur, (ev.pid, ev.tid)))
            elif name.startswith(vocab.COMM_ANNOTATION_PREFIXES):
                comm.append((i, name, ev.ts, ev.dur, (ev.pid, ev.tid), ev.args))
            elif vocab.is_data_fetch(name) and code == _ANNOT:
                thread_streams.append((np.array([i]), 0, [(ev.pid, ev.tid)]))
                fetches.append((ev.ts, ev.dur, (ev.pid, ev.tid)))
        mem_keys = list(map(_PIDTID, sel.mems))
        thread_streams.append((sel.mi, 0, mem_keys))
        pend = sel.pend
        p_keys = list(map(_PIDTID, pend))
        if pend:
            thread_streams.append((sel.pi, 0, p_keys))
        # metadata: thread and process names
        named: list[tuple[tuple[Any, Any], str]] = []
        for i in sel.meta.tolist():  # (process names: _note_processes)
            ev = events[i]
            if not ev.args or ev.name != "thread_name":
                continue
            value = _ANY.decode(ev.args)
            label = str(value.get("name", "")) if isinstance(value, dict) else ""
            thread_streams.append((np.array([i]), 0, [(ev.pid, ev.tid)]))
            named.append(((ev.pid, ev.tid), label))
        for i, _name, _ts, _dur, key, _args in comm:
            thread_streams.append((np.array([i]), 0, [key]))

        for key in self._first_ids(self.threads, thread_streams):
            self.thread(*key)
        threads = self.threads
        self.steps.extend((num, t, d, threads[key]) for num, t, d, key in steps)
        self.data_fetches.extend((t, d, threads[key]) for t, d, key in fetches)
        for key, label in named:
            self.thread_names[threads[key]] = label
        streams = [(oi, 0, op_names), (oi, 1, shapes), (oi, 2, stacks), (sel.di, 0, dev_names)]
        if pend:
            p_names = list(map(_NAME, pend))
            p_cats = list(map(_CAT, pend))
            p_kinds = list(map(_task_kind, sel.pargs))
            streams += [(sel.pi, 3, p_names), (sel.pi, 4, p_cats), (sel.pi, 5, p_kinds)]
        if ops or dev_names or pend:
            self._intern_all(streams)
        if pend:
            self._add_pending(pend, p_names, p_cats, p_kinds, p_keys, sel.pargs)
        if ops:
            k = len(ops)
            parts["op_thread"].append(np.fromiter(map(threads.__getitem__, op_keys), np.int32, k))
            parts["op_ts"].append(np.fromiter(map(_TS, ops), np.float64, k))
            parts["op_dur"].append(np.fromiter(map(_DUR, ops), np.float64, k))
            parts["op_name"].append(self._ids(op_names))
            parts["op_shapes"].append(self._ids(shapes))
            parts["op_stack"].append(self._ids(stacks))
            parts["op_ext"].append(_external_ids(oargs))
        if sel.devs:
            self._add_devices(sel.devs, dev_names, sel.dev_cats, sel.kargs)
        comm.sort(key=lambda c: c[0])
        for _i, name, t, d, key, raw in comm:
            if isinstance(raw, dict):
                args: Any = raw
            else:
                args = _ANY.decode(raw) if raw else {}
            self.comm_spans.append((name, t, d, threads[key], args if isinstance(args, dict) else {}))
        if len(sel.ri):
            ok = sel.corr >= 0
            parts["launch_corr"].append(sel.corr[ok])
            launches = _pick(events, sel.ri[ok])
            parts["launch_ts"].append(np.fromiter(map(_TS, launches), np.float64, len(launches)))
            parts["launch_dur"].append(np.fromiter(map(_DUR, launches), np.float64, len(launches)))
            parts["launch_pid"].append(
                np.fromiter(map(_id_or_none, map(_PID, launches)), np.int64, len(launches))
            )
            parts["launch_tid"].append(
                np.fromiter(map(_id_or_none, map(_TID, launches)), np.int64, len(launches))
            )
        if sel.mems:
            margs = sel.margs
            k = len(sel.mems)
            parts["mem_ts"].append(np.fromiter(map(_TS, sel.mems), np.float64, k))
            parts["mem_thread"].append(np.fromiter(map(threads.__getitem__, mem_keys), np.int32, k))
            allocated = np.fromiter(map(attrgetter("allocated"), margs), np.float64, k)
            self.mem_without_totals += int(np.isnan(allocated).sum())
            parts["mem_alloc"].append(allocated)
            for col, attr, dtype in (
                ("mem_reserved", "reserved", np.float64),
                ("mem_bytes", "nbytes", np.float64),
                ("mem_addr", "addr", np.int64),
                ("mem_devtype", "device_type", np.int32),
                ("mem_devid", "device_id", np.int32),
            ):
                parts[col].append(np.fromiter(map(attrgetter(attr), margs), dtype, k))

    def _add_pending(
        self,
        pend: list[Any],
        names: list[str],
        cats: list[str],
        kinds: list[str],
        keys: list[tuple[Any, Any]],
        pargs: list[Any],
    ) -> None:
        parts = self._parts
        k = len(pend)
        parts["p_name"].append(self._ids(names))
        parts["p_cat"].append(self._ids(cats))
        parts["p_kind"].append(self._ids(kinds))
        parts["p_ts"].append(np.fromiter(map(_TS, pend), np.float64, k))
        parts["p_dur"].append(np.fromiter(map(_DUR, pend), np.float64, k))
        parts["p_thread"].append(np.fromiter(map(self.threads.__getitem__, keys), np.int32, k))
        parts["p_ext"].append(_external_ids(pargs))
        parts["p_corr"].append(np.fromiter(map(_CORR, pargs), np.int64, k))
        stream = np.fromiter(map(attrgetter("stream_id"), pargs), np.int64, k)
        if (stream < 0).any():
            kineto = np.fromiter(map(attrgetter("stream"), pargs), np.int64, k)
            tids = np.array([t if isinstance(t, int) else -1 for t in map(_TID, pend)], np.int64)
            stream = np.where(stream >= 0, stream, np.where(kineto >= 0, kineto, tids))
        parts["p_stream"].append(stream)
        parts["p_device"].append(np.fromiter(map(attrgetter("device"), pargs), np.int64, k))
        parts["p_blocks"].append(np.fromiter(map(_blocks, map(_GRID, pargs)), np.int64, k))

    def _add_devices(self, devs: list[Any], names: list[str], cats: np.ndarray, kargs: list[Any]) -> None:
        parts = self._parts
        k = len(devs)
        self.dev_kind.extend(map(_KIND_OF.__getitem__, cats.tolist()))
        pids = list(map(_PID, devs))
        self.dev_pid.extend(pids)
        self.dev_tid.extend(map(_TID, devs))
        parts["dev_name"].append(self._ids(names))
        parts["dev_ts"].append(np.fromiter(map(_TS, devs), np.float64, k))
        parts["dev_dur"].append(np.fromiter(map(_DUR, devs), np.float64, k))
        parts["dev_ext"].append(_external_ids(kargs))
        parts["dev_corr"].append(np.fromiter(map(_CORR, kargs), np.int64, k))
        stream = np.fromiter(map(attrgetter("stream"), kargs), np.int64, k)
        device = np.fromiter(map(attrgetter("device"), kargs), np.int64, k)
        if (stream < 0).any():
            tids = np.array([t if isinstance(t, int) else -1 for t in map(_TID, devs)], np.int64)
            stream = np.where(stream >= 0, stream, tids)
        if (device < 0).any():
            pid_ints = np.array([p if isinstance(p, int) else -1 for p in pids], np.int64)
            device = np.where(device >= 0, device, pid_ints)
        parts["dev_stream"].append(stream)
        parts["dev_device"].append(device)
        parts["dev_blocks"].append(np.fromiter(map(_blocks, map(_GRID, kargs)), np.int64, k))

    def merge(self, other: Extract) -> None:
        """Append ``other`` (a later part of the same trace, finished) to this one (finished too)."""
        self.finish()
        other.finish()
        smap = np.array([self.intern(s) for s in other.strings] + [-1], dtype=np.int32)
        tmap = np.array([self.thread(*key) for key in other.threads] + [-1], dtype=np.int32)
        for tid, name in other.thread_names.items():
            self.thread_names[int(tmap[tid])] = name
        for pid in other.device_labelled:
            self._label_device(pid)
        for pid, name in other.process_names.items():
            self._set_process(pid, name)
        self.steps.extend((n, ts, dur, int(tmap[t])) for n, ts, dur, t in other.steps)
        self.nested_steps.extend((n, ts, dur, int(tmap[t])) for n, ts, dur, t in other.nested_steps)
        self.comm_spans.extend((n, ts, d, int(tmap[t]), a) for n, ts, d, t, a in other.comm_spans)
        self.data_fetches.extend((ts, d, int(tmap[t])) for ts, d, t in other.data_fetches)
        self.dev_kind.extend(other.dev_kind)
        self.dev_pid.extend(other.dev_pid)
        self.dev_tid.extend(other.dev_tid)
        for key, count in other.unknown_device_work.items():
            self.unknown_device_work[key] = self.unknown_device_work.get(key, 0) + count
        self.unread_phases.update(other.unread_phases)
        self.timeless += other.timeless
        self.repaired_strings += other.repaired_strings
        self.repaired_names += other.repaired_names
        self.repaired_values.update(other.repaired_values)
        self.negative_durations += other.negative_durations
        self.damaged.merge(other.damaged)
        self.mem_without_totals += other.mem_without_totals
        self.unread_categories.update(other.unread_categories)
        self.unread_uncategorised.update(other.unread_uncategorised)
        self.mstx.extend(other.mstx)
        fmap = np.array(
            [self.frame_threads.setdefault(k, len(self.frame_threads)) for k in other.frame_threads]
        )
        for name in other.frame_names:
            if name not in self._frame_name_ids:
                self._frame_name_ids[name] = len(self.frame_names)
                self.frame_names.append(name)
        nmap = np.array([self._frame_name_ids[name] for name in other.frame_names])
        for name in _DTYPES:
            values = getattr(other, name)
            if name in _STRING_COLUMNS:
                values = smap[values]
            elif name in ("op_thread", "mem_thread", "p_thread", "cx_thread"):
                values = tmap[values]
            elif name == "f_thread" and len(values):
                values = fmap[values]
            elif name == "f_name" and len(values):
                values = nmap[values]
            self._parts[name].append(values)
        self.finish()
        self.first_ts = min(self.first_ts, other.first_ts)
        self.last_ts = max(self.last_ts, other.last_ts)
        self.event_count += other.event_count


STEP_OVERLAP_US = 1.0  # a step starting this much before the previous one ends: the rounding of times


def _overlapping_steps(steps: list[tuple[int, float, float, int]]) -> list[tuple[int, int]]:
    """The pairs of steps (numbers, in time order) whose spans overlap by more than STEP_OVERLAP_US; of a
    repeated number, the first span only (the one the step table keeps)."""
    seen: set[int] = set()
    spans = []
    for num, ts, dur, _thread in steps:
        if num in seen:
            continue
        seen.add(num)
        if dur >= 0:
            spans.append((ts, ts + dur, num))
    spans.sort()
    pairs = []
    reach, holder = -math.inf, None
    for start, end, num in spans:
        if holder is not None and start < reach - STEP_OVERLAP_US:
            pairs.append((holder, num))
        if end > reach:
            reach, holder = end, num
    return pairs
