"""Memory timeline: categorised memory over time, rendered as html / json / json.gz / raw.json.gz.

Three sources, best first:
1. the raw categorised data that the run kept (``memory_timeline.raw.json.gz``: ``(timestamp ns, action,
   numbytes, category)`` as torch's ``export_memory_timeline`` writes it) and ``memory_timeline.meta.json``;
2. the memory snapshot the training step wrote (``memory_timeline.snapshot.msgpack``), when no
   post-processor turned it into the raw data: categorised now (npuprof.reports.memory_categories);
3. the trace's ``[memory]`` events (allocator records: ``Total Allocated`` / ``Total Reserved`` per device),
   from a trace of any form trace_loader reads (Kineto's, torch_npu's ``trace_view.json``: ``Device Type``
   20 is the NPU). They carry no categories, so everything is UNKNOWN, and the plot says so. Times are
   epoch µs, as torch's own: Kineto's ``baseTimeNanoseconds`` is added to its ``ts`` (string epoch times
   keep their nanoseconds: ``Trace.ts_base`` is added back in integers).

Output formats (chosen by the path's suffix, as torch's ``export_memory_timeline``):
``.html`` (a PNG plot embedded; needs matplotlib), ``.json`` / ``.json.gz`` (``[timestamps µs, [sizes by
category]]``, each sizes row ``[0, PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT,
AUTOGRAD_DETAIL, UNKNOWN]`` in bytes, exactly torch's layout) and ``raw.json.gz``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npuprof.analysis.gzip_members import GzipMembers, is_gzip
from npuprof.analysis.trace_cut import is_cut_short
from npuprof.analysis.vocabulary import DEVICE_TYPES
from npuprof.results import layout
from npuprof.results.atomic import utf8_bytes, write_bytes

# torch.profiler._memory_profiler order (_CATEGORY_TO_INDEX); None there is UNKNOWN here.
CATEGORIES = (
    "PARAMETER",
    "OPTIMIZER_STATE",
    "INPUT",
    "TEMPORARY",
    "ACTIVATION",
    "GRADIENT",
    "AUTOGRAD_DETAIL",
    "UNKNOWN",
)
UNKNOWN = CATEGORIES.index("UNKNOWN")
COLORS = ("darkgreen", "goldenrod", "black", "mediumpurple", "red", "mediumblue", "royalblue", "grey")
ACTIONS = {1: "PREEXISTING", 2: "CREATE", 3: "INCREMENT_VERSION", 4: "DESTROY"}
PREEXISTING, CREATE, DESTROY = 1, 2, 4

RAW_FILE = "memory_timeline.raw.json.gz"
META_FILE = "memory_timeline.meta.json"
SNAPSHOT_FILE = "memory_timeline.snapshot.msgpack"  # = npuprof.agent.memory_snapshot.SNAPSHOT_FILE
FORMATS = ("html", "json", "json.gz", "raw.json.gz")
PLOT_INSTALL_HINT = "pip install 'npuprof[plot]'"
SOURCE_CATEGORISED = "categorised"
SOURCE_TRACE = "trace"
_ORIGIN_TEXT = {"the trace": "the trace's [memory] events"}
CAPTURE_FLAGS = "--profile-memory --record-shapes --with-stack"
# MemoryData.origin of a summed trace whose sum its frees took below 0: "...; started at <N> bytes"
SUMMED_FROM = "; started at"

RawEvent = tuple[int, int, int, int]
_INT64 = 1 << 63  # torch writes each number of a raw event as an int64
# A [memory] event's byte count beyond trace_loader.BYTES_LIMIT is no allocator's: a raw event's numbytes, the
# difference of two, must be an int64 as read_raw requires (a total of 10**30 bytes was written to a
# raw.json.gz that memory-timeline then refused: "a number is out of range")
# A raw event's time is epoch ns in an int64, -1 meaning "before the capture" (torch's layout, coalesce): a
# [memory] event before 1970 would read as that, or as no time at all
_OFF_TIMELINE = "its epoch time (ts after the trace's base) is before 1970 or past 2**63 ns"


class MemoryTimelineError(ValueError):
    """The input cannot give the timeline asked for; the message is one line for the user."""


class PlotUnavailableError(MemoryTimelineError):
    """matplotlib is not installed (the optional ``plot`` extra)."""


@dataclass
class MemoryData:
    device: str
    source: str  # SOURCE_CATEGORISED | SOURCE_TRACE
    raw: list[RawEvent]
    max_allocated: int | None = None  # bytes: peak of the allocator records of the capture
    max_reserved: int | None = None
    # trace source only: the allocator's reserved bytes over time (µs, bytes)
    reserved: tuple[list[int], list[int]] | None = None
    devices: list[str] = field(default_factory=list)  # every device the data holds
    origin: str = "the trace"  # trace source only: where the allocator's totals were read
    notes: list[str] = field(default_factory=list)  # what the reader replaced or passed over
    snapshot_lost: bool = False  # trace source: its capture record lists a memory snapshot never written
    # trace source: the device's [memory] events read, which ``raw`` is not (it adds the memory held before
    # them as one entry, and leaves out the events that changed nothing)
    events_read: int | None = None
    # a memory_record.csv npuprof's parse wrote: its CPU totals are the capture's changes summed from what
    # they show was allocated before it (docs/formats.md, "npuprof_summary.json"), not torch's totals
    summed_by_npuprof: bool = False

    def coalesce(self) -> tuple[list[int], list[list[int]]]:
        return coalesce(self.raw)


def format_of(path: Path) -> str:
    """The format ``path``'s name asks for; the error names the path as given (not its last part, which
    for ``a.txt/`` or the empty word is '')."""
    name = path.name
    for fmt in ("raw.json.gz", "json.gz", "json", "html"):
        if name.endswith("." + fmt):
            return fmt
    raise MemoryTimelineError(
        f"cannot tell the format of {str(path)!r}: end the name in .html, .json, .json.gz or .raw.json.gz"
    )


def coalesce(raw: list[RawEvent]) -> tuple[list[int], list[list[int]]]:
    """[times µs, sizes by category] from raw events, as torch's ``_coalesce_timeline`` computes it."""
    times: list[int] = []
    sizes: list[list[int]] = []
    t_min = -1
    for t_ns, _action, numbytes, category in raw:
        t = int(t_ns / 1000) if t_ns != -1 else -1  # torch's own rounding, to give its json exactly
        if t_min == -1 or (0 < t < t_min):
            t_min = t
        if not times:
            times.append(t)
            sizes.append([0] * (len(CATEGORIES) + 1))
        elif t != times[-1]:
            times.append(t)
            sizes.append(sizes[-1].copy())
        index = category if 0 <= category < len(CATEGORIES) else UNKNOWN
        sizes[-1][index + 1] += int(numbytes)
    times = [t_min if t < 0 else t for t in times]
    return times, sizes


