"""NpuBackend against the torch_npu stand-in (tests/fake_torch_npu), each run in its own subprocess with the
stand-in first on PYTHONPATH. The stand-in records every call it receives, so these tests check the exact
keywords and values npuprof hands to torch_npu.profiler for each flag (npu_support/driver.py makes the
profilers), and, for captures, every start, step and stop npuprof's own agent and CaptureController give
it in a real `npuprof run` (npu_support/train.py), torch_npu's own profiling mode included."""

from __future__ import annotations

import csv
import decimal
import itertools
import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from conftest import capture_record, clean_env

from npuprof.agent.backends.npu_backend import torch_npu_own_mode_active
from npuprof.config import AIC_METRICS, LEVELS
from npuprof.results import layout

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "fake_torch_npu"
DRIVER = ROOT / "tests" / "npu_support" / "driver.py"

# Values of torch_npu's enums (Ascend/pytorch torch_npu/profiler/analysis/prof_common_func/_constant.py).
AIC_VALUES = {
    "AiCoreNone": "ACL_AICORE_NONE",
    "PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
    "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
    "Memory": "ACL_AICORE_MEMORY_BANDWIDTH",
    "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
    "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
    "MemoryUB": "ACL_AICORE_MEMORY_UB",
    "L2Cache": "ACL_AICORE_L2_CACHE",
}
SEED_KEYWORDS = {
    "export_type",
    "profiler_level",
    "msprof_tx",
    "aic_metrics",
    "l2_cache",
    "op_attr",
    "data_simplification",
    "record_op_args",
    "gc_detect_threshold",
}


def _driver_env(tmp: Path, api: str, **env_extra: str) -> tuple[dict[str, str], Path]:
    """The variables of one driver run (on top of the base environment), and its call log."""
    log = tmp / f"calls-{api}-{len(list(tmp.glob('calls-*')))}.jsonl"
    log.touch()  # (its name taken: the next run's log is another file)
    return {"FAKE_TORCH_NPU_LOG": str(log), "FAKE_TORCH_NPU_API": api, **env_extra}, log


