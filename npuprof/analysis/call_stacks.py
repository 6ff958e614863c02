"""The Python call stack of each operator, rebuilt from a trace's ``python_function`` spans
(operator_details.csv's Call Stack; docs/formats.md, "The Ascend tables")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npuprof.analysis import nesting
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.extract import Extract

STACK_SEP = ";\r\n"  # how torch_npu joins an operator's Python frames (innermost first)
_SOURCE_FRAME = re.compile(r"\(\d+\): ")  # "file.py(12): function": a frame of the Python source


@dataclass
class PythonFrames:
    """The ``python_function`` spans of a trace: thread ``(pid, tid)``, start and duration (µs), name, and
    Kineto's ``Python id`` and ``Python parent id`` (-1 where absent)."""

    keys: list[tuple[Any, Any]]
    ts: np.ndarray
    dur: np.ndarray
    names: list[str]
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    parent_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def call_stacks(x: Extract, frames: PythonFrames) -> list[str | None]:
    """The Python stack of each operator (in file order) that carries none of its own, rebuilt from the
    ``python_function`` spans (torch >= 2 records stacks so): the source frames open on the operator's
    thread when it starts, innermost first, joined by ``;\\r\\n`` (torch_npu's form); npuprof's own frames
    left out. Fills ``x.op_stack`` for those operators (operator_details.csv's Call Stack) and returns the
    stacks it added (None for the others)."""
    n = len(x.op_ts)
    out: list[str | None] = [None] * n
    if not n or not len(frames.ts):
        return out
    ids = {key: k for k, key in enumerate(dict.fromkeys(frames.keys))}
    f_thread = np.fromiter(map(ids.__getitem__, frames.keys), np.int64, len(frames.keys))
    by_thread = np.array([ids.get(k, -1) for k in x.threads], dtype=np.int64)
    o_thread = by_thread[np.frombuffer(x.op_thread, dtype=np.int32)]
    o_ts = np.frombuffer(x.op_ts, dtype=np.float64)
    order = np.lexsort((-frames.dur, frames.ts, f_thread))
    thread, ts, dur = f_thread[order], frames.ts[order], frames.dur[order]
    parent = _frame_parents(frames, order)
    if parent is None:  # no ids: by the nesting of the spans in time
        parent, _, _ = nesting.walk(thread.astype(np.int32), ts, dur, np.zeros(len(ts)))
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
    names = list(map(frames.names.__getitem__, order.tolist()))
    # the stack of each frame as an id: (its name, the stack above it) numbered once, texts built once each
    stack_of = _frame_stacks(names, parent.tolist())
    texts = stack_of.texts
    own = np.frombuffer(x.op_stack, dtype=np.int32) if len(x.op_stack) else np.full(n, -1, np.int32)
    sid = np.where(cand >= 0, stack_of.ids[np.maximum(cand, 0)], 0)
    sid[own >= 0] = 0
    stack_ids = own.copy()
    uniq, inverse = np.unique(sid, return_inverse=True)
    interned = np.array([x.intern(texts[u]) if u else -1 for u in uniq.tolist()], dtype=np.int32)
    new = interned[inverse]
    stack_ids[new >= 0] = new[new >= 0]
    for k in np.flatnonzero(sid).tolist():
        out[k] = texts[sid[k]]
    x.op_stack = stack_ids
    return out


@dataclass
class _Stacks:
    ids: np.ndarray  # per frame: the id of its stack (0: no source frame)
    texts: list[str]  # per id: the stack's text, innermost frame first


def _frame_stacks(names: list[str], parent: list[int]) -> _Stacks:
    """Number the distinct stacks of the frames (a frame's stack: its name, when a source frame of the
    user's program, over its parent's stack)."""
    shown = {nm: bool(_SOURCE_FRAME.search(nm)) and not vocab.is_npuprof_frame(nm) for nm in set(names)}
    n = len(names)
    ids = [-1] * n
    table: dict[tuple[str, int], int] = {}
    texts = [""]

    def resolve(i: int) -> int:
        chain = []
        while i >= 0 and ids[i] < 0:
            chain.append(i)
            i = parent[i]
        above = ids[i] if i >= 0 else 0
        for v in reversed(chain):
            name = names[v]
            if shown[name]:
                key = (name, above)
                found = table.get(key)
                if found is None:
                    found = table[key] = len(texts)
                    texts.append(name + (STACK_SEP + texts[above] if above else ""))
                above = found
            ids[v] = above
        return above

    for i in range(n):
        up = parent[i]
        above = 0 if up < 0 else ids[up] if ids[up] >= 0 else resolve(up)
        name = names[i]
        if shown[name]:
            key = (name, above)
            found = table.get(key)
            if found is None:
                found = table[key] = len(texts)
                texts.append(name + (STACK_SEP + texts[above] if above else ""))
            above = found
        ids[i] = above
    return _Stacks(np.array(ids, dtype=np.int64) if n else np.zeros(0, np.int64), texts)


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
