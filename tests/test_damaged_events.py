"""A few damaged events (a number or a list where an event should be, a dur that is a string, a pid that is
an object) are left out, counted and said in one line by every reader; the rest is read as without them. A
trace made mostly of them is still refused (docs/formats.md, "Damaged events")."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from analyse_support.handmade import PID, T0, cpu_trace, write_rank_dir, x

from npuprof.analysis.parse import parse_rank_dir
from npuprof.analysis.trace_loader import TraceError, load_trace
from npuprof.reports import memory_timeline as mt
from npuprof.reports import stacks

SUMMARY = "npuprof_summary.json"
DAMAGE = {  # how each event is damaged, and what the reader says was wrong
    "number": (lambda e: 42, "Expected `object`, got `int` - at `event`"),
    "list": (lambda e: [1, 2], "Expected `object`, got `array` - at `event`"),
    "dur": (lambda e: {**e, "dur": "abc"}, "Expected `float`, got `str` - at `event.dur`"),
    "pid": (lambda e: {**e, "pid": {"a": 1}}, "Expected `int | str`, got `object` - at `event.pid`"),
    "ts": (lambda e: {**e, "ts": "soon"}, "Expected a time, got a `str` that is no number - at `event.ts`"),
}


def _trace(damage: str | None) -> tuple[dict, dict[int, float]]:
    """cpu_trace with three more steps whose operators are known, one damaged event in each (when
    ``damage``); and the computing time of each step, from the events written undamaged."""
    trace = cpu_trace()
    events = trace["traceEvents"]
    computing = {7: 300.0}  # cpu_trace's own step (its docstring)
    for k, step in enumerate((8, 9, 10)):
        start = 2000.0 + 1000.0 * k
        events.append(x(f"ProfilerStep#{step}", "user_annotation", start, 1000))
        ops = [x("aten::mm", "cpu_op", start + 100, 50 + 10 * k), x("aten::add", "cpu_op", start + 400, 30)]
        events += ops
        computing[step] = sum(o["dur"] for o in ops)
        if damage is not None:
            bad = x("aten::lost", "cpu_op", start + 600, 200)
            events.append(DAMAGE[damage][0](bad))  # 200 µs more computing were it read
    return trace, computing


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_few_damaged_events_are_left_out_and_said(tmp_path: Path, damage: str) -> None:
    trace, computing = _trace(damage)
    rank_dir = write_rank_dir(tmp_path, trace)
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.ok, outcome
    summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY).read_text())
    assert {s["step"]: s["computing_us"] for s in summary["steps"]} == computing
    assert "aten::lost" not in {o["name"] for o in summary["top_operators"]}
    (note,) = [w for w in summary["warnings"] if "damaged" in w]
    problem = DAMAGE[damage][1]
    assert note.startswith(f"3 damaged event(s) left out ({problem} x3), the rest of the trace read"), note
    assert f"the first: an event of the wrong shape ({problem}): " in note, note
    view = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    names = [e["name"] for e in view if isinstance(e, dict) and "name" in e]
    assert "aten::lost" not in names and names.count("aten::mm") == 4

    (raw,) = rank_dir.glob("*.pt.trace.json")
    loaded = load_trace(raw)
    assert [e for e in loaded.events if e.name == "aten::lost"] == []
    assert loaded.damaged.total == 3 and loaded.damaged.counts == {problem: 3}
    folded = stacks.folded_from_trace(raw)
    assert [n for n in folded.notes if "damaged" in n] == [loaded.damaged.note()]
    # the time of the top spans of each thread (the steps, gloo's) and of the leaves aten::add, as written
    written = [e for e in trace["traceEvents"] if isinstance(e, dict)]
    lines = [line.rsplit(" ", 1) for line in folded.text().splitlines()]
    assert "aten::lost" not in folded.text()
    top = [e for e in written if e["name"].startswith(("ProfilerStep#", "gloo:"))]
    assert sum(int(n) for _stack, n in lines) == sum(e["dur"] for e in top)
    adds = [e["dur"] for e in written if e["name"] == "aten::add"]
    assert sum(int(n) for stack, n in lines if stack.endswith(";aten::add")) == sum(adds)


@pytest.mark.parametrize(("key", "value", "compact"), [("dur", "nan", False), ("ts", "-inf", True)])
def test_a_time_of_nan_or_infinity_leaves_out_its_event_not_the_trace(
    tmp_path: Path, key: str, value: str, compact: bool
) -> None:
    """A ts or dur of NaN or Infinity (Python's json.dump of a float nan or inf: a script's edit) made the
    whole trace "corrupt", nothing reported. That event is left out and counted, as Perfetto drops it, and
    the rest reported, the count naming it as NaN or Infinity. cpu_trace without its aten::add [500, 600):
    computing aten::mm's [100, 300) alone, gloo's [250, 550) overlapping it over [250, 300)."""
    trace = cpu_trace()
    (add,) = [e for e in trace["traceEvents"] if e["name"] == "aten::add"]
    add[key] = float(value)
    rank_dir = write_rank_dir(tmp_path, trace, compact=compact)
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.ok, outcome
    summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY).read_text())
    (step,) = summary["steps"]
    computing, communication, overlapped = 300 - 100, 300.0, 300 - 250
    assert (step["duration_us"], step["computing_us"], step["communication_us"]) == (1000.0, computing, 300.0)
    assert (step["overlapped_us"], step["comm_not_overlapped_us"]) == (overlapped, communication - overlapped)
    assert step["free_us"] == 1000 - computing - (communication - overlapped)
    assert {o["name"] for o in summary["top_operators"]} == {"aten::mm", "aten::empty"}
    said = [w for w in summary["warnings"] if "have a ts or dur of NaN" in w]
    assert said == [
        "1 event(s) have a ts or dur of NaN or Infinity, which is no JSON (Python's json.dump of a float nan "
        "or inf: a script's edit of the trace?): those events are left out, counted with the damaged ones "
        '(their time read as "?"), the rest of the trace read as written'
    ]
    # counted as what the trace holds, not as msgspec's "Expected `float`, got `str`" of the "?" read
    (damaged,) = [w for w in summary["warnings"] if w.startswith("1 damaged event(s) left out")]
    assert damaged.startswith(f"1 damaged event(s) left out (event.{key} is NaN or Infinity x1), "), damaged
    assert "got `str`" not in damaged, damaged


def test_a_damaged_memory_sample_is_left_out_of_the_memory_timeline(tmp_path: Path) -> None:
    from analyse_support.handmade import cuda_trace

    trace = cuda_trace()
    bad = {**trace["traceEvents"][-1], "ts": T0 + 70, "pid": [PID]}
    trace["traceEvents"].append(bad)
    rank_dir = write_rank_dir(tmp_path, trace)
    (raw,) = rank_dir.glob("*.pt.trace.json")
    data = mt.load(raw)
    (note,) = [n for n in data.notes if "damaged" in n]
    problem = "Expected `int | str`, got `array` - at `event.pid`"
    assert note.startswith(f"1 damaged event(s) left out ({problem} x1)"), note


@pytest.mark.parametrize("gz", [False, True])
def test_a_trace_mostly_damaged_is_still_refused(tmp_path: Path, gz: bool) -> None:
    """Of 9 events 5 damaged: refused, with the first one's message as it was; 4 of 8: read."""
    good = [x(f"op{k}", "cpu_op", 10.0 * k, 5) for k in range(4)]
    bad = [{**x("bad", "cpu_op", 1.0, 5), "dur": "abc"} for _ in range(5)]
    for events, refused in ((good + bad, True), (good + bad[:4], False), (bad[:1] + good[:0], True)):
        path = tmp_path / f"{len(events)}.pt.trace.json"
        path.write_text(json.dumps({"traceEvents": events}))
        if gz:
            import gzip

            path = path.with_suffix(".json.gz")
            path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
        if not refused:
            assert [e.name for e in load_trace(path).events] == [e["name"] for e in good]
            continue
        with pytest.raises(TraceError) as info:
            load_trace(path)
        message = str(info.value)
        assert info.value.kind == "corrupt"
        assert ": an event of the wrong shape (Expected `float`, got `str` - at `event.dur`): " in message
        n_bad = sum(1 for e in events if e["name"] == "bad")
        said = f"; {n_bad} of the trace's {len(events)} events are damaged so (corrupt trace)"
        assert message.endswith(said), message