def device_name(device_type: int, device_id: int) -> str:
    kind = DEVICE_TYPES.get(device_type, f"device{device_type}")
    return "cpu" if kind == "cpu" else f"{kind}:{max(device_id, 0)}"


def normalise_device(device: str) -> str:
    device = device.strip().lower()
    if device in ("cuda", "npu"):
        return device + ":0"
    return device


# ---------------------------------------------------------------- reading


def from_trace(trace: Path, device: str | None = None) -> MemoryData:
    """UNKNOWN-category data from the trace's ``[memory]`` events for ``device`` (default: the first
    accelerator in the data, else cpu)."""
    from npuprof.analysis import vocabulary as vocab
    from npuprof.analysis.trace_loader import described_event
    from npuprof.reports.trace_events import load, memory_record

    loaded = load(trace, keep=memory_record)  # only the [memory] events: the spans are not read here
    base_ns = _time_base_ns(loaded)
    unread = 0  # [memory] events whose fields are not numbers (helper-123: left out without a word)
    # device -> pid -> records: each process's allocator keeps its own totals (helper-209)
    per_process: dict[str, dict[object, list[tuple[float, int, int, int]]]] = {}
    # time, bytes, address, block (a number per process and address; 0: address unknown)
    bytes_only: dict[str, list[tuple[float, int, int, int]]] = {}  # torch < 1.10: no Total Allocated; the CPU
    without_totals: set[str] = set()
    blocks: dict[tuple[object, int], int] = {}  # (process, address) -> its number: each process's addresses
    summed_pids: dict[str, dict[object, None]] = {}  # in order of appearance
    for ev in loaded.events:
        if ev.name != vocab.MEMORY_EVENT:
            continue
        args = ev.args_dict()
        try:
            name = device_name(_id(args, "Device Type", 0), _id(args, "Device Id", -1))
            ts, nbytes = float(ev.ts), _number(args, "Bytes", 0)
            # read on the CPU too, where they are not used: a total no allocator has is a damaged event, as
            # analyse leaves it out (analysis/trace_loader.BYTES_LIMIT)
            allocated, reserved = _number(args, "Total Allocated", 0), _number(args, "Total Reserved", 0)
            if not 0 <= base_ns + _ns(ts) < _INT64:
                loaded.damaged.add(
                    _OFF_TIMELINE, f"cannot read the event {described_event(ev)}: {_OFF_TIMELINE}"
                )
                continue
            if "Total Allocated" not in args or name == "cpu":
                # on the CPU torch's totals keep each block of an earlier capture freed between captures
                # (analysis/memory.py's memory_columns): the capture's own Bytes are summed there too
                address = _id(args, "Addr", 0)
                block = blocks.setdefault((ev.pid, address), len(blocks) + 1) if address else 0
                bytes_only.setdefault(name, []).append((ts, nbytes, address, block))
                if "Total Allocated" not in args:
                    without_totals.add(name)
                summed_pids.setdefault(name, {})[ev.pid] = None
                continue
            record = (ts, allocated, reserved, nbytes)
        except (KeyError, TypeError, ValueError, OverflowError):
            unread += 1
            continue
        per_process.setdefault(name, {}).setdefault(ev.pid, []).append(record)
    per_device = {
        name: _all_processes({pid: _in_chain_order(rows) for pid, rows in by_pid.items()})
        for name, by_pid in per_process.items()
    }
    import numpy as np

    from npuprof.analysis.memory import held_before, missed_frees, missed_frees_note, summing_keys

    summed = False
    missed_blocks: dict[str, int] = {}  # device -> its blocks taken as freed (memory.missed_frees)
    before: dict[str, int] = {}  # device -> what its frees show was allocated before the capture
    too_large: dict[str, str] = {}  # device -> why its summed Bytes give no timeline
    for name, changes in bytes_only.items():
        if name in per_device:
            continue  # the device's own totals are there: its records without them add nothing
        summed = summed or name in without_totals
        total, records = 0, []
        # the running sum from the capture's start (before: unknown); at one time as analyse sums them
        # (analysis/memory.py's summing_keys: a block allocated and freed in one µs after its allocation,
        # helper-221; other frees first, their blocks held before, helper-222), else as listed
        keys = summing_keys(*(np.array(column) for column in list(zip(*changes, strict=True))[:3])).tolist()
        in_order = [changes[i] for i in sorted(range(len(changes)), key=lambda i: (changes[i][0], keys[i]))]
        # frees of memory allocated before the capture took the sum below 0, which no memory is (helper-179:
        # "Max memory allocated: -200 bytes" and a plot all below its axis): it starts at what they show
        # was there (analysis/memory.py's held_before)
        _times, nbytes, _addresses, block_of = zip(*in_order, strict=True)
        # less each block allocated again at its address with no free seen between (memory.missed_frees)
        missed = missed_frees(np.array(nbytes, np.float64), np.array(block_of, np.int64)).tolist()
        nets = [change - round(lost) for change, lost in zip(nbytes, missed, strict=True)]
        missed_blocks[name] = sum(lost > 0 for lost in missed)
        total = round(held_before(np.array(nets, np.float64), np.array(block_of, np.int64)))
        if total:
            before[name] = total
        for (ts, change, _addr, _block), net in zip(in_order, nets, strict=True):
            total += net
            records.append((ts, total, 0, change))
        if max(r[1] for r in records) >= _INT64 or records[0][1] - records[0][3] >= _INT64:
            # each sample's Bytes is below 2**62, their sum is not: a raw event's numbytes is an int64, and a
            # raw.json.gz was written that read_raw then refused ("a number is out of range")
            too_large[name] = (
                f"the {name} [memory] events' Bytes, summed, pass 2**63 bytes (8 EiB: no allocator holds "
                f"that; a damaged trace?): no timeline of {name}"
            )
            continue
        per_device[name] = records
    wanted = normalise_device(device) if device is not None else None
    if too_large and (wanted in too_large or not per_device):
        raise MemoryTimelineError(too_large[wanted if wanted in too_large else next(iter(too_large))])
    if not per_device and unread:
        raise MemoryTimelineError(
            f"{trace.name} has no readable [memory] events: {_reading_notes(0, unread)[0]}"
        )
    if not per_device and loaded.cut is not None and not loaded.cut.in_keys:
        raise MemoryTimelineError(_cut_before_memory(trace, loaded))
    if not per_device:
        raise MemoryTimelineError(
            f"{trace.name} has no [memory] events: capture with {CAPTURE_FLAGS} "
            "(and --memory-timeline with any of its formats for the categories, which the run then keeps "
            "for this command); with torch.profiler yourself: "
            "profile_memory=True"
        )
    origin = (
        "the trace's [memory] Bytes, summed: it has no allocator totals (torch < 1.10)"
        if summed
        else "the trace"
    )
    data = _from_records(per_device, device, base_ns, origin)
    processes = per_process.get(data.device) or summed_pids.get(data.device, {})
    if len(processes) > 1 and not summed:
        pids = ", ".join(map(str, list(processes)[:4])) + (" ..." if len(processes) > 4 else "")
        data.origin = (
            f"the trace's [memory] events of {len(processes)} processes (pid {pids}), "
            "each process's allocator totals summed"
        )
    if data.device in before:
        data.origin += f"{SUMMED_FROM} {before[data.device]:,} bytes"
    data.notes = _reading_notes(loaded.repaired_strings, unread)
    if note := missed_frees_note(missed_blocks.get(data.device, 0)):
        data.notes.append(note)
    if loaded.repaired_names:
        from npuprof.analysis.trace_repairs import unescaped_note

        data.notes.append(unescaped_note(loaded.repaired_names))
    if loaded.repaired_values:
        from npuprof.analysis.trace_repairs import unwritten_notes

        data.notes.extend(unwritten_notes(loaded.repaired_values))
    if loaded.damaged.total:  # docs/formats.md, "Damaged events"
        data.notes.append(loaded.damaged.note())
    if loaded.gzip_note:
        data.notes.append(loaded.gzip_note)
    if loaded.cut_note:  # docs/formats.md, "Traces cut short"
        data.notes.append(loaded.cut_note)
    return data


