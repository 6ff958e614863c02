"""Folded stacks (``outer;...;inner <integer µs>``) rebuilt offline from a Kineto / Chrome trace.

Host metric (``self_cpu_time_total``): each thread's call tree is rebuilt from the nesting of its duration
events (Python frames, operators, annotations, runtime calls); every event's self time (its duration minus
its children's) goes to its path. The line totals therefore add up to each thread's busy time.

Device metrics (``self_cuda_time_total``, ``self_npu_time_total``): each device kernel / memcpy / memset is
linked to the host call that launched it (``args.correlation``, else an ``ac2g``/``async_npu`` flow, else
``External id``) and its duration goes to ``<launching stack>;<kernel name>``.

Frames are sanitised as torch's ``export_stacks`` does (space, ``;``, tab and newline become ``_``), so the
lines are accepted by FlameGraph's ``flamegraph.pl`` and by speedscope.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from npuprof.analysis import vocabulary as vocab
from npuprof.reports.trace_events import TraceEvent, load_events, process_names

HOST_METRIC = "self_cpu_time_total"
DEVICE_METRICS = ("self_cuda_time_total", "self_npu_time_total")
METRICS = (HOST_METRIC, *DEVICE_METRICS)

_IGNORED_CATS = frozenset({vocab.TRACE})
# Tie-break for events with the same start and duration: the caller first.
_CAT_RANK = {vocab.PYTHON_FUNCTION: 0, vocab.USER_ANNOTATION: 1, vocab.CPU_OP: 2}
_SANITISE = str.maketrans(" ;\t\n\r", "_____")
UNLINKED_FRAME = "[device_work_without_a_launching_call]"


class StacksError(ValueError):
    """The input cannot give the requested stacks; the message is one line for the user."""


def sanitise_frame(name: str) -> str:
    return name.translate(_SANITISE) or "_"


@dataclass
class FoldedStacks:
    """Time per call path, in microseconds (floats until written)."""

    metric: str
    values: dict[tuple[str, ...], float] = field(default_factory=dict)
    has_python_frames: bool = False

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


@dataclass
class _Node:
    ts: float
    end: float
    node_id: int
    child_time: float = 0.0


class _PathTrie:
    """Call paths interned as (parent id, frame) -> id, so deep trees do not copy tuples per event."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, str], int] = {}
        self.parent: list[int] = [-1]
        self.frame: list[str] = [""]

    def child(self, parent: int, frame: str) -> int:
        key = (parent, frame)
        found = self._ids.get(key)
        if found is None:
            found = len(self.parent)
            self._ids[key] = found
            self.parent.append(parent)
            self.frame.append(frame)
        return found

    def path(self, node_id: int) -> tuple[str, ...]:
        frames: list[str] = []
        while node_id > 0:
            frames.append(self.frame[node_id])
            node_id = self.parent[node_id]
        return tuple(reversed(frames))


@dataclass
class _HostTree:
    trie: _PathTrie
    self_time: dict[int, float]
    # (pid, tid) -> start-sorted [(ts, end, node id)] for locating the host call under a flow start
    spans: dict[tuple[object, object], list[tuple[float, float, int]]]
    node_of_event: dict[int, int]  # id(event) -> trie node
    has_python_frames: bool
    runtime_nodes: set[int]  # trie nodes of runtime calls (cudaLaunchKernel, ...)

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
    )


def _is_npuprof_thread(items: list[tuple[int, TraceEvent]]) -> bool:
    """One of npuprof's own threads: only Python frames, some of them npuprof's code."""
    python_only = all(_cat(ev) == vocab.PYTHON_FUNCTION for _, ev in items)
    return python_only and any(vocab.is_npuprof_frame(ev.name) for _, ev in items)


def _device_pids(events: list[TraceEvent]) -> tuple[set[object], set[object]]:
    """(device processes, processes that are neither host nor device work, e.g. analysis overlays)."""
    device: set[object] = set()
    other: set[object] = set()
    for pid, name in process_names(events).items():
        if vocab.DEVICE_PROCESS_RE.search(name):
            device.add(pid)
        elif vocab.NOT_HOST_PROCESS_RE.search(name):
            other.add(pid)
    return device, other


def _build_host_tree(events: list[TraceEvent], excluded_pids: set[object]) -> _HostTree:
    by_thread: dict[tuple[object, object], list[tuple[int, TraceEvent]]] = defaultdict(list)
    for order, ev in enumerate(events):
        if _is_host_event(ev, excluded_pids):
            by_thread[(ev.pid, ev.tid)].append((order, ev))
    trie = _PathTrie()
    self_time: dict[int, float] = defaultdict(float)
    spans: dict[tuple[object, object], list[tuple[float, float, int]]] = {}
    node_of_event: dict[int, int] = {}
    runtime_nodes: set[int] = set()
    has_python = False
    for thread, items in by_thread.items():
        if _is_npuprof_thread(items):
            continue
        items.sort(key=lambda oe: (oe[1].ts, -(oe[1].dur or 0.0), _CAT_RANK.get(_cat(oe[1]), 3), oe[0]))
        stack: list[_Node] = []
        thread_spans: list[tuple[float, float, int]] = []
        for _, ev in items:
            ts = float(ev.ts or 0.0)
            end = ts + max(float(ev.dur or 0.0), 0.0)
            while stack and ts >= stack[-1].end:
                _close(stack.pop(), self_time)
            parent = stack[-1] if stack else None
            if parent is not None and end > parent.end:
                end = parent.end  # a child that overruns its parent (clock rounding): clip it
            cat = _cat(ev)
            has_python = has_python or cat == vocab.PYTHON_FUNCTION
            if parent is not None and cat == vocab.PYTHON_FUNCTION and vocab.is_npuprof_frame(ev.name):
                node_id = parent.node_id  # npuprof's step wrapper: its time and children go to its caller
            else:
                node_id = trie.child(parent.node_id if parent else 0, sanitise_frame(ev.name))
            if parent is not None:
                parent.child_time += end - ts
            stack.append(_Node(ts, end, node_id))
            node_of_event[id(ev)] = node_id
            if cat in vocab.RUNTIME_CATS:
                runtime_nodes.add(node_id)
            thread_spans.append((ts, end, node_id))
        while stack:
            _close(stack.pop(), self_time)
        spans[thread] = thread_spans
    return _HostTree(trie, self_time, spans, node_of_event, has_python, runtime_nodes)


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


