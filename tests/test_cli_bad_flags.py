"""Bad command-line input found by helper-211: one line naming what is wrong and the fix, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import clean_env, npuprof


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["export-stacks", ""],
            "npuprof export-stacks: source: is empty; give a rank directory (*_ascend_pt) or a trace file",
        ),
        (
            ["memory-timeline", "", "-o", "m.json"],
            "npuprof memory-timeline: source: is empty; give a rank directory (*_ascend_pt), a trace file or "
            "a *.raw.json.gz",
        ),
        (
            ["trigger", ""],
            "npuprof trigger: error: DIR: is empty; give the directory of npuprof run --dynamic DIR",
        ),
        (
            ["status", ""],
            "npuprof status: error: DIR: is empty; give the directory of npuprof run --dynamic DIR",
        ),
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(
    tmp_path: Path, args: list[str], line: str
) -> None:
    """typer's Path made "" the current directory: export-stacks '' and memory-timeline '' read the capture
    the current directory held, trigger '' wrote a request into it (analyse, run -o and --config refuse
    "" already)."""
    rank_dir = tmp_path / "host_1_20260101000000000_ascend_pt"  # a capture, and a dynamic DIR's files
    rank_dir.mkdir()
    (rank_dir / "host.1.pt.trace.json").write_text('{"traceEvents": []}')
    (tmp_path / "profiler_config.json").write_text("{}")
    (tmp_path / "log").mkdir()
    result = npuprof(*args, cwd=rank_dir if args[0] != "trigger" and args[0] != "status" else tmp_path)
    assert result.returncode == 2, result
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
    assert (tmp_path / "profiler_config.json").read_text() == "{}"
    assert sorted(p.name for p in rank_dir.iterdir()) == ["host.1.pt.trace.json"]


@pytest.mark.parametrize(
    "args, last_words",
    [
        (["--help"], ["memory-timeline", "info"]),
        ([], ["memory-timeline", "info"]),
        (["export-stacks", "--help"], ["--keep-idle-threads", "--rank"]),
        (["trigger", "--help"], ["--export-type", "Examples:"]),
    ],
)
def test_help_is_whole_where_stdout_cannot_encode_every_character(
    args: list[str], last_words: list[str]
) -> None:
    """In an ASCII locale (LC_ALL=C without Python's UTF-8 mode, PYTHONIOENCODING=ascii) the 'µs' of
    export-stacks' help raised UnicodeEncodeError, which stopped stdout: `npuprof --help` ended after its
    first panel, `npuprof export-stacks --help` at its Usage line, exit 0; the character is escaped now."""
    result = npuprof(*args, env=clean_env(PYTHONIOENCODING="ascii", COLUMNS="80"))
    assert result.returncode == (2 if not args else 0), result.stderr
    for word in last_words:
        assert word in result.stdout, result.stdout


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_every_typer_the_package_allows_carries_its_own_click() -> None:
    """``typer>=0.12`` let an environment keep a typer that takes click from pip: typer 0.12 with click 8.5
    raised TypeError building every command (a traceback for ``npuprof analyse --top x``), 0.13-0.15 with
    click >= 8.2 on ``npuprof status``; click 8.2.0 put "(env var: 'None')" in every bad value's message.
    Typer carries its own click from 0.26 (its metadata requires none), and 0.26.0-0.26.6 garbled "No
    such option"; the suite runs on the typer installed, which must be one the package allows."""
    import re
    from importlib import metadata

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    low, high = re.search(r'"typer>=([0-9.]+),<([0-9.]+)"', text).groups()  # type: ignore[union-attr]
    assert _version(low) >= (0, 27)
    installed = _version(metadata.version("typer"))
    assert _version(low) <= installed < _version(high)
    assert not [r for r in metadata.requires("typer") or [] if re.match(r"click\b", r)]
