"""The flags of `npuprof run` without typer: the config they build, and a fast path for the common case.

Importing typer and letting it coerce the 33 options of `run` (it builds a pydantic adapter for each)
costs ~200 ms, twice the launcher's whole start-up budget. When every flag before ``--`` is one of ours and
well-formed, `npuprof run` parses them here instead; anything else (help, completion, a typo, an odd value)
goes to typer, which owns the messages. tests/test_run_fastpath.py checks that both paths agree.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# kind of each option: "str", "int", "float", "path", "list" (repeatable) or a bool flag (True / False)
OPTIONS: dict[str, tuple[str, object]] = {
    "--activities": ("activities", "str"),
    "--level": ("level", "str"),
    "--aic-metrics": ("aic_metrics", "str"),
    "--gc-detect-threshold": ("gc_detect_threshold", "float"),
    "--export-type": ("export_type", "str"),
    "--skip-first": ("skip_first", "int"),
    "--wait": ("wait", "int"),
    "--warmup": ("warmup", "int"),
    "--active": ("active", "int"),
    "--repeat": ("repeat", "int"),
    "--step-on": ("step_on", "str"),
    "--ranks": ("ranks", "str"),
    "-o": ("output", "path"),
    "--output": ("output", "path"),
    "--worker-name": ("worker_name", "str"),
    "--metadata": ("metadata", "list"),
    "--export-stacks": ("export_stacks", "list"),
    "--memory-timeline": ("memory_timeline", "list"),
    "--min-free-space": ("min_free_space", "str"),
    "--config": ("config", "path"),
}
BOOL_FLAGS = (
    "record_shapes",
    "profile_memory",
    "with_stack",
    "with_modules",
    "with_flops",
    "l2_cache",
    "op_attr",
    "data_simplification",
    "record_op_args",
    "msprof_tx",
    "analyse",
    "gzip",
)
for _name in BOOL_FLAGS:
    _flag = "--" + _name.replace("_", "-")
    OPTIONS[_flag] = (_name, True)
    OPTIONS["--no-" + _flag[2:]] = (_name, False)

_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"[0-9]+(\.[0-9]*)?")
COMPLETE_VAR = "_NPUPROF_COMPLETE"


def parse_fast(argv: list[str]) -> tuple[dict[str, object], Path | None, list[str]] | None:
    """``argv`` after ``run`` -> (flags as typer would give them, --config, command), or None when
    typer must decide (anything unusual: it then parses and reports exactly as before)."""
    try:
        end = argv.index("--")
    except ValueError:
        return None
    command = argv[end + 1 :]
    if not command:
        return None
    flags: dict[str, object] = {}
    i = 0
    while i < end:
        token = argv[i]
        name, eq, inline = token.partition("=")
        if eq and not name.startswith("--"):
            return None  # click reads -o=x as "=x"; leave such forms to it
        spec = OPTIONS.get(name)
        if spec is None:
            return None
        key, kind = spec
        if isinstance(kind, bool):
            if eq:
                return None
            flags[key] = kind
            i += 1
            continue
        if eq:
            value = inline
            i += 1
        else:
            if i + 1 >= end:
                return None
            value = argv[i + 1]
            i += 2
        if not value or value.startswith("-"):
            return None
        if kind == "int":
            if not _INT.fullmatch(value):
                return None
            flags[key] = int(value)
        elif kind == "float":
            if not _FLOAT.fullmatch(value):
                return None
            flags[key] = float(value)
        elif kind == "path":
            flags[key] = Path(value)
        elif kind == "list":
            flags.setdefault(key, [])
            flags[key].append(value)  # type: ignore[attr-defined]
        else:
            flags[key] = value
    config = flags.pop("config", None)
    return flags, config, command  # type: ignore[return-value]


def fast_run(argv: list[str]) -> int | None:
    """Run `npuprof run ARGV` without typer when the flags are simple; None: let typer do it."""
    if COMPLETE_VAR in os.environ:
        return None
    parsed = parse_fast(argv)
    if parsed is None:
        return None
    flags, config, command = parsed
    from npuprof.config import ConfigError

    try:
        cfg = build_config(config, flags)
    except ConfigError as exc:
        sys.stderr.write(f"npuprof run: error: {exc.one_line()}\n")
        return 2
    from npuprof.runner import execute

    return execute(cfg, command)


def build_config(config_file: Path | None, flags: dict[str, object]):  # -> ProfileConfig
    """The base (defaults or --config FILE), then every flag the user gave, then validation."""
    from npuprof import config as c

    cfg = c.load_config_file(config_file) if config_file is not None else c.ProfileConfig()
    for key in (*BOOL_FLAGS, "gc_detect_threshold", "step_on", "worker_name"):
        if key in flags:
            setattr(cfg, key, flags[key])
    if "activities" in flags:
        cfg.activities = c.parse_activities(str(flags["activities"]))
    if "level" in flags:
        cfg.level = c.parse_level(str(flags["level"]))
    if "aic_metrics" in flags:
        cfg.aic_metrics = match_choice(str(flags["aic_metrics"]), c.AIC_METRICS, "--aic-metrics")
    if "export_type" in flags:
        cfg.export_type = str(flags["export_type"]).lower()
    for key in ("skip_first", "wait", "warmup", "active", "repeat"):
        if key in flags:
            setattr(cfg.schedule, key, flags[key])
    if "ranks" in flags:
        cfg.ranks = c.parse_ranks(str(flags["ranks"]))
    if "output" in flags:
        cfg.output = str(flags["output"])
    if "metadata" in flags:
        cfg.metadata.update(c.parse_metadata(list(flags["metadata"])))  # type: ignore[call-overload]
    if "export_stacks" in flags:
        cfg.export_stacks = list(flags["export_stacks"])  # type: ignore[call-overload]
    if "memory_timeline" in flags:
        cfg.memory_timeline = [f.lstrip(".") for f in flags["memory_timeline"]]  # type: ignore[attr-defined]
    if "min_free_space" in flags:
        cfg.min_free_space = str(flags["min_free_space"])
    return cfg.validate()


def match_choice(value: str, choices: tuple[str, ...], flag: str) -> str:
    from npuprof.config import ConfigError

    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise ConfigError(flag, f"unknown value {value!r}", "use one of " + ", ".join(choices))
