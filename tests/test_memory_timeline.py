"""memory-timeline: in-run export (real torch.profiler captures in subprocesses) and the offline command."""

from __future__ import annotations

import base64
import csv
import gzip
import json
import re
import shutil
import sys
import zlib
from collections import defaultdict
from html import unescape
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _forked_cli import npuprof_from_repo as cli  # stacks_support.cli's commands, forked
from stacks_support import (
    FULL_CAPTURE_ARGS,
    capture,
    captures,
    exports_record,
    full_capture,
    load_trace_json,
    trace_of,
)
from stacks_support import cli as cli_subprocess

from npuprof.agent.capture_exports import memory_timeline_missing_flags
from npuprof.reports import memory_timeline as mt

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_of(html: str) -> bytes:
    match = re.search(r"<img src='data:image/png;base64,([A-Za-z0-9+/=]+)'>", html)
    assert match, html[:500]
    return base64.b64decode(match.group(1))


def _in_unit(size: int) -> str:
    """A size as the plot gives it: in the largest of GiB, MiB, KiB in which it is at least 1."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if size >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{size / 1024:.2f} KiB"


def _allocated_by_us(trace: Path) -> dict[int, int]:
    """The trace's own running total: Total Allocated of the last [memory] event within each epoch µs
    (Kineto's ts are µs after its baseTimeNanoseconds; torch's own timeline is in epoch µs)."""
    opener = gzip.open if trace.name.endswith(".gz") else open
    with opener(trace, "rt") as handle:
        base_ns = json.load(handle)["baseTimeNanoseconds"]
    records = sorted(
        (ev["ts"], ev["args"]["Total Allocated"])
        for ev in load_trace_json(trace)
        if ev.get("name") == "[memory]"
    )
    out: dict[int, int] = {}
    for ts, total in records:
        out[int((base_ns + round(ts * 1000)) / 1000)] = total  # torch's ns -> µs: int(t / 1000), float
    return out


NO_MEMORY_ARGS = ("--no-stack", "--no-memory")


@pytest.fixture(scope="module")
def made() -> None:
    """The two real captures of this module ("full" as full_capture() asks it, "nostack"), made by one
    process that imports torch once (stacks_support.captures: a forked child each); the tests then get each
    from the cache by full_capture() / capture(NAME, ...) as before."""
    captures({"full": FULL_CAPTURE_ARGS, "nostack": NO_MEMORY_ARGS})


# ------------------------------------------------------------------ in the run


def test_in_run_writes_every_format_and_keeps_the_raw_data(made):
    rank_dir = full_capture()
    record = exports_record(rank_dir)
    for name in ("raw.json.gz", "meta.json", "html", "json", "json.gz"):
        assert str(rank_dir / f"memory_timeline.{name}") in record["written"], name
    assert not [m for m in record["log"] if "memory" in m], record["log"]
    # the json is exactly what torch's own export_memory_timeline writes for the same capture
    ours = json.loads((rank_dir / "memory_timeline.json").read_text())
    assert ours == json.loads((rank_dir / "ref_torch_memory.json").read_text())
    assert json.loads(gzip.decompress((rank_dir / "memory_timeline.json.gz").read_bytes())) == ours
    times, sizes = ours
    assert len(times) == len(sizes) > 10 and all(len(row) == len(mt.CATEGORIES) + 1 for row in sizes)
    # categories are real: parameters and optimizer state are there
    assert max(row[1 + mt.CATEGORIES.index("PARAMETER")] for row in sizes) > 0
    assert max(row[1 + mt.CATEGORIES.index("OPTIMIZER_STATE")] for row in sizes) > 0
    # raw round-trips: coalescing the kept raw data gives the same json
    raw = mt.read_raw(rank_dir / mt.RAW_FILE)
    assert {action for _, action, _, _ in raw} <= set(mt.ACTIONS)
    assert list(mt.coalesce(raw)) == ours
    html = (rank_dir / "memory_timeline.html").read_text()
    assert _png_of(html).startswith(PNG_MAGIC)
    assert "Max memory allocated: " in html and "Max memory reserved: n/a" in html
    peak = max(sum(row) for row in sizes)
    assert peak < 1024**3 and f"Max memory allocated: {_in_unit(peak)} ({peak:,} bytes)" in html
    meta = json.loads((rank_dir / mt.META_FILE).read_text())
    assert meta["device"] == "cpu" and meta["max_allocated_bytes"] == max(sum(row) for row in sizes)


def test_analyse_gives_no_reserved_peak_on_the_cpu(made, tmp_path):
    """helper-130: on a CPU capture `npuprof analyse --format json` said memory_peak_reserved_mb 0.0 beside
    an allocated peak of MiBs (reserved below allocated: impossible), while memory-timeline says "reserved:
    n/a" there: the CPU allocator keeps no cache and torch reports its reserved total as 0. Unknown: null."""
    rank_dir = tmp_path / full_capture().name
    shutil.copytree(full_capture(), rank_dir)
    proc = cli("analyse", str(rank_dir), "--format", "json", "--force")
    assert proc.returncode == 0, proc.stderr
    (rank,) = json.loads(proc.stdout)["ranks"]
    assert rank["device"] == "CPU" and rank["memory_peak_mb"] > 0
    assert rank["memory_peak_reserved_mb"] is None
    assert all(s["memory_peak_mb"] > 0 and s["memory_peak_reserved_mb"] is None for s in rank["steps"])
    summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_summary.json").read_text())
    assert summary["memory"]["peak_allocated_mb"] > 0 and summary["memory"]["peak_reserved_mb"] is None


