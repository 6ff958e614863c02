"""Folded stacks (``outer;...;inner <integer µs>``) rebuilt offline from a Kineto / Chrome trace.

Any trace form trace_loader reads: Kineto's (every torch release's category names, through the one trace
vocabulary) and torch_npu's ``trace_view.json``.

Host metric (``self_cpu_time_total``): each thread's call tree is rebuilt from the nesting of its duration
events (Python frames, operators, annotations, runtime calls); every event's self time (its duration minus
its children's) goes to its path. The line totals therefore add up to each thread's busy time. Python frames
come from ``python_function`` events, else (torch_npu, older torch) from the operators' ``args["Call
stack"]`` (innermost frame first, as torch writes it). torch_npu's ``CANN`` process (``AscendCL@...`` calls,
on the host's own threads) is the runtime layer of the host thread with the same id: its calls nest under
that thread's operators, as Kineto's ``cuda_runtime`` calls do.

Device metrics (``self_cuda_time_total``, ``self_npu_time_total``): each device task (kernel / memcpy /
memset; torch_npu: the events of the ``Ascend Hardware`` process) is linked to the host call that launched it
(``args.correlation``, else a launch flow - ``ac2g``, then ``async_npu``, then ``HostToDevice`` - else
``External id``) and its duration goes to ``<launching stack>;<task name>``. Device work of a category the
vocabulary does not know is counted too, and named in one note (``FoldedStacks.notes``).

Frames are sanitised as torch's ``export_stacks`` does (space, ``;``, tab and newline become ``_``), so the
lines are accepted by FlameGraph's ``flamegraph.pl`` and by speedscope; memory addresses (``<object at
0x7f3a...>``) become ``0x...`` so that equal frames merge.

Host threads that ran no torch work and only waited (a DataLoader's feeder thread blocked on a queue: only
Python frames, most of their time in a waiting call) are left out, and named in a note; ``keep_idle=True``
keeps them.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.damaged import negative_durations_note
from npuprof.analysis.trace_loader import EMPTY_RAW
from npuprof.analysis.trace_repairs import mended_frame_name
from npuprof.config import other_device_line
from npuprof.reports.text import printable
from npuprof.reports.trace_events import TraceEvent, device_labelled, load, process_names, span_or_flow

HOST_METRIC = "self_cpu_time_total"
STEP_FRAME = "ProfilerStep"  # every ProfilerStep#N (_frame_of)
# torch 2.13's Chrome trace writes this for a name it cannot hold (docs/formats.md): every frame of a script
# 训练.py or a function 步骤 (--with-stack), a record_function range of the script's (helper-219)
UNNAMED_FRAME = "unknown"
UNNAMED_NOTE = (
    "frames named 'unknown' are torch's name for a Python file, function or range whose name has a "
    "character its trace cannot hold (outside printable ASCII, a quote, a backslash): the trace does not "
    "have their names; an ASCII name shows"
)
# the callers, in torch's Python tracer, of the body of a module being imported and of its classes' bodies
# (sanitised, as the trie holds them)
BODY_CALLERS = frozenset({"<built-in_function_exec>", "<built-in_function___build_class__>"})
IMPORTED_NOTE = (
    "frames named 'unknown' under '<built-in function exec>' or '<built-in function __build_class__>' are "
    "the bodies of modules (and of their classes) that the job imported while the profiler recorded (a "
    "first `import torch.distributed.checkpoint` inside the training loop, say): torch's Python tracer "
    "loses their names, ASCII ones too (seen with Python 3.11); an import before the loop keeps that time "
    "out of the capture"
)
DEVICE_METRICS = ("self_cuda_time_total", "self_npu_time_total")
METRICS = (HOST_METRIC, *DEVICE_METRICS)

_IGNORED_CATS = frozenset({vocab.TRACE, vocab.GC_CAT})
# Tie-break for events with the same start and duration: the caller first.
_CAT_RANK = {vocab.PYTHON_FUNCTION: 0, vocab.USER_ANNOTATION: 1, vocab.CPU_OP: 2}
_SANITISE = str.maketrans(" ;\t\n\r", "_____")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
# A frame whose function is one of these waits (Python's threading, queue, selectors, socket, time): a
# Python frame (``threading.py(331): wait``), or a C function as torch's Python tracer names it, by its repr
# (``<built-in method acquire of _thread.lock object at 0x7f...>``, ``<built-in function sleep>``), which is
# where a blocked thread's time actually is. A C ``get`` or ``join`` waits only on a SimpleQueue.
_WAITING = re.compile(
    r"\): (wait|acquire|get|sleep|select|poll|join|_wait_for_tstate_lock|recv|recv_into|accept|"
    r"_recv|_recv_bytes|_poll|epoll|readinto|read)$"
    r"|^<built-in (method|function) (acquire|acquire_lock|sleep|select|poll|wait|waitpid|wait3|wait4|"
    r"sigwait|sigtimedwait|sigwaitinfo|recv|recv_into|recvfrom|accept|read|readinto|readv|"
    r"get(?= of _queue\.SimpleQueue))\b"
)
IDLE_SHARE = 0.8  # a Python-only thread with at least this share of its time in waits is idle
UNLINKED_FRAME = "[device_work_without_a_launching_call]"
# A folded line holds its whole path, so a trace nested N deep writes ~N²/2 frames (50,000 nested spans: 11 GB
# and minutes, helper-145's list). Deeper than this (Python's own recursion limit is 1,000), the frames of a
# path are one frame: their time is kept, under it.
MAX_DEPTH = 1024
DEEPER_FRAME = "[deeper_frames_folded]"


class StacksError(ValueError):
    """The input cannot give the requested stacks; the message is one line for the user."""


@functools.lru_cache(maxsize=1 << 16)  # a trace's frames are a few names, each met thousands of times
def sanitise_frame(name: str) -> str:
    """One frame of a folded line: no separator of the format in it, addresses merged, control
    characters shown as ``\\xNN`` (a name from someone's trace must not act on a terminal); a Windows path
    old torch wrote unescaped, read as JSON escapes, mended first."""
    return printable(_ADDRESS.sub("0x...", mended_frame_name(name)).translate(_SANITISE)) or "_"


@dataclass
class FoldedStacks:
    """Time per call path, in microseconds (floats until written)."""

    metric: str
    values: dict[tuple[str, ...], float] = field(default_factory=dict)
    has_python_frames: bool = False
    notes: list[str] = field(default_factory=list)  # what the reader could not fully understand

    @property
    def total_us(self) -> float:
        return sum(self.values.values())

    def integer_values(self) -> dict[tuple[str, ...], int]:
        """Whole microseconds per path; largest-remainder rounding keeps the sum equal to the rounded total,
        so many short stacks do not drift the total as per-line truncation would."""
        items = [(path, value) for path, value in self.values.items() if value > 0]
        floors = {path: math.floor(value) for path, value in items}
        missing = round(sum(value for _, value in items)) - sum(floors.values())
        by_remainder = sorted(items, key=lambda pv: (pv[1] - floors[pv[0]], pv[1]), reverse=True)
        for path, _ in by_remainder[: max(missing, 0)]:
            floors[path] += 1
        return {path: value for path, value in floors.items() if value > 0}

    def lines(self) -> list[str]:
        ints = self.integer_values()
        return [f"{';'.join(map(sanitise_frame, path))} {ints[path]}" for path in sorted(ints)]

    def text(self) -> str:
        lines = self.lines()
        return "\n".join(lines) + ("\n" if lines else "")


OVERRUN_US = 1.0  # a span ending this much after its parent: not the clocks' rounding
# Python frames of the code that opens a record_function range (its __enter__, the op call under it;
# npuprof.range's and npuprof.range_start's calls, which open one: README, "Marks")
RANGE_MACHINERY = (
    "torch/autograd/profiler.py",
    "torch/_ops.py",
    "_record_function_enter",
    "torch/profiler/",
    "npuprof/marks.py",
)


@dataclass
class _Node:
    ts: float
    end: float
    node_id: int
    child_time: float = 0.0
    framed: bool = False  # its path holds Python frames from a "Call stack"
    npuprof_work: bool = False  # npuprof's own work: what it calls is folded into its node
    range_machinery: bool = False  # a Python frame of torch's record_function (RANGE_MACHINERY)
    step: bool = False  # a ProfilerStep#N span
    # an operator (cpu_op), its own end before any clipping: operators nest, as RecordFunction ranges do
    operator_end: float | None = None


class _PathTrie:
    """Call paths interned as (parent id, frame) -> id, so deep trees do not copy tuples per event; a path
    deeper than ``MAX_DEPTH`` ends in one ``DEEPER_FRAME`` that takes what is below it."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, str], int] = {}
        self.parent: list[int] = [-1]
        self.frame: list[str] = [""]
        self.depth: list[int] = [0]
        self.folded_deeper = False  # some path was cut at MAX_DEPTH

    def child(self, parent: int, frame: str) -> int:
        if self.depth[parent] >= MAX_DEPTH:
            self.folded_deeper = True
            if self.depth[parent] > MAX_DEPTH:  # the DEEPER_FRAME itself: all below is in it
                return parent
            frame = DEEPER_FRAME
        key = (parent, frame)
        found = self._ids.get(key)
        if found is None:
            found = len(self.parent)
            self._ids[key] = found
            self.parent.append(parent)
            self.frame.append(frame)
            self.depth.append(self.depth[parent] + 1)
        return found

    def path(self, node_id: int) -> tuple[str, ...]:
        frames: list[str] = []
        while node_id > 0:
            frames.append(self.frame[node_id])
            node_id = self.parent[node_id]
        return tuple(reversed(frames))


def _unnamed_notes(trie: _PathTrie) -> list[str]:
    """What the ``unknown`` frames are: the bodies of modules and classes (their caller ``exec`` or
    ``__build_class__``), whose names torch's tracer loses, or names its trace cannot hold."""
    callers = {trie.frame[trie.parent[i]] for i, frame in enumerate(trie.frame) if frame == UNNAMED_FRAME}
    notes = [IMPORTED_NOTE] if callers & BODY_CALLERS else []
    return notes + ([UNNAMED_NOTE] if callers - BODY_CALLERS else [])


@dataclass
class _HostTree:
    trie: _PathTrie
    self_time: dict[int, float]
    # (pid, tid) -> start-sorted [(ts, end, node id)] for locating the host call under a flow start
    spans: dict[tuple[object, object], list[tuple[float, float, int]]]
    node_of_event: dict[int, int]  # id(event) -> trie node
    has_python_frames: bool
    runtime_nodes: set[int]  # trie nodes of runtime calls (cudaLaunchKernel, AscendCL@..., ...)
    aliases: dict[tuple[object, object], tuple] = field(default_factory=dict)  # runtime thread -> host's

    def spans_of(self, pid: object, tid: object) -> list[tuple[float, float, int]]:
        key = (pid, tid)
        return self.spans.get(self.aliases.get(key, key), [])

    def launcher(self, node: int) -> int:
        return self.trie.parent[node] if node in self.runtime_nodes and self.trie.parent[node] > 0 else node


def _cat(ev: TraceEvent) -> str:
    """The event's category in torch 2.x's names (torch 1.8-1.10 wrote ``Kernel``, ``Operator``, ...)."""
    return vocab.canonical(ev.cat or "")


def _is_host_event(ev: TraceEvent, device_pids: set[object]) -> bool:
    return (
        ev.ph == "X"
        and ev.ts is not None
        and ev.dur is not None
        and _cat(ev) not in _IGNORED_CATS
        and _cat(ev) not in vocab.DEVICE_CATS
        and ev.pid not in device_pids
        and not vocab.is_mstx_mark(ev.cat, ev.args)
    )


def _is_npuprof_thread(items: list[tuple[int, TraceEvent]]) -> bool:
    """One of npuprof's own threads: only Python frames, some of them npuprof's code."""
    python_only = all(_cat(ev) == vocab.PYTHON_FUNCTION for _, ev in items)
    return python_only and any(vocab.is_npuprof_frame(ev.name) for _, ev in items)


def _caller_first(span: tuple[float, float, str]) -> tuple[float, float]:
    return span[0], -span[1]


def _is_idle_thread(items: list[tuple[int, TraceEvent]]) -> bool:
    """A thread that ran no torch work (only Python frames) and spent most of its time waiting: the
    innermost frames' time, by whether their function waits."""
    if not items or any(_cat(ev) != vocab.PYTHON_FUNCTION for _, ev in items):
        return False
    # by start, a caller before the callee that starts with it
    spans = sorted(
        ((float(ev.ts or 0.0), float(ev.dur or 0.0), ev.name) for _, ev in items), key=_caller_first
    )
    waiting = total = 0.0
    for k, (ts, dur, name) in enumerate(spans):
        end = ts + dur
        inner = any(t < end for t, _d, _n in spans[k + 1 : k + 2])  # the next frame starts inside: not a leaf
        if not inner:
            total += dur
            waiting += dur if _WAITING.search(name) else 0.0
    return total > 0 and waiting >= IDLE_SHARE * total


@dataclass
class _Processes:
    device: set[object]  # device work (GPU, Ascend Hardware)
    other: set[object]  # neither host nor device work (overlays npuprof or torch_npu computed)
    runtime: set[object]  # host runtime layers on the host's own threads (torch_npu's CANN)
    names: dict[object, str]


def _processes(events: list[TraceEvent]) -> _Processes:
    kinds = _Processes(set(), set(), set(), process_names(events))
    kinds.device |= device_labelled(events)
    for pid, name in kinds.names.items():
        if pid in kinds.device:
            continue
        if vocab.DEVICE_PROCESS_RE.search(name):
            kinds.device.add(pid)
        elif vocab.NOT_HOST_PROCESS_RE.search(name):
            kinds.other.add(pid)
        elif vocab.RUNTIME_PROCESS_RE.search(name):
            kinds.runtime.add(pid)
    return kinds


def _thread_aliases(events: list[TraceEvent], kinds: _Processes) -> dict[tuple[object, object], tuple]:
    """(runtime-layer pid, tid) -> (host pid, tid): the one host process with a thread of that id."""
    if not kinds.runtime:
        return {}
    excluded = kinds.device | kinds.other | kinds.runtime
    host_pids: dict[object, set[object]] = defaultdict(set)
    runtime_keys: set[tuple[object, object]] = set()
    for ev in events:
        if ev.ph != "X":
            continue
        if ev.pid in kinds.runtime:
            runtime_keys.add((ev.pid, ev.tid))
        elif ev.pid not in excluded:
            host_pids[ev.tid].add(ev.pid)
    aliases = {}
    for pid, tid in runtime_keys:
        owners = host_pids.get(tid, set())
        if len(owners) == 1:
            aliases[(pid, tid)] = (next(iter(owners)), tid)
    return aliases


def _call_stack(ev: TraceEvent) -> list[str]:
    """The Python frames of ``args["Call stack"]``, outermost first (torch writes the innermost first,
    separated by ";"), npuprof's own left out."""
    if not ev.args or b'"Call stack"' not in bytes(ev.args):
        return []
    value = ev.args_dict().get("Call stack")
    if isinstance(value, str):
        frames = value.split(";")
    elif isinstance(value, list):
        frames = [f for f in value if isinstance(f, str)]
    else:
        return []
    frames = [f.strip() for f in frames]
    return [sanitise_frame(f) for f in reversed(frames) if f and not vocab.is_npuprof_stack_frame(f)]


def _build_host_tree(
    events: list[TraceEvent],
    excluded_pids: set[object],
    kinds: _Processes | None = None,
    keep_idle: bool = True,
    idle: list[tuple[object, object]] | None = None,
    overlaps: list[str] | None = None,
    unnested: list[tuple[tuple[object, object], float, list[str], float]] | None = None,
    links: bool = True,
) -> _HostTree:
    """``links``: keep what device tasks are linked to their launches by (``spans``, ``node_of_event``:
    one entry per host event; a device metric's). ``idle`` receives the threads left out as idle (when
    ``keep_idle`` is False); ``overlaps`` the steps cut where the next one began; ``unnested`` the threads
    whose spans overlapped without nesting so that part of their busy time is in no stack, or an operator's
    time in another span's: (thread, µs not counted, the names of spans cut, µs operators ran past the
    operator they began in)."""
    kinds = kinds or _Processes(set(), set(), set(), {})
    idle = [] if idle is None else idle
    overlaps = [] if overlaps is None else overlaps
    unnested = [] if unnested is None else unnested
    aliases = _thread_aliases(events, kinds)
    by_thread: dict[tuple[object, object], list[tuple[int, TraceEvent]]] = defaultdict(list)
    for order, ev in enumerate(events):
        if _is_host_event(ev, excluded_pids):
            key = (ev.pid, ev.tid)
            by_thread[aliases.get(key, key)].append((order, ev))
    opened_before = _frames_open_at_start(by_thread)
    trie = _PathTrie()
    self_time: dict[int, float] = defaultdict(float)
    spans: dict[tuple[object, object], list[tuple[float, float, int]]] = {}
    node_of_event: dict[int, int] = {}
    runtime_nodes: set[int] = set()
    has_python = False
    for thread, items in by_thread.items():
        if _is_npuprof_thread(items):
            continue
        if not keep_idle and _is_idle_thread(items):
            idle.append(thread)
            continue
        # Python frames from the operators' "Call stack" only where there are no python_function events
        use_call_stacks = not any(_cat(ev) == vocab.PYTHON_FUNCTION for _, ev in items)
        items.sort(key=lambda oe: (oe[1].ts, -(oe[1].dur or 0.0), _CAT_RANK.get(_cat(oe[1]), 3), oe[0]))
        _order_same_spans(items)
        steps = _steps_of(items)
        step_ids = {id(ev) for ev in steps}
        step_ends = _step_ends(steps, overlaps)
        stack: list[_Node] = []
        thread_spans: list[tuple[float, float, int]] | None = [] if links else None
        # the user's ranges that ran on past the end of the step they began in (frame, their end), outer
        # first: carried into the next step (helper-121: the step boundary, at optimizer.step()'s return,
        # falls inside a range around the whole iteration; its rest read as the next step's own time)
        carried: list[tuple[str, float]] = []
        step_starts = sorted(float(ev.ts or 0.0) for ev in steps)
        thread_self: dict[int, float] = defaultdict(float)  # merged into self_time after the thread
        cut_names: list[str] = []  # spans that ran past the end of their parent, not by a clock's rounding
        op_cut_us = 0.0  # the time operators ran past the operator they began in (helper-221)
        for _, ev in items:
            ts = float(ev.ts or 0.0)
            end = step_ends.get(id(ev)) or ts + max(float(ev.dur or 0.0), 0.0)
            while stack and ts >= stack[-1].end:
                carried = _pop(stack, thread_self, carried, step_starts, trie, thread_spans)
            cat = _cat(ev)
            is_step = id(ev) in step_ids
            if cat == vocab.USER_ANNOTATION and not is_step:
                # A record_function range (Optimizer.step#, the user's) opens inside the Python calls of
                # its __enter__ and closes after they return: it belongs to the nearest frame that holds
                # it whole, not clipped to the few µs of the call it began in. (ProfilerStep#N stays
                # clipped: with Python frames the graph is one of code paths, not one per step.)
                # Those calls (torch's, RANGE_MACHINERY) end where it begins: their rest is inside it (each
                # µs counted once). A frame of the script's own that returns inside the range (a range
                # opened in one function and closed in another) is the code that runs there: the range is
                # cut at its end instead, as any child overrunning its parent is.
                while len(stack) > 1 and stack[-1].range_machinery and end > stack[-1].end + OVERRUN_US:
                    call = stack.pop()
                    cut = call.end - max(ts, call.ts)
                    call.end -= cut
                    stack[-1].child_time -= cut
                    _close(call, thread_self)
            parent = stack[-1] if stack else None
            name = opened_before.get(id(ev), ev.name)
            own_end = end
            if parent is not None and end > parent.end:
                if _crosses_step_end(stack, cat, is_step, end):
                    carried.append((_frame_of(name, is_step), end))
                elif end > parent.end + OVERRUN_US:
                    cut_names.append(name)
                    # past the operator's own end, not where a frame above it cut it (by design)
                    if parent.operator_end is not None and cat == vocab.CPU_OP:
                        op_cut_us += max(end - max(parent.operator_end, parent.end), 0.0)
                end = parent.end  # a child that overruns its parent (clock rounding): clip it
            has_python = has_python or cat == vocab.PYTHON_FUNCTION
            framed = parent is not None and parent.framed
            work = parent is not None and parent.npuprof_work
            if work:
                node_id = parent.node_id  # folded into npuprof's frame
            elif cat == vocab.PYTHON_FUNCTION and vocab.is_npuprof_stack_frame(ev.name):
                if parent is not None and vocab.is_npuprof_wrapper_frame(ev.name):
                    node_id = parent.node_id  # a wrapper of the script's call: its time goes to its caller
                else:  # npuprof's own work (a step boundary): one frame, not the script's
                    node_id = trie.child(parent.node_id if parent else 0, vocab.NPUPROF_WORK)
                    work = True
            else:
                node_id = parent.node_id if parent else 0
                # a step's own call stack is where the step boundary was taken (npuprof's code), not where
                # what runs in it was called (helper-123: every operator of a torch_npu trace under it)
                frames = _call_stack(ev) if use_call_stacks and not framed and not is_step else []
                for frame in frames:
                    node_id = trie.child(node_id, frame)
                if frames:
                    framed = has_python = True
                node_id = trie.child(node_id, _frame_of(name, is_step))
            if parent is not None:
                parent.child_time += end - ts
            machinery = cat == vocab.PYTHON_FUNCTION and any(mark in ev.name for mark in RANGE_MACHINERY)
            node = _Node(
                ts,
                end,
                node_id,
                framed=framed,
                npuprof_work=work,
                range_machinery=machinery,
                step=is_step,
                operator_end=own_end if cat == vocab.CPU_OP else None,
            )
            stack.append(node)
            if links:
                node_of_event[id(ev)] = node_id
            # a launch below MAX_DEPTH is in the DEEPER_FRAME, not the frame itself: its kernels stay below it
            if (cat in vocab.RUNTIME_CATS or ev.pid in kinds.runtime) and trie.frame[node_id] != DEEPER_FRAME:
                runtime_nodes.add(node_id)
            if thread_spans is not None:
                thread_spans.append((ts, end, node_id))
            if is_step and carried:
                carried = _carry_into(stack, carried, trie, thread_spans, ts, node.end)
            elif is_step:
                carried = []
        while stack:
            carried = _pop(stack, thread_self, carried, step_starts, trie, thread_spans)
        if thread_spans is not None:
            spans[thread] = thread_spans
        for node_id, value in thread_self.items():
            self_time[node_id] += value
        if cut_names:  # the totals are the thread's busy time (docs/formats.md): say what is not in them
            # (helper-221: what an operator ran past the operator it began in, inside a span around both,
            # is in that span's stack: no µs lost, yet not where it ran; said too)
            missing = max(_busy_us(items) - math.fsum(thread_self.values()), 0.0)
            if missing > OVERRUN_US or op_cut_us > OVERRUN_US:
                unnested.append((thread, missing, cut_names, op_cut_us))
    return _HostTree(trie, self_time, spans, node_of_event, has_python, runtime_nodes, aliases)


def _order_same_spans(items: list[tuple[int, TraceEvent]]) -> None:
    """Caller before callee among events of one category with the same start and duration (sorted by
    ``(ts, -dur, category)``), where the trace says which called which: Python frames by ``Python parent
    id``, operators and ranges by ``External id`` (torch numbers them as they begin). The file's order
    decided (helper-209: torch < 2.0 writes whole µs, where a call and the one it makes often share both;
    a trace in another order put ``_record_function_enter_new`` above the ``_ops.py`` ``__call__`` that
    made it)."""
    start = 0
    while start < len(items):
        ev = items[start][1]
        stop = start + 1
        while stop < len(items) and (
            items[stop][1].ts == ev.ts and items[stop][1].dur == ev.dur and _cat(items[stop][1]) == _cat(ev)
        ):
            stop += 1
        if stop - start > 1:
            items[start:stop] = _callers_first(items[start:stop], _cat(ev))
        start = stop


def _callers_first(run: list[tuple[int, TraceEvent]], cat: str) -> list[tuple[int, TraceEvent]]:
    args = [ev.args_dict() if ev.args else {} for _, ev in run]
    if cat == vocab.PYTHON_FUNCTION:
        parent_of = {a.get("Python id"): a.get("Python parent id") for a in args if "Python id" in a}

        def depth(a: dict) -> int:  # frames of the run above this one
            seen, node = 0, a.get("Python parent id")
            while node in parent_of and seen < len(run):
                seen, node = seen + 1, parent_of[node]
            return seen

        keys: list[object] = [depth(a) for a in args]
    else:
        keys = [_external_id(a) for a in args]
        if not all(isinstance(k, int | float) and not isinstance(k, bool) for k in keys):
            return run
    order = sorted(range(len(run)), key=lambda k: keys[k])  # type: ignore[arg-type,return-value]
    return [run[k] for k in order]


_PY_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.*)$")
OPEN_AT_START_US = 100.0  # torch records the frames open when it starts one after another, µs apart
OPEN_AT_START_MAX = 256  # frames looked at for them (a deeper stack at the start keeps its outer names)
# Frames open at the start all end at the capture's end: ts + dur of two of them, each exact in ns, differ
# by a float's rounding at epoch-µs magnitudes (5694744237895.186 + 131382.687 < 5694744237896.627 +
# 131381.246), which cut the chain there and left the step function two boxes (helper-219)
ENDS_AS_ONE = 0.01  # µs