def _in_chain_order(rows: list[tuple[float, int, int, int]]) -> list[tuple[float, int, int, int]]:
    """One process's records by time; those of one time in the order their totals show they happened: each
    record's Total Allocated less its Bytes is the total before it. A trace can list a free before the alloc
    that came first at the same timestamp (torch_npu's µs times, threads' events merged): the timeline then
    showed the total after the free until the next record (helper-221: 0 bytes for a 200-byte block held
    from 20 to 30 µs). Where no such order takes in every record of that time, the trace's is kept."""
    rows = sorted(rows, key=lambda r: r[0])
    out: list[tuple[float, int, int, int]] = []
    i = 0
    while i < len(rows):
        j = i + 1
        while j < len(rows) and rows[j][0] == rows[i][0]:
            j += 1
        group = rows[i:j]
        if len(group) > 1:
            group = _chained(group, out[-1][1] if out else None) or group
        out.extend(group)
        i = j
    return out


def _chained(group: list[tuple[float, int, int, int]], before: int | None) -> list | None:
    """``group`` in an order where each record's total less its bytes is the one before's total, starting
    from ``before`` when known: the trace's order when it is one, else the first found starting from
    ``before``, from a total no other record of the group ends at, or from any record's total before it
    (a capture's first time: what was there before is unknown); None when there is none."""
    pre = [total - nbytes for _ts, total, _r, nbytes in group]
    if (before is None or pre[0] == before) and all(pre[k] == group[k - 1][1] for k in range(1, len(group))):
        return group
    after = {total for _ts, total, _r, _b in group}
    starts = [before] if before is not None else []
    starts += [p for p in pre if p not in after] + pre
    by_start: dict[int, list[int]] = {}
    for k, p in enumerate(pre):
        by_start.setdefault(p, []).append(k)  # the trace's order first
    budget = [20 * len(group) + 1000]  # steps of the search, for all starts: a group is a few records
    for start in list(dict.fromkeys(starts))[:16]:
        order = _chain_from(start, group, by_start, budget)
        if order is not None:
            return [group[k] for k in order]
    return None


def _chain_from(
    start: int, group: list[tuple[float, int, int, int]], by_start: dict[int, list[int]], budget: list[int]
) -> list[int] | None:
    """The records of ``group`` (indexes) in an order that chains their totals from ``start``, by a depth
    first search taking the trace's order first (an allocation and its free can both start at one total);
    None when there is none or ``budget`` runs out."""
    used = [False] * len(group)
    chain: list[int] = []
    tried: list[int] = [0]  # per level, how many of its candidates were tried
    # per total, the candidates before this one are all used: each level began its scan at the first, and
    # 20,000 records of one time took minutes (helper-222)
    unused_from: dict[int, int] = {}
    place = {k: n for options in by_start.values() for n, k in enumerate(options)}
    current = start
    while budget[0] > 0:
        budget[0] -= 1
        if len(chain) == len(group):
            return chain
        options = by_start.get(current, [])
        first = unused_from.get(current, 0)
        i = max(tried[-1], first)
        while i < len(options) and used[options[i]]:
            i += 1
        if tried[-1] <= first:
            unused_from[current] = i
        if i < len(options):
            tried[-1] = i + 1
            k = options[i]
            used[k] = True
            chain.append(k)
            tried.append(0)
            current = group[k][1]
            continue
        tried.pop()  # no way on from here: back one record
        if not chain:
            return None
        k = chain.pop()
        used[k] = False
        total_before = group[k][1] - group[k][3]
        unused_from[total_before] = min(unused_from.get(total_before, 0), place[k])
        current = group[chain[-1]][1] if chain else start
    return None


