"""The `npuprof` command: a thin typer app; each subcommand lives in its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="npuprof",
    help="Profile PyTorch training (Ascend NPU, CUDA, CPU) without editing the training script.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


COMMAND_MODULES = ("run", "analyse", "export_stacks", "memory_timeline")


def _register() -> None:
    import importlib

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"npuprof.cli.{name}")
        except ModuleNotFoundError as exc:  # TODO(lead): remove once every command module exists
            if exc.name != f"npuprof.cli.{name}":
                raise
            continue
        module.register(app)


def main() -> None:
    _register()
    app(prog_name="npuprof")
