"""A real capture's trace fed values a script or a tool can put in it (Python's json.dump of a float nan or
inf): each is read as Python's json reads the same bytes, or said in one clear line (docs/formats.md, "Values
torch wrote that are no JSON"). Expected values come from Python's json and the events themselves."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
from pathlib import Path

import pytest
from conftest import clean_env
from conftest import npuprof as npuprof_cli

from npuprof.analysis.parse import parse_rank_dir
from npuprof.analysis.trace_loader import load_trace

NAN, INF = float("nan"), float("inf")


def _rank_copy(torchrun_capture: Path, dst: Path) -> tuple[Path, Path, dict]:
    """A copy of the real capture's plain rank (rank 0), its trace and the trace as Python's json reads it."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    shutil.copytree(src, dst)
    (trace,) = dst.glob("*.pt.trace.json")
    return dst, trace, json.loads(trace.read_bytes())


def _rows(rank_dir: Path, name: str) -> list[dict[str, str]]:
    with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / name, newline="") as handle:
        return list(csv.DictReader(handle))


def test_nan_under_an_arg_named_as_an_events_own_key_is_an_arg(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """An arg of NaN or Infinity named as an event's own key ({"pid": NaN} in an operator's args: a tool's)
    made the whole trace refused ("malformed JSON ... NaN"), and {"ts": NaN} there was counted as an event's
    time of NaN, its event said left out. Each is an arg read as unknown; every event is read as Python's
    json reads the file."""
    rank_dir, trace, data = _rank_copy(torchrun_capture, tmp_path / "rank")
    ops = [e for e in data["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[3]["args"].update({"ts": NAN, "pid": -INF, "name": INF, "ph": NAN})
    ops[4]["args"]["dur"] = NAN
    trace.write_text(json.dumps(data, indent=1))
    want = json.loads(trace.read_bytes())["traceEvents"]  # Python reads NaN and Infinity
    loaded = load_trace(trace)
    assert [(e.name, e.ph, e.pid) for e in loaded.events] == [(e["name"], e["ph"], e["pid"]) for e in want]
    assert loaded.repaired_values == {"arg not a number": 5} and loaded.damaged.total == 0
    args = {e.name + str(e.ts): e.args_dict() for e in loaded.events}
    for op in ops[3:5]:
        read = args[op["name"] + str(op["ts"] - loaded.ts_base)]
        odd = {k for k, v in op["args"].items() if isinstance(v, float) and not math.isfinite(v)}
        assert {k for k, v in read.items() if v == "?"} == odd, read
    assert parse_rank_dir(rank_dir, workers=1).status == "parsed"


def test_a_kernel_whose_link_is_nan_counts_its_time_under_no_operator(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """A kernel whose External id (or correlation) is NaN was left out as damaged: its device time was lost
    from its step and from kernel_details.csv. It counts there, linked to no operator. The real capture's
    operators of its first step each get a kernel inside them carrying their External id."""
    rank_dir, trace, data = _rank_copy(torchrun_capture, tmp_path / "rank")
    events = data["traceEvents"]
    step = next(e for e in events if e["name"].startswith("ProfilerStep#"))
    ops = [
        e
        for e in events
        if e.get("cat") == "cpu_op"
        and e["name"] in ("aten::addmm", "aten::mm")
        and step["ts"] <= e["ts"] < step["ts"] + step["dur"]
    ]
    ops = ops[:3]
    assert len(ops) == 3
    kernels = []
    for k, op in enumerate(ops):
        args = {"device": 0, "stream": 7, "correlation": 10_000 + k, "External id": op["args"]["External id"]}
        if k == 0:
            args["External id"] = NAN
        if k == 1:
            args["correlation"] = -INF
        kernels.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"gemm_{k}",
                "pid": 0,
                "tid": 7,
                "ts": op["ts"] + 1,
                "dur": 7.5 + k,
                "args": args,
            }
        )
    events += kernels
    trace.write_text(json.dumps(data))
    assert parse_rank_dir(rank_dir, workers=1).status == "parsed"

    rows = _rows(rank_dir, "kernel_details.csv")
    assert sorted((r["Name"], float(r["Duration(us)"])) for r in rows) == [
        (k["name"], k["dur"]) for k in kernels
    ]
    spans, computing, end = sorted((k["ts"], k["ts"] + k["dur"]) for k in kernels), 0.0, -math.inf
    for start, stop in spans:  # their union
        computing += max(0.0, stop - max(start, end))
        end = max(end, stop)
    (first,) = [r for r in _rows(rank_dir, "step_trace_time.csv") if r["Step"] == step["name"].split("#")[1]]
    assert math.isclose(float(first["Computing"]), computing, abs_tol=1e-3), first
    linked = sum(k["dur"] for k in kernels[1:])  # gemm_0 linked to no operator; gemm_1 by its External id
    device = sum(float(r["Device Self Duration(us)"]) for r in _rows(rank_dir, "operator_details.csv"))
    assert math.isclose(device, linked, abs_tol=1e-3), device


def _with_lists_of_event_like_objects(data: dict, objects: int, every: int) -> bytes:
    """``data`` (a trace) with a list of ``objects`` objects shaped as events (a "ph" each: a tool's record
    of its own) in the args of every ``every``-th event that has args."""
    fake = {"ph": "X", "ts": 1, "name": "n", "pid": 1, "tid": 1, "dur": 2}
    with_args = [e for e in data["traceEvents"] if isinstance(e.get("args"), dict)]
    for event in with_args[::every]:
        event["args"]["records"] = [fake] * objects
    return json.dumps(data).encode()


def _event_starts(text: bytes) -> list[int]:
    """Where each event of a Kineto trace starts, as Python's json reads them one by one (ASCII text)."""
    decoder, events = json.JSONDecoder(), []
    chars = text.decode()
    at = chars.index("[", chars.index('"traceEvents"')) + 1
    while True:
        while chars[at] in " \t\r\n,":
            at += 1
        if chars[at] == "]":
            return events
        events.append(at)
        _, at = decoder.raw_decode(chars, at)


def test_the_split_of_j_n_is_not_taken_inside_a_long_list_of_event_like_args(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """A list of 130 KB of objects each with a "ph" in an event's args reads as events as far as the search
    for a split looks ahead (64 KiB): `-j N`'s cut was taken inside it (32 of 60 positions), and the trace
    read again by one process. Every cut found is an event's start, as Python's json reads them."""
    from npuprof.analysis.trace_loader import TraceReader

    _dir, trace, data = _rank_copy(torchrun_capture, tmp_path / "rank")
    text = _with_lists_of_event_like_objects(data, 2000, 40)
    trace.write_bytes(text)
    starts = _event_starts(text)
    reader = TraceReader(trace)
    first, end = reader.region()
    assert first == starts[0]
    for pos in range(first, end, (end - first) // 40):
        cut = reader.boundary_after(pos, end)
        assert cut in starts or cut == end, (pos, cut)
        assert cut == end or not [s for s in starts if pos <= s < cut][1:], (
            pos,
            cut,
        )  # the first at or after


def test_a_cut_trace_whose_end_looked_back_at_starts_in_such_a_list_is_read(
    torchrun_capture: Path, tmp_path: Path, monkeypatch
) -> None:
    """The look back from a cut trace's end (a window of CUT_WINDOW bytes, grown to CUT_LIMIT) took objects of
    a list in args that each have a "ph" for events, 8 a window: a window that began inside one (400 KB)
    grew past the limit and the trace was refused ("before its JSON closes"). The bounds are made small here
    to stand for a trace of GBs. Each cut reads the complete events before it, as Python's json does."""
    from npuprof.analysis import trace_loader

    monkeypatch.setattr(trace_loader, "CUT_WINDOW", 256 << 10)
    monkeypatch.setattr(trace_loader, "CUT_LIMIT", 1 << 20)
    _dir, trace, data = _rank_copy(torchrun_capture, tmp_path / "rank")
    text = _with_lists_of_event_like_objects(data, 6000, 80)
    starts = _event_starts(text)
    lists = [found.start() for found in re.finditer(rb'"records": \[', text)]
    assert len(lists) >= 5
    for at in lists:  # the events from the third after the list's on: a window back reaches into the list
        later = [s for s in starts if s > at][3:4]
        if not later:
            continue
        cut = later[0] + 40
        trace.write_bytes(text[:cut])
        want = [s for s in starts if s < cut]
        loaded = load_trace(trace)
        assert len(loaded.events) == len(want) - 1, cut  # all but the one the cut went through
        assert loaded.cut is not None and loaded.cut.events_end == text.rindex(b"}", 0, want[-1]) + 1, cut


def test_string_times_written_with_an_exponent_keep_their_nanoseconds(tmp_path: Path) -> None:
    """torch_npu's string times of epoch µs written with an exponent ("1.704161511420306491e15", a script's
    rewrite) made the base of string times 0 (it took the digits before the "."): every time was rounded
    through a double, up to 174 ns off on the real trace. Each is read to its nanosecond, as Decimal reads
    the text."""
    from decimal import Decimal

    real = (Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json").read_bytes()

    def exponent(found: re.Match[bytes]) -> bytes:
        whole, decimals = found[1], found[2]
        return b'"ts": "%s.%s%se%d"' % (whole[:1], whole[1:], decimals, len(whole) - 1)

    text = re.sub(rb'"ts": "(\d+)\.(\d+)"', exponent, real)
    assert text != real and b'"ts": "1.7' in text
    path = tmp_path / "trace_view.json"
    path.write_bytes(text)
    want = json.loads(text)
    loaded = load_trace(path)
    assert len(loaded.events) == len(want)
    for event, written in zip(loaded.events, want, strict=True):
        if isinstance(written.get("ts"), str):
            exact = Decimal(written["ts"]) - loaded.ts_base
            assert abs(Decimal(repr(event.ts)) - exact) < Decimal("0.0005"), (written, event.ts)


def test_a_gzipped_trace_cut_in_an_event_of_megabytes_does_not_copy_it_for_each_bracket_before(
    torchrun_capture: Path, tmp_path: Path, monkeypatch
) -> None:
    """A gzipped (streamed) trace cut inside an event of MBs (a list of objects in its args): the end of the
    stream tried each of the 64 "]"s before the cut for the events' end, copying the text after it to the
    end 4 times for each (the "]"s of "Input Dims": [[10], [10]] too): 2.9 s to read a 13 MB trace. Each
    such "]" is told by the bytes after it; the complete events are read, as Python's json reads them."""
    import gzip

    from npuprof.analysis import trace_loader

    _dir, _trace, data = _rank_copy(torchrun_capture, tmp_path / "rank")
    text = json.dumps(data, indent=1).encode()
    at = text.rindex(b'"args": {') + len(b'"args": {')
    fake = json.dumps({"ph": "X", "ts": 1, "name": "n", "pid": 1, "tid": 1, "dur": 2}).encode()
    text = text[:at] + b'"records": [' + b", ".join([fake] * 60_000) + b"], " + text[at:]
    cut = at + 60_000 * len(fake) * 9 // 10
    gz = tmp_path / "cut.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(text[:cut], 1))
    copied = []
    tail_value = trace_loader.TraceReader._tail_value
    monkeypatch.setattr(
        trace_loader.TraceReader,
        "_tail_value",
        lambda self, tail: copied.append(len(tail)) or tail_value(self, tail),
    )
    loaded = load_trace(gz)
    from test_cut_traces import complete_events

    want = complete_events(text[:cut])
    assert [(e.name, e.ph) for e in loaded.events] == [(e["name"], e["ph"]) for e in want]
    assert loaded.cut is not None
    assert sum(copied) < len(text) // 4, copied  # the text after the cut's event's start was not copied over


def test_a_trace_re_encoded_as_utf16_is_said_so_in_one_line(torchrun_capture: Path, tmp_path: Path) -> None:
    """A trace re-encoded as UTF-16 or UTF-32 (PowerShell 5's `>` writes UTF-16; Python's json reads it) was
    "not a JSON object or array, not a Chrome trace". One line says what it is and how to convert it."""
    rank_dir, trace, _data = _rank_copy(torchrun_capture, tmp_path / "rank")
    text = trace.read_text()
    for encoding in ("utf-16", "utf-16-be", "utf-32"):
        trace.write_bytes(text.encode(encoding))
        assert json.loads(trace.read_bytes())["traceEvents"]  # Python's json reads it
        done = npuprof_cli("analyse", str(rank_dir), "--force", env=clean_env())
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        (line,) = [line for line in done.stderr.splitlines() if "not analysed" in line]
        name = {"utf-16": "UTF-16LE", "utf-16-be": "UTF-16BE", "utf-32": "UTF-32LE"}[encoding]
        assert f"the trace is {name} text, not UTF-8" in line and f"iconv -f {name} -t UTF-8" in line, line


@pytest.mark.parametrize("gz", [False, True])
def test_two_traces_joined_into_one_object_are_said_so(
    torchrun_capture: Path, tmp_path: Path, gz: bool
) -> None:
    """Two traces joined into one object ({"traceEvents": [...], ..., "traceEvents": [...]}, a merge by hand;
    Python's json keeps the last array alone): the reader analysed the first array, the second held whole as a
    key of the trace's meta (with an empty first array: "undecodable events between bytes ..."). One line
    says what the trace holds, with and without gzip."""
    import gzip

    rank_dir, trace, data = _rank_copy(torchrun_capture, tmp_path / "rank")
    events = json.dumps(data["traceEvents"])
    text = json.dumps(data)[:-1] + f', "traceEvents": {events}}}'
    assert json.loads(text)["traceEvents"] == data["traceEvents"]
    if gz:
        trace.unlink()
        (rank_dir / (trace.name + ".gz")).write_bytes(gzip.compress(text.encode()))
    else:
        trace.write_text(text)
    done = npuprof_cli("analyse", str(rank_dir), "--force", env=clean_env())
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "not analysed" in line]
    assert "the events' array is followed by a second traceEvents key (two traces joined" in line, line


def test_a_cut_inside_such_a_list_of_an_event_longer_than_the_look_back_reads_the_events_before_it(
    torchrun_capture: Path, tmp_path: Path, monkeypatch
) -> None:
    """One event longer than the look back's window whose args hold a list of objects each with a "ph", cut
    inside that list: the window held nothing but its objects, which read as events, so the events' end was
    taken inside it and the trace refused as "undecodable events". Read forward from the events read, the
    events before that one are read, as Python's json reads them. The window is made small here to stand for
    one of 4 MiB."""
    from npuprof.analysis import trace_loader

    monkeypatch.setattr(trace_loader, "CUT_WINDOW", 256 << 10)
    _dir, trace, data = _rank_copy(torchrun_capture, tmp_path / "rank")
    with_args = [e for e in data["traceEvents"] if isinstance(e.get("args"), dict)]
    long = with_args[len(with_args) // 2]
    long["args"]["records"] = [{"ph": "X", "ts": 1, "name": "n", "pid": 1, "tid": 1, "dur": 2}] * 12000
    text = json.dumps(data).encode()
    starts = _event_starts(text)
    at = text.index(b'"records": [')  # in the long event's args
    long_start = max(s for s in starts if s < at)
    cut = at + (600 << 10)  # inside the list, more than a window after its start
    assert text.index(b"]", at) > cut
    trace.write_bytes(text[:cut])
    loaded = load_trace(trace)
    before = json.loads(b"[" + text[starts[0] : long_start].rstrip(b" ,") + b"]")  # Python's json
    assert len(loaded.events) == len(before)
    assert [e.name for e in loaded.events] == [e["name"] for e in before]
    assert loaded.cut is not None and loaded.cut.events_end == text.rindex(b"}", 0, long_start) + 1