def test_a_file_of_damaged_events_is_refused_before_it_is_read_through(tmp_path: Path) -> None:
    """Reading from the first event, once the damaged events outnumber the others by damaged.LEAD the
    trace is refused: the first 1,001 numbers of a million are all that is looked at."""
    from npuprof.analysis import damaged
    from npuprof.analysis.trace_loader import TraceReader

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [x("op", "cpu_op", 0, 5), *range(1_000_000)]}))
    reader = TraceReader(path)
    with pytest.raises(TraceError) as info:
        list(reader)
    assert reader.damaged.total == damaged.LEAD + 2
    # (its first events: the trace holds a million; helper-188: "of the trace's 1003 events")
    assert f"{damaged.LEAD + 2} of the trace's first {damaged.LEAD + 3} events are damaged" in str(info.value)


def test_events_whose_args_are_out_of_range_are_left_out_of_every_table(tmp_path: Path) -> None:
    """An External id beyond an int64 (a kernel of step 2), a correlation of 2**63 (a launch), an Addr
    beyond an int64 and a Device Id beyond an int32 (allocator samples) refused the whole trace ("a number
    in its args is out of range (corrupt trace)"); each is left out, said, the tables and the db as
    without them: cuda_trace's documented figures (step 2 computes 100 µs, not 100 + the lost kernel's)."""
    import sqlite3

    from analyse_support.handmade import cuda_trace, mem

    trace = cuda_trace()
    sample = mem(60, 1 << 20, 1 << 40, 0xB0)  # would be the memory peak, were it read
    trace["traceEvents"] += [
        x("kernel_lost", "kernel", 1600, 300, pid=0, tid=7, stream=7, device=0, **{"External id": 2**64}),
        x("cudaLaunchKernel", "cuda_runtime", 1590, 5, correlation=2**63),
        {**sample, "args": {**sample["args"], "Addr": 2**64}},
        {**sample, "args": {**sample["args"], "Device Id": 2**40}},
    ]
    rank_dir = write_rank_dir(tmp_path, trace)
    outcome = parse_rank_dir(rank_dir, workers=1, export_db=True)
    assert outcome.ok, outcome
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    summary = json.loads((out / SUMMARY).read_text())
    steps = {s["step"]: (s["computing_us"], s["communication_us"], s["free_us"]) for s in summary["steps"]}
    assert steps == {1: (300.0, 250.0, 500.0), 2: (100.0, 200.0, 700.0)}  # cuda_trace's docstring
    (note,) = [w for w in summary["warnings"] if "damaged" in w]
    assert note.startswith("4 damaged event(s) left out (a number in its args is out of range x4)"), note
    assert "the first: cannot read the event 'kernel_lost' (cat 'kernel', ts " in note, note
    assert "kernel_lost" not in (out / "kernel_details.csv").read_text()
    con = sqlite3.connect(out / "ascend_pytorch_profiler_0.db")
    allocated = [a for (a,) in con.execute("SELECT totalAllocated FROM MEMORY_RECORD ORDER BY timestamp")]
    assert allocated == [8192, 4096]  # the two samples written undamaged
    con.close()


