"""ProfileConfig: the one description of what to profile, built from CLI flags, a
``profiler_config.json`` (torch_npu's dynamic-profiling file, docs/formats.md) or the environment payload
handed to child processes.

Every entry point builds one of these; nothing else parses flags or config files.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npuprof.bounded_read import read_at_most

ACTIVITIES = ("cpu", "npu")
LEVELS = {"none": "Level_none", "0": "Level0", "1": "Level1", "2": "Level2"}
AIC_METRICS = (
    "AiCoreNone",
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "ResourceConflictRatio",
    "MemoryUB",
    "L2Cache",
)
# --export-type's values, normalised: npuprof's text tables, torch_npu's SQLite db files, or both.
EXPORT_TYPES = ("text", "db", "text,db")
_EXPORT_TYPES_FIX = "use text, db or text,db"
STACK_METRICS = ("self_cpu_time_total", "self_npu_time_total", "self_cuda_time_total")
# the device each device metric names; torch's own export_stacks reads any of its device metric names as
# the device's time (self_cuda_time_total is self_device_time_total, whatever the device), and so does
# npuprof (README, "export-stacks")
_METRIC_DEVICE = {"self_cuda_time_total": "CUDA", "self_npu_time_total": "NPU"}


def other_device_line(metric: str, npu: bool, flag: str = "--metric") -> str | None:
    """The line that says a device metric names another device than the capture's (an NPU if ``npu``,
    else a GPU), whose time is shown, and the ``flag`` that names it; None where it names the capture's
    own (or is no device metric)."""
    device = "NPU" if npu else "CUDA"
    if _METRIC_DEVICE.get(metric, device) == device:
        return None
    own = next(m for m, d in _METRIC_DEVICE.items() if d == device)
    return (
        f"{metric} on {'an NPU' if npu else 'a CUDA'} trace: the {'NPU' if npu else 'GPU'}'s device time is "
        f"shown, under that name (torch's export_stacks reads any device metric as the device's time; "
        f"{flag} {own} names it)"
    )


MEMORY_FORMATS = ("html", "json", "json.gz", "raw.json.gz")
DEFAULT_OUTPUT = "npuprof_result"

# Ranks are 0..MAX_RANK: a wider --ranks range would take the memory of its every number.
MAX_RANK = (1 << 20) - 1
# A profiler_config.json is a few hundred bytes (metadata at most 50 KiB): a larger --config is not one.
CONFIG_FILE_LIMIT = 1 << 20
METADATA_JSON_DEPTH = 32  # levels of lists and objects in one --metadata-json value
# --delay / --duration: ~3 years (a larger one overflowed the clock's conversions); said as 1e8
MAX_WINDOW_S = 1e8
MAX_GC_THRESHOLD_MS = 1e9  # --gc-detect-threshold: ~11 days; said as 1e9
_SHOWN_LIMIT = 80  # characters of a bad value quoted in an error

# torch_npu caps metadata at 4096 characters a value and 50 KiB in all
# (docs/formats.md, "profiler_metadata.json").
METADATA_VALUE_LIMIT = 4096
METADATA_TOTAL_LIMIT = 50 * 1024

# --min-free-space: "auto" is 5 GiB or 5 % of the filesystem, whichever is smaller.
MIN_FREE_SPACE_AUTO = "auto"
_AUTO_FREE_BYTES = 5 * 1024**3
_AUTO_FREE_PERCENT = 5
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(%|b|[kmgt](?:i?b)?)?")
_UNIT_BYTES = {"": 1, "b": 1}
_MAX_FREE_BYTES = 1 << 60  # 1 EiB
for _power, _letter in enumerate("kmgt", start=1):
    # As coreutils: K, KiB = 1024; KB = 1000.
    _UNIT_BYTES[_letter] = _UNIT_BYTES[_letter + "ib"] = 1024**_power
    _UNIT_BYTES[_letter + "b"] = 1000**_power

# --poll-interval's range, in seconds
POLL_MIN_S = 0.1
POLL_MAX_S = 3600.0

# NPUPROF_CONFIG larger than this goes through a file (Linux refuses one environment string over 128 KiB,
# MAX_ARG_STRLEN, and every process of the job copies the environment at each exec).
ENV_PAYLOAD_INLINE_LIMIT = 64 * 1024
# The form of NPUPROF_CONFIG (npuprof/payload.py reads it); raise it when a reader could misread the new form.
PAYLOAD_VERSION = 1
ENV_PAYLOAD_FILE_PREFIX = "@"
# The payload file: metadata at its limits is ~250 KiB of JSON, written as \xNN escapes (launch.text_metadata)
ENV_PAYLOAD_FILE_LIMIT = 16 << 20


class ConfigError(ValueError):
    """A bad setting. ``source`` names the flag or config key, ``fix`` says what would be accepted."""

    def __init__(self, source: str, problem: str, fix: str = "") -> None:
        self.source = source
        self.problem = problem
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.source}: {self.problem}"
        return f"{text}; {self.fix}" if self.fix else text


@dataclass
class Schedule:
    """torch.profiler.schedule semantics exactly: skip ``skip_first`` steps once, then cycle wait, warmup,
    active ``repeat`` times (0: until training ends)."""

    skip_first: int = 5
    wait: int = 0
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    off: bool = False  # no capture at all (a config file's start_step 0; --dynamic's run schedule)

    def validate(self) -> None:
        for name in ("skip_first", "wait", "warmup", "repeat"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                flag = "--" + name.replace("_", "-")
                raise ConfigError(flag, f"must be an integer >= 0, got {value!r}", f"e.g. {flag} 1")
        if not isinstance(self.active, int) or self.active < 1:
            raise ConfigError("--active", f"must be an integer >= 1, got {self.active!r}", "e.g. --active 3")

    def first_steps_needed(self) -> int:
        """Steps a run needs for every capture of a finite schedule to complete."""
        return self.skip_first + (self.wait + self.warmup + self.active) * max(self.repeat, 1)


@dataclass
class ProfileConfig:
    # what to collect (torch.profiler.profile's keywords)
    activities: list[str] = field(default_factory=lambda: list(ACTIVITIES))
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_modules: bool = False
    with_flops: bool = False
    # torch_npu's _ExperimentalConfig
    level: str = "Level0"
    aic_metrics: str = "AiCoreNone"
    l2_cache: bool = False
    op_attr: bool = False
    data_simplification: bool = True
    record_op_args: bool = False
    gc_detect_threshold: float | None = None
    export_type: str = "text"
    msprof_tx: bool = False
    # when
    schedule: Schedule = field(default_factory=Schedule)
    step_on: str | None = None
    ranks: list[int] | None = None  # None: every rank
    # where and what afterwards
    output: str = DEFAULT_OUTPUT
    worker_name: str | None = None
    analyse: bool = True
    gzip: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    export_stacks: list[str] = field(default_factory=list)
    memory_timeline: list[str] = field(default_factory=list)
    min_free_space: str = MIN_FREE_SPACE_AUTO  # see required_free_bytes
    # dynamic capture: the directory of the watched profiler_config.json, and the poll interval (None: auto)
    dynamic: str | None = None
    poll_interval: float | None = None
    # one time window instead of the schedule (agent/window_plan.py): seconds after the agent wakes, and
    # its length (None: until the process ends); both None: the schedule decides
    delay: float | None = None
    duration: float | None = None
    export_chrome_trace: str | None = None  # also a plain Chrome trace of each capture here (absolute)
    # option key -> what the user wrote for a value that no flag gave: a config file's key and value, or
    # PROF_CONFIG_PATH=DIR for --dynamic, so that the messages name it (options.given_text, runner's
    # dynamic_named) and not a flag never typed
    given_as: dict[str, str] = field(default_factory=dict, compare=False)

    # ---- validation -------------------------------------------------------------------------
    def validate(self) -> ProfileConfig:
        if not self.activities:
            raise ConfigError("--activities", "is empty", "give cpu, npu or cpu,npu")
        for activity in self.activities:
            if activity not in ACTIVITIES:
                raise ConfigError("--activities", f"unknown activity {activity!r}", "use cpu, npu or cpu,npu")
        if self.level not in LEVELS.values():
            raise ConfigError("--level", f"unknown level {self.level!r}", "use none, 0, 1 or 2")
        if self.aic_metrics not in AIC_METRICS:
            raise ConfigError(
                "--aic-metrics",
                f"unknown metric {self.aic_metrics!r}",
                "use one of " + ", ".join(AIC_METRICS),
            )
        if self.export_type not in EXPORT_TYPES:
            raise ConfigError("--export-type", f"unknown type {self.export_type!r}", _EXPORT_TYPES_FIX)
        if self.gc_detect_threshold is not None and not (
            math.isfinite(self.gc_detect_threshold) and 0 <= self.gc_detect_threshold <= MAX_GC_THRESHOLD_MS
        ):
            raise ConfigError(
                "--gc-detect-threshold",
                f"must be 0 to 1e9 ms, got {self.gc_detect_threshold}",
                "e.g. 10",
            )
        if self.op_attr and self.level == "Level_none":
            raise ConfigError("--op-attr", "needs a profiler level other than none", "add --level 0")
        self.schedule.validate()
        if self.ranks:  # parse_ranks makes them so; a payload written by hand may not (npuprof/payload.py)
            _check_rank(min(self.ranks), "--ranks")
            _check_rank(max(self.ranks), "--ranks")
        if self.step_on is not None:
            parse_step_on(self.step_on)
        for metric in self.export_stacks:
            if metric not in STACK_METRICS:
                raise ConfigError(
                    "--export-stacks", f"unknown metric {metric!r}", "use " + " or ".join(STACK_METRICS)
                )
        for fmt in self.memory_timeline:
            if fmt not in MEMORY_FORMATS:
                raise ConfigError(
                    "--memory-timeline", f"unknown format {fmt!r}", "use " + ", ".join(MEMORY_FORMATS)
                )
        # with --dynamic, each capture's with_stack, record_shapes and profile_memory are the file's, which
        # npuprof trigger writes (README, "Dynamic capture"): a capture without them is warned of in the
        # dynamic logs and writes none (agent/dynamic_request.py); a flag of run's would have no effect
        if self.export_stacks and not self.with_stack and self.dynamic is None:
            raise ConfigError("--export-stacks", "needs Python stacks in the trace", "add --with-stack")
        if self.memory_timeline and self.dynamic is None:
            missing = [
                flag
                for flag, on in (
                    ("--record-shapes", self.record_shapes),
                    ("--profile-memory", self.profile_memory),
                )
                if not on
            ]
            needs, add = list(missing), list(missing)
            if not (self.with_stack or self.with_modules):
                needs.append("--with-stack (on Ascend NPUs, or --with-modules)")
                add.append("--with-stack")
            if needs:
                raise ConfigError("--memory-timeline", "needs " + ", ".join(needs), "add " + " ".join(add))
        if not self.output.strip():
            raise ConfigError("--output", "is empty", "give a directory, e.g. -o npuprof_result")
        # a newline or a tab: torch's trace writer fails on them (bytes that are not UTF-8, kept as
        # surrogates, are fine)
        if any(c < " " or c == "\x7f" for c in self.output):
            raise ConfigError(
                "--output",
                f"{_shown(self.output)} holds a control character",
                "give a directory name without one",
            )
        if self.worker_name is not None and not is_safe_name(self.worker_name):
            raise ConfigError(
                "--worker-name",
                f"{_shown(self.worker_name)} may hold only letters, digits, '_', '-' and '.', not start with "
                f"'.' (a hidden file) and take at most {WORKER_NAME_LIMIT} bytes (it starts file names)",
                "e.g. --worker-name node3",
            )
        _check_metadata(self.metadata)
        parse_min_free_space(self.min_free_space)
        self._validate_dynamic()
        self._validate_window()
        return self

    @property
    def export_db(self) -> bool:
        """--export-type db or text,db: the SQLite files (ascend_pytorch_profiler_{rank}.db, analysis.db)."""
        return self.export_type in ("db", "text,db")

    @property
    def timed(self) -> bool:
        """One time window (--delay/--duration) instead of the schedule."""
        return self.delay is not None or self.duration is not None

    def _validate_window(self) -> None:
        for flag, value, least in (("--delay", self.delay, 0.0), ("--duration", self.duration, None)):
            if value is None:
                continue
            if not (isinstance(value, int | float) and math.isfinite(value) and value <= MAX_WINDOW_S) or (
                value < least if least is not None else value <= 0
            ):
                bound = "0 to" if least is not None else "over 0, up to"
                raise ConfigError(flag, f"must be {bound} 1e8 seconds, got {value!r}", f"e.g. {flag} 5")
        if self.timed and self.dynamic is not None:
            raise ConfigError("--delay/--duration", "exclude --dynamic", "use one of them")
        if self.export_chrome_trace is not None and (
            not self.export_chrome_trace.strip()
            or "\0" in self.export_chrome_trace
            or self.export_chrome_trace == "-"
        ):
            stdout = " (no trace is written to stdout)" if self.export_chrome_trace == "-" else ""
            raise ConfigError(
                "--export-chrome-trace",
                f"{_shown(self.export_chrome_trace)} is not a file name{stdout}",
                "e.g. trace.json",
            )
        if self.export_chrome_trace is not None and any(
            c < " " or c == "\x7f" for c in self.export_chrome_trace
        ):
            raise ConfigError(  # as --output: a newline would break every line that names the trace
                "--export-chrome-trace",
                f"{_shown(self.export_chrome_trace)} holds a control character",
                "give a file name without one",
            )

    def _validate_dynamic(self) -> None:
        if self.dynamic is not None and (not self.dynamic.strip() or "\0" in self.dynamic):
            raise ConfigError(
                "--dynamic", f"{_shown(self.dynamic)} is not a directory name", "e.g. --dynamic cfg"
            )
        if self.dynamic is not None and any(c < " " or c == "\x7f" for c in self.dynamic):
            raise ConfigError(  # as --output: a newline broke the launcher's log line and the commands it
                "--dynamic",  # suggests (npuprof trigger DIR)
                f"{_shown(self.dynamic)} holds a control character",
                "give a directory name without one",
            )
        if self.poll_interval is None:
            return
        if self.dynamic is None:
            raise ConfigError("--poll-interval", "has a meaning only with --dynamic", "add --dynamic DIR")
        if not (math.isfinite(self.poll_interval) and POLL_MIN_S <= self.poll_interval <= POLL_MAX_S):
            raise ConfigError(
                "--poll-interval",
                f"must be {POLL_MIN_S:g} to {POLL_MAX_S:g} seconds, got {self.poll_interval:g}",
                "e.g. --poll-interval 2",
            )

    # ---- the environment payload --------------------------------------------------------------
    def to_payload(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ProfileConfig:
        data = dict(payload)
        data["schedule"] = Schedule(**data.get("schedule", {}))
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_env(self, run: dict[str, Any]) -> str:
        """The one environment variable value: the config plus facts about the run."""
        document = {"version": PAYLOAD_VERSION, "config": self.to_payload(), "run": run}
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)  # escaping makes it ~6x larger
        try:
            text.encode("utf-8")
            os.fsencode(text)  # the environment's encoding: ASCII in a C/POSIX locale without UTF-8 mode
        except UnicodeEncodeError:  # lone surrogates (e.g. undecodable argv bytes), or an 'é' that the
            text = json.dumps(document, separators=(",", ":"))  # locale cannot encode: kept escaped
        return text

    # ---- views used by writers ----------------------------------------------------------------
    def common_config(self) -> dict[str, Any]:
        """profiler_info's ``config.common_config`` (docs/architecture.md, "Options", its profiler_info
        row)."""
        from npuprof.options import RUN_OPTIONS

        view: dict[str, Any] = {
            "activities": [
                "ProfilerActivity.CPU" if a == "cpu" else "ProfilerActivity.NPU" for a in self.activities
            ],
            "schedule": {k: v for k, v in dataclasses.asdict(self.schedule).items() if k != "off"},
        }
        for option in RUN_OPTIONS:
            if option.profiler_keyword and option.key != "activities":
                view[option.profiler_keyword] = getattr(self, option.key)
        return view

    def experimental_config(self) -> dict[str, Any]:
        """profiler_info's ``config.experimental_config``, keyed as torch_npu writes it."""
        from npuprof.options import TORCH_NPU_OPTIONS

        view = {"_" + o.npu_keywords[0]: getattr(self, o.key) for o in TORCH_NPU_OPTIONS}
        # Both types as torch_npu's list: msprof-analyze releases that read the type from profiler_info
        # take a list holding db as db, and a string only as itself.
        view["_export_type"] = export_type_value(self.export_type)
        return view

    def wants_rank(self, rank: int | None) -> bool:
        if self.ranks is None:
            return True
        return (rank if rank is not None else 0) in self.ranks


