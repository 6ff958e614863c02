"""Traces cut short (a job killed while it wrote them, a copy cut short, a full disk): every reader reads the
complete events before the cut and says where it was cut (docs/formats.md, "Traces cut short")."""

from __future__ import annotations

import bisect
import functools
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from _forked_cli import npuprof
from conftest import clean_env, forked_job, trainer_in_process
from conftest import npuprof as npuprof_run
from stacks_support import full_capture

from npuprof.analysis import scan as scan_mod
from npuprof.analysis import trace_loader
from npuprof.analysis.trace_loader import TraceError, load_trace
from npuprof.results import layout
from npuprof.results.run_record import captures_of_run

REAL = Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json"


def complete_events(prefix: bytes) -> list[dict]:
    """The complete events of a trace's beginning, read with Python's json one at a time (not npuprof's
    reader): from the events' "[" on, each value that closes before the end."""
    text = prefix.decode("utf-8", "ignore")
    key = text.find('"traceEvents"')
    at = text.find("[", key if key >= 0 else 0) + 1
    decoder, events = json.JSONDecoder(), []
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            event, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return events
        events.append(event)


def _cuts(data: bytes) -> list[int]:
    """Offsets to cut at: spread over the file, and at each byte around the places a cut is hardest (inside
    a string, a number, an escape, a nested args, right after an event and its comma)."""
    cuts = set(range(1, len(data), len(data) // 97))
    for mark in (b'"name": "', b'"dur": ', b"\\u00e9", b'\\"', b'"args": {"', b"}, {", b'"Fwd thread id": '):
        at = data.find(mark, len(data) // 20) if mark in data[len(data) // 20 :] else data.find(mark)
        assert at > 0, mark
        cuts.update(range(at - 2, at + len(mark) + 4))
    cuts.update({len(data) - 2, len(data) - 1, 2, 40})
    return sorted(cuts)


def _real_with_escapes() -> bytes:
    """The real trace with one name holding an escape of each kind (none has one as written)."""
    data = REAL.read_bytes()
    at = data.index(b'"name": "aten::item"')
    return (
        data[:at] + b'"name": "aten::item \\u00e9 \\"x\\" \\\\"' + data[at + len(b'"name": "aten::item"') :]
    )


@functools.cache
def _real_events_closed_by() -> tuple[bytes, list[dict], list[int]]:
    """_real_with_escapes(), its events read whole with Python's json, and the byte offset just past each
    one's closing brace: the complete events of its first N bytes are those whose offset is N or less (for
    every cut of _cuts, the list complete_events gives of that prefix; read once for both tests below)."""
    data = _real_with_escapes()
    text = data.decode("utf-8")
    decoder, events, ends = json.JSONDecoder(), [], []
    at, byte_at = text.index("[") + 1, len(text[: text.index("[") + 1].encode())
    while True:
        start = at
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            event, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return data, events, ends
        byte_at += len(text[start:at].encode())
        events.append(event)
        ends.append(byte_at)


@pytest.mark.parametrize("gz", [False, True])
def test_the_real_trace_cut_anywhere_reads_exactly_its_complete_events(tmp_path: Path, gz: bool) -> None:
    """torch_npu's bare array cut at ~150 offsets, plain (read from its end back) and gzipped whole (read
    as a stream): every cut reads the events that closed before it, or says there is nothing to read. It
    was refused whole: "truncated: ... before its JSON closes"."""
    data, events, ends = _real_events_closed_by()
    assert len(json.loads(data)) == len(events) == 3670
    path = tmp_path / ("cut.json.gz" if gz else "cut.json")
    for cut in _cuts(data):
        prefix = data[:cut]
        path.write_bytes(gzip.compress(prefix, 1) if gz else prefix)
        want = events[: bisect.bisect_right(ends, cut)]
        if not want:
            with pytest.raises(TraceError) as info:
                load_trace(path)
            assert info.value.kind == "truncated" and "nothing to read" in str(info.value), cut
            continue
        trace = load_trace(path)
        assert [(e.name, e.ph) for e in trace.events] == [(e["name"], e["ph"]) for e in want], cut
        assert trace.cut is not None and f"read the {len(want)} complete event(s)" in trace.cut_note, cut


def test_a_cut_trace_is_split_between_workers_as_a_whole_one_is(tmp_path: Path, monkeypatch) -> None:
    """The scan's byte ranges (-j N) end at the last complete event: the same events as a serial read."""
    data = REAL.read_bytes()
    path = tmp_path / "trace_view.json"
    path.write_bytes(data[:423622])
    serial, _meta, end = scan_mod.scan(path, workers=1)
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 14)
    parallel, _meta2, end2 = scan_mod.scan(path, workers=3)
    assert end == end2 and serial.event_count == parallel.event_count == len(complete_events(data[:423622]))
    assert list(parallel.op_ts) == list(serial.op_ts)


def test_analyse_reads_a_cut_trace_view_and_says_so(tmp_path: Path) -> None:
    """The brief's case: torch_npu's trace_view.json cut at byte 423622 was "not analysed" (rc 1). Its
    complete events are analysed; the report (text and json) says where it was cut; its one step, which
    spans the whole capture, is left out (the cut left it open); the trace_view.json written is a closed
    JSON array."""
    data = REAL.read_bytes()
    path = tmp_path / "trace_view.json"
    path.write_bytes(data[:423622])
    want = complete_events(data[:423622])
    done = npuprof("analyse", str(path), "--format", "json", env=clean_env())
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    (note,) = [w for w in rank["warnings"] if "cut short" in w]
    assert f"read the {len(want)} complete event(s) before the cut" in note, note
    assert "it ends after 423622 bytes" in note and "step(s) 1 left out" in note, note
    assert [s["step"] for s in rank["steps"]] == [None], rank["steps"]  # the whole capture, no step
    end = len(data[:423622].rstrip().rsplit(b"}, {", 1)[0]) + 1  # just past the last "}" of an event
    assert rank["cut_short"] == {
        "text_bytes": 423622,
        "events_end": end,
        "events_read": len(want),
        "after_events": False,
        "steps_left_out": [1],
    }
    assert "cut short" in done.stderr
    csv = npuprof("analyse", str(path), "--format", "csv", env=clean_env())
    header, row = csv.stdout.splitlines()
    assert header.endswith(",trace_cut_short") and row.endswith(",1"), csv.stdout
    assert "the trace is cut short" in csv.stderr
    written = json.loads((tmp_path / "trace_view.json.npuprof" / "trace_view.json").read_text())
    host = {(e["name"], e["ts"]) for e in want if e["ph"] == "X" and e["pid"] == 437675}
    assert host <= {(e["name"], e.get("ts")) for e in written}  # the events read, in a closed array


def _cut_rank(src: Path, dst: Path, fraction: float) -> tuple[Path, bytes]:
    """A copy of the rank dir ``src`` whose trace is cut at ``fraction`` of its (compressed) bytes; the
    trace's text that is left (decompressed as far as it goes)."""
    shutil.copytree(src, dst)
    (trace,) = dst.glob("*.pt.trace.json*")
    raw = trace.read_bytes()
    trace.write_bytes(raw[: int(len(raw) * fraction)])
    if trace.name.endswith(".gz"):
        return trace, zlib.decompressobj(31).decompress(raw[: int(len(raw) * fraction)])
    return trace, raw[: int(len(raw) * fraction)]


def _step(event: dict) -> int:
    return int(event["name"].split("#")[1])


def _after_every_operator(events: list[dict]) -> bool:
    """Whether a CPU Kineto trace read up to ``events`` has all its operators: it writes each thread's
    operators then its [memory] events, thread after thread, then every Python function."""
    last = next(e for e in reversed(events) if e.get("ph") != "M" and isinstance(e.get("ts"), int | float))
    if last.get("cat") == "python_function":
        return True
    named = {e["tid"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return last.get("name") == "[memory]" and named <= {e.get("tid") for e in events if e.get("ph") != "M"}


def test_real_kineto_traces_cut_inside_their_events(torchrun_capture: Path, tmp_path: Path) -> None:
    """A real CPU capture's Kineto traces (rank 0 plain, rank 1 gzipped) cut inside traceEvents: analysed
    from their complete events, with the warning; the steps kept are those that end before the start of
    the last event read (worked out here with json), the others left out; all of them where every operator
    was read (a cut in the Python functions, or in the last thread's [memory] events)."""
    ranks = sorted(torchrun_capture.glob("*_ascend_pt"))
    out = tmp_path / "out"
    expected = {}
    for src, fraction in zip(ranks, (0.3, 0.5), strict=True):
        (info,) = src.glob("profiler_info_*.json")
        k = int(info.stem.rsplit("_", 1)[1])
        _trace, text = _cut_rank(src, out / src.name, fraction)
        events = complete_events(text)
        last = next(e for e in reversed(events) if isinstance(e.get("ts"), int | float))
        steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        kept = [
            int(e["name"].split("#")[1])
            for e in steps
            # a cut in the [memory] events or Python functions, written after every operator: all whole
            if _after_every_operator(events) or (e["ts"] + e["dur"] <= last["ts"] and e["ts"] < last["ts"])
        ]
        expected[k] = (len(events), kept)
    done = npuprof("analyse", str(out), "--format", "json", env=clean_env())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["ranks"]) == 2, done.stderr
    for rank in report["ranks"]:
        count, kept = expected[rank["rank"]]
        (note,) = [w for w in rank["warnings"] if "the trace is cut short" in w]
        assert f"read the {count} complete event(s)" in note, note
        assert [s["step"] for s in rank["steps"] if s["step"] is not None] == kept, (rank["steps"], note)
        gzipped = next(Path(rank["rank_dir"]).glob("*.pt.trace.json*")).name.endswith(".gz")
        assert gzipped == any("gzip data ends early" in w for w in rank["warnings"]), rank["warnings"]
        tv = Path(rank["rank_dir"]) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        assert isinstance(json.loads(tv.read_text()), list)


def _cut_in_its_memory_events(src: Path, dst: Path) -> tuple[list[dict], dict[int, float], float]:
    """A copy of the rank dir ``src`` whose plain trace is cut halfway through its [memory] events; the
    complete events before the cut, the end of each step of the whole trace, the last [memory] time read."""
    (trace,) = src.glob("*.pt.trace.json")
    data = trace.read_bytes()
    first, last = data.index(b'"[memory]"'), data.rindex(b'"[memory]"')
    shutil.copytree(src, dst)
    (dst / trace.name).write_bytes(data[: (first + last) // 2])
    events = complete_events(data[: (first + last) // 2])
    assert events[-1]["name"] == "[memory]", events[-1]  # the cut is in the [memory] events
    steps = {
        int(e["name"].split("#")[1]): e["ts"] + e["dur"]
        for e in json.loads(data)["traceEvents"]
        if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")
    }
    return events, steps, max(e["ts"] for e in events if e.get("name") == "[memory]")


def _analysed(rank_dir: Path) -> dict:
    done = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    return rank


def test_a_trace_cut_in_its_memory_events_keeps_its_steps_whole_but_their_memory(tmp_path: Path) -> None:
    """A real one-thread Kineto trace cut inside its [memory] events (written after every operator, in time
    order, then the Python functions) left out every step that ended after the last [memory] event read,
    though all its operators were read. Its steps are reported as the whole trace's (the same figures, the
    same op_statistic.csv) but their memory peaks, none for a step that ends after the last [memory] event
    read; the cut's one line says which tables are partial."""
    src = full_capture()  # stacks_support's real capture: one training thread, --profile-memory, stacks
    cut = tmp_path / "cut" / src.name
    events, steps, memory_read = _cut_in_its_memory_events(src, cut)
    assert "cpu_op" not in {e.get("cat") for e in events[events.index(events[-1]) :]}
    assert any(end >= memory_read for end in steps.values()), steps  # a step the old rule left out
    whole = tmp_path / "whole" / src.name
    shutil.copytree(src, whole)
    ranks = {d: _analysed(d) for d in (whole, cut)}
    memory = ("memory_peak_mb", "memory_peak_reserved_mb")
    figures = {
        d: {s["step"]: {k: v for k, v in s.items() if k not in memory} for s in r["steps"]}
        for d, r in ranks.items()
    }
    assert sorted(figures[cut]) == sorted(steps), ranks[cut]["warnings"]
    assert figures[cut] == figures[whole]
    for cut_step, whole_step in zip(ranks[cut]["steps"], ranks[whole]["steps"], strict=True):
        partial = steps[cut_step["step"]] >= memory_read
        assert whole_step["memory_peak_mb"] is not None
        assert cut_step["memory_peak_mb"] == (None if partial else whole_step["memory_peak_mb"]), cut_step
    tables = [d / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv" for d in (cut, whole)]
    assert tables[0].read_text() == tables[1].read_text()
    (line,) = [w for w in ranks[cut]["warnings"] if "the trace is cut short" in w]
    assert (
        "; the cut is in the last thread's [memory] events, which Kineto writes after every operator, all "
        "read: the operator and step (breakdown) tables are whole; memory_record.csv, operator_memory.csv "
        "and the memory peaks are partial" in line
    ), line
    assert "left out" not in line, line


def test_a_cut_in_the_memory_events_of_a_thread_before_another_keeps_the_step_rule(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """Kineto writes each thread's operators then its [memory] events, thread after thread: in a gloo rank's
    trace a gloo thread's collectives come after the training thread's [memory] events, so a cut there has
    not read them and the steps that end after the last event read are still left out."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    cut = tmp_path / src.name
    events, steps, memory_read = _cut_in_its_memory_events(src, cut)
    named = {e["tid"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert named - {e["tid"] for e in events if e.get("ph") != "M"}  # a thread whose events come later
    rank = _analysed(cut)
    assert [s["step"] for s in rank["steps"] if s["step"] is not None] == [
        n for n, end in sorted(steps.items()) if end <= memory_read
    ], rank["warnings"]
    (line,) = [w for w in rank["warnings"] if "the trace is cut short" in w]
    assert "[memory]" not in line, line


def test_export_stacks_and_memory_timeline_read_a_cut_trace_as_its_complete_events(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """export-stacks and memory-timeline of a trace cut short give what they give for a closed trace that
    holds only its complete events (written here with json), and say it was cut."""
    src = sorted(torchrun_capture.glob("*_ascend_pt"))[0]
    trace, text = _cut_rank(src, tmp_path / "cut" / src.name, 0.8)
    events = complete_events(text)
    head = json.loads(text[: text.index(b'"traceEvents"')].decode().rstrip().rstrip(",") + "}")
    whole = tmp_path / "whole.pt.trace.json"
    whole.write_text(json.dumps({**head, "traceEvents": events}))
    for command, out in (("export-stacks", "stacks.folded"), ("memory-timeline", "memory.json")):
        cut = npuprof(command, str(trace), "-o", str(tmp_path / f"cut-{out}"), env=clean_env())
        ref = npuprof(command, str(whole), "-o", str(tmp_path / f"whole-{out}"), env=clean_env())
        assert cut.returncode == ref.returncode == 0, (cut.stderr, ref.stderr)
        assert f"read the {len(events)} complete event(s)" in " ".join(cut.stderr.split()), cut.stderr
        assert (tmp_path / f"cut-{out}").read_bytes() == (tmp_path / f"whole-{out}").read_bytes(), command


@pytest.mark.parametrize("form", ["kineto", "array"])
def test_a_cut_right_after_a_list_in_an_events_args_is_no_end_of_the_events(
    torchrun_capture: Path, tmp_path: Path, form: str
) -> None:
    """Cut right after a "]" of an event's args (``"Input Dims": [[32, 64]]``), a trace looked closed from
    its end back (a bare array ends in "]"; a "]" then ", ...}" reads as the keys after traceEvents), and was
    refused as "corrupt: undecodable events". It is read up to its last complete event."""
    src = sorted(torchrun_capture.glob("*_ascend_pt"))[0]
    (raw,) = src.glob("*.pt.trace.json")
    trace = json.loads(raw.read_bytes())
    data = json.dumps(trace if form == "kineto" else trace["traceEvents"]).encode()
    ends = [m.end() for m in re.finditer(rb"\]\]", data)]
    assert len(ends) > 20
    path = tmp_path / "cut.json"
    for end in ends[:: max(1, len(ends) // 20)]:
        for cut in (end, end + 1, data.index(b"}", end) + 1):  # after "]]", its comma, its args' "}"
            path.write_bytes(data[:cut])
            assert len(load_trace(path).events) == len(complete_events(data[:cut])), cut


def _trace_of_many_objects() -> tuple[bytes, list[tuple[int, int]]]:
    """A trace with three events of more than 256 "},{" each: an arg holding a string of "{}, {}, ..."
    (JSON in a record_function's arg), one a string of JSON with its quotes escaped, one a list of
    objects; (its text, each of those events' first and last byte)."""
    objects = [{"a": i} for i in range(600)]
    values = [", ".join(["{}"] * 3000), json.dumps(objects), objects]
    events, many = [], []
    for i in range(40):
        args = {"meta": values[i // 10]} if i % 10 == 9 and i < 39 else {}
        events.append({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 10.0 * i})
        events[-1] |= {"dur": 5.0, "args": args}
    data = json.dumps({"traceEvents": events, "traceName": "many"}, indent=1).encode()
    for i in (9, 19, 29):
        first = data.rindex(b"{", 0, data.index(b'"name": "op%d"' % i))
        many.append((first, data.rindex(b"}", 0, data.index(b'"name": "op%d"' % (i + 1)))))
    return data, many


@pytest.mark.parametrize("window", [None, 4096])
def test_a_trace_cut_inside_an_event_of_many_objects_is_read_up_to_its_last_complete_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int | None
) -> None:
    """A trace cut inside an event whose args hold more than 256 "},{" (a string of "{}, {}, ...", JSON
    with escaped quotes, a list of objects) was refused as cut nowhere JSON could tell ("truncated: ...
    before its JSON closes"): the search for its last complete event tried 256 of them. Read from the end
    back a window at a time (here also 4 KiB, shorter than those args), a window that began inside the
    string of "{}, {}, ..." or the list of objects took them for events, and the events' end for inside
    them: refused as corrupt. Plain and gzipped (read as a stream), cut in each such event and after it,
    every read has the events Python's json reads complete."""
    data, many = _trace_of_many_objects()
    if window is not None:
        monkeypatch.setattr(trace_loader, "CUT_WINDOW", window)
    cuts = sorted({c for first, last in many for c in range(first, last + 40, (last - first) // 7)})
    for gz in (False, True):
        path = tmp_path / ("cut.json.gz" if gz else "cut.json")
        for cut in cuts:
            path.write_bytes(gzip.compress(data[:cut], 1) if gz else data[:cut])
            want = complete_events(data[:cut])
            trace = load_trace(path)
            assert [e.name for e in trace.events] == [e["name"] for e in want], (gz, cut)
            assert f"read the {len(want)} complete event(s)" in (trace.cut_note or ""), (gz, cut)


@pytest.mark.parametrize("gz", [False, True])
def test_a_cut_inside_a_nan_or_infinity_a_script_wrote_is_read_as_any_other_cut(
    tmp_path: Path, gz: bool
) -> None:
    """A trace a script wrote with json.dump, whose args hold NaN, Infinity and -Infinity (Python's json
    writes them so), cut inside one of those words or right after it, was refused ("truncated: ... before
    its JSON closes"), while a cut anywhere else in it read its complete events."""
    events = [
        {"ph": "X", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0}
        | {"args": {"v": float("inf") if i % 2 else -float("inf"), "w": float("nan"), "n": [[1, 2]]}}
        for i in range(8)
    ]
    data = json.dumps({"traceEvents": events}).encode()
    at = data.index(b'"op3"')
    words = [(data.index(word, at), len(word)) for word in (b"Infinity", b"NaN", b"-Infinity")]
    path = tmp_path / ("cut.json.gz" if gz else "cut.json")
    for cut in sorted({c for start, size in words for c in range(start - 1, start + size + 2)}):
        path.write_bytes(gzip.compress(data[:cut], 1) if gz else data[:cut])
        want = complete_events(data[:cut])  # Python's json reads NaN and Infinity
        trace = load_trace(path)
        assert [e.name for e in trace.events] == [e["name"] for e in want] and len(want) in (3, 4), cut
        assert f"read the {len(want)} complete event(s)" in trace.cut_note, cut


def test_a_nan_arg_before_the_cut_does_not_hide_the_time_of_the_last_event_read(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """The real Kineto trace with a NaN arg in each span (a record_function's float arg a script passed),
    cut where the last event read (a [memory] event of the training thread, before a gloo thread's
    operators) starts before the end of steps read whole as spans: the time of the last event read was
    taken with no repairs, so a NaN anywhere in the trace's last 4 MiB hid it, and those steps were kept as
    whole (their events after that time cut off). The steps kept are those that end before it, as in the
    trace without the NaN (all of them where every operator was read: a cut in the Python functions)."""
    (raw,) = sorted(torchrun_capture.glob("*_ascend_pt"))[0].glob("*.pt.trace.json")
    trace = json.loads(raw.read_bytes())
    for event in trace["traceEvents"]:
        if event.get("ph") == "X" and isinstance(event.get("args"), dict):
            event["args"]["scale"] = float("nan")
    data = json.dumps(trace, indent=1).encode()
    path, lying = tmp_path / "cut.pt.trace.json", 0
    in_memory = data.index(b'"[memory]"', data.index(b'"[memory]"') + 1)  # after the first [memory] event
    for size in [len(data) * tenth // 10 for tenth in range(1, 10)] + [in_memory]:
        cut = data[:size]
        events = complete_events(cut)
        last = next(e["ts"] for e in reversed(events) if isinstance(e.get("ts"), int | float))
        steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        whole = _after_every_operator(events)
        kept = [
            n for e in steps if whole or (e["ts"] + e["dur"] <= last and e["ts"] < last) for n in [_step(e)]
        ]
        # a step ends after the last event read, and is not the last
        lying += not whole and len(kept) < len(steps) - 1
        path.write_bytes(cut)
        extract, _meta, _end = scan_mod.scan(path)
        assert sorted(n for n, *_ in extract.steps) == kept, size
    assert lying, "no cut falls where the last event read starts before the end of a step read whole"


def test_a_gz_trace_cut_short_then_nul_bytes_reads_only_what_was_written(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """A .gz trace whose write was cut short on a disk that then held NUL bytes past it (a file preallocated,
    or extended by a crash): the NUL bytes were decompressed as the member's deflate codes, and their bits
    gave text never written (copies of earlier events, read as events) or text that is no JSON (refused as
    truncated). They are no part of the member: its events read are those before the cut, and the note says
    the NUL bytes were not read. A whole member's own last bytes that are zeros (its size) still end it."""
    (raw,) = sorted(torchrun_capture.glob("*_ascend_pt"))[1].glob("*.pt.trace.json.gz")
    packed = raw.read_bytes()
    path = tmp_path / "cut.pt.trace.json.gz"
    for tenth in (2, 5, 7):
        cut = packed[: len(packed) * tenth // 10]
        want = complete_events(zlib.decompressobj(31).decompress(cut))
        written = cut + bytes(4096)
        path.write_bytes(written)
        # the cut's own last bytes may be zeros (compressed data is any byte): they read as NULs with the rest
        nuls = len(written) - len(written.rstrip(b"\0"))
        trace = load_trace(path)
        assert [(e.name, e.ts) for e in trace.events if e.ph == "X"] == [
            (e["name"], pytest.approx(e["ts"])) for e in want if e["ph"] == "X"
        ], tenth
        assert trace.events_read == len(want), tenth
        assert f"the {nuls} NUL bytes after it (a write cut short by a crash or a full disk) were not" in (
            trace.gzip_note or ""
        ), trace.gzip_note
    small = gzip.compress(
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}'
    )
    assert small.endswith(b"\0")  # its size, under 16 MiB, ends in a zero byte
    path.write_bytes(small + bytes(100))
    trace = load_trace(path)
    assert [e.name for e in trace.events] == ["a"] and trace.cut is None and "zero padding" in trace.gzip_note


def test_the_span_of_a_trace_is_of_all_its_events_however_it_is_read_in_blocks(
    torchrun_capture: Path, tmp_path: Path, monkeypatch
) -> None:
    """The first start and last end of the complete events (the row of a trace cut short whose steps were
    all left out, as of a trace without steps; the db's SESSION_TIME_INFO) were only taken from the blocks
    read up to the first step: a block after it was skipped, so -j 1 and -j 3 gave different figures (the
    real CPU capture's trace cut in the trailer Kineto writes last: its "PyTorch Profiler (0)" span, the
    earliest start, was left out with -j 1, the row 73 µs short). Blocks made small here, as a trace of
    several MB is read: the span is that of every complete event, worked out with json."""
    monkeypatch.setattr(scan_mod, "BLOCK", 16 << 10)
    (raw,) = sorted(torchrun_capture.glob("*_ascend_pt"))[0].glob("*.pt.trace.json")
    data = raw.read_bytes()
    path = tmp_path / "cut.pt.trace.json"
    for cut in (len(data), len(data) * 3 // 10):
        path.write_bytes(data[:cut])
        spans = [e for e in complete_events(data[:cut]) if e.get("ph") == "X" and "dur" in e]
        extract, _meta, _end = scan_mod.scan(path)
        assert extract.first_ts == pytest.approx(min(e["ts"] for e in spans), abs=1e-3), cut
        assert extract.last_ts == pytest.approx(max(e["ts"] + e["dur"] for e in spans), abs=1e-3), cut
    assert not extract.steps and extract.open_steps, "the cut at 3/10 leaves no step whole"


def test_a_cut_in_the_trailer_kineto_writes_after_every_activity_leaves_every_step_whole(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """Kineto writes its own trailer after every activity: the profiler's span ("PyTorch Profiler (0)",
    process "Spans"), its metadata and marks ("Iteration Start", "Record Window End"), all timed at the
    trace's start or end. A cut there took the start of the last event read from them (metadata events
    included, whose ts Kineto sets to the trace's start): every step was left out ("step(s) 3, 4, 5 left
    out", the real capture cut at byte 658000 of 658501) though all its activities were read. Their times
    do not tell how far the activities had got: the steps are those of the whole trace."""
    (raw,) = sorted(torchrun_capture.glob("*_ascend_pt"))[0].glob("*.pt.trace.json")
    data = raw.read_bytes()
    steps = sorted(
        int(e["name"].split("#")[1])
        for e in json.loads(data)["traceEvents"]
        if e["name"].startswith("ProfilerStep#")
    )
    assert steps
    trailer = data.rfind(b"{", 0, data.index(b'"pid": "Spans"'))
    path = tmp_path / "cut.pt.trace.json"
    for cut in range(trailer + 1, data.rindex(b"]"), 23):
        path.write_bytes(data[:cut])
        extract, _meta, _end = scan_mod.scan(path)
        assert sorted(n for n, *_ in extract.steps) == steps and not extract.open_steps, cut


def test_steps_asked_that_a_cut_left_out_are_named_as_such(tmp_path: Path) -> None:
    """`--steps 1` of torch_npu's trace_view.json cut at byte 423622, whose one step the cut left open:
    "no step of --steps 1 ...: they have no step", as if the capture had none. The line says the step was
    left out because the trace is cut short."""
    path = tmp_path / "trace_view.json"
    path.write_bytes(REAL.read_bytes()[:423622])
    done = npuprof("analyse", str(path), "--steps", "1", env=clean_env())
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith(
        "they have no step; step(s) 1 left out: the trace is cut short, and the cut may have taken some of "
        "its events (the capture's warning says where; npuprof analyse without --steps)"
    ), line


def _with_device_work(trace: dict) -> dict:
    """``trace`` (a real CPU capture's Kineto trace) with a CUDA launch after each aten::mm / addmm and its
    kernel, then a cudaStreamSynchronize (no device work), written as Kineto writes them: the runtime calls
    among the host's events, numbered in order (CUPTI's correlations), every kernel after them (before the
    trailer of the profiler's span)."""
    events, host, kernels = trace["traceEvents"], [], []
    trailer = next(i for i, e in enumerate(events) if isinstance(e.get("pid"), str))
    for event in events[:trailer]:
        host.append(event)
        if event.get("cat") == "cpu_op" and event["name"] in ("aten::mm", "aten::addmm"):
            corr, ts = 2 * len(kernels) + 1, event["ts"]
            args = {"External id": event["args"].get("External id", 0), "correlation": corr}
            call = {"ph": "X", "cat": "cuda_runtime", "pid": event["pid"], "tid": event["tid"]}
            host.append(call | {"name": "cudaLaunchKernel", "ts": ts + 0.5, "dur": 1.0, "args": args})
            kernels.append(
                {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts + 2.0}
                | {"dur": max(1.0, event["dur"] / 2), "args": args | {"device": 0, "stream": 7}}
            )
            sync = args | {"correlation": corr + 1}
            host.append(call | {"name": "cudaStreamSynchronize", "ts": ts + 1.6, "dur": 0.2, "args": sync})
    return trace | {"traceEvents": host + kernels + events[trailer:]}


def test_a_step_whose_device_work_the_cut_took_is_left_out(torchrun_capture: Path, tmp_path: Path) -> None:
    """Kineto writes the GPU's work after every CPU activity: a trace cut in its host events has no kernel.
    The steps that ended before the last host event read were kept, with figures of their host events alone
    (the trace read as CPU-only: its operators' time as computing, not its kernels'). A step with a launch
    whose kernel was not read is left out: the steps reported have the figures of the whole trace."""
    (raw,) = sorted(torchrun_capture.glob("*_ascend_pt"))[0].glob("*.pt.trace.json")
    data = json.dumps(_with_device_work(json.loads(raw.read_bytes())), indent=1).encode()
    whole = tmp_path / "whole.pt.trace.json"
    whole.write_bytes(data)
    done = npuprof("analyse", str(whole), "--format", "json", env=clean_env())
    by_step = {s["step"]: s for s in json.loads(done.stdout)["ranks"][0]["steps"]}
    first_kernel = data.index(b'"name": "gemm"')
    for cut in (
        first_kernel * 6 // 10,
        first_kernel * 9 // 10,
        first_kernel + (len(data) - first_kernel) // 2,
    ):
        path = tmp_path / f"cut{cut}.pt.trace.json"
        path.write_bytes(data[:cut])
        done = npuprof("analyse", str(path), "--format", "json", env=clean_env())
        (rank,) = json.loads(done.stdout)["ranks"]
        for step in rank["steps"]:
            if step["step"] is not None:
                assert step == by_step[step["step"]], (cut, step["step"])
        kept = [s["step"] for s in rank["steps"] if s["step"] is not None]
        assert kept if cut > first_kernel else not kept, cut  # no kernel read: no step whole


def test_torch_npus_steps_cut_before_its_npu_tasks_are_left_out(tmp_path: Path) -> None:
    """torch_npu's trace_view.json writes its NPU tasks after every host event (their flows last), with no
    launch among the host's events that tells: the real trace (its one step split in two here, at half its
    length) cut right after its steps' events kept step 1 with its host operators' time as computing
    (1985.208 µs where its NPU tasks give 555.153). While no device task is read, no step is whole; cut in
    the tasks, the steps kept have the whole trace's figures."""
    events = json.loads(REAL.read_bytes())
    at = next(k for k, e in enumerate(events) if e.get("name") == "ProfilerStep#1")
    step, half = events[at], events[at]["dur"] / 2
    second = step | {"name": "ProfilerStep#2", "ts": f"{float(step['ts']) + half:.3f}", "dur": round(half, 3)}
    events[at : at + 1] = [step | {"dur": round(half, 3)}, second]
    data = json.dumps(events).encode()
    runs = {}
    for name, cut in (
        ("whole", len(data)),
        ("host", data.index(b"ProfilerStep#2") + 300),
        ("tasks", len(data) - 1000),
    ):
        path = tmp_path / name / "trace_view.json"
        path.parent.mkdir()
        path.write_bytes(data[:cut])
        done = npuprof("analyse", str(path), "--format", "json", env=clean_env())
        runs[name] = {s["step"]: s for s in json.loads(done.stdout)["ranks"][0]["steps"]}
    assert sorted(runs["whole"]) == [1, 2]
    assert list(runs["host"]) == [None], runs["host"]  # no NPU task read: the row of all the events read
    assert runs["tasks"] == {1: runs["whole"][1]}  # step 2 ends after the last event read


def test_a_cut_that_took_a_base_time_written_after_the_events_says_the_times_are_not_epoch(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """Torch releases that write Kineto's baseTimeNanoseconds after the events lose it to a cut: the times
    read are µs after an unknown base, and memory-timeline wrote them as its epoch times (5784356804076
    where the whole trace gives 1796641382804076), the report's start_us with no time_base_ns (which says
    they are epoch µs), without a word. The warning says so; a trace with its base before its events does
    not."""
    (raw,) = sorted(torchrun_capture.glob("*_ascend_pt"))[0].glob("*.pt.trace.json")
    trace = json.loads(raw.read_bytes())
    base = trace.pop("baseTimeNanoseconds")
    events = trace.pop("traceEvents")
    late = json.dumps(trace | {"traceEvents": events, "baseTimeNanoseconds": base}).encode()
    early = json.dumps({"baseTimeNanoseconds": base} | trace | {"traceEvents": events}).encode()
    said = "its baseTimeNanoseconds, which this torch writes after the events, was cut off"
    for data, lost in ((late, True), (early, False)):
        for gz in (False, True):
            path = tmp_path / ("cut.json.gz" if gz else "cut.json")
            path.write_bytes(
                gzip.compress(data[: len(data) * 7 // 10]) if gz else data[: len(data) * 7 // 10]
            )
            assert (said in load_trace(path).cut_note) == lost, (lost, gz)
    path.write_bytes(late[: late.rindex(b'"baseTimeNanoseconds"')])  # cut in the keys after the events
    assert said in load_trace(path).cut_note


def _died_while_torch_wrote(src: Path, dst: Path, fraction: float) -> tuple[str, bytes]:
    """A copy of the rank dir ``src`` as a job killed while torch wrote its trace leaves it (seen with a real
    job killed by SIGKILL while the trace grew): its record still "capturing" (its pid gone), no
    profiler_info / metadata yet, and the trace's first ``fraction`` under Kineto's temporary name of
    npuprof's temporary name (``.NAME.PID-HEX12.tmp.tmp``), not written for a while. Returns NAME and the
    text written."""
    dst.mkdir(parents=True)
    (trace,) = src.glob("*.pt.trace.json")
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    pid = int(ended.stdout)  # a process that has ended
    # the record as the real death left it (npuprof run --with-stack ..., kill -9 inside the export)
    record = {
        "status": "capturing", "run_id": "29572ee1fd14", "pid": pid, "rank": None, "worker": "vm",
        "backend": "torch-cpu", "device": "cpu", "updated_ns": time.time_ns() - 10**12, "steps": [6],
        "trace": None, "detail": "", "last_step_partial": None, "first_step_partial": None, "extras": [],
        "parse": True, "export_ms": None, "host": os.uname().nodename, "version": 1,
    }  # fmt: skip
    (dst / "npuprof_capture.json").write_text(json.dumps(record))
    text = trace.read_bytes()[: int(trace.stat().st_size * fraction)]
    temporary = dst / f".{trace.name}.{pid}-0123456789ab.tmp.tmp"
    temporary.write_bytes(text)
    os.utime(temporary, (time.time() - 600, time.time() - 600))
    return trace.name, text


def test_a_trace_torch_was_writing_when_the_job_died_is_read_by_analyse(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """A job lost (its node, its `npuprof run` too) while torch wrote the trace: analyse keeps the part
    written under a name saying it is cut, reads its complete events and says the job died in the write;
    it refused the rank as interrupted, and its cleanup deleted the part written."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    rank_dir = tmp_path / "out" / src.name
    name, text = _died_while_torch_wrote(src, rank_dir, 0.6)
    done = npuprof("analyse", str(tmp_path / "out"), "--format", "json", env=clean_env())
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    kept = rank_dir / name.replace(".pt.trace.json", ".cut.pt.trace.json")
    assert rank["trace"] == kept.name and kept.read_bytes() == text
    assert not [p.name for p in rank_dir.glob(".*.tmp*")]
    assert any(w.startswith("the job died while its trace was written") for w in rank["warnings"]), rank
    assert rank["cut_short"]["events_read"] == len(complete_events(text)), rank["cut_short"]
    assert json.loads((rank_dir / "npuprof_capture.json").read_text())["status"] == "capturing"
    assert layout.capture_status(rank_dir).status == "incomplete"  # never complete, even once read


def _died_in_step_4(torchrun_capture: Path, rank_dir: Path) -> tuple[bytes, list[int]]:
    """A rank dir as a job killed while torch wrote its trace leaves it, its trace cut in step 4's operators:
    the text written, and the steps whole in it, worked out from the events before the cut (a step that
    ends after the last event read may have lost events to the cut): [3], step 4 cut short."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    (trace,) = src.glob("*.pt.trace.json")
    data = trace.read_bytes()
    step_at = data.index(b'"ProfilerStep#4"')
    fraction = (step_at + (data.index(b'"[memory]"') - step_at) // 2) / len(data)
    _name, text = _died_while_torch_wrote(src, rank_dir, fraction)
    events = complete_events(text)
    last_ts = float([e for e in events if e.get("ph") != "M"][-1]["ts"])
    steps = {
        int(e["name"].split("#")[1]): float(e["ts"]) + float(e["dur"])
        for e in events
        if e.get("name", "").startswith("ProfilerStep#")
    }
    whole = sorted(n for n, end in steps.items() if end <= last_ts)
    assert (whole, sorted(set(steps) - set(whole))) == ([3], [4])  # the cut is where it is meant to be
    return text, whole


def test_a_death_while_torch_wrote_the_trace_is_one_line_naming_the_steps_kept(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """analyse said a death in the export in two warnings, the death's ("interrupted; what was written is
    read") and the cut reader's (bytes, the rule for the steps left out), read as two problems: one line
    says what happened, what was kept, and which steps it holds whole. Cut in step 4's operators, step 3 is
    whole and step 4 left out (worked out here from the events before the cut)."""
    rank_dir = tmp_path / "out" / "r"
    text, whole = _died_in_step_4(torchrun_capture, rank_dir)
    events = complete_events(text)
    done = npuprof("analyse", str(tmp_path / "out"), "--format", "json", env=clean_env())
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    about = [w for w in rank["warnings"] if "died" in w or "cut" in w]
    size = len(text) / 1024
    assert about == [
        f"the job died while its trace was written: the part written ({size:.1f} KiB) is read up to its "
        f"last complete event ({len(events):,} events); it holds step(s) 3 whole; step(s) 4 cut short, "
        "left out"
    ], rank["warnings"]
    assert [s["step"] for s in rank["steps"]] == whole
    said = [line for line in done.stderr.splitlines() if "died" in line or "cut" in line]
    assert len(said) == 1, done.stderr


def test_analyse_right_after_the_death_says_when_it_reads_the_part_written(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """analyse within a minute of the death (the part written may still be another host's, in a shared
    directory) said only "interrupted capture", with the part on disk: it says when it will read it."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    rank_dir = tmp_path / "out" / src.name
    _died_while_torch_wrote(src, rank_dir, 0.5)
    (temporary,) = rank_dir.glob(".*.tmp.tmp")
    os.utime(temporary, (time.time() - 15, time.time() - 15))  # the death 15 s ago
    done = npuprof("analyse", str(tmp_path / "out"), env=clean_env())
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and "interrupted capture" in said, said
    assert "is read once nothing has written it for 60 s" in said, said
    left = int(said.split("analyse it again in ", 1)[1].split(" s", 1)[0])
    assert 40 <= left <= 46, said  # 60 s less the 15 s since, less this test's own time
    assert temporary.exists()  # left where it is until then


def test_analyse_right_after_a_death_as_torch_began_its_export_says_when_that_is_sure(
    tmp_path: Path,
) -> None:
    """A job killed as torch's export began leaves its trace's temporary file empty; within the minute that
    guards a file another host may still write, analyse said only "ended before the capture was finalised":
    it says the job may have died there, and when that is said for sure (the file's moment and 60 s)."""
    dead = 2**22 + 7  # above the kernel's largest pid_max: no process has it
    rank_dir = tmp_path / "out" / f"vm_{dead}_20261207110000001_ascend_pt"
    rank_dir.mkdir(parents=True)
    record = {
        "status": "capturing", "run_id": "r1", "pid": dead, "rank": None, "worker": "vm",
        "backend": "torch-cpu", "device": "cpu", "updated_ns": time.time_ns() - 10**12, "steps": [6, 7],
        "trace": None, "detail": "", "extras": [], "parse": True, "host": os.uname().nodename,
        "export_began": True, "version": 1,
    }  # fmt: skip
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    empty = rank_dir / f".vm_{dead}.1765105200000.pt.trace.json.{dead}-0123456789ab.tmp.tmp"
    empty.touch()
    died = int(time.time()) - 15  # a whole second: the moment said is that and 60 s
    os.utime(empty, (died, died))
    done = npuprof("analyse", str(tmp_path / "out"), env=clean_env())
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and "interrupted capture" in said, said
    sure = time.strftime("%H:%M:%S", time.localtime(died + 60))
    assert "the job may have died as torch began writing its trace" in said, said
    assert f"said for sure after {sure}" in said, said
    assert empty.exists()  # the only proof, kept until then


def test_the_runs_summary_keeps_a_trace_torch_was_writing_when_the_job_died(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """The run's summary at the job's end (its launcher lived on) kept nothing of it: it deleted the part
    written as any dead writer's temporary file; it keeps it for analyse and says so."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    rank_dir = tmp_path / "out" / src.name
    name, text = _died_while_torch_wrote(src, rank_dir, 0.4)
    run_id = json.loads((rank_dir / "npuprof_capture.json").read_text())["run_id"]
    (capture,) = captures_of_run(tmp_path / "out", run_id)
    kept = name.replace(".pt.trace.json", ".cut.pt.trace.json")
    assert capture.status == "incomplete", capture
    # one line: what happened, what was kept, and why its steps are not named yet (the record names its
    # first only); not "the process ended before the capture was finalised" too
    assert capture.detail == (
        f"the job died while its trace was written: the part written kept as {kept} "
        f"({len(text) / 1024:.1f} KiB); `npuprof analyse` reads it up to its last complete event and names "
        "the steps whole in it (its record, never finalised, names its first step only)"
    ), capture.detail
    assert (rank_dir / kept).read_bytes() == text
    assert not [p.name for p in rank_dir.glob(".*.tmp*")]


def test_export_stacks_of_a_rank_dir_whose_job_died_while_torch_wrote_its_trace_reads_it(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """export-stacks given the rank dir before any analyse or summary kept the part written: "has no
    trace"; it reads its complete events as it reads any trace cut short."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    rank_dir = tmp_path / "out" / src.name
    _name, text = _died_while_torch_wrote(src, rank_dir, 0.7)
    done = npuprof("export-stacks", str(rank_dir), "-o", str(tmp_path / "s.folded"), env=clean_env())
    assert done.returncode == 0, done.stderr
    assert f"read the {len(complete_events(text))} complete event(s)" in " ".join(done.stderr.split())
    assert (tmp_path / "s.folded").stat().st_size > 0


def test_memory_timeline_of_a_trace_cut_before_its_memory_events_says_the_cut_took_them(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """Kineto writes the [memory] events in one block after every operator's: a job killed while torch
    wrote the trace of a capture with --profile-memory left none before the cut, and memory-timeline told
    the user to capture with --profile-memory (helper-333's reproduction). It says the cut took them, and
    writes no file."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    (trace,) = src.glob("*.pt.trace.json")
    data = trace.read_bytes()
    assert json.loads(data)["profile_memory"] in (1, True)  # recorded with profile_memory
    first_memory = data.index(b'"[memory]"')
    rank_dir = tmp_path / "out" / src.name
    _name, text = _died_while_torch_wrote(src, rank_dir, first_memory / len(data) * 0.9)
    assert b"[memory]" not in text and complete_events(text)
    out = tmp_path / "memory.json"
    done = npuprof("memory-timeline", str(rank_dir), "-o", str(out), env=clean_env())
    said = " ".join(done.stderr.split())
    assert done.returncode == 1, said
    assert "before its [memory] events" in said and "its capture recorded memory" in said, said
    assert "capture with --profile-memory" not in said, said
    assert not out.exists()


def test_a_cut_trace_with_no_step_whole_is_not_said_to_have_no_profiler_step(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """A trace cut inside its first step's operators (a job killed early in torch's export) has its steps
    all left out, and the text report said under its row "no steps in this trace (no ProfilerStep)", of a
    trace that has two: it says no step is whole in the trace cut short."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    (trace,) = src.glob("*.pt.trace.json")
    data = trace.read_bytes()
    path = tmp_path / "cut.pt.trace.json"
    path.write_bytes(data[: data.index(b'"ProfilerStep#4"') - 2000])  # in step 3's operators
    assert b'"ProfilerStep#3"' in path.read_bytes()
    done = npuprof("analyse", str(path), env=clean_env(COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    assert "no step is whole in this trace cut short: the row is all the events read" in done.stdout
    assert "no ProfilerStep" not in done.stdout, done.stdout


def test_status_of_a_dynamic_capture_whose_process_died_while_torch_wrote_its_trace(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """`npuprof status` said only "capture from step 3 never finished (the process died)" of a --dynamic
    capture killed in torch's export, whose part written the run kept: it says so, and the steps whole in
    it once analyse has read it (before that, that analyse names them: its record names its first only)."""
    from npuprof.cli.status import _processes, render
    from npuprof.job_processes import pid_alive
    from npuprof.results.cut_capture import keep_trace_cut_by_death

    pid = 4194001  # beyond this host's pids: gone
    assert not pid_alive(pid)
    rank_dir = tmp_path / "out" / f"{os.uname().nodename}_{pid}_20261207120000000_ascend_pt"
    _text, whole = _died_in_step_4(torchrun_capture, rank_dir)
    kept, _size = keep_trace_cut_by_death(rank_dir, idle_s=0.0) or ("", 0)  # as the run's summary keeps it
    logs = tmp_path / "cfg" / "log"
    logs.mkdir(parents=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 5)) + ",000"
    (logs / f"dp_{os.uname().nodename}_{pid}_rank_0.log").write_text(
        f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 0] watching it every 2 s\n"
        f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 3] capture started at step 3 into {rank_dir}\n"
    )

    def said() -> str:
        (process,) = _processes(logs)
        table = render({"config": {"file": "f", "start_step": 0}, "processes": [process]})
        return " ".join(table.split())

    before = said()
    assert (
        "capture from step 3 cut short (the job died while its trace was written: the part written kept as "
        f"{kept}, the steps whole in it are named once" in before
    ), before
    done = npuprof("analyse", str(rank_dir), env=clean_env())
    assert done.returncode == 0, done.stderr
    after = said()
    assert (
        f"the part written kept as {kept}, step(s) {whole[0]} whole in it, 4 cut short): {rank_dir}" in after
    ), after


def test_a_trace_cut_after_its_parse_is_parsed_again(torchrun_capture: Path, tmp_path: Path) -> None:
    """A rank dir whose trace was cut after its tables were made (here the part a death kept, parsed, then
    cut shorter: a copy cut, a file written again) kept reporting the tables of the longer trace, its
    events and steps, until --force: analyse.done says the size they were made from, and another size is
    parsed again, said once."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    rank_dir = tmp_path / "out" / src.name
    name, text = _died_while_torch_wrote(src, rank_dir, 0.9)
    kept = rank_dir / name.replace(".pt.trace.json", ".cut.pt.trace.json")
    first = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["ranks"][0]["cut_short"]["events_read"] == len(complete_events(text))
    shorter = text[: len(text) // 2]
    kept.write_bytes(shorter)
    again = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert again.returncode == 0, again.stderr
    (rank,) = json.loads(again.stdout)["ranks"]
    assert rank["cut_short"]["events_read"] == len(complete_events(shorter)), rank["cut_short"]
    said = " ".join(again.stderr.split())
    assert f"its trace {kept.name} is {len(shorter):,} bytes, {len(text):,} when its tables were made" in said
    assert "parsed again" in said
    third = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    (cached,) = json.loads(third.stdout)["ranks"]
    assert (cached["status"], cached["cut_short"]) == ("cached", rank["cut_short"]), cached
    assert "parsed again" not in third.stderr


def test_memory_timeline_of_a_death_in_the_export_says_why_there_are_no_categories(
    torchrun_capture: Path, tmp_path: Path
) -> None:
    """A run with --memory-timeline whose job died while torch wrote its trace never took the categorised
    timeline (it is taken after the trace): memory-timeline of its rank dir told the user to capture with
    --memory-timeline, which the run had. It says the death left none."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    rank_dir = tmp_path / "out" / src.name
    _name, text = _died_while_torch_wrote(src, rank_dir, 0.9)
    assert b'"[memory]"' in text  # some of its [memory] events were written before the cut
    run_id = json.loads((rank_dir / "npuprof_capture.json").read_text())["run_id"]
    config = {"profile_memory": True, "record_shapes": True, "with_stack": True, "memory_timeline": ["json"]}
    record = {"run_id": run_id, "config": config, "end": "2026-12-07T12:00:00+0000", "exit_code": 137}
    (tmp_path / "out" / "npuprof_run.json").write_text(json.dumps(record))
    done = npuprof("memory-timeline", str(rank_dir), "-o", str(tmp_path / "m.json"), env=clean_env())
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert (
        "No categories: the job died while its trace was written, and the categorised timeline its run asked "
        "for (--memory-timeline) is taken after the trace: there is none of this capture." in said
    ), said
    assert "For categories: npuprof run" not in said, said


# A job that dies inside torch's trace export, for real: its file size limit (ulimit -f) with SIGXFSZ's
# default action (Python ignores it) kills the process as torch writes the trace past it; nothing else the
# process writes comes near it. And one killed inside its capture window, before the export.
FILE_LIMIT = 64 << 10
DIES_IN_THE_EXPORT = (
    "import resource, signal\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
    f"resource.setrlimit(resource.RLIMIT_FSIZE, ({FILE_LIMIT}, {FILE_LIMIT}))\n"
)
DIES_RECORDING = (
    "import os, signal, torch\n"
    "model = torch.nn.Linear(16, 4)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
    "for step in range(12):\n"
    "    if step == 8:\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    opt.zero_grad()\n"
    "    model(torch.randn(8, 16)).sum().backward()\n"
    "    opt.step()\n"
)
# One killed as torch begins its export, before it writes a byte: its file size limit set to 0 as the
# export is called, torch's own file (opened, empty) ends the process at its first write.
DIES_BEFORE_A_BYTE = (
    "import resource, signal, torch.profiler\n"
    "export = torch.profiler.profile.export_chrome_trace\n"
    "def export_nothing(self, *args, **kwargs):\n"
    "    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
    "    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))\n"
    "    return export(self, *args, **kwargs)\n"
    "torch.profiler.profile.export_chrome_trace = export_nothing\n"
)
SKIP, WARMUP, ACTIVE = 5, 1, 4


@pytest.fixture(scope="module")
def deaths_run(tmp_path_factory) -> dict:
    """One `npuprof run` of a job whose three training processes (forked_job's scenarios) die: one as torch
    writes its trace (steps 6-9 recorded), one as torch begins it, before it writes a byte, one in step 8
    of its window 6-9; with --export-stacks, --memory-timeline and --export-chrome-trace, which are made
    after the trace."""
    root = tmp_path_factory.mktemp("deaths")
    scenarios = {
        "in-export": DIES_IN_THE_EXPORT + trainer_in_process("--steps", "12"),
        "before-a-byte": DIES_BEFORE_A_BYTE + trainer_in_process("--steps", "12"),
        "recording": DIES_RECORDING,
    }
    command, pids = forked_job(root, scenarios)
    out = root / "out"
    flags = ["--skip-first", str(SKIP), "--warmup", str(WARMUP), "--active", str(ACTIVE)]
    (root / "chrome").mkdir()
    exports = ["--export-stacks", "self_cpu_time_total", "--memory-timeline", "json"]
    exports += ["--export-chrome-trace", str(root / "chrome" / "trace.json")]
    flags += ["--with-stack", "--profile-memory", "--record-shapes", *exports]  # what the exports need
    result = npuprof_run("run", "-o", str(out), *flags, "--", *command, timeout=180)
    by = {name: next(out.glob(f"*_{pid}_*_ascend_pt")) for name, pid in json.loads(pids.read_text()).items()}
    return {"result": result, "out": out, "dirs": by}


def test_the_summary_names_the_steps_of_a_capture_whose_job_died_while_torch_wrote_its_trace(
    deaths_run: dict,
) -> None:
    """The run's summary said `6-?` of a capture whose job died in torch's export, and npuprof_run.json listed
    its first step alone, though the capture had recorded all its steps by then (only the export was cut):
    the record is rewritten with them as the export begins. One that died inside its window still says
    `6-?` (its record names its first step only)."""
    result, out, dirs = deaths_run["result"], deaths_run["out"], deaths_run["dirs"]
    recorded = list(range(SKIP + WARMUP, SKIP + WARMUP + ACTIVE))  # the window asked: 6-9
    (kept,) = dirs["in-export"].glob("*.cut.pt.trace.json")
    assert kept.stat().st_size == FILE_LIMIT, result.stderr  # it died in the write, at the limit
    rows = {
        name: [line.split() for line in result.stderr.splitlines() if d.name in line]
        for name, d in dirs.items()
    }
    assert rows["in-export"][0][:3] == ["-", f"{recorded[0]}-{recorded[-1]}", "incomplete*"], result.stderr
    assert rows["recording"][0][:3] == ["-", f"{recorded[0]}-?", "incomplete*"], result.stderr
    said = " ".join(result.stderr.split())
    assert (
        f"{dirs['in-export'].name}: the job died while its trace was written: the part written kept as "
        f"{kept.name} (64.0 KiB); `npuprof analyse` reads it up to its last complete event and names the "
        "steps whole in it" in said
    ), said
    assert "names its first step only" not in said, said
    (record,) = [p for p in out.glob("npuprof_run*.json")]
    steps = {Path(c["rank_dir"]).name: c["steps"] for c in json.loads(record.read_text())["captures"]}
    expected = {dirs["in-export"].name: recorded, dirs["recording"].name: [recorded[0]]}
    assert steps == {**expected, dirs["before-a-byte"].name: recorded}, steps


def test_the_summary_says_the_exports_of_a_capture_whose_job_died_while_torch_wrote_its_trace_were_not_made(
    deaths_run: dict,
) -> None:
    """The run's summary said nothing of the --export-stacks, --memory-timeline and --export-chrome-trace
    files of a capture whose job died in torch's export, which come after the trace and were never made: its
    one line says so (no warning of its own per file), and npuprof_run.json's detail too. The capture that
    died in its window says nothing of them (its line is that it was never finalised)."""
    result, out, dirs = deaths_run["result"], deaths_run["out"], deaths_run["dirs"]
    assert not list(dirs["in-export"].glob("stacks_*")) and not list(dirs["in-export"].glob("memory_*"))
    assert not list((out.parent / "chrome").iterdir())
    unmade = (
        "its --export-stacks, --memory-timeline and --export-chrome-trace files were never made (they come "
        "after the trace)"
    )
    lines = " ".join(result.stderr.split()).split(" * ")  # the notes under the table, then "next: ..."
    (line,) = [text.split(" next: ")[0] for text in lines if text.startswith(dirs["in-export"].name)]
    assert line.endswith(f"names the steps whole in it; {unmade}"), result.stderr
    said = " ".join(result.stderr.split())
    assert line.count("never made") == 1 and "were not made" not in said, said
    (record,) = list(out.glob("npuprof_run*.json"))
    details = {Path(c["rank_dir"]).name: c["detail"] for c in json.loads(record.read_text())["captures"]}
    assert details[dirs["in-export"].name].endswith(unmade), details
    assert "never made" not in details[dirs["recording"].name], details


def test_the_summary_says_a_job_died_in_its_export_only_where_its_empty_trace_file_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job killed in torch's export before it wrote a byte (its record "capturing" with export_began, the
    trace's temporary file empty, its writer gone) was said "ended before the capture was finalised; its
    empty half-written file(s) removed": the summary now says it died while torch wrote its trace.
    The same record without that file (the export failed for want of a descriptor, EMFILE) keeps its words."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary

    out, dead = tmp_path / "out", 2**22 + 1  # above the kernel's largest pid_max: no process has it
    dirs = {
        how: out / f"vm_{dead}_2026120711000000{k}_ascend_pt" for k, how in enumerate(["killed", "emfile"])
    }
    for rank_dir in dirs.values():
        rank_dir.mkdir(parents=True)
        record = {
            "status": "capturing", "run_id": "r1", "pid": dead, "rank": None, "worker": "vm",
            "backend": "torch-cpu", "device": "cpu", "updated_ns": time.time_ns() - 10**12,
            "steps": [6, 7, 8, 9], "trace": None, "detail": "", "extras": [], "parse": True,
            "host": os.uname().nodename, "export_began": True, "exports_asked": ["--export-stacks"],
            "version": 1,
        }  # fmt: skip
        (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    # torch opened its file under npuprof's temporary name (Kineto's own ".tmp" after it) and died
    empty = dirs["killed"] / f".vm_{dead}.1765105200000.pt.trace.json.{dead}-0123456789ab.tmp.tmp"
    empty.touch()
    captures = captures_of_run(out, "r1")
    print_run_summary(out, captures, 137, ProfileConfig(), out / "npuprof.log", run_id="r1")
    notes = " ".join(capsys.readouterr().err.split()).split(" * ")
    unmade = "its --export-stacks files were never made (they come after the trace)"
    said = {how: [n.split(" next: ")[0] for n in notes if n.startswith(d.name)] for how, d in dirs.items()}
    assert said["killed"] == [
        f"{dirs['killed'].name}: the job died while torch wrote its trace, before any of it was kept: no "
        "trace for steps 6-9; " + unmade
    ], notes
    assert said["emfile"] == [
        f"{dirs['emfile'].name}: the process ended before the capture was finalised; " + unmade
    ], notes
    assert not empty.exists()


def test_a_job_killed_as_torch_began_its_export_is_said_to_have_lost_its_steps(deaths_run: dict) -> None:
    """A job killed in torch's export before torch wrote a byte of the trace (its record "capturing" with
    export_began, torch's file empty under its temporary name, its writer gone): the summary said only that
    it died "before any of it was kept", and `npuprof analyse` afterwards "the process ended before the
    capture was finalised" (the empty file, the only proof, removed by the summary). The record now keeps
    it: the summary, npuprof_run.json and analyse say the job died while torch wrote its trace and which
    steps have no trace."""
    result, out, dirs = deaths_run["result"], deaths_run["out"], deaths_run["dirs"]
    rank_dir = dirs["before-a-byte"]
    recorded = f"{SKIP + WARMUP}-{SKIP + WARMUP + ACTIVE - 1}"  # the window asked: 6-9
    died = "the job died while torch wrote its trace, before any of it was kept: no trace for steps "
    died += recorded
    unmade = (
        "its --export-stacks, --memory-timeline and --export-chrome-trace files were never made (they come "
        "after the trace)"
    )
    row = next(line.split() for line in result.stderr.splitlines() if rank_dir.name in line)  # then its note
    assert row[:3] == ["-", recorded, "incomplete*"], result.stderr
    notes = " ".join(result.stderr.split()).split(" * ")
    (line,) = [text.split(" next: ")[0] for text in notes if text.startswith(rank_dir.name)]
    assert line == f"{rank_dir.name}: {died}; {unmade}", result.stderr
    assert sorted(p.name for p in rank_dir.iterdir()) == ["npuprof_capture.json"]  # the empty file removed
    (record,) = list(out.glob("npuprof_run*.json"))
    details = {Path(c["rank_dir"]).name: c["detail"] for c in json.loads(record.read_text())["captures"]}
    assert details[rank_dir.name] == f"{died}; {unmade}", details
    analysed = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    (problem,) = json.loads(analysed.stdout)["problems"]
    assert (problem["status"], problem["reason"]) == ("incomplete", f"interrupted capture: {died}"), analysed


def test_status_names_the_steps_of_a_capture_whose_process_died_while_torch_wrote_its_trace(
    deaths_run: dict, tmp_path: Path
) -> None:
    """`npuprof status` said "capture from step 6 cut short" of a --dynamic capture whose process died in
    torch's export: its record names the steps recorded now, and status says them; one whose process died
    in its window is still "from step 6" (the records of deaths_run's job, its dynamic log written here as
    the watcher writes it)."""
    from npuprof.cli.status import _processes, render

    dirs = deaths_run["dirs"]
    logs = tmp_path / "cfg" / "log"
    logs.mkdir(parents=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 5)) + ",000"
    first = SKIP + WARMUP
    for rank, rank_dir in enumerate(dirs.values()):
        pid = json.loads((rank_dir / "npuprof_capture.json").read_text())["pid"]
        (logs / f"dp_{os.uname().nodename}_{pid}_rank_{rank}.log").write_text(
            f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 0] watching it every 2 s\n"
            f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step {first}] capture started at step {first} into "
            f"{rank_dir}\n"
        )
    table = render({"config": {"file": "f", "start_step": 0}, "processes": _processes(logs)})
    said = " ".join(table.split())
    (kept,) = dirs["in-export"].glob("*.cut.pt.trace.json")
    last = first + ACTIVE - 1
    assert (
        f"capture of steps {first}-{last} cut short (the job died while its trace was written: the part "
        f"written kept as {kept.name}," in said
    ), said
    lost = "the job died while torch wrote its trace, before any of it was kept: no trace for steps "
    lost += f"{first}-{last}"
    assert f"capture of steps {first}-{last} cut short ({lost}): {dirs['before-a-byte']}" in said, said
    assert f"capture from step {first} never finished (the process died): {dirs['recording']}" in said, said


def test_a_gzipped_trace_cut_after_its_parse_is_parsed_again(torchrun_capture: Path, tmp_path: Path) -> None:
    """The post-processor gzips a trace after its parse, so analyse.done names the plain trace and its size:
    a .gz cut since (a copy of the result tree cut short) was reported from the tables of the whole trace,
    "cached", with no word. Its gzip trailer says the size it holds: one that is not the plain trace's is
    parsed again, said once; the whole .gz stays cached."""
    src = next(d for d in sorted(torchrun_capture.glob("*_ascend_pt")) if list(d.glob("*.pt.trace.json")))
    rank_dir = tmp_path / "out" / src.name
    shutil.copytree(src, rank_dir)
    (plain,) = rank_dir.glob("*.pt.trace.json")
    first = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert first.returncode == 0, first.stderr
    data = plain.read_bytes()
    packed = plain.with_name(plain.name + ".gz")
    with open(packed, "wb") as raw, gzip.GzipFile(filename=plain.name, mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(data)  # as the post-processor gzips it: one member, the plain trace removed after
    plain.unlink()
    whole = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert json.loads(whole.stdout)["ranks"][0]["status"] == "cached", whole.stderr
    cut = packed.read_bytes()[: packed.stat().st_size // 2]
    packed.write_bytes(cut)
    text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut)  # what the cut .gz holds
    again = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert again.returncode == 0, again.stderr
    (rank,) = json.loads(again.stdout)["ranks"]
    assert rank["status"] == "parsed", rank["status"]
    assert rank["cut_short"]["events_read"] == len(complete_events(text)), rank["cut_short"]
    said = " ".join(again.stderr.split())
    assert (
        f"its trace {packed.name} is cut short: its gzip data ends early, after {len(text):,} bytes of text "
        f"(the {len(data):,} bytes of {plain.name} its tables were made from): parsed again" in said
    ), said
    third = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert json.loads(third.stdout)["ranks"][0]["status"] == "cached"
    assert "parsed again" not in third.stderr
