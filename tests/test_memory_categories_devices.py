"""The post-processor's reading of a memory snapshot (reports/memory_categories.py) on a machine of several
devices: each device's own allocations and allocator peaks, the device chosen or refused. The snapshot is
written here, in the form docs/formats.md gives (allocation rows only: torch's categories are unknown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from npuprof.agent import memory_snapshot
from npuprof.reports.memory_categories import from_snapshot, load_snapshot
from npuprof.reports.memory_timeline import CREATE, DESTROY, MemoryTimelineError

UNKNOWN = 7  # torch's index of a block of no tensor (None, the last of its _CATEGORY_TO_INDEX)
# [kind, parent, start ns, id, ptr, allocation id, bytes, device, total allocated, total reserved]
ROWS: list[list[Any]] = [
    [1, -1, 1_000, 1, 0x100, 1, 512, "cuda:0", 512, 2048],
    [1, -1, 2_000, 2, 0x200, 2, 256, "cuda:1", 256, 4096],
    [1, -1, 3_000, 3, 0x300, 3, 128, "cuda:1", 384, 8192],
    [1, -1, 4_000, 3, 0x300, 3, -128, "cuda:1", 256, 2048],  # the cache emptied since
    [1, -1, 5_000, 4, 0x400, 4, 64, "cpu", 64, 0],
]


def _snapshot(path: Path, rows: list[list[Any]], **fields: Any) -> Path:
    value = {
        "format": memory_snapshot.FORMAT,
        "version": memory_snapshot.VERSION,
        "torch": "2.13.0",
        "events": rows,
        "tensors": [],
        **fields,
    }
    path.write_bytes(msgspec.msgpack.encode(value))
    return path


def test_each_device_gets_its_own_allocations_and_peaks(tmp_path: Path) -> None:
    path = _snapshot(tmp_path / memory_snapshot.SNAPSHOT_FILE, ROWS)
    first = from_snapshot(path)  # the first accelerator
    assert (first.device, first.devices) == ("cuda:0", ["cuda:0", "cuda:1", "cpu"])
    assert first.raw == [(1_000, CREATE, 512, UNKNOWN)]
    assert (first.max_allocated, first.max_reserved) == (512, 2048)
    second = from_snapshot(path, "cuda:1")
    assert second.raw == [
        (2_000, CREATE, 256, UNKNOWN),
        (3_000, CREATE, 128, UNKNOWN),
        (4_000, DESTROY, -128, UNKNOWN),
    ]
    assert (second.max_allocated, second.max_reserved) == (384, 8192)
    cpu = from_snapshot(path, "cpu")
    assert cpu.raw == [(5_000, CREATE, 64, UNKNOWN)]
    assert (cpu.max_allocated, cpu.max_reserved) == (64, None)  # the CPU allocator keeps no cache
    assert from_snapshot(path, "cuda").device == "cuda:0"
    with pytest.raises(MemoryTimelineError, match=r"--device cuda:2: .* holds: cuda:0, cuda:1, cpu$"):
        from_snapshot(path, "cuda:2")
    # the run's own device, which this capture allocated nothing on: an empty timeline of it
    empty = from_snapshot(path, "cuda:2", strict=False)
    assert (empty.device, empty.raw, empty.max_allocated, empty.max_reserved) == ("cuda:2", [], None, None)


def test_a_snapshot_of_another_version_or_damaged_is_said_so(tmp_path: Path) -> None:
    other = _snapshot(tmp_path / "other.msgpack", ROWS, version=memory_snapshot.VERSION + 1)
    with pytest.raises(
        MemoryTimelineError, match=rf"of version {memory_snapshot.VERSION + 1}; this npuprof reads"
    ):
        load_snapshot(other)
    damaged = _snapshot(tmp_path / "damaged.msgpack", ROWS, tensors=None)
    with pytest.raises(MemoryTimelineError, match=r"is a damaged memory snapshot$"):
        load_snapshot(damaged)
    foreign = tmp_path / "foreign.msgpack"
    foreign.write_bytes(msgspec.msgpack.encode({"format": "something else"}))
    with pytest.raises(MemoryTimelineError, match=r"is not a memory snapshot npuprof wrote$"):
        load_snapshot(foreign)