def _all_processes(
    by_pid: dict[object, list[tuple[float, int, int, int]]],
) -> list[tuple[float, int, int, int]]:
    """One device's records of every process in the trace as one series: each record the sum of every
    process's latest totals, its bytes that sum's change. A trace holding several processes' ``[memory]``
    events (traces merged into one) gave each record the totals of its own process alone (helper-209: the
    timeline went 64, 8, 128, 16 MiB for two processes holding 64 + 8 then 128 + 16 MiB). A process counts
    from what its first record shows it held before it."""
    if len(by_pid) == 1:
        return next(iter(by_pid.values()))
    latest: dict[object, tuple[int, int]] = {}
    merged = [
        (ts, pid, allocated, reserved, nbytes)
        for pid, rows in by_pid.items()
        for ts, allocated, reserved, nbytes in rows
    ]
    merged.sort(key=lambda r: r[0])
    for pid, rows in by_pid.items():
        first = min(rows, key=lambda r: r[0])
        latest[pid] = (first[1] - first[3], 0)
    allocated_sum = sum(a for a, _r in latest.values())
    reserved_sum = 0
    out: list[tuple[float, int, int, int]] = []
    for ts, pid, allocated, reserved, _nbytes in merged:
        before = allocated_sum
        old_allocated, old_reserved = latest[pid]
        allocated_sum += allocated - old_allocated
        reserved_sum += reserved - old_reserved
        latest[pid] = (allocated, reserved)
        out.append((ts, allocated_sum, reserved_sum, allocated_sum - before))
    return out


def from_memory_record(path: Path, device: str | None = None) -> MemoryData:
    """UNKNOWN-category data from torch_npu's ``memory_record.csv`` for ``device``: one component's totals
    in MB at epoch µs (PyTorch's allocator, ``PTA``, where the file has it), times exact to the ns."""
    from npuprof.analysis.ascend_output import (
        ALLOCATOR_COMPONENT,
        AscendTableError,
        allocator_records,
        impossible_memory_note,
        unread_memory_note,
    )

    try:
        component, by_device, impossible, unread, damaged = allocator_records(path)
    except AscendTableError as exc:
        raise MemoryTimelineError(f"cannot read {exc}") from None
    mib = 1 << 20
    merged: dict[str, list[tuple[int, int, int]]] = {}
    for name, rows in by_device.items():  # "NPU", "NPU:0" and an empty cell are one device
        merged.setdefault(normalise_device(name) or "npu:0", []).extend(
            (ns, round(allocated * mib), round(reserved * mib) if reserved is not None else 0)
            for ns, allocated, reserved in rows
            if math.isfinite(allocated) and allocated * mib < _INT64
        )
    merged = {name: rows for name, rows in merged.items() if rows}
    if not merged:
        notes = [*damaged, unread_memory_note(unread)] if unread else damaged
        why = f": {'; '.join(notes)}" if notes else ""
        raise MemoryTimelineError(
            f"{path.name} holds no allocator records (Timestamp(us), Total Allocated(MB)){why}"
        )
    base_ns = min(ns for rows in merged.values() for ns, _a, _r in rows)
    per_device = {  # times as µs after the first record: a float holds those to the ns
        name: [((ns - base_ns) / 1000, allocated, reserved, 0) for ns, allocated, reserved in rows]
        for name, rows in merged.items()
    }
    origin = path.name if component == ALLOCATOR_COMPONENT else f"{path.name} (component {component or '-'})"
    if impossible:
        origin += f"; {impossible_memory_note(impossible)}"
    if unread:
        origin += f"; {unread_memory_note(unread)}"
    origin += "".join(f"; {note}" for note in damaged)
    data = _from_records(per_device, device, base_ns, origin)
    data.summed_by_npuprof = _written_by_npuprof(path)
    return data


def _written_by_npuprof(table: Path) -> bool:
    """``table`` is in the tables folder of a rank dir whose tables npuprof's parse wrote: its capture
    record says torch's profiler recorded it (torch_npu's own are torch_npu's), or npuprof's summary is
    beside it (a trace npuprof parsed without recording it)."""
    from npuprof.analysis.ascend_output import parsed_by_npuprof
    from npuprof.analysis.parse import SUMMARY_FILE

    folder = table.parent
    rank_dir = layout.owner_of_tables_folder(folder)
    if rank_dir is None:
        return False
    return parsed_by_npuprof(rank_dir) or (folder / SUMMARY_FILE).is_file()


def _number(args: dict[str, Any], key: str, default: int) -> int:
    """The byte count a [memory] event's args hold at ``key`` (``default`` without it); ValueError when it is
    no number (a string, a bool: analyse's tables refuse them too, docs/formats.md "Damaged events"), not
    finite, or beyond trace_loader.BYTES_LIMIT either side of 0."""
    from npuprof.analysis.trace_loader import BYTES_LIMIT

    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} is no number")
    if not (math.isfinite(value) and -BYTES_LIMIT < value < BYTES_LIMIT):
        raise ValueError(f"{key} is out of range")
    return int(value)


def _id(args: dict[str, Any], key: str, default: int) -> int:
    """The int64 a [memory] event's args hold at ``key`` (an address, a device's type or number), as
    analyse's tables read it; ValueError for anything else (a string, a float, a bool)."""
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not -_INT64 <= value < _INT64:
        raise ValueError(f"{key} is no int64")
    return value


def _ns(us: float) -> int:
    """µs as ns, exactly for the µs a float holds: an epoch µs time times 1000 is past a float's 53 bits
    (helper-91: 1620000000000900 µs became ...900096 ns)."""
    whole = math.floor(us)
    return whole * 1000 + round((us - whole) * 1000)


