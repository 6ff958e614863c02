"""The streaming trace loader: chunking at any block size, gz, compact JSON, truncation, corruption."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest
from analyse_support.handmade import cuda_trace

from npuprof.analysis import scan as scan_mod
from npuprof.analysis import trace_cut, trace_loader
from npuprof.analysis.synthetic import write_synthetic_trace
from npuprof.analysis.trace_loader import TraceError, TraceReader, load_trace


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "s.pt.trace.json"
    write_synthetic_trace(path, 2)
    return path


def _key(e) -> tuple:
    return (
        e["name"],
        e["ph"],
        e.get("cat", ""),
        e.get("ts", 0.0),
        e.get("dur", 0.0),
        e.get("pid"),
        e.get("tid"),
    )


@pytest.mark.parametrize("block", [300, 4096, 1 << 20])
def test_chunks_match_json_load(synth: Path, block: int) -> None:
    expected = json.loads(synth.read_text())
    reader = TraceReader(synth, block=block)
    events = [e for chunk in reader for e in chunk.events]
    assert [(e.name, e.ph, e.cat, e.ts, e.dur, e.pid, e.tid) for e in events] == [
        _key(e) for e in expected["traceEvents"]
    ]
    assert reader.meta["distributedInfo"] == expected["distributedInfo"]
    assert reader.meta["traceName"] == expected["traceName"]
    kernel = next(e for e in events if e.cat == "kernel")
    assert kernel.args_dict()["grid"] in ([264, 1, 1], [2, 1, 1])


def test_gz_and_compact(tmp_path: Path) -> None:
    trace = cuda_trace()
    path = tmp_path / "c.pt.trace.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump(trace, handle, separators=(",", ":"))
    loaded = load_trace(path)
    assert [e.name for e in loaded.events] == [e["name"] for e in trace["traceEvents"]]
    assert loaded.rank == 0 and loaded.meta["traceName"] == "handmade"
    only_kernels = load_trace(path, keep=lambda e: e.cat == "kernel")
    assert len(only_kernels.events) == 5 and only_kernels.events[0].args_dict()["stream"] == 7


def test_parallel_scan_equals_serial(synth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial, meta, end = scan_mod.scan(synth, workers=1)
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 16)
    parallel, meta2, end2 = scan_mod.scan(synth, workers=3)
    assert (meta, end) == (meta2, end2)
    assert parallel.event_count == serial.event_count
    assert list(parallel.op_ts) == list(serial.op_ts)
    assert [parallel.strings[i] for i in parallel.op_name] == [serial.strings[i] for i in serial.op_name]
    assert list(parallel.dev_dur) == list(serial.dev_dur) and parallel.steps == serial.steps


@pytest.mark.parametrize("cut", [0.5, 0.999])
@pytest.mark.parametrize("gz", [False, True])
def test_truncated(synth: Path, tmp_path: Path, cut: float, gz: bool) -> None:
    """A trace cut short (its text, or its gzip data) is read up to its last complete event, counted here
    with Python's json (docs/formats.md, "Traces cut short"); it was refused whole."""
    import zlib

    from test_cut_traces import complete_events

    data = synth.read_bytes()
    path = tmp_path / ("t.pt.trace.json" + (".gz" if gz else ""))
    if gz:
        packed = gzip.compress(data)[: int(len(gzip.compress(data)) * cut)]
        path.write_bytes(packed)
        text = zlib.decompressobj(31).decompress(packed)
    else:
        text = data[: int(len(data) * cut)]
        path.write_bytes(text)
    trace = load_trace(path)
    assert len(trace.events) == len(complete_events(text)) > 0
    assert trace.cut is not None and trace.cut_note is not None


def test_corrupt(synth: Path, tmp_path: Path) -> None:
    data = bytearray(synth.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 40] = b"@" * 40
    path = tmp_path / "c.pt.trace.json"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert info.value.kind == "corrupt"
    (tmp_path / "n.pt.trace.json").write_text("not json at all")
    with pytest.raises(TraceError):
        load_trace(tmp_path / "n.pt.trace.json")
    with pytest.raises(TraceError) as info:
        load_trace(tmp_path / "absent.pt.trace.json")
    assert info.value.kind == "missing"