def _frames_open_at_start(
    by_thread: dict[tuple[object, object], list[tuple[int, TraceEvent]]],
) -> dict[int, str]:
    """The Python frames that were open when the profiler started, renamed as the same function's calls
    made while it recorded are named: torch names such a frame by the line it was at (``train.py(17):
    train_step``), a call by its ``def`` line (``train.py(12): train_step``), so the step function at
    whose boundary a capture begins was two frames (helper-125: 2% of its time in a second box). Renamed
    only where the function's calls have one ``def`` line in the trace. By event id."""
    open_at_start: list[tuple[int, str, str]] = []  # (event id, file, func)
    chained: set[int] = set()
    frames = [[ev for _, ev in items if _cat(ev) == vocab.PYTHON_FUNCTION] for items in by_thread.values()]
    for thread_frames in frames:
        chain: list[TraceEvent] = []
        first = heapq.nsmallest(
            OPEN_AT_START_MAX, thread_frames, key=lambda ev: (float(ev.ts or 0.0), -float(ev.dur or 0.0))
        )
        for ev in first:  # the chain of nested frames at the thread's first one
            ts, last = float(ev.ts or 0.0), chain[-1] if chain else None
            if last is not None and not (
                ts - float(last.ts or 0.0) <= OPEN_AT_START_US
                and ts + float(ev.dur or 0.0) <= float(last.ts or 0.0) + float(last.dur or 0.0) + ENDS_AS_ONE
            ):
                break
            chain.append(ev)
        for ev in chain:
            if (match := _PY_FRAME.match(ev.name)) is not None:
                open_at_start.append((id(ev), match["file"], match["func"]))
                chained.add(id(ev))
    if not open_at_start:
        return {}
    endings = tuple({f"): {func}" for _, _, func in open_at_start})
    def_lines: dict[tuple[str, str], set[str]] = defaultdict(set)
    for thread_frames in frames:  # the calls of those functions made while it recorded
        for ev in thread_frames:
            if ev.name.endswith(endings) and id(ev) not in chained and (match := _PY_FRAME.match(ev.name)):
                def_lines[(match["file"], match["func"])].add(match["line"])
    renamed: dict[int, str] = {}
    for event_id, file, func in open_at_start:
        lines = def_lines.get((file, func), set())
        if len(lines) == 1:
            renamed[event_id] = f"{file}({next(iter(lines))}): {func}"
    return renamed