def _from_records(
    per_device: dict[str, list[tuple[float, int, int, int]]], device: str | None, base_ns: int, origin: str
) -> MemoryData:
    """From the allocator's records by device: (time µs after ``base_ns``, allocated, reserved, bytes of
    the record's own change), whatever their order."""
    devices = _sorted_devices(per_device)
    chosen = _choose_device(device, devices)
    records = sorted(per_device[chosen], key=lambda r: r[0])
    raw: list[RawEvent] = []
    # what was allocated before the first record; placed at that record's time (not torch's -1, which
    # would give the timeline two points at its start)
    previous = records[0][1] - records[0][3]
    if previous > 0:
        raw.append((base_ns + _ns(records[0][0]), PREEXISTING, previous, UNKNOWN))
    for ts, allocated, _, _ in records:
        # deltas of the allocator's own running total, so the coalesced sum equals it exactly
        delta = allocated - previous
        if delta:
            raw.append((base_ns + _ns(ts), CREATE if delta > 0 else DESTROY, delta, UNKNOWN))
        previous = allocated
    reserved_values = [r[2] for r in records]
    reserved_times = [(base_ns + _ns(r[0])) // 1000 for r in records]
    return MemoryData(
        device=chosen,
        source=SOURCE_TRACE,
        raw=raw,
        # with what was there before the first record: a free, it held more than after it (helper-179)
        max_allocated=max(max(r[1] for r in records), records[0][1] - records[0][3]),
        max_reserved=max(reserved_values) if any(reserved_values) else None,
        reserved=(reserved_times, reserved_values) if any(reserved_values) else None,
        devices=devices,
        origin=origin,
        events_read=len(records),
    )


def _cut_before_memory(trace: Path, loaded: Any) -> str:
    """Why a trace cut short inside its events gives no timeline: Kineto writes its [memory] events in one
    block after every operator's (docs/formats.md, "Traces cut short"), so a cut before that block leaves
    none, whatever the capture recorded (helper-333's reproduction was told to capture with
    --profile-memory, which it had)."""
    where = f"cut short at byte {loaded.cut.events_end}, before its [memory] events"
    block = "torch writes them in one block after every operator's event"
    recorded = loaded.meta.get("profile_memory")
    if recorded is True or recorded == 1:  # Kineto's header says the capture recorded them
        return (
            f"{trace.name} is {where} ({block}): its capture recorded memory (profile_memory), but none of "
            "it was written before the cut, so there is no memory timeline to make from it"
        )
    return (
        f"{trace.name} is {where} ({block}): none was read; if the capture recorded memory the cut took "
        f"it all, else capture with {CAPTURE_FLAGS}"
    )


def _reading_notes(repaired: int, unread: int) -> list[str]:
    from npuprof.analysis.trace_repairs import not_text_note

    notes = [not_text_note(repaired)] if repaired else []
    if unread:
        notes.append(f"{unread} [memory] event(s) whose fields are not numbers (a damaged trace?): left out")
    return notes


def _time_base_ns(loaded: Any) -> int:
    """The epoch time (ns) the trace's ``ts`` count from: torch's own timeline is in epoch µs. Kineto's
    ``baseTimeNanoseconds`` (its ``ts`` are µs after it), the base of a trace of string epoch times; 0 when
    the times are epoch µs already or the trace says nothing."""
    from npuprof.analysis.trace_loader import BASE_TIME_KEY

    if loaded.ts_base:
        return int(loaded.ts_base) * 1000
    base = loaded.meta.get(BASE_TIME_KEY)
    return base if isinstance(base, int) and not isinstance(base, bool) and 0 <= base < 1 << 62 else 0


def _sorted_devices(devices: dict[str, object] | list[str]) -> list[str]:
    return sorted(devices, key=lambda d: (d == "cpu", d))


def _choose_device(device: str | None, available: list[str]) -> str:
    if device is None:
        return available[0]
    wanted = normalise_device(device)
    if wanted not in available:
        raise MemoryTimelineError(
            f"--device {device}: no memory data for it; the data holds: {', '.join(available)}"
        )
    return wanted


def read_raw(path: Path, notes: list[str] | None = None) -> list[RawEvent]:
    """The raw timeline at ``path`` (gzipped or not); what was left out after its gzip data goes into
    ``notes`` (``GzipMembers.ignored_note``), or into the error when the JSON went on there (a member cut
    short: the timeline is truncated, and that says why). Given ``notes``, a timeline cut short is read up to
    its last complete event, less those of its last time, with a note (:func:`_cut_short`); without them
    (torch's own export, read back in the job) it is refused as truncated."""
    note: str | None = None
    try:
        if is_gzip(path):
            with GzipMembers(path, cut_ok=notes is not None) as src:
                data = src.read()
            note = src.ignored_note()
        else:
            data = path.read_bytes()
        try:
            events = json.loads(data)
        except ValueError:
            found = _cut_short(data) if notes is not None else None
            if found is None:
                raise
            events, cut_note = found
            note = f"{note}; {cut_note}" if note else cut_note
    except (OSError, EOFError, ValueError, zlib.error, RecursionError) as exc:
        raise MemoryTimelineError(f"cannot read {path}: {exc}" + (f"; {note}" if note else "")) from None
    if note and notes is not None:
        notes.append(note)
    if not isinstance(events, list):
        raise MemoryTimelineError(f"{path} is not a raw memory timeline (a JSON list of 4-tuples)")
    try:
        raw = [(int(t), int(a), int(n), int(c)) for t, a, n, c in events]
    except (TypeError, ValueError, OverflowError) as exc:
        raise MemoryTimelineError(f"{path} is not a raw memory timeline: {exc}") from None
    if any(not -_INT64 <= value < _INT64 for event in raw for value in event):
        raise MemoryTimelineError(f"{path} is not a raw memory timeline: a number is out of range")
    return raw


_CUT_CAUSES = "(a job killed while it wrote the timeline, a copy cut short, a full disk?)"


def _cut_short(data: bytes) -> tuple[list[Any], str] | None:
    """A raw timeline cut short (its JSON list never closes; docs/formats.md, "Traces cut short"): its
    complete events less those of the last time read, and one line that says so (whole before NUL bytes:
    its events, and a line that says they were ignored); None when ``data`` is
    no list of lists cut short (refused as it is). torch writes the events in time order, each time's
    several (an INCREMENT_VERSION's two halves among them) together: the cut may have taken some of the
    last time's, whose sum would then be wrong, so that time is left out. ValueError when no event is left."""
    text = data.rstrip(b"\0")
    nuls = len(data) - len(text)
    if nuls:  # whole before NUL bytes (a file preallocated, or extended by a crash): read, as a trace is
        try:
            ignored = f"the {nuls} NUL bytes after its JSON (a file preallocated?) were ignored"
            return json.loads(text), ignored
        except ValueError:
            pass
    if not text.lstrip(b" \t\r\n").startswith(b"[") or not is_cut_short(text):
        return None
    end = text.rfind(b"]") + 1  # the events are lists of numbers: each "]" ends one
    try:
        events = json.loads(text[:end] + b"]") if end else []
    except (ValueError, RecursionError):
        return None
    if not isinstance(events, list) or not all(isinstance(e, list) and len(e) == 4 for e in events):
        return None
    last = events[-1][0] if events else None
    kept = [e for e in events if e[0] != last]
    zeros = f" ({nuls} NUL bytes at its end: a write cut short by a crash or a full disk)" if nuls else ""
    where = f"ends after {len(text)} bytes{zeros}, before its JSON closes"
    if not kept:
        first = "its first event" if not events else f"an event of a time after its first ({last})"
        what = f"the raw timeline {where}, before {first} is complete"
        raise ValueError(f"nothing to read: {what} {_CUT_CAUSES}")
    return kept, (
        f"the raw timeline is cut short: it {where}; read the {len(kept)} complete event(s) before the cut, "
        f"up to time {kept[-1][0]} ns; the {len(events) - len(kept)} complete one(s) at its last time read "
        f"({last} ns) left out, as the cut may have taken others of that time {_CUT_CAUSES}"
    )


def read_meta(path: Path) -> dict[str, object]:
    try:
        meta = layout.read_json_record(path)
    except (OSError, ValueError, RecursionError):
        return {}
    return meta if isinstance(meta, dict) else {}


def from_raw(raw_path: Path, device: str | None = None) -> MemoryData:
    meta_path = raw_path.with_name(META_FILE)
    meta = read_meta(meta_path) if raw_path.name == RAW_FILE else {}
    stored = str(meta.get("device") or "")
    if device is not None and stored and normalise_device(device) != stored:
        raise MemoryTimelineError(
            f"--device {device}: no categorised memory data for it; the data holds: {stored}"
        )
    chosen = stored or (normalise_device(device) if device else UNKNOWN_DEVICE)

    def _int(key: str) -> int | None:
        value = meta.get(key)
        return int(value) if isinstance(value, int) else None

    notes: list[str] = []
    data = MemoryData(
        device=chosen,
        source=SOURCE_CATEGORISED,
        raw=read_raw(raw_path, notes),
        max_allocated=_int("max_allocated_bytes"),
        max_reserved=_int("max_reserved_bytes"),
        devices=[chosen],
    )
    if chosen == UNKNOWN_DEVICE and raw_path.name == RAW_FILE:  # torch's own export names no device
        notes.append(f"{META_FILE} {_why_no_device(meta_path, meta)}{_DEVICE_UNKNOWN}")
    data.notes = notes
    return data


UNKNOWN_DEVICE = "unknown device"
_DEVICE_UNKNOWN = ": the device is unknown (--device DEVICE names it)"


def _why_no_device(meta_path: Path, meta: dict[str, object]) -> str:
    """Why the categorised data's companion record names no device."""
    if meta:
        return "names no device"
    return "cannot be read" if os.path.lexists(meta_path) else "is missing"


def _device_of_the_trace(devices: list[str]) -> str | None:
    """The device categorised data without its record is of, read from the devices of the trace's
    [memory] events: its one accelerator (the CPU's events are there beside it), else the CPU when it is
    the only one; None when that leaves a choice."""
    accelerators = [d for d in devices if d != "cpu"]
    if len(accelerators) == 1:
        return accelerators[0]
    return "cpu" if devices == ["cpu"] else None


def load(source: Path, device: str | None = None) -> MemoryData:
    """From a rank directory (its kept raw data, else its trace; torch_npu's: its trace_view.json, else its
    memory_record.csv), a ``*.raw.json.gz`` file, a ``memory_record.csv``, or a trace."""
    owner = layout.owner_of_tables_folder(source)
    if owner is not None and not (source / RAW_FILE).is_file():
        source = owner  # a rank dir's tables folder: read as its rank dir
    if source.is_dir():
        raw_path = source / RAW_FILE
        if raw_path.is_file():
            data = from_raw(raw_path, device)
            if data.max_reserved is None or data.max_allocated is None or data.device == UNKNOWN_DEVICE:
                _fill_from_trace(data, source)
            return data
        snapshot = source / SNAPSHOT_FILE
        if snapshot.is_file():
            from npuprof.reports.memory_categories import from_snapshot

            return from_snapshot(snapshot, device)
        trace = layout.find_raw_trace(source)
        if trace is None:  # a rank dir torch_npu parsed: its trace_view.json, else its memory_record.csv
            return _from_parsed(source, device)
        data = from_trace(trace, device)
        data.snapshot_lost = _snapshot_never_written(source)
        return data
    if not source.is_file():
        from npuprof.results.paths import why_missing

        what = "is neither a rank directory nor a file" if source.exists() else why_missing(source)
        raise MemoryTimelineError(f"{source} {what}")
    if source.name.endswith(".raw.json.gz") or source.name == RAW_FILE:
        return from_raw(source, device)
    if source.parent.name == layout.CLUSTER_OUTPUT:  # its tables: no memory record among them
        from npuprof.analysis.torch_files import cluster_output_note

        raise MemoryTimelineError(f"{source}: a file of {cluster_output_note(source.parent)}")
    if source.name.lower().endswith(".csv"):  # torch_npu's memory_record.csv
        return from_memory_record(source, device)
    if source.name.endswith(".snapshot.msgpack"):
        from npuprof.reports.memory_categories import from_snapshot

        return from_snapshot(source, device)
    return from_trace(source, device)


def _snapshot_never_written(rank_dir: Path) -> bool:
    """Its capture record lists the memory snapshot, and neither it nor a timeline made from it (the
    post-processor removes the snapshot once it has made one) is in ``rank_dir``."""
    if SNAPSHOT_FILE not in ((layout.read_capture_record(rank_dir) or {}).get("extras") or []):
        return False
    try:
        return not any(name.startswith("memory_timeline.") for name in os.listdir(rank_dir))
    except OSError:
        return False


def _from_parsed(rank_dir: Path, device: str | None) -> MemoryData:
    from npuprof.analysis.ascend_output import MEMORY_FILE
    from npuprof.reports.inputs import PARSED_TRACE, parsed_into_db_only, unparsed_raw_data
    from npuprof.reports.trace_events import TraceReadError

    parsed = rank_dir / layout.PARSED_DIR
    records = parsed / MEMORY_FILE
    if (parsed / PARSED_TRACE).is_file():
        try:
            return from_trace(parsed / PARSED_TRACE, device)
        except MemoryTimelineError as e:
            if not records.is_file():
                if str(e).startswith(f"{PARSED_TRACE} has no [memory] events"):
                    # torch_npu's tables, not a capture of npuprof's: its own switch (README, "Memory
                    # timeline after the run"), which it answers with [memory] events and memory_record.csv
                    raise MemoryTimelineError(
                        f"{rank_dir} (parsed by torch_npu) has no memory data: no [memory] events in "
                        f"{layout.PARSED_DIR}/{PARSED_TRACE} and no {MEMORY_FILE}; torch_npu writes them "
                        "for a capture with profile_memory=True (torch_npu.profiler.profile(profile_memory="
                        "True), or npuprof run --profile-memory)"
                    ) from None
                raise
        except (TraceReadError, OSError):  # a damaged trace
            if not records.is_file():
                raise
    if records.is_file():
        return from_memory_record(records, device)
    if unparsed := unparsed_raw_data(rank_dir):
        raise MemoryTimelineError(f"{rank_dir} has no trace yet: {unparsed}")
    if db_only := parsed_into_db_only(rank_dir):
        raise MemoryTimelineError(f"{rank_dir} has no trace nor {MEMORY_FILE}: {db_only}")
    raise MemoryTimelineError(
        f"{rank_dir} has neither {RAW_FILE} nor a raw trace (*.pt.trace.json[.gz]), nor torch_npu's "
        f"{layout.PARSED_DIR}/{PARSED_TRACE} or {MEMORY_FILE}: capture with {CAPTURE_FLAGS} "
        "--memory-timeline raw.json.gz"
    )


def _fill_from_trace(data: MemoryData, rank_dir: Path) -> None:
    """The peaks, and an unknown device, of categorised data from the rank dir's trace."""
    trace = layout.find_raw_trace(rank_dir)
    if trace is None:
        return
    unknown = data.device == UNKNOWN_DEVICE
    try:
        peaks = from_trace(trace, None if unknown else data.device)
    except (MemoryTimelineError, ValueError):
        return
    if unknown:
        device = _device_of_the_trace(peaks.devices)
        if device is None:  # the peaks would be a guessed device's
            seen = ", ".join(peaks.devices)
            held = f": the device is unknown, one of the trace's {seen} (--device DEVICE names it)"
            data.notes = [note.replace(_DEVICE_UNKNOWN, held) for note in data.notes]
            return
        data.device, data.devices = device, [device]
        read = f": read as {device}, the trace's [memory] events' device (--device DEVICE names another)"
        data.notes = [note.replace(_DEVICE_UNKNOWN, read) for note in data.notes]
    if data.max_allocated is None:
        data.max_allocated = peaks.max_allocated
    if data.max_reserved is None:
        data.max_reserved = peaks.max_reserved


# ---------------------------------------------------------------- writing


def render(data: MemoryData, path: Path) -> Path:
    """Write ``data`` to ``path`` in the format its suffix names (atomically)."""
    write_bytes(path, encoded(data, format_of(path)))
    return path


def encoded(data: MemoryData, fmt: str) -> bytes:
    """The file's bytes of ``data`` in format ``fmt``, made whole before anything is written: its size is
    known before the disk is asked for it (--min-free-space)."""
    if fmt == "raw.json.gz":
        return gzip.compress(json.dumps(data.raw).encode(), mtime=0)
    if fmt == "json":
        return json.dumps(list(data.coalesce())).encode()
    if fmt == "json.gz":
        return gzip.compress(json.dumps(list(data.coalesce())).encode(), mtime=0)
    return utf8_bytes(html(data))


def write_meta(data: MemoryData, path: Path) -> None:
    write_bytes(path, meta_bytes(data))


def meta_bytes(data: MemoryData) -> bytes:
    """The bytes of the timeline's .meta.json."""
    text = json.dumps(
        {
            "device": data.device,
            "source": data.source,
            "max_allocated_bytes": data.max_allocated,
            "max_reserved_bytes": data.max_reserved,
            "categories": list(CATEGORIES),
            "actions": {str(k): v for k, v in ACTIONS.items()},
            "raw_format": "[timestamp_ns (-1: before the capture), action, numbytes, category index]",
        },
        indent=4,
    )
    return utf8_bytes(text + "\n")


UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))
EPOCH_FROM_US = 10**15  # 2001-09-09 in epoch µs: an earlier time 0 is a trace's own clock, not an epoch time