def test_typed_fast_path_equals_generic_walk(tmp_path: Path) -> None:
    """Chunks decoded into per-category structs give the same columns as the generic event walk."""
    from npuprof.analysis import communication
    from npuprof.analysis.extract import SCAN_DECODER, TYPED_DECODER, Extract, _Typed

    path = tmp_path / "t.pt.trace.json"
    write_synthetic_trace(path, 3)
    results = []
    for decoder in (TYPED_DECODER, SCAN_DECODER):
        reader = TraceReader(path, block=1 << 18, decoder=decoder, fallback=SCAN_DECODER)
        extract, typed = Extract(), 0
        for chunk in reader:
            typed += isinstance(chunk.events[0], _Typed)
            extract.add_chunk(chunk.events, chunk.text)
        results.append((extract.finish(), typed))
    (fast, typed), (slow, generic) = results
    assert typed > 5 and generic == 0  # the first chunk (metadata events) takes the generic walk
    assert fast.strings == slow.strings and fast.threads == slow.threads and fast.steps == slow.steps
    assert fast.event_count == slow.event_count
    # the fast path keeps only the args communication reads
    assert communication.collect(fast, reader.meta) == communication.collect(slow, reader.meta)
    for name in (
        "op_ts",
        "op_name",
        "op_shapes",
        "op_ext",
        "dev_ts",
        "dev_blocks",
        "launch_corr",
        "mem_addr",
    ):
        assert getattr(fast, name).tolist() == getattr(slow, name).tolist(), name
    assert fast.dev_kind == slow.dev_kind and fast.dev_pid == slow.dev_pid


def test_corrupt_range_of_a_forked_reader(synth: Path, tmp_path: Path, monkeypatch) -> None:
    """Corruption that only a forked worker reads reaches the caller as the same TraceError kind."""
    data = bytearray(synth.read_bytes())
    at = len(data) * 3 // 4  # in the last of three ranges
    data[at : at + 40] = b"@" * 40
    path = tmp_path / "late.pt.trace.json"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError) as serial:
        scan_mod.scan(path, workers=1)
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 16)
    with pytest.raises(TraceError) as info:
        scan_mod.scan(path, workers=3)
    assert info.value.kind == "corrupt"
    assert "late.pt.trace.json" in str(info.value)
    assert str(info.value) == str(serial.value)  # the words of -j 1 (a range that fails is read again)


def test_a_cut_before_damage_further_on_is_the_first_boundary_after_it(synth: Path, tmp_path: Path) -> None:
    """The boundary search judged each "{" by decoding to the end of its 4 MB window: damage 500 KB on made
    every "{" before it fail (and tried the repairs on all of it, each time), so the cut came after the
    damage (a forked scan of such a trace took 30 s, not 0.1, and its first worker read the damaged part).
    A "{" is judged on the bytes after it, and the cut is where the undamaged trace's would be."""
    data = bytearray(synth.read_bytes())
    start = len(data) // 2
    at = start + 500_000
    data[at : at + 40] = b"@" * 40
    damaged = tmp_path / "damaged.pt.trace.json"
    damaged.write_bytes(bytes(data))
    # the first event starting at or after ``start``: the synthetic writer puts each event's "{" alone on a
    # line indented by 2 (deeper objects by more); json reads an event from there
    text = synth.read_text()
    offset = text.index("\n  {\n", start - 3) + 3
    event, _ = json.JSONDecoder().raw_decode(text, offset)
    assert "ph" in event and offset < at
    assert TraceReader(damaged).boundary_after(start, len(data)) == offset