def test_allocator_samples_of_sizes_no_allocator_has_are_left_out_not_made_a_figure(tmp_path: Path) -> None:
    """helper-257: a [memory] Total Allocated of 1.5e300 bytes was analyse's memory peak (1.4e294 MB), in
    the summary and memory_record.csv; memory-timeline bounded the same args at 2**62 bytes. Bytes, Total
    Allocated and Total Reserved past 2**62 either side of 0 are damage now, left out and said."""
    from analyse_support.handmade import cuda_trace, mem

    trace = cuda_trace()
    sample = mem(60, 1 << 20, 1 << 21, 0xB0)
    trace["traceEvents"] += [
        mem(61, 1 << 20, int(1.5e300), 0xB1),
        mem(62, 1 << 20, 1 << 62, 0xB2),
        {**sample, "args": {**sample["args"], "Bytes": -1.5e300}},
        {**sample, "args": {**sample["args"], "Total Reserved": 2.0**70}},
    ]
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, workers=1).ok
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    summary = json.loads((out / SUMMARY).read_text())
    # cuda_trace's own two samples: 8192 and 4096 bytes allocated, 4 MiB reserved
    assert summary["memory"] == {"peak_allocated_mb": round(8192 / 2**20, 3), "peak_reserved_mb": 4.0}
    (note,) = [w for w in summary["warnings"] if "damaged" in w]
    assert note.startswith("4 damaged event(s) left out ("), note
    assert "at `args.Total Allocated` x2" in note and "at `args.Bytes` x1" in note, note
    assert "at `args.Total Reserved` x1" in note, note
    with open(out / "memory_record.csv", newline="") as f:
        allocated = [float(row["Total Allocated(MB)"]) for row in csv.DictReader(f)]
    assert allocated == [round(8192 / 2**20, 6), round(4096 / 2**20, 6)]


def test_a_cpu_sample_of_a_total_no_allocator_has_is_left_out_by_memory_timeline_as_by_analyse(
    tmp_path: Path,
) -> None:
    """On the CPU memory-timeline sums the Bytes and never read the totals: a sample whose Total Allocated
    was 2**62 bytes, which analyse leaves out as damaged, was summed there (150 bytes, not 100)."""
    from analyse_support.handmade import mem

    def on_cpu(event: dict) -> dict:
        return {**event, "args": {**event["args"], "Device Type": 0, "Device Id": -1, "Total Reserved": 0}}

    path = tmp_path / "trace.json"
    events = [on_cpu(mem(0, 100, 100, 1)), on_cpu(mem(5, 50, 1 << 62, 2))]
    path.write_text(json.dumps({"traceEvents": events}))
    data = mt.from_trace(path, "cpu")
    assert data.coalesce()[1][-1][-1] == 100
    assert "1 [memory] event(s) whose fields are not numbers (a damaged trace?): left out" in data.notes