def _busy_us(items: list[tuple[int, TraceEvent]]) -> float:
    """The length of the union of a thread's start-sorted spans: the time it was busy."""
    busy, start, end = 0.0, -math.inf, -math.inf
    for _, ev in items:
        ts = float(ev.ts or 0.0)
        stop = ts + max(float(ev.dur or 0.0), 0.0)
        if ts > end:
            busy += max(end - start, 0.0) if end > -math.inf else 0.0
            start, end = ts, stop
        else:
            end = max(end, stop)
    return busy + (end - start if end > -math.inf else 0.0)


def _crosses_step_end(stack: list[_Node], cat: str, is_step: bool, end: float) -> bool:
    """Does a user's range (not a step, no Python frames above it) run past the end of the step it is in,
    its parents clipped there, by more than a clock's rounding?"""
    if cat != vocab.USER_ANNOTATION or is_step or stack[-1].framed:
        return False
    step = next((node for node in reversed(stack) if node.step), None)
    return step is not None and stack[-1].end == step.end and end > step.end + OVERRUN_US


def _pop(
    stack: list[_Node],
    self_time: dict[int, float],
    carried: list[tuple[str, float]],
    step_starts: list[float],
    trie: _PathTrie,
    thread_spans: list[tuple[float, float, int]] | None,
) -> list[tuple[str, float]]:
    """Close the top of ``stack``; a step closing with ranges carried past its end opens them again after
    it, until the next step begins (or for good after the last). Returns what is still carried."""
    closed = stack.pop()
    _close(closed, self_time)
    if not (closed.step and carried and not stack):
        return carried
    following = bisect.bisect_left(step_starts, closed.end)
    until = step_starts[following] if following < len(step_starts) else math.inf
    return _carry_into(stack, carried, trie, thread_spans, closed.end, until)