def _device_links(
    events: list[TraceEvent], tree: _HostTree, device_events: list[TraceEvent]
) -> dict[int, int]:
    """id(device event) -> host trie node of the call that launched it."""
    links: dict[int, int] = {}
    by_corr: dict[object, int] = {}
    by_external: dict[object, int] = {}
    for ev in events:
        node = tree.node_of_event.get(id(ev))
        if node is None or not ev.args:
            continue
        raw = bytes(ev.args)
        if b'"correlation"' in raw or b'"External id"' in raw:
            args = ev.args_dict()
            correlation, external = _link_id(args, "correlation"), _link_id(args, "External id")
            cat = _cat(ev)
            if correlation is not None and cat not in (
                vocab.CPU_OP,
                vocab.USER_ANNOTATION,
                vocab.PYTHON_FUNCTION,
            ):
                by_corr[correlation] = node
            elif external is not None and cat in (vocab.CPU_OP, vocab.USER_ANNOTATION):
                by_external.setdefault(external, node)

    flow_start: dict[object, int] = {}
    flow_end: dict[tuple[object, object, float], object] = {}
    for ev in events:
        if ev.cat not in vocab.LAUNCH_FLOW_CATS or ev.id is None or ev.ts is None:
            continue
        if ev.ph == "s":
            node = _innermost_at(tree.spans.get((ev.pid, ev.tid), []), float(ev.ts))
            if node is not None:
                flow_start[(ev.cat, ev.id)] = node
        elif ev.ph in ("f", "t"):
            flow_end[(ev.pid, ev.tid, round(float(ev.ts), 3))] = (ev.cat, ev.id)

    for ev in device_events:
        args = ev.args_dict()
        correlation, external = _link_id(args, "correlation"), _link_id(args, "External id")
        node = by_corr.get(correlation) if correlation is not None else None
        if node is None and ev.ts is not None:
            key = flow_end.get((ev.pid, ev.tid, round(float(ev.ts), 3)))
            node = flow_start.get(key) if key is not None else None
        if node is None and external is not None:
            node = by_external.get(external)
        if node is not None:
            links[id(ev)] = node
    return links


def _link_id(args: dict[str, object], key: str) -> int | float | str | None:
    """``args[key]`` when it can link events (a number or a string; anything else links nothing)."""
    value = args.get(key)
    return value if isinstance(value, int | float | str) else None


def _device_work(events: list[TraceEvent], device_pids: set[object]) -> list[TraceEvent]:
    out = []
    for ev in events:
        if ev.ph != "X" or ev.dur is None or ev.ts is None:
            continue
        cat = _cat(ev)
        if cat in vocab.DEVICE_WORK_CATS or (ev.pid in device_pids and cat not in vocab.DEVICE_CATS):
            out.append(ev)
    return out


def folded_from_events(events: list[TraceEvent], metric: str = HOST_METRIC) -> FoldedStacks:
    if metric not in METRICS:
        raise StacksError(f"unknown metric {metric!r}; use one of: {', '.join(METRICS)}")
    device_pids, other_pids = _device_pids(events)
    tree = _build_host_tree(events, device_pids | other_pids)
    result = FoldedStacks(metric, has_python_frames=tree.has_python_frames)
    if metric == HOST_METRIC:
        if not tree.self_time:
            raise StacksError("the trace has no host operator events (is it a torch profiler trace?)")
        for node_id, value in tree.self_time.items():
            result.values[tree.trie.path(node_id)] = value
        return result

    device_events = _device_work(events, device_pids)
    if not device_events:
        raise StacksError(
            f"the trace has no device kernels, so {metric} is empty (a CPU-only capture?); "
            f"use --metric {HOST_METRIC}"
        )
    links = _device_links(events, tree, device_events)
    values: dict[tuple[str, ...], float] = defaultdict(float)
    for ev in device_events:
        node = links.get(id(ev))
        prefix = tree.trie.path(tree.launcher(node)) if node is not None else (UNLINKED_FRAME,)
        values[(*prefix, sanitise_frame(ev.name))] += max(float(ev.dur or 0.0), 0.0)
    result.values = dict(values)
    return result


def folded_from_trace(trace: Path, metric: str = HOST_METRIC) -> FoldedStacks:
    return folded_from_events(load_events(trace), metric)


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
