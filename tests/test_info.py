"""`npuprof info`, `npuprof --version` and the `analyze` spelling, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _forked_cli import npuprof_with
from conftest import clean_env, npuprof

import npuprof as package

ROOT = Path(__file__).resolve().parent.parent
STANDIN = Path(__file__).resolve().parent / "fake_torch_npu"
CONSOLE = Path(sys.executable).with_name("npuprof")
# the stand-in torch_npu's variables: read at its import, which `npuprof info` does (after the fork)
STANDIN_READS = ("FAKE_TORCH_NPU_AVAILABLE", "FAKE_TORCH_NPU_IMPORT_ERROR")


def _info(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`npuprof info ARGS`, forked from a server of its environment that has imported torch (as info does)."""
    return npuprof_with("info", *args, modules=("torch",), env=env, read_later=STANDIN_READS)


def _info_json(env: dict[str, str] | None = None) -> dict:
    result = _info("--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_info_on_this_cpu_machine() -> None:
    facts = _info_json()
    assert facts["backend"]["name"] == "torch-cpu"
    assert any(line.startswith("CUDA:") for line in facts["backend"]["passed_over"])
    assert facts["torch"] == torch.__version__ and facts["npuprof"] == package.__version__
    assert facts["python"].split()[1] == ".".join(map(str, sys.version_info[:3]))
    expected = sorted(a.name for a in torch.profiler.supported_activities())
    assert facts["supported"]["supported_activities"] == expected
    table = _info()
    assert table.returncode == 0 and table.stdout.startswith("backend     torch-cpu: ")
    assert f"torch       {torch.__version__}" in table.stdout


def _standin_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in clean_env().items() if not k.startswith("FAKE_TORCH_NPU")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]), TORCH_DEVICE_BACKEND_AUTOLOAD="0", **extra
    )
    return env


def test_info_with_torch_npu_reports_its_own_answers() -> None:
    facts = _info_json(_standin_env())
    assert facts["backend"]["name"] == "torch_npu"
    supported = facts["supported"]
    # the stand-in answers as the real torch_npu.profiler does: its enums' members
    assert supported["supported_activities"] == ["CPU", "NPU"]
    assert {"Level0", "Level1", "Level2"} <= set(supported["supported_profiler_level"])
    assert "ACL_AICORE_PIPE_UTILIZATION" in supported["supported_ai_core_metrics"]  # AiCMetrics' values


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"FAKE_TORCH_NPU_AVAILABLE": "0"}, "torch.npu.is_available() is False"),
        ({"FAKE_TORCH_NPU_IMPORT_ERROR": "libhccl.so: cannot open shared object file"}, "libhccl.so"),
    ],
)
def test_info_says_why_torch_npu_is_passed_over(extra: dict[str, str], reason: str) -> None:
    facts = _info_json(_standin_env(**extra))
    assert facts["backend"]["name"] == "torch-cpu"
    assert any(line.startswith("torch_npu:") and reason in line for line in facts["backend"]["passed_over"])


def test_version_from_the_console_script_and_the_module() -> None:
    for command in ([str(CONSOLE)], [sys.executable, "-m", "npuprof"]):
        result = subprocess.run([*command, "--version"], capture_output=True, text=True, env=clean_env())
        assert (result.returncode, result.stdout) == (0, f"npuprof {package.__version__}\n"), result.stderr


def test_analyze_is_analyse(tmp_path: Path) -> None:
    british, american = (npuprof(name, str(tmp_path / "none")) for name in ("analyse", "analyze"))
    assert british.returncode == american.returncode == 1
    assert british.stderr == american.stderr and "does not exist" in british.stderr


def test_a_bad_info_format_is_one_line_and_exit_2() -> None:
    result = npuprof("info", "--format", "xml")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--format" in result.stderr
