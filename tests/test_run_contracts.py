"""Promises of `npuprof run` that a small slip would break unseen: torch_npu's metadata limits, the secrets
kept out of profiler_metadata.json, the spelling of --aic-metrics, and gzip replacing the plain trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import clean_env, npuprof, rank_dirs, sched, trainer

FOUR_STEPS = ("--", *trainer("--steps", "4"))


@pytest.mark.parametrize(
    ("entries", "accepted"),
    [
        (["k=" + "v" * 4096], True),  # a value of exactly 4096 characters: torch_npu's limit
        (["k=" + "v" * 4097], False),
        ([f"k{i}=" + "v" * 4000 for i in range(12)], True),  # 12 x ~4 KB = 48 KB: under 50 KiB
        ([f"k{i}=" + "v" * 4000 for i in range(13)], False),  # 13 x ~4 KB = 52 KB: over 50 KiB
    ],
)
def test_metadata_limits(out: Path, entries: list[str], accepted: bool) -> None:
    flags = [arg for entry in entries for arg in ("--metadata", entry)]
    result = npuprof("run", "-o", str(out), "--no-analyse", *sched(1, 0, 1), *flags, *FOUR_STEPS)
    if accepted:
        assert result.returncode == 0, result.stderr
        (rank_dir,) = rank_dirs(out)
        written = json.loads((rank_dir / "profiler_metadata.json").read_text())
        for entry in entries:
            key, value = entry.split("=", 1)
            assert written[key] == value
    else:
        assert result.returncode == 2
        assert "--metadata" in result.stderr and "Traceback" not in result.stderr
        assert not out.exists() or rank_dirs(out) == []


def test_secrets_in_the_environment_are_not_recorded(out: Path) -> None:
    env = clean_env(NCCL_DEBUG="INFO", NCCL_API_KEY="hunter2", CUDA_SECRET_PATH="s3cr3t", HCCL_ALGO="ring")
    result = npuprof("run", "-o", str(out), "--no-analyse", *sched(1, 0, 1), *FOUR_STEPS, env=env)
    assert result.returncode == 0, result.stderr
    (rank_dir,) = rank_dirs(out)
    text = (rank_dir / "profiler_metadata.json").read_text()
    recorded = json.loads(text)["ENV_VARIABLES"]
    assert recorded["NCCL_DEBUG"] == "INFO" and recorded["HCCL_ALGO"] == "ring"
    assert "hunter2" not in text and "s3cr3t" not in text
    assert "NCCL_API_KEY" not in recorded and "CUDA_SECRET_PATH" not in recorded


@pytest.mark.parametrize("spelling", ["pipeutilization", "PIPEUTILIZATION", "PipeUtilization"])
def test_aic_metrics_any_case_is_recorded_as_torch_npu_spells_it(out: Path, spelling: str) -> None:
    result = npuprof(
        "run", "-o", str(out), "--no-analyse", "--aic-metrics", spelling, *sched(1, 0, 1), *FOUR_STEPS
    )
    assert result.returncode == 0, result.stderr
    (rank_dir,) = rank_dirs(out)
    (info,) = rank_dir.glob("profiler_info*.json")
    assert json.loads(info.read_text())["config"]["experimental_config"]["_aic_metrics"] == "PipeUtilization"


def test_gzip_replaces_the_plain_trace(out: Path) -> None:
    result = npuprof("run", "-o", str(out), *sched(1, 0, 1), *FOUR_STEPS)
    assert result.returncode == 0, result.stderr
    (rank_dir,) = rank_dirs(out)
    traces = sorted(p.name for p in rank_dir.iterdir() if ".pt.trace.json" in p.name)
    assert len(traces) == 1 and traces[0].endswith(".pt.trace.json.gz"), traces
    with gzip.open(rank_dir / traces[0], "rt") as handle:
        events = json.load(handle)["traceEvents"]
    recorded = json.loads((rank_dir / "npuprof_capture.json").read_text())["steps"]
    steps = sorted(
        int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#")
    )
    assert steps == recorded and len(steps) == 1
