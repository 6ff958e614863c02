"""One pass over a trace's events: keep, in compact columns, only what the tables need.

:class:`Extract` is filled chunk by chunk (``add_chunk``) and several can be merged (``merge``), so a trace
can be read in bounded memory and in parallel pieces.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from typing import Any

import msgspec

from npuprof.analysis.trace_loader import Event

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
COMM_KERNEL_MARKS = ("nccl", "hccl", "rccl")
_COMM_ANNOTATION_PREFIXES = ("gloo:", "nccl:", "hccl:", "mpi:", "ucc:")


def is_comm_name(name: str) -> bool:
    low = name.lower()
    return any(mark in low for mark in COMM_KERNEL_MARKS) or low.startswith(_COMM_ANNOTATION_PREFIXES)


def is_receive(name: str) -> bool:
    low = name.lower()
    return "recv" in low or "receive" in low


class OpArgs(msgspec.Struct, gc=False):
    ext: int = msgspec.field(name="External id", default=-1)
    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    stack: list[str] | str | None = msgspec.field(name="Call stack", default=None)


class KernelArgs(msgspec.Struct, gc=False):
    ext: int = msgspec.field(name="External id", default=-1)
    correlation: int = -1
    stream: int = -1
    device: int = -1
    grid: list[int] | None = None
    nbytes: int = msgspec.field(name="bytes", default=0)


class MemArgs(msgspec.Struct, gc=False):
    allocated: float = msgspec.field(name="Total Allocated", default=0)
    reserved: float = msgspec.field(name="Total Reserved", default=0)
    nbytes: float = msgspec.field(name="Bytes", default=0)
    addr: int = msgspec.field(name="Addr", default=0)
    device_type: int = msgspec.field(name="Device Type", default=0)
    device_id: int = msgspec.field(name="Device Id", default=-1)


_OP_ARGS = msgspec.json.Decoder(OpArgs)
_KERNEL_ARGS = msgspec.json.Decoder(KernelArgs)
_MEM_ARGS = msgspec.json.Decoder(MemArgs)
_ANY = msgspec.json.Decoder()
_WS = b" \t\r\n"


@dataclass
class Extract:
    """Columns of the events the tables use. Strings are interned into ``strings`` (index = id)."""

    strings: list[str] = field(default_factory=list)
    string_ids: dict[str, int] = field(default_factory=dict)
    threads: dict[tuple[Any, Any], int] = field(default_factory=dict)  # (pid, tid) -> thread id
    thread_names: dict[int, str] = field(default_factory=dict)
    process_names: dict[Any, str] = field(default_factory=dict)
    # steps: number, ts, dur, thread
    steps: list[tuple[int, float, float, int]] = field(default_factory=list)
    # cpu operators (cat cpu_op), columns
    op_thread: array = field(default_factory=lambda: array("i"))
    op_ts: array = field(default_factory=lambda: array("d"))
    op_dur: array = field(default_factory=lambda: array("d"))
    op_name: array = field(default_factory=lambda: array("i"))
    op_shapes: array = field(default_factory=lambda: array("i"))
    op_stack: array = field(default_factory=lambda: array("i"))
    op_ext: array = field(default_factory=lambda: array("q"))
    # host-side communication spans (gloo:..., record_param_comms): name, ts, dur, thread, args dict
    comm_spans: list[tuple[str, float, float, int, dict[str, Any]]] = field(default_factory=list)
    # device tasks: kind, name id, ts, dur, pid, tid, args
    dev_kind: list[str] = field(default_factory=list)
    dev_name: array = field(default_factory=lambda: array("i"))
    dev_ts: array = field(default_factory=lambda: array("d"))
    dev_dur: array = field(default_factory=lambda: array("d"))
    dev_ext: array = field(default_factory=lambda: array("q"))
    dev_corr: array = field(default_factory=lambda: array("q"))
    dev_stream: array = field(default_factory=lambda: array("q"))
    dev_device: array = field(default_factory=lambda: array("q"))
    dev_blocks: array = field(default_factory=lambda: array("q"))
    dev_pid: list[Any] = field(default_factory=list)
    # runtime launches: correlation -> launch ts
    launch_corr: array = field(default_factory=lambda: array("q"))
    launch_ts: array = field(default_factory=lambda: array("d"))
    # memory instants
    mem_ts: array = field(default_factory=lambda: array("d"))
    mem_thread: array = field(default_factory=lambda: array("i"))
    mem_alloc: array = field(default_factory=lambda: array("d"))
    mem_reserved: array = field(default_factory=lambda: array("d"))
    mem_bytes: array = field(default_factory=lambda: array("d"))
    mem_addr: array = field(default_factory=lambda: array("q"))
    mem_devtype: array = field(default_factory=lambda: array("i"))
    first_ts: float = float("inf")
    last_ts: float = float("-inf")
    event_count: int = 0

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

    def add_chunk(self, events: list[Event]) -> None:
        self.event_count += len(events)
        intern = self.intern
        thread = self.thread
        op_thread, op_ts, op_dur, op_name = self.op_thread, self.op_ts, self.op_dur, self.op_name
        op_shapes, op_stack, op_ext = self.op_shapes, self.op_stack, self.op_ext
        first, last = self.first_ts, self.last_ts
        for ev in events:
            cat = ev.cat
            ph = ev.ph
            if ph == "X":
                ts = ev.ts
                if ts < first:
                    first = ts
                end = ts + ev.dur
                if end > last:
                    last = end
                if cat == "cpu_op":
                    name = ev.name
                    args = _OP_ARGS.decode(ev.args) if ev.args else OpArgs()
                    op_thread.append(thread(ev.pid, ev.tid))
                    op_ts.append(ts)
                    op_dur.append(ev.dur)
                    op_name.append(intern(name))
                    op_shapes.append(
                        intern(bytes(args.dims).translate(None, _WS).decode()) if args.dims else -1
                    )
                    stack = args.stack
                    op_stack.append(
                        intern(stack if isinstance(stack, str) else ";".join(stack)) if stack else -1
                    )
                    op_ext.append(args.ext)
                    if name == "record_param_comms":
                        self.comm_spans.append((name, ts, ev.dur, thread(ev.pid, ev.tid), ev.args_dict()))
                elif cat in DEVICE_CATS:
                    self._add_device(ev, DEVICE_CATS[cat])
                elif cat == "user_annotation" or cat == "gpu_user_annotation":
                    name = ev.name
                    if name.startswith("ProfilerStep#"):
                        match = STEP_RE.match(name)
                        if match and cat == "user_annotation":
                            self.steps.append((int(match.group(1)), ts, ev.dur, thread(ev.pid, ev.tid)))
                    elif name.startswith(_COMM_ANNOTATION_PREFIXES):
                        self.comm_spans.append((name, ts, ev.dur, thread(ev.pid, ev.tid), ev.args_dict()))
                elif (cat == "cuda_runtime" or cat == "cuda_driver") and ev.args:
                    corr = _KERNEL_ARGS.decode(ev.args).correlation
                    if corr >= 0:
                        self.launch_corr.append(corr)
                        self.launch_ts.append(ts)
            elif ph == "i" or ph == "I":
                if ev.name == "[memory]" and ev.args:
                    mem = _MEM_ARGS.decode(ev.args)
                    self.mem_ts.append(ev.ts)
                    self.mem_thread.append(thread(ev.pid, ev.tid))
                    self.mem_alloc.append(mem.allocated)
                    self.mem_reserved.append(mem.reserved)
                    self.mem_bytes.append(mem.nbytes)
                    self.mem_addr.append(mem.addr)
                    self.mem_devtype.append(mem.device_type)
            elif ph == "M" and ev.args:
                if ev.name == "thread_name":
                    self.thread_names[thread(ev.pid, ev.tid)] = str(ev.args_dict().get("name", ""))
                elif ev.name == "process_name":
                    self.process_names[ev.pid] = str(ev.args_dict().get("name", ""))
        self.first_ts, self.last_ts = first, last

    def _add_device(self, ev: Event, kind: str) -> None:
        args = _KERNEL_ARGS.decode(ev.args) if ev.args else KernelArgs()
        self.dev_kind.append(kind)
        self.dev_name.append(self.intern(ev.name))
        self.dev_ts.append(ev.ts)
        self.dev_dur.append(ev.dur)
        self.dev_ext.append(args.ext)
        self.dev_corr.append(args.correlation)
        self.dev_stream.append(
            args.stream if args.stream >= 0 else (ev.tid if isinstance(ev.tid, int) else -1)
        )
        self.dev_device.append(
            args.device if args.device >= 0 else (ev.pid if isinstance(ev.pid, int) else -1)
        )
        grid = args.grid or []
        blocks = 1
        for g in grid:
            blocks *= g
        self.dev_blocks.append(blocks if grid else 0)
        self.dev_pid.append(ev.pid)

    def merge(self, other: Extract) -> None:
        """Append ``other`` (a later part of the same trace) to this one."""
        smap = array("i", (self.intern(s) for s in other.strings))

        def remap(values: array) -> array:
            return array("i", (smap[v] if v >= 0 else -1 for v in values))

        tmap: dict[int, int] = {}
        for key, tid in other.threads.items():
            tmap[tid] = self.thread(*key)
        for tid, name in other.thread_names.items():
            self.thread_names[tmap[tid]] = name
        self.process_names.update(other.process_names)
        self.steps.extend((n, ts, dur, tmap[t]) for n, ts, dur, t in other.steps)
        self.op_thread.extend(array("i", (tmap[t] for t in other.op_thread)))
        self.op_ts.extend(other.op_ts)
        self.op_dur.extend(other.op_dur)
        self.op_name.extend(remap(other.op_name))
        self.op_shapes.extend(remap(other.op_shapes))
        self.op_stack.extend(remap(other.op_stack))
        self.op_ext.extend(other.op_ext)
        self.comm_spans.extend((n, ts, d, tmap[t], a) for n, ts, d, t, a in other.comm_spans)
        self.dev_kind.extend(other.dev_kind)
        self.dev_name.extend(remap(other.dev_name))
        for name in (
            "dev_ts",
            "dev_dur",
            "dev_ext",
            "dev_corr",
            "dev_stream",
            "dev_device",
            "dev_blocks",
            "dev_pid",
            "launch_corr",
            "launch_ts",
            "mem_ts",
            "mem_alloc",
            "mem_reserved",
            "mem_bytes",
            "mem_addr",
            "mem_devtype",
        ):
            getattr(self, name).extend(getattr(other, name))
        self.mem_thread.extend(array("i", (tmap[t] for t in other.mem_thread)))
        self.first_ts = min(self.first_ts, other.first_ts)
        self.last_ts = max(self.last_ts, other.last_ts)
        self.event_count += other.event_count