def time_zero_us(data: MemoryData) -> int:
    """The plot's time 0, in the µs of the .json's times: the timeline's first memory event (what was
    allocated before the capture is placed there). One rule for every source (docs/formats.md, "Stacks
    and memory timeline files"): the capture's start and its first step are not in every source."""
    times, _sizes = data.coalesce()
    return min(times) if times else 0


def time_zero_text(data: MemoryData) -> str:
    """What the plot's time 0 is, as its axis and the page say it: the first memory event, with its epoch
    time in UTC (or the trace's own µs, for a trace whose times are no epoch times)."""
    t0 = time_zero_us(data)
    if t0 < EPOCH_FROM_US:
        return f"the first memory event (at {t0:,} µs of the trace's clock)"
    from datetime import datetime, timezone

    second, micro = divmod(t0, 10**6)
    when = datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f"the first memory event ({when}.{micro:06d} UTC, epoch {t0} µs)"


def peak_allocated(data: MemoryData) -> int:
    """The larger of the allocator's peak and the plotted peak: on CPU the allocator counts only from the
    start of profiling, on accelerators it also sees memory the profiler does not categorise."""
    _, sizes = data.coalesce()
    return max(data.max_allocated or 0, max((sum(row) for row in sizes), default=0))


def shown_reserved(data: MemoryData) -> int | None:
    """Reserved bytes to show: none on CPU, whose allocator keeps no cache (reserved is allocated)."""
    return None if data.device == "cpu" else data.max_reserved


