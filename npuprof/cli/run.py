"""`npuprof run [flags] -- COMMAND...`: validate the flags, then hand off to the launcher."""

from __future__ import annotations

import inspect
import os
import re
import sys
from typing import Annotated, Any, Optional

import typer

from npuprof.cli.completions import offering
from npuprof.cli.run_flags import build_config, given_twice

# Typer reads these annotations at start-up; Optional[] keeps "given or not" visible for --config merging.
# ruff: noqa: UP045
from npuprof.cli.run_help import EPILOG, SUMMARY
from npuprof.options import RUN_OPTIONS, Option


def run_command(ctx: typer.Context, **params: Any) -> None:
    """`npuprof run` (run_help.SUMMARY)."""
    from npuprof.config import ConfigError

    command = params.pop("command", None)
    if not command:
        from npuprof.invocation import npuprof_cmd

        _fail(
            "COMMAND",
            "missing",
            f"put the command after --, e.g. {npuprof_cmd('run -- python train.py')} "
            f"({npuprof_cmd('run --help')}: the flags)",
        )
    config = params.pop("config", None)
    flags = {k: v for k, v in params.items() if v is not None}
    # first: in `--worker-name --ranks 0 --` the fault is --worker-name's, not the stray 0's
    _refuse_flags_taken_as_values(flags, config)
    _refuse_words_taken_for_the_command(list(command))
    notes, order = given_twice(sys.argv[2:] if sys.argv[1:2] == ["run"] else [])
    try:
        cfg = build_config(config, flags, metadata_order=order, command=list(command))
    except ConfigError as exc:
        _fail_line(exc.one_line())
    for line in notes:
        sys.stderr.write(f"npuprof run: warning: {line}\n")
    from npuprof.runner import execute

    raise typer.Exit(execute(cfg, list(command or [])))


_VALUE_LIKE = re.compile(
    r"(?i)true|false|yes|no|on|off|all|[+-]?\d+(\.\d*)?|\d+(-\d+)?(,\d+(-\d+)?)*|[^/=\s]+=.*"
)


def _refuse_words_taken_for_the_command(command: list[str]) -> None:
    """``--with-stack true -- python train.py`` ran ``true``, ``--ranks 0 1 --`` the command ``1``: a word
    that reads as a flag's value, then the ``--`` that starts the command, is a flag given a value it
    does not take (or a second one), never a command."""
    raw = sys.argv[2:] if sys.argv[1:2] == ["run"] else []
    if "--" not in raw:
        return
    end = raw.index("--")
    start = len(raw) - len(command)
    if not (0 < start < end) or raw[start:] != command:
        return
    if not (_VALUE_LIKE.fullmatch(command[0]) or _no_such_command(command[0])):
        return  # (a command whose own arguments hold a "--": python train.py -- --lr 1)
    before = raw[start - 1]
    option = _option_named(before)
    if option is None and start >= 2 and _option_named(raw[start - 2]) is not None:
        before = raw[start - 2]  # the word after a flag's value: a second value
        option = _option_named(before)
    if option is not None and option.kind == "bool":
        why = f"{before} takes no value (give it alone, or --no-{option.flag[2:]})"
    elif option is not None and option.kind == "list":
        why = f"{before} takes one value (give it again for another, e.g. {before} a {before} b)"
    elif option is not None:
        why = f"{before} takes one value ({option.metavar})"
    else:
        why = "it is no flag's value"
    _fail(repr(command[0]), f"before -- is not a command: {why}", "the command goes after --")


def _no_such_command(word: str) -> bool:
    """``--min-free-space 5 GiB -- python ...`` ran the command ``GiB -- python ...`` (exit 127, "command not
    found: 'GiB'"): a word before ``--`` that names no command is a flag's stray value, never the command."""
    import shutil

    return not os.path.exists(word) if "/" in word else shutil.which(word) is None


def _words_of(option: Option) -> tuple[str, ...]:
    """The words that name ``option`` on a command line (a flag's ``--no-`` form too)."""
    return (*option.flags, f"--no-{option.flag[2:]}") if option.kind == "bool" else option.flags


def _option_named(word: str) -> Option | None:
    return next((o for o in RUN_OPTIONS if word in _words_of(o)), None)


def _refuse_flags_taken_as_values(flags: dict[str, Any], config: Any) -> None:
    """A flag given no value took the next word: ``-o -- python ...`` made a directory named ``--``,
    ``-o --with-stack`` one named ``--with-stack``."""
    names = {"--"} | {word for o in RUN_OPTIONS for word in _words_of(o)}
    given = [(o.flag, flags.get(o.key)) for o in RUN_OPTIONS] + [("--config", config)]
    for flag, value in given:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item in names:
                _fail(flag, f"took {item!r} as its value", f"give {flag} a value before {item}")


_PYTHON_TYPES: dict[str, Any] = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "path": str,  # not Path: Path("") would turn an empty -o into "." (the current directory)
    "list": list[str],
}


def _typer_parameter(option: Option) -> inspect.Parameter:
    """One option of the registry as typer reads it: ``Annotated[Optional[T], typer.Option(...)] = None``
    (None: not given, so a --config file's value stands)."""
    declarations = list(option.flags)
    if option.kind == "bool":
        declarations = [f"{option.flag}/--no-{option.flag[2:]}"]
    text = option.help if option.default == "-" else f"{option.help} \\[default: {option.default}]"
    info = typer.Option(
        *declarations,
        help=text,
        metavar=option.metavar if option.kind != "bool" else None,
        rich_help_panel=option.panel,
        show_default=False,
        autocompletion=offering(values) if (values := _values_of(option)) else None,
    )
    annotation = Annotated[Optional[_PYTHON_TYPES[option.kind]], info]
    return inspect.Parameter(option.key, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def _values_of(option: Option) -> tuple[str, ...]:
    """The values an option takes one of (offered by the shell's completion); () for any other."""
    from npuprof import config as c

    return {
        "level": tuple(c.LEVELS),
        "aic_metrics": c.AIC_METRICS,
        "export_type": c.EXPORT_TYPES,
        "export_stacks": c.STACK_METRICS,
        "memory_timeline": c.MEMORY_FORMATS,
    }.get(option.key, ())


def _signature() -> inspect.Signature:
    command = Annotated[
        Optional[list[str]], typer.Argument(help="The command to profile, after --.", show_default=False)
    ]
    parameters = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        inspect.Parameter("command", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=command),
        *(_typer_parameter(option) for option in RUN_OPTIONS),
    ]
    return inspect.Signature(parameters, return_annotation=None)


run_command.__signature__ = _signature()  # type: ignore[attr-defined]
run_command.__annotations__ = {
    p.name: p.annotation
    for p in run_command.__signature__.parameters.values()  # type: ignore[attr-defined]
} | {"return": None}


def _fail(source: str, problem: str, fix: str) -> None:
    _fail_line(f"{source}: {problem}; {fix}")


def _fail_line(line: str) -> None:
    sys.stderr.write(f"npuprof run: error: {line}\n")
    raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command(
        "run",
        help=SUMMARY,
        epilog=EPILOG,
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": False},
    )(run_command)