# ---- parsing helpers shared by the CLI and the config-file reader ---------------------------------
WORKER_NAME_LIMIT = 128  # bytes: rank dirs and traces add ~40 to it, a file name holds 255


def is_safe_name(name: str) -> bool:
    return (
        bool(name)
        and all(c.isalnum() or c in "_-." for c in name)
        and not name.startswith(".")
        and len(name.encode("utf-8", "surrogateescape")) <= WORKER_NAME_LIMIT
    )


def parse_level(text: str, source: str = "--level") -> str:
    key = str(text).strip()
    if key in LEVELS:
        return LEVELS[key]
    if key in LEVELS.values():
        return key
    lowered = key.lower().replace("level_", "").replace("level", "")
    if lowered in LEVELS:
        return LEVELS[lowered]
    raise ConfigError(source, f"unknown level {text!r}", "use none, 0, 1 or 2")


def parse_export_type(value: Any, source: str = "--export-type") -> str:
    """``text``, ``db``, ``text,db`` (``db,text``, any case, spaces around the comma; a JSON list of the
    names from a config file, as torch_npu takes it) as one of EXPORT_TYPES."""
    parts = value if isinstance(value, list) else str(value).split(",")
    names = {str(part).strip().lower() for part in parts}
    if not names or not names <= {"text", "db"}:
        shown = repr(value) if isinstance(value, str) and len(value) <= _SHOWN_LIMIT else _shown(value)
        raise ConfigError(source, f"unknown type {shown}", _EXPORT_TYPES_FIX)
    return ",".join(t for t in ("text", "db") if t in names)