def _carry_into(
    stack: list[_Node],
    carried: list[tuple[str, float]],
    trie: _PathTrie,
    thread_spans: list[tuple[float, float, int]] | None,
    start: float,
    until: float,
) -> list[tuple[str, float]]:
    """Open again from ``start`` (on top of ``stack``: the step just opened, or nothing, in the time after a
    step before the next one begins at ``until``) the ranges that ran on past the end of the previous step,
    each as long as it lasts within ``until``; return those that run on past ``until`` too. Their time is
    then theirs, not the step's nor lost (the totals stay each thread's busy time, helper-123)."""
    still: list[tuple[str, float]] = []
    for frame, end in carried:
        if end <= start:
            break  # it ended at the boundary: those inside it too
        parent = stack[-1] if stack else None
        stop = min(end, parent.end if parent is not None else until)
        node = _Node(start, stop, trie.child(parent.node_id if parent is not None else 0, frame))
        if parent is not None:
            parent.child_time += node.end - node.ts
        stack.append(node)
        if thread_spans is not None:
            thread_spans.append((node.ts, node.end, node.node_id))
        if end > until + OVERRUN_US:
            still.append((frame, end))
    return still


def _steps_of(items: list[tuple[int, TraceEvent]]) -> list[TraceEvent]:
    """The profiler's steps among a thread's start-sorted ``items``: the ``ProfilerStep#N`` spans that do
    not lie inside an earlier one. torch's steps follow one another; one inside another is a
    ``record_function`` the script named so (helper-137), a range of that step, as analyse reads it."""
    steps: list[TraceEvent] = []
    for _, ev in items:
        if not _is_step_name(ev.name) or ev.ts is None:
            continue
        ts, dur = float(ev.ts), max(float(ev.dur or 0.0), 0.0)
        if steps:
            last = steps[-1]
            last_ts, last_dur = float(last.ts or 0.0), max(float(last.dur or 0.0), 0.0)
            if vocab.step_inside(ts, dur, last_ts, last_dur):
                continue
        steps.append(ev)
    return steps


