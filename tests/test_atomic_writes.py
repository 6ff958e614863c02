"""Atomic writes never fail on text that came from bytes that were not UTF-8 (a path, a command line), and
never leave a partial file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from npuprof.results import atomic

NOT_UTF8 = os.fsdecode(b"/data/run-\xff\xfe")  # as Python reads such bytes: lone surrogates


def test_json_with_lone_surrogates_is_the_same_value_in_valid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    atomic.write_json(path, {"output": NOT_UTF8, "team": "性能"})
    data = path.read_bytes()
    data.decode("utf-8")  # valid UTF-8
    value = json.loads(data)
    assert value == {"output": NOT_UTF8, "team": "性能"}
    assert os.fsencode(value["output"]) == b"/data/run-\xff\xfe"


def test_plain_json_stays_readable_text(tmp_path: Path) -> None:
    path = tmp_path / "info.json"
    atomic.write_json(path, {"team": "性能"})
    assert path.read_text(encoding="utf-8") == '{\n    "team": "性能"\n}\n'


def test_text_with_lone_surrogates_gets_its_original_bytes(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    atomic.write_text(path, f"path\n{NOT_UTF8}\n")
    assert path.read_bytes() == b"path\n/data/run-\xff\xfe\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    atomic.write_json(path, {"old": True})
    with pytest.raises(TypeError), atomic.atomic_writer(path, "w") as handle:
        handle.write("{")
        raise TypeError("boom")
    assert json.loads(path.read_text()) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_a_fifo_named_as_the_file_is_not_replaced(tmp_path: Path) -> None:
    """The rename would replace a device or FIFO given as an output (as root, -o /dev/null replaced the
    system's /dev/null): refused, the node left as it was, no temporary file left."""
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        atomic.write_json(fifo, {"a": 1})
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