def export_type_value(export_type: str) -> str | list[str]:
    """An export type as torch_npu's config takes it: one name, or the list of both."""
    return export_type.split(",") if "," in export_type else export_type


def parse_activities(text: str, source: str = "--activities") -> list[str]:
    names = [part.strip().lower() for part in str(text).split(",") if part.strip()]
    aliases = {"cuda": "npu", "gpu": "npu", "device": "npu"}
    result: list[str] = []
    for name in names:
        name = aliases.get(name, name)
        if name not in ACTIVITIES:
            raise ConfigError(source, f"unknown activity {name!r}", "use cpu, npu or cpu,npu")
        if name not in result:
            result.append(name)
    if not result:
        raise ConfigError(source, "is empty", "give cpu, npu or cpu,npu")
    return result


def parse_ranks(text: str, source: str = "--ranks") -> list[int] | None:
    """``all`` -> None; ``0,3-5`` -> [0, 3, 4, 5]."""
    text = str(text).strip()
    if text.lower() == "all":
        return None
    ranks: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if low > high or low < 0:
                    raise ValueError
            else:
                low = high = int(part)
        except ValueError:
            raise ConfigError(source, f"bad rank list {_shown(text)}", "use all, or e.g. 0,3-5") from None
        _check_rank(high, source)
        ranks.update(range(max(low, 0), high + 1))
    if not ranks:
        raise ConfigError(source, "is empty", "use all, or e.g. 0,3-5")
    return sorted(ranks)


def ranks_text(ranks: list[int]) -> str:
    """``ranks`` as --ranks takes them, runs of consecutive ranks as ranges: [0, 1, 2, 5] -> ``0-2,5``
    (a request for 60,001 ranks was told with every number: 350 KB lines in the dynamic logs, which rotate
    at 200 KB, and on the terminal)."""
    parts: list[str] = []
    ordered = sorted(set(ranks))
    start = 0
    for i, rank in enumerate(ordered):
        if i + 1 < len(ordered) and ordered[i + 1] == rank + 1:
            continue
        first = ordered[start]
        parts.append(str(first) if first == rank else f"{first}-{rank}")
        start = i + 1
    return ",".join(parts)


def _check_rank(rank: int, source: str) -> None:
    if not 0 <= rank <= MAX_RANK:
        raise ConfigError(source, f"rank {_shown(rank)} is not in 0-{MAX_RANK}", "use all, or e.g. 0,3-5")


def _shown(value: Any) -> str:
    """``value`` for an error message: JSON, cut short (a config value can be a whole document). Letters
    beyond ASCII as they are (``--worker-name`` of 65 'é' was said as 65 ``\\u00e9``), what is not
    printable escaped (a lone surrogate: a byte of a C-locale argument; a bidirectional control)."""
    if isinstance(value, _PastFloatRange):
        return value.text[:_SHOWN_LIMIT]
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else _escaped(c) for c in text)
    return text if len(text) <= _SHOWN_LIMIT else text[: _SHOWN_LIMIT - 3] + "..."