def unit_of(data: MemoryData) -> tuple[str, int]:
    """The unit the plot and its peaks are given in: the largest in which the peak is at least 1."""
    peak = max(peak_allocated(data), shown_reserved(data) or 0)
    return next(((name, size) for name, size in UNITS if peak >= size), UNITS[-1])


def peak_lines(data: MemoryData) -> tuple[str, str]:
    unit, size = unit_of(data)
    allocated = peak_allocated(data)
    line_allocated = f"Max memory allocated: {allocated / size:.2f} {unit} ({allocated:,} bytes)"
    reserved = shown_reserved(data)
    if reserved is not None:
        line_reserved = f"Max memory reserved: {reserved / size:.2f} {unit} ({reserved:,} bytes)"
    elif data.device == "cpu":
        line_reserved = "Max memory reserved: n/a (the CPU allocator keeps no cache; reserved = allocated)"
    else:
        line_reserved = "Max memory reserved: n/a (no allocator records in the data)"
    return line_allocated, line_reserved


_FOR_CATEGORIES = (
    f"For categories: npuprof run {CAPTURE_FLAGS} --memory-timeline raw.json.gz, or with torch.profiler "
    'yourself (profile_memory, record_shapes, with_stack) prof.export_memory_timeline("x.raw.json.gz"), then '
    "npuprof memory-timeline x.raw.json.gz."
)
# A capture made with those flags whose process died (a rank killed by its peer's failure) while its snapshot
# was copied: the advice sent the user to capture again with the flags the capture had.
_SNAPSHOT_LOST = (
    f"The capture was made for categories, but its training process never wrote {SNAPSHOT_FILE}, which its "
    "capture record lists (killed while the snapshot was copied after the capture; a full disk is said in "
    "npuprof.log): this capture's categories are lost."
)


