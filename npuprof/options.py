"""Every option of `npuprof run`, declared once (docs/architecture.md, "Options").

The fast flag parser (cli/run_flags.py), the typer command (cli/run.py), the ``profiler_config.json``
reader and profiler_info's config (config.py), the "ignored on this backend" reports (agent/backends/)
and the flag table of the README are all made from this list; tests/test_options.py checks the README
and the defaults of ProfileConfig against it. Adding a flag is one entry here plus its behaviour.

This module imports nothing: the launcher's fast path reads it at every start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npuprof.config import ProfileConfig

# Which backends act on an option; the others report it once as ignored when it differs from its default.
EVERY_BACKEND = "every"
TORCH_NPU_ONLY = "torch_npu"

# Panels of `npuprof run --help`.
WHAT = "What to collect"
ASCEND = "Ascend options (torch_npu _ExperimentalConfig; reported as ignored elsewhere)"
SCHEDULE = "Schedule (torch.profiler.schedule semantics)"
OUTPUT = "Output"
DYNAMIC = "Dynamic capture (start captures in the running job)"
# torch_npu's own dynamic-profiling variable: `npuprof run` takes it as --dynamic and keeps it from the job
ENV_DYNAMIC = "PROF_CONFIG_PATH"


class Option:
    """One option. (A plain class: ``typing.NamedTuple`` or dataclasses would cost the launcher's start
    path ~5 ms of imports.)"""

    __slots__ = (
        "backends",
        "config_key",
        "default",
        "doc",
        "flags",
        "help",
        "key",
        "kind",
        "metavar",
        "npu_keywords",
        "panel",
        "profiler_keyword",
    )

    def __init__(
        self,
        key: str,
        flags: tuple[str, ...],
        kind: str,
        default: str,
        help: str,
        panel: str,
        doc: str = "",
        *,
        metavar: str | None = None,
        config_key: str | None = None,
        profiler_keyword: str | None = None,
        npu_keywords: tuple[str, ...] = (),
        backends: str = EVERY_BACKEND,
    ) -> None:
        self.key = key  # the ProfileConfig field (ProfileConfig.schedule's for the schedule panel)
        self.flags = flags  # the long form first; a bool option also takes --no-<long form>
        self.kind = kind  # "bool", "int", "float", "str", "path" or "list" (repeatable)
        self.default = default  # as --help and the README show it
        self.help = help  # one line for --help
        self.panel = panel
        self.doc = doc  # the README's "meaning" column: what each backend does with it
        self.metavar = metavar
        self.config_key = config_key  # in profiler_config.json; "experimental_config.x" for a nested key
        self.profiler_keyword = profiler_keyword  # torch.profiler.profile's / torch_npu's keyword
        self.npu_keywords = npu_keywords  # torch_npu _ExperimentalConfig keywords, first accepted one wins
        self.backends = backends

    def __repr__(self) -> str:
        return f"Option({self.key!r})"

    @property
    def flag(self) -> str:
        return self.flags[0]

    @property
    def in_schedule(self) -> bool:
        return self.panel == SCHEDULE and self.kind == "int"


def _bool(key: str, default: str, help: str, panel: str, doc: str, **extra: object) -> Option:
    return Option(key, ("--" + key.replace("_", "-"),), "bool", default, help, panel, doc, **extra)  # type: ignore[arg-type]


def _collect(key: str, help: str, doc: str = "") -> Option:
    return _bool(
        key,
        "off",
        help,
        WHAT,
        doc or "the torch.profiler / torch_npu keyword of the same name, on every backend",
        config_key=key,
        profiler_keyword=key,
    )


def _experimental(key: str, help: str, doc: str = "", npu_keywords: tuple[str, ...] = ()) -> Option:
    return _bool(
        key,
        "off",
        help,
        ASCEND,
        doc or f"torch_npu `_ExperimentalConfig({key}=...)`; reported as ignored elsewhere",
        config_key="experimental_config." + key,
        npu_keywords=npu_keywords or (key,),
        backends=TORCH_NPU_ONLY,
    )


def _schedule(key: str, default: int, help: str, doc: str) -> Option:
    return Option(key, ("--" + key.replace("_", "-"),), "int", str(default), help, SCHEDULE, doc, metavar="N")


# what one time window (--delay/--duration) and --dynamic exclude (cli/run_flags.py refuses them together)
_STEP_FLAGS = ("--skip-first", "--wait", "--warmup", "--active", "--repeat")


def _named(flags: tuple[str, ...], quote: str = "") -> str:
    """``--a, --b and --c`` (``quote``: the README's backticks)."""
    words = [f"{quote}{flag}{quote}" for flag in flags]
    return ", ".join(words[:-1]) + " and " + words[-1]


RUN_OPTIONS: tuple[Option, ...] = (
    Option(
        "activities",
        ("--activities",),
        "str",
        "cpu,npu",
        "cpu, npu or cpu,npu (npu = the accelerator: NPU or CUDA; cuda, gpu, device mean npu).",
        WHAT,
        "`npu` is the accelerator (NPU or CUDA; `cuda`, `gpu` and `device` are taken as `npu`). CPU "
        "backend: the CPU is always profiled.",
        metavar="cpu,npu",
        config_key="activities",
        profiler_keyword="activities",
    ),
    _collect("record_shapes", "Operator input shapes and dtypes."),
    _collect("profile_memory", "Memory allocations per operator."),
    _collect("with_stack", "Python call stacks of operators (adds overhead)."),
    _collect("with_flops", "Operator FLOPs."),
    _collect(
        "with_modules",
        "nn.Module hierarchy of operators (torch.profiler: TorchScript only; eager modules come with "
        "--with-stack).",
        "the keyword of the same name, on every backend; torch.profiler's covers TorchScript only: eager "
        "modules (`nn.Module: X` frames) come from its Python tracer, `--with-stack` (given without it, "
        "where the job's Python has no torch_npu, `npuprof run` warns at start)",
    ),
    Option(
        "level",
        ("--level",),
        "str",
        "0",
        "Profiler level: none, 0, 1 or 2.",
        ASCEND,
        "torch_npu `ProfilerLevel.Level_none/Level0/1/2`; reported as ignored elsewhere",
        metavar="none|0|1|2",
        config_key="experimental_config.profiler_level",
        npu_keywords=("profiler_level",),
        backends=TORCH_NPU_ONLY,
    ),
    Option(
        "aic_metrics",
        ("--aic-metrics",),
        "str",
        "AiCoreNone",
        "AiCoreNone, PipeUtilization, ArithmeticUtilization, Memory, MemoryL0, ResourceConflictRatio, "
        "MemoryUB or L2Cache (any case).",
        ASCEND,
        "one of the 8 names, in any case; torch_npu `AiCMetrics.NAME`; reported as ignored elsewhere",
        metavar="NAME",
        config_key="experimental_config.aic_metrics",
        npu_keywords=("aic_metrics",),
        backends=TORCH_NPU_ONLY,
    ),
    _experimental("l2_cache", "Write l2_cache.csv."),
    _experimental(
        "op_attr",
        "aclnn operator attributes (db export).",
        "torch_npu `_ExperimentalConfig(op_attr=...)`; reported as ignored elsewhere; refused with "
        "`--level none`",
    ),
    _bool(
        "data_simplification",
        "on",
        "Delete intermediate raw data after parsing.",
        ASCEND,
        "torch_npu `_ExperimentalConfig(data_simplification=...)` (deletes `FRAMEWORK/` after parsing); "
        "reported as ignored elsewhere",
        config_key="experimental_config.data_simplification",
        npu_keywords=("data_simplification",),
        backends=TORCH_NPU_ONLY,
    ),
    _experimental("record_op_args", "Operator info for the AOE tuner."),
    _bool(
        "msprof_tx",
        "off",
        "A comm: range around every torch.distributed call; on an NPU also the npuprof.mark/range "
        "marks (recorded without it on CPU and CUDA).",
        WHAT,
        "torch_npu `_ExperimentalConfig(msprof_tx=...)` (`mstx` in newer releases); on every backend a "
        "`comm:{op},{group},{dtype},{count}` range around each torch.distributed collective and "
        "point-to-point call. See [Marks](#marks-communication-ranges-and-gc)",
        config_key="experimental_config.msprof_tx",
        npu_keywords=("msprof_tx", "mstx"),
    ),
    Option(
        "gc_detect_threshold",
        ("--gc-detect-threshold",),
        "str",  # milliseconds, or "off" (config.parse_gc_threshold)
        "off",
        "Record Python GC pauses of at least MS (0 = all; off = none, over a --config file's).",
        WHAT,
        "torch_npu `gc_detect_threshold` (0 = all GCs; `off` = none, over a `--config` file's threshold); on "
        "torch.profiler npuprof records the pauses into `npuprof_gc.json` of each capture",
        metavar="MS",
        config_key="experimental_config.gc_detect_threshold",
        npu_keywords=("gc_detect_threshold",),
    ),
    _schedule(
        "skip_first",
        5,
        "Steps skipped once at the start.",
        "exact `torch.profiler.schedule` semantics, as the four below; the defaults record steps 6-8",
    ),
    _schedule("wait", 0, "Idle steps at the start of each cycle.", "idle steps at the start of each cycle"),
    _schedule(
        "warmup",
        1,
        "Warm-up steps (profiler on, not kept) per cycle.",
        "profiler on, not kept, at the start of each cycle's recording",
    ),
    _schedule(
        "active",
        3,
        "Recorded steps per cycle.",
        "recorded steps per cycle; a capture still running when training ends is kept (the step in flight "
        "marked partial)",
    ),
    _schedule("repeat", 1, "Cycles; 0 = until training ends.", "cycles; `0` repeats until training ends"),
    Option(
        "delay",
        ("--delay",),
        "float",
        "off",
        "Record one time window instead of the schedule, starting SECONDS after npuprof wakes in the "
        "process (at import torch, or --step-on's function if it comes first), with --duration; also for "
        "jobs without steps. Excludes "
        f"{_named((*_STEP_FLAGS, '--dynamic'))}.",
        SCHEDULE,
        "one capture of a time window, as `nsys profile --delay`: it starts SECONDS after npuprof's agent "
        "wakes in each process (the script's `import torch`, or `--step-on`'s function where it is defined "
        "or imported first), whether or not the job has steps; excludes "
        f"{_named((*_STEP_FLAGS, '--dynamic'), '`')}. See [Time windows](#time-windows---delay---duration)",
        metavar="SECONDS",
    ),
    Option(
        "duration",
        ("--duration",),
        "float",
        "until the process ends",
        "Length of the time window in seconds; alone, the window starts when npuprof wakes (--delay 0). "
        f"Excludes {_named((*_STEP_FLAGS, '--dynamic'))}.",
        SCHEDULE,
        "the window's length (`--delay` alone: until the process ends; `--duration` alone: from the agent's "
        "wake); with steps it ends at the first step boundary after SECONDS; excludes "
        f"{_named((*_STEP_FLAGS, '--dynamic'), '`')}",
        metavar="SECONDS",
    ),
    Option(
        "step_on",
        ("--step-on",),
        "str",
        "Optimizer.step",
        "Count a step at each return of this function instead of Optimizer.step, e.g. "
        "mypkg.infer:Engine.generate, or __main__:train_step for one the script defines.",
        SCHEDULE,
        "count steps at returns of this function (e.g. `mypkg.infer:Engine.generate`); `__main__:train_step` "
        "or `__main__:Trainer.step` for one the script itself defines, before or after importing torch (see "
        "[the step function](#the-step-function---step-on))",
        metavar="MODULE:QUALNAME",
    ),
    Option(
        "ranks",
        ("--ranks",),
        "str",
        "all",
        "Ranks to profile: all, or e.g. 0,3-5.",
        SCHEDULE,
        "ranks that record (config file: `is_rank` + `rank_list`); a process with no rank (no `RANK` or "
        "launcher's rank variable, no process group: a plain script, each multiprocessing worker) counts as "
        "rank 0",
        metavar="all|0,3-5",
    ),
    Option(
        "output",
        ("--output", "-o"),
        "path",
        "./npuprof_result",
        "Result directory.",
        OUTPUT,
        "resolved once and used as its real path; created 0o750 (files 0o640; a stricter umask is kept). "
        "Refused if its last component is a symlink, or if it passes through a symlink in a sticky "
        "world-writable directory (`/tmp`) whose owner is neither you nor the directory's owner (the "
        "kernel's `fs.protected_symlinks` rule); a symlinked home or scratch directory is fine. Nothing in "
        "it is overwritten (a second run's record is `npuprof_run.<time>.<pid>.json`, the log is appended)",
        metavar="DIR",
        config_key="prof_dir",
    ),
    Option(
        "worker_name",
        ("--worker-name",),
        "str",
        "the host name up to its first dot (an IP address whole)",
        "Prefix of the rank dirs (letters, digits, _ - .; no leading '.'; at most 128 bytes).",
        OUTPUT,
        "prefix of the rank dirs (letters, digits, `_ - .`; not a leading `.`; at most 128 bytes)",
        metavar="NAME",
    ),
    _bool(
        "analyse",
        "on",
        "Parse each capture into ASCEND_PROFILER_OUTPUT/ in the background.",
        OUTPUT,
        "parse each capture in a background process (CPU/CUDA); torch_npu's `analyse_flag` on NPU",
        config_key="analyse",
    ),
    Option(
        "export_type",
        ("--export-type",),
        "str",
        "text",
        "text, db or text,db: db adds per-rank SQLite files (ascend_pytorch_profiler_{rank}.db and "
        "analysis.db) that msprof-analyze's db recipes read.",
        OUTPUT,
        "CPU and CUDA: npuprof's parser always writes its text tables (`trace_view.json` etc., which its "
        "reports and trace viewers read); `db` and `text,db` add the SQLite files "
        "`ascend_pytorch_profiler_{rank}.db` and `analysis.db` in `ASCEND_PROFILER_OUTPUT/`, which "
        "msprof-analyze's db recipes read (with `--no-analyse`: `npuprof analyse --export-type db` later). "
        "torch_npu: `ExportType.Text`, `ExportType.Db` or the list of both, written by torch_npu itself",
        metavar="text|db|text,db",
        config_key="experimental_config.export_type",
        npu_keywords=("export_type",),
    ),
    _bool(
        "gzip",
        "on",
        "Gzip the raw trace (in the background, never in the step).",
        OUTPUT,
        "gzip the raw Kineto trace in the background (torch's own gzip runs inside the step at ~10 MB/s)",
    ),
    Option(
        "metadata",
        ("--metadata",),
        "list",
        "-",
        "Written to profiler_metadata.json; repeatable.",
        OUTPUT,
        "repeatable; into `profiler_metadata.json` (torch_npu: `add_metadata`); at most 4096 characters a "
        "value, 50 KiB in all",
        metavar="KEY=VALUE",
        config_key="metadata",
    ),
    Option(
        "metadata_json",
        ("--metadata-json",),
        "list",
        "-",
        "Like --metadata, the value read as JSON (a number, list or object); repeatable.",
        OUTPUT,
        "repeatable; the value is JSON, written as such (torch_npu: `add_metadata_json`), e.g. "
        "`--metadata-json 'distributed_args={\"tensor_model_parallel_size\": 2}'`",
        metavar="KEY=JSON",
    ),
    Option(
        "export_stacks",
        ("--export-stacks",),
        "list",
        "-",
        "At each capture, write flame-graph stacks for self_cpu_time_total / self_npu_time_total / "
        "self_cuda_time_total (needs --with-stack); repeatable.",
        OUTPUT,
        "write `stacks_<METRIC>.folded` at each capture (needs `--with-stack`; with `--dynamic`, each "
        "request's `with_stack`: `npuprof trigger DIR --with-stack`)",
        metavar="METRIC",
    ),
    Option(
        "memory_timeline",
        ("--memory-timeline",),
        "list",
        "-",
        "At each capture, export the memory timeline: html, json, json.gz or raw.json.gz (needs "
        "--profile-memory --record-shapes --with-stack; on an NPU --with-modules does for --with-stack); "
        "repeatable.",
        OUTPUT,
        "`html`, `json`, `json.gz`, `raw.json.gz` at each capture (needs `--profile-memory --record-shapes "
        "--with-stack`, on an NPU `--with-modules` in place of `--with-stack`; with `--dynamic`, each "
        "request's: `npuprof trigger DIR` with those flags)",
        metavar="FORMAT",
    ),
    Option(
        "min_free_space",
        ("--min-free-space",),
        "str",
        "5GiB or 5%, whichever is smaller",
        "Skip captures when the output's filesystem has less free space, e.g. 500MiB, 2G, 10GB, 3%; "
        "0 = never skip; auto = the default. Below it the warning gives the value that lets them run.",
        OUTPUT,
        "below this much free space on the output's filesystem (a `--dynamic` request's `prof_dir`'s, for "
        "its capture), captures are skipped (warned once, with what is free and the value that lets them "
        "run: half of it; the job runs) and no capture is parsed, gzipped, "
        "copied for `--export-chrome-trace` or given its `--export-stacks` / `--memory-timeline` files (each "
        "named at the run's end with the command that makes it later). `500MiB`, `2G` (K/M/G/T and KiB… "
        "are powers of 1024), `10GB` (KB/MB/GB: powers of 1000), `3%` of the filesystem, `0` = never skip, "
        "`auto` = the default",
        metavar="SIZE",
        config_key="min_free_space",
    ),
    Option(
        "export_chrome_trace",
        ("--export-chrome-trace",),
        "path",
        "off",
        "Also write each capture's plain Chrome trace to PATH (rank, pid and first step put in the name "
        "when there are several processes or captures).",
        OUTPUT,
        "a plain Chrome trace of each capture at PATH besides the result layout (a hard link of the raw "
        "trace, else a copy made off the step); with several processes or captures `trace.json` becomes "
        "`trace_rank1_pid123_step6.json`. See [Chrome traces](#chrome-traces---export-chrome-trace)",
        metavar="PATH",
    ),
    Option(
        "config",
        ("--config",),
        "path",
        "-",
        "A profiler_config.json (Ascend dynamic-profiling format) used as the base; flags override it.",
        OUTPUT,
        "the base configuration (above); flags given on the command line override it",
        metavar="FILE",
    ),
    Option(
        "dynamic",
        ("--dynamic",),
        "path",
        "off",
        "Watch DIR/profiler_config.json (made from torch_npu's template if absent): edit it, or run "
        "npuprof trigger DIR, to capture while the job runs. Excludes "
        f"{_named((*_STEP_FLAGS, '--delay', '--duration', '--ranks', '--config'))}.",
        DYNAMIC,
        "captures start when `DIR/profiler_config.json` changes (`npuprof trigger DIR` writes it); the "
        "file's keys set each capture, these flags the rest; excludes "
        f"{_named((*_STEP_FLAGS, '--delay', '--duration', '--ranks', '--config'), '`')}. "
        "`PROF_CONFIG_PATH` in npuprof's environment is taken as this flag and kept from the job's. See "
        "[Dynamic capture](#dynamic-capture-npuprof-trigger-npuprof-status)",
        metavar="DIR",
    ),
    Option(
        "poll_interval",
        ("--poll-interval",),
        "str",  # seconds, or "auto" (config.parse_poll_interval)
        "auto",
        "Seconds between two looks at DIR/profiler_config.json (0.1 to 3600); auto: 2, then the time "
        "between steps 10 and 11, 1 to 5.",
        DYNAMIC,
        "how often each process reads the file; `auto`: every 2 s, then every step-10-to-11 interval (1 to "
        "5 s; torch_npu sets no ceiling)",
        metavar="SECONDS",
    ),
)

BY_KEY: dict[str, Option] = {option.key: option for option in RUN_OPTIONS}
# Handed to torch_npu's _ExperimentalConfig; those only torch_npu acts on are reported as ignored elsewhere.
TORCH_NPU_OPTIONS: tuple[Option, ...] = tuple(o for o in RUN_OPTIONS if o.npu_keywords)
TORCH_NPU_ONLY_OPTIONS: tuple[Option, ...] = tuple(o for o in RUN_OPTIONS if o.backends == TORCH_NPU_ONLY)


def flag_text(option: Option, value: object) -> str:
    """How a user would have written ``value`` of ``option`` on the command line."""
    if option.kind == "bool":
        return option.flag if value else "--no-" + option.flag[2:]
    if option.key == "level":
        shown = {"Level_none": "none", "Level0": "0", "Level1": "1", "Level2": "2"}
        return f"{option.flag} {shown.get(str(value), value)}"
    if isinstance(value, float):  # a float option, or --gc-detect-threshold's milliseconds
        return f"{option.flag} {value:g}"
    return f"{option.flag} {value}"


def given_text(cfg: ProfileConfig, option: Option) -> str:
    """What the user wrote for ``cfg``'s value of ``option``: a config file's key and value where it came
    from one (named by its flag, the user read of a flag never typed), else the flag as typed."""
    from npuprof.reports.text import printable

    written = cfg.given_as.get(option.key)
    return printable(written) if written else flag_text(option, getattr(cfg, option.key))


def markdown_table() -> str:
    """The README's flag table (tests/test_options.py keeps the README equal to it)."""
    lines = [
        "| flag | default | meaning, and what each backend does with it | `profiler_config.json` key |",
        "|---|---|---|---|",
    ]
    for option in RUN_OPTIONS:
        flag = "/".join(option.flags)
        if option.kind == "bool":
            flag = f"{option.flag}/--no-{option.flag[2:]}"
        elif option.metavar:
            flag = f"{flag} {option.metavar}"
        key = f"`{option.config_key}`" if option.config_key else "-"
        if option.in_schedule or option.key == "ranks":
            key = "see above"
        flag = flag.replace("|", "\\|")
        lines.append(f"| `{flag}` | {option.default} | {option.doc} | {key} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m npuprof.options: the README table
    print(markdown_table(), end="")
