"""A trace rewritten in place while a parse reads it (torch's export_chrome_trace into the same path, while
`npuprof analyse` runs): the parse is refused with one reason, and no table of a mix of two versions is
kept or marked parsed (docs/formats.md, "The result tree": a parse that fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyse_support.handmade import cpu_trace, cuda_trace, write_rank_dir

from npuprof.analysis import parse, report
from npuprof.analysis import scan as scan_module


@pytest.fixture
def rewritten_while_read(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The next parse's trace is rewritten in place (same inode) with another trace once it is scanned,
    before trace_view.json is written from its bytes. Append a trace's path to arm it."""
    armed: list[Path] = []
    real = scan_module.scan

    def scan(*args: object, **kwargs: object) -> object:
        scanned = real(*args, **kwargs)  # type: ignore[arg-type]
        while armed:
            armed.pop().write_text(json.dumps(cuda_trace(), indent=2))
        return scanned

    monkeypatch.setattr(scan_module, "scan", scan)
    return armed


def test_a_rank_dir_whose_trace_is_rewritten_is_not_parsed(
    tmp_path: Path, rewritten_while_read: list[Path]
) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    rewritten_while_read.append(rank_dir / "host.1.pt.trace.json")
    outcome = parse.parse_rank_dir(rank_dir)
    assert outcome.status == "changed" and "written while it was read" in outcome.reason, outcome
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    assert not (tables / "analyse.done").exists() and not list(tables.glob("*.csv")), sorted(tables.iterdir())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"  # written whole now: parsed


def test_a_forced_parse_of_a_rewritten_trace_keeps_the_earlier_tables(
    tmp_path: Path, rewritten_while_read: list[Path]
) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    earlier = {p.name: p.read_bytes() for p in tables.iterdir()}
    rewritten_while_read.append(rank_dir / "host.1.pt.trace.json")
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    assert outcome.status == "changed" and outcome.kept_earlier, outcome
    assert {p.name: p.read_bytes() for p in tables.iterdir()} == earlier


def test_a_bare_trace_rewritten_while_read_leaves_no_tables(
    tmp_path: Path, rewritten_while_read: list[Path]
) -> None:
    trace = tmp_path / "t.pt.trace.json"
    trace.write_text(json.dumps(cpu_trace(), indent=2))
    rewritten_while_read.append(trace)
    outcome, out_dir = report._parse_bare(trace, False, 1)
    assert outcome.status == "changed" and str(trace) in outcome.reason, outcome
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_stacks_of_a_trace_rewritten_while_read_are_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer

    from npuprof.cli.export_stacks import export_stacks
    from npuprof.reports import stacks

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    trace = rank_dir / "host.1.pt.trace.json"
    real = stacks.folded_from_trace

    def rewritten(*args: object, **kwargs: object) -> object:
        folded = real(*args, **kwargs)  # type: ignore[arg-type]
        trace.write_text(json.dumps(cuda_trace(), indent=2))  # in place, as the stacks were read
        return folded

    monkeypatch.setattr(stacks, "folded_from_trace", rewritten)
    out = tmp_path / "x.folded"
    with pytest.raises(typer.Exit) as ended:
        export_stacks(str(rank_dir), "self_cpu_time_total", out, None, 0.1, False, None)
    assert ended.value.exit_code == 1 and not out.exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"npuprof export-stacks: {trace}: the trace was written while it was read"), line


def test_a_memory_timeline_of_a_trace_rewritten_while_read_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer
    from analyse_support.handmade import mem

    from npuprof.cli.memory_timeline import memory_timeline
    from npuprof.reports import memory_timeline as mt

    with_memory = cpu_trace()
    with_memory["traceEvents"] += [mem(110, 4096, 4096, 1), mem(700, -4096, 0, 1)]
    rank_dir = write_rank_dir(tmp_path, with_memory)
    trace = rank_dir / "host.1.pt.trace.json"
    real = mt.load

    def rewritten(*args: object, **kwargs: object) -> object:
        data = real(*args, **kwargs)  # type: ignore[arg-type]
        trace.write_text(json.dumps(cpu_trace(), indent=2))  # in place, as it was read
        return data

    monkeypatch.setattr(mt, "load", rewritten)
    out = tmp_path / "m.json"
    with pytest.raises(typer.Exit) as ended:
        memory_timeline(str(rank_dir), out, None, None)
    assert ended.value.exit_code == 1 and not out.exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"npuprof memory-timeline: {trace}: the trace was written while it was read"), line
