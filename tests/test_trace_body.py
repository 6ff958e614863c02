"""trace_view.json's events as npuprof rewrites them (npuprof/analysis/trace_body.py): the same file however
the work is split between processes, epoch times as decimal arithmetic gives them, a torch_npu trace's own
Overlap Analysis lanes replaced by ours, call stacks rebuilt even when Kineto's Python ids loop."""

from __future__ import annotations

import csv
import json
import os
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import write_rank_dir, x
from hypothesis import given, settings
from hypothesis import strategies as st

from npuprof.analysis import scan as scan_mod
from npuprof.analysis import trace_body
from npuprof.analysis.parse import parse_rank_dir
from npuprof.analysis.synthetic import write_synthetic_trace

REAL = Path(__file__).resolve().parent / "fixtures" / "ascend-real"
LANES = {"Computing", "Communication", "Communication(Not Overlapped)", "Free"}


@pytest.fixture(scope="module")
def halves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One synthetic trace with stacks (~3 MB: several chunks), parsed by one process and by two (the scan
    and the body each cut in two)."""
    root = tmp_path_factory.mktemp("halves")
    trace = root / "s.pt.trace.json"
    write_synthetic_trace(trace, 3, seed=5)
    outs, cuts = {}, []
    patch = pytest.MonkeyPatch()
    try:
        patch.setattr(trace_body, "MIN_SPLIT", 1 << 20)
        patch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 20)
        split_point = trace_body.split_point
        patch.setattr(trace_body, "split_point", lambda *a: cuts.append(split_point(*a)) or cuts[-1])
        for name, workers in (("one", 1), ("two", 2)):
            rank_dir = root / name / "host_1_20250101000000000_ascend_pt"
            rank_dir.mkdir(parents=True)
            (rank_dir / "profiler_info_0.json").write_text("{}")
            os.link(trace, rank_dir / trace.name)
            outcome = parse_rank_dir(rank_dir, workers=workers)
            assert outcome.status == "parsed", outcome.reason
            outs[name] = rank_dir / "ASCEND_PROFILER_OUTPUT"
    finally:
        patch.undo()
    return {"trace": trace, "cuts": cuts, **outs}


def test_two_processes_write_the_same_files_as_one(halves: dict[str, Any]) -> None:
    assert halves["cuts"][1] is not None  # the second parse wrote the body in two halves
    one, two = halves["one"], halves["two"]
    view = (one / "trace_view.json").read_bytes()
    assert view.count(b"},\n{") >= 4  # several chunks, so a cut that moved would show
    names = sorted(p.name for p in one.iterdir())
    assert names == sorted(p.name for p in two.iterdir())
    for name in names:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_every_raw_event_is_there_with_its_epoch_time(halves: dict[str, Any]) -> None:
    raw = json.loads(halves["trace"].read_text())
    base = raw["baseTimeNanoseconds"]
    view = json.loads((halves["two"] / "trace_view.json").read_text())
    for cat in ("python_function", "kernel", "cuda_runtime", "cpu_instant_event"):
        want = sorted((e["name"], _epoch(e["ts"], base)) for e in raw["traceEvents"] if e.get("cat") == cat)
        assert want, cat
        assert sorted((e["name"], e["ts"]) for e in view if e.get("cat") == cat) == want, cat
    stacks = [e["args"]["Call stack"] for e in view if e.get("cat") == "cpu_op" and "Call stack" in e["args"]]
    assert stacks and all(s.count("(") >= 1 for s in stacks)


def _epoch(ts: Any, base_ns: int) -> str:
    """torch_npu's text of a time: µs after ``base_ns`` (a number) or epoch µs (a string), in decimals."""
    if isinstance(ts, str):
        ns = _ns(Decimal(ts.strip('"')))
    else:
        ns = _ns(Decimal(repr(ts) if isinstance(ts, float) else str(ts))) + base_ns
    q, r = divmod(abs(ns), 1000)
    return f"{'-' if ns < 0 else ''}{q}.{r:03d}"


