"""`npuprof run` parses simple flags without typer (start-up budget); both paths must agree exactly."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import typer
from conftest import clean_env
from conftest import npuprof as npuprof_cli

import npuprof.runner
from npuprof.cli import run_flags
from npuprof.cli.main import get_app
from npuprof.config import ConfigError, template_json

BOOL_KEYS = run_flags.BOOL_FLAGS


def _run_command():  # a click command (typer vendors its own click)
    return typer.main.get_command(get_app()).commands["run"]


def _via_typer(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    seen: list[dict] = []

    def fake_execute(cfg, command):
        seen.append({"config": cfg.to_payload(), "command": list(command)})
        return 0

    monkeypatch.setattr(npuprof.runner, "execute", fake_execute)
    capsys.readouterr()
    code = _run_command().main(argv, prog_name="npuprof run", standalone_mode=False)
    err = capsys.readouterr().err
    return (seen[0] if seen else None), (code or 0), err


def _via_fast(argv: list[str], capsys: pytest.CaptureFixture[str]):
    parsed = run_flags.parse_fast(argv)
    assert parsed is not None, f"the fast path declined {argv}"
    flags, config, command = parsed
    try:
        cfg = run_flags.build_config(config, flags, command=command)
    except ConfigError as exc:
        return None, 2, f"npuprof run: error: {exc.one_line()}\n"
    return {"config": cfg.to_payload(), "command": command}, 0, ""


def _cases(tmp: Path) -> list[list[str]]:
    config_file = tmp / "profiler_config.json"
    base = template_json()
    config_file.write_text(json.dumps(base))
    cases = [
        ["--", "python", "-c", "pass"],
        ["-o", "x//y/", "--active", "2", "--metadata", "a=b", "--metadata", "c=d", "--no-gzip", "--", "py"],
        ["--gc-detect-threshold", "1.5", "--ranks", "0,2-3", "--", "python", "t.py", "--", "--lr", "1"],
        ["--active", "2", "--active", "3", "--output=out", "--skip-first=0", "--", "x"],
        ["--skip-first", "1", "--wait", "1", "--warmup", "0", "--repeat", "2", "--level", "1", "--", "x"],
        ["--aic-metrics", "pipeutilization", "--export-type", "DB", "--activities", "cpu", "--", "x"],
        ["--with-stack", "--export-stacks", "self_cpu_time_total", "--record-shapes", "--", "x"],
        ["--profile-memory", "--record-shapes", "--with-stack", "--memory-timeline", ".json", "--", "x"],
        ["--step-on", "mypkg.infer:Engine.generate", "--worker-name", "node3", "--", "x"],
        ["--step-on", "cnn.py:train_step", "--", "python", "cnn.py"],
        ["--step-on", "models/cnn.py:Net.step", "--", "python", "train.py"],
        ["--config", str(config_file), "--active", "4", "--", "x"],
        ["--level", "7", "--", "x"],
        ["--ranks", "a", "--", "x"],
        ["--worker-name", "a/b", "--", "x"],
        ["--active", "0", "--", "x"],
        ["--export-stacks", "self_cpu_time_total", "--", "x"],
        ["--aic-metrics", "Nope", "--", "x"],
    ]
    cases += [[f"--{k.replace('_', '-')}", "--", "x"] for k in BOOL_KEYS]
    cases += [[f"--no-{k.replace('_', '-')}", "--", "x"] for k in BOOL_KEYS]
    return cases


def test_fast_path_and_typer_build_the_same_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in _cases(tmp_path):
        assert _via_fast(argv, capsys) == _via_typer(argv, monkeypatch, capsys), argv


@pytest.mark.parametrize(
    "argv",
    [
        ["-h"],
        ["--help", "--", "x"],
        ["--active", "-1", "--", "x"],
        ["--active", " 2", "--", "x"],
        ["--active", "1e2", "--", "x"],
        ["--active", "9" * 5000, "--", "x"],  # int() refuses over 4300 digits (helper-211)
        ["--skip-first=" + "9" * 19, "--", "x"],
        ["--bogus", "--", "x"],
        ["python", "train.py"],
        ["--"],
        ["-o=x", "--", "y"],
        ["-o", "--", "y"],
        ["--gzip=yes", "--", "y"],
        ["--worker-name", "", "--", "y"],
    ],
)
def test_anything_unusual_goes_to_typer(argv: list[str]) -> None:
    assert run_flags.parse_fast(argv) is None


def test_fast_table_matches_the_typer_command() -> None:
    from npuprof.cli.run import run_command

    hints = typing.get_type_hints(run_command)
    kinds = {int: "int", float: "float", Path: "path", str: "str", list[str]: "list"}
    expected: dict[str, tuple[str, object]] = {}
    for param in _run_command().params:
        if param.param_type_name != "option" or param.name in ("help",):
            continue
        if param.is_flag and param.secondary_opts:
            for opt in param.opts:
                expected[opt] = (param.name, True)
            for opt in param.secondary_opts:
                expected[opt] = (param.name, False)
            continue
        (inner,) = [a for a in typing.get_args(hints[param.name]) if a is not type(None)]
        for opt in param.opts:
            expected[opt] = (param.name, kinds[inner])
    # a path is taken as a str by both (Path("") would be "."): the fast table names it "path"
    fast = {flag: (key, "str" if kind == "path" else kind) for flag, (key, kind) in run_flags.OPTIONS.items()}
    assert expected == fast


def test_importing_the_cli_loads_neither_typer_nor_rich() -> None:
    code = (
        "import sys, npuprof.cli.main, npuprof.cli.run_flags, npuprof.runner; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'click', 'torch')))"
    )
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_number_too_long_for_int_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """`--skip-first` of 5000 digits passed the fast path's digits check, and int() raised ValueError
    (Python refuses over 4300 digits): a traceback, exit 1 (helper-211)."""
    result = npuprof_cli("run", "--skip-first", "9" * 5000, "--", "x", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("npuprof run: error: Invalid value for '--skip-first'"), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
