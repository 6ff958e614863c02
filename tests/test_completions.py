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
