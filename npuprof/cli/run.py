"""`npuprof run [flags] -- COMMAND...`: validate the flags, then hand off to the launcher."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from npuprof.cli.run_flags import build_config

# Typer reads these annotations at start-up; Optional[] keeps "given or not" visible for --config merging.
# ruff: noqa: UP045

_SCHEDULE = "Schedule (torch.profiler.schedule semantics)"
_WHAT = "What to collect"
_ASCEND = "Ascend options (torch_npu _ExperimentalConfig; reported as ignored elsewhere)"
_OUT = "Output"

EPILOG = """
Examples:

  npuprof run -- python examples/train.py

  npuprof run --ranks 1 --skip-first 5 --warmup 1 --active 3 -- torchrun --nproc-per-node 2 examples/train.py

  npuprof run --level 1 --aic-metrics PipeUtilization --record-shapes --with-stack -- python -m mypkg.train

  npuprof run --config profiler_config.json --active 5 -- python train.py

Default schedule: skip 5 steps, warm up 1, record 3, once (steps 6-8). One step is one Optimizer.step()
of the first optimizer that steps; --step-on MODULE:QUALNAME counts returns of any other function.
"""


def run_command(
    ctx: typer.Context,
    command: Annotated[
        Optional[list[str]], typer.Argument(help="The command to profile, after --.", show_default=False)
    ] = None,
    activities: Annotated[
        Optional[str],
        typer.Option(
            "--activities",
            help="cpu, npu or cpu,npu (npu = the accelerator: NPU or CUDA). \\[default: cpu,npu]",
            rich_help_panel=_WHAT,
        ),
    ] = None,
    record_shapes: Annotated[
        Optional[bool],
        typer.Option(
            "--record-shapes/--no-record-shapes",
            help="Operator input shapes and dtypes. \\[default: off]",
            rich_help_panel=_WHAT,
            show_default=False,
        ),
    ] = None,
    profile_memory: Annotated[
        Optional[bool],
        typer.Option(
            "--profile-memory/--no-profile-memory",
            help="Memory allocations per operator. \\[default: off]",
            rich_help_panel=_WHAT,
            show_default=False,
        ),
    ] = None,
    with_stack: Annotated[
        Optional[bool],
        typer.Option(
            "--with-stack/--no-with-stack",
            help="Python call stacks of operators (adds overhead). \\[default: off]",
            rich_help_panel=_WHAT,
            show_default=False,
        ),
    ] = None,
    with_modules: Annotated[
        Optional[bool],
        typer.Option(
            "--with-modules/--no-with-modules",
            help="nn.Module hierarchy of operators. \\[default: off]",
            rich_help_panel=_WHAT,
            show_default=False,
        ),
    ] = None,
    with_flops: Annotated[
        Optional[bool],
        typer.Option(
            "--with-flops/--no-with-flops",
            help="Operator FLOPs. \\[default: off]",
            rich_help_panel=_WHAT,
            show_default=False,
        ),
    ] = None,
    level: Annotated[
        Optional[str],
        typer.Option(
            "--level", help="Profiler level: none, 0, 1 or 2. \\[default: 0]", rich_help_panel=_ASCEND
        ),
    ] = None,
    aic_metrics: Annotated[
        Optional[str],
        typer.Option(
            "--aic-metrics",
            help=(
                "AiCoreNone, PipeUtilization, ArithmeticUtilization, Memory, MemoryL0, "
                "ResourceConflictRatio, MemoryUB or L2Cache. \\[default: AiCoreNone]"
            ),
            rich_help_panel=_ASCEND,
        ),
    ] = None,
    l2_cache: Annotated[
        Optional[bool],
        typer.Option(
            "--l2-cache/--no-l2-cache",
            help="Write l2_cache.csv. \\[default: off]",
            rich_help_panel=_ASCEND,
            show_default=False,
        ),
    ] = None,
    op_attr: Annotated[
        Optional[bool],
        typer.Option(
            "--op-attr/--no-op-attr",
            help="aclnn operator attributes (db export). \\[default: off]",
            rich_help_panel=_ASCEND,
            show_default=False,
        ),
    ] = None,
    data_simplification: Annotated[
        Optional[bool],
        typer.Option(
            "--data-simplification/--no-data-simplification",
            help="Delete intermediate raw data after parsing. \\[default: on]",
            rich_help_panel=_ASCEND,
            show_default=False,
        ),
    ] = None,
    record_op_args: Annotated[
        Optional[bool],
        typer.Option(
            "--record-op-args/--no-record-op-args",
            help="Operator info for the AOE tuner. \\[default: off]",
            rich_help_panel=_ASCEND,
            show_default=False,
        ),
    ] = None,
    gc_detect_threshold: Annotated[
        Optional[float],
        typer.Option(
            "--gc-detect-threshold",
            metavar="MS",
            help="Record Python GC pauses longer than MS (0 = all). \\[default: off]",
            rich_help_panel=_ASCEND,
        ),
    ] = None,
    export_type: Annotated[
        Optional[str],
        typer.Option("--export-type", help="text or db. \\[default: text]", rich_help_panel=_ASCEND),
    ] = None,
    msprof_tx: Annotated[
        Optional[bool],
        typer.Option(
            "--msprof-tx/--no-msprof-tx",
            help="Custom marks and ranges (mstx). \\[default: off]",
            rich_help_panel=_ASCEND,
            show_default=False,
        ),
    ] = None,
    skip_first: Annotated[
        Optional[int],
        typer.Option(
            "--skip-first", help="Steps skipped once at the start. \\[default: 5]", rich_help_panel=_SCHEDULE
        ),
    ] = None,
    wait: Annotated[
        Optional[int],
        typer.Option(
            "--wait", help="Idle steps at the start of each cycle. \\[default: 0]", rich_help_panel=_SCHEDULE
        ),
    ] = None,
    warmup: Annotated[
        Optional[int],
        typer.Option(
            "--warmup",
            help="Warm-up steps (profiler on, not kept) per cycle. \\[default: 1]",
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    active: Annotated[
        Optional[int],
        typer.Option("--active", help="Recorded steps per cycle. \\[default: 3]", rich_help_panel=_SCHEDULE),
    ] = None,
    repeat: Annotated[
        Optional[int],
        typer.Option(
            "--repeat", help="Cycles; 0 = until training ends. \\[default: 1]", rich_help_panel=_SCHEDULE
        ),
    ] = None,
    step_on: Annotated[
        Optional[str],
        typer.Option(
            "--step-on",
            metavar="MODULE:QUALNAME",
            help=(
                "Count a step at each return of this function instead of Optimizer.step, "
                "e.g. mypkg.infer:Engine.generate."
            ),
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    ranks: Annotated[
        Optional[str],
        typer.Option(
            "--ranks",
            help="Ranks to profile: all, or e.g. 0,3-5. \\[default: all]",
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    output: Annotated[
        Optional[Path],
        typer.Option(
            "-o", "--output", help="Result directory. \\[default: ./npuprof_result]", rich_help_panel=_OUT
        ),
    ] = None,
    worker_name: Annotated[
        Optional[str],
        typer.Option(
            "--worker-name", help="Prefix of the rank dirs. \\[default: the hostname]", rich_help_panel=_OUT
        ),
    ] = None,
    analyse: Annotated[
        Optional[bool],
        typer.Option(
            "--analyse/--no-analyse",
            help="Parse each capture into ASCEND_PROFILER_OUTPUT/ in the background. \\[default: on]",
            rich_help_panel=_OUT,
            show_default=False,
        ),
    ] = None,
    gzip: Annotated[
        Optional[bool],
        typer.Option(
            "--gzip/--no-gzip",
            help="Gzip the raw trace (in the background, never in the step). \\[default: on]",
            rich_help_panel=_OUT,
            show_default=False,
        ),
    ] = None,
    metadata: Annotated[
        Optional[list[str]],
        typer.Option(
            "--metadata",
            metavar="KEY=VALUE",
            help="Written to profiler_metadata.json; repeatable.",
            rich_help_panel=_OUT,
        ),
    ] = None,
    export_stacks: Annotated[
        Optional[list[str]],
        typer.Option(
            "--export-stacks",
            metavar="METRIC",
            help=(
                "At each capture, write flame-graph stacks for self_cpu_time_total / self_npu_time_total "
                "/ self_cuda_time_total (needs --with-stack); repeatable."
            ),
            rich_help_panel=_OUT,
        ),
    ] = None,
    memory_timeline: Annotated[
        Optional[list[str]],
        typer.Option(
            "--memory-timeline",
            metavar="FORMAT",
            help=(
                "At each capture, export the memory timeline: html, json, json.gz or raw.json.gz "
                "(needs --profile-memory --record-shapes --with-stack); repeatable."
            ),
            rich_help_panel=_OUT,
        ),
    ] = None,
    min_free_space: Annotated[
        Optional[str],
        typer.Option(
            "--min-free-space",
            metavar="SIZE",
            help=(
                "Skip captures when the output's filesystem has less free space, e.g. 500MiB, 2G, 10GB, 3%; "
                "0 = never skip. \\[default: 5GiB or 5%, whichever is smaller]"
            ),
            rich_help_panel=_OUT,
        ),
    ] = None,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            metavar="FILE",
            help=(
                "A profiler_config.json (Ascend dynamic-profiling format) used as the base; "
                "flags override it."
            ),
            rich_help_panel=_OUT,
        ),
    ] = None,
) -> None:
    """Run COMMAND with profiling injected: no change to the training script."""
    from npuprof.config import ConfigError

    if not command:
        _fail("COMMAND", "missing", "put the command after --, e.g. npuprof run -- python train.py")
    flags = {k: v for k, v in ctx.params.items() if k not in ("command", "config") and v is not None}
    try:
        cfg = build_config(config, flags)
    except ConfigError as exc:
        _fail_line(exc.one_line())
    from npuprof.runner import execute

    raise typer.Exit(execute(cfg, list(command or [])))


def _fail(source: str, problem: str, fix: str) -> None:
    _fail_line(f"{source}: {problem}; {fix}")


def _fail_line(line: str) -> None:
    sys.stderr.write(f"npuprof run: error: {line}\n")
    raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command(
        "run",
        epilog=EPILOG,
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": False},
        no_args_is_help=True,
    )(run_command)
