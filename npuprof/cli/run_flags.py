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
from typing import TYPE_CHECKING

from npuprof.job_script import runs_as_main
from npuprof.options import BY_KEY, ENV_DYNAMIC, RUN_OPTIONS

if TYPE_CHECKING:
    from npuprof.config import ProfileConfig
    from npuprof.options import Option

# flag -> (option key, kind): "str", "int", "float", "path", "list" (repeatable) or a bool flag's value
OPTIONS: dict[str, tuple[str, object]] = {}
for _option in RUN_OPTIONS:
    for _flag in _option.flags:
        if _option.kind == "bool":
            OPTIONS[_flag] = (_option.key, True)
            OPTIONS["--no-" + _flag[2:]] = (_option.key, False)
        else:
            OPTIONS[_flag] = (_option.key, _option.kind)
BOOL_FLAGS = tuple(o.key for o in RUN_OPTIONS if o.kind == "bool")

# at most 18 digits: int() refuses more than 4300 (a ValueError, a traceback: helper-211), and no step
# count is longer; typer says what is wrong with a longer one
_INT = re.compile(r"[0-9]{1,18}")
_FLOAT = re.compile(r"[0-9]+(\.[0-9]*)?")
COMPLETE_VAR = "_NPUPROF_COMPLETE"


def parse_fast(argv: list[str]) -> tuple[dict[str, object], str | None, list[str]] | None:
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
            flags[key] = value  # as typer gives it (a str: see cli/run.py)
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

    notes, order = given_twice(argv)
    try:
        cfg = build_config(config, flags, metadata_order=order, command=command)
    except ConfigError as exc:
        sys.stderr.write(f"npuprof run: error: {exc.one_line()}\n")
        return 2
    for line in notes:
        _note(line, "npuprof run: warning")
    from npuprof.runner import execute

    return execute(cfg, command)


# what --dynamic excludes: the config file says when and where to capture (a time window too: with
# PROF_CONFIG_PATH standing for --dynamic, ProfileConfig's own "exclude --dynamic" named no variable to
# unset, helper-211)
_STATIC_KEYS = (*(o.key for o in RUN_OPTIONS if o.in_schedule), "ranks", "delay", "duration")


