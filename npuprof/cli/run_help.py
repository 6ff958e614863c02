"""`npuprof run --help`, written from the option registry to fit the terminal (80 columns and up).

typer's rich panels cut long flag names (`--gc-detect-thresho…`) and give a column to every `--no-*` form
at 80 columns, so `run`'s help is laid out here instead, as `git` and `nsys` lay theirs out: the flags on
one line, the help wrapped and indented under them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from npuprof.options import RUN_OPTIONS, Option

USAGE = "Usage: npuprof run [OPTIONS] -- COMMAND [ARGS]..."
SUMMARY = "Run COMMAND with profiling injected: no change to the training script."
INDENT = 8
MIN_WIDTH = 60
MAX_WIDTH = 100

EPILOG = """
Examples:

  npuprof run -- python examples/train.py

  npuprof run --ranks 1 --skip-first 5 --warmup 1 --active 3 -- torchrun --nproc-per-node 2 examples/train.py

  npuprof run --level 1 --aic-metrics PipeUtilization --record-shapes --with-stack -- python -m mypkg.train

  npuprof run --config profiler_config.json --active 5 -- python train.py

  npuprof run --dynamic cfg -- torchrun --nproc-per-node 8 train.py    (then: npuprof trigger cfg --active 2)

Default schedule: skip 5 steps, warm up 1, record 3, once (steps 6-8). One step is one Optimizer.step() of the first optimizer that steps; --step-on MODULE:QUALNAME counts returns of any other function.
"""  # noqa: E501 (one paragraph a line: render() wraps it to the terminal)


def flag_text(option: Option) -> str:
    """The flags of an option as typed: ``--record-shapes / --no-record-shapes``, ``--level none|0|1|2``."""
    names = list(option.flags)
    if option.kind == "bool":
        return " / ".join([*names, f"--no-{option.flag[2:]}"])
    metavar = option.metavar or option.kind.upper()
    return f"{', '.join(names)} {metavar}"


def render(width: int | None = None, epilog: str = "") -> str:
    """The whole help text, lines no longer than ``width`` (the terminal's, within 60..100)."""
    panels: dict[str, list[tuple[str, str]]] = {}
    for option in RUN_OPTIONS:
        default = "" if option.default in ("", "-") else f" [default: {option.default}]"
        panels.setdefault(option.panel, []).append((flag_text(option), option.help + default))
    return layout(USAGE, SUMMARY, panels, width, epilog)


def render_params(
    usage: str, summary: str, params: list[Any], width: int | None = None, epilog: str = ""
) -> str:
    """The help of a typer command (its click ``params``) laid out as `run`'s: `npuprof trigger --help`,
    whose rich panels cut the names of `run`'s flags it shares at 80 columns (``--gc-detect-thresho…``)."""
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in params:
        text = (getattr(param, "help", None) or "").replace("\\[", "[")
        if param.param_type_name == "argument":
            names = param.metavar or param.name.upper()
            panel, text = "Arguments", f"{text} [required]" if param.required else text
        else:
            panel = getattr(param, "rich_help_panel", None) or "Options"
            names = " / ".join([", ".join(param.opts), *param.secondary_opts])
            if not param.is_flag:
                names += f" {param.metavar or param.type.name.upper()}"
            if param.show_default and not param.is_flag and param.default is not None:
                text += f" [default: {param.default}]"
        panels.setdefault(panel, []).append((names, text))
    return layout(usage, summary, panels, width, epilog)


def layout(
    usage: str, summary: str, panels: dict[str, list[tuple[str, str]]], width: int | None, epilog: str
) -> str:
    """Each panel's flags on a line of their own, their help wrapped and indented under them."""
    import shutil  # here, not at the top: `npuprof run`'s start path imports this module
    import textwrap

    if width is None:
        width = shutil.get_terminal_size((80, 24)).columns
        columns = os.environ.get("COLUMNS", "")
        if columns.isascii() and columns.isdigit():
            width = int(columns)
    width = max(MIN_WIDTH, min(width, MAX_WIDTH))
    wrap = textwrap.TextWrapper(width=width, initial_indent=" " * INDENT, subsequent_indent=" " * INDENT)
    out = [usage, "", *textwrap.wrap(summary, width=width), ""]
    for panel, entries in panels.items():
        out.extend(textwrap.wrap(panel + ":", width=width))
        for names, text in entries:
            out.extend(textwrap.wrap(names, width=width, initial_indent="  ", subsequent_indent="    "))
            out.extend(wrap.wrap(text))
        out.append("")
    out.append("Other:")
    out.append("  -h, --help")
    out.extend(wrap.wrap("Show this message and exit."))
    if epilog:
        out.append("")
        for line in epilog.strip("\n").splitlines():  # a paragraph a line
            indent = "    " if line.startswith("  ") else ""
            out.extend(textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [""])
    return "\n".join(out) + "\n"


def asks_for_help(argv: list[str]) -> bool:
    """``npuprof run ... --help``: -h/--help among run's own arguments (before ``--``, or first)."""
    if "--" in argv:
        return any(a in ("-h", "--help") for a in argv[: argv.index("--")])
    return bool(argv) and argv[0] in ("-h", "--help")


def print_help() -> None:
    sys.stdout.write(render(epilog=EPILOG))
