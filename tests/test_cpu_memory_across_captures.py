"""helper-215: CPU memory figures of a process's later captures. torch's CPU totals (c10's
ProfiledCPUMemoryReporter) keep each block allocated while a profiler recorded until its free is seen while
one records: a block of an earlier capture freed between two captures stays in the totals for good. A job
captured 43 times (``--repeat 0 --active 1``) showed the same step at 3.6 MB in its first capture and 50.7
MB in its last, in `npuprof analyse`, memory-timeline from the trace and the categorised timeline's "Max
memory allocated" (53 MB, its plot peaking at 12.7 MiB): a leak the job does not have. On the CPU the
figures are the capture's own changes, summed (from the least its frees show was there)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from analyse_support.handmade import cpu_trace, mem, write_rank_dir, x

from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir

MiB = 1 << 20
STALE = 50 * MiB  # blocks of earlier captures freed between captures, still in torch's totals
# (ts, Bytes) of the capture: 1 MiB allocated in step 1 and freed, 2 MiB in step 2 and freed
CHANGES = [(100, MiB), (200, -MiB), (1100, 2 * MiB), (1200, -2 * MiB)]


def _cpu_events() -> list[dict]:
    events, total = [], STALE
    for ts, nbytes in CHANGES:
        total += nbytes
        # a block's address by its size: its free has its allocation's, as torch writes them
        event = mem(ts, nbytes, total, 0x1000 + abs(nbytes))
        event["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        events.append(event)
    return events


def _timeline_of(tmp_path: Path, events: list[dict]) -> Any:
    """memory-timeline's data read from a trace of ``events`` alone."""
    from npuprof.reports import memory_timeline as mt

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return mt.from_trace(path)


def _parsed_with(tmp_path: Path, events: list[dict]) -> Path:
    """cpu_trace() with ``events`` in place of its [memory] events, written as a rank dir and parsed: its
    tables folder."""
    trace = cpu_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("name") != "[memory]"] + events
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, workers=1).ok
    return rank_dir / "ASCEND_PROFILER_OUTPUT"


def test_analyse_leaves_out_what_torch_kept_of_earlier_captures(tmp_path: Path) -> None:
    out = _parsed_with(tmp_path, [x("ProfilerStep#8", "user_annotation", 1000, 1000), *_cpu_events()])
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["memory"]["peak_allocated_mb"] == 2.0, summary["memory"]
    assert [(s["step"], s["memory_peak_mb"]) for s in summary["steps"]] == [(7, 1.0), (8, 2.0)]
    with (out / "memory_record.csv").open() as f:
        assert [float(r["Total Allocated(MB)"]) for r in csv.DictReader(f)] == [1.0, 0.0, 2.0, 0.0]


def test_memory_timeline_from_the_trace_and_the_categorised_peak_leave_it_out_too(tmp_path: Path) -> None:
    from npuprof.reports import memory_timeline as mt
    from npuprof.reports.memory_categories import _peaks

    data = _timeline_of(tmp_path, _cpu_events())
    assert data.device == "cpu"
    assert [sum(row) for row in data.coalesce()[1]] == [MiB, 0, 2 * MiB, 0]
    assert mt.peak_allocated(data) == 2 * MiB

    # the snapshot's allocation rows: (kind, parent, ts, id, ptr, allocation id, bytes, device, total
    # allocated, total reserved)
    rows, total = [], STALE
    for ts, nbytes in CHANGES:
        total += nbytes
        # a block's address by its size: its free has its allocation's, as torch writes them
        rows.append([2, -1, ts, 0, 0x1000 + abs(nbytes), ts, nbytes, "cpu", total, 0])
    assert _peaks(rows, "cpu") == (2 * MiB, None)
    # a capture whose first change frees a block of the capture before (still in torch's totals): it held
    # that block when it began
    assert _peaks([[2, -1, 5, 0, 8, 1, -3 * MiB, "cpu", STALE, 0], *rows], "cpu") == (3 * MiB, None)