def test_cpu_bytes_whose_sum_passes_an_int64_give_a_clear_error_not_a_raw_file_that_is_refused(
    tmp_path: Path,
) -> None:
    """On the CPU memory-timeline sums the samples' Bytes (each below 2**62): three frees of blocks held
    before the capture, then three allocations, held 3 x (2**62 - 1024) bytes before it, past an int64.
    A raw.json.gz was written whose numbers no int64 holds, and memory-timeline refused its own file ("a
    number is out of range"). The CPU's timeline is refused at once, saying why; a device beside it keeps
    its own."""
    from analyse_support.handmade import mem

    block = 2**62 - 1024

    def on_cpu(event: dict) -> dict:
        return {**event, "args": {**event["args"], "Device Type": 0, "Device Id": -1, "Total Reserved": 0}}

    frees = [on_cpu(mem(10 * k, -block, 0, 0x100 + k)) for k in range(3)]
    allocations = [on_cpu(mem(100 + 10 * k, block, block, 0x200 + k)) for k in range(3)]
    assert 3 * block >= 2**63  # what the frees show was held before the capture
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [*frees, *allocations]}))
    said = re.escape("the cpu [memory] events' Bytes, summed, pass 2**63 bytes")
    with pytest.raises(mt.MemoryTimelineError, match=said):
        mt.from_trace(path)
    gpu = mem(5, 4096, 4096, 0x300)  # cuda:0's own totals
    path.write_text(json.dumps({"traceEvents": [*frees, *allocations, gpu]}))
    data = mt.from_trace(path)
    assert data.device == "cuda:0" and data.coalesce()[1][-1][-1] == 4096
    with pytest.raises(mt.MemoryTimelineError, match=said):
        mt.from_trace(path, "cpu")


@pytest.mark.parametrize("block", [64, 1 << 20])  # each event a chunk of its own; all in one chunk
def test_the_damaged_event_quoted_first_is_the_first_of_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """The scan's note quoted the first event its tables could not read (an External id beyond an int64)
    as "the first" even when an event of the wrong shape (a dur "abc") came before it: the reader's were
    added after the tables' (helper-188). The first in the file is quoted, each counted once."""
    from npuprof.analysis import scan

    monkeypatch.setattr(scan, "BLOCK", block)
    events = [
        x("op0", "cpu_op", 0, 5),
        x("lost_first", "cpu_op", 10, 5, **{"External id": 2**64}),
        {**x("lost_second", "cpu_op", 20, 5), "dur": "abc"},
        x("op3", "cpu_op", 30, 5),
        x("lost_third", "cpu_op", 40, 5, **{"External id": 2**64}),
        x("op5", "cpu_op", 50, 5),
    ]
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    extract = scan.scan(path)[0]
    assert extract.event_count == 3
    assert extract.damaged.counts == {
        "a number in its args is out of range": 2,
        "Expected `float`, got `str` - at `event.dur`": 1,
    }
    assert extract.damaged.first.startswith("cannot read the event 'lost_first' (cat 'cpu_op', ts "), (
        extract.damaged.first
    )
    # the reverse order: the event of the wrong shape first
    events[1], events[2] = events[2], events[1]
    path.write_text(json.dumps({"traceEvents": events}))
    first = scan.scan(path)[0].damaged.first
    assert first.startswith("an event of the wrong shape (Expected `float`, got `str` - at `event.dur`): "), (
        first
    )
    assert '"lost_second"' in first, first