def source_note(data: MemoryData) -> str:
    if data.source == SOURCE_TRACE:
        summed = data.origin.startswith("the trace's [memory] Bytes, summed")
        origin, _, lifted = data.origin.partition(SUMMED_FROM)
        lifted = lifted.strip()
        if lifted:  # its frees took the sum below 0: it starts at what they show was there
            before = (
                f"Memory allocated before the capture started is missing, but for {lifted} that the "
                "capture's frees show was there: the sum starts at that."
            )
        elif summed:  # torch < 1.10: no allocator totals, the sum of the capture's own changes
            before = "Memory allocated before the capture started is missing: the sum starts at 0 there."
        elif data.device == "cpu" and data.summed_by_npuprof:
            before = (
                "Memory allocated before the capture started is missing, but for what the capture's frees "
                "show was there (the blocks it frees without having allocated them): npuprof's "
                "memory_record.csv starts its sum at that."
            )
        elif data.device == "cpu":
            before = (
                "Memory allocated before the capture started is missing: the CPU allocator's totals count "
                "from the start of profiling."
            )
        else:
            before = (
                "Memory allocated before the capture started is in the allocator's totals, with no category."
            )
        return (
            f"Categories UNKNOWN: rendered from {_ORIGIN_TEXT.get(origin, origin)}"
            f"{'' if summed else ' (allocator totals only)'}. {before} "
            + (_SNAPSHOT_LOST if data.snapshot_lost else _FOR_CATEGORIES)
        )
    return "Categories from torch's memory profiler (export_memory_timeline)."


NOTE_COLUMNS = 100  # the note's lines in the plot: its longest sentence ran off the right edge (helper-111)


def png(data: MemoryData, figsize: tuple[float, float] = (20, 12), dpi: int = 80) -> bytes:
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotUnavailableError(
            f"the .html memory timeline needs matplotlib; install it with: {PLOT_INSTALL_HINT} "
            "(the .json, .json.gz and raw.json.gz formats work without it)"
        ) from exc
    matplotlib.use("Agg", force=True)
    import io

    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    del plt  # Figure() directly: no global pyplot state, safe inside a training process
    times, sizes = data.coalesce()
    if not times:
        times, sizes = [0], [[0] * (len(CATEGORIES) + 1)]
    t0 = time_zero_us(data)
    ms = [(t - t0) / 1e3 for t in times]
    unit, unit_size = unit_of(data)
    fig = Figure(figsize=figsize, dpi=dpi)
    axes = fig.add_subplot()
    cumulative = [[0.0] * len(times)]
    for index in range(len(CATEGORIES)):
        previous = cumulative[-1]
        cumulative.append([previous[i] + sizes[i][index + 1] / unit_size for i in range(len(times))])
    shown = range(len(CATEGORIES)) if data.source == SOURCE_CATEGORISED else [UNKNOWN]
    for index in shown:
        label = CATEGORIES[index]
        if data.source == SOURCE_TRACE:
            label = "UNKNOWN (allocated, from [memory] events)"
        axes.fill_between(
            ms,
            cumulative[index],
            cumulative[index + 1],
            color=COLORS[index],
            alpha=0.7,
            step="post",
            label=label,
        )
    if data.reserved is not None and data.device != "cpu":
        r_times, r_values = data.reserved
        axes.step(
            [(t - t0) / 1e3 for t in r_times],
            [v / unit_size for v in r_values],
            where="post",
            color="darkorange",
            linewidth=1.5,
            label="reserved",
        )
    axes.set_xlabel(f"Time (ms) since {time_zero_text(data)}", parse_math=False)
    axes.set_ylabel(f"Memory ({unit})")
    axes.set_ylim(bottom=0)
    allocated_line, reserved_line = peak_lines(data)
    # parse_math off in every text of the data's (the device, the note's file and component names): a
    # name from someone's memory_record.csv with two "$" in it was drawn as mathtext, and one that is no
    # valid mathtext ("npu:$\\frac{$") failed the drawing with a traceback (docs/formats.md, "Stacks and
    # memory timeline files")
    axes.set_title(f"Memory timeline: {data.device}\n{allocated_line}\n{reserved_line}", parse_math=False)
    axes.legend(loc="upper right")  # the figure's corner put it half outside the axes (helper-111)
    if data.source == SOURCE_TRACE:
        import textwrap

        sentences = source_note(data).replace(". ", ".\n").splitlines()
        axes.text(
            0.01,
            0.98,
            "\n".join(textwrap.fill(sentence, NOTE_COLUMNS) for sentence in sentences),
            transform=axes.transAxes,
            va="top",
            ha="left",
            fontsize=12,
            bbox={"facecolor": "lightyellow", "alpha": 0.9},
            parse_math=False,
        )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def html(data: MemoryData) -> str:
    from base64 import b64encode
    from html import escape

    encoded = b64encode(png(data)).decode("ascii")
    allocated_line, reserved_line = peak_lines(data)
    return f"""<html>
<head><meta charset="utf-8" /><title>Memory Timeline: {escape(data.device)}</title></head>
<body>
  <p>{escape(allocated_line)}<br>{escape(reserved_line)}<br>Time 0: {escape(time_zero_text(data))}.<br>
  {escape(source_note(data))}</p>
  <img src='data:image/png;base64,{encoded}'>
</body>
</html>
"""