def _escaped(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def parse_metadata(items: list[str], source: str = "--metadata") -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(source, f"{item!r} is not KEY=VALUE", f"e.g. {source} dp=8")
        result[key.strip()] = value
    return result


def parse_metadata_json(items: list[str], source: str = "--metadata-json") -> dict[str, Any]:
    """--metadata-json KEY=JSON: the value parsed as JSON (torch_npu's add_metadata_json), nested at most
    METADATA_JSON_DEPTH levels."""
    result: dict[str, Any] = {}
    fix = "e.g. --metadata-json 'dp=[1, 2]'"
    for key, text in parse_metadata(items, source).items():
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            raise _too_deep(source, key, fix) from None
        except ValueError as exc:
            raise ConfigError(source, f"{key}: {_shown(text)} is not JSON ({exc})", fix) from None
        if _depth(value) > METADATA_JSON_DEPTH:
            raise _too_deep(source, key, fix)
        try:  # 1e400 reads as infinity: named here, as the flag the user gave (not as --metadata)
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise ConfigError(
                source, f"{key}: holds a number out of JSON's range (infinity or NaN)", "give a finite number"
            ) from None
        result[key] = value
    return result


def _too_deep(source: str, key: str, fix: str) -> ConfigError:
    return ConfigError(source, f"{key}: nests deeper than {METADATA_JSON_DEPTH} levels", fix)


def _depth(value: Any, limit: int = METADATA_JSON_DEPTH + 1) -> int:
    """How deeply ``value`` nests lists and objects (counted up to ``limit``)."""
    level, current = 0, [value]
    while current and level < limit:
        inner = [c.values() if isinstance(c, dict) else c for c in current if isinstance(c, list | dict)]
        current = [v for values in inner for v in values]
        level += 1
    return level


def parse_step_on(text: str, source: str = "--step-on", command: list[str] | None = None) -> tuple[str, str]:
    """``MODULE:QUALNAME`` as (module, qualname), or ConfigError. ``command``: the job's, when the launcher
    knows it (a file name is then answered with the one fix that fits)."""
    module, sep, qualname = text.partition(":")
    parts = qualname.split(".") if qualname else []
    if sep and qualname and _is_file_name(module):  # cnn.py:train_step was reported only after the job
        named = qualname if all(p.isidentifier() for p in parts) else "FUNCTION"  # (x.py:f:g, x.py:<lambda>)
        raise ConfigError(
            source,
            f"{module!r} is a file name, not a module name",
            _step_on_for_file(module, named, command),
        )
    if not sep and _is_file_name(text):  # --step-on x.py was told '--step-on __main__:x.py'
        fix = _step_on_for_file(text, "FUNCTION", command)
        raise ConfigError(source, f"{text!r} is a file name, not MODULE:QUALNAME", fix)
    if sep and module and "<locals>" in parts:
        outer = ".".join(parts[: parts.index("<locals>")]) or "a function"
        raise ConfigError(
            source,
            f"{text!r} names a function defined inside {outer}, which cannot be named",
            "name a module-level function or a method of a module-level class (move it out of "
            f"{outer}, or name {module}:{outer} if each call of it is one step)",
        )
    if not sep or not module or not all(p.isidentifier() for p in parts) or not parts:
        plain = not sep and all(p.isidentifier() for p in text.split("."))  # a name of the script's own
        example = (
            f"--step-on __main__:{text} for the script's own"
            if plain
            else "e.g. --step-on mypkg.infer:Engine.generate"
        )
        raise ConfigError(source, f"{text!r} is not MODULE:QUALNAME", example)
    if not all(p.isidentifier() for p in module.split(".")):
        raise ConfigError(source, f"{module!r} is not a module name", "e.g. --step-on mypkg.infer:generate")
    return module, qualname


def _is_file_name(module: str) -> bool:
    """``cnn.py``, ``models/cnn.py``: a path where MODULE belongs (a module ``py`` of a package ``cnn`` is
    taken for the file: such a name is far more often the script's file than that module)."""
    return module.endswith(_SOURCE_SUFFIXES) or "/" in module or os.sep in module


_SOURCE_SUFFIXES = (".py", ".pyw", ".pyc")  # a Python file's, never a module's


def _step_on_for_file(path: str, qualname: str, command: list[str] | None) -> str:
    """What --step-on names the function of file ``path`` as: ``__main__`` where it is the script that
    ``command`` runs, else its module name (both, where the command is not known)."""
    own = f"--step-on __main__:{qualname}"
    stem = os.path.normpath(os.path.splitext(path)[0] if path.endswith(_SOURCE_SUFFIXES) else path)
    # a package's __init__.py is the package itself (`import pkg`; never imported as pkg.__init__)
    dotted = stem.replace(os.sep, ".").replace("/", ".").removesuffix(".__init__")
    as_module = f"--step-on {dotted}:{qualname}" if all(p.isidentifier() for p in dotted.split(".")) else ""
    imported = as_module or f"--step-on MODULE:{qualname}, MODULE as the job imports it"
    from npuprof.job_script import job_script

    # the script as the launcher reads the command (npuprof/job_script.py), not its first .py word
    # (`accelerate launch --config_file c.py train.py`); `python -m pkg.train` runs pkg/train.py as __main__
    script = job_script(command) if command is not None else None
    if script is not None and script.sure:
        if script.path is not None and _same_file(script.path, path):
            return f"{own} ({os.path.basename(path)} is the script being run)"
        if script.module is not None and _is_module_file(script.module, path, dotted):
            return f"{own} ({path} is the script being run: -m {script.module})"
    candidates = () if script is None else (script.path, *script.others)
    if script is None or any(word is not None and _same_file(word, path) for word in candidates):
        return f"{own} where {os.path.basename(path)} is the script being run, else {imported}"
    return imported


def _is_module_file(module: str, path: str, dotted: str) -> bool:
    """Whether ``path`` is the file of ``module`` run by `python -m` (from the working directory, or from a
    directory above it: ``src/pkg/train.py`` for ``pkg.train``)."""
    own_file = os.path.abspath(module.replace(".", os.sep) + ".py")
    if os.path.abspath(path) == own_file or f".{dotted}".endswith(f".{module}"):
        return True
    # a package run with -m: its __main__.py is the script (pkg/__main__.py for `python -m pkg`)
    return f".{dotted}".endswith(f".{module}.__main__")


def _same_file(script: str, path: str) -> bool:
    """Whether the command's ``script`` is the file ``path`` names (by its name alone where ``path`` has no
    directory: the job may run it from elsewhere)."""
    if os.path.dirname(path):
        return os.path.normpath(os.path.abspath(script)) == os.path.normpath(os.path.abspath(path))
    return os.path.basename(script) == path


def parse_min_free_space(value: Any, source: str = "--min-free-space") -> str:
    """A --min-free-space value (``auto``, ``0``, ``500MiB``, ``2G``, ``10GB``, ``3%``), checked, as text."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(source, f"must be a size, got {json.dumps(value)}", _MIN_FREE_SPACE_FIX)
    _free_bytes(str(value), 0, source)
    return str(value)


_MIN_FREE_SPACE_FIX = "use e.g. 500MiB, 2G, 10GB, 3%, auto (5GiB or 5%, whichever is smaller) or 0 (off)"


def required_free_bytes(spec: str, total_bytes: int) -> int:
    """The free space, in bytes, that --min-free-space ``spec`` requires on a filesystem of ``total_bytes``
    (0: no requirement). Raises ConfigError for a bad ``spec``."""
    return _free_bytes(spec, total_bytes, "--min-free-space")


def _free_bytes(spec: str, total_bytes: int, source: str) -> int:
    text = spec.strip().lower()
    if text == MIN_FREE_SPACE_AUTO:
        return min(_AUTO_FREE_BYTES, total_bytes * _AUTO_FREE_PERCENT // 100)
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ConfigError(source, f"{spec!r} is not a size", _MIN_FREE_SPACE_FIX)
    number, unit = float(match[1]), match[2] or ""
    if unit != "%":
        size = number * _UNIT_BYTES[unit]
        if not math.isfinite(size) or size > _MAX_FREE_BYTES:
            raise ConfigError(source, f"{spec[:40]!r} is larger than any disk", _MIN_FREE_SPACE_FIX)
        return int(size)
    if number > 100:
        raise ConfigError(source, f"{spec!r} is over 100%", _MIN_FREE_SPACE_FIX)
    return int(total_bytes * number / 100)


def decode_env_payload(value: str) -> dict[str, Any]:
    """NPUPROF_CONFIG as the launcher wrote it: the JSON document itself, or ``@/abs/path`` of a file
    holding it (for a payload too large for one environment string)."""
    if value.startswith(ENV_PAYLOAD_FILE_PREFIX):
        value = _payload_file_text(value[len(ENV_PAYLOAD_FILE_PREFIX) :])
    payload = json.loads(value)
    if not isinstance(payload, dict):
        raise ValueError(f"{value[:40]!r}...: the npuprof payload must be a JSON object")
    return payload


def _payload_file_text(path: str) -> str:
    """The payload file the launcher wrote, read in a process of the job. A regular file only, at most
    ENV_PAYLOAD_FILE_LIMIT bytes: ``@/some/fifo`` set by hand blocked the job's ``import torch`` for good,
    ``@/dev/zero`` read until memory ran out (ValueError for both)."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path!r} is not a regular file")
        data = read_at_most(fd, ENV_PAYLOAD_FILE_LIMIT)
    finally:
        os.close(fd)
    if len(data) > ENV_PAYLOAD_FILE_LIMIT:
        raise ValueError(f"{path!r} is over {ENV_PAYLOAD_FILE_LIMIT >> 20} MiB: no npuprof payload")
    return data.decode("utf-8")


