"""The shipped completion scripts are current, and completion really answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

from npuprof.cli.completions import COMPLETE_VAR, SHELLS, completion_script


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_shipped_scripts_are_current(shell: str) -> None:
    shipped = ROOT / "completions" / SHELLS[shell]
    assert shipped.read_text() == completion_script(shell), (
        f"{shipped} is stale: run python -m npuprof.cli.completions completions/"
    )


def _complete(words: str, cword: int) -> list[str]:
    env = clean_env(**{COMPLETE_VAR: "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
    result = subprocess.run(
        [sys.executable, "-m", "npuprof"], env=env, capture_output=True, text=True, timeout=60
    )
    return result.stdout.split()


def test_completion_lists_commands_and_flags() -> None:
    assert {"run", "analyse", "export-stacks", "memory-timeline"} <= set(_complete("npuprof ", 1))
    assert "--level" in _complete("npuprof run --le", 2)
    assert "--aic-metrics" in _complete("npuprof run --aic", 2)


def test_bash_script_loads(tmp_path: Path) -> None:
    script = ROOT / "completions" / SHELLS["bash"]
    result = subprocess.run(
        ["bash", "-c", f"source {script} && complete -p npuprof"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "_npuprof_completion" in result.stdout


def _offered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], incomplete: str
) -> list[str]:
    """What bash's Tab offers after ``npuprof ARGS INCOMPLETE``: the app asked in this process, as the
    shipped script asks it (COMP_WORDS, COMP_CWORD)."""
    from npuprof.cli.main import get_app

    words = ["npuprof", *args, incomplete]
    monkeypatch.setenv(COMPLETE_VAR, "complete_bash")
    monkeypatch.setenv("COMP_WORDS", " ".join(words))
    monkeypatch.setenv("COMP_CWORD", str(len(words) - 1))
    with pytest.raises(SystemExit):
        get_app()(prog_name="npuprof")
    return capsys.readouterr().out.split()


@pytest.mark.parametrize(
    ("args", "incomplete", "offered"),
    [
        (["analyse", "--format"], "", ["table", "json", "csv"]),
        (["analyse", "result/", "--format"], "c", ["csv"]),
        (["analyse", "--csv-table"], "", ["steps", "ranges"]),
        (["analyse", "--export-type"], "text", ["text", "text,db"]),
        (
            ["export-stacks", "--metric"],
            "",
            ["self_cpu_time_total", "self_npu_time_total", "self_cuda_time_total"],
        ),
        (["export-stacks", "-m"], "self_c", ["self_cpu_time_total", "self_cuda_time_total"]),
        (["status", "--format"], "", ["table", "json"]),
        (["info", "--format"], "", ["table", "json"]),
        (["run", "--export-stacks"], "self_n", ["self_npu_time_total"]),
        (["run", "--memory-timeline"], "json", ["json", "json.gz"]),
        (["run", "--level"], "", ["none", "0", "1", "2"]),
        (["trigger", "cfg", "--aic-metrics"], "Mem", ["Memory", "MemoryL0", "MemoryUB"]),
    ],
)
def test_an_option_of_fixed_values_completes_them(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    incomplete: str,
    offered: list[str],
) -> None:
    """helper-298: Tab after analyse's --format or export-stacks' --metric offered file names."""
    assert _offered(monkeypatch, capsys, args, incomplete) == offered