def _ns(us: Decimal) -> int:
    return int((us * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


_KINETO = st.builds(lambda w, f: f"{w}.{f:03d}", st.integers(0, 10**13), st.integers(0, 999))
_TEXTS = st.one_of(
    _KINETO,  # Kineto's own form, the one the arrays take
    st.builds(lambda w, f: f"{w}.{f}", st.integers(0, 10**12), st.integers(0, 99_999)),
    st.builds(str, st.integers(-(10**9), 10**13)),
    st.builds(lambda w, f: f"-{w}.{f:03d}", st.integers(0, 10**9), st.integers(0, 999)),
    st.builds(lambda w, f: f'"{w}.{f:03d}"', st.integers(10**15, 9 * 10**15), st.integers(0, 999)),
    st.builds(lambda w, f: f'"{w}.{f:03d}"', st.integers(0, 10**15), st.integers(0, 999)),
)
_BASES = st.sampled_from([0, 1_790_857_026_000_000_000, 1_700_000_000_123_456_789])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(_KINETO, min_size=1, max_size=6), st.lists(_TEXTS, min_size=1, max_size=6)), _BASES)
def test_epoch_times_are_the_decimal_sums(texts: list[str], base_ns: int) -> None:
    got = trace_body.epoch_ts([t.encode() for t in texts], base_ns)
    if got is None:  # torch_npu's epoch strings: they stay as written
        got = [t.strip('"') for t in texts]
    assert got == [
        _epoch(json.loads(t), base_ns) if t.startswith('"') else _epoch(Decimal(t), base_ns) for t in texts
    ]


@pytest.mark.parametrize("base_ns", [0, 1_790_857_026_000_000_000])
def test_times_of_fewer_than_three_decimals_are_the_decimal_sums(base_ns: int) -> None:
    """A ``ts`` of one or two decimals ("1000.5": 500 ns) or none, as a tool that rewrote a trace may write
    it: its decimals are the first of the three (helper-368: read as the last, "1000.5" as 1000.005 µs,
    it failed no test: the random lists above seldom hold short decimals alone)."""
    texts = ["1000.5", "12.25", "7", "1700000000000000.07"]
    assert trace_body.epoch_ts([t.encode() for t in texts], base_ns) == [
        _epoch(Decimal(t), base_ns) for t in texts
    ]


def test_a_torch_npu_trace_keeps_no_overlap_lanes_of_its_own(tmp_path: Path) -> None:
    real = json.loads((REAL / "trace_view.json").read_text())
    theirs = {
        e["pid"] for e in real if e.get("name") == "process_name" and e["args"]["name"] == "Overlap Analysis"
    }
    assert len(theirs) == 1 and [e for e in real if e.get("pid") in theirs and e.get("ph") == "X"]
    rank_dir = tmp_path / "host_1_20250101000000000_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "profiler_info_0.json").write_text("{}")
    (rank_dir / "host.1.pt.trace.json").write_text(json.dumps(real))
    outcome = parse_rank_dir(rank_dir)
    assert outcome.status == "parsed", outcome.reason
    view = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    assert not [e for e in view if e.get("pid") in theirs]
    ours = [
        e["pid"] for e in view if e.get("name") == "process_name" and e["args"]["name"] == "Overlap Analysis"
    ]
    assert len(ours) == 1
    lanes = [e["args"]["name"] for e in view if e.get("name") == "thread_name" and e["pid"] == ours[0]]
    assert sorted(lanes) == sorted(LANES)
    kept = [e for e in real if e.get("ph") == "X" and e["pid"] not in theirs]
    assert len([e for e in view if e.get("ph") == "X" and e["pid"] in {k["pid"] for k in kept}]) == len(kept)


def test_python_ids_that_loop_still_give_the_other_operators_their_stacks(tmp_path: Path) -> None:
    """Kineto's Python ids, one pair of them naming each other as parent: those two frames are roots;
    an operator under ordinary frames gets its stack (the walk over the ids once looped for ever)."""

    def frame(name: str, ts: float, dur: float, own: int, parent: int) -> dict:
        return x(name, "python_function", ts, dur, **{"Python id": own, "Python parent id": parent})

    trace = {
        "schemaVersion": 1,
        "with_stack": 1,
        "traceEvents": [
            x("ProfilerStep#1", "user_annotation", 0, 1000),
            frame("train.py(9): <module>", 0, 1000, 1, 0),
            frame("train.py(5): step", 10, 400, 2, 1),
            x("aten::mm", "cpu_op", 20, 10),
            frame("loop.py(1): a", 500, 300, 3, 4),
            frame("loop.py(2): b", 510, 200, 4, 3),
            x("aten::add", "cpu_op", 520, 10),
        ],
    }
    rank_dir = write_rank_dir(tmp_path, trace)
    done = npuprof("analyse", str(rank_dir), "-j", "1", "--format", "json", timeout=60)
    assert done.returncode == 0, done.stderr
    with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv", newline="") as handle:
        stacks = {row["Name"]: row["Call Stack"] for row in csv.DictReader(handle)}
    assert stacks["aten::mm"] == "train.py(5): step;\r\ntrain.py(9): <module>"
    assert stacks["aten::add"] == "loop.py(2): b"