def test_a_block_allocated_and_freed_in_one_microsecond_lifts_nothing(tmp_path: Path) -> None:
    """helper-221: a 3 MiB block allocated and freed at the same µs (150), the free listed first (as a sort
    by bytes put it, or a trace's order): the sum dipped to -2 MiB there, so the capture "started at 2 MiB"
    and every figure after was 2 MiB too high (analyse: step 8 at 4 MiB for its 2, memory_record.csv 2 MiB
    at the end for 0; memory-timeline too, for any listing). A free comes after its allocation: at one
    time allocations go first, the least the frees show was there (here nothing)."""
    from npuprof.reports import memory_timeline as mt

    events, out, summary = _parsed_with_records_at_150(tmp_path, ((-3 * MiB, 0x9000), (3 * MiB, 0x9000)))
    assert summary["memory"]["peak_allocated_mb"] == 4.0, summary["memory"]  # 1 MiB + the block
    assert [(s["step"], s["memory_peak_mb"]) for s in summary["steps"]] == [(7, 4.0), (8, 2.0)]
    with (out / "memory_record.csv").open() as f:
        assert [float(r["Total Allocated(MB)"]) for r in csv.DictReader(f)] == [1.0, 4.0, 1.0, 0.0, 2.0, 0.0]
    for listed in (events, [events[0], events[2], events[1], *events[3:]]):
        data = _timeline_of(tmp_path, listed)
        assert [sum(row) for row in data.coalesce()[1]] == [MiB, MiB, 0, 2 * MiB, 0]
        assert mt.peak_allocated(data) == 4 * MiB


def test_a_block_freed_beside_another_allocated_in_one_microsecond_was_held_before(tmp_path: Path) -> None:
    """helper-222: at µs 150 a 3 MiB block held since before the capture (0xA000, never allocated in it) is
    freed and another (0xB000) allocated, the allocation listed first. Putting every allocation of one time
    before its frees (helper-221, right for a block allocated and freed in that µs) had the free take back
    the new block: the sum never went below 0, so the capture showed nothing held before 150 (the freed
    block) nor after it (the new one, never freed: memory_record.csv ending at 0 MiB, step 8 at 2 for 4).
    Only the free of a block allocated at that time goes after its allocation: this free goes first."""
    from npuprof.reports import memory_timeline as mt

    events, out, summary = _parsed_with_records_at_150(tmp_path, ((3 * MiB, 0xB000), (-3 * MiB, 0xA000)))
    # 0xA000's first change is its free: its 3 MiB were held since before the capture (helper-247; the
    # least the sum alone shows was 2 MiB, as if 1 of them were the block of 100, at another address). So:
    # 3 held, +1 at 100 (4), at 150 A freed (1) and B allocated (4), -1 at 200 (3), +2 (5), -2 (3)
    assert [(s["step"], s["memory_peak_mb"]) for s in summary["steps"]] == [(7, 4.0), (8, 5.0)]
    with (out / "memory_record.csv").open() as f:
        assert [float(r["Total Allocated(MB)"]) for r in csv.DictReader(f)] == [4.0, 1.0, 4.0, 3.0, 5.0, 3.0]
    for listed in (events, [events[0], events[2], events[1], *events[3:]]):
        data = _timeline_of(tmp_path, listed)
        assert [sum(row) for row in data.coalesce()[1]] == [4 * MiB, 4 * MiB, 3 * MiB, 5 * MiB, 3 * MiB]
        assert mt.peak_allocated(data) == 5 * MiB


