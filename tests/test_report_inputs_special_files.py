"""A FIFO given to export-stacks or memory-timeline as its source: one line that says what it is, not
"cannot read SOURCE: Not a directory" (README's rule: bad input gets one clear line)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer

from npuprof.cli.export_stacks import export_stacks
from npuprof.cli.memory_timeline import memory_timeline


def test_a_fifo_as_the_source_is_named_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "x.pt.trace.json"
    os.mkfifo(fifo)
    with pytest.raises(typer.Exit) as ended:
        export_stacks(str(fifo), "self_cpu_time_total", tmp_path / "x.folded", None, 0.1, False, None)
    assert ended.value.exit_code == 1
    with pytest.raises(typer.Exit) as ended:
        memory_timeline(str(fifo), tmp_path / "m.json", None, None)
    assert ended.value.exit_code == 1
    lines = capsys.readouterr().err.splitlines()
    said = f"{fifo} is a FIFO, neither a rank directory nor a trace file"
    assert lines == [f"npuprof export-stacks: {said}", f"npuprof memory-timeline: {said}"], lines


def test_a_run_output_whose_captures_went_to_a_prof_dir_elsewhere_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --dynamic run whose captures all went to a prof_dir outside -o: export-stacks said "-o has no
    trace", memory-timeline "capture with --profile-memory --record-shapes ..." (they had been), where
    analyse names the directory they are in."""
    import json

    from npuprof.results import layout

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    (out / "npuprof_run.json").write_text(json.dumps({"run_id": "abcdef123456", "captures": []}))
    layout.note_capture_root(out, "abcdef123456", elsewhere)
    with pytest.raises(typer.Exit) as ended:
        export_stacks(str(out), "self_cpu_time_total", None, None, 0.1, False, None)
    assert ended.value.exit_code == 1
    with pytest.raises(typer.Exit) as ended:
        memory_timeline(str(out), tmp_path / "m.json", None, None)
    assert ended.value.exit_code == 1
    lines = capsys.readouterr().err.splitlines()
    said = (
        f"no rank directory under {out}; its run captured into {elsewhere} (a --dynamic prof_dir): give a "
        "capture there"
    )
    assert lines == [
        f"npuprof export-stacks: {said}",
        f"npuprof memory-timeline: {said}",
    ], lines