def test_a_string_time_that_is_no_time_in_torch_npus_trace_leaves_out_that_event_only(tmp_path: Path) -> None:
    """torch_npu's trace_view.json (tests/fixtures/ascend-real, SOURCE.md there) with the ``ts`` of one
    operator made "soon": that event is left out and said; every other event is read with the time it had
    (before, the whole trace was refused)."""
    real = json.loads((Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json").read_text())
    ops = [i for i, e in enumerate(real) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    victim = ops[len(ops) // 2]
    damaged = [dict(e) for e in real]
    damaged[victim]["ts"] = "soon"
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(damaged))

    (tmp_path / "real.json").write_text(json.dumps(real))
    whole = load_trace(tmp_path / "real.json")
    loaded = load_trace(path)
    problem = "Expected a time, got a `str` that is no number - at `event.ts`"
    assert loaded.damaged.counts == {problem: 1}
    assert loaded.damaged.first.startswith(f"an event of the wrong shape ({problem}): ")
    assert len(loaded.events) == len(whole.events) - 1
    lost = real[victim]
    kept = [(e.name, e.ts) for e in loaded.events]
    expected = [(e.name, e.ts) for e in whole.events]
    gone = [k for k, e in enumerate(whole.events) if e.name == lost["name"] and e.dur == lost["dur"]]
    assert len(gone) == 1 and kept == expected[: gone[0]] + expected[gone[0] + 1 :]
    # the times are torch_npu's epoch µs: the first operator's, read independently from the file
    first_op = real[ops[0]]
    base_us = loaded.ts_base
    same = [e.ts for e in loaded.events if (e.name, e.dur) == (first_op["name"], first_op["dur"])]
    read_first = same[0]
    assert abs(read_first + base_us - float(first_op["ts"])) < 0.01


def _op(name: str, ts: str) -> dict:
    """An operator of torch_npu's trace_view.json form: its ``ts`` a string of epoch µs."""
    return {"ph": "X", "name": name, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": ts, "dur": 1, "args": {}}


@pytest.mark.parametrize("reader", ["load", "scan"])
def test_a_chunk_of_only_timeless_events_leaves_later_string_times_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """torch_npu's string times with a run of events whose ts is "soon" longer than a chunk: that chunk,
    all left out, held no string time, and the reader took its decoder for one that keeps ts as written:
    every later string ts stayed text (analyse failed: "could not convert string to float: 'soon'";
    helper-197). Each event after it is read with the time it was written with."""
    from decimal import Decimal

    from npuprof.analysis import scan
    from npuprof.analysis.trace_loader import TraceReader

    good = [_op(f"a{k}", f"1704161511{k:06d}.{k % 1000:03d}") for k in range(1000)]
    lost = [_op("lost", "soon") for _ in range(1500)]  # ~135 KB: more than a chunk of the reader below
    later = [_op(f"b{k}", f"1704161512{k:06d}.{k % 1000:03d}") for k in range(2000)]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(good + lost + later))
    base = 1704161511000000 // 10**12 * 10**12
    expected = [(e["name"], float(Decimal(e["ts"]) - base)) for e in good + later]
    if reader == "load":
        loaded = TraceReader(path, block=4096)
        read = [(e.name, e.ts) for chunk in loaded for e in chunk.events]
        assert read == expected
        assert loaded.damaged.total == len(lost)
    else:
        monkeypatch.setattr(scan, "BLOCK", 4096)
        extract = scan.scan(path)[0]
        assert extract.event_count == len(expected)
        assert extract.damaged.total == len(lost)


@pytest.mark.parametrize("ts", ["1e300", "-1.7e308", "1" * 30])
def test_a_string_time_beyond_any_time_is_damaged_as_the_number_is(tmp_path: Path, ts: str) -> None:
    """A trace without torch_npu's epoch times (its base 0) read a string ts "1e300" as that time, where the
    number 1e300 is a damaged event (beyond TIME_LIMIT): kept by the tables and trace_view.json, left out
    unsaid by export-stacks (helper-197). Both are left out and said; a string time within it is read."""
    events = [
        x("op0", "cpu_op", 0, 5),
        {**x("op1", "cpu_op", 10, 5), "ts": "12.5"},
        x("op2", "cpu_op", 20, 5),
    ]
    for lost in ({**x("lost", "cpu_op", 30, 5), "ts": ts}, {**x("lost", "cpu_op", 30, 5), "ts": float(ts)}):
        path = tmp_path / "t.pt.trace.json"
        path.write_text(json.dumps({"traceEvents": [events[0], lost, *events[1:]]}))
        loaded = load_trace(path)
        assert [(e.name, e.ts) for e in loaded.events] == [("op0", T0), ("op1", 12.5), ("op2", T0 + 20)]
        assert loaded.damaged.total == 1
        folded = stacks.folded_from_trace(path)
        assert [n for n in folded.notes if "damaged" in n] == [loaded.damaged.note()]


@pytest.mark.parametrize("bad", ["1e400", "0x10", "9" * 70, "99999999999999999999"])
def test_a_damaged_first_time_does_not_set_the_base_of_the_others(tmp_path: Path, bad: str) -> None:
    """The base of torch_npu's string times came from the first string ts whatever it held: a damaged
    first event's "1e400" or "0x10" made it 0 (every other time read through a float, its nanoseconds
    lost), a 70-digit one 10^69 (every time shifted by it; helper-197). It comes from the first that is a
    time: each other event is read to the nanosecond it was written with."""
    from decimal import Decimal

    good = [_op(f"op{k}", f"1704161511{k:06d}.123") for k in range(5)]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps([{**good[0], "name": "lost", "ts": bad}, *good]))
    loaded = load_trace(path)
    assert loaded.damaged.total == 1
    assert [(e.name, Decimal(repr(e.ts)) + loaded.ts_base) for e in loaded.events] == [
        (e["name"], Decimal(e["ts"])) for e in good
    ]


@pytest.mark.parametrize("form", ["kineto", "array"])
def test_a_string_time_with_an_underscore_is_no_time(tmp_path: Path, form: str) -> None:
    """Python's Decimal reads "1_000" as 1000: such a ts was read as that time, not left out as a string
    that is no number (helper-197)."""
    from decimal import Decimal

    good = [_op(f"op{k}", f"1704161511{k:06d}.5") for k in range(4)]
    if form == "kineto":
        good = [{**e, "ts": 10.0 * k} for k, e in enumerate(good)]
    events = [*good[:2], {**good[0], "name": "lost", "ts": "1_000"}, *good[2:]]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events} if form == "kineto" else events))
    loaded = load_trace(path)
    assert loaded.damaged.total == 1
    assert [(e.name, Decimal(repr(e.ts)) + loaded.ts_base) for e in loaded.events] == [
        (e["name"], Decimal(str(e["ts"]))) for e in good
    ]