def _parsed_with_records_at_150(
    tmp_path: Path, records: tuple[tuple[int, int], ...]
) -> tuple[list, Path, dict]:
    """The CPU trace of _cpu_events with ``records`` ((bytes, address), in that order) at µs 150, after the
    1 MiB allocated at 100, in steps 7 and 8, parsed: its events, tables folder and summary."""
    block = []
    for nbytes, addr in records:
        event = mem(150, nbytes, STALE, addr)
        event["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        block.append(event)
    events = _cpu_events()
    events[1:1] = block
    out = _parsed_with(tmp_path, [x("ProfilerStep#8", "user_annotation", 1000, 1000), *events])
    return events, out, json.loads((out / SUMMARY_FILE).read_text())


# (ts, Bytes, address) of a capture whose process held a 100 MiB block (0xA, allocated while an earlier
# capture recorded: torch reports its free) when it began
HELD_BEFORE = [(100, 50 * MiB, 0xB), (200, -100 * MiB, 0xA), (300, 200 * MiB, 0xC)]


def test_a_block_freed_in_the_capture_and_allocated_before_it_counts_from_the_start(tmp_path: Path) -> None:
    """helper-247: the block 0xA, never allocated in the capture, is freed after 0xB was allocated: held
    100 MiB at the start, then 150, 50, 250. The least the sum alone showed was held before is 50 (its low,
    -50, after the free), so the capture peaked at 200 MiB in analyse, memory-timeline from the trace and
    the categorised timeline's "Max memory allocated", for the 250 the process held."""
    from npuprof.reports import memory_timeline as mt
    from npuprof.reports.memory_categories import _peaks

    held = -sum(nbytes for _ts, nbytes, addr in HELD_BEFORE if nbytes < 0)  # freed, never allocated here
    expected, total = [], held
    for _ts, nbytes, _addr in HELD_BEFORE:
        total += nbytes
        expected.append(total)
    assert expected == [150 * MiB, 50 * MiB, 250 * MiB]
    events = []
    for ts, nbytes, addr in HELD_BEFORE:
        event = mem(ts, nbytes, STALE + nbytes, addr)  # torch's CPU totals: not read
        event["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        events.append(event)
    out = _parsed_with(tmp_path, events)
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["memory"]["peak_allocated_mb"] == max(expected) / MiB
    assert [s["memory_peak_mb"] for s in summary["steps"]] == [max(expected) / MiB]
    with (out / "memory_record.csv").open() as f:
        assert [float(r["Total Allocated(MB)"]) for r in csv.DictReader(f)] == [e / MiB for e in expected]

    data = _timeline_of(tmp_path, events)
    assert [sum(row) for row in data.coalesce()[1]] == expected
    assert mt.peak_allocated(data) == max(expected)
    assert data.origin.endswith(f"{mt.SUMMED_FROM} {held:,} bytes")

    rows = [
        [2, -1, ts * 1000, 0, addr, i, nbytes, "cpu", STALE, 0]
        for i, (ts, nbytes, addr) in enumerate(HELD_BEFORE)
    ]
    assert _peaks(rows, "cpu") == (max(expected), None)


def test_a_block_held_before_is_told_by_its_own_process_address(tmp_path: Path) -> None:
    """helper-247: two processes in one trace, each with its own addresses: A allocates 10 MiB at 0xA (10
    µs), then B frees its 100 MiB block at 0xA, held since before the capture (20 µs). Read by address
    alone, 0xA's first change was A's allocation and B's block was not held: the capture started at the 90
    MiB its sum went below 0, for the 100 B held."""

    a, b = 300, 400
    changes = [(10, 10 * MiB, a), (20, -100 * MiB, b)]
    held = 100 * MiB  # B's block: freed by B, never allocated by B in the capture
    expected = [held + 10 * MiB, held + 10 * MiB - 100 * MiB]
    events = []
    for ts, nbytes, pid in changes:
        event = mem(ts, nbytes, STALE, 0xA)
        event.update(pid=pid, tid=pid)
        event["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        events.append(event)
    out = _parsed_with(tmp_path, events)
    with (out / "memory_record.csv").open() as f:
        assert [float(r["Total Allocated(MB)"]) for r in csv.DictReader(f)] == [e / MiB for e in expected]
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["memory"]["peak_allocated_mb"] == max(expected) / MiB

    assert [sum(row) for row in _timeline_of(tmp_path, events).coalesce()[1]] == expected


def test_a_block_allocated_again_at_its_address_was_freed_where_the_trace_did_not_see(
    tmp_path: Path,
) -> None:
    """A 2-rank FSDP2 job on gloo (--profile-memory --active 6): analyse's mem column rose 15 -> 36 MiB
    over the 6 steps, a leak the job does not have: torch reports a CPU free only on a thread its profiler
    records, and gloo's worker threads free the 2,102,272-byte gradient blocks the main thread allocated, so
    9 of them were allocated again at their address with no free between. An address holds one block at a
    time: the earlier one was freed by then. Here each step allocates a 2 MiB block whose free the trace
    lacks, and 1 MiB it frees: each step holds 3 MiB at most (not 5 in the second)."""
    from npuprof.reports import memory_timeline as mt
    from npuprof.reports.memory_categories import _peaks

    changes = [(100, 2 * MiB, 0xA000), (200, MiB, 0xB000), (300, -MiB, 0xB000)]
    changes += [(ts + 1000, nbytes, addr) for ts, nbytes, addr in changes]
    events, rows, total = [], [], 0
    for ts, nbytes, addr in changes:
        total += nbytes  # torch's totals: the unseen frees never taken off
        event = mem(ts, nbytes, total, addr)
        event["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        events.append(event)
        rows.append([2, -1, ts, 0, addr, ts, nbytes, "cpu", total, 0])
    out = _parsed_with(tmp_path, [x("ProfilerStep#8", "user_annotation", 1000, 1000), *events])
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert [(s["step"], s["memory_peak_mb"]) for s in summary["steps"]] == [(7, 3.0), (8, 3.0)]
    with (out / "memory_record.csv").open() as f:
        assert [float(r["Total Allocated(MB)"]) for r in csv.DictReader(f)] == [2.0, 3.0, 2.0] * 2
    assert mt.peak_allocated(_timeline_of(tmp_path, events)) == 3 * MiB
    assert _peaks(rows, "cpu") == (3 * MiB, None)


def test_blocks_taken_as_freed_are_said_once_in_the_ranks_warnings_and_the_timeline(tmp_path: Path) -> None:
    """Blocks taken off where their address is allocated again (above) prove that frees go unseen in the
    process, and a block freed so whose address is never reused still counts: the summed memory crept up
    with no word. Here a 2 MiB block at 0xA000 is allocated in each of three steps with no free (gloo's
    thread frees it), 1 MiB at 0xB000 is allocated and freed, and 512 KiB at 0xC000 once, never freed."""

    changes = [(150, MiB // 2, 0xC000)]
    for start in (0, 600, 1200):
        changes += [(start + 100, 2 * MiB, 0xA000), (start + 200, MiB, 0xB000), (start + 300, -MiB, 0xB000)]
    changes.sort()
    events, total = [], 0
    held: set[int] = set()
    again = 0  # allocations at an address still held, by the trace's frees
    for ts, nbytes, addr in changes:
        total += nbytes
        event = mem(ts, nbytes, total, addr)
        event["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        events.append(event)
        if nbytes > 0:
            again += addr in held
            held.add(addr)
        else:
            held.discard(addr)
    assert again == 2
    note = (
        f"{again} block(s) were allocated again at their address with no free seen (freed on a thread the "
        "profiler does not record, e.g. gloo's): taken as freed; others never reused may still be counted: "
        "the summed memory may run high"
    )
    out = _parsed_with(tmp_path / "reused", [x("ProfilerStep#8", "user_annotation", 1000, 1000), *events])
    warnings = json.loads((out / SUMMARY_FILE).read_text()).get("warnings", [])
    assert [w for w in warnings if "no free seen" in w] == [note], warnings
    assert [n for n in _timeline_of(tmp_path, events).notes if "no free seen" in n] == [note]
    # a capture whose every free is seen says nothing of it
    out = _parsed_with(
        tmp_path / "seen", [x("ProfilerStep#8", "user_annotation", 1000, 1000), *_cpu_events()]
    )
    assert not [w for w in json.loads((out / SUMMARY_FILE).read_text()).get("warnings", []) if "free" in w]
    assert not [n for n in _timeline_of(tmp_path, _cpu_events()).notes if "free" in n]