def _step_ends(steps: list[TraceEvent], overlaps: list[str]) -> dict[int, float]:
    """id(step event) -> its end cut at the next step's start, for the steps of a thread (``_steps_of``)
    that run into the next one: nested in it, the next step lost its time to it (one 1 ns too long too,
    from rounding; analyse cuts them alike). The name of each cut by more than a rounding goes to
    ``overlaps``."""
    ends: dict[int, float] = {}
    for ev, following in itertools.pairwise(steps):
        ts, next_ts = float(ev.ts or 0.0), float(following.ts or 0.0)
        end = ts + max(float(ev.dur or 0.0), 0.0)
        if next_ts > ts and end > next_ts:
            ends[id(ev)] = next_ts
            if end - next_ts > OVERRUN_US:  # not a clock's rounding: said
                overlaps.append(ev.name)
    return ends


def _frame_of(name: str, is_step: bool) -> str:
    """An event's frame: its name sanitised; every step (``ProfilerStep#N``) one ``ProfilerStep`` frame (a
    flame graph of code paths, not one tower per step: without Python frames the steps are the roots)."""
    return STEP_FRAME if is_step else sanitise_frame(name)


def _is_step_name(name: str) -> bool:
    """``ProfilerStep#N``: torch's user_annotation, torch_npu's cpu_op (helper-100)."""
    return name.startswith(vocab.STEP_PREFIX) and name[len(vocab.STEP_PREFIX) :].isdigit()


