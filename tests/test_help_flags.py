"""Help never shows a type for an option that takes no value (``--force <bool>`` read as if it took one,
and ``--force true`` is refused)."""

from __future__ import annotations

import sys

import pytest
from conftest import clean_env, npuprof

COMMANDS = ["analyse", "export-stacks", "memory-timeline", "trigger", "status", "info", "run"]


@pytest.mark.parametrize("command", COMMANDS)
def test_flags_show_no_value_type(command: str) -> None:
    result = npuprof(command, "--help", env={**clean_env(), "COLUMNS": "100"})
    assert result.returncode == 0, result.stderr
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout, result.stdout


def test_an_option_with_a_value_keeps_its_type() -> None:
    result = npuprof("analyse", "--help", env={**clean_env(), "COLUMNS": "100"})
    assert "--steps" in result.stdout and "<str>" in result.stdout


def test_ctrl_c_in_a_command_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """typer turns a KeyboardInterrupt into a silent exit 130: `npuprof analyse` cut short by Ctrl-C
    printed nothing (helper-76)."""
    import typer

    from npuprof.cli import main

    app = typer.Typer()

    @app.command()
    def analyse() -> None:
        raise KeyboardInterrupt

    @app.command()
    def status() -> None:  # (two commands: a group, as npuprof's)
        pass

    monkeypatch.setattr(main, "get_app", lambda: app)
    monkeypatch.setattr(sys, "argv", ["npuprof", "analyse"])
    assert main._run_typer() == 130
    assert capsys.readouterr().err == "npuprof analyse: interrupted (Ctrl-C); run it again\n"


def test_every_command_is_described_in_one_paragraph_even_under_python_oo() -> None:
    """helper-248: `npuprof --help` broke info's description after "Python," (its docstring's line break),
    and with PYTHONOPTIMIZE=2 (python -OO drops docstrings) run, trigger, status and info were listed with
    no description at all. Each command's help is given as one line of text, whatever the optimisation."""
    import json
    import subprocess

    code = (
        "import json, typer\n"
        "from npuprof.cli.main import get_app\n"
        "group = typer.main.get_command(get_app())\n"
        "print(json.dumps({name: command.help for name, command in group.commands.items()}))\n"
    )
    for flags in ([], ["-OO"]):
        done = subprocess.run(
            [sys.executable, *flags, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        helps = json.loads(done.stdout)
        assert sorted(helps) == sorted(COMMANDS), helps
        for name, text in helps.items():
            assert text and len(text.split()) > 3 and "\n" not in text, (flags, name, text)
