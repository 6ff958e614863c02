"""The Python call stack of each operator, rebuilt from a trace's ``python_function`` spans
(operator_details.csv's Call Stack; docs/formats.md, "What the parser writes")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from npuprof.analysis import nesting
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.extract import Extract
from npuprof.analysis.trace_repairs import mended_frame_name

STACK_SEP = ";\r\n"  # how torch_npu joins an operator's Python frames (innermost first)
_SOURCE_FRAME = re.compile(r"\(\d+\): ")  # "file.py(12): function": a frame of the Python source
_JUMPS = 64  # rounds of pointer jumping: any chain of fewer than 2**64 parents ends within them


@dataclass
class PythonFrames:
    """The ``python_function`` spans of a trace, in file order: thread (an index into ``threads``, the
    ``(pid, tid)`` keys), start and duration (µs), name (an index into ``names``), and Kineto's
    ``Python id`` and ``Python parent id`` (-1 where absent)."""

    threads: list[tuple[Any, Any]]
    thread: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    names: list[str]
    name: np.ndarray
    ids: np.ndarray
    parent_ids: np.ndarray


def frames_of(x: Extract) -> PythonFrames:
    """The frames the scan collected into ``x`` (finished); their names (each distinct one once) with the
    Windows paths old torch wrote unescaped mended (trace_repairs.mended_frame_name)."""
    names = [mended_frame_name(name) for name in x.frame_names]
    threads = list(x.frame_threads)
    return PythonFrames(threads, x.f_thread, x.f_ts, x.f_dur, names, x.f_name, x.f_id, x.f_parent)


def call_stacks(x: Extract, frames: PythonFrames) -> np.ndarray:
    """The Python stack of each operator (in file order) that carries none of its own, rebuilt from the
    ``python_function`` spans (torch >= 2 records stacks so): the source frames open on the operator's
    thread when it starts, innermost first, joined by ``;\\r\\n`` (torch_npu's form); npuprof's own frames
    left out. Fills ``x.op_stack`` for those operators (operator_details.csv's Call Stack) and returns the
    stacks it added, per operator: an index into ``x.strings``, -1 for none."""
    n = len(x.op_ts)
    if not n or not len(frames.ts):
        return np.full(n, -1, np.int32)
    f_thread = frames.thread.astype(np.int64)
    key_of = {key: k for k, key in enumerate(frames.threads)}
    by_thread = np.array([key_of.get(k, -1) for k in x.threads], dtype=np.int64)
    o_thread = by_thread[np.frombuffer(x.op_thread, dtype=np.int32)]
    o_ts = np.frombuffer(x.op_ts, dtype=np.float64)
    order = np.lexsort((-frames.dur, frames.ts, f_thread))
    thread, ts, dur = f_thread[order], frames.ts[order], frames.dur[order]
    parent = _frame_parents(frames, order)
    if parent is None:  # no ids: by the nesting of the spans in time
        parent, _, _ = nesting.walk(thread.astype(np.int32), ts, dur, np.zeros(len(ts)))
    parent = _without_cycles(parent)
    end = ts + dur
    # the innermost frame open at the operator's start: the last one of its thread that started before it,
    # or the nearest of that frame's ancestors still open
    cand = np.full(n, -1, dtype=np.int64)
    for t in np.unique(o_thread[o_thread >= 0]).tolist():
        lo, hi = np.searchsorted(thread, [t, t + 1])
        sel = np.flatnonzero(o_thread == t)
        pos = np.searchsorted(ts[lo:hi], o_ts[sel], side="right") - 1
        cand[sel] = np.where(pos >= 0, pos + lo, -1)
    while True:
        climb = np.flatnonzero(cand >= 0)
        climb = climb[end[cand[climb]] <= o_ts[climb]]
        if not len(climb):
            break
        cand[climb] = parent[cand[climb]]
    stack_of = _frame_stacks(frames.name[order].astype(np.int64), parent, frames.names)
    texts = stack_of.texts
    own = np.frombuffer(x.op_stack, dtype=np.int32) if len(x.op_stack) else np.full(n, -1, np.int32)
    sid = np.where(cand >= 0, stack_of.ids[np.maximum(cand, 0)], 0)
    sid[own >= 0] = 0
    stack_ids = own.copy()
    uniq, inverse = np.unique(sid, return_inverse=True)
    interned = np.full(len(uniq), -1, dtype=np.int32)
    for k in stack_of.creation_order(uniq).tolist():  # the strings are numbered in that order
        interned[k] = x.intern(texts[uniq[k]])
    new = interned[inverse]
    stack_ids[new >= 0] = new[new >= 0]
    x.op_stack = stack_ids
    return new


@dataclass
class _Stacks:
    ids: np.ndarray  # per frame: the id of its stack (0: no source frame)
    texts: list[str]  # per id: the stack's text, innermost frame first
    first: np.ndarray  # per id: the order in which a frame-by-frame walk would first meet it (see below)
    depth: np.ndarray  # per id: its number of frames

    def creation_order(self, stack_ids: np.ndarray) -> np.ndarray:
        """Positions of the nonzero ``stack_ids`` in the order a walk over the frames (each frame after
        the chain of its unresolved ancestors, top-down) creates them."""
        live = np.flatnonzero(stack_ids > 0)
        ids = stack_ids[live]
        return live[np.lexsort((self.depth[ids], self.first[ids]))]


def _frame_stacks(name: np.ndarray, parent: np.ndarray, names: list[str]) -> _Stacks:
    """Number the distinct stacks of the frames (a frame's stack: its name, when a source frame of the
    user's program, over its parent's stack), one level of the frame tree at a time (``parent`` is
    acyclic)."""
    n = len(name)
    shown_name = np.array(
        [bool(_SOURCE_FRAME.search(nm)) and not vocab.is_npuprof_frame(nm) for nm in names], dtype=bool
    )
    shown = shown_name[name] if n else np.zeros(0, bool)
    depth = _depths(parent)
    by_depth = np.argsort(depth, kind="stable")
    top = int(depth.max()) if n else -1
    bounds = np.searchsorted(depth[by_depth], np.arange(top + 2))
    ids = np.zeros(n, np.int64)
    texts = [""]
    stack_depth = [0]
    table: dict[tuple[int, int], int] = {}
    width = n + 2  # more than any name index or stack id
    for level in range(top + 1):
        idx = by_depth[bounds[level] : bounds[level + 1]]
        up = parent[idx]
        above = np.where(up >= 0, ids[np.maximum(up, 0)], 0)
        sh = shown[idx]
        ids[idx[~sh]] = above[~sh]
        if not sh.any():
            continue
        keys, inverse = np.unique(name[idx[sh]] * width + above[sh], return_inverse=True)
        found = np.empty(len(keys), np.int64)
        for j, key in enumerate(keys.tolist()):
            pair = divmod(key, width)
            sid = table.get(pair)
            if sid is None:
                nm, below = pair
                sid = table[pair] = len(texts)
                texts.append(names[nm] + (STACK_SEP + texts[below] if below else ""))
                stack_depth.append(stack_depth[below] + 1)
            found[j] = sid
        ids[idx[sh]] = found[inverse]
    # a frame-by-frame walk resolves a frame at its own index, or earlier when a descendant comes first:
    # at the smallest index of its subtree (deepest level first)
    reached = np.arange(n, dtype=np.int64)
    for level in range(top, 0, -1):
        idx = by_depth[bounds[level] : bounds[level + 1]]
        np.minimum.at(reached, parent[idx], reached[idx])
    first = np.full(len(texts), n, np.int64)
    np.minimum.at(first, ids, reached)
    return _Stacks(ids, texts, first, np.array(stack_depth, dtype=np.int64))


def _depths(parent: np.ndarray) -> np.ndarray:
    """The number of ancestors of each frame (``parent`` acyclic), by pointer jumping."""
    depth = (parent >= 0).astype(np.int64)
    jump = parent.copy()
    for _ in range(_JUMPS):
        live = np.flatnonzero(jump >= 0)
        if not len(live):
            break
        depth[live] += depth[jump[live]]
        jump[live] = jump[jump[live]]
    return depth


def _without_cycles(parent: np.ndarray) -> np.ndarray:
    """``parent`` with the frames whose chain of parents never ends (ids that loop) made roots."""
    jump = parent.copy()
    for _ in range(_JUMPS):
        live = np.flatnonzero(jump >= 0)
        if not len(live):
            return parent
        jump[live] = jump[jump[live]]
    parent = parent.copy()
    parent[jump >= 0] = -1
    return parent


def _frame_parents(frames: PythonFrames, order: np.ndarray) -> np.ndarray | None:
    """The parent of each frame (in ``order``) by Kineto's Python ids (-1: a root, or a parent that is not
    in the trace); None when the frames have no ids."""
    ids, parents = frames.ids, frames.parent_ids
    if len(ids) != len(order) or not len(ids) or (ids < 0).any():
        return None
    ids, parents = ids[order], parents[order]
    by_id = np.argsort(ids, kind="stable")
    pos = np.clip(np.searchsorted(ids[by_id], parents), 0, len(ids) - 1)
    found = (ids[by_id][pos] == parents) & (parents >= 0)
    parent = np.where(found, by_id[pos], -1)
    parent[parent == np.arange(len(parent))] = -1  # a frame that names itself as its parent
    return parent.astype(np.int64)