def _close(node: _Node, self_time: dict[int, float]) -> None:
    self_time[node.node_id] += max(node.end - node.ts - node.child_time, 0.0)


def _innermost_at(spans: list[tuple[float, float, int]], ts: float) -> int | None:
    """The deepest host span on a thread that contains ``ts`` (spans are start-sorted, properly nested)."""
    index = bisect.bisect_right(spans, (ts, math.inf, math.inf)) - 1
    best = None
    # walk back over the spans that started before ts; the first one covering ts is the innermost
    while index >= 0:
        start, end, node_id = spans[index]
        if start <= ts <= end:
            best = node_id
            break
        index -= 1
        if ts - start > 1e7:  # 10 s back: nothing encloses it
            break
    return best


def _external_id(args: dict[str, object]) -> object:
    """``External id``, or ``external id`` as torch 1.8-1.10 wrote it (docs/formats.md, the vocabulary)."""
    found = _link_id(args, "External id")
    return found if found is not None else _link_id(args, "external id")


def _device_links(
    events: list[TraceEvent],
    tree: _HostTree,
    device_events: list[TraceEvent],
    ambiguous: list[int] | None = None,
) -> dict[int, int]:
    """id(device event) -> host trie node of the call that launched it. A trace of several processes (each
    numbering its launches' correlation ids and its operators' External ids on its own) links a task to a
    call of its own process (analysis/process_links.py; helper-221: one process's gemm was drawn under
    the other's aten::add, the correlation id's last launch in the file); ``ambiguous`` receives the count
    of tasks any of several processes could have launched, linked to none."""
    from npuprof.analysis import process_links

    links: dict[int, int] = {}
    codes: dict[object, int] = {}  # pid -> process number
    by_corr: dict[object, dict[int, int]] = {}  # correlation -> process -> node of its (last) launch
    launches: dict[object, list[tuple[int, float]]] = {}
    by_external: dict[object, dict[int, int]] = {}  # External id -> process -> node of its first operator
    for ev in events:
        node = tree.node_of_event.get(id(ev))
        if node is None or not ev.args:
            continue
        raw = bytes(ev.args)
        if b'"correlation"' in raw or b'"External id"' in raw or b'"external id"' in raw:
            args = ev.args_dict()
            correlation, external = _link_id(args, "correlation"), _external_id(args)
            cat = _cat(ev)
            proc = codes.setdefault(ev.pid, len(codes))
            if correlation is not None and cat not in (
                vocab.CPU_OP,
                vocab.USER_ANNOTATION,
                vocab.PYTHON_FUNCTION,
            ):
                by_corr.setdefault(correlation, {})[proc] = node
                launches.setdefault(correlation, []).append((proc, float(ev.ts or 0.0)))
            elif external is not None and cat in (vocab.CPU_OP, vocab.USER_ANNOTATION):
                by_external.setdefault(external, {}).setdefault(proc, node)

    flow_start: dict[object, dict[int, int]] = {}  # (cat, id) -> process -> node of its (last) start
    # (device pid, tid, ts) -> the launch flows ending there, by rank (Kineto's ac2g, then torch_npu's
    # async_npu from the operator, then HostToDevice from the CANN runtime call)
    flow_end: dict[tuple[object, object, float], list[tuple[int, object]]] = defaultdict(list)
    for ev in events:
        rank = vocab.LAUNCH_FLOW_RANK.get(ev.cat)
        if rank is None or ev.id is None or ev.ts is None:
            continue
        if ev.ph == "s":
            node = _innermost_at(tree.spans_of(ev.pid, ev.tid), float(ev.ts))
            if node is not None:
                proc = codes.setdefault(ev.pid, len(codes))
                flow_start.setdefault((ev.cat, ev.id), {})[proc] = node
                launches.setdefault((_FLOW, ev.cat, ev.id), []).append((proc, float(ev.ts)))
        elif ev.ph in ("f", "t"):
            flow_end[(ev.pid, ev.tid, round(float(ev.ts), 3))].append((rank, (ev.cat, ev.id)))

    # per task: the correlation id of a launch, else the first flow (by rank) ending at it from a call
    keys: list[tuple[object, object, object]] = []
    for ev in device_events:
        correlation, external = _task_ids(ev)
        ends = sorted(flow_end.get((ev.pid, ev.tid, round(float(ev.ts), 3)), ())) if ev.ts is not None else ()
        flow = next((key for _rank, key in ends if key in flow_start), None)
        keys.append((correlation if correlation in by_corr else None, flow, external))
    hosts: list[int | None] = [None] * len(keys)  # one process (or none): every id is its own
    if len(codes) > 1:  # several processes: which one's call launched each task
        owners = {ext: set(procs) for ext, procs in by_external.items()}
        tasks = (
            (_launch_key(corr, flow), ext, float(ev.ts or 0.0), ev.pid)
            for (corr, flow, ext), ev in zip(keys, device_events, strict=True)
        )
        hosts = list(process_links.task_processes(tasks, launches, owners))
    for ev, (correlation, flow, external), host in zip(device_events, keys, hosts, strict=True):
        if host == process_links.AMBIGUOUS:
            if ambiguous is not None:
                ambiguous[0] += 1
            continue
        node = None
        # the launch of the correlation id, else the flow's start, else the operator of the External id
        for found in (by_corr.get(correlation), flow_start.get(flow), by_external.get(external)):
            if found:
                node = found.get(host) if host is not None else next(iter(found.values()))
            if node is not None:
                break
        if node is not None:
            links[id(ev)] = node
    return links


