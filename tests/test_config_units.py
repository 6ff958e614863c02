"""config.py's validation in-process: every bad value gives its one-line error naming the flag, every limit
holds at its edge, and the environment payload comes back as it went.

The expected lines are written out by hand (they are what the user reads: "FLAG: problem; fix"), the
sizes computed by hand (KiB = 1024, KB = 1000, as coreutils), the limits from docs/formats.md (metadata:
4096 characters a value, 50 KiB in all) and the CLI's help (ranks 0-1048575, --poll-interval 0.1-3600 s).

These are the fast tests of bench/mutation.py's "config" group (no subprocess).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from npuprof.config import (
    AIC_METRICS,
    ConfigError,
    ProfileConfig,
    Schedule,
    _match_choice,
    _shown,
    decode_env_payload,
    parse_activities,
    parse_level,
    parse_metadata,
    parse_metadata_json,
    parse_min_free_space,
    parse_ranks,
    parse_step_on,
    required_free_bytes,
)

SIZE_FIX = "use e.g. 500MiB, 2G, 10GB, 3%, auto (5GiB or 5%, whichever is smaller) or 0 (off)"
MEMORY_NEEDS = "--record-shapes, --profile-memory, --with-stack (on Ascend NPUs, or --with-modules)"

WORKER_RULE = (
    "may hold only letters, digits, '_', '-' and '.', not start with '.' (a hidden file) and take at most "
    "128 bytes (it starts file names)"
)


def error_of(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# ---- ConfigError -----------------------------------------------------------------------------------
def test_config_error_is_one_line_naming_its_source() -> None:
    error = ConfigError("--level", "unknown level '7'", "use none, 0, 1 or 2")
    assert (error.source, error.problem, error.fix) == ("--level", "unknown level '7'", "use none, 0, 1 or 2")
    assert str(error) == error.one_line() == "--level: unknown level '7'; use none, 0, 1 or 2"
    assert isinstance(error, ValueError)
    bare = ConfigError("f.json", "must hold a JSON object")
    assert str(bare) == "f.json: must hold a JSON object" and bare.fix == ""


# ---- the schedule ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"skip_first": -1}, "--skip-first: must be an integer >= 0, got -1; e.g. --skip-first 1"),
        ({"wait": 1.5}, "--wait: must be an integer >= 0, got 1.5; e.g. --wait 1"),
        ({"warmup": "1"}, "--warmup: must be an integer >= 0, got '1'; e.g. --warmup 1"),
        ({"repeat": -2}, "--repeat: must be an integer >= 0, got -2; e.g. --repeat 1"),
        ({"active": 0}, "--active: must be an integer >= 1, got 0; e.g. --active 3"),
        ({"active": 2.0}, "--active: must be an integer >= 1, got 2.0; e.g. --active 3"),
        (
            {"skip_first": -1, "active": 0},
            "--skip-first: must be an integer >= 0, got -1; e.g. --skip-first 1",
        ),
    ],
)
def test_schedule_errors(fields: dict[str, Any], line: str) -> None:
    assert error_of(Schedule(**fields).validate) == line
    assert error_of(ProfileConfig(schedule=Schedule(**fields)).validate) == line


def test_schedule_edges_are_accepted() -> None:
    Schedule(skip_first=0, wait=0, warmup=0, active=1, repeat=0).validate()


@pytest.mark.parametrize(
    ("schedule", "steps"),
    [
        (Schedule(), 9),  # 5 + (0 + 1 + 3) * 1
        (Schedule(skip_first=2, wait=1, warmup=2, active=3, repeat=3), 20),  # 2 + 6 * 3
        (Schedule(skip_first=1, wait=0, warmup=0, active=2, repeat=0), 3),  # repeat 0: one cycle at least
    ],
)
def test_steps_a_finite_schedule_needs(schedule: Schedule, steps: int) -> None:
    assert schedule.first_steps_needed() == steps


# ---- ProfileConfig.validate ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"activities": []}, "--activities: is empty; give cpu, npu or cpu,npu"),
        ({"activities": ["cpu", "tpu"]}, "--activities: unknown activity 'tpu'; use cpu, npu or cpu,npu"),
        ({"level": "Level3"}, "--level: unknown level 'Level3'; use none, 0, 1 or 2"),
        ({"level": "1"}, "--level: unknown level '1'; use none, 0, 1 or 2"),
        (
            {"aic_metrics": "pipe"},
            "--aic-metrics: unknown metric 'pipe'; use one of AiCoreNone, PipeUtilization, "
            "ArithmeticUtilization, Memory, MemoryL0, ResourceConflictRatio, MemoryUB, L2Cache",
        ),
        ({"export_type": "csv"}, "--export-type: unknown type 'csv'; use text, db or text,db"),
        ({"gc_detect_threshold": -0.5}, "--gc-detect-threshold: must be 0 to 1e9 ms, got -0.5; e.g. 10"),
        ({"gc_detect_threshold": math.nan}, "--gc-detect-threshold: must be 0 to 1e9 ms, got nan; e.g. 10"),
        ({"gc_detect_threshold": math.inf}, "--gc-detect-threshold: must be 0 to 1e9 ms, got inf; e.g. 10"),
        (
            {"op_attr": True, "level": "Level_none"},
            "--op-attr: needs a profiler level other than none; add --level 0",
        ),
        (
            {"step_on": "train"},
            "--step-on: 'train' is not MODULE:QUALNAME; --step-on __main__:train for the script's own",
        ),
        (
            {"export_stacks": ["self_xpu_time_total"], "with_stack": True},
            "--export-stacks: unknown metric 'self_xpu_time_total'; "
            "use self_cpu_time_total or self_npu_time_total or self_cuda_time_total",
        ),
        (
            {"export_stacks": ["self_cpu_time_total"]},
            "--export-stacks: needs Python stacks in the trace; add --with-stack",
        ),
        (
            {"memory_timeline": ["svg"]},
            "--memory-timeline: unknown format 'svg'; use html, json, json.gz, raw.json.gz",
        ),
        (
            {"memory_timeline": ["html"]},
            f"--memory-timeline: needs {MEMORY_NEEDS}; add --record-shapes --profile-memory --with-stack",
        ),
        (
            {"memory_timeline": ["json"], "record_shapes": True},
            "--memory-timeline: needs --profile-memory, --with-stack (on Ascend NPUs, or --with-modules); "
            "add --profile-memory --with-stack",
        ),
        (
            {"memory_timeline": ["json.gz"], "profile_memory": True, "with_stack": True},
            "--memory-timeline: needs --record-shapes; add --record-shapes",
        ),
        (
            {"memory_timeline": ["raw.json.gz"], "record_shapes": True, "profile_memory": True},
            "--memory-timeline: needs --with-stack (on Ascend NPUs, or --with-modules); add --with-stack",
        ),
        ({"output": ""}, "--output: is empty; give a directory, e.g. -o npuprof_result"),
        ({"output": "  "}, "--output: is empty; give a directory, e.g. -o npuprof_result"),
        ({"worker_name": "a/b"}, f'--worker-name: "a/b" {WORKER_RULE}; e.g. --worker-name node3'),
        ({"worker_name": ""}, f'--worker-name: "" {WORKER_RULE}; e.g. --worker-name node3'),
        ({"worker_name": ".node3"}, f'--worker-name: ".node3" {WORKER_RULE}; e.g. --worker-name node3'),
        ({"worker_name": ".."}, f'--worker-name: ".." {WORKER_RULE}; e.g. --worker-name node3'),
        (
            {"worker_name": "w" * 129},
            f'--worker-name: "{"w" * 76}... {WORKER_RULE}; e.g. --worker-name node3',
        ),
        (
            {"output": "a\nb"},
            '--output: "a\\nb" holds a control character; give a directory name without one',
        ),
        ({"min_free_space": "lots"}, f"--min-free-space: 'lots' is not a size; {SIZE_FIX}"),
        ({"dynamic": ""}, '--dynamic: "" is not a directory name; e.g. --dynamic cfg'),
        ({"dynamic": "  "}, '--dynamic: "  " is not a directory name; e.g. --dynamic cfg'),
        ({"dynamic": "a\0b"}, '--dynamic: "a\\u0000b" is not a directory name; e.g. --dynamic cfg'),
        ({"poll_interval": 2.0}, "--poll-interval: has a meaning only with --dynamic; add --dynamic DIR"),
        (
            {"dynamic": "cfg", "poll_interval": 0.09},
            "--poll-interval: must be 0.1 to 3600 seconds, got 0.09; e.g. --poll-interval 2",
        ),
        (
            {"dynamic": "cfg", "poll_interval": 3600.5},
            "--poll-interval: must be 0.1 to 3600 seconds, got 3600.5; e.g. --poll-interval 2",
        ),
        (
            {"dynamic": "cfg", "poll_interval": math.nan},
            "--poll-interval: must be 0.1 to 3600 seconds, got nan; e.g. --poll-interval 2",
        ),
        ({"delay": -1}, "--delay: must be 0 to 1e8 seconds, got -1; e.g. --delay 5"),
        ({"delay": -0.001}, "--delay: must be 0 to 1e8 seconds, got -0.001; e.g. --delay 5"),
        ({"delay": "5"}, "--delay: must be 0 to 1e8 seconds, got '5'; e.g. --delay 5"),
        ({"delay": math.inf}, "--delay: must be 0 to 1e8 seconds, got inf; e.g. --delay 5"),
        ({"duration": 0}, "--duration: must be over 0, up to 1e8 seconds, got 0; e.g. --duration 5"),
        ({"duration": -2.5}, "--duration: must be over 0, up to 1e8 seconds, got -2.5; e.g. --duration 5"),
        ({"duration": math.nan}, "--duration: must be over 0, up to 1e8 seconds, got nan; e.g. --duration 5"),
        ({"duration": [1]}, "--duration: must be over 0, up to 1e8 seconds, got [1]; e.g. --duration 5"),
        ({"delay": 0, "dynamic": "cfg"}, "--delay/--duration: exclude --dynamic; use one of them"),
        ({"duration": 3, "dynamic": "cfg"}, "--delay/--duration: exclude --dynamic; use one of them"),
        ({"export_chrome_trace": ""}, '--export-chrome-trace: "" is not a file name; e.g. trace.json'),
        ({"export_chrome_trace": " "}, '--export-chrome-trace: " " is not a file name; e.g. trace.json'),
        (  # helper-130: "-" wrote a file named "-" where stdout was meant
            {"export_chrome_trace": "-"},
            '--export-chrome-trace: "-" is not a file name (no trace is written to stdout); e.g. trace.json',
        ),
        (
            {"export_chrome_trace": "t\0.json"},
            '--export-chrome-trace: "t\\u0000.json" is not a file name; e.g. trace.json',
        ),
    ],
)
def test_each_bad_value_names_its_flag(fields: dict[str, Any], line: str) -> None:
    assert error_of(ProfileConfig(**fields).validate) == line


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"activities": ["npu"], "level": "Level_none"},
        {"level": "Level2", "op_attr": True, "aic_metrics": "L2Cache", "export_type": "db"},
        {"gc_detect_threshold": 0.0},
        {"gc_detect_threshold": 10},
        {"export_stacks": ["self_npu_time_total", "self_cuda_time_total"], "with_stack": True},
        {
            "memory_timeline": ["html", "raw.json.gz"],
            "record_shapes": True,
            "profile_memory": True,
            "with_modules": True,
        },
        {"worker_name": "node-3_a.b"},
        {"worker_name": "nœud7"},  # letters of any script
        {"step_on": "pkg.mod:Trainer.step"},
        {"min_free_space": "3%"},
        {"dynamic": "cfg", "poll_interval": 0.1},
        {"dynamic": "cfg", "poll_interval": 3600.0},
        {"delay": 0},
        {"delay": 2.5, "duration": 0.001},
        {"export_chrome_trace": "trace.json"},
        {"metadata": {"k": "v" * 4096}},
    ],
)
def test_good_values_are_accepted(fields: dict[str, Any]) -> None:
    cfg = ProfileConfig(**fields)
    assert cfg.validate() is cfg


def test_dynamic_takes_exports_whose_flags_each_request_sets() -> None:
    """helper-223: `npuprof run --dynamic cfg --export-stacks self_cpu_time_total` was refused ("add
    --with-stack"), though with --dynamic each capture's with_stack (record_shapes, profile_memory) is the
    file's, which npuprof trigger writes (a run's --with-stack had no effect there): a capture without them
    is warned of in the dynamic logs and writes none (docs: README, "Dynamic capture")."""
    cfg = ProfileConfig(dynamic="cfg", export_stacks=["self_cpu_time_total"], memory_timeline=["html"])
    assert cfg.validate() is cfg
    bad = ProfileConfig(dynamic="cfg", export_stacks=["self_xpu_time_total"])  # a name is still checked
    assert error_of(bad.validate).startswith("--export-stacks: unknown metric 'self_xpu_time_total'")


# ---- metadata limits (docs/formats.md, "profiler_metadata.json") -------------------------------------------
def test_metadata_entries_at_most_4096_characters() -> None:
    ProfileConfig(metadata={"k" * 4096: "v", "list": ["x" * 4092]}).validate()  # '["x…x"]' is 4096
    too_long = "--metadata: entry 'k' is over 4096 characters; shorten it"
    assert error_of(ProfileConfig(metadata={"k": "v" * 4097}).validate) == too_long
    assert error_of(ProfileConfig(metadata={"k": ["x" * 4093]}).validate) == too_long
    key = "q" * 4097
    assert error_of(ProfileConfig(metadata={key: 1}).validate) == (
        f"--metadata: entry '{'q' * 40}' is over 4096 characters; shorten it"
    )


def test_metadata_at_most_50_kib_in_all() -> None:
    # 12 entries of 4 + 4092 characters, and one of 1 + 2047: 12 * 4096 + 2048 = 51200, 50 KiB exactly
    entries: dict[str, Any] = {f"k{i:03}": "v" * 4092 for i in range(12)}
    ProfileConfig(metadata={**entries, "x": "v" * 2047}).validate()
    assert error_of(ProfileConfig(metadata={**entries, "x": "v" * 2048}).validate) == (
        "--metadata: is over 50 KiB in all; keep metadata small"
    )
    # a value that is not text counts as its JSON: 12345 is 5 characters
    ProfileConfig(metadata={**entries, "x": "v" * 2041, "n": 12345}).validate()  # 49152 + 2042 + 6 = 51200
    assert error_of(ProfileConfig(metadata={**entries, "x": "v" * 2042, "n": 12345}).validate) == (
        "--metadata: is over 50 KiB in all; keep metadata small"
    )


# ---- flag parsers ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("none", "Level_none"),
        ("0", "Level0"),
        ("1", "Level1"),
        ("2", "Level2"),
        ("Level0", "Level0"),
        ("Level_none", "Level_none"),
        (" level1 ", "Level1"),
        ("LEVEL2", "Level2"),
        ("level_NONE", "Level_none"),
        (2, "Level2"),
    ],
)
def test_parse_level(text: Any, level: str) -> None:
    assert parse_level(text) == level


def test_parse_level_errors() -> None:
    assert error_of(parse_level, "3") == "--level: unknown level '3'; use none, 0, 1 or 2"
    assert error_of(parse_level, " x ") == "--level: unknown level ' x '; use none, 0, 1 or 2"
    assert error_of(parse_level, "Level9", "f.json: profiler_level") == (
        "f.json: profiler_level: unknown level 'Level9'; use none, 0, 1 or 2"
    )


@pytest.mark.parametrize(
    ("text", "activities"),
    [
        ("cpu", ["cpu"]),
        ("NPU", ["npu"]),
        ("npu,cpu", ["npu", "cpu"]),
        ("CUDA", ["npu"]),
        ("gpu,device,cpu", ["npu", "cpu"]),
        (" cpu , , npu ", ["cpu", "npu"]),
        ("cpu,cpu", ["cpu"]),
    ],
)
def test_parse_activities(text: str, activities: list[str]) -> None:
    assert parse_activities(text) == activities


def test_parse_activities_errors() -> None:
    for empty in ("", ",", " , "):
        assert error_of(parse_activities, empty) == "--activities: is empty; give cpu, npu or cpu,npu"
    assert (
        error_of(parse_activities, "cpu,XPU")
        == "--activities: unknown activity 'xpu'; use cpu, npu or cpu,npu"
    )
    assert error_of(parse_activities, "tpu", "f.json: activities") == (
        "f.json: activities: unknown activity 'tpu'; use cpu, npu or cpu,npu"
    )


@pytest.mark.parametrize(
    ("text", "ranks"),
    [
        ("all", None),
        (" ALL ", None),
        ("0", [0]),
        ("0,3-5", [0, 3, 4, 5]),
        ("5,1,1", [1, 5]),
        ("2-2", [2]),
        (" 1 , 3 ", [1, 3]),
        ("1,,2", [1, 2]),
        ("0-3,2-4", [0, 1, 2, 3, 4]),
        ("1048575", [1048575]),
        ("1048574-1048575", [1048574, 1048575]),
    ],
)
def test_parse_ranks(text: str, ranks: list[int] | None) -> None:
    assert parse_ranks(text) == ranks


RANKS_FIX = "use all, or e.g. 0,3-5"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("", f"--ranks: is empty; {RANKS_FIX}"),
        (" , ", f"--ranks: is empty; {RANKS_FIX}"),
        ("3-1", f'--ranks: bad rank list "3-1"; {RANKS_FIX}'),
        ("-1", f'--ranks: bad rank list "-1"; {RANKS_FIX}'),
        ("-3-5", f'--ranks: bad rank list "-3-5"; {RANKS_FIX}'),
        ("x", f'--ranks: bad rank list "x"; {RANKS_FIX}'),
        ("1-x", f'--ranks: bad rank list "1-x"; {RANKS_FIX}'),
        ("1.5", f'--ranks: bad rank list "1.5"; {RANKS_FIX}'),
        ("1048576", f"--ranks: rank 1048576 is not in 0-1048575; {RANKS_FIX}"),
        ("0-1048576", f"--ranks: rank 1048576 is not in 0-1048575; {RANKS_FIX}"),
        # the value quoted in 80 characters at most: JSON, cut to 77 and "..."
        ("x" * 78, f'--ranks: bad rank list "{"x" * 78}"; {RANKS_FIX}'),
        ("x" * 79, f'--ranks: bad rank list "{"x" * 76}...; {RANKS_FIX}'),
    ],
)
def test_parse_ranks_errors(text: str, line: str) -> None:
    assert error_of(parse_ranks, text) == line


def test_parse_ranks_names_its_source() -> None:
    assert (
        error_of(parse_ranks, "z", "f.json: rank_list")
        == f'f.json: rank_list: bad rank list "z"; {RANKS_FIX}'
    )


def test_shown_quotes_as_json_or_else_repr() -> None:
    assert _shown("a") == '"a"' and _shown(3) == "3" and _shown(None) == "null"
    assert _shown({1, 2}) == "{1, 2}"  # no JSON for a set
    looped: list[Any] = []
    looped.append(looped)
    assert _shown(looped) == "[[...]]"  # a circular value (ValueError) as repr shows it
    assert _shown(list(range(40))) == json.dumps(list(range(40)))[:77] + "..."


def test_parse_metadata() -> None:
    assert parse_metadata(["a=1", " b =2=3", "c=", "a=again"]) == {"a": "again", "b": "2=3", "c": ""}
    assert parse_metadata([]) == {}
    assert (
        error_of(parse_metadata, ["novalue"])
        == "--metadata: 'novalue' is not KEY=VALUE; e.g. --metadata dp=8"
    )
    assert error_of(parse_metadata, ["=x"]) == "--metadata: '=x' is not KEY=VALUE; e.g. --metadata dp=8"
    assert error_of(parse_metadata, [" =x"]) == "--metadata: ' =x' is not KEY=VALUE; e.g. --metadata dp=8"


def test_parse_metadata_json() -> None:
    assert parse_metadata_json(["dp=[1, 2]", 'name="x"', "n=3", "t=true"]) == {
        "dp": [1, 2],
        "name": "x",
        "n": 3,
        "t": True,
    }
    try:
        json.loads("[1,")
    except ValueError as exc:
        reason = str(exc)
    assert error_of(parse_metadata_json, ["dp=[1,"]) == (
        f"--metadata-json: dp: \"[1,\" is not JSON ({reason}); e.g. --metadata-json 'dp=[1, 2]'"
    )
    assert error_of(parse_metadata_json, ["x"]) == (
        "--metadata-json: 'x' is not KEY=VALUE; e.g. --metadata-json dp=8"
    )
    deep = "[" * 33 + "]" * 33  # 33 levels; 3000 raised RecursionError, 990 failed later in the job
    assert error_of(parse_metadata_json, [f"k={deep}"]).startswith("--metadata-json: k: nests deeper than 32")
    very_deep = "[" * 3000 + "]" * 3000
    assert error_of(parse_metadata_json, [f"k={very_deep}"]).startswith("--metadata-json: k: nests")
    assert parse_metadata_json(["k=" + "[" * 32 + "]" * 32])["k"] is not None  # 32 levels: taken
    assert "NaN is not JSON" in error_of(parse_metadata_json, ["k=NaN"])


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("mod:f", ("mod", "f")),
        ("pkg.infer:Engine.generate", ("pkg.infer", "Engine.generate")),
        ("__main__:train_step", ("__main__", "train_step")),
    ],
)
def test_parse_step_on(text: str, parts: tuple[str, str]) -> None:
    assert parse_step_on(text) == parts


@pytest.mark.parametrize("text", ["modf", "mod:", ":f", "mod:1f", "mod:a..b", "mod:a.", "mod:f:g", "mod: f"])
def test_parse_step_on_needs_module_colon_qualname(text: str) -> None:
    # a bare name is taken for one of the script's own (helper-101): __main__:NAME is suggested
    fix = (
        f"--step-on __main__:{text} for the script's own"
        if text.isidentifier()
        else ("e.g. --step-on mypkg.infer:Engine.generate")
    )
    assert error_of(parse_step_on, text) == f"--step-on: {text!r} is not MODULE:QUALNAME; {fix}"


def test_parse_step_on_names_a_nested_function_as_such() -> None:
    assert error_of(parse_step_on, "__main__:main.<locals>.step") == (
        "--step-on: '__main__:main.<locals>.step' names a function defined inside main, which cannot be "
        "named; name a module-level function or a method of a module-level class (move it out of main, or "
        "name __main__:main if each call of it is one step)"
    )


@pytest.mark.parametrize("module", ["my-mod", "a..b", "1mod", "pkg."])
def test_parse_step_on_needs_a_module_name(module: str) -> None:
    assert error_of(parse_step_on, f"{module}:f", "NPUPROF_STEP_ON") == (
        f"NPUPROF_STEP_ON: {module!r} is not a module name; e.g. --step-on mypkg.infer:generate"
    )


def test_match_choice_is_case_blind() -> None:
    assert _match_choice("pipeutilization", AIC_METRICS, "--aic-metrics") == "PipeUtilization"
    assert _match_choice("L2CACHE", AIC_METRICS, "--aic-metrics") == "L2Cache"
    assert (
        error_of(_match_choice, "L3Cache", ("A", "B"), "--x")
        == "--x: unknown value 'L3Cache'; use one of A, B"
    )


# ---- --min-free-space ------------------------------------------------------------------------------------
GIB = 1024**3


@pytest.mark.parametrize(
    ("spec", "total", "needed"),
    [
        ("auto", 1000 * GIB, 5 * GIB),  # 5 GiB < 5 % of 1000 GiB
        ("AUTO", 10 * GIB, 10 * GIB // 20),  # 5 % of 10 GiB < 5 GiB
        ("auto", 0, 0),
        ("auto", 30, 1),  # 1.5 bytes: whole bytes, rounded down
        ("0", 10**12, 0),
        ("7", 0, 7),
        ("7b", 0, 7),
        ("1.5k", 0, 1536),
        ("3KiB", 0, 3072),
        ("2KB", 0, 2000),
        ("500MiB", 0, 500 * 1024**2),
        ("1 M", 0, 1024**2),
        (" 2G ", 0, 2 * GIB),
        ("2g", 0, 2 * GIB),
        ("10GB", 0, 10 * 1000**3),
        ("1T", 0, 1024**4),
        ("1TB", 0, 1000**4),
        ("1048576T", 0, 1 << 60),  # 1 EiB: the largest accepted
        ("3%", 1000, 30),
        ("33%", 10, 3),
        ("0.5%", 1000, 5),
        ("100%", 1000, 1000),
    ],
)
def test_required_free_bytes(spec: str, total: int, needed: int) -> None:
    got = required_free_bytes(spec, total)
    assert got == needed and type(got) is int


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        ("lots", f"--min-free-space: 'lots' is not a size; {SIZE_FIX}"),
        ("-1", f"--min-free-space: '-1' is not a size; {SIZE_FIX}"),
        ("1e3", f"--min-free-space: '1e3' is not a size; {SIZE_FIX}"),
        ("5P", f"--min-free-space: '5P' is not a size; {SIZE_FIX}"),
        ("100.5%", f"--min-free-space: '100.5%' is over 100%; {SIZE_FIX}"),
        ("1048577T", f"--min-free-space: '1048577T' is larger than any disk; {SIZE_FIX}"),
        ("9" * 50, f"--min-free-space: '{'9' * 40}' is larger than any disk; {SIZE_FIX}"),
        ("9" * 400 + "T", f"--min-free-space: '{'9' * 40}' is larger than any disk; {SIZE_FIX}"),  # inf
    ],
)
def test_min_free_space_errors(spec: str, line: str) -> None:
    assert error_of(required_free_bytes, spec, 10**12) == line
    assert error_of(parse_min_free_space, spec) == line


def test_parse_min_free_space_takes_text_or_an_integer() -> None:
    assert parse_min_free_space("auto") == "auto"
    assert parse_min_free_space(0) == "0" and parse_min_free_space(1024) == "1024"
    assert parse_min_free_space("2G", "f.json: min_free_space") == "2G"
    for value, shown in ((True, "true"), (1.5, "1.5"), (None, "null"), ([1], "[1]")):
        assert (
            error_of(parse_min_free_space, value)
            == f"--min-free-space: must be a size, got {shown}; {SIZE_FIX}"
        )
    assert error_of(parse_min_free_space, "x", "f.json: min_free_space") == (
        f"f.json: min_free_space: 'x' is not a size; {SIZE_FIX}"
    )


# ---- ranks selected ----------------------------------------------------------------------------------------
def test_wants_rank() -> None:
    every = ProfileConfig()
    assert every.wants_rank(0) and every.wants_rank(7) and every.wants_rank(None)
    some = ProfileConfig(ranks=[0, 2])
    assert some.wants_rank(0) and some.wants_rank(2) and not some.wants_rank(1)
    assert some.wants_rank(None)  # a rank not known yet reads as rank 0
    assert not ProfileConfig(ranks=[1]).wants_rank(None)


# ---- the environment payload (NPUPROF_CONFIG) ---------------------------------------------------------
def _rich_config() -> ProfileConfig:
    return ProfileConfig(
        activities=["npu"],
        record_shapes=True,
        level="Level2",
        gc_detect_threshold=2.5,
        schedule=Schedule(skip_first=2, wait=1, warmup=0, active=4, repeat=3),
        step_on="pkg:step",
        ranks=[1, 3],
        output="résultats",
        worker_name="node7",
        gzip=False,
        metadata={"dp": [1, 2], "note": "naïve"},
        export_stacks=["self_cpu_time_total"],
        with_stack=True,
        dynamic="cfg",
        poll_interval=0.5,
    )


def test_the_payload_round_trip() -> None:
    cfg = _rich_config()
    text = cfg.to_env({"run_id": "r1", "hosts": 2})
    document = decode_env_payload(text)
    assert document["version"] == 1 and document["run"] == {"run_id": "r1", "hosts": 2}
    assert document["config"]["schedule"] == {
        "skip_first": 2,
        "wait": 1,
        "warmup": 0,
        "active": 4,
        "repeat": 3,
        "off": False,
    }
    again = ProfileConfig.from_payload(document["config"])
    assert again == cfg and isinstance(again.schedule, Schedule)
    assert "résultats" in text and "\\u00e9" not in text  # unescaped: 6 times shorter for such text
    assert ", " not in text and '": ' not in text  # compact
    assert cfg.to_payload() == document["config"]


def test_a_payload_with_lone_surrogates_stays_escaped() -> None:
    cfg = ProfileConfig(output="out\udcff")  # an argv byte that is not UTF-8
    text = cfg.to_env({})
    text.encode("utf-8")  # an environment string must encode
    assert "\\udcff" in text
    assert ", " not in text and '": ' not in text  # compact all the same
    assert ProfileConfig.from_payload(decode_env_payload(text)["config"]).output == "out\udcff"


def test_a_payload_from_an_older_or_newer_writer() -> None:
    cfg = ProfileConfig.from_payload({"level": "Level1", "from_the_future": 1})
    assert cfg == ProfileConfig(level="Level1")  # unknown keys passed over, the schedule defaulted
    assert ProfileConfig.from_payload({"schedule": {"active": 9}}).schedule == Schedule(active=9)


def test_decode_env_payload_inline_or_from_a_file(tmp_path: Path) -> None:
    assert decode_env_payload('{"a": 1}') == {"a": 1}
    path = tmp_path / "payload.json"
    path.write_text('{"b": "é"}', encoding="utf-8")
    assert decode_env_payload(f"@{path}") == {"b": "é"}
    with pytest.raises(ValueError) as caught:
        decode_env_payload("[1, 2]")
    assert str(caught.value) == "'[1, 2]'...: the npuprof payload must be a JSON object"
    long = "[" + "1," * 40 + "1]"
    with pytest.raises(ValueError) as caught:
        decode_env_payload(long)
    assert str(caught.value) == f"{long[:40]!r}...: the npuprof payload must be a JSON object"
    link = tmp_path / "link.json"
    os.symlink(path, link)
    with pytest.raises(OSError):  # never through a symbolic link
        decode_env_payload(f"@{link}")


def test_an_output_name_of_bytes_that_are_not_utf8_is_no_control_character() -> None:
    """-o refuses C0 control characters (and DEL), not the surrogates that stand for bytes that are not
    UTF-8 (those paths work: tests/test_fault_inputs.py)."""
    assert ProfileConfig(output="/tmp/result\udcff").validate().output == "/tmp/result\udcff"
    for bad in ("a\tb", "a\x7fb", "a\rb"):
        with pytest.raises(ConfigError, match="holds a control character"):
            ProfileConfig(output=bad).validate()


def test_a_bad_value_in_a_config_file_is_named_by_its_key_in_the_file(tmp_path: Path) -> None:
    """The user wrote no --aic-metrics: the error names the file and its key, and keeps a fix that
    names no flag."""
    from npuprof.cli import run_flags

    cases = {
        "aic.json": (
            {"experimental_config": {"aic_metrics": "Foo"}},
            "aic.json: experimental_config.aic_metrics: unknown metric 'Foo'; use one of AiCoreNone",
        ),
        "gc.json": (
            {"experimental_config": {"gc_detect_threshold": -3}},
            "gc.json: experimental_config.gc_detect_threshold: must be 0 to 1e9 ms, got -3.0; e.g. 10",
        ),
        "inf.json": (
            {"metadata": {"k": "PLACEHOLDER"}},
            "inf.json: metadata: entry 'k' holds a number out of JSON's range (infinity or NaN)",
        ),
        "meta.json": (
            {"metadata": {"k": "x" * 5000}},
            "meta.json: metadata: entry 'k' is over 4096 characters",
        ),
    }
    for name, (document, line) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(document).replace('"PLACEHOLDER"', "1e400"))
        path.chmod(0o644)
        with pytest.raises(ConfigError) as caught:
            run_flags.build_config(path, {}, environ={})
        assert caught.value.one_line().startswith(f"{path}: {line.split(': ', 1)[1]}"), caught.value


def test_a_time_window_excludes_a_config_files_start_step(tmp_path: Path) -> None:
    """--delay with a file asking for steps 4-5: one of the two was dropped silently (the window won)."""
    from npuprof.cli import run_flags

    def file(name: str, document: dict[str, Any]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(document))
        path.chmod(0o644)
        return path

    with pytest.raises(ConfigError, match=r"--delay: exclude .*s4.json's start_step"):
        run_flags.build_config(file("s4.json", {"start_step": 4, "active": 2}), {"delay": 1.0}, environ={})
    # a file of collection keys only, or the template's start_step 0, goes with a window
    for name, document in (("c.json", {"record_shapes": True}), ("t.json", {"start_step": 0})):
        cfg = run_flags.build_config(file(name, document), {"delay": 1.0}, environ={})
        assert cfg.delay == 1.0


def test_a_config_file_asking_for_no_capture_is_said_before_the_job_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-248: `npuprof run --config profiler_config.json` with torch_npu's template (start_step 0) ran
    the whole job and only then said "no capture was written ... start_step is 0"; it is said at the
    start too, unless a flag or a time window asks for captures."""
    from npuprof.cli import run_flags

    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps({"start_step": 0, "active": 2}))
    path.chmod(0o644)
    assert run_flags.build_config(path, {}, environ={}).schedule.off
    said = " ".join(capsys.readouterr().err.split())
    assert said == (
        f"npuprof run: warning: {path}: start_step 0 asks for no capture (as torch_npu's template does): "
        "the job runs without one; set start_step in the file, or give --skip-first / --active"
    )
    for flags in ({"active": 2}, {"skip_first": 3}):  # the flags' schedule records
        assert not run_flags.build_config(path, flags, environ={}).schedule.off
        assert capsys.readouterr().err == "", flags
    for flags in ({"delay": 1.0}, {"duration": 2.0}):  # a time window records
        run_flags.build_config(path, flags, environ={})
        assert capsys.readouterr().err == "", flags