def build_config(
    config_file: str | Path | None,
    flags: dict[str, object],
    environ: dict[str, str] | None = None,
    metadata_order: list[str] | None = None,
    command: list[str] | None = None,
):
    """The base (defaults or --config FILE), then every flag the user gave, then validation. ``environ``'s
    PROF_CONFIG_PATH (default: the process's) stands for --dynamic when that flag is not given.
    ``metadata_order``: the keys ``metadata`` and ``metadata_json`` in the order their flags were given
    (given_twice), so that a KEY given by both is the last one's. ``command``: the job's (a --step-on that
    names a file is answered with the name that fits it)."""
    from npuprof import config as c

    if isinstance(step_on := flags.get("step_on"), str):
        module, qualname = c.parse_step_on(step_on, command=command)
        if command is not None and (how := runs_as_main(module, command)) is not None:
            # said at the run's end too, after a job of hours that counted nothing (README, --step-on)
            c.warn_on_stderr(
                f"--step-on {step_on}: the job runs {module} as its script ({how}), where it is __main__ and "
                f"not imported, so this counts no step unless a process imports it; --step-on "
                f"__main__:{qualname} counts the script's calls"
            )

    source = _dynamic_source(flags, os.environ if environ is None else environ)
    if source is not None:
        flags = {**flags, "dynamic": source[1]}
        static = [o.flag for o in RUN_OPTIONS if o.key in _STATIC_KEYS and o.key in flags]
        static += ["--config"] if config_file is not None else []
        if static:
            fix = "drop them" if len(static) > 1 else "drop it"
            fix += f", or unset {ENV_DYNAMIC}" if source[0] != "--dynamic" else ""
            raise c.ConfigError(
                source[0],
                f"excludes {', '.join(static)} (the file's start_step, active, is_rank and rank_list say "
                "when and where to capture)",
                fix,
            )
    _check_window(flags)
    cfg = c.load_config_file(config_file) if config_file is not None else c.ProfileConfig()
    if config_file is not None:
        try:
            cfg.validate()  # the file's own values, named as the file names them
        except c.ConfigError as exc:
            raise c.in_file_terms(exc, str(config_file)) from None
        window = [o.flag for o in RUN_OPTIONS if o.key in ("delay", "duration") and o.key in flags]
        if window and not cfg.schedule.off and cfg.schedule != c.Schedule():  # the file set start_step
            raise c.ConfigError(
                "/".join(window),
                f"exclude {config_file}'s start_step (it asks for captures by step; one time window is "
                "recorded)",
                "set start_step 0 in the file, or drop the time window",
            )
    interleaved = _interleaved_metadata(flags, metadata_order)
    for option in RUN_OPTIONS:
        if option.key in flags and option.key != "config":
            if interleaved is not None and option.key in _METADATA_KEYS:
                continue
            c.set_option(cfg, option, flags[option.key])
    for key, item in interleaved or ():
        c.set_option(cfg, BY_KEY[key], [item])
    if source is not None and source[0] != "--dynamic":  # its messages name the variable, not the flag
        cfg.given_as["dynamic"] = f"{ENV_DYNAMIC}={source[1]}"
    if cfg.dynamic is not None:
        cfg.schedule = c.Schedule(off=True)  # only the watched file starts captures
    try:
        cfg.validate()
    except c.ConfigError as exc:
        if config_file is not None and _set_by_the_file(cfg, exc.source):  # the flag was never typed
            raise c.in_file_terms(exc, str(config_file)) from None
        if source is None or source[0] == "--dynamic" or exc.source != "--dynamic":
            raise
        raise c.ConfigError(source[0], exc.problem, f"unset {ENV_DYNAMIC}, or give it a directory") from None
    _check_trace_dir(cfg.export_chrome_trace)
    if cfg.dynamic is not None and (overridden := _flags_each_request_sets(flags, cfg)):
        _warn_flags_each_request_sets(overridden, cfg)
    if config_file is not None and _no_capture_asked(cfg):
        # said at the end of the run too, when a job of hours has run without one
        c.warn_on_stderr(
            f"{config_file}: start_step 0 asks for no capture (as torch_npu's template does): the job runs "
            "without one; set start_step in the file, or give --skip-first / --active"
        )
    return cfg


# npuprof trigger and torch_npu's template write every key of profiler_config.json; with --dynamic the
# run's value of these stands only where a request leaves its key out (README, "Dynamic capture"). prof_dir
# is not one: a relative one, the template's "./" included, is under -o; min_free_space is the run's.
_PER_REQUEST_KEYS = (
    *(o.key for o in RUN_OPTIONS if o.config_key and o.key not in ("output", "min_free_space")),
    "metadata_json",
)


def _flags_each_request_sets(flags: dict[str, object], cfg: ProfileConfig) -> list[Option]:
    """The flags given to `npuprof run --dynamic` that ask for other than npuprof's default of a key that
    every request npuprof trigger or the template writes sets again: of no effect, and said nowhere
    (helper-286: --with-stack given to run, then `npuprof trigger DIR`, recorded no stacks)."""
    from npuprof.config import ProfileConfig

    default = ProfileConfig()
    field = {"metadata_json": "metadata"}
    return [
        BY_KEY[key]
        for key in _PER_REQUEST_KEYS
        if key in flags and getattr(cfg, field.get(key, key)) != getattr(default, field.get(key, key))
    ]