def _launch_key(correlation: object, flow: object) -> object:
    """A task's key among the launches: its correlation id, else (_FLOW, cat, id) of its flow."""
    if correlation is not None:
        return correlation
    return (_FLOW, *flow) if isinstance(flow, tuple) else None


_FLOW = "flow"  # a launch found by its flow, keyed (_FLOW, cat, id) beside correlation ids


def _task_ids(ev: TraceEvent) -> tuple[object, object]:
    """(correlation, External id) of a device task, None where it has none that links."""
    args = ev.args_dict()
    return _link_id(args, "correlation"), _external_id(args)


def _link_id(args: dict[str, object], key: str) -> int | float | str | None:
    """``args[key]`` when it can link events (a number or a string; anything else links nothing)."""
    value = args.get(key)
    return value if isinstance(value, int | float | str) else None


def _device_work(
    events: list[TraceEvent], kinds: _Processes
) -> tuple[list[TraceEvent], dict[tuple[str, str], int]]:
    """The device tasks, and the count of those of a category the vocabulary does not know, by (process
    name, category)."""
    out = []
    unknown: dict[tuple[str, str], int] = defaultdict(int)
    for ev in events:
        if ev.ph != "X" or ev.dur is None or ev.ts is None:
            continue
        cat = _cat(ev)
        if cat in vocab.DEVICE_WORK_CATS:
            out.append(ev)
        elif ev.pid in kinds.device and cat not in vocab.DEVICE_CATS:
            out.append(ev)
            if not vocab.is_device_task_category(cat):
                unknown[(kinds.names.get(ev.pid, str(ev.pid)), cat)] += 1
    return out, dict(unknown)


def folded_from_events(
    events: list[TraceEvent], metric: str = HOST_METRIC, keep_idle: bool = False
) -> FoldedStacks:
    """The folded stacks of a trace's events; threads that only waited are left out unless ``keep_idle``."""
    if metric not in METRICS:
        raise StacksError(f"unknown metric {metric!r}; use one of: {', '.join(METRICS)}")
    kinds = _processes(events)
    idle: list[tuple[object, object]] = []
    overlaps: list[str] = []
    unnested: list[tuple[tuple[object, object], float, list[str], float]] = []
    tree = _build_host_tree(
        events, kinds.device | kinds.other, kinds, keep_idle, idle, overlaps, unnested, metric != HOST_METRIC
    )
    result = FoldedStacks(metric, has_python_frames=tree.has_python_frames)
    negative = sum(1 for ev in events if ev.ph == "X" and float(ev.dur or 0.0) < 0)
    if negative:  # each read as 0 µs long, as analyse reads them (helper-112); said as it says it
        result.notes.append(negative_durations_note(negative))
    if unnested and metric == HOST_METRIC:
        lost = sum(missing for _t, missing, _n, _c in unnested)
        op_cut_us = sum(cut for _t, _m, _n, cut in unnested)
        moved = (
            f", and {op_cut_us:,.0f} µs that operators ran past the operator they began in is not in their "
            "stacks (in no stack or another span's)"
            if op_cut_us > OVERRUN_US
            else ""
        )
        names = list(dict.fromkeys(name for _t, _m, cut, _c in unnested for name in cut))
        shown = ", ".join(map(printable, names[:3])) + (
            f" and {len(names) - 3} more" if len(names) > 3 else ""
        )
        cut_count = sum(len(cut) for _t, _m, cut, _c in unnested)
        tids = ", ".join(str(t) for (_p, t), _m, _n, _c in unnested)
        result.notes.append(
            f"{cut_count} span(s) on {len(unnested)} thread(s) ran past the end of the span they began in, "
            f"overlapping it without nesting in it ({shown}; a broken trace?): cut there, so {lost:,.0f} µs "
            f"of those threads' busy time is in no stack{moved} (tid {tids})"
        )
    if overlaps:
        shown = ", ".join(overlaps[:3]) + (f" and {len(overlaps) - 3} more" if len(overlaps) > 3 else "")
        result.notes.append(
            f"{len(overlaps)} step span(s) ran into the next step ({shown}): cut where the next one begins"
        )
    if idle and metric == HOST_METRIC:
        result.notes.append(
            f"left out {len(idle)} thread(s) that ran no torch work and only waited (tid "
            f"{', '.join(str(t) for _p, t in idle)}); npuprof export-stacks --keep-idle-threads keeps them"
        )
    if UNNAMED_FRAME in tree.trie.frame and metric == HOST_METRIC:
        result.notes.extend(_unnamed_notes(tree.trie))
    if tree.trie.folded_deeper:
        result.notes.append(
            f"call paths deeper than {MAX_DEPTH} frames end in one frame, {DEEPER_FRAME}, that holds the "
            "time of all the frames below it"
        )
    if metric == HOST_METRIC:
        if not tree.self_time:
            if any(_cat(ev) == vocab.TRACE for ev in events):  # torch's profiler wrote it: nothing ran
                raise StacksError(vocab.NO_OPERATOR_RAN)
            raise StacksError("the trace has no host operator events (is it a torch profiler trace?)")
        for node_id, value in tree.self_time.items():
            result.values[tree.trie.path(node_id)] = value
        return result

    device_events, unknown = _device_work(events, kinds)
    if unknown:
        result.notes.append(vocab.unknown_device_work_note(unknown, "counted as device time"))
    if not device_events:
        raise StacksError(
            f"the trace has no device kernels, so {metric} is empty (a CPU-only capture?); "
            f"use --metric {HOST_METRIC}"
        )
    if named := _other_device_named(metric, kinds):
        result.notes.append(named)
    ambiguous = [0]
    links = _device_links(events, tree, device_events, ambiguous)
    if ambiguous[0]:
        result.notes.append(
            f"{ambiguous[0]} device task(s) could have been launched by any of several processes of this "
            "trace (each numbers its launches' correlation ids and its operators' External ids on its own, "
            f"and theirs meet here): under {UNLINKED_FRAME}"
        )
    # summed per (launching node, kernel) first: a path is built once per pair, not once per kernel (a
    # path is up to MAX_DEPTH frames long, and hashing it costs as much)
    per_launcher: dict[tuple[int | None, str], float] = defaultdict(float)
    for ev in device_events:
        node = links.get(id(ev))
        per_launcher[(None if node is None else tree.launcher(node), ev.name)] += max(
            float(ev.dur or 0.0), 0.0
        )
    values: dict[tuple[str, ...], float] = defaultdict(float)
    for (node, name), value in per_launcher.items():
        prefix = tree.trie.path(node) if node is not None else (UNLINKED_FRAME,)
        values[(*prefix, sanitise_frame(name))] += value
    result.values = dict(values)
    return result


