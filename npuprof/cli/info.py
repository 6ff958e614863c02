"""`npuprof info`: the backend npuprof would use here and why, versions, what the profiler supports."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from npuprof.cli.completions import offering

FORMATS = ("table", "json")
# given as help=, not read from the docstring: a docstring's line break showed in `npuprof --help`, and
# python -OO (PYTHONOPTIMIZE=2) drops docstrings, leaving the command without a description
HELP = (
    "Show the backend npuprof would use in this environment (and why), the versions of npuprof, Python, "
    "torch, torch_npu and CANN, and what the profiler here supports."
)


def info(
    output_format: Annotated[
        str,
        typer.Option(
            "--format", help="table (default) or json.", show_default=False, autocompletion=offering(FORMATS)
        ),
    ] = "table",
) -> None:
    """`npuprof info` (HELP)."""
    if output_format not in FORMATS:
        sys.stderr.write(f"npuprof info: error: --format: unknown {output_format!r}; use table or json\n")
        raise typer.Exit(2)
    from npuprof.cli.main import check_stdout, warn_flags_given_twice

    warn_flags_given_twice("info")
    from npuprof.machine_info import gather

    facts = gather()
    sys.stdout.write(json.dumps(facts, indent=2) + "\n" if output_format == "json" else render(facts))
    check_stdout("npuprof info", "the facts")


def render(facts: dict) -> str:
    backend = facts["backend"]
    lines = [f"backend     {backend['name'] or 'none'}: {backend['why']}"]
    lines += [f"            (not {item})" for item in backend.get("passed_over", [])]
    for key in ("npuprof", "python", "torch", "torch_npu", "cann", "matplotlib"):
        value = facts.get(key)
        lines.append(f"{key:<11} {value if value is not None else 'not installed'}")
    for key, value in facts.get("supported", {}).items():
        shown = ", ".join(value) if isinstance(value, list) else value
        lines.append(f"{key}(): {shown}")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    app.command("info", help=HELP)(info)
