"""The `npuprof` command: a thin typer app; each subcommand lives in its own module.

Importing this module is cheap: typer (and the command modules) load only when the app is needed.
`npuprof run` with simple flags skips typer altogether (npuprof.cli.run_flags), so the launcher starts
in tens of milliseconds.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

COMMAND_MODULES = ("run", "analyse", "export_stacks", "memory_timeline")
_app: list[typer.Typer] = []


def get_app() -> typer.Typer:
    """The typer app with every command registered (built once)."""
    if not _app:
        import typer

        app = typer.Typer(
            name="npuprof",
            help="Profile PyTorch training (Ascend NPU, CUDA, CPU) without editing the training script.",
            no_args_is_help=True,
            add_completion=True,
            pretty_exceptions_enable=False,
            context_settings={"help_option_names": ["-h", "--help"]},
        )
        _register(app)
        _app.append(app)
    return _app[0]


def __getattr__(name: str) -> Any:
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register(app: typer.Typer) -> None:
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(f"npuprof.cli.{name}").register(app)


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        from npuprof.cli.run_flags import fast_run

        code = fast_run(sys.argv[2:])
        if code is not None:
            _leave(code)
    get_app()(prog_name="npuprof")


def _leave(code: int) -> None:
    """Exit at once: the job is over and nothing of ours needs finalising; tearing the interpreter down
    would add ~15-25 ms to every run."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)