def _warn_flags_each_request_sets(options: list[Option], cfg: ProfileConfig) -> None:
    """One line: which flags are each request's, and the trigger that asks for them."""
    from npuprof.config import warn_on_stderr
    from npuprof.invocation import npuprof_cmd
    from npuprof.options import flag_text
    from npuprof.runner import shell_word

    typed = ", ".join(o.flag if o.kind == "list" else flag_text(o, getattr(cfg, o.key)) for o in options)
    asked = [flag_text(o, getattr(cfg, o.key)) for o in options if o.kind != "list"]
    asked += ["--metadata KEY=VALUE"] if any(o.kind == "list" for o in options) else []
    warn_on_stderr(
        f"--dynamic: {typed} set only what a request leaves out of its profiler_config.json, and npuprof "
        "trigger and torch_npu's template write every key (npuprof's defaults): give them to each request, "
        f"`{npuprof_cmd(' '.join(['trigger', shell_word(cfg.dynamic or ''), *asked]))}`, or set the keys in "
        "the file"
    )


def _set_by_the_file(cfg: ProfileConfig, flag: str) -> bool:
    """Whether the value ``flag`` stands for came from the config file (no flag given over it)."""
    return any(flag in option.flags and option.key in cfg.given_as for option in RUN_OPTIONS)


def _no_capture_asked(cfg: ProfileConfig) -> bool:
    """A config file's ``start_step: 0`` and no flag or time window that asks for captures."""
    return cfg.schedule.off and cfg.dynamic is None and cfg.delay is None and cfg.duration is None


_METADATA_KEYS = ("metadata", "metadata_json")


def _interleaved_metadata(flags: dict[str, object], order: list[str] | None) -> list[tuple[str, str]] | None:
    """(key, KEY=VALUE) of --metadata and --metadata-json in the order given, when both were given and
    ``order`` matches them; else None (each flag's entries in turn: --metadata-json's won whatever came
    last)."""
    if order is None or not all(isinstance(flags.get(key), list) for key in _METADATA_KEYS):
        return None
    left: dict[str, list[str]] = {key: list(flags[key]) for key in _METADATA_KEYS}  # type: ignore[call-overload]
    if sorted(order) != sorted(key for key, items in left.items() for _ in items):
        return None
    return [(key, left[key].pop(0)) for key in order]