def test_a_bad_schedule_in_a_config_file_names_the_key_its_value_and_the_fix(tmp_path: Path) -> None:
    """A file npuprof trigger wrote (start_step -1), given to --config, was refused with "start_step/warmup/
    active: start_step and warmup must be >= 0 and active >= 1": no key, no value, no fix."""
    from npuprof.cli import run_flags

    cases = {
        "start_step": (
            {"start_step": -1, "active": 2},
            "must be >= 0, got -1 (-1, the next step, which "
            "npuprof trigger writes, is --dynamic's); set the step to start at (0: none)",
        ),
        "warmup": ({"start_step": 10, "warmup": -2}, "must be >= 0, got -2; e.g. 0"),
        "active": ({"start_step": 10, "active": 0}, "must be >= 1, got 0; e.g. 3"),
    }
    for key, (document, said) in cases.items():
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(document))
        path.chmod(0o600)
        with pytest.raises(ConfigError) as caught:
            run_flags.build_config(path, {}, environ={})
        assert caught.value.one_line() == f"{path}: {key}: {said}"


def test_a_number_past_a_floats_range_is_named_as_written_in_both_config_files(tmp_path: Path) -> None:
    """``"start_step": 1e999`` (read as infinity) was said "got Infinity" by --config and "got inf" by the
    --dynamic file: neither is what the user wrote, and the two differed."""
    from npuprof.agent.dynamic_request import parse_request
    from npuprof.cli import run_flags

    path = tmp_path / "c.json"
    path.write_bytes(b'{"start_step": 1e999}')
    path.chmod(0o644)
    with pytest.raises(ConfigError) as caught:
        run_flags.build_config(path, {}, environ={})
    assert caught.value.one_line().startswith(f"{path}: start_step: must be an integer, got 1e999"), (
        caught.value
    )
    heard: list[str] = []
    base = ProfileConfig(output=str(tmp_path)).validate()
    for written in (b"1e999", b"-1E+999"):
        parse_request(b'{"start_step": %s}' % written, "d", base, lambda level, line: heard.append(line))
    said = [line for line in heard if "start_step" in line]
    assert [line.split(", got ")[1].split(";")[0] for line in said] == ["1e999", "-1E+999"], heard
    # the one number setting, a float: "got inf" once converted
    path.write_bytes(b'{"start_step": 1, "experimental_config": {"gc_detect_threshold": 1e999}}')
    with pytest.raises(ConfigError, match=r"gc_detect_threshold: must be 0 to 1e9 ms, got 1e999;"):
        run_flags.build_config(path, {}, environ={})