@pytest.mark.parametrize("damaged", [False, True])
def test_a_string_time_written_with_escapes_is_in_trace_view_as_in_the_tables(
    tmp_path: Path, damaged: bool
) -> None:
    """A string ts written with JSON escapes ("\\u0031...": "1000050") is read as that time by the tables;
    trace_view.json wrote it as "0.000", or, in a trace with a damaged event, left it out as no time
    (helper-197). It holds it with its time, as the tables do."""
    trace = cpu_trace()
    if damaged:
        trace["traceEvents"].append({**x("aten::lost", "cpu_op", 700, 5), "ts": "soon"})
    trace["traceEvents"].append({**x("aten::escaped", "cpu_op", 800, 5), "ts": "ESCAPED"})
    written = T0 + 800
    rank_dir = write_rank_dir(tmp_path, trace)
    (raw,) = rank_dir.glob("*.pt.trace.json")
    escaped = '"' + "".join(f"\\u{ord(c):04x}" for c in str(int(written))) + '"'
    raw.write_text(raw.read_text().replace('"ESCAPED"', escaped))
    assert [e.ts for e in load_trace(raw).events if e.name == "aten::escaped"] == [written]
    assert parse_rank_dir(rank_dir, workers=1).ok
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    view = json.loads((out / "trace_view.json").read_text())
    assert [e["ts"] for e in view if e.get("name") == "aten::escaped"] == [f"{written:.3f}"]
    summary = json.loads((out / SUMMARY).read_text())
    assert "aten::escaped" in {o["name"] for o in summary["top_operators"]}


def test_a_timeless_event_before_another_damaged_one_is_said_first(tmp_path: Path) -> None:
    """A ts "soon" before a dur "abc" in one chunk: the scan's check of the events before the dur's (which of
    them its tables leave out) got the "soon" one and raised "could not convert string to float: 'soon'"
    (analyse failed; helper-197), and the readers quoted the dur's as the first. Both are left out, the
    first in the file quoted first."""
    from npuprof.analysis import scan

    events = [
        x("op0", "cpu_op", 0, 5),
        {**x("lost_first", "cpu_op", 10, 5), "ts": "soon"},
        {**x("lost_second", "cpu_op", 20, 5), "dur": "abc"},
        x("op3", "cpu_op", 30, 5),
        x("op4", "cpu_op", 40, 5),
        x("op5", "cpu_op", 50, 5),
    ]
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    counts = {DAMAGE["ts"][1]: 1, DAMAGE["dur"][1]: 1}
    extract = scan.scan(path)[0]
    loaded = load_trace(path)
    assert extract.event_count == len(loaded.events) == 4
    for damaged in (extract.damaged, loaded.damaged):
        assert damaged.counts == counts
        assert damaged.first.startswith(f"an event of the wrong shape ({DAMAGE['ts'][1]}): "), damaged.first
        assert '"lost_first"' in damaged.first, damaged.first


def test_export_stacks_says_the_complete_events_without_a_time_it_left_out(tmp_path: Path) -> None:
    """A complete event without a ts (or a dur) is left out by analyse, said in one line; export-stacks left
    it out unsaid (helper-197). It says it as analyse does. trace_view.json left them in (helper-197's
    leftover: a ts-less X event, which a reader takes at time 0 or fails on): out there too, every other
    event still written."""
    trace = cpu_trace()
    no_ts, no_dur = x("aten::no_ts", "cpu_op", 150, 20), x("aten::no_dur", "cpu_op", 160, 20)
    del no_ts["ts"], no_dur["dur"]
    trace["traceEvents"] += [no_ts, no_dur]
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, workers=1).ok
    summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY).read_text())
    (said,) = [w for w in summary["warnings"] if "without a ts or a dur" in w]
    assert said.startswith("2 complete event(s) without a ts or a dur were left out")
    (raw,) = rank_dir.glob("*.pt.trace.json")
    folded = stacks.folded_from_trace(raw)
    assert "aten::no_" not in folded.text()
    assert [n for n in folded.notes if "without a ts" in n] == [said]
    view = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    written = [e for e in view if isinstance(e, dict) and e.get("ph") == "X"]
    assert not [e for e in written if e["name"].startswith("aten::no_")]
    assert all("ts" in e and "dur" in e for e in written)
    kept = [
        e["name"]
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and not e["name"].startswith("aten::no_")
    ]
    assert sorted(n for n in kept if n.startswith("aten::")) == sorted(
        e["name"] for e in written if e["name"].startswith("aten::")
    )


def test_times_whose_epoch_nanoseconds_pass_an_int64_are_damaged_events(tmp_path: Path) -> None:
    """helper-228: a ts of 9.3e15 µs was within the bound (1e18 µs) but not its nanoseconds: with Kineto's
    base added they wrapped past 2**63, and kernel_details.csv said the kernel started at
    -9146744073709451.616; a dur of 3e15 µs (95 years) was a kernel's. A ts past 2**62 ns and a dur past
    2**61 ns are damaged events, left out and said (docs/formats.md, "Damaged events")."""
    import csv

    from analyse_support.handmade import cuda_trace

    base = 1_700_000_000_000_000_000
    trace = {**cuda_trace(), "baseTimeNanoseconds": base}
    trace["traceEvents"] += [
        {**x("kernel_late", "kernel", 0, 5, pid=0, tid=7, stream=7, device=0), "ts": 9.3e15},
        x("kernel_long", "kernel", 1600, 3e15, pid=0, tid=7, stream=7, device=0),
    ]
    rank_dir = write_rank_dir(tmp_path, trace)
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.ok, outcome
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    # by hand: each kernel's epoch start, its trace time (µs) plus the base, to the ns
    lost = ("kernel_late", "kernel_long")
    kept = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"] not in lost]
    expected = sorted(f"{q}.{r:03d}" for q, r in (divmod(round(e["ts"] * 1000) + base, 1000) for e in kept))
    with open(out / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["Start Time(us)"] for r in rows) == expected
    summary = json.loads((out / SUMMARY).read_text())
    (note,) = [w for w in summary["warnings"] if "damaged" in w]
    assert note.startswith("2 damaged event(s) left out (Expected `float` <= "), note
    steps = {s["step"]: (s["computing_us"], s["communication_us"], s["free_us"]) for s in summary["steps"]}
    assert steps == {1: (300.0, 250.0, 500.0), 2: (100.0, 200.0, 700.0)}  # cuda_trace's docstring