def given_twice(
    argv: list[str],
    options: dict[str, tuple[str, object]] | None = None,
    command_follows: bool = True,
    names: dict[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """One warning line for each flag before ``--`` given twice with different values (the last wins, as
    in argparse and nsys: a wrapper's default overridden by a later flag is no mistake, but two values
    that disagree may be), and for each --metadata/--metadata-json KEY given two values; and the order of
    the --metadata and --metadata-json words (build_config's ``metadata_order``). ``options``: the flags to
    look for (default: run's); ``command_follows``: the first word that is no flag starts the command (run),
    else it is an argument among the flags (trigger's DIR); ``names``: the flag that names each key in a
    warning (default: run's)."""
    options = OPTIONS if options is None else options
    seen: dict[str, list[tuple[str, str, object]]] = {}  # key -> (flag, value as said, value)
    entries: dict[str, list[tuple[str, str]]] = {}
    order: list[str] = []
    end = argv.index("--") if "--" in argv else len(argv)
    i = 0
    while i < end:
        token = argv[i]
        name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        i += 1
        spec = options.get(name)
        if spec is None and _short_with_value(token, options):
            # -oDIR, and -o=DIR read as --output=DIR (cli/main.py)
            name, eq, inline = token[:2], "=", token[3:] if token[2] == "=" else token[2:]
            spec = options[name]
        if spec is None:
            if token.startswith("-") or not command_follows:
                continue  # no flag of ours (typer refuses it), or an argument
            break  # the command, started without --
        key, kind = spec
        if isinstance(kind, bool):
            seen.setdefault(key, []).append((name, name, kind))
            continue
        if not eq:
            if i >= end:
                break
            inline, i = argv[i], i + 1
        if key in _METADATA_KEYS:
            order.append(key)
            entries.setdefault(inline.partition("=")[0].strip(), []).append((name, inline))
        elif kind != "list":
            seen.setdefault(key, []).append((name, _said(inline), _value(kind, inline)))
    notes: list[str] = []
    for key, given in seen.items():
        if len({value for _, _, value in given}) > 1:
            values = ", then ".join(said if said == name else f"{name} {said}" for name, said, _ in given)
            flag = names[key] if names else BY_KEY[key].flag if key in BY_KEY else given[0][0]
            notes.append(f"{flag} is given {len(given)} times: {values}; the last is used")
    for key, given in entries.items():
        if key and len(set(given)) > 1:
            values = ", then ".join(f"{name} {_said(item)}" for name, item in given)
            notes.append(f"metadata {_said(key)} is given {len(given)} times: {values}; the last is used")
    return notes, order


def _short_with_value(token: str, options: dict[str, tuple[str, object]]) -> bool:
    """``-j4``: a short flag that takes a value, given it in the same word."""
    spec = options.get(token[:2]) if len(token) > 2 and token[1] != "-" else None
    return spec is not None and not isinstance(spec[1], bool)


def _value(kind: object, text: str) -> object:
    """What a value means, to compare two: ``--repeat 3`` and ``--repeat +3`` agree; a kind that is a
    function reads the meaning itself (analyse's ``--steps 3`` and ``--steps 3,3``)."""
    try:
        if callable(kind):
            return kind(text)
        return int(text) if kind == "int" else float(text) if kind == "float" else text
    except ValueError:
        return text


def _said(value: str) -> str:
    """A value as a warning shows it: as given when plain, else quoted (a newline must not end the line)."""
    return value if value.isprintable() and value.strip() == value and value else repr(value)


def _check_window(flags: dict[str, object]) -> None:
    """--delay/--duration record one time window: the schedule flags would say otherwise."""
    from npuprof import config as c

    window = [o.flag for o in RUN_OPTIONS if o.key in ("delay", "duration") and o.key in flags]
    static = [o.flag for o in RUN_OPTIONS if o.in_schedule and o.key in flags]
    if window and static:
        raise c.ConfigError(
            "/".join(window),
            f"excludes {', '.join(static)} (one time window is recorded)",
            "drop them" if len(static) > 1 else "drop it",
        )


def _check_trace_dir(path: str | None) -> None:
    from npuprof import config as c

    if path is not None and path.endswith(".gz"):
        raise c.ConfigError(
            "--export-chrome-trace",
            f"{path} names a gzip file, and the trace written there is plain JSON",
            "give a .json path (the result tree keeps the trace gzipped)",
        )
    if path is None:
        return
    from npuprof.results.paths import output_file_problem

    problem = output_file_problem(path)
    if problem is not None:
        raise c.ConfigError("--export-chrome-trace", problem, "give a file path in an existing directory")


def _dynamic_source(flags: dict[str, object], environ: dict[str, str]) -> tuple[str, str] | None:
    """(where --dynamic comes from, its value), or None. Says in one line what becomes of PROF_CONFIG_PATH
    (the launcher keeps it from the job: torch_npu's own dynamic mode must not run beside npuprof's)."""
    from_env = environ.get(ENV_DYNAMIC, "")
    given = flags.get("dynamic")
    if given is not None:
        if from_env:
            _note(
                f"{ENV_DYNAMIC} is removed from the job's environment (--dynamic {given} is watched instead)"
            )
        return "--dynamic", str(given)
    if not from_env:
        return None
    shown = from_env if from_env.isprintable() else repr(from_env)  # a newline must not end the line
    _note(
        f"{ENV_DYNAMIC}={shown} is taken as --dynamic {shown}, and removed from the job's environment "
        "so that torch_npu's own dynamic profiling does not run beside npuprof's"
    )
    return f"{ENV_DYNAMIC} (taken as --dynamic)", from_env


def _note(line: str, prefix: str = "npuprof") -> None:
    try:
        sys.stderr.write(f"{prefix}: {line}\n")
    except (OSError, ValueError):
        pass
