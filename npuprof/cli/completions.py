"""Shell completion scripts for bash, zsh and fish, generated from the typer app.

Regenerate the shipped copies with ``python -m npuprof.cli.completions completions/``.
The scripts call back into ``npuprof`` for candidates, so every flag of every command completes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path

SHELLS = {"bash": "npuprof.bash", "zsh": "_npuprof", "fish": "npuprof.fish"}
COMPLETE_VAR = "_NPUPROF_COMPLETE"


def offering(values: Iterable[str]) -> Callable[[str], list[str]]:
    """A typer ``autocompletion`` for an option that takes one of ``values``: those that begin with what is
    typed (the shell's Tab after ``--format`` offered file names)."""
    choices = tuple(values)

    def complete(incomplete: str) -> list[str]:
        return [value for value in choices if value.startswith(incomplete)]

    return complete


def completion_script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="npuprof", complete_var=COMPLETE_VAR, shell=shell).rstrip() + "\n"


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in SHELLS.items():
        path = directory / name
        path.write_text(completion_script(shell))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "completions")):
        print(path)
