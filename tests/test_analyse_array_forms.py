"""The array forms of the analysis give exactly what their one-value-at-a-time definitions give: operator
nesting (the stack walk), Python's round and repr."""

from __future__ import annotations

import numpy as np
import pytest

from npuprof.analysis import nesting, tables


def _sorted(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.lexsort((-dur, ts, thread))
    return thread[order], ts[order], dur[order]


def _nested_ranges(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Properly nested ranges (RecordFunction-like), with zero lengths, touching ends and equal twins."""
    ts: list[float] = []
    dur: list[float] = []

    def fill(lo: float, hi: float, depth: int) -> None:
        t = lo
        while t < hi and len(ts) < n:
            length = min(hi - t, float(rng.choice([0.0, 0.5, 1.0, 2.0, 5.0, 10.0])))
            ts.append(t)
            dur.append(length)
            if depth < 6 and length > 0:
                fill(t, t + length, depth + 1)
            t += length + float(rng.choice([0.0, 0.0, 0.25, 1.0]))

    fill(0.0, 1e9, 0)
    return np.array(ts), np.array(dur)


@pytest.mark.parametrize("shape", ["nested", "overlapping"])
def test_walk_matches_the_stack_walk(shape: str) -> None:
    rng = np.random.default_rng(7)
    used_arrays = 0
    for _ in range(150):
        n = int(rng.integers(1, 250))
        if shape == "nested":
            ts, dur = _nested_ranges(rng, n)
        else:
            ts = np.round(rng.random(n) * 50, 1)
            dur = np.round(rng.random(n) * 10, 1) * rng.choice([0, 1], n)
        thread = rng.integers(0, 3, len(ts)).astype(np.int32)
        thread, ts, dur = _sorted(thread, ts, dur)
        dev_self = rng.random(len(ts)) * rng.choice([0, 1], len(ts))
        used_arrays += nesting._parents(thread, ts, dur) is not None
        got = nesting.walk(thread, ts, dur, dev_self)
        want = nesting._stack_walk(thread, ts, dur, dev_self)
        for mine, reference in zip(got, want, strict=True):
            assert np.array_equal(mine, reference)
    if shape == "nested":
        assert used_arrays == 150  # nested ranges always take the array path
    else:
        assert used_arrays < 150  # overlapping ones mostly fall back to the walk


def test_partial_overlap_follows_the_walk() -> None:
    # b starts inside a and outlives it; c starts after a ended but inside b: the walk makes c b's child
    thread = np.zeros(3, np.int32)
    ts = np.array([0.0, 5.0, 10.5])
    dur = np.array([10.0, 10.0, 1.0])
    assert nesting._parents(thread, ts, dur) is None
    parent, child_sum, dev_total = nesting.walk(thread, ts, dur, np.array([1.0, 2.0, 4.0]))
    assert parent.tolist() == [-1, 0, 1]
    assert child_sum.tolist() == [10.0, 1.0, 0.0]
    assert dev_total.tolist() == [7.0, 6.0, 4.0]


def test_op_order_equals_lexsort() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 200))
        thread = rng.integers(0, 4, n).astype(np.int32)
        ts = np.round(rng.random(n) * 20, 0)
        dur = np.round(rng.random(n) * 5, 0)
        if rng.random() < 0.5:  # already in trace order: the fast path
            order = np.lexsort((-dur, ts, thread))
            thread, ts, dur = thread[order], ts[order], dur[order]
            # interleave the threads, keeping each one's order
            keys = rng.random(n)
            for t in np.unique(thread):
                keys[thread == t] = np.sort(keys[thread == t])
            shuffle = np.argsort(keys)
            thread, ts, dur = thread[shuffle], ts[shuffle], dur[shuffle]
        assert np.array_equal(tables._op_order(thread, ts, dur), np.lexsort((-dur, ts, thread)))


@pytest.mark.parametrize("ndigits", [3, 4, 6])
def test_rounded_equals_python_round(ndigits: int) -> None:
    from npuprof.analysis.rounding import rounded

    rng = np.random.default_rng(ndigits)
    halves = (rng.integers(0, 10**7, 20_000) + 0.5) / 10**ndigits  # scaled values land on halves
    values = np.concatenate(
        [
            rng.random(20_000) * 1e4,
            halves,
            -halves,
            rng.standard_normal(20_000) * 1e12,  # beyond exact scaling: Python's round decides
            10 ** rng.uniform(-12, 18, 20_000),
            [0.0, -0.0, np.nan, np.inf, -np.inf, 2.675, 1.0005, 0.0005, -0.0005, 5e-324],
        ]
    )
    want = [repr(round(v, ndigits)) for v in values.tolist()]
    assert [repr(v) for v in rounded(values, ndigits)] == want


def _awkward_floats(rng: np.random.Generator) -> np.ndarray:
    return np.concatenate(
        [
            np.round(rng.random(20_000) * 1e7, 3),  # times in µs
            np.round(rng.random(20_000), 6),
            rng.random(5_000) * 1e-3,  # below 1e-4: exponent notation
            10 ** rng.uniform(-20, 20, 5_000),
            -(10 ** rng.uniform(-8, 17, 5_000)),
            [0.0, -0.0, np.nan, np.inf, -np.inf, 1e16, 9999999999999998.0, 1e-4, 0.0005, -0.0001, 999.9995],
        ]
    )


def test_float_texts_equal_repr() -> None:
    rng = np.random.default_rng(11)
    values = _awkward_floats(rng)
    assert tables.float_texts(values) == [repr(v) for v in values.tolist()]
    repeated = np.repeat(values[:100], 50)  # few distinct values: each formatted once
    assert tables.float_texts(repeated) == [repr(v) for v in repeated.tolist()]
    # and the specials so: -0.0 keeps its sign, which np.unique merges with 0.0 (helper-368: formatting
    # each distinct value once with -0.0 among them failed no test)
    repeated = np.repeat(values[-11:], 50)
    assert tables.float_texts(repeated) == [repr(v) for v in repeated.tolist()]