def test_missing_flags_are_named():
    assert memory_timeline_missing_flags(True, True, True, False) == []
    assert memory_timeline_missing_flags(False, True, True, False) == ["--record-shapes"]
    assert memory_timeline_missing_flags(True, False, False, True) == ["--profile-memory", "--with-stack"]
    assert memory_timeline_missing_flags(True, True, False, True, device="npu:0") == []


# ------------------------------------------------------------------ offline


def test_offline_from_kept_raw_data_matches_the_run(made, tmp_path):
    rank_dir = full_capture()
    for suffix in ("json", "json.gz", "raw.json.gz", "html"):
        out = tmp_path / f"memory.{suffix}"
        proc = cli("memory-timeline", str(rank_dir), "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        if suffix == "html":
            assert _png_of(out.read_text()).startswith(PNG_MAGIC)
        else:
            assert out.read_bytes() == (rank_dir / f"memory_timeline.{suffix}").read_bytes(), suffix


def test_offline_from_memory_events_matches_the_trace_totals(made, tmp_path):
    rank_dir = full_capture()
    trace = trace_of(rank_dir)
    out_json, out_raw, out_html = tmp_path / "m.json", tmp_path / "m.raw.json.gz", tmp_path / "m.html"
    for out in (out_json, out_raw, out_html):
        proc = cli("memory-timeline", str(trace), "-o", str(out), "--device", "cpu")
        assert proc.returncode == 0, proc.stderr
        assert "UNKNOWN" in proc.stderr  # says the categories are unknown
    times, sizes = json.loads(out_json.read_text())
    expected = _allocated_by_us(trace)
    assert len(times) == len(expected) > 10
    # on torch's clock: its own export of the same capture is within the same second
    torch_times = json.loads((rank_dir / "ref_torch_memory.json").read_text())[0]
    assert abs(times[-1] - max(torch_times)) < 1_000_000
    unknown = 1 + mt.CATEGORIES.index("UNKNOWN")
    for t, row in zip(times, sizes, strict=True):
        assert sum(row) == row[unknown] == expected[t], t
    raw = json.loads(gzip.decompress(out_raw.read_bytes()))
    assert all(category == mt.UNKNOWN for *_, category in raw)
    assert list(mt.coalesce([tuple(r) for r in raw])) == [times, sizes]
    html = out_html.read_text()
    assert _png_of(html).startswith(PNG_MAGIC)
    peak = max(expected.values())
    assert f"Max memory allocated: {_in_unit(peak)} ({peak:,} bytes)" in html
    assert "allocated before the capture started is missing" in html  # CPU: the totals start with it
    assert "Max memory reserved: " in html and "Categories UNKNOWN" in html


def test_a_trace_given_whose_rank_dir_holds_the_categories_names_them(made, tmp_path):
    """helper-223: the trace of a capture made with --memory-timeline, given itself, was rendered without
    categories (as asked) with a note to capture again with --memory-timeline raw.json.gz, the flags the
    run had; the note now names its rank dir, which holds the categorised timeline."""
    rank_dir = full_capture()
    assert (rank_dir / mt.RAW_FILE).is_file()
    out = tmp_path / "m.json"
    proc = cli("memory-timeline", str(trace_of(rank_dir)), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "UNKNOWN" in proc.stderr and "--memory-timeline raw.json.gz" not in proc.stderr, proc.stderr
    assert f"For categories: npuprof memory-timeline {rank_dir} -o {out} (its rank dir" in " ".join(
        proc.stderr.split()
    )


def test_bad_input_names_what_is_missing(made, tmp_path):
    rank_dir = full_capture()
    wrong = cli("memory-timeline", str(rank_dir), "-o", str(tmp_path / "m.json"), "--device", "cuda:0")
    assert wrong.returncode == 1 and "cuda:0" in wrong.stderr and "holds: cpu" in wrong.stderr
    trace = str(trace_of(rank_dir))
    wrong_trace = cli("memory-timeline", trace, "-o", str(tmp_path / "m.json"), "-d", "npu:1")
    assert wrong_trace.returncode == 1 and "holds: cpu" in wrong_trace.stderr
    for device in ("abc", "cuda:x", "npu:", ""):  # not a device at all: a bad flag, before anything is read
        bad = cli("memory-timeline", str(rank_dir), "-o", str(tmp_path / "m.json"), "--device", device)
        assert bad.returncode == 2 and "give cpu, cuda:N or npu:N" in bad.stderr, (device, bad.stderr)
    suffix = cli("memory-timeline", str(rank_dir), "-o", str(tmp_path / "m.txt"))
    assert suffix.returncode == 2 and ".html, .json, .json.gz or .raw.json.gz" in suffix.stderr
    no_memory = capture("nostack", *NO_MEMORY_ARGS)
    proc = cli("memory-timeline", str(no_memory), "-o", str(tmp_path / "m.json"))
    assert proc.returncode == 1
    assert "--profile-memory --record-shapes --with-stack" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m.json").exists()


def test_a_trace_without_memory_events_asks_for_any_memory_timeline_format(tmp_path):
    # the hint named raw.json.gz as the format that keeps the categories; the run keeps them
    # (memory_timeline.raw.json.gz) beside whichever --memory-timeline formats were asked
    trace = tmp_path / "t.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]}))
    with pytest.raises(mt.MemoryTimelineError) as error:
        mt.from_trace(trace)
    said = str(error.value)
    assert "--profile-memory --record-shapes --with-stack" in said
    assert "raw.json.gz for categories" not in said and "--memory-timeline with any of its formats" in said


def test_without_matplotlib_html_says_how_to_install_and_json_still_works(made, tmp_path):
    blocker = tmp_path / "block"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    rank_dir = full_capture()
    html = cli_subprocess(
        "memory-timeline", str(rank_dir), "-o", str(tmp_path / "m.html"), extra_path=str(blocker)
    )
    assert html.returncode == 1
    assert "pip install 'npuprof[plot]'" in html.stderr
    assert not (tmp_path / "m.html").exists()
    ok = cli_subprocess(
        "memory-timeline", str(rank_dir), "-o", str(tmp_path / "m.json.gz"), extra_path=str(blocker)
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(gzip.decompress((tmp_path / "m.json.gz").read_bytes()))[0]


def test_device_choice_and_listing_from_several_devices(tmp_path):
    # a trace with allocator records of two devices (as a CUDA run has): default is the accelerator
    events = []
    records = [(0, -1, 100, 0), (1, 0, 2048, 4096), (1, 0, 1024, 4096)]
    for i, (dtype, did, total, reserved) in enumerate(records):
        events.append(
            {
                "ph": "i",
                "name": "[memory]",
                "pid": 1,
                "tid": 1,
                "ts": 10.0 + i,
                "args": {
                    "Device Type": dtype,
                    "Device Id": did,
                    "Total Allocated": total,
                    "Total Reserved": reserved,
                    "Bytes": total if i < 2 else -1024,
                },
            }
        )
    trace = tmp_path / "x.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    data = mt.load(trace)
    assert data.device == "cuda:0" and data.devices == ["cuda:0", "cpu"]
    assert data.max_allocated == 2048 and data.max_reserved == 4096
    assert [sum(row) for row in data.coalesce()[1]] == [2048, 1024]
    proc = cli("memory-timeline", str(trace), "-o", str(tmp_path / "m.json"), "--device", "npu:0")
    assert proc.returncode == 1 and "holds: cuda:0, cpu" in proc.stderr
    by_device = defaultdict(list)
    for device in ("cpu", "cuda"):
        by_device[device] = mt.load(trace, device).coalesce()
    assert by_device["cpu"][1][-1][-1] == 100


def test_a_raw_timeline_that_goes_on_in_a_cut_gzip_member_says_the_member_was_cut(tmp_path: Path) -> None:
    """A raw timeline whose JSON went on in a second gzip member cut short was refused with the JSON's
    error alone ("Expecting ',' delimiter"): the note that a member was cut and left out was only kept when
    the JSON read, so nothing said why the file ended there. Whole before the cut member, it reads with
    the note."""
    data = json.dumps([[10 * i, 4096 + i, 64, 1] for i in range(500)]).encode()
    half = len(data) // 2
    cut = gzip.compress(data[half:])
    cut = cut[: len(cut) // 2]
    (tmp_path / "split.raw.json.gz").write_bytes(gzip.compress(data[:half]) + cut)
    with pytest.raises(
        mt.MemoryTimelineError,
        match=r"Expecting .*; \d+ byte\(s\) after the gzip data \(a gzip member cut short\)",
    ):
        mt.read_raw(tmp_path / "split.raw.json.gz")
    (tmp_path / "whole.raw.json.gz").write_bytes(gzip.compress(data) + cut)
    notes: list[str] = []
    assert len(mt.read_raw(tmp_path / "whole.raw.json.gz", notes)) == 500
    assert len(notes) == 1 and "a gzip member cut short" in notes[0]


def _memory_event(ts: int, args: dict) -> dict:
    """A [memory] instant event of process 1's thread 1 at ``ts``, with ``args``."""
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "args": args}


def _bytes_only_trace(path: Path, changes: list[tuple[int, int]], device_type: int = 1) -> Path:
    """[memory] events as torch before 1.10 wrote them: Bytes, no allocator totals; a block's address by
    its size (its free has its allocation's, as torch writes them)."""
    events = [
        _memory_event(
            ts, {"Device Type": device_type, "Device Id": 0, "Bytes": nbytes, "Addr": 0x1000 + abs(nbytes)}
        )
        for ts, nbytes in changes
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_bytes_only_events_whose_frees_take_the_sum_below_zero_start_at_what_they_free(tmp_path):
    """helper-179: a torch < 1.10 trace (Bytes, no allocator totals) that begins with a free of memory
    allocated before the capture (a GPU's caching allocator reports it) summed to -1000, -500, -200 bytes:
    "Max memory allocated: -0.20 KiB (-200 bytes)" and a plot all below its axis (drawn from 0 up). No
    memory is below 0: the sum starts at the least that those frees show was there, and the note says how
    much."""
    changes = [(10, -1000), (20, 500), (30, 300)]
    running, sums = 0, []
    for _ts, nbytes in changes:
        running += nbytes
        sums.append(running)
    lift = -min(0, *sums)
    assert lift == 1000
    data = mt.from_trace(_bytes_only_trace(tmp_path / "old.json", changes))
    _times, sizes = data.coalesce()
    assert [sum(row) for row in sizes] == [value + lift for value in sums] == [0, 500, 800]
    allocated_line, _ = mt.peak_lines(data)
    assert "-" not in allocated_line, allocated_line
    said = mt.source_note(data)
    assert "1,000 bytes" in said and "the sum starts at 0 there" not in said, said
    # a sum that never goes below 0 starts at 0, as before
    data = mt.from_trace(_bytes_only_trace(tmp_path / "up.json", [(10, 4096), (20, -4096)]))
    assert [sum(row) for row in data.coalesce()[1]] == [4096, 0]
    assert "the sum starts at 0 there" in mt.source_note(data)


def test_the_peak_holds_what_the_first_free_shows_was_allocated(tmp_path):
    """helper-179: a capture whose first [memory] event frees 500 bytes, leaving Total Allocated 1000, held
    1500 just before it, inside the capture; nothing later reached more, yet "Max memory allocated" said
    1000. The peak is the most the allocator held in the capture, that moment included."""
    events = [
        _memory_event(ts, {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, "Total Allocated": total})
        for ts, nbytes, total in [(10, -500, 1000), (20, 200, 1200), (30, -1200, 0)]
    ]
    first_bytes, first_total = events[0]["args"]["Bytes"], events[0]["args"]["Total Allocated"]
    expected = max(first_total - first_bytes, *(ev["args"]["Total Allocated"] for ev in events))
    assert expected == 1500
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    data = mt.from_trace(path)
    assert mt.peak_allocated(data) == expected
    assert f"({expected:,} bytes)" in mt.peak_lines(data)[0]


def test_the_plots_time_0_is_the_first_memory_event_and_says_when_that_was(tmp_path):
    """helper-247: the plot's "Time (ms)" counted from its first point without saying which moment that
    was (the capture's start? its first step?), so it could not be set beside the trace. Time 0 is the
    first memory event, named on the page and the axis with its epoch time (UTC); a trace whose times are
    no epoch times names it in the trace's own µs."""
    from datetime import datetime, timedelta, timezone

    base_ns = 1_767_225_600 * 10**9  # Kineto's baseTimeNanoseconds: 2026-01-01 00:00:00 UTC
    events = [
        _memory_event(ts, {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, "Total Allocated": total})
        for ts, nbytes, total in [(1500.25, 4096, 4096), (3000, -4096, 0)]
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"baseTimeNanoseconds": base_ns, "traceEvents": events}))
    first = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=1500)  # µs, as the .json
    epoch_us = base_ns // 1000 + 1500
    said = f"Time 0: the first memory event ({first:%Y-%m-%d %H:%M:%S.%f} UTC, epoch {epoch_us} µs)."
    page = mt.render(mt.from_trace(path), tmp_path / "m.html").read_text()
    assert said in page, page[:600]
    times = json.loads(mt.render(mt.from_trace(path), tmp_path / "m.json").read_text())[0]
    assert times[0] == epoch_us

    path.write_text(json.dumps({"traceEvents": events}))  # no time base: the trace's own clock
    page = unescape(mt.html(mt.from_trace(path)))
    assert "Time 0: the first memory event (at 1,500 µs of the trace's clock)." in page, page[:600]


@pytest.mark.parametrize("device_type", [9, 20])
def test_the_npu_is_one_device_to_analyse_and_memory_timeline(tmp_path, device_type):
    """helper-181: torch_npu's [memory] events carry Device Type 20 (c10's PrivateUse1) from torch_npu 2.1,
    9 (c10's XLA, as which torch_npu registered the NPU) before; analyse named 9 NPU:0 (memory_record.csv,
    as torch_npu writes it) and memory-timeline device9:0. Both name it the NPU, each in its own case."""
    from analyse_support.handmade import write_rank_dir

    from npuprof.analysis.parse import parse_rank_dir

    events = [
        _memory_event(ts, {"Device Type": device_type, "Device Id": 0, "Bytes": b, "Total Allocated": total})
        for ts, b, total in [(10, 512, 512), (20, -512, 0)]
    ]
    rank_dir = write_rank_dir(tmp_path, {"traceEvents": events})
    assert parse_rank_dir(rank_dir, workers=1).ok
    with (rank_dir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").open() as f:
        assert {row["Device Type"] for row in csv.DictReader(f)} == {"NPU:0"}
    data = mt.from_trace(next(rank_dir.glob("*.pt.trace.json")))
    assert data.device == "npu:0" and data.devices == ["npu:0"]


def test_a_device_name_with_dollar_signs_is_drawn_as_text(tmp_path):
    """helper-189: the plot's title drew the device as matplotlib's mathtext when it held two "$": a
    memory_record.csv from someone else naming its device "npu:$\\frac{$" failed `memory-timeline -o
    x.html` with a traceback from inside matplotlib's drawing. The name is plain text now."""
    pytest.importorskip("matplotlib")
    device = "npu:$\\frac{$"
    path = tmp_path / "memory_record.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                         "Total Active(MB)", "Stream Ptr", "Device Type"])  # fmt: skip
        writer.writerows([["PTA", "1000000.000", "1.0", "4.0", "1.0", "", device],
                          ["PTA", "1000010.000", "2.0", "4.0", "2.0", "", device]])  # fmt: skip
    data = mt.from_memory_record(path)
    assert data.device == device
    page = mt.html(data)
    assert _png_of(page).startswith(PNG_MAGIC)
    assert f"<title>Memory Timeline: {device}</title>" in page


def test_memory_events_of_two_processes_in_one_trace_are_summed_not_interleaved(tmp_path):
    """helper-209: a trace holding two processes' [memory] events (traces merged into one) took each
    record's Total Allocated as the device's: each process's allocator counts only its own, so the timeline
    went 64, 8, 128, 16 MiB for processes holding 64 + 8, then 128 + 16 MiB, and its peak said 128 MiB."""
    mib = 1 << 20
    records = [(1, 10, 64, 64), (2, 15, 8, 8), (1, 20, 64, 128), (2, 25, 8, 16)]  # pid, ts, MiB, total MiB
    events = [
        {
            **_memory_event(
                ts, {"Device Type": 0, "Device Id": -1, "Bytes": b * mib, "Total Allocated": t * mib}
            )
        }
        | {"pid": pid, "tid": pid}
        for pid, ts, b, t in records
    ]
    path = tmp_path / "merged.json"
    path.write_text(json.dumps({"traceEvents": events}))
    data = mt.from_trace(path)
    times, sizes = data.coalesce()
    assert times == [10, 15, 20, 25]
    assert [sum(row) // mib for row in sizes] == [64, 72, 136, 144]
    assert mt.peak_allocated(data) == 144 * mib
    assert "2 processes" in mt.source_note(data)


def test_accelerator_totals_of_two_processes_count_what_each_held_before_and_the_reserved_peak(tmp_path):
    """helper-209's sum on an accelerator, whose records carry the allocator's totals (the test above is of
    the CPU's, summed from Bytes): each process counts from what its first record shows it held (its total
    less its Bytes), and the reserved peak is the largest sum, not the last one (a cache emptied since).
    An event whose Device Id is no int (a bool) is left out as unreadable."""
    records = [  # pid, ts, Bytes, Total Allocated, Total Reserved
        (1, 10, 8, 72, 128),  # process 1 held 64 before
        (2, 15, 8, 40, 64),  # process 2 held 32 before
        (1, 20, 64, 136, 256),
        (2, 25, 8, 48, 0),  # its cache emptied
    ]
    events = [
        _memory_event(
            ts,
            {"Device Type": 1, "Device Id": 0, "Bytes": b, "Total Allocated": t, "Total Reserved": r},
        )
        | {"pid": pid, "tid": pid}
        for pid, ts, b, t, r in records
    ]
    events.append(_memory_event(30, {"Device Type": 1, "Device Id": True, "Bytes": 1, "Total Allocated": 1}))
    path = tmp_path / "merged_cuda.json"
    path.write_text(json.dumps({"traceEvents": events}))
    data = mt.from_trace(path)
    assert data.device == "cuda:0" and data.devices == ["cuda:0"]
    times, sizes = data.coalesce()
    assert times == [10, 15, 20, 25]
    # 64 + 32 held before: 72 + 32, 72 + 40, 136 + 40, 136 + 48
    assert [sum(row) for row in sizes] == [104, 112, 176, 184]
    assert mt.peak_allocated(data) == 184
    # reserved: 128, 128 + 64, 256 + 64, 256 + 0
    assert data.max_reserved == 320
    assert data.notes == ["1 [memory] event(s) whose fields are not numbers (a damaged trace?): left out"]


def test_records_of_one_time_listed_out_of_order_follow_their_totals(tmp_path):
    """helper-221: at 20 µs a 100-byte block is freed (total 0) and a 200-byte one allocated (total 200),
    the trace listing the alloc first: the timeline took the free's total as the value at 20 and showed 0
    bytes until 30, the 200-byte block held all that time not drawn. Each record's total less its bytes
    is the total before it: that order is the one that happened, whatever the listing's."""
    records = [(10, 100, 100), (20, 200, 200), (20, -100, 0), (30, -200, 0)]  # ts, Bytes, Total Allocated
    events = [
        _memory_event(ts, {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, "Total Allocated": total})
        for ts, nbytes, total in records
    ]
    path = tmp_path / "t.json"
    for listed in (events, [events[0], events[2], events[1], events[3]]):  # either listing: one timeline
        path.write_text(json.dumps({"traceEvents": listed}))
        data = mt.from_trace(path)
        times, sizes = data.coalesce()
        assert times == [10, 20, 30]
        assert [sum(row) for row in sizes] == [100, 200, 0]
        assert mt.peak_allocated(data) == 200
    # from 100 at 40: a 64-byte block allocated and freed, then 256 allocated; listed 256 first: both the
    # 256 and the 64 start at 100, and only the 64 first takes in every record (ends at 356)
    later = [(40, 256, 356), (40, -64, 100), (40, 64, 164)]
    path.write_text(
        json.dumps(
            {
                "traceEvents": events
                + [
                    _memory_event(
                        ts, {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, "Total Allocated": total}
                    )
                    for ts, nbytes, total in [(35, 100, 100), *later]
                ]
            }
        )
    )
    times, sizes = mt.from_trace(path).coalesce()
    assert (times[-1], sum(sizes[-1])) == (40, 356)


def test_thousands_of_records_of_one_time_are_put_in_order_quickly() -> None:
    """helper-222: the records of one time are chained by their totals (helper-221) by a search that began
    each step's scan of the records starting at a total from the first, used ones included: 20,000 records
    of one time (a trace whose times were rounded, or all set to one) took 3.8 s, 40,000 about 15, growing
    as the square; memory-timeline seemed to hang. The scan starts past the used ones: same order, ms.
    (Its speed is not judged here: a timed test would fail on a slow host, not on slow code.)"""
    import random

    rows, total = [], 0
    for k in range(40_000):
        nbytes = 512 if k % 2 == 0 else -512
        total += nbytes
        rows.append((5.0, total, total, nbytes))
    random.Random(7).shuffle(rows)
    ordered = mt._in_chain_order(rows)
    assert sorted(ordered) == sorted(rows)
    assert all(ordered[k][1] - ordered[k][3] == ordered[k - 1][1] for k in range(1, len(ordered)))


def _categorised_rank_dir(root: Path, devices: list[tuple[int, int]]) -> Path:
    """A rank dir with categorised data and no memory_timeline.meta.json beside it, and a trace whose
    [memory] events are of ``devices`` (Device Type, Device Id), 4096 bytes allocated on each (8192
    reserved)."""
    from analyse_support.handmade import write_rank_dir

    events = [
        _memory_event(
            10 + i,
            {
                "Device Type": kind,
                "Device Id": id_,
                "Bytes": 4096,
                "Total Allocated": 4096,
                "Total Reserved": 8192,
            },
        )
        for i, (kind, id_) in enumerate(devices)
    ]
    rank_dir = write_rank_dir(root, {"traceEvents": events})
    with gzip.open(rank_dir / mt.RAW_FILE, "wt") as raw:
        json.dump([[1000, 2, 4096, 1], [2000, 4, 4096, 1]], raw)
    return rank_dir


def test_categorised_data_without_its_record_says_so_and_takes_the_traces_device(tmp_path: Path) -> None:
    """It said "unknown device" and no more, with the trace's [memory] events of one GPU beside it."""
    data = mt.load(_categorised_rank_dir(tmp_path / "one", [(0, -1), (1, 0)]))  # the CPU's, cuda:0's
    assert data.device == "cuda:0" and data.devices == ["cuda:0"]
    assert (data.max_allocated, data.max_reserved) == (4096, 8192)  # the allocator's peaks, from the trace
    assert data.notes == [
        "memory_timeline.meta.json is missing: read as cuda:0, the trace's [memory] events' device "
        "(--device DEVICE names another)"
    ]
    # two GPUs (and the CPU's events beside them): either GPU may be it
    two = mt.load(_categorised_rank_dir(tmp_path / "two", [(1, 0), (1, 1), (0, -1)]))
    assert two.device == "unknown device" and two.max_allocated is None
    assert two.notes == [
        "memory_timeline.meta.json is missing: the device is unknown, one of the trace's cuda:0, cuda:1, cpu "
        "(--device DEVICE names it)"
    ]
    alone = _categorised_rank_dir(tmp_path / "alone", [(1, 0)])
    next(alone.glob("*.pt.trace.json")).unlink()
    (alone / mt.META_FILE).write_text('{"source": "categorised"}\n')
    data = mt.load(alone)
    assert data.device == "unknown device"
    assert data.notes == [
        "memory_timeline.meta.json names no device: the device is unknown (--device DEVICE names it)"
    ]


def _timeline_into(output: str, rank_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`npuprof memory-timeline RANK_DIR -o OUTPUT` in this process; exits 0."""
    import typer

    from npuprof.cli.memory_timeline import memory_timeline

    monkeypatch.setattr(sys, "argv", ["npuprof", "memory-timeline", str(rank_dir), "-o", output])
    try:
        memory_timeline(str(rank_dir), Path(output), None, None)
    except typer.Exit as exc:
        raise AssertionError(f"exit {exc.exit_code}") from None


def test_a_stream_as_output_is_written_into_as_export_stacks_writes_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o -`, `-o /dev/stdout`, a named pipe and a shell's `-o >(...)` were refused (a FIFO: the file
    would replace it; "-": no format; /dev/fd/63: a symbolic link), where export-stacks writes into them;
    a stream whose name has no suffix gets the .json, the text format."""
    import os
    import threading

    from analyse_support.handmade import write_rank_dir

    events = [
        _memory_event(ts, {"Device Type": 1, "Device Id": 0, "Bytes": 4096, "Total Allocated": total})
        for ts, total in [(10, 4096), (11, 8192)]
    ]
    rank_dir = write_rank_dir(tmp_path, {"traceEvents": events})
    unknown = CATEGORIES_IN_ROWS - 1  # each row: torch's base 0, then the categories, UNKNOWN last
    expected = [[10, 11], [[0] * unknown + [4096], [0] * unknown + [8192]]]

    for name in ("-", "/dev/stdout"):
        _timeline_into(name, rank_dir, monkeypatch)
        assert json.loads(capsys.readouterr().out) == expected, name

    fifo = tmp_path / "memory.json.gz"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    _timeline_into(str(fifo), rank_dir, monkeypatch)
    reader.join(10)
    assert json.loads(gzip.decompress(got[0])) == expected

    read_end, write_end = os.pipe()  # what a shell's >(...) hands over: /dev/fd/63
    with os.fdopen(read_end, "rb") as pipe:
        try:
            _timeline_into(f"/dev/fd/{write_end}", rank_dir, monkeypatch)
        finally:
            os.close(write_end)
        assert json.loads(pipe.read()) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == [rank_dir.name, fifo.name]


def test_a_pipe_whose_reader_stopped_ends_the_command_as_sigpipe_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o >(head -c 10)` whose reader had read enough: "cannot write ...: Broken pipe", exit 1, where
    `-o - | head -c 10` exits 141 quietly; both end as SIGPIPE would now."""
    import os
    import signal

    import typer
    from analyse_support.handmade import write_rank_dir

    from npuprof.cli.memory_timeline import memory_timeline

    events = [_memory_event(10, {"Device Type": 1, "Device Id": 0, "Bytes": 4096, "Total Allocated": 4096})]
    rank_dir = write_rank_dir(tmp_path, {"traceEvents": events})
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone
    output = f"/dev/fd/{write_end}"
    monkeypatch.setattr(sys, "argv", ["npuprof", "memory-timeline", str(rank_dir), "-o", output])
    try:
        with pytest.raises(typer.Exit) as ended:
            memory_timeline(str(rank_dir), Path(output), None, None)
    finally:
        os.close(write_end)
    assert ended.value.exit_code == 128 + signal.SIGPIPE
    assert "Broken pipe" not in capsys.readouterr().err


CATEGORIES_IN_ROWS = 9  # torch's _memory_profiler: a base 0 and its 8 categories


def test_a_capture_whose_snapshot_was_never_written_says_its_categories_are_lost(tmp_path: Path) -> None:
    """torchrun, rank 1 killed -9 one step after a capture made with --profile-memory --record-shapes
    --with-stack --memory-timeline json, its memory snapshot still being copied: memory-timeline of its rank
    dir drew the trace's totals and said "For categories: npuprof run --profile-memory --record-shapes
    --with-stack --memory-timeline raw.json.gz", the flags the capture had."""
    rank_dir = tmp_path / "vm_7_20261206235640213_ascend_pt"
    rank_dir.mkdir()
    _bytes_only_trace(rank_dir / "vm.1796601400240711267.pt.trace.json", [(10, 4096), (20, -4096)])
    record = {"status": "complete", "run_id": "r1", "pid": 7, "steps": [3, 4]}

    def said(extras: list[str]) -> str:
        (rank_dir / "npuprof_capture.json").write_text(json.dumps({**record, "extras": extras}))
        return mt.source_note(mt.load(rank_dir))

    lost = said(["memory_timeline.snapshot.msgpack"])
    assert "never wrote memory_timeline.snapshot.msgpack" in lost and "categories are lost" in lost, lost
    assert "For categories: npuprof run" not in lost, lost
    assert "For categories: npuprof run" in said([])  # a capture made without them
    (rank_dir / "memory_timeline.json").write_text("{}")  # made from the snapshot, which was then removed
    assert "For categories: npuprof run" in said(["memory_timeline.snapshot.msgpack"])


def test_the_count_of_memory_events_written_is_the_traces(tmp_path):
    """helper-313: a CPU capture whose DataLoader freed batch buffers allocated before it had 97 [memory]
    events; memory-timeline said "98 memory events, from the trace", counting the entry it adds for the
    memory held before them. The count is the trace's own."""
    events = [
        _memory_event(ts, {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, "Total Allocated": total})
        for ts, nbytes, total in [(10, -500, 1000), (20, 200, 1200), (30, -1200, 0)]
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "m.json"
    proc = cli("memory-timeline", str(trace), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert f"(cuda:0, {len(events)} memory events, from the trace" in said, said


def test_a_raw_timeline_cut_short_is_read_up_to_its_last_complete_time(made, tmp_path):
    """The run's raw.json.gz cut short (its first and only gzip member; a later member cut short the same)
    was refused whole: "Compressed file ended before the end-of-stream marker was reached". It is read up to
    its last complete event, less the events of the last time read (the cut may have taken others of that
    time), with a warning; cut before any time is whole, one line says there is nothing to read."""
    from test_cut_traces import complete_events  # the complete items of a JSON array's beginning

    whole = gzip.decompress((full_capture() / mt.RAW_FILE).read_bytes())
    events = json.loads(whole)
    assert len(events) > 50 and len({e[0] for e in events}) > 10
    packed, half = gzip.compress(whole, mtime=0), len(whole) // 2
    cuts = {
        "first member": packed[: len(packed) * 2 // 3],
        "second member": gzip.compress(whole[:half], mtime=0) + gzip.compress(whole[half:], mtime=0)[:-20],
    }
    for what, data in cuts.items():
        path = tmp_path / "cut.raw.json.gz"
        path.write_bytes(data)
        text = zlib.decompressobj(31).decompress(data) if what == "first member" else whole[:half]
        complete = complete_events(text)
        want = [e for e in complete if e[0] != complete[-1][0]]
        assert 0 < len(want) < len(events) - 1, what
        out = tmp_path / "out.raw.json.gz"
        proc = cli("memory-timeline", str(path), "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        assert json.loads(gzip.decompress(out.read_bytes())) == want, what
        said = " ".join(proc.stderr.split())
        assert f"the raw timeline is cut short: it ends after {len(text)} bytes" in said, said
        assert f"read the {len(want)} complete event(s) before the cut" in said, said
    path.write_bytes(gzip.compress(whole + bytes(100), mtime=0))  # whole, then NUL bytes: read whole
    out = tmp_path / "padded.raw.json.gz"
    proc = cli("memory-timeline", str(path), "-o", str(out))
    assert proc.returncode == 0 and json.loads(gzip.decompress(out.read_bytes())) == events, proc.stderr
    assert "the 100 NUL bytes after its JSON (a file preallocated?) were ignored" in proc.stderr
    path.write_bytes(gzip.compress(whole[: whole.index(b"]") + 2], mtime=0)[:-8])  # one event, no more
    proc = cli("memory-timeline", str(path), "-o", str(tmp_path / "none.json"))
    assert proc.returncode == 1 and "nothing to read: the raw timeline ends after" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "none.json").exists(), proc.stderr


def test_npuprofs_memory_record_is_not_said_to_miss_what_its_sum_starts_at(tmp_path: Path) -> None:
    """memory-timeline given the memory_record.csv npuprof's parse wrote for a CPU capture said memory from
    before the capture is missing, as for torch_npu's: npuprof's file starts its sum at what the capture's
    frees show was there (docs/formats.md). Told apart by the rank dir's capture record: npuprof's note where
    npuprof wrote the file, the other where torch_npu did (its record's backend, or no record)."""
    rank_dir = tmp_path / "out" / "host_7_20261207120000000_ascend_pt"
    rank_dir.mkdir(parents=True)
    (rank_dir / "npuprof_capture.json").write_text(json.dumps({"status": "complete", "backend": "torch-cpu"}))
    # (ts, Bytes, Addr): the free at 20 is of a block allocated before the capture
    changes = [(10, 4000, 0x10), (20, -3000, 0x20), (30, 500, 0x30), (40, -4000, 0x10)]
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 100}]
    events += [
        _memory_event(ts, {"Device Type": 0, "Device Id": -1, "Bytes": n, "Addr": a}) for ts, n, a in changes
    ]
    (rank_dir / "host.123.pt.trace.json").write_text(json.dumps({"traceEvents": events}))
    assert cli_subprocess("analyse", str(rank_dir.parent), "--format", "json").returncode == 0
    table = rank_dir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv"
    held, running, expected = 3000, 0, []
    for _ts, nbytes, _addr in changes:
        running += nbytes
        expected.append(held + running)
    out = tmp_path / "m.json"
    proc = cli("memory-timeline", str(table), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    _times, sizes = json.loads(out.read_text())
    assert [sum(row) for row in sizes] == pytest.approx(expected, abs=1)  # MB to 6 places: a byte either way
    said = " ".join(proc.stderr.split())
    assert "npuprof's memory_record.csv starts its sum at that" in said, said
    assert "the CPU allocator's totals count from the start of profiling" not in said, said
    # the same file where torch_npu wrote it: a record of a torch_npu capture, or none
    theirs = tmp_path / "theirs" / "host_8_20261207120000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    theirs.mkdir(parents=True)
    shutil.copyfile(table, theirs / "memory_record.csv")
    for record in ({"status": "complete", "backend": "torch_npu"}, None):
        if record is not None:
            (theirs.parent / "npuprof_capture.json").write_text(json.dumps(record))
        else:
            (theirs.parent / "npuprof_capture.json").unlink()
        said = mt.source_note(mt.load(theirs / "memory_record.csv"))
        assert "the CPU allocator's totals count from the start of profiling" in said, (record, said)
        assert "npuprof's memory_record.csv" not in said, (record, said)