def _driver(tmp: Path, args: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FAKE_TORCH_NPU", "PROF_CONFIG", "MSMONITOR"))
    }
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        OMP_NUM_THREADS="1",
    )
    env.update(env_extra)
    proc = subprocess.run(
        [sys.executable, str(DRIVER), *args], env=env, cwd=tmp, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _with_log(result: dict[str, Any], stdout: str, log: Path) -> dict[str, Any]:
    result["stdout"] = stdout
    result["log"] = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result


def run_drivers(tmp: Path, runs: list[tuple[list[str], str, dict[str, str]]]) -> list[dict[str, Any]]:
    """Several driver runs (ARGS, API, VARIABLES) in one driver process: `driver.py each` forks a child for
    each, once torch is imported, with that run's variables set; as a driver process of its own
    gives them (its document, stdout and call log), in order."""
    specs, logs = [], []
    for args, api, env_extra in runs:
        env, log = _driver_env(tmp, api, **env_extra)
        specs.append({"args": args, "env": env})
        logs.append(log)
    proc = _driver(tmp, ["each", json.dumps(specs)], {})
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == len(runs)
    return [_with_log(result, proc.stdout, log) for result, log in zip(results, logs, strict=True)]


def call(result: dict[str, Any], name: str) -> dict[str, Any]:
    found = [c["args"] for c in result["calls"] if c["call"] == name]
    assert len(found) == 1, (name, result["calls"])
    return found[0]


def exp_kwargs(result: dict[str, Any]) -> dict[str, Any]:
    args = call(result, "_ExperimentalConfig")
    assert args["args"] == []
    return args["kwargs"]


def profile_kwargs(result: dict[str, Any]) -> dict[str, Any]:
    return call(result, "profile")["kwargs"]


# ---- the mapping on the current API ---------------------------------------------------------------------
CASES: dict[str, dict[str, Any]] = {"default": {}}
CASES.update({f"level-{lv}": {"level": lv} for lv in LEVELS.values()})
CASES.update({f"aic-{m}": {"level": "Level1", "aic_metrics": m} for m in AIC_METRICS})
CASES.update(
    {
        "aic-at-level0": {"level": "Level0", "aic_metrics": "PipeUtilization"},
        "export-db": {"export_type": "db"},
        "l2": {"l2_cache": True},
        "op-attr-db": {"op_attr": True, "export_type": "db"},
        "op-attr-text": {"op_attr": True},
        "no-simplification": {"data_simplification": False},
        "op-args": {"record_op_args": True},
        "gc-1.5": {"gc_detect_threshold": 1.5},
        "gc-0": {"gc_detect_threshold": 0.0},
        "msprof-tx": {"msprof_tx": True, "level": "Level_none", "export_type": "db"},
        "cpu-only": {"activities": ["cpu"], "level": "Level1", "l2_cache": True},
        "npu-only": {"activities": ["npu"], "record_shapes": True, "with_stack": True},
        "collect-all": {
            "record_shapes": True,
            "profile_memory": True,
            "with_stack": True,
            "with_flops": True,
            "with_modules": True,
        },
        "no-analyse": {
            "analyse": False,
            "gzip": False,
            "with_stack": True,
            "export_stacks": ["self_cuda_time_total"],
        },
        "schedule": {"schedule": {"skip_first": 1, "wait": 1, "warmup": 1, "active": 2, "repeat": 2}},
    }
)


APIS = ["latest", "5.0.0", "6.0.0", "mstx"]
PROBES = {
    "installed": {},
    "no-device": {"FAKE_TORCH_NPU_AVAILABLE": "0"},
    "import-error": {
        "FAKE_TORCH_NPU_IMPORT_ERROR": "libhccl.so: cannot open shared object file: No such file or directory"
    },
}


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every driver run of this file in one driver process, a child forked for each (each sets its
    variables before it imports torch_npu or npuprof, as a process of its own): the mapping of each API
    (mappings), then each probe (probes)."""
    tmp = tmp_path_factory.mktemp("npu-mapping")
    out = str(tmp / "out")
    cases = {api: CASES.values() if api == "latest" else OLDER_CASES for api in APIS}
    runs = [(["mapping", out, json.dumps(list(cases[api]))], api, {}) for api in APIS]
    runs += [(["probe"], "latest", env) for env in PROBES.values()]
    results = run_drivers(tmp, runs)
    return {"tmp": tmp, "mappings": results[: len(APIS)], "probes": results[len(APIS) :]}


@pytest.fixture(scope="module")
def mappings(driven: dict[str, Any]) -> dict[str, Any]:
    """The mapping of CASES on the current API, and of OLDER_CASES on each older signature: a driver
    child for each API."""
    return {"tmp": driven["tmp"], **dict(zip(APIS, driven["mappings"], strict=True))}


@pytest.fixture(scope="module")
def latest(mappings: dict[str, Any]) -> dict[str, Any]:
    result = mappings["latest"]
    result["by_case"] = dict(zip(CASES, result["results"], strict=True))
    result["tmp"] = mappings["tmp"]
    return result


def test_backend_identity(latest: dict[str, Any]) -> None:
    assert latest["name"] == "torch_npu"
    assert latest["device"] == "npu:0"
    assert latest["versions"]["torch_npu_version"] == "0.0.0+standin.latest"
    assert latest["versions"]["torch_version"].startswith("2.")


def test_default_flags_give_the_seed_call(latest: dict[str, Any]) -> None:
    case = latest["by_case"]["default"]
    assert exp_kwargs(case) == {
        "export_type": "text",
        "profiler_level": "Level0",
        "msprof_tx": False,
        "aic_metrics": "ACL_AICORE_NONE",
        "l2_cache": False,
        "op_attr": False,
        "data_simplification": True,
        "record_op_args": False,
        "gc_detect_threshold": None,
    }
    kwargs = profile_kwargs(case)
    assert kwargs["activities"] == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert {
        k: kwargs[k] for k in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")
    } == {
        "record_shapes": False,
        "profile_memory": False,
        "with_stack": False,
        "with_flops": False,
        "with_modules": False,
    }
    assert kwargs["schedule"] == {
        "__class__": "_NpuSchedule", "wait": 0, "active": 3, "warmup": 1, "repeat": 1, "skip_first": 5
    }  # fmt: skip
    assert kwargs["on_trace_ready"] == "<callable function>"
    assert kwargs["experimental_config"]["__class__"] == "_ExperimentalConfig"
    assert "use_cuda" not in kwargs
    assert case["ignored"] == []


@pytest.mark.parametrize("level", list(LEVELS.values()))
def test_each_level(latest: dict[str, Any], level: str) -> None:
    case = latest["by_case"][f"level-{level}"]
    assert exp_kwargs(case)["profiler_level"] == level
    assert case["experimental"]["_profiler_level"] == level
    # torch_npu turns AI Core metrics on by itself at level 1 and 2 (torch_npu's documented behaviour).
    expected_aic = "ACL_AICORE_PIPE_UTILIZATION" if level in ("Level1", "Level2") else "ACL_AICORE_NONE"
    assert case["experimental"]["_aic_metrics"] == expected_aic
    assert case["ignored"] == []


@pytest.mark.parametrize("metric", AIC_METRICS)
def test_each_aic_metric(latest: dict[str, Any], metric: str) -> None:
    case = latest["by_case"][f"aic-{metric}"]
    assert exp_kwargs(case)["aic_metrics"] == AIC_VALUES[metric]
    if metric != "AiCoreNone":
        assert case["experimental"]["_aic_metrics"] == AIC_VALUES[metric]
    assert case["ignored"] == []


def test_aic_metric_at_level0_is_reported_as_ignored(latest: dict[str, Any]) -> None:
    case = latest["by_case"]["aic-at-level0"]
    assert exp_kwargs(case)["aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"  # handed over as given ...
    assert case["experimental"]["_aic_metrics"] == "ACL_AICORE_NONE"  # ... and dropped by torch_npu
    assert any(i.startswith("--aic-metrics PipeUtilization (needs --level 1 or 2") for i in case["ignored"])


@pytest.mark.parametrize(
    ("name", "keyword", "value", "attribute", "stored"),
    [
        ("export-db", "export_type", "db", "_export_type", ["db"]),
        ("l2", "l2_cache", True, "_l2_cache", True),
        ("op-attr-db", "op_attr", True, "_op_attr", True),
        ("no-simplification", "data_simplification", False, "_data_simplification", False),
        ("op-args", "record_op_args", True, "record_op_args", True),
        ("gc-1.5", "gc_detect_threshold", 1.5, "_gc_detect_threshold", 1.5),
        ("gc-0", "gc_detect_threshold", 0.0, "_gc_detect_threshold", 0.0),
        ("msprof-tx", "msprof_tx", True, "_msprof_tx", True),
    ],
)
def test_each_experimental_flag(
    latest: dict[str, Any], name: str, keyword: str, value: Any, attribute: str, stored: Any
) -> None:
    case = latest["by_case"][name]
    kwargs = exp_kwargs(case)
    assert set(kwargs) == SEED_KEYWORDS
    assert kwargs[keyword] == value
    assert case["experimental"][attribute] == stored
    assert case["ignored"] == []


def test_msprof_tx_with_level_none_and_db(latest: dict[str, Any]) -> None:
    kwargs = exp_kwargs(latest["by_case"]["msprof-tx"])
    assert (kwargs["profiler_level"], kwargs["export_type"], kwargs["msprof_tx"]) == (
        "Level_none",
        "db",
        True,
    )


def test_op_attr_without_db_is_reported(latest: dict[str, Any]) -> None:
    case = latest["by_case"]["op-attr-text"]
    assert exp_kwargs(case)["op_attr"] is True
    assert case["experimental"]["_op_attr"] is False  # torch_npu drops it for text export
    assert any(
        i.startswith("--op-attr (torch_npu records operator attributes only with --export-type db")
        for i in case["ignored"]
    )


def test_activities(latest: dict[str, Any]) -> None:
    cpu = latest["by_case"]["cpu-only"]
    assert profile_kwargs(cpu)["activities"] == ["ProfilerActivity.CPU"]
    assert sorted(cpu["ignored"]) == [
        "--l2-cache (torch_npu uses the experimental options only with the npu activity)",
        "--level 1 (torch_npu uses the experimental options only with the npu activity)",
    ]
    npu = latest["by_case"]["npu-only"]
    assert profile_kwargs(npu)["activities"] == ["ProfilerActivity.NPU"]
    assert sorted(npu["ignored"]) == [
        "--record-shapes (needs the cpu activity)",
        "--with-stack (needs the cpu activity)",
    ]


def test_collection_flags_pass_through(latest: dict[str, Any]) -> None:
    case = latest["by_case"]["collect-all"]
    kwargs = profile_kwargs(case)
    for key in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
        assert kwargs[key] is True, key
    assert case["ignored"] == []


def test_trace_handler_placement_and_analyse_flag(latest: dict[str, Any]) -> None:
    out = str(latest["tmp"] / "out")
    default = call(latest["by_case"]["default"], "tensorboard_trace_handler")
    assert default["dir_name"] == out
    assert default["worker_name"] == "w"  # this torch_npu puts its pid after it (!18779, March 2025)
    assert default["analyse_flag"] is True
    no_analyse = latest["by_case"]["no-analyse"]
    assert call(no_analyse, "tensorboard_trace_handler")["analyse_flag"] is False
    # --export-stacks self_cuda_time_total is the NPU's time, not ignored (test_a_cuda_named_stacks_metric...)
    assert no_analyse["ignored"] == [
        "--no-gzip (torch_npu writes its own raw data; there is no Kineto trace to gzip)"
    ]


def test_schedule_is_the_plan_in_torch_npu_actions(latest: dict[str, Any]) -> None:
    case = latest["by_case"]["schedule"]
    # torch_npu writes schedule.__dict__ into profiler_info; it must hold exactly the five numbers
    assert case["schedule_dict"] == {"wait": 1, "active": 2, "warmup": 1, "repeat": 2, "skip_first": 1}
    assert case["schedule_actions"] == [
        "NONE", "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE",
        "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE",
        "NONE", "NONE", "NONE",
    ]  # fmt: skip


# ---- older and newer torch_npu signatures ---------------------------------------------------------------
OLDER_CASES: list[dict[str, Any]] = [
    {},
    {
        "level": "Level_none",
        "export_type": "db",
        "msprof_tx": True,
        "gc_detect_threshold": 2.0,
        "analyse": False,
    },
    {"level": "Level2", "aic_metrics": "MemoryUB", "l2_cache": True, "record_op_args": True},
    {"op_attr": True, "export_type": "db"},
]


@pytest.fixture(scope="module")
def older(mappings: dict[str, Any]) -> dict[str, Any]:
    return {api: mappings[api] for api in ("5.0.0", "6.0.0", "mstx")}


def test_seed_era_signature_takes_every_flag(older: dict[str, Any]) -> None:
    default, rich, level2, op_attr = older["6.0.0"]["results"]
    assert set(exp_kwargs(default)) == SEED_KEYWORDS
    assert exp_kwargs(rich)["gc_detect_threshold"] == 2.0
    assert rich["ignored"] == []
    assert exp_kwargs(level2)["aic_metrics"] == "ACL_AICORE_MEMORY_UB"
    assert (exp_kwargs(op_attr)["op_attr"], op_attr["experimental"]["_op_attr"]) == (True, True)
    assert op_attr["ignored"] == []


def test_a_torch_npu_that_puts_no_pid_after_the_worker_name_is_given_it(older: dict[str, Any]) -> None:
    """helper-122: npuprof gave "{worker}_{pid}" to every torch_npu; those of March 2025 on append their
    pid themselves ("w_4242_4242_<stamp>_ascend_pt", whose third token torch_npu's tools read as the
    time). Earlier ones are given it; each makes "w_<pid>_<stamp>"."""
    for api in ("5.0.0", "6.0.0"):
        handler = call(older[api]["results"][0], "tensorboard_trace_handler")
        assert re.fullmatch(r"w_\d+", handler["worker_name"]), (api, handler)


def test_old_signature_passes_only_what_it_has_and_reports_the_rest(older: dict[str, Any]) -> None:
    default, rich, level2, op_attr = older["5.0.0"]["results"]
    # no AiCMetrics.AiCoreNone in that release: the default (none) is left to torch_npu
    assert exp_kwargs(default) == {
        "profiler_level": "Level0",
        "l2_cache": False,
        "data_simplification": True,
        "record_op_args": False,
    }
    assert default["ignored"] == []
    assert exp_kwargs(level2) == {
        "profiler_level": "Level2",
        "aic_metrics": "ACL_AICORE_MEMORY_UB",
        "l2_cache": True,
        "data_simplification": True,
        "record_op_args": True,
    }
    assert level2["ignored"] == []
    assert exp_kwargs(rich) == {"l2_cache": False, "data_simplification": True, "record_op_args": False}
    assert sorted(rich["ignored"]) == [
        "--export-type db (this torch_npu's _ExperimentalConfig has no export_type)",
        "--gc-detect-threshold 2 (this torch_npu's _ExperimentalConfig has no gc_detect_threshold)",
        "--level none (this torch_npu has no ProfilerLevel.Level_none)",
        "--msprof-tx (this torch_npu's _ExperimentalConfig has no msprof_tx)",
        "--no-analyse (this torch_npu's tensorboard_trace_handler always parses)",
    ]
    assert "analyse_flag" not in call(rich, "tensorboard_trace_handler")
    assert sorted(op_attr["ignored"]) == [
        "--export-type db (this torch_npu's _ExperimentalConfig has no export_type)",
        "--op-attr (this torch_npu's _ExperimentalConfig has no op_attr)",
    ]


def test_renamed_mstx_keyword(older: dict[str, Any]) -> None:
    default, rich, _, _ = older["mstx"]["results"]
    assert "mstx" in exp_kwargs(default) and "msprof_tx" not in exp_kwargs(default)
    assert exp_kwargs(rich)["mstx"] is True
    assert rich["experimental"]["_msprof_tx"] is True
    assert rich["ignored"] == []


# ---- captures, driven by npuprof's own agent and controller (`npuprof run`) -----------------------------
TRAIN = ROOT / "tests" / "npu_support" / "train.py"


def run_npuprof(
    tmp: Path, flags: list[str], steps: int, exit_code: int = 0, **env_extra: str
) -> dict[str, Any]:
    """`npuprof run -o TMP/out --worker-name w FLAGS -- python train.py STEPS EXIT_CODE` with the stand-in
    first on PYTHONPATH: the launcher, the injected agent, its CaptureController and step hooks are
    npuprof's own; the stand-in records what torch_npu receives."""
    log = tmp / "calls.jsonl"
    env = {k: v for k, v in clean_env().items() if not k.startswith(("FAKE_TORCH_NPU", "KINETO_USE_DAEMON"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]),  # this tree's npuprof (a mutation copy's too)
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        FAKE_TORCH_NPU_LOG=str(log),
        **env_extra,
    )
    out = tmp / "out"
    command = [sys.executable, str(TRAIN), str(steps), str(exit_code)]
    proc = npuprof(
        "run", "-o", str(out), "--worker-name", "w", *flags, "--", *command, cwd=tmp, env=env, timeout=240
    )
    pid = re.search(r"^pid (\d+)$", proc.stdout, re.MULTILINE)
    assert pid is not None and f"trained {steps} steps" in proc.stdout, (
        proc.stdout[-2000:] + proc.stderr[-3000:]
    )
    return {
        "proc": proc,
        "out": out,
        "pid": int(pid[1]),
        "log": [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else [],
    }


def lifecycle(calls: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What torch_npu's profiler was asked, in order: its handler made, a profile made, started, stepped,
    stopped (with its step number and the action it was then in), the handler run at each capture's end."""
    kept: list[tuple[Any, ...]] = []
    for c in calls:
        name, args = c["call"], c["args"]
        if name in ("tensorboard_trace_handler", "profile", "handler_fn"):
            kept.append((name,))
        elif name in ("profile.start", "profile.step", "profile.stop"):
            kept.append(
                (name.split(".")[1], args["step_num"], args["action"].removeprefix("ProfilerAction."))
            )
    return kept


def _trace_steps(path: Path) -> list[int]:
    """The steps of a trace_view.json in torch_npu's form: a bare array, the steps ``cpu_op``s."""
    events = json.loads(path.read_text())
    assert isinstance(events, list)
    return sorted(
        int(e["name"].split("#", 1)[1])
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "cpu_op"
        and str(e.get("name", "")).startswith("ProfilerStep#")
    )


def _raw_steps(rank_dir: Path) -> list[int]:
    """The steps among the framework records of FRAMEWORK/torch.op_range (the stand-in's JSON lines)."""
    records = [
        json.loads(line) for line in (rank_dir / "FRAMEWORK" / "torch.op_range").read_text().splitlines()
    ]
    return sorted(int(r["name"].split("#", 1)[1]) for r in records if r["name"].startswith("ProfilerStep#"))


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("npu-capture")
    config = tmp / "profiler_config.json"
    config.write_text(
        json.dumps(
            {
                "record_shapes": True,
                "metadata": {"job": "unit-test", "distributed_args": {"tp": 2, "pp": 4, "dp": 8}},
            }
        )
    )
    flags = ["--config", str(config), "--skip-first", "1", "--wait", "1", "--warmup", "1", "--active", "2"]
    result = run_npuprof(tmp, [*flags, "--repeat", "2"], 9, RANK="3")
    assert result["proc"].returncode == 0, result["proc"].stderr[-3000:]
    return result


def test_capture_steps_torch_npu_as_the_schedule_says(captured: dict[str, Any]) -> None:
    """skip 1, wait 1, warm up 1, record 2, twice, over 9 steps (by hand): a profiler opens at step 2
    (warm-up), records 3-4, is stepped into 5 (NONE: the trace is handed over) and stopped; again from 6."""
    expected = []
    for first in (2, 6):
        expected += [
            ("tensorboard_trace_handler",),  # before start: it tells torch_npu where the capture goes
            ("profile",),
            ("start", first, "WARMUP"),
            ("step", first + 1, "RECORD"),
            ("step", first + 2, "RECORD_AND_SAVE"),
            ("step", first + 3, "NONE"),
            ("handler_fn",),
            ("stop", first + 3, "NONE"),
        ]
    assert lifecycle(captured["log"]) == expected
    for kwargs in [c["args"]["kwargs"] for c in captured["log"] if c["call"] == "profile"]:
        assert kwargs["record_shapes"] is True  # from --config
        assert kwargs["schedule"]["skip_first"] == 1 and kwargs["schedule"]["repeat"] == 2


def test_capture_writes_torch_npu_rank_dirs(captured: dict[str, Any]) -> None:
    out: Path = captured["out"]
    dirs = layout.find_rank_dirs(out)
    handled = [c["args"] for c in captured["log"] if c["call"] == "handler_fn"]
    assert [Path(h["prof_path"]) for h in handled] == dirs and len(dirs) == 2
    assert [h["analyse_flag"] for h in handled] == [True, True]
    for rank_dir in dirs:
        parsed = layout.parse_rank_dir_name(rank_dir.name)
        assert parsed == {"worker": "w", "pid": str(captured["pid"]), "stamp": parsed["stamp"]}
        assert layout.rank_of(rank_dir) == 3
        info = json.loads((rank_dir / "profiler_info_3.json").read_text())
        common = info["config"]["common_config"]
        assert common["schedule"] == {"wait": 1, "active": 2, "warmup": 1, "repeat": 2, "skip_first": 1}
        assert common["record_shapes"] is True
        assert info["config"]["experimental_config"]["_profiler_level"] == "Level0"
        metadata = json.loads((rank_dir / layout.METADATA_FILE).read_text())
        assert metadata["job"] == "unit-test"
        assert metadata["distributed_args"] == {"tp": 2, "pp": 4, "dp": 8}
        assert "ENV_VARIABLES" in metadata
        assert list(rank_dir.glob("PROF_*/device_0"))
        assert layout.capture_status(rank_dir).complete


def test_capture_holds_the_scheduled_steps(captured: dict[str, Any]) -> None:
    dirs = layout.find_rank_dirs(captured["out"])
    steps = [_trace_steps(d / layout.PARSED_DIR / "trace_view.json") for d in dirs]
    assert steps == [[3, 4], [7, 8]]
    # npuprof's own record of each capture (the controller's view) agrees with torch_npu's trace
    records = [capture_record(d) for d in dirs]
    assert [(r["steps"], r["backend"], r["rank"], r["trace"]) for r in records] == [
        ([3, 4], "torch_npu", 3, None),
        ([7, 8], "torch_npu", 3, None),
    ]
    # analysed with data simplification (the default): FRAMEWORK/ is gone
    assert not any((d / "FRAMEWORK").exists() for d in dirs)


REAL = ROOT / "tests" / "fixtures" / "ascend-real"  # real torch_npu files (see SOURCE.md there)


def _header(path: Path) -> list[str]:
    with open(path, newline="") as handle:
        return next(csv.reader(handle))


def _meta_values(events: list[dict[str, Any]], kind: str, key: str) -> dict[Any, Any]:
    return {e["pid"]: e["args"][key] for e in events if e.get("ph") == "M" and e["name"] == kind}


def _form(event: dict[str, Any]) -> tuple[Any, ...]:
    """An event's form: its keys, its args' keys, the types of ts and id."""
    return (
        tuple(sorted(event)),
        tuple(sorted(event.get("args") or {})),
        type(event.get("ts")).__name__,
        type(event.get("id")).__name__,
    )


def _assert_task_queue_as_real(view: list[dict[str, Any]], real: list[dict[str, Any]]) -> None:
    """torch_npu's task queue (on by default) as the real file has it: Enqueue inside the operator on its
    thread, Dequeue@<launch> on the consumer thread of the same (Python) process, whose sort index follows
    the others, with an async_task_queue flow between them by correlation id; the AscendCL calls on the
    consumer thread; HostToDevice flow ids the task's connection id above 32 one-bits."""
    for cat in ("enqueue", "dequeue", "async_task_queue"):
        ours = {(_form(e), e["ph"]) for e in view if e.get("cat") == cat}
        theirs = {(_form(e), e["ph"]) for e in real if e.get("cat") == cat}
        assert ours == theirs, cat
    names = _meta_values(view, "process_name", "name")
    (host,) = [pid for pid, name in names.items() if name == "Python"]
    (cann,) = [pid for pid, name in names.items() if name == "CANN"]
    dequeues = [e for e in view if e.get("cat") == "dequeue"]
    enqueues = [e for e in view if e.get("cat") == "enqueue"]
    assert dequeues and len(dequeues) == len(enqueues)
    assert all(e["name"].startswith("Dequeue@aclnn") and e["pid"] == host for e in dequeues)
    assert all(re.fullmatch(r"Enqueue(@aclnn\w+)?", e["name"]) and e["pid"] == host for e in enqueues)
    (consumer,) = {e["tid"] for e in dequeues}
    sort = {
        e["tid"]: e["args"]["sort_index"]
        for e in view
        if e.get("name") == "thread_sort_index" and e["pid"] == host
    }
    assert sort[consumer] == max(sort) + 1
    assert {e["tid"] for e in view if str(e.get("name", "")).startswith("AscendCL@")} == {consumer}
    assert {e["tid"] for e in view if e.get("cat") == "HostToDevice" and e["ph"] == "s"} == {consumer}
    assert all(e["pid"] == cann for e in view if e.get("cat") == "HostToDevice" and e["ph"] == "s")
    ids = [int(e["id"]) for e in view if e.get("cat") == "HostToDevice"]
    assert ids and all(i & 0xFFFFFFFF == 0xFFFFFFFF and i >> 32 for i in ids)
    # each Enqueue inside an operator of its thread, before its Dequeue
    ops = [e for e in view if e.get("cat") == "cpu_op"]
    start = {e["args"]["correlation_id"]: float(e["ts"]) for e in dequeues}
    for e in enqueues:
        t = float(e["ts"])
        assert any(o["tid"] == e["tid"] and float(o["ts"]) <= t <= float(o["ts"]) + o["dur"] for o in ops)
        assert t < start[e["args"]["correlation_id"]]


def _assert_fwdbwd_as_real(view: list[dict[str, Any]], real: list[dict[str, Any]]) -> None:
    """torch_npu's fwdbwd flows as the real file has them (17 pairs there): the real forms, an ``s`` at the
    start of a forward operator (``Fwd thread id`` 0) and an ``f`` at the start of the backward operator of
    the same ``Sequence number``, which is the flow's id; placed right after the Python process's
    metadata."""
    ours = {(_form(e), e["ph"]) for e in view if e.get("cat") == "fwdbwd"}
    assert ours == {(_form(e), e["ph"]) for e in real if e.get("cat") == "fwdbwd"}
    ops = {(e["tid"], e["ts"]): e for e in view if e.get("cat") == "cpu_op"}
    starts = {e["id"]: e for e in view if e.get("cat") == "fwdbwd" and e["ph"] == "s"}
    ends = {e["id"]: e for e in view if e.get("cat") == "fwdbwd" and e["ph"] == "f"}
    assert starts and sorted(starts) == sorted(ends)
    for seq, start in starts.items():
        fwd, bwd = ops[(start["tid"], start["ts"])], ops[(ends[seq]["tid"], ends[seq]["ts"])]
        assert fwd["args"]["Sequence number"] == bwd["args"]["Sequence number"] == seq
        assert fwd["args"]["Fwd thread id"] == 0 != bwd["args"]["Fwd thread id"]
        assert float(start["ts"]) < float(ends[seq]["ts"])
    kinds = [e.get("cat") or e["name"] for e in view]
    first = kinds.index("fwdbwd")
    assert kinds[first - 1] == "thread_sort_index" and view[first - 1]["pid"] == start["pid"]


def test_the_standin_writes_what_torch_npu_writes(captured: dict[str, Any]) -> None:
    """The stand-in's parsed output has the forms of the real files: trace_view.json a bare array with
    string epoch times and torch_npu's processes (labels, sort indexes, Overlap Analysis lanes), flows from
    operators to device tasks; kernel_details.csv Level0's header; the rank dir torch_npu's
    PROF_* layout, simplified."""
    real = json.loads((REAL / "trace_view.json").read_text())
    for rank_dir in layout.find_rank_dirs(captured["out"]):
        out = rank_dir / layout.PARSED_DIR
        view = json.loads((out / "trace_view.json").read_text())
        assert isinstance(view, list)
        timed = [e for e in view if "ts" in e]
        assert timed and all(re.fullmatch(r"\d{16}\.\d{3}", e["ts"]) for e in timed)
        names = _meta_values(view, "process_name", "name")
        assert sorted(names.values()) == sorted(_meta_values(real, "process_name", "name").values())
        for values in (("process_labels", "labels"), ("process_sort_index", "sort_index")):
            ours = {names[pid]: v for pid, v in _meta_values(view, *values).items()}
            theirs_names = _meta_values(real, "process_name", "name")
            theirs = {theirs_names[pid]: v for pid, v in _meta_values(real, *values).items()}
            assert ours == theirs, values
        (overlap,) = [pid for pid, name in names.items() if name == "Overlap Analysis"]
        lanes = {
            e["tid"]: e["args"]["name"]
            for e in view
            if e.get("name") == "thread_name" and e["pid"] == overlap
        }
        assert lanes == {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
        device = [e for e in view if e.get("ph") == "X" and names.get(e["pid"]) == "Ascend Hardware"]
        assert device and all("cat" not in e and "Task Type" in e["args"] for e in device)
        flows = {(e["cat"], e["ph"]) for e in view if e.get("ph") in ("s", "f")}
        launches = {("async_npu", "s"), ("async_npu", "f"), ("HostToDevice", "s"), ("HostToDevice", "f")}
        queue = {("async_task_queue", "s"), ("async_task_queue", "f")}
        assert flows == launches | queue | {("fwdbwd", "s"), ("fwdbwd", "f")}
        _assert_task_queue_as_real(view, real)
        _assert_fwdbwd_as_real(view, real)
        # Level0 (the default): KernelViewParser's own columns (Device_id since June 2025, Block Num since
        # February 2026, the shapes since August 2026), not the 2023 release's full op summary
        real_header = _header(REAL / "kernel_details_2023.csv")
        shapes = real_header[real_header.index("Input Shapes") : real_header.index("Output Formats") + 1]
        assert _header(out / "kernel_details.csv") == [
            "Step Id",
            "Device_id",
            *["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)"],
            "Block Num",
            *shapes,
        ]
        # simplified as torch_npu simplifies: no FRAMEWORK/, CANN's data kept, its own outputs removed
        (cann,) = rank_dir.glob("PROF_*")
        assert (cann / "device_0" / "data").is_dir() and (cann / "host" / "data").is_dir()
        assert not (cann / "mindstudio_profiler_output").exists()


def _us(ts: str | float) -> float:
    """torch_npu's epoch µs text as µs since the epoch's last 10^9 µs (a double holds no ns at 1.7e15)."""
    return float(decimal.Decimal(str(ts)) % 10**9)


def test_the_standin_steps_are_torch_npus_device_windows(captured: dict[str, Any]) -> None:
    """step_trace_time.csv as torch_npu's FwkCANNRelationParser and TraceStepTimeParser make it, checked
    against the trace_view.json beside it: the Overlap Analysis lanes are CANN's, over the whole capture
    (Free the gaps between device work, from the first task to the last); a step's window runs from the
    first task its operators launched to the later of its last task's end and the host span's end; each
    lane span counts whole in the window that holds its start; Preparing from the host step's start."""
    for rank_dir in layout.find_rank_dirs(captured["out"]):
        out = rank_dir / layout.PARSED_DIR
        view = json.loads((out / "trace_view.json").read_text())
        names = _meta_values(view, "process_name", "name")
        tasks = sorted(
            (_us(e["ts"]), _us(e["ts"]) + e["dur"])
            for e in view
            if e.get("ph") == "X" and names.get(e["pid"]) == "Ascend Hardware"
        )
        busy: list[list[float]] = []
        for a, b in tasks:
            if busy and a <= busy[-1][1]:
                busy[-1][1] = max(busy[-1][1], b)
            else:
                busy.append([a, b])
        lanes = [e for e in view if e.get("ph") == "X" and names.get(e["pid"]) == "Overlap Analysis"]
        free = sorted((_us(e["ts"]), _us(e["ts"]) + e["dur"]) for e in lanes if e["name"] == "Free")
        gaps = [(x[1], y[0]) for x, y in itertools.pairwise(busy) if y[0] > x[1]]
        assert [(round(a, 3), round(b, 3)) for a, b in free] == [(round(a, 3), round(b, 3)) for a, b in gaps]
        # the tasks each step launched: the async_npu flows that start inside its span
        starts = {e["id"]: _us(e["ts"]) for e in view if e.get("cat") == "async_npu" and e["ph"] == "s"}
        ends = {e["id"]: _us(e["ts"]) for e in view if e.get("cat") == "async_npu" and e["ph"] == "f"}
        task_end = dict(tasks)
        hosts = {
            int(e["name"].split("#")[1]): (_us(e["ts"]), _us(e["ts"]) + e["dur"])
            for e in view
            if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")
        }
        with open(out / "step_trace_time.csv", newline="") as handle:
            rows = {int(r["Step"]): r for r in csv.DictReader(handle)}
        assert sorted(rows) == sorted(hosts)
        windows = {}
        for step, (lo, hi) in hosts.items():
            mine = [ends[i] for i, t in starts.items() if lo <= t <= hi]
            windows[step] = (min(mine), max(max(task_end[t] for t in mine), hi), lo)
        for step, (lo, hi, host_start) in windows.items():
            inside = [e for e in lanes if lo <= _us(e["ts"]) < hi]
            total = {n: sum(e["dur"] for e in inside if e["name"] == n) for n in ("Computing", "Free")}
            first = min(_us(e["ts"]) for e in inside if e["name"] == "Computing")
            row = rows[step]
            assert float(row["Computing"]) == pytest.approx(total["Computing"], abs=2e-3)
            assert float(row["Free"]) == pytest.approx(total["Free"], abs=2e-3)
            assert float(row["Preparing"]) == pytest.approx(first - host_start, abs=2e-3)


def test_one_profiler_for_every_capture_and_the_last_one_kept_at_exit(tmp_path: Path) -> None:
    """skip 1, no wait, warm up 1, record 2, until training ends (--repeat 0), over 9 steps (by hand): one
    profiler warms up at 1, records 2-3 and 5-6 (warming up at 4 and 7 in between) and is recording 8-9
    when training ends: the exit stops it and keeps 8-9, step 9 marked partial. Metadata reaches all three."""
    flags = ["--skip-first", "1", "--wait", "0", "--warmup", "1", "--active", "2", "--repeat", "0"]
    flags += ["--metadata", "job=again", "--no-analyse", "--no-data-simplification"]
    result = run_npuprof(tmp_path, flags, 9)
    assert result["proc"].returncode == 0, result["proc"].stderr[-3000:]
    assert lifecycle(result["log"]) == [
        ("tensorboard_trace_handler",),
        ("profile",),
        ("start", 1, "WARMUP"),
        ("step", 2, "RECORD"),
        ("step", 3, "RECORD_AND_SAVE"),
        ("tensorboard_trace_handler",),  # each later capture pointed at -o again (helper-213)
        ("step", 4, "WARMUP"),
        ("handler_fn",),
        ("step", 5, "RECORD"),
        ("step", 6, "RECORD_AND_SAVE"),
        ("tensorboard_trace_handler",),
        ("step", 7, "WARMUP"),
        ("handler_fn",),
        ("step", 8, "RECORD"),
        ("step", 9, "RECORD_AND_SAVE"),
        ("stop", 9, "RECORD_AND_SAVE"),
        ("handler_fn",),
    ]
    dirs = layout.find_rank_dirs(tmp_path / "out")
    assert len(dirs) == 3
    for rank_dir in dirs:
        assert json.loads((rank_dir / layout.METADATA_FILE).read_text())["job"] == "again"
        assert (rank_dir / "profiler_info.json").exists()  # no RANK: torch_npu's rank-less name
        assert not (rank_dir / layout.PARSED_DIR).exists()  # --no-analyse: raw data only
    assert [_raw_steps(d) for d in dirs] == [[2, 3], [5, 6], [8, 9]]
    records = [capture_record(d) for d in dirs]
    assert [(r["status"], r["steps"]) for r in records] == [
        ("complete", [2, 3]),
        ("complete", [5, 6]),
        ("complete", [8, 9]),
    ]
    assert [r["detail"] for r in records[:2]] == ["", ""]
    assert "step 9 is partial" in records[2]["detail"]
    assert all(len(list(d.glob("PROF_*/device_0/data/*"))) == 1 for d in dirs)


# ---- availability and torch_npu's own mode ---------------------------------------------------------------
@pytest.fixture(scope="module")
def probes(driven: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """probe with the stand-in as installed, with no device, and with its import failing: a driver child
    for each (in the driver process of the mappings)."""
    return dict(zip(PROBES, driven["probes"], strict=True))


def test_npu_available_and_selected(probes: dict[str, dict[str, Any]]) -> None:
    result = probes["installed"]
    assert result["available"] is True and result["reason"] is None
    assert result["torch_npu_registered"] is True
    assert result["selected"] == "torch_npu"
    assert result["own_mode"] is None


def test_import_failure_is_not_an_npu(probes: dict[str, dict[str, Any]]) -> None:
    message = "libhccl.so: cannot open shared object file: No such file or directory"
    result = probes["import-error"]
    assert result["available"] is False
    assert result["reason"] == f"import torch_npu failed: {message}"


def test_no_device_is_not_an_npu(probes: dict[str, dict[str, Any]]) -> None:
    result = probes["no-device"]
    assert result["available"] is False
    assert "is_available() is False" in result["reason"]


@pytest.fixture(scope="module")
def own_mode_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """torch_npu's own daemon mode on (MSMONITOR_USE_DAEMON=1) under `npuprof run`, a job that trains 7
    steps and exits with 3."""
    tmp = tmp_path_factory.mktemp("npu-own-mode")
    result = run_npuprof(
        tmp, ["--skip-first", "1", "--warmup", "1", "--active", "2"], 7, 3, MSMONITOR_USE_DAEMON="1"
    )
    result["record"] = json.loads((result["out"] / "npuprof_run.json").read_text())
    return result


def test_torch_npu_own_mode_end_to_end(own_mode_run: dict[str, Any]) -> None:
    """npuprof steps aside in that process: no profiler of npuprof's, torch_npu's own driver stepped once per
    optimizer step as without npuprof, the reason in the log and on the terminal, the exit code the job's."""
    result = own_mode_run
    assert result["proc"].returncode == 3
    assert (result["record"]["exit_code"], result["record"]["captures"]) == (3, [])
    assert layout.find_rank_dirs(result["out"]) == []
    calls = [c["call"] for c in result["log"]]
    assert "profile" not in calls and "tensorboard_trace_handler" not in calls
    assert [c["args"] for c in result["log"] if c["call"] == "dynamic_profile.init"] == [{"path": ""}]
    own_steps = [c["args"]["cur_step"] for c in result["log"] if c["call"] == "dynamic_profile.step"]
    assert own_steps == list(range(1, 8))  # the script trained 7 steps
    reason = "torch_npu's own profiling daemon mode is on (MSMONITOR_USE_DAEMON=1)"
    log = (result["out"] / "npuprof.log").read_text().splitlines()
    (line,) = [x for x in log if reason in x]
    assert (
        "[WARNING]" in line
        and re.search(rf"pid={result['pid']}( run=\w+)?\]", line)
        and "steps aside" in line
    )
    assert result["proc"].stderr.count("npuprof: " + reason) == 1  # warned once (the summary repeats it)


def test_torch_npu_own_mode_is_the_reason_given_for_no_capture(own_mode_run: dict[str, Any]) -> None:
    summary = " ".join(own_mode_run["proc"].stderr.split())
    assert "no capture was written" in summary
    assert "imported torch.optim" not in summary  # the job did import it: npuprof stepped aside
    assert summary.count("MSMONITOR_USE_DAEMON=1") == 2  # the warning, and the summary's reason


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"MSMONITOR_USE_DAEMON": "1"}, "MSMONITOR_USE_DAEMON=1"),
        ({"MSMONITOR_USE_DAEMON": "0"}, None),
        ({"MSMONITOR_USE_DAEMON": "yes"}, None),
        ({"KINETO_USE_DAEMON": "1"}, "KINETO_USE_DAEMON=1"),
        ({"MSMONITOR_USE_DAEMON": "0", "KINETO_USE_DAEMON": "1"}, None),  # torch_npu reads MSMONITOR first
    ],
)
def test_own_mode_environment(env: dict[str, str], expected: str | None) -> None:
    found = torch_npu_own_mode_active(env, require_installed=False)
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found and "npuprof does not profile this process" in found


def test_own_mode_needs_torch_npu_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("a torch_npu is importable in the test process")
    assert torch_npu_own_mode_active({"MSMONITOR_USE_DAEMON": "1"}) is None


START_FAILS = (
    "import gc, os, torch, torch_npu\n"
    "import torch_npu.profiler as tp\n"
    "def failing_start(self):\n"
    "    self.stopped = False  # marked started before its prepare fails half-way\n"
    "    raise RuntimeError('prepare could not make a thread')\n"
    "tp.profile.start = failing_start\n"
    "m = torch.nn.Linear(8, 1); opt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
    "for _ in range(8):\n"
    "    m(torch.randn(4, 8)).sum().backward(); opt.step()\n"
    "gc.collect()\n"
    "print('trained')\n"
)


@pytest.fixture(scope="module")
def forked_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Three scenarios of one `npuprof run` (skip 1, warm up 1, record 2; --with-stack, --export-stacks
    self_cpu_time_total), each in a child its job forks once torch and torch_npu are imported, one after the
    other: a training process of its own to npuprof (its own steps, captures and log lines), ended by
    sys.exit as a script ends. "workers": train.py's 6 steps, 2 DataLoader workers forked at each;
    "stacks": train.py's 5 steps; "start-fails": START_FAILS, its profiler's start failing. Each child sets
    its variables (its own call log among them) as it begins. Each scenario's result as run_npuprof gives it
    (the run's proc and out shared; its pid and call log its own); the job fails naming a failed child."""
    tmp = tmp_path_factory.mktemp("npu-forked")
    pids = tmp / "scenarios.json"
    scenarios = {
        "workers": (
            {"NPU_TRAIN_FORKED_WORKERS": "2", "NPU_TRAIN_WORKER_PIDS": str(tmp / "workers.txt")},
            ["train.py", "6"],
            "train.main()\n",
        ),
        "stacks": ({}, ["train.py", "5"], "train.main()\n"),
        "start-fails": ({}, ["start_fails.py"], START_FAILS),
    }
    for name, (env, _argv, _source) in scenarios.items():
        env["FAKE_TORCH_NPU_LOG"] = str(tmp / f"calls-{name}.jsonl")
    job = tmp / "job.py"
    job.write_text(
        "import gc, json, os, sys, threading\n"
        "import torch, torch._dynamo, torch_npu  # once here, not in each child\n"
        f"sys.path.insert(0, {str(TRAIN.parent)!r})\n"
        "import train\n"
        "assert threading.active_count() == 1, threading.enumerate()  # nothing of the parent's runs on\n"
        # the parent's objects (torch's) out of the collections of its children and their DataLoader
        # workers: each gc.collect() there (a worker's, START_FAILS's, an exit's) would walk them all and so
        # copy the parent's heap (~0.3 CPU-s each, 14 of them); what a child makes (its model, optimizer
        # and profiler) is collected there as before
        "gc.freeze()\n"
        f"scenarios, done, failed = {scenarios!r}, {{}}, []\n"
        "for name, (env, argv, source) in scenarios.items():\n"
        "    sys.stdout.flush(); sys.stderr.flush()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.environ.update(env)\n"
        "        sys.argv = argv\n"
        "        exec(compile(source, name + '.py', 'exec'), dict(globals()))\n"
        "        sys.exit(0)\n"
        "    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
        "    done[name] = [pid, code]\n"
        "    if code:\n"
        "        failed.append(f'{name} (exit code {code})')\n"
        f"json.dump(done, open({str(pids)!r}, 'w'))\n"
        "if failed:\n"
        "    sys.exit('scenarios failed: ' + ', '.join(failed))\n"
    )
    env = {k: v for k, v in clean_env().items() if not k.startswith(("FAKE_TORCH_NPU", "KINETO_USE_DAEMON"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        FAKE_TORCH_NPU_LOG=str(tmp / "calls-job.jsonl"),
    )
    out = tmp / "out"
    flags = ["--skip-first", "1", "--wait", "0", "--warmup", "1", "--active", "2"]
    flags += ["--with-stack", "--export-stacks", "self_cpu_time_total"]
    proc = npuprof(
        "run", "-o", str(out), "--worker-name", "w", *flags, "--", sys.executable, str(job), cwd=tmp,
        env=env, timeout=360,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    done = json.loads(pids.read_text())
    assert sorted(done) == sorted(scenarios)
    results = {}
    for name, (pid, _code) in done.items():
        calls = Path(scenarios[name][0]["FAKE_TORCH_NPU_LOG"])
        log = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
        results[name] = {"proc": proc, "out": out, "pid": pid, "log": log, "tmp": tmp}
    steps = {"workers": 6, "stacks": 5}
    for name, n in steps.items():
        assert f"pid {results[name]['pid']}\ntrained {n} steps\n" in proc.stdout, (name, proc.stdout[-2000:])
    return results


def _rank_dirs_of(result: dict[str, Any]) -> list[Path]:
    """The rank dirs of one scenario of forked_jobs (its process's captures)."""
    return [d for d in layout.find_rank_dirs(result["out"]) if capture_record(d)["pid"] == result["pid"]]


def _log_of(result: dict[str, Any]) -> str:
    """npuprof.log's lines of one scenario of forked_jobs (its process's agent)."""
    lines = (result["out"] / "npuprof.log").read_text().splitlines()
    return "\n".join(line for line in lines if f"[agent pid={result['pid']} " in line)


def test_a_child_forked_during_a_capture_never_stops_the_parents_profiler(
    forked_jobs: dict[str, dict[str, Any]],
) -> None:
    """helper-122: torch_npu's profile stops itself in __del__ (if not self.stopped: self.stop()); a forked
    DataLoader worker dropped the profiler it inherited, so each worker ran stop, the trace's finalising
    and the handler into the parent's rank dir (on an NPU, a device synchronize from the child), whenever
    Python's cyclic collector ran there (the profile and its action controller hold each other). (Its job
    is the scenario "workers" of forked_jobs, recorded with stacks and parsed: was --no-analyse.)"""
    result = forked_jobs["workers"]
    pids = result["tmp"] / "workers.txt"
    assert len(set(pids.read_text().split())) == 12  # 2 workers forked at each of the 6 steps
    foreign = [c for c in result["log"] if c["pid"] != result["pid"] and c["call"].startswith("profile")]
    assert foreign == []
    assert ("stop", 4, "RECORD_AND_SAVE") not in lifecycle(result["log"])  # stepped to its end, once
    (rank_dir,) = _rank_dirs_of(result)
    assert len(list(rank_dir.glob("PROF_*"))) == 1
    assert capture_record(rank_dir)["steps"] == [2, 3]


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One job read by the two tests below (their flags together): stacks, shapes and memory recorded, the
    stacks and the memory timeline exported, torch_npu's data kept whole; skip 1, warm up 1, record 3 of
    6 steps, each loading its data for 20 ms and holding a 48 MB buffer before its optimizer's update; with
    record_op_args, whose operator arguments torch_npu dumps into ``<rank dir>_op_args/`` beside the rank
    dir (ProfilerMgr::Start), no rank dir of its own."""
    tmp = tmp_path_factory.mktemp("npu-memory")
    flags = ["--skip-first", "1", "--wait", "0", "--warmup", "1", "--active", "3"]
    flags += ["--with-stack", "--record-shapes", "--profile-memory", "--no-data-simplification"]
    flags += ["--export-stacks", "self_cpu_time_total", "--memory-timeline", "json", "--record-op-args"]
    flags += ["--export-stacks", "self_cuda_time_total", "--export-stacks", "self_npu_time_total"]
    result = run_npuprof(tmp, flags, 6, NPU_TRAIN_LOAD_S="0.02", NPU_TRAIN_BUFFER_MB="48")
    assert result["proc"].returncode == 0, result["proc"].stderr[-3000:]
    return result


def test_torch_npus_own_stacks_and_memory_timeline_are_kept(memory_run: dict[str, Any]) -> None:
    """helper-122: torch_npu keeps the collection flags on its interface (prof.prof_if), so every NPU memory
    timeline was skipped as lacking the flags given; and torch_npu writes its stacks to a ".log" file
    whatever the name asked, so npuprof, asking for stacks.txt, read nothing."""
    result = memory_run
    (rank_dir,) = layout.find_rank_dirs(result["out"])
    asked = [c["args"]["output_path"] for c in result["log"] if c["call"] == "export_stacks"]
    assert [Path(p).suffix for p in asked] == [".log"] * 3
    stacks = (rank_dir / "stacks_self_cpu_time_total.folded").read_text().splitlines()
    assert stacks and all(re.fullmatch(r"\S.*;.* \d+", line) for line in stacks), stacks[:3]
    assert any("train.py" in line for line in stacks)
    # npuprof's step boundary as npuprof's own stacks show it (helper-123): one frame, not its code
    assert not any("npuprof/agent" in line for line in stacks), [ln for ln in stacks if "npuprof/" in ln][:3]
    assert any(line.rsplit(" ", 1)[0].endswith(";[npuprof]") for line in stacks), stacks
    timeline = json.loads((rank_dir / "memory_timeline.json").read_text())
    assert timeline, "an empty memory timeline"
    log = (result["out"] / "npuprof.log").read_text()
    assert "memory timeline skipped" not in log and "gave nothing" not in log
    # its memory_record.csv (the allocator's rows, times with a tab after them, as torch_npu writes them)
    # gives the rank's peak in analyse, read without torch_npu; with the NPU activity CANN's application
    # totals (APP: no allocated size) come first, and were each said "no number ... a damaged file"
    # (helper-218)
    with open(rank_dir / layout.PARSED_DIR / "memory_record.csv", newline="") as f:
        every = list(csv.DictReader(f))
    records = [r for r in every if r["Component"] == "PTA"]
    assert records and all(r["Timestamp(us)"].endswith("\t") for r in records)
    app = [r for r in every if r["Component"] == "APP"]
    assert app and every[: len(app)] == app and all(r["Total Allocated(MB)"] == "" for r in app)
    assert len(every) == len(app) + len(records)
    done = npuprof("analyse", str(result["out"]), "--format", "json", env=clean_env())
    (rank,) = json.loads(done.stdout)["ranks"]
    assert rank["memory_peak_mb"] == pytest.approx(
        max(float(r["Total Allocated(MB)"]) for r in records), abs=1e-3
    )
    assert not [w for w in rank.get("warnings", []) if "memory_record.csv" in w], rank["warnings"]
    assert "memory_record.csv" not in done.stderr, done.stderr
    # record_op_args: the dump beside the rank dir is none (neither a rank nor a problem of analyse's)
    assert sorted(p.name for p in result["out"].iterdir() if p.is_dir()) == [
        rank_dir.name,
        f"{rank_dir.name}_op_args",
    ]
    assert json.loads(done.stdout)["problems"] == []


def test_a_cuda_named_stacks_metric_gives_the_npus_time_said_once(memory_run: dict[str, Any]) -> None:
    """--export-stacks self_cuda_time_total on torch_npu was "ignored" and no file made, where torch's
    export_stacks reads any device metric name as the device's time (npuprof export-stacks takes it so). It
    is the NPU's time now, asked of torch_npu by the one name it takes for it (another it reads as host
    time), and one line of the run says so."""
    result = memory_run
    (rank_dir,) = layout.find_rank_dirs(result["out"])
    metrics = [c["args"]["metric"] for c in result["log"] if c["call"] == "export_stacks"]
    assert sorted(metrics) == ["self_cpu_time_total", "self_npu_time_total", "self_npu_time_total"]
    cuda = (rank_dir / "stacks_self_cuda_time_total.folded").read_text()
    npu = (rank_dir / "stacks_self_npu_time_total.folded").read_text()
    assert cuda and cuda == npu
    assert cuda != (rank_dir / "stacks_self_cpu_time_total.folded").read_text()
    stderr = result["proc"].stderr
    assert not [line for line in stderr.splitlines() if "ignored" in line and "self_cuda" in line], stderr
    said = [line for line in stderr.splitlines() if "self_cuda_time_total on an NPU" in line]
    assert len(said) == 1, stderr
    assert "the NPU's device time is shown" in said[0] and "--export-stacks self_npu_time_total" in said[0]


def test_stacks_torch_npu_gives_nothing_for_are_built_from_its_trace_view(
    forked_jobs: dict[str, dict[str, Any]],
) -> None:
    """A torch_npu release that deletes FRAMEWORK/ in its parse (data simplification, the default) gives
    no stacks from export_stacks; they were "not produced". The post-processor builds them from the parse's
    trace_view.json, whose operators carry their call stacks: each operator's self time under its frames.
    (Its job is the scenario "stacks" of forked_jobs.)"""
    result = forked_jobs["stacks"]
    tmp_path = result["tmp"]
    (rank_dir,) = _rank_dirs_of(result)
    assert not (rank_dir / "FRAMEWORK").exists()  # simplified away: torch_npu's own stacks are empty
    assert "torch_npu's export_stacks gave nothing; npuprof builds them from trace_view.json" in _log_of(
        result
    )
    log = (result["out"] / "npuprof.log").read_text()
    stacks = (rank_dir / "stacks_self_cpu_time_total.folded").read_text().splitlines()
    assert stacks and all(re.fullmatch(r"\S.* \d+", line) for line in stacks), stacks[:3]
    assert any(";train.py(" in line for line in stacks)
    assert not any("npuprof/agent" in line for line in stacks)
    assert capture_record(rank_dir)["extras"] == ["stacks_self_cpu_time_total.folded"]
    # host self time in all: each host thread's busy time, its outermost events' (operators, the task
    # queue's enqueue / dequeue, the CANN calls on the same thread ids), each line rounded to whole µs
    events = json.loads((rank_dir / layout.PARSED_DIR / "trace_view.json").read_text())
    host_pids = {
        e["pid"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"] in ("Python", "CANN")
    }
    ops = sorted(
        (
            (float(e["ts"]), float(e["dur"]), e["tid"])
            for e in events
            if e["pid"] in host_pids and e["ph"] == "X"
        ),
        key=lambda op: (op[2], op[0], -op[1]),
    )
    outer_total, outer_end = 0.0, {}
    for ts, dur, tid in ops:
        if ts >= outer_end.get(tid, -1.0):
            outer_total += dur
            outer_end[tid] = ts + dur
    folded_total = sum(int(line.rsplit(" ", 1)[1]) for line in stacks)
    assert abs(folded_total - outer_total) <= len(stacks) * 0.5 + 1, (folded_total, outer_total)
    # the same as npuprof export-stacks gives from that trace afterwards
    again = npuprof("export-stacks", str(rank_dir), "-o", str(tmp_path / "again.folded"), env=clean_env())
    assert again.returncode == 0, again.stderr
    assert sorted(stacks) == sorted((tmp_path / "again.folded").read_text().splitlines())
    assert "not produced" not in log


def test_a_steps_memory_peak_is_over_its_whole_host_span_on_torch_npus_window(
    memory_run: dict[str, Any],
) -> None:
    """helper-126: a rank dir torch_npu parsed gives each step's memory peak over
    [start, start + duration), its start the host step's (first task less Preparing) but its duration
    Computing + Communication(Not Overlapped) + Free, which torch_npu measures on its device window (from
    the step's first task on, Free only between device tasks): the host's Preparing (here 20 ms of data
    loading) and, in a capture's last step, the host work after its last task fall outside. A 48 MB buffer
    the last step held before its optimizer's update was not its peak. Expected here, by hand: the allocator
    records of memory_record.csv inside the step's ProfilerStep span in trace_view.json (and the last one
    before it: what the step started with). (Its job, memory_run, records stacks and shapes too, and keeps
    torch_npu's data whole, for the test above.)"""
    result = memory_run
    (rank_dir,) = layout.find_rank_dirs(result["out"])
    out = rank_dir / layout.PARSED_DIR
    view = json.loads((out / "trace_view.json").read_text())
    expected, _ = _step_peaks_by_hand(view, out)
    assert sorted(expected) == [2, 3, 4] and all(peak >= 48 for peak in expected.values()), expected
    report = npuprof("analyse", str(result["out"]), "--format", "json", env=clean_env())
    assert report.returncode == 0, report.stderr
    (rank,) = json.loads(report.stdout)["ranks"]
    assert {s["step"]: s["memory_peak_mb"] for s in rank["steps"]} == expected


def test_a_torch_npu_capture_of_the_cpu_activity_only_is_an_npu_run_without_device_figures(
    tmp_path: Path,
) -> None:
    """torch_npu given the CPU activity only collects no CANN data (its ProfilerMgr starts msprof only for
    the NPU activity: no PROF_* directory) and parses with its ONLY_FWK_CONFIG: trace_view.json (the
    framework's events, no Overlap Analysis), operator_details.csv and memory_record.csv, no device table.
    analyse reads its trace_view.json, and (helper-218) called the rank's device "CPU" and the capture a
    "CPU-only trace (the CPU is the device: comp is its operators' time ...)": on an NPU run the operators
    only launch what the NPU computes. It is the NPU's capture, with its device work unrecorded, said so."""
    flags = ["--activities", "cpu", "--skip-first", "1", "--wait", "0", "--warmup", "1", "--active", "2"]
    result = run_npuprof(tmp_path, [*flags, "--profile-memory"], 5, NPU_TRAIN_BUFFER_MB="24")
    assert result["proc"].returncode == 0, result["proc"].stderr[-3000:]
    (rank_dir,) = layout.find_rank_dirs(result["out"])
    # the run's summary and analyse's note say why there is no device table, and blame no parse
    # (helper-218: "it found no device work there ..., or its device data did not parse")
    run_said = " ".join((result["proc"].stdout + result["proc"].stderr).split())
    assert "recorded with the CPU activity only (--activities cpu): torch_npu collects no" in run_said
    assert "did not parse" not in run_said, run_said
    assert not list(rank_dir.glob("PROF_*"))
    out = rank_dir / layout.PARSED_DIR
    tables = [
        "analyse.done",
        "memory_record.csv",
        "operator_details.csv",
        "operator_memory.csv",
        "trace_view.json",
    ]
    assert sorted(p.name for p in out.iterdir()) == tables
    view = json.loads((out / "trace_view.json").read_text())
    assert set(_meta_values(view, "process_name", "name").values()) == {"Python"}
    steps = _trace_steps(out / "trace_view.json")
    assert steps == [2, 3]
    done = npuprof("analyse", str(result["out"]), env=clean_env())
    assert done.returncode == 0, done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "CPU-only" not in said and "the CPU is the device" not in said, said
    # its title, its lines joined: under xdist the workers have COLUMNS=80, which folds a long rank dir
    assert "rank - (NPU, " in said, said
    assert "torch_npu recorded no device work: its profiler was given the CPU activity only" in said
    assert "torch_npu writes no step_trace_time.csv for a capture of the CPU activity only: its" in said
    assert "stop short" not in said, said
    report = npuprof("analyse", str(result["out"]), "--format", "json", env=clean_env())
    (rank,) = json.loads(report.stdout)["ranks"]
    assert rank["device"] == "NPU" and [s["step"] for s in rank["steps"]] == steps
    assert not rank["top_kernels"]
    # its memory figures from memory_record.csv (trace_view.json holds no memory event; they were "-"):
    # each step's peak over its ProfilerStep span, with the last record before it, computed here by hand
    expected, records = _step_peaks_by_hand(view, out)
    assert all(peak >= 24 for peak in expected.values()), expected
    assert {s["step"]: s["memory_peak_mb"] for s in rank["steps"]} == expected
    assert rank["memory_peak_mb"] == round(max(a for _t, a in records), 3)


def test_an_output_dir_torch_npu_refuses_is_said_and_nothing_is_written_elsewhere(tmp_path: Path) -> None:
    """helper-126: torch_npu's tensorboard_trace_handler is under @no_exception_func
    (since August 2024): when it refuses the directory (releases before June 2026 refuse a path with a
    character outside ``[.\\/_\\-\\s~0-9a-zA-Z]`` and CJK, such as "+" or "="), it prints an [ERROR] line and
    returns None instead of raising. npuprof took the None as the handler: torch_npu, its path never set,
    recorded the capture into the job's working directory (a stray unparsed *_ascend_pt dir there), and
    npuprof said only "'NoneType' object is not callable". Expected: nothing of the capture outside the
    output directory, and npuprof's words name the refusal rather than a Python TypeError."""
    cwd = tmp_path / "job"
    cwd.mkdir()
    out = tmp_path / "lr=0.1+warmup"
    env = {k: v for k, v in clean_env().items() if not k.startswith(("FAKE_TORCH_NPU", "KINETO_USE_DAEMON"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        FAKE_TORCH_NPU_API="6.0.0",
        FAKE_TORCH_NPU_LOG=str(tmp_path / "calls.jsonl"),
    )
    flags = ["--skip-first", "1", "--wait", "0", "--warmup", "1", "--active", "2"]
    proc = npuprof("run", "-o", str(out), *flags, "--", sys.executable, str(TRAIN), "5", cwd=cwd, env=env)
    assert "trained 5 steps" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Invalid input path" in proc.stdout  # torch_npu's own [ERROR] line: the refusal happened
    assert not list(cwd.glob("*_ascend_pt")), "the capture was written into the job's working directory"
    assert "NoneType" not in proc.stderr, proc.stderr[-2000:]
    assert "skipped: torch_npu refused the output directory" in proc.stderr, proc.stderr[-2000:]
    assert "fix: give npuprof run -o such a path" in proc.stderr


def test_a_torch_npu_profiler_whose_start_failed_is_never_stopped_by_its_destructor(
    forked_jobs: dict[str, dict[str, Any]],
) -> None:
    """helper-127: npuprof leaves a profiler whose start failed as it began unstopped (its stop could crash
    the job), but dropped it: torch_npu's profile.__del__ (if not self.stopped: self.stop()) then stopped
    it all the same when collected. It is kept, marked stopped. (Its job is the scenario "start-fails" of
    forked_jobs: START_FAILS, its own call log; the job's cwd is the other scenarios' too.)"""
    result = forked_jobs["start-fails"]
    proc, tmp_path = result["proc"], result["tmp"]
    assert proc.returncode == 0 and "trained\n" in proc.stdout, proc.stderr[-3000:]
    assert "prepare could not make a thread" in proc.stderr
    assert not list(tmp_path.glob("PROF_*")) and not (tmp_path / "FRAMEWORK").exists()  # none into the cwd
    assert not _rank_dirs_of(result)
    made = [c["call"] for c in result["log"]]
    assert "profile" in made and "profile.stop" not in made, made


def test_op_attr_is_reported_where_the_db_export_asked_cannot_be_given() -> None:
    """helper-214: `--export-type text,db --op-attr` on a torch_npu whose _ExperimentalConfig takes one export
    type (6.0.0's `export_type: str`): the list is not handed over (reported), torch_npu exports text and
    drops op_attr ("op_attr switch is invalid with export type set as text"); --op-attr was not reported."""
    import types

    from npuprof.agent.backends.npu_backend import NpuBackend
    from npuprof.config import ProfileConfig

    class _ExperimentalConfig:  # the 6.0.0 signature (Ascend/pytorch experimental_config.py)
        def __init__(
            self,
            profiler_level: str = "Level0",
            aic_metrics: str = "ACL_AICORE_NONE",
            l2_cache: bool = False,
            msprof_tx: bool = False,
            data_simplification: bool = True,
            record_op_args: bool = False,
            op_attr: bool = False,
            gc_detect_threshold: float | None = None,
            export_type: str = "text",
        ) -> None:
            pass

    def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True):
        return None

    tp = types.SimpleNamespace(
        _ExperimentalConfig=_ExperimentalConfig,
        ProfilerLevel=types.SimpleNamespace(
            Level0="Level0", Level1="Level1", Level2="Level2", Level_none="None"
        ),
        AiCMetrics=types.SimpleNamespace(AiCoreNone="ACL_AICORE_NONE"),
        ExportType=types.SimpleNamespace(Text="text", Db="db"),
        tensorboard_trace_handler=tensorboard_trace_handler,
    )
    backend = NpuBackend.__new__(NpuBackend)
    backend._tp = tp
    assert sorted(backend.ignored_flags(ProfileConfig(export_type="text,db", op_attr=True))) == [
        "--export-type text,db (this torch_npu takes one export type, not a list: give text or db)",
        "--op-attr (torch_npu records operator attributes only with --export-type db)",
    ]
    assert backend.ignored_flags(ProfileConfig(export_type="db", op_attr=True)) == []


def _step_peaks_by_hand(view: list[dict], out: Path) -> tuple[dict[int, float], list[tuple[Decimal, float]]]:
    """Each step's memory peak in MB computed here from torch_npu's files: the allocator (PTA) records of
    memory_record.csv inside the step's ProfilerStep span of trace_view.json, and the last one before it
    (what the step started with); with those records, by time."""
    spans = {
        int(e["name"].split("#")[1]): (Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"])))
        for e in view
        if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")
    }
    with open(out / "memory_record.csv", newline="") as handle:
        records = sorted(
            (Decimal(r["Timestamp(us)"].strip()), float(r["Total Allocated(MB)"]))
            for r in csv.DictReader(handle)
            if r["Component"] == "PTA"
        )
    expected = {}
    for step, (lo, hi) in spans.items():
        before = [a for t, a in records if t < lo][-1:]
        expected[step] = round(max(before + [a for t, a in records if lo <= t < hi]), 3)
    return expected, records