def test_reading_behind_a_decompression_equals_the_plain_scan(tmp_path: Path, monkeypatch) -> None:
    """A .gz trace is read behind its decompression (a forked process), then the rest is split: the
    columns are the same as a plain scan's."""
    from npuprof.analysis import trace_view

    plain = tmp_path / "p.pt.trace.json"
    write_synthetic_trace(plain, 3)
    packed = tmp_path / "p.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1))
    want, want_meta, want_end = scan_mod.scan(plain)
    monkeypatch.setattr(scan_mod, "FOLLOW_STEP", 256 << 10)  # many steps behind the writer
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 16)  # and a split of what is left
    out_path = tmp_path / "out.json"
    with open(out_path, "wb") as out, trace_view.readable(out, packed) as fd:
        growth = trace_view.Decompression(packed, out)
        got, meta, end = scan_mod.scan_behind(packed, fd, growth, workers=2)
        growth.cancel()
    assert out_path.read_bytes() == plain.read_bytes()
    assert (end, meta) == (want_end, want_meta)
    assert got.strings == want.strings and got.threads == want.threads and got.steps == want.steps
    for name in ("op_ts", "op_name", "op_thread", "dev_ts", "dev_name", "mem_ts", "launch_corr"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist(), name


@pytest.mark.parametrize(("damage", "kind"), [("cut", "parsed"), ("garble", "corrupt")])
def test_damaged_gz_through_parse(tmp_path: Path, damage: str, kind: str) -> None:
    from npuprof.analysis.parse import parse_rank_dir

    rank_dir = tmp_path / "host_1_20250101000000000_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "profiler_info_0.json").write_text("{}")
    plain = tmp_path / "p.json"
    write_synthetic_trace(plain, 2)
    data = bytearray(gzip.compress(plain.read_bytes()))
    if damage == "cut":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    (rank_dir / "host_1.pt.trace.json.gz").write_bytes(bytes(data))
    for workers in (1, 2):
        outcome = parse_rank_dir(rank_dir, force=True, workers=workers)
        assert outcome.status == kind, (workers, outcome)
        written = rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        if damage == "cut":  # read up to its last complete event (docs/formats.md, "Traces cut short")
            summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_summary.json").read_text())
            assert any("the trace is cut short" in w for w in summary["warnings"]), summary
            assert isinstance(json.loads(written.read_text()), list)
        else:
            assert not written.exists()


@pytest.mark.parametrize(
    ("name_json", "read_as", "repaired"),
    [
        (r"a\ud800b", "a\ufffdb", 1),  # an unpaired high surrogate (Python's json.dump of a surrogateescape)
        (r"a\udcffb", "a\ufffdb", 1),  # an unpaired low one
        (r"\ud800\ud800\ude00", "\ufffd\U00010200", 1),  # the second high pairs with the low
        (r"\ud83d\ude00 ok", "\U0001f600 ok", 0),  # a pair, as json.dump writes an emoji: untouched
        (r"\\ud800", "\\ud800", 0),  # an escaped backslash, then text
        (r"\\\ud800", "\\\ufffd", 1),  # an escaped backslash, then an unpaired escape
        (r"\\ud800\udc00", "\\ud800\ufffd", 1),  # text that looks like a high one, then a lone low one
    ],
)
def test_strings_msgspec_refuses_are_read_as_pythons_json_reads_them(
    tmp_path: Path, name_json: str, read_as: str, repaired: int
) -> None:
    """helper-120: a trace with an unpaired surrogate escape (valid JSON: Python's json reads it) was refused
    whole, "malformed JSON at byte N": msgspec says "truncated" of it. Bytes that are not UTF-8 too."""
    trace = cuda_trace()
    trace["traceEvents"].append(
        {"ph": "X", "cat": "cpu_op", "name": "MARK", "pid": 1, "tid": 1, "ts": 9, "dur": 1}
    )
    body = json.dumps(trace)
    path = tmp_path / "t.json"
    path.write_text(body.replace('"MARK"', f'"{name_json}"'))
    python_reads = json.loads(path.read_text())["traceEvents"][-1]["name"]  # valid JSON to Python
    reader = TraceReader(path, block=300)
    events = [e for chunk in reader for e in chunk.events]
    assert len(events) == len(trace["traceEvents"])
    assert events[-1].name == read_as
    assert reader.repaired_strings == repaired
    if not repaired:
        assert python_reads == read_as

    path.write_bytes(body.replace('"MARK"', '"a\\u00e9@@b"').encode().replace(b"@@", b"\xff\xfe"))
    reader = TraceReader(path, block=300)
    events = [e for chunk in reader for e in chunk.events]
    assert events[-1].name == "a\u00e9??b" and reader.repaired_strings == 2


def _every_event_with(body: str, marker: str, name_json: str) -> bytes:
    return body.replace(f'"{marker}', f'"{name_json}').encode()


def test_a_surrogate_escape_in_every_event_costs_no_boundary_and_no_reader(tmp_path: Path) -> None:
    """helper-123: with an unpaired surrogate escape in every event (a torch_npu trace_view.json of a script
    in a directory whose name is not UTF-8: Python's json.dump writes "\\udcXX"), the forked readers' split
    found no event boundary (msgspec stops at the escape; 96 s against 5 s for 208 MB), and one with "},{"
    inside its strings was refused as malformed JSON at the escape."""
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"aten::op{k}",
            "pid": 1,
            "tid": 1,
            "ts": k,
            "dur": 1,
            "args": {"note": "x},{y"},
        }
        for k in range(3000)
    ]
    body = json.dumps({"traceEvents": events})
    path = tmp_path / "t.json"
    path.write_bytes(_every_event_with(body, "aten::op", r"aten\udc00op"))
    reader = TraceReader(path, block=4096)
    start, end = reader.region()
    middle = reader.boundary_after(start + (end - start) // 2, end)
    assert middle < end and path.read_bytes()[middle : middle + 7] == b'{"ph": '
    read = [e for chunk in TraceReader(path, block=4096) for e in chunk.events]
    assert len(read) == 3000 and reader.repaired_strings == 0  # the boundary check repairs nothing it reads
    assert read[5].name == "aten\ufffdop5"


def test_keys_around_the_events_with_bytes_that_are_not_utf8_are_read(tmp_path: Path) -> None:
    """helper-123: a host name or an output path (Kineto's traceName) of bytes that are not UTF-8, before or
    after traceEvents: "cannot decode the keys" or even "truncated"."""
    trace = cuda_trace()
    trace["host_name"] = "MARK1"
    trace["traceName"] = "MARK2"
    body = json.dumps(trace)
    assert body.index('"traceName"') > body.index('"traceEvents"')  # a key after the events, as Kineto's
    path = tmp_path / "t.json"
    path.write_bytes(body.replace("MARK1", r"h\udcffst").encode().replace(b"MARK2", b"/tmp/r\xff/t.json"))
    loaded = load_trace(path)
    assert loaded.meta["host_name"] == "h\ufffdst" and loaded.meta["traceName"] == "/tmp/r?/t.json"
    assert len(loaded.events) == len(trace["traceEvents"])


def test_json_malformed_beside_a_surrogate_is_said_where_it_is_malformed(tmp_path: Path) -> None:
    """helper-123: a missing comma after an event with an unpaired surrogate escape was reported at the
    escape's byte, not at the comma's."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{k}", "pid": 1, "tid": 1, "ts": k, "dur": 1}
        for k in range(50)
    ]
    events[10]["name"] = "MARK"
    text = json.dumps({"traceEvents": events}).replace('"MARK"', r'"bad\ud800"')
    cut = text.index('{"ph"', text.index(r"bad\ud800"))  # the next event: its comma dropped
    text = text[: cut - 2] + " " + text[cut:]
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert f"malformed JSON at byte {cut - 1}" in str(caught.value) or f"at byte {cut}" in str(
        caught.value
    ), str(caught.value)


def _members_with_tail(tail: str) -> tuple[bytes, bytes, int]:
    """(the hand-made CUDA trace's text, that text gzipped with ``tail`` after its member, the tail's size):
    garbage, zero padding, a second member cut short, a second member whose data is damaged."""
    text = json.dumps(cuda_trace()).encode()
    extra = gzip.compress(b'{"more": "of something else"}' * 40)
    after = {
        "garbage": b"garbage copied after the member\n",
        "zeros": b"\0" * 4096,
        "cut member": extra[: len(extra) // 2],
        "damaged member": extra[:10] + b"\xff" * 64 + extra[74:],
    }[tail]
    return text, gzip.compress(text) + after, len(after)


def _rank_dir_holding(tmp_path: Path, packed: bytes) -> Path:
    """A rank dir whose raw trace is the gzipped ``packed``."""
    rank_dir = tmp_path / "host_1_20250101000000000_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "profiler_info_0.json").write_text("{}")
    (rank_dir / "host_1.pt.trace.json.gz").write_bytes(packed)
    return rank_dir


@pytest.mark.parametrize(
    ("tail", "what"),
    [
        ("garbage", "not gzip data"),
        ("zeros", "zero padding"),
        ("cut member", "a gzip member cut short"),
        ("damaged member", "a damaged gzip member"),
    ],
)
def test_gz_with_bytes_after_its_data_is_read_with_one_note(tmp_path: Path, tail: str, what: str) -> None:
    """helper-145: a gzipped trace with bytes after its member (a copy padded or with garbage, a second
    member cut short) was refused whole ("Not a gzipped file (b'ga')", "ended before the end-of-stream
    marker") by analyse, export-stacks and memory-timeline, whose complete member holds the whole trace.
    Each reader now reads it as the same trace without the tail, and says in one line what it left out."""
    from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir
    from npuprof.analysis.trace_loader import sniff_trace
    from npuprof.reports import memory_timeline

    text, packed, size = _members_with_tail(tail)
    note = f"{size} byte(s) after the gzip data ({what}) were ignored"
    plain = tmp_path / "plain.json"
    plain.write_bytes(text)
    path = tmp_path / "t.pt.trace.json.gz"
    path.write_bytes(packed)
    assert sniff_trace(path) == "kineto"  # a trace smaller than the sniff's 64 KB: the tail is read too
    # export-stacks and memory-timeline: load_trace
    whole, got = load_trace(plain), load_trace(path)
    assert got.events == whole.events and got.meta == whole.meta
    assert whole.gzip_note is None and got.gzip_note is not None and note in got.gzip_note
    # analyse: decompressed into a private file, read behind the decompression with -j 2
    rank_dir = _rank_dir_holding(tmp_path, packed)
    for workers in (1, 2):
        outcome = parse_rank_dir(rank_dir, force=True, workers=workers)
        assert outcome.status == "parsed", (workers, outcome)
        summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).read_text())
        assert [w for w in summary["warnings"] if note in w], summary["warnings"]
    # memory-timeline of a raw timeline torch wrote (.raw.json.gz)
    raw = [[1, 0, 4096, 1], [2, 2, 4096, 1]]
    raw_path = tmp_path / "m.raw.json.gz"
    raw_path.write_bytes(gzip.compress(json.dumps(raw).encode()) + packed[-size:])
    notes: list[str] = []
    assert memory_timeline.read_raw(raw_path, notes) == [tuple(r) for r in raw]
    assert len(notes) == 1 and note in notes[0]


def test_gz_whose_text_goes_on_in_a_cut_member_is_truncated(tmp_path: Path) -> None:
    """helper-145: a member cut short is never read as complete. A trace gzipped in two members whose
    second one is cut is read as a trace cut short where the first ends (the second left out), for every
    reader, and the warnings say that a member was cut and where the trace was."""
    from npuprof.analysis.parse import parse_rank_dir

    text = json.dumps(cuda_trace()).encode()
    second = gzip.compress(text[len(text) // 2 :])
    packed = gzip.compress(text[: len(text) // 2]) + second[: len(second) // 2]
    path = tmp_path / "t.pt.trace.json.gz"
    path.write_bytes(packed)
    from test_cut_traces import complete_events

    trace = load_trace(path)
    assert "a gzip member cut short" in (trace.gzip_note or "") and trace.cut is not None
    assert len(trace.events) == len(complete_events(text[: len(text) // 2]))
    rank_dir = _rank_dir_holding(tmp_path, packed)
    for workers in (1, 2):
        outcome = parse_rank_dir(rank_dir, force=True, workers=workers)
        assert outcome.status == "parsed", (workers, outcome)
        summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_summary.json").read_text())
        said = " ".join(summary["warnings"])
        assert "a gzip member cut short" in said and "the trace is cut short" in said, (workers, said)
    # the first member cut short: read as far as it goes
    path.write_bytes(gzip.compress(text)[:-20])
    trace = load_trace(path)
    assert "the gzip data ends early" in (trace.gzip_note or "")


def _with_a_long_string(synth: Path, path: Path, value: str | list, share: float = 1 / 3) -> tuple[int, int]:
    """``synth`` with one more event, a record_function whose arg holds ``value`` (over 64 KiB of
    ``{...}, {...}``: a string, or a list, _PHASED), put after ``share`` of the events' bytes (a third:
    where a split of the events in three makes its first cut, far from the file's end, which a reader looks
    back at); (the string's first and last byte, as written)."""
    text = synth.read_text()
    events = text.index("[", text.index('"traceEvents"')) + 1
    closing = text.rindex("]")
    at = text.index("\n  {\n", events + int((closing - events) * share)) + 3  # an event starts there
    after, _ = json.JSONDecoder().raw_decode(text, at)
    event = {"ph": "X", "cat": "user_annotation", "name": "meta", "ts": after["ts"], "dur": 1.0}
    added = json.dumps({**event, "pid": after["pid"], "tid": after["tid"], "args": {"meta": value}})
    path.write_text(text[:at] + added + ",\n  " + text[at:])
    written = json.dumps(value)[1:-1]  # as JSON writes it (quotes escaped)
    first = at + added.index(written[:16])
    return first, first + len(written.encode()) - 1


# a list of objects in an arg, each with a "ph" as an event has, longer than the 64 KiB the boundary search
# reads after a "{": where a split lands in it, the search takes an object of it for an event when the list
# is also longer than the search reads on for its "]" (trace_loader.READ_ON, 1 MiB: the tests below make it
# 64 KiB, so that this list of 450 KB stands for one of MBs; a shorter one is passed over:
# test_trace_reader_hostile.py)
_PHASED = [{"ph": "X", "name": f"n{i}", "ts": i, "dur": 1} for i in range(10_000)]


def _reading_on_no_further(monkeypatch: pytest.MonkeyPatch) -> None:
    from npuprof.analysis import trace_loader

    monkeypatch.setattr(trace_loader, "READ_ON", 1 << 16)


def test_a_string_of_objects_where_a_split_lands_is_read_as_one_reader_reads_it(
    synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A string of "{}, {}, ..." (valid JSON) longer than the 64 KiB that the boundary search decodes after
    a "{" to judge it made that search cut inside the string: with -j 3 the first range ended there and a
    whole trace was refused ("undecodable events ... (corrupt trace)"). Each range but the last must end
    where an event ends, read as it is; when one does not, the trace is read again by one reader: the
    columns are -j 1's. (Such a string no longer takes the search, which passes over "{}": a list of
    objects with a "ph" in an arg, _PHASED, still does.)"""
    _reading_on_no_further(monkeypatch)
    path = tmp_path / "long.pt.trace.json"
    first, last = _with_a_long_string(synth, path, _PHASED)
    start, end = TraceReader(path).region()
    guessed = TraceReader(path).boundary_after(start + (end - start) // 3, end)
    assert first < guessed < last  # the case: the search's guess lies inside the string
    events = json.loads(path.read_bytes())["traceEvents"]
    serial, meta, events_end = scan_mod.scan(path, workers=1)
    assert serial.event_count == len(events)
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 16)
    parallel, meta2, events_end2 = scan_mod.scan(path, workers=3)
    assert (meta2, events_end2) == (meta, events_end)
    assert parallel.event_count == serial.event_count and parallel.steps == serial.steps
    assert [parallel.strings[i] for i in parallel.op_name] == [serial.strings[i] for i in serial.op_name]
    assert list(parallel.op_ts) == list(serial.op_ts) and list(parallel.dev_dur) == list(serial.dev_dur)


def test_a_split_that_lands_in_a_string_of_empty_objects_is_after_it_and_read_once(
    synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The boundary search took a "{" of a string of "{}, {}, ..." more than 64 KiB from its end for an
    event's start (what it reads after it is objects): -j N then cut inside the string and read the whole
    trace again by one reader. No event is an empty object: the split is the event after the string, the
    trace read once, its events Python's json's at every -j."""
    path = tmp_path / "empty.pt.trace.json"
    _first, last = _with_a_long_string(synth, path, ", ".join(["{}"] * 100_000))
    data = path.read_bytes()
    after = data.index(b"{", last)  # the event after the string's
    start, end = TraceReader(path).region()
    assert TraceReader(path).boundary_after(start + (end - start) // 3, end) == after
    want = json.loads(data)["traceEvents"]
    scans = []
    scan_ranges = scan_mod._scan_ranges
    monkeypatch.setattr(scan_mod, "_scan_ranges", lambda *a, **k: scans.append(a[5]) or scan_ranges(*a, **k))
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 16)
    for workers in (1, 2, 3):
        scans.clear()
        extract, _meta, _end = scan_mod.scan(path, workers=workers)
        assert scans == [workers], (workers, scans)  # read once: no read again by one reader
        assert extract.event_count == len(want), workers
        names = [extract.strings[i] for i in extract.op_name]
        assert names == [e["name"] for e in want if e.get("cat") == "cpu_op" and e["ph"] == "X"], workers


def test_a_trace_split_inside_a_string_is_analysed_as_by_one_process(
    synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole parse of the trace above (the scan split in three, trace_view.json written by two
    processes) writes the same files, byte for byte, as a parse by one process; it was not analysed."""
    from npuprof.analysis import trace_body
    from npuprof.analysis.parse import parse_rank_dir

    _reading_on_no_further(monkeypatch)
    trace = tmp_path / "long.pt.trace.json"
    _with_a_long_string(synth, trace, _PHASED)
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 16)
    monkeypatch.setattr(trace_body, "MIN_SPLIT", 1 << 16)
    split_point, cuts = trace_body.split_point, []
    monkeypatch.setattr(trace_body, "split_point", lambda *a: cuts.append(split_point(*a)) or cuts[-1])
    outs = []
    for workers in (1, 3):
        rank_dir = tmp_path / f"j{workers}" / "host_1_20250101000000000_ascend_pt"
        rank_dir.mkdir(parents=True)
        (rank_dir / "profiler_info_0.json").write_text("{}")
        os.link(trace, rank_dir / trace.name)
        outcome = parse_rank_dir(rank_dir, workers=workers)
        assert outcome.status == "parsed", outcome.reason
        outs.append(rank_dir / "ASCEND_PROFILER_OUTPUT")
    one, three = outs
    assert cuts[-1] is not None  # the -j 3 parse wrote trace_view.json in two halves
    names = sorted(p.name for p in one.iterdir())
    assert "trace_view.json" in names and names == sorted(p.name for p in three.iterdir())
    for name in names:
        assert (one / name).read_bytes() == (three / name).read_bytes(), name


# strings of "{...}, {...}" (JSON in a record_function's arg, a tool's metadata): as they are, and with the
# quotes escaped, as JSON text in a string is written
_OBJECTS = {
    "empty": ", ".join(["{}"] * 250_000),
    "quoted": ", ".join(json.dumps({"a": i}) for i in range(100_000)),
}


class _Work:
    """What a read costs, counted apart from what it reads: the bytes given to msgspec's decoders and to the
    repairs of ``analysis/trace_repairs.py`` (each a pass over them), and the Python calls made (a step for
    each "},{" looked at shows as one). ``decoder``: the reader's, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = self.calls = 0
        for module in (trace_loader, trace_cut):
            for name in ("repaired_strings", "repaired_values", "repaired_names"):
                monkeypatch.setattr(module, name, self._counted(getattr(module, name)))
            monkeypatch.setattr(module, "_RAW_EVENTS", self._Decoder(module._RAW_EVENTS, self))
        self.decoder = self._Decoder(trace_loader._DECODER, self)

    def _counted(self, repair):
        def counted(text):
            self.bytes += len(text)
            return repair(text)

        return counted

    class _Decoder:
        def __init__(self, decoder, work: _Work) -> None:
            self.decoder, self.work = decoder, work

        def decode(self, text):
            self.work.bytes += len(text)
            return self.decoder.decode(text)

    def _call(self, frame, event, arg) -> None:
        self.calls += 1

    def __enter__(self) -> _Work:
        sys.setprofile(self._call)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)


@pytest.mark.parametrize("kind", sorted(_OBJECTS))
def test_a_string_of_a_megabyte_of_objects_is_read_in_a_few_passes(
    synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The chunk splitter tried each "},{" of such a string as an event's end, 8 for each block read, each
    try a pass over all the text it held (the decode and the repairs), and looked for each one with a
    Python step per "},{" of the last MB: a 4 MB string in a 6 MB trace took 5 s to read (here, at 64 KiB
    blocks: 100 to 200 passes over the trace's bytes, 35 to 60 million calls). Its events are Python's
    json's, read in a few passes."""
    path = tmp_path / "objects.pt.trace.json"
    _with_a_long_string(synth, path, _OBJECTS[kind])
    want = json.loads(path.read_bytes())["traceEvents"]
    work = _Work(monkeypatch)
    with work:
        events = [e for chunk in TraceReader(path, block=1 << 16, decoder=work.decoder) for e in chunk.events]
    assert [(e.name, e.ph, e.cat, e.ts, e.dur, e.pid, e.tid) for e in events] == [_key(e) for e in want]
    assert work.bytes < 10 * path.stat().st_size and work.calls < 100_000, (work.bytes, work.calls)


@pytest.mark.parametrize("kind", sorted(_OBJECTS))
def test_the_search_for_an_events_start_near_the_end_of_such_a_string_reads_a_few_passes(
    synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The search for an event boundary (where -j N splits the trace) judged each "{" of the string's last
    64 KiB on the 64 KiB after it, the repairs made on all of it: started 60,000 bytes before the string's
    end, it took 9 to 20 s (0.7 to 3 GB given to the decoders and the repairs); from inside a string of
    escaped quotes, where each "{" is refused at once, each cost the repairs of 64 KiB: a -j 3 read of
    this trace took minutes. It finds the first event after the string, from a few MB of work, and -j N
    reads the trace as -j 1 does."""
    path = tmp_path / "objects.pt.trace.json"
    _first, last = _with_a_long_string(synth, path, _OBJECTS[kind])
    data = path.read_bytes()
    after = data.index(b"{", last)  # the event after the string's: '"}}, {' (Python's json wrote it)
    assert json.JSONDecoder().raw_decode(data[after:].decode())[0]["ph"]
    _start, end = TraceReader(path).region()
    work = _Work(monkeypatch)
    with work:
        assert TraceReader(path).boundary_after(last - 60_000, end) == after
    assert work.bytes < 16 << 20 and work.calls < 400_000, (work.bytes, work.calls)
    work.bytes = 0
    with work:  # from inside the string: its "{"s up to 64 KiB from its end pass for events' (the case)
        guessed = TraceReader(path).boundary_after(last - (1 << 20), end)
    assert guessed == after or last - (1 << 20) <= guessed < last - 60_000, guessed
    assert work.bytes < 64 << 20, work.bytes
    # -j N splits it there: the events are Python's json's, as -j 1 reads them
    want = json.loads(data)["traceEvents"]
    monkeypatch.setattr(scan_mod, "MIN_PER_WORKER", 1 << 16)
    for workers in (1, 2, 3):
        extract, _meta, _end = scan_mod.scan(path, workers=workers)
        assert extract.event_count == len(want), workers
        names = [extract.strings[i] for i in extract.op_name]
        assert names == [e["name"] for e in want if e.get("cat") == "cpu_op" and e["ph"] == "X"], workers


class _Written:
    """A decompression (trace_view.Decompression) whose output is all there, seen as growing to it."""

    def __init__(self, size: int) -> None:
        self.size, self.done, self.note = size, False, None

    def wait_for(self, want: int) -> int:
        self.done = want >= self.size
        return min(want, self.size)

    def join(self) -> None:
        self.done = True


def test_reading_behind_a_decompression_cut_inside_a_string_reads_as_one_reader(
    synth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading behind a .gz trace's decompression cut its first step at the first boundary the search
    takes, inside the first event's string of "{}, {}, ...": the whole trace was refused. The columns are
    a plain scan's."""
    _reading_on_no_further(monkeypatch)
    path = tmp_path / "first.pt.trace.json"
    first, last = _with_a_long_string(synth, path, _PHASED, share=0)  # a string of "{}" takes no search now
    start, end = TraceReader(path).region()
    assert first < TraceReader(path).boundary_after(start, end) < last  # the case
    want, want_meta, want_end = scan_mod.scan(path)
    monkeypatch.setattr(scan_mod, "FOLLOW_STEP", 1 << 20)  # a step behind the writer before its end
    with open(path, "rb") as plain:
        got, meta, got_end = scan_mod.scan_behind(path, plain.fileno(), _Written(path.stat().st_size), 2)
    assert (got_end, meta) == (want_end, want_meta)
    assert got.event_count == want.event_count == len(json.loads(path.read_bytes())["traceEvents"])
    assert [got.strings[i] for i in got.op_name] == [want.strings[i] for i in want.op_name]
    assert list(got.op_ts) == list(want.op_ts) and got.steps == want.steps
