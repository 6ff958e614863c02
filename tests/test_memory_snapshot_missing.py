"""The post-processor's memory timeline when the training process could not write its memory snapshot (a
full disk): one line that says so, not the missing file's errno twice (docs/formats.md: a requested file
that cannot be written is logged as "not produced" with why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npuprof.reports.memory_categories import load_snapshot
from npuprof.reports.memory_timeline import MemoryTimelineError


def test_a_snapshot_never_written_says_who_did_not_write_it(tmp_path: Path) -> None:
    with pytest.raises(MemoryTimelineError) as raised:
        load_snapshot(tmp_path / "memory_timeline.snapshot.msgpack")
    said = str(raised.value)
    assert said == (
        "the training process did not write memory_timeline.snapshot.msgpack "
        "(a full disk? npuprof.log says why)"
    ), said