def _check_metadata(metadata: dict[str, Any]) -> None:
    total = 0
    for key, value in metadata.items():
        try:
            text = value if isinstance(value, str) else json.dumps(value, allow_nan=False)
        except ValueError:  # 1e400 reads as infinity: the records would stop being JSON
            raise ConfigError(
                "--metadata",
                f"entry {str(key)[:40]!r} holds a number out of JSON's range (infinity or NaN)",
                "give a finite number, or a string",
            ) from None
        if len(str(key)) > METADATA_VALUE_LIMIT or len(text) > METADATA_VALUE_LIMIT:
            raise ConfigError("--metadata", f"entry {str(key)[:40]!r} is over 4096 characters", "shorten it")
        total += len(str(key)) + len(text)
    if total > METADATA_TOTAL_LIMIT:
        raise ConfigError("--metadata", "is over 50 KiB in all", "keep metadata small")


# ---- profiler_config.json (docs/formats.md) ----------------------------------------------------------------
def template_json() -> dict[str, Any]:
    """torch_npu's default profiler_config.json (the template its dynamic_profile.init writes)."""
    return {
        "activities": ["CPU", "NPU"],
        "prof_dir": "./",
        "analyse": False,
        "record_shapes": False,
        "profile_memory": False,
        "with_stack": False,
        "with_flops": False,
        "with_modules": False,
        "active": 1,
        "start_step": 0,
        "is_rank": False,
        "rank_list": [],
        "experimental_config": {
            "profiler_level": "Level0",
            "aic_metrics": "AiCoreNone",
            "l2_cache": False,
            "op_attr": False,
            "gc_detect_threshold": None,
            "data_simplification": True,
            "record_op_args": False,
            "export_type": "text",
            "msprof_tx": False,
        },
        "metadata": {},
    }