def test_events_whose_end_with_the_base_passes_an_int64_of_nanoseconds_are_damaged(tmp_path: Path) -> None:
    """helper-243: a ts within its bound (2**62 ns) and a dur within its own (2**61 ns) summed past 2**62
    ns, and with a base near 2**62 ns the end passed 2**63: trace_view.json's Free lane of that step began
    at -8446744073709558.616 µs (wrapped), and the db export failed with OverflowError. An event whose end
    (ts + dur) is past 2**62 ns is a damaged event, left out and said (docs/formats.md, "Damaged events")."""
    from analyse_support.handmade import cuda_trace

    base = 2**62 - 10**15  # ns, within base_ns_of's bound
    late, long = 4e15 - T0, 2e15  # µs: the ts (4e15, under 2**62 ns) and dur (under 2**61 ns) each in bound
    assert (base + (T0 + late + long) * 1000) > 2**63  # their end, with the base, passes an int64
    trace = {**cuda_trace(), "baseTimeNanoseconds": base}
    trace["traceEvents"] += [
        x("ProfilerStep#3", "user_annotation", late, long),
        x("kernel_late", "kernel", late + 10, long - 20, pid=0, tid=7, stream=7, device=0),
    ]
    rank_dir = write_rank_dir(tmp_path, trace)
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.ok, outcome
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    view = json.loads((out / "trace_view.json").read_text())
    lanes = [e for e in view if isinstance(e, dict) and e.get("name") in ("Computing", "Free")]
    assert lanes and all(0 <= float(e["ts"]) < 2**63 / 1000 for e in lanes), lanes
    summary = json.loads((out / SUMMARY).read_text())
    (note,) = [w for w in summary.get("warnings", []) if "damaged" in w]
    assert note.startswith("2 damaged event(s) left out (its end (ts + dur) is beyond 4.6e+15 µs x2)"), note
    steps = {s["step"]: (s["computing_us"], s["communication_us"], s["free_us"]) for s in summary["steps"]}
    assert steps == {1: (300.0, 250.0, 500.0), 2: (100.0, 200.0, 700.0)}  # cuda_trace's docstring


def test_export_stacks_leaves_out_the_events_ending_past_the_bound_as_analyse_does(tmp_path: Path) -> None:
    """helper-243 bounded analyse's events by their end (ts + dur past 2**62 ns: damaged); export-stacks
    read them on its own and kept them unsaid: 2e15 µs (63 years) of one operator's self time, and of one
    kernel's device time, in the folded lines and the SVG. They are left out and said in one line, with
    analyse's words (docs/formats.md, "Damaged events"); the rest is read as without them."""
    from analyse_support.handmade import cuda_trace, kernel_on

    late, long = 4e15 - T0, 2e15  # µs: each within its own bound, their end past 2**62 ns
    assert T0 + late <= 2**62 / 1000 and long <= 2**61 / 1000 and T0 + late + long > 2**62 / 1000
    host = {
        "traceEvents": [
            x("aten::outer", "cpu_op", 0, 10),
            x("aten::inner", "cpu_op", 2, 4),
            x("aten::late", "cpu_op", late, long),
            x("aten::late_inner", "cpu_op", late + 1, long - 2),
        ]
    }
    path = tmp_path / "host.json"
    path.write_text(json.dumps(host))
    folded = stacks.folded_from_trace(path)
    assert folded.lines() == ["aten::outer 6", "aten::outer;aten::inner 4"]
    (note,) = [n for n in folded.notes if "damaged" in n]
    assert note.startswith("2 damaged event(s) left out (its end (ts + dur) is beyond 4.6e+15 µs x2)"), note
    assert "'aten::late'" in note

    device = cuda_trace()
    kept = sum(e["dur"] for e in device["traceEvents"] if e.get("cat") == "kernel")
    device["traceEvents"].append(kernel_on("kernel_late", late, long, gpu=0, corr=99, ext=2))
    path = tmp_path / "device.json"
    path.write_text(json.dumps(device))
    folded = stacks.folded_from_trace(path, "self_cuda_time_total")
    assert "kernel_late" not in folded.text()
    assert folded.total_us == kept
    (note,) = [n for n in folded.notes if "damaged" in n]
    assert note.startswith("1 damaged event(s) left out (its end (ts + dur) is beyond 4.6e+15 µs x1)"), note


