"""Test helper: run the export-stacks / memory-timeline commands in a subprocess as `npuprof` would.

Builds a typer app holding only these two commands, so the tests do not depend on the other commands'
modules; `python -m tests.stacks_support.cli_entry export-stacks ...`.
"""

from __future__ import annotations

import typer

from npuprof.cli import export_stacks, memory_timeline

app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)


@app.callback()
def _root() -> None:
    """npuprof (test entry)"""


export_stacks.register(app)
memory_timeline.register(app)

if __name__ == "__main__":
    app()