def _expect(value: Any, kind: type | tuple[type, ...], key: str, path: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:  # JSON true is no number, though Python's bool is
        raise ConfigError(f"{path}: {key}", f"must be {_kind_names(kinds)}, got {_shown(value)}")
    if not isinstance(value, kinds):
        raise ConfigError(f"{path}: {key}", f"must be {_kind_names(kinds)}, got {_shown(value)}")
    return value


def _kind_names(kinds: tuple[type, ...]) -> str:
    words = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    words |= {list: "a list", dict: "an object"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


def _key_names(keys: list[str]) -> str:
    """Keys for a one-line message: as written when plain, else quoted (a newline must not end the line)."""
    return ", ".join(k if k.isprintable() and len(k) <= _SHOWN_LIMIT else _shown(k) for k in keys)


def _expect_path(value: Any, key: str, path: str) -> str:
    """A string that names a file: no NUL, and encodable for the filesystem."""
    text = _expect(value, str, key, path)
    try:
        if "\0" in text:
            raise ValueError
        os.fsencode(text)
    except (ValueError, UnicodeError):
        raise ConfigError(f"{path}: {key}", f"{_shown(text)} is not a usable path") from None
    return text


# Keys of torch_npu's profiler_config.json that npuprof reads together (the schedule, the ranks) rather
# than through one option each; and those it accepts but has no use for (warned once, not refused).
_SCHEDULE_KEYS = ("start_step", "warmup", "active")
_RANK_KEYS = ("is_rank", "rank_list")
_UNUSED_KEYS = {"async_mode": "npuprof always parses in the background", "is_valid": "torch_npu's own flag"}
_UNUSED_EXPERIMENTAL_KEYS = {
    "mstx_domain_include": "no mstx domains yet",
    "mstx_domain_exclude": "no mstx domains yet",
    "host_sys": "no host system sampling",
    "sys_io": "no host system sampling",
    "sys_interconnection": "no host system sampling",
}
# npuprof's own keys: `npuprof trigger` labels each file it writes, so that the same request twice is two
# changes of the file (dynamic capture acts on changes of content).
TRIGGER_ID_KEY = "trigger_id"
_EXPERIMENTAL = "experimental_config"
_CONFIG_KEYS_FIX = 'see docs/formats.md, "profiler_config.json"'
# How close an unknown key must be to a known one to be taken for a misspelling of it (difflib's ratio).
_MISSPELT_RATIO = 0.8


def _file_options() -> tuple[dict[str, Any], dict[str, Any]]:
    """Options read from the top level and from experimental_config, by their config-file key."""
    from npuprof.options import RUN_OPTIONS

    top: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for option in RUN_OPTIONS:
        if option.config_key:
            section, _, key = option.config_key.partition(".")
            (nested if key else top)[key or section] = option
    return top, nested


def config_from_json(
    data: Any,
    path: str,
    base: ProfileConfig | None = None,
    warn: Any = None,
    on_bad: Any = None,
    schedule: bool = True,
) -> ProfileConfig:
    """Apply a profiler_config.json document (torch_npu's dynamic-profiling format, any release) onto
    ``base`` (defaults when None). ``warn(line)`` hears of keys accepted but not used.

    ``on_bad(error)``, when given, hears of each bad value or misspelt key (a ConfigError) and the field
    keeps its value in ``base``: dynamic capture never refuses a whole file for one field. Without it the
    first one is raised. ``schedule=False`` leaves start_step / warmup / active to the caller."""
    cfg = base if base is not None else ProfileConfig()
    if not isinstance(data, dict):
        raise ConfigError(path, "must hold a JSON object")
    top, nested = _file_options()
    known = {*top, *_SCHEDULE_KEYS, *_RANK_KEYS, *_UNUSED_KEYS, _EXPERIMENTAL, TRIGGER_ID_KEY}
    _unknown_keys(sorted(set(data) - known), known, path, warn, on_bad)
    exp: Any = {}
    given = data.get(_EXPERIMENTAL)  # null as torch_npu's template may have it: none; [] or "": named
    _guarded(on_bad, lambda: exp.update(_expect({} if given is None else given, dict, _EXPERIMENTAL, path)))
    if "mstx" in exp and "msprof_tx" not in exp:  # the newer releases' name of msprof_tx
        exp["msprof_tx"] = exp["mstx"]
    elif "mstx" in exp and exp["mstx"] != exp["msprof_tx"]:  # one switch said two ways: msprof_tx won
        _guarded(on_bad, lambda: _refuse_two_names(exp, path))  # silently; neither is taken
        exp.pop("msprof_tx")
    exp.pop("mstx", None)
    known_exp = {*nested, *_UNUSED_EXPERIMENTAL_KEYS}
    _unknown_keys(sorted(set(exp) - known_exp), known_exp | {"mstx"}, path, warn, on_bad, _EXPERIMENTAL + ".")
    for table, values in ((top, data), (nested, exp)):
        for key, option in table.items():
            if key in values:  # named as the README's flag table names it: experimental_config.profiler_level
                _guarded(
                    on_bad,
                    lambda o=option, v=values[key]: _set_from_file(cfg, o, v, o.config_key, path),
                )
    if schedule:
        _apply_file_schedule(cfg, data, path)
    _guarded(on_bad, lambda: _apply_file_ranks(cfg, data, path, warn))
    if warn is not None:
        for table, values, prefix in (
            (_UNUSED_KEYS, data, ""),
            (_UNUSED_EXPERIMENTAL_KEYS, exp, _EXPERIMENTAL + "."),
        ):
            for key, why in table.items():
                if key in values:
                    warn(f"{path}: {prefix}{key} is not used by npuprof ({why}); ignored")
        if exp.get("export_type") is not None and not _known_export_type(exp["export_type"]):
            warn(
                f"{path}: {_EXPERIMENTAL}.export_type {_shown(exp['export_type'])} is not text, db or a list "
                "of them; text is written (as torch_npu does)"
            )
    return cfg


def _refuse_two_names(exp: dict[str, Any], path: str) -> None:
    raise ConfigError(
        f"{path}: {_EXPERIMENTAL}.msprof_tx",
        f"is {_shown(exp['msprof_tx'])} and {_EXPERIMENTAL}.mstx (newer torch_npu's name of the same switch) "
        f"{_shown(exp['mstx'])}",
        "keep one of the two keys",
    )


def _guarded(on_bad: Any, apply: Any) -> None:
    """``apply()``; a ConfigError goes to ``on_bad`` when there is one, else up."""
    try:
        apply()
    except ConfigError as exc:
        if on_bad is None:
            raise
        on_bad(exc)


def _unknown_keys(
    unknown: list[str], known: set[str], where: str, warn: Any, on_bad: Any, section: str = ""
) -> None:
    """A key close to a known one is a misspelling: refused (through ``on_bad`` when lenient) with "did you
    mean". Any other is taken for a key of a torch_npu release npuprof does not know: one warning names
    them all, and they are ignored."""
    if not unknown:
        return
    import difflib  # only when a file has a key npuprof does not know

    lowered = {k.lower(): k for k in known}
    placed = _placed_keys()
    flag_only = _flags_without_a_key()
    misspelt: list[str] = []
    newer: list[str] = []
    for key in unknown:
        close = difflib.get_close_matches(key.lower(), lowered, n=1, cutoff=_MISSPELT_RATIO)
        meant = placed.get(key.lower().replace("-", "_"))
        flag = flag_only.get(key.lower().replace("-", "_"))
        if meant is not None:  # a key of the other level, or the flag's name: never a newer release's key
            misspelt.append(f"{_key_names([section + key])} (did you mean {meant}?)")
        elif flag is not None:  # step_on: "a newer torch_npu release's key?", ignored
            misspelt.append(f"{_key_names([section + key])} ({flag} has no key in the file: give the flag)")
        elif close:
            misspelt.append(f"{_key_names([section + key])} (did you mean {section}{lowered[close[0]]}?)")
        else:
            newer.append(section + key)
    if newer and warn is not None:
        warn(
            f"{where}: {_key_names(newer)}: not known to npuprof (keys of a newer torch_npu release?); "
            "ignored"
        )
    if misspelt:
        error = ConfigError(where, "unknown key(s) " + ", ".join(misspelt), _CONFIG_KEYS_FIX)
        if on_bad is None:
            raise error
        on_bad(error)


def _flags_without_a_key() -> dict[str, str]:
    """The flags the file has no key for (``--step-on``, ``--export-stacks``), by their keys' names: such a
    key in the file is the flag's setting misplaced, never a newer release's key."""
    from npuprof.options import RUN_OPTIONS

    # (a schedule's or the ranks' names, and --config's, may yet be a torch_npu release's keys)
    return {o.key: o.flag for o in RUN_OPTIONS if o.key in _NPUPROF_ONLY_FLAGS and not o.config_key}


_NPUPROF_ONLY_FLAGS = ("step_on", "export_stacks", "memory_timeline", "export_chrome_trace", "metadata_json")


def _placed_keys() -> dict[str, str]:
    """Each option's key as the file places it (``experimental_config.profiler_level``), by its last part
    and by its flag's name (``gc_detect_threshold`` at the top level, ``level``): such a key in the wrong
    place was warned as a newer release's and ignored, and the file's setting lost."""
    from npuprof.options import RUN_OPTIONS

    placed = {key: key for key in (*_SCHEDULE_KEYS, *_RANK_KEYS)}
    for option in RUN_OPTIONS:
        if option.config_key:
            for name in (option.config_key.rpartition(".")[2], option.key):
                placed.setdefault(name, option.config_key)
    return placed


def _set_from_file(cfg: ProfileConfig, option: Any, value: Any, key: str, path: str) -> None:
    """One config-file value, checked as torch_npu's reader would take it."""
    source = f"{path}: {key}"
    if option.kind == "bool":
        setattr(cfg, option.key, _expect(value, bool, key, path))
    elif option.key == "activities":
        acts = _expect(value, list, key, path)
        cfg.activities = parse_activities(",".join(str(a) for a in acts), source)
    elif option.key == "output":
        cfg.output = _expect_path(value, key, path) or DEFAULT_OUTPUT
    elif option.key == "level":
        cfg.level = parse_level(_expect(value, (str, int), key, path), source)  # null is no level ("None")
    elif option.key == "aic_metrics":
        cfg.aic_metrics = _expect(value, str, key, path)
    elif option.key == "gc_detect_threshold":
        if value is not None:
            threshold = _expect(value, (int, float), key, path)
            try:
                # (a float as it is: one past a float's range shows as written, _PastFloatRange)
                cfg.gc_detect_threshold = threshold if isinstance(threshold, float) else float(threshold)
            except OverflowError:
                raise ConfigError(source, f"{_shown(threshold)} is out of range") from None
    elif option.key == "export_type":
        cfg.export_type = _file_export_type(value, source)
    elif option.key == "metadata":
        cfg.metadata = dict(_expect(value, dict, key, path))
        if _depth(cfg.metadata, METADATA_JSON_DEPTH + 2) > METADATA_JSON_DEPTH + 1:  # its values: as
            raise _too_deep(source, "a value", "fix the file")  # --metadata-json's (the object: a level)
    elif option.key == "min_free_space":
        cfg.min_free_space = parse_min_free_space(value, source)
    else:  # a new option with a config key must say here how its value is read
        raise AssertionError(f"no config-file reader for {option.key}")
    cfg.given_as[option.key] = f"{key} {_shown(value)} ({path})"


def _known_export_type(value: Any) -> bool:
    try:
        return isinstance(value, (str, list)) and bool(parse_export_type(value))
    except ConfigError:
        return False


def _file_export_type(value: Any, source: str) -> str:
    """torch_npu takes "text" or "db", newer releases a list of them; anything else falls back to text,
    as torch_npu does (docs/formats.md, "profiler_config.json"). npuprof also reads "text,db"."""
    if not isinstance(value, (str, list)):
        return "text"
    try:
        return parse_export_type(value, source)
    except ConfigError:
        return "text"


def _apply_file_schedule(cfg: ProfileConfig, data: dict[str, Any], path: str) -> None:
    """``start_step: N`` (0: no capture from the file, as in torch_npu), ``warmup: W``, ``active: M``: warm up
    from step N for W steps, then record M. Without start_step the base's schedule stands."""
    start_step = _expect(data.get("start_step", 0), int, "start_step", path)
    active = _expect(data.get("active", 1), int, "active", path)
    warmup = _expect(data.get("warmup", 0), int, "warmup", path)
    if start_step < 0:
        # -1 is what `npuprof trigger` writes: a file of a --dynamic directory given to --config (helper-286)
        dynamic_only = (
            " (-1, the next step, which npuprof trigger writes, is --dynamic's)" if start_step == -1 else ""
        )
        raise ConfigError(
            f"{path}: start_step",
            f"must be >= 0, got {start_step}{dynamic_only}",
            "set the step to start at (0: none)",
        )
    if warmup < 0:
        raise ConfigError(f"{path}: warmup", f"must be >= 0, got {warmup}", "e.g. 0")
    if active < 1:
        raise ConfigError(f"{path}: active", f"must be >= 1, got {active}", "e.g. 3")
    if start_step > 0:
        cfg.schedule = Schedule(skip_first=start_step, wait=0, warmup=warmup, active=active, repeat=1)
    elif "start_step" in data:
        cfg.schedule = Schedule(off=True)


def _apply_file_ranks(cfg: ProfileConfig, data: dict[str, Any], path: str, warn: Any = None) -> None:
    """``is_rank`` + ``rank_list``: only those ranks record (an empty list: none). As in torch_npu, is_rank
    turns automatic parsing off (the captures are parsed later, by npuprof analyse)."""
    if not _expect(data.get("is_rank", False), bool, "is_rank", path):
        if data.get("rank_list") and warn is not None:  # meant as --ranks, but torch_npu ignores it too
            warn(
                f'{path}: rank_list {_shown(data["rank_list"])} is used only with "is_rank": true (as in '
                "torch_npu); ignored"
            )
        return
    rank_list = _expect(data.get("rank_list", []), list, "rank_list", path)
    for rank in rank_list:
        _check_rank(_expect(rank, int, "rank_list", path), f"{path}: rank_list")
    cfg.ranks = sorted(set(rank_list))
    if cfg.analyse:
        cfg.analyse = False
        if warn is not None:
            warn(
                f"{path}: is_rank is true: captures are not parsed automatically (as in torch_npu); run "
                "npuprof analyse on them"
            )


def file_ranks(data: dict[str, Any], path: str) -> list[int] | None:
    """The ranks a config file's ``is_rank`` + ``rank_list`` choose (None: every rank); ConfigError for a
    bad value of either."""
    cfg = ProfileConfig()
    _apply_file_ranks(cfg, data, path)
    return cfg.ranks


def json_from_config(cfg: ProfileConfig, prof_dir: str | None = None) -> dict[str, Any]:
    """``cfg`` as a profiler_config.json document (what `npuprof trigger` writes; config_from_json reads it
    back to the same values). ``prof_dir`` None: the template's "./" (for --dynamic, the run's output)."""
    from npuprof.options import RUN_OPTIONS

    document: dict[str, Any] = {}
    experimental: dict[str, Any] = {}
    for option in RUN_OPTIONS:
        if not option.config_key or option.key in ("min_free_space", "output"):
            continue
        value = getattr(cfg, option.key)
        if option.key == "activities":
            value = [a.upper() for a in value]
        elif option.key == "export_type":
            value = export_type_value(value)  # torch_npu reads "text,db" as one unknown name
        elif option.key == "metadata":
            value = dict(value)
        section, _, key = option.config_key.partition(".")
        if key:
            experimental[key] = value
        else:
            document[section] = value
    document["prof_dir"] = prof_dir if prof_dir is not None else "./"
    document["is_rank"] = cfg.ranks is not None
    document["rank_list"] = list(cfg.ranks or [])
    document[_EXPERIMENTAL] = experimental
    return document


def set_option(cfg: ProfileConfig, option: Any, value: Any) -> None:
    """One command-line option's value (as the flag parsers give it) onto ``cfg``."""
    key = option.key
    cfg.given_as.pop(key, None)  # the flag's value: a config file's is not what the user wrote last
    if option.in_schedule:
        setattr(cfg.schedule, key, value)
        cfg.schedule.off = False  # a schedule flag asks for captures, whatever a config file said
    elif key == "activities":
        cfg.activities = parse_activities(str(value))
        typed = ",".join(part.strip() for part in str(value).split(",") if part.strip())  # as parsed
        if typed != ",".join(cfg.activities):  # `gpu`, `cuda`: its warning names it as typed
            cfg.given_as[key] = f"{option.flag} {typed}"
    elif key == "level":
        cfg.level = parse_level(str(value))
    elif key == "aic_metrics":
        cfg.aic_metrics = _match_choice(str(value), AIC_METRICS, option.flag)
    elif key == "export_type":
        cfg.export_type = parse_export_type(value, option.flag)
    elif key == "ranks":
        cfg.ranks = parse_ranks(str(value))
    elif key == "output":
        cfg.output = str(value)
    elif key == "metadata":
        cfg.metadata.update(parse_metadata(list(value)))
    elif key == "metadata_json":
        cfg.metadata.update(parse_metadata_json(list(value)))
    elif key == "export_stacks":  # each once: a metric given twice was reported twice as ignored
        cfg.export_stacks = list(dict.fromkeys(value))
    elif key == "memory_timeline":
        cfg.memory_timeline = list(dict.fromkeys(str(f).lstrip(".") for f in value))
    elif key == "min_free_space":
        cfg.min_free_space = str(value)
    elif key == "poll_interval":
        cfg.poll_interval = parse_poll_interval(str(value), option.flag)
    elif key == "gc_detect_threshold":
        cfg.gc_detect_threshold = parse_gc_threshold(value) if isinstance(value, str) else value
    elif key == "export_chrome_trace":
        text = str(value)  # "-" kept, for validate to refuse (not stdout: a file named "-")
        if text.strip() and text != "-":
            # absolute, its last component as typed: a name that ends as a directory's (trace/, x/.) keeps
            # that end for run_flags to refuse, which abspath drops (results.paths.directory_form_problem)
            head, last = os.path.split(text)
            text = os.path.join(os.path.abspath(head or os.curdir), last)
        cfg.export_chrome_trace = text
    else:
        setattr(cfg, key, value)


def parse_poll_interval(value: str, flag: str = "--poll-interval") -> float | None:
    """Seconds (their range checked by ``ProfileConfig.validate``), or ``auto`` (None: 2 s, then the time
    of step 10 to 11)."""
    text = value.strip()
    if text.lower() == "auto":
        return None
    try:
        return float(text)
    except ValueError:
        fix = f"e.g. {flag} 2"
        raise ConfigError(flag, f"must be a number of seconds or auto, got {value!r}", fix) from None


def parse_gc_threshold(value: str, flag: str = "--gc-detect-threshold") -> float | None:
    """Milliseconds (their range checked by ``ProfileConfig.validate``), or ``off`` (None: no GC detection,
    whatever a --config file's threshold; the flag's shown default)."""
    text = value.strip()
    if text.lower() == "off":
        return None
    try:
        return float(text)
    except ValueError:
        fix = f"e.g. {flag} 10, or {flag} off"
        problem = f"must be a number of milliseconds or off, got {_shown(value)}"
        raise ConfigError(flag, problem, fix) from None


def _match_choice(value: str, choices: tuple[str, ...], flag: str) -> str:
    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise ConfigError(flag, f"unknown value {value!r}", "use one of " + ", ".join(choices))


def in_file_terms(exc: ConfigError, label: str) -> ConfigError:
    """``exc`` (which names a flag) as a problem of the config file ``label``, naming the file's key for
    that flag: the user wrote no flag. ``exc`` itself when the flag has no key in the file."""
    from npuprof.options import RUN_OPTIONS

    for option in RUN_OPTIONS:
        if exc.source in option.flags and option.config_key:
            flags = [f for o in RUN_OPTIONS for f in o.flags if f in exc.fix.split()] + ["--"] * (
                "--" in exc.fix
            )
            fix = exc.fix if exc.fix and not flags else f"fix {option.config_key} in the file"
            return ConfigError(f"{label}: {option.config_key}", exc.problem, fix)
    return exc


def load_config_file(path: str | os.PathLike[str], warn: Any = None) -> ProfileConfig:
    """Read a profiler_config.json; any problem becomes a ConfigError naming the file. Keys accepted but
    not used are reported through ``warn(line)`` (default: one line each on stderr). A symbolic link, a file
    someone else could write, or one owned by another user is refused (npuprof/file_trust.py)."""
    if not os.fspath(path):
        raise ConfigError("--config", "is empty", "give a profiler_config.json")
    file = Path(path)
    try:
        raw = read_config_bytes(file, "the file")
    except OSError as exc:
        if file.is_dir() and not file.is_symlink():  # torch_npu's PROF_CONFIG_PATH names a directory
            inside = file / "profiler_config.json"
            raise ConfigError(
                "--config",
                f"cannot read {str(file)!r}: a directory, not a regular file",
                f"give the file ({str(inside)!r}), or --dynamic {str(file)!r} to watch it while the job runs",
            ) from None
        raise ConfigError(
            "--config", f"cannot read {str(file)!r}: {unreadable_because(exc)}", "give an existing file"
        ) from None
    except ValueError as exc:  # not trusted
        raise ConfigError("--config", str(exc)) from None
    data = parse_config_bytes(raw, str(file), "--config")
    return config_from_json(data, str(file), warn=warn or warn_on_stderr)


def unreadable_because(exc: OSError) -> str:
    """Why a config file could not be read (read_config_bytes), in words: O_NOFOLLOW's ELOOP is a link."""
    import errno

    if exc.errno == errno.ELOOP:
        return "it is a symbolic link (links are not followed)"
    return str(exc.strerror or exc)


def parse_config_bytes(raw: bytes, name: str, source: str) -> Any:
    """The JSON document of a profiler_config.json's bytes, or a ConfigError with the parser's message."""
    if len(raw) > CONFIG_FILE_LIMIT:
        raise ConfigError(source, f"{name!r} is over 1 MiB: not a profiler_config.json", "fix the file")
    try:
        return json.loads(
            raw.decode("utf-8"),
            parse_constant=_no_constant,
            parse_float=_float_as_written,
            object_pairs_hook=_once_each,
        )
    except RecursionError:
        raise ConfigError(source, f"{name!r} nests too deeply to be a config", "fix the file") from None
    except _KeyTwice as exc:
        key = _key_names([exc.key])
        raise ConfigError(
            source,
            f"{name!r} gives {key} twice in one object (a JSON reader keeps the last, torch_npu's too)",
            f"keep one {key}",
        ) from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise ConfigError(source, f"{name!r} is not valid JSON ({exc})", "fix the file") from None


def read_config_bytes(file: str | os.PathLike[str], what: str) -> bytes:
    """At most CONFIG_FILE_LIMIT + 1 bytes of ``file``, which must be a regular file (a FIFO would block
    for ever) and no symbolic link (OSError), trusted as npuprof/file_trust.py says (its
    UntrustedPathError, a ValueError, otherwise)."""
    import stat

    from npuprof.file_trust import check_file

    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        check_file(fd, os.fspath(file), what)
        return read_at_most(fd, CONFIG_FILE_LIMIT, 1 << 16)
    finally:
        os.close(fd)


def warn_on_stderr(line: str) -> None:
    import sys

    try:
        sys.stderr.write(f"npuprof run: warning: {line}\n")
    except (OSError, ValueError):
        pass


class _KeyTwice(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of a config file, each key given once: ``"active": 2`` edited above a forgotten
    ``"active": 5`` was read as 5 without a word."""
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        raise _KeyTwice(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return document


class _PastFloatRange(float):
    """A JSON number past a float's range (``1e999``), read as infinity, that shows as written: named
    "Infinity" (--config) or "inf" (--dynamic) in an error, the user could not find what was meant."""

    text: str

    def __new__(cls, text: str) -> _PastFloatRange:
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __getnewargs__(self) -> tuple[str]:  # type: ignore[override]  # (copy.deepcopy of a config)
        return (self.text,)

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def _float_as_written(text: str) -> float:
    number = float(text)
    return number if math.isfinite(number) else _PastFloatRange(text)


def _no_constant(name: str) -> Any:
    """json.loads reads NaN and Infinity, which are not JSON (and no setting takes them)."""
    raise ValueError(f"{name} is not JSON")