def _other_device_named(metric: str, kinds: _Processes) -> str | None:
    """The line that says a device metric names another device than the trace's, whose time is shown
    (an NPU trace's device: an ``Ascend Hardware`` / NPU process, as analyse tells it; else a GPU)."""
    npu = any(vocab.NPU_PROCESS_RE.search(kinds.names.get(pid, "")) for pid in kinds.device)
    return other_device_line(metric, npu)


def ranges_as_called(events: list[TraceEvent], rank_dir: Path) -> None:
    """The user's ranges and marks whose names torch's trace cannot hold (a quote, a backslash, a character
    outside printable ASCII), which npuprof.range put in it as ``%XX``, renamed as the script called them,
    from the capture's marks file (README, "Marks"), as analyse shows them. Nothing without that file."""
    from npuprof.analysis.marks_ranges import wanted

    want = wanted(rank_dir, lambda _said_by_analyse: None)
    if want is None or not want.shown:
        return
    for ev in events:
        if ev.cat == vocab.USER_ANNOTATION and (called := want.shown.get(ev.name)) is not None:
            ev.name = called


# The args keys the stacks read (Call stack, correlation, External id / external id, Python id / Python
# parent id, an mstx mark's event_type), as they appear in the raw args; a backslash may escape a key's
# letters, so args with one are kept whole too
_ARGS_READ = re.compile(
    b'"Call stack"|correlation|xternal id|Python|' + re.escape(vocab.MSTX_ARGS_KEY) + rb"|\\"
)


class _Slimmed:
    """The events export-stacks reads (``span_or_flow``), each held in less memory: its repeated strings
    (names, categories, phases, pids, tids) one object each, its ``args`` dropped where no key the stacks
    read is in them (a metadata event's kept). Held whole, a trace's events took ~4x its size
    (bench/README.md)."""

    def __init__(self) -> None:
        self._seen: dict[object, object] = {}

    def __call__(self, ev: TraceEvent) -> bool:
        if not span_or_flow(ev):
            return False
        once = self._seen.setdefault
        ev.name = once(ev.name, ev.name)  # type: ignore[assignment]
        ev.cat = once(ev.cat, ev.cat)  # type: ignore[assignment]
        ev.ph = once(ev.ph, ev.ph)  # type: ignore[assignment]
        ev.pid = once(ev.pid, ev.pid)  # type: ignore[assignment]
        ev.tid = once(ev.tid, ev.tid)  # type: ignore[assignment]
        if ev.args and ev.ph != "M" and _ARGS_READ.search(ev.args) is None:
            ev.args = EMPTY_RAW
        return True


def folded_from_trace(trace: Path, metric: str = HOST_METRIC, keep_idle: bool = False) -> FoldedStacks:
    from npuprof.analysis.scan import BLOCK as SCAN_BLOCK
    from npuprof.results import layout

    timeless = [0]
    # not its [memory] instants (no stack is made of them), in analyse's blocks: memory is what is kept
    loaded = load(trace, timeless, keep=_Slimmed(), block=SCAN_BLOCK)
    ranges_as_called(
        loaded.events, trace.parent.parent if trace.parent.name == layout.PARSED_DIR else trace.parent
    )
    folded = folded_from_events(loaded.events, metric, keep_idle)
    if timeless[0]:  # said as analyse says it (helper-197: left out unsaid)
        from npuprof.reports.trace_events import timeless_note

        folded.notes.append(timeless_note(timeless[0]))
    if loaded.repaired_strings:  # helper-123: frames of U+FFFD without a word
        from npuprof.analysis.trace_repairs import not_text_note

        folded.notes.append(not_text_note(loaded.repaired_strings))
    if loaded.repaired_names:
        from npuprof.analysis.trace_repairs import unescaped_note

        folded.notes.append(unescaped_note(loaded.repaired_names))
    if loaded.repaired_values:
        from npuprof.analysis.trace_repairs import unwritten_notes

        folded.notes.extend(unwritten_notes(loaded.repaired_values))
    if loaded.damaged.total:  # docs/formats.md, "Damaged events"
        folded.notes.append(loaded.damaged.note())
    if loaded.gzip_note:
        folded.notes.append(loaded.gzip_note)
    if loaded.cut_note:  # docs/formats.md, "Traces cut short"
        folded.notes.append(loaded.cut_note)
    return folded


def merge(stacks: Iterable[FoldedStacks]) -> FoldedStacks:
    merged: FoldedStacks | None = None
    for item in stacks:
        if merged is None:
            merged = FoldedStacks(item.metric, dict(item.values), item.has_python_frames)
            continue
        for path, value in item.values.items():
            merged.values[path] = merged.values.get(path, 0.0) + value
        merged.has_python_frames = merged.has_python_frames or item.has_python_frames
    if merged is None:
        raise StacksError("no stacks to merge")
    return merged