def test_export_stacks_says_the_negative_durations_it_counts_as_zero(tmp_path: Path) -> None:
    """A negative dur (no profiler writes one) is counted as 0 µs by analyse and said (helper-112);
    export-stacks counted it as 0 µs too, host and device time, without a word. It says it, with analyse's
    words; the rest of the stacks as without that event."""
    from analyse_support.handmade import cuda_trace, kernel_on

    host = {
        "traceEvents": [
            x("aten::outer", "cpu_op", 0, 10),
            x("aten::backwards", "cpu_op", 2000, -50),
            x("aten::after", "cpu_op", 2010, 5),
        ]
    }
    path = tmp_path / "host.json"
    path.write_text(json.dumps(host))
    folded = stacks.folded_from_trace(path)
    assert folded.lines() == ["aten::after 5", "aten::outer 10"]
    said = "1 step, operator, device or Python event(s) with a negative duration"
    assert [n for n in folded.notes if "negative" in n] == [
        f"{said} (the trace is damaged or was edited) are counted as 0 µs long"
    ]

    device = cuda_trace()
    kept = sum(e["dur"] for e in device["traceEvents"] if e.get("cat") == "kernel")
    device["traceEvents"].append(kernel_on("kernel_backwards", 1600, -7, gpu=0, corr=99, ext=2))
    path = tmp_path / "device.json"
    path.write_text(json.dumps(device))
    folded = stacks.folded_from_trace(path, "self_cuda_time_total")
    assert "kernel_backwards" not in folded.text()
    assert folded.total_us == kept
    assert len([n for n in folded.notes if n.startswith(said)]) == 1


def test_memory_samples_whose_numbers_no_allocator_writes_are_left_out_and_said(tmp_path: Path) -> None:
    """memory-timeline read a [memory] event's numbers with int(): a Total Allocated of 10**30 bytes, a
    Bytes of 1.5e300 (a 301-digit integer), "50" and true as byte counts were all read, and the raw.json.gz
    it wrote was refused by memory-timeline itself ("a number is out of range"). Such events are left out
    and counted in one note (analyse's tables refuse a string or a bool there too); the rest as written, and
    the raw.json.gz reads back. With nothing else left, the error says why, not "no [memory] events"."""
    from analyse_support.handmade import mem

    good = [mem(0, 100, 100, 1), mem(20, -100, 0, 1)]
    bad = [mem(10, 10**30, 10**30 + 100, 2), mem(11, 1.5e300, 100, 3), mem(12, "50", 150, 4)]
    bad.append({**mem(13, 1, 101, 5), "args": {**mem(13, 1, 101, 5)["args"], "Total Allocated": True}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [*good, *bad]}))
    data = mt.from_trace(path)
    expected = [[T0, T0 + 20], [[0] * 8 + [100], [0] * 8 + [0]]]  # good's times (epoch µs) and totals
    assert [list(column) for column in data.coalesce()] == expected
    assert (
        f"{len(bad)} [memory] event(s) whose fields are not numbers (a damaged trace?): left out"
        in data.notes
    )
    raw = mt.render(data, tmp_path / "memory.raw.json.gz")
    assert [list(column) for column in mt.load(raw).coalesce()] == expected

    path.write_text(json.dumps({"traceEvents": bad}))
    with pytest.raises(
        mt.MemoryTimelineError, match=f"no readable \\[memory\\] events: {len(bad)} \\[memory\\]"
    ):
        mt.from_trace(path)


def test_a_memory_sample_before_1970_is_left_out_of_the_memory_timeline_and_said(tmp_path: Path) -> None:
    """A [memory] event's ts is bounded (2**62 ns either side of 0), not its epoch time: with Kineto's base
    a ts of -1.7e15 µs was written as a timeline point at -700000000000000 µs, and to the raw.json.gz as
    negative ns (torch's -1 there means "before the capture"). It is a damaged event, left out and said;
    the rest as written."""
    from analyse_support.handmade import mem

    base = 10**18  # ns: Kineto's baseTimeNanoseconds (2001)
    early = mem(0, 50, 50, 2)
    early["ts"] = -1.7e15  # µs after the base: 1.7e18 ns before it, before 1970
    good = [mem(0, 100, 100, 1), mem(20, -100, 0, 1)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [early, *good], "baseTimeNanoseconds": base}))
    data = mt.from_trace(path)
    times = [(base + round(e["ts"] * 1000)) // 1000 for e in good]  # epoch µs, by hand
    assert [list(column) for column in data.coalesce()] == [times, [[0] * 8 + [100], [0] * 8 + [0]]]
    assert all(t >= 0 for t, _action, _bytes, _category in data.raw)
    (note,) = [n for n in data.notes if "damaged" in n]
    assert note.startswith(
        "1 damaged event(s) left out (its epoch time (ts after the trace's base) is before 1970"
    )
