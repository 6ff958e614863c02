"""Promises of `npuprof run` that a small slip would break unseen: torch_npu's metadata limits, the secrets
kept out of profiler_metadata.json, the spelling of --aic-metrics, and gzip replacing the plain trace."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest
from conftest import clean_env, npuprof, rank_dirs, sched, trainer

FOUR_STEPS = ("--", *trainer("--steps", "4"))
ENTRIES_AT_THE_VALUE_LIMIT = ["k=" + "v" * 4096]  # a value of exactly 4096 characters: torch_npu's limit
ENTRIES_UNDER_THE_TOTAL = [f"k{i}=" + "v" * 4000 for i in range(12)]  # 12 x ~4 KB = 48 KB: under 50 KiB
# A job carries several of these promises at once, each read back from its own file: --metadata from
# profiler_metadata.json, --aic-metrics from profiler_info*.json. So each spelling of --aic-metrics shares
# its run with the accepted --metadata entries named here (one job, not two); the last, torch_npu's own, the
# run of the secrets in the environment (analysed: the gzip's test reads it too).
AIC_SPELLING_RUN_WITH = {
    "pipeutilization": ENTRIES_AT_THE_VALUE_LIMIT,
    "PIPEUTILIZATION": ENTRIES_UNDER_THE_TOTAL,
}
SECRETS = {"NCCL_DEBUG": "INFO", "NCCL_API_KEY": "hunter2", "CUDA_SECRET_PATH": "s3cr3t", "HCCL_ALGO": "ring"}
SECRETS_RUN_FLAGS = ["--aic-metrics", "PipeUtilization"]


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory: pytest.TempPathFactory):
    """``npuprof run -o OUT [--no-analyse] FLAGS`` (skip 1, record 1) of 4 steps with the extra environment
    ``env``: (OUT, the result), run once for each, shared by the tests that read it."""
    runs: dict[tuple, tuple[Path, subprocess.CompletedProcess[str]]] = {}

    def run(
        flags: list[str], env: dict[str, str] | None = None, analyse: bool = False
    ) -> tuple[Path, subprocess.CompletedProcess[str]]:
        key = (tuple(flags), tuple(sorted((env or {}).items())), analyse)
        if key not in runs:
            out = tmp_path_factory.mktemp("run") / "result"
            no_analyse = [] if analyse else ["--no-analyse"]
            result = npuprof(
                "run",
                "-o",
                str(out),
                *no_analyse,
                *sched(1, 0, 1),
                *flags,
                *FOUR_STEPS,
                env=clean_env(**(env or {})),
            )
            runs[key] = (out, result)
        return runs[key]

    return run


def _metadata_flags(entries: list[str]) -> list[str]:
    return [arg for entry in entries for arg in ("--metadata", entry)]


def _aic_and_metadata_flags(spelling: str) -> list[str]:
    return ["--aic-metrics", spelling, *_metadata_flags(AIC_SPELLING_RUN_WITH[spelling])]


def _secrets_run(shared_run) -> tuple[Path, subprocess.CompletedProcess[str]]:
    return shared_run(SECRETS_RUN_FLAGS, env=SECRETS, analyse=True)


def _run_with_spelling(shared_run, spelling: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    return (
        shared_run(_aic_and_metadata_flags(spelling))
        if spelling in AIC_SPELLING_RUN_WITH
        else _secrets_run(shared_run)
    )


@pytest.mark.parametrize(
    ("entries", "accepted"),
    [
        (ENTRIES_AT_THE_VALUE_LIMIT, True),
        (["k=" + "v" * 4097], False),
        (ENTRIES_UNDER_THE_TOTAL, True),
        ([f"k{i}=" + "v" * 4000 for i in range(13)], False),  # 13 x ~4 KB = 52 KB: over 50 KiB
    ],
)
def test_metadata_limits(out: Path, shared_run, entries: list[str], accepted: bool) -> None:
    if accepted:
        (spelling,) = [s for s, with_entries in AIC_SPELLING_RUN_WITH.items() if with_entries == entries]
        shared_out, result = shared_run(_aic_and_metadata_flags(spelling))
        assert result.returncode == 0, result.stderr
        (rank_dir,) = rank_dirs(shared_out)
        written = json.loads((rank_dir / "profiler_metadata.json").read_text())
        for entry in entries:
            key, value = entry.split("=", 1)
            assert written[key] == value
    else:
        flags = _metadata_flags(entries)
        result = npuprof("run", "-o", str(out), "--no-analyse", *sched(1, 0, 1), *flags, *FOUR_STEPS)
        assert result.returncode == 2
        assert "--metadata" in result.stderr and "Traceback" not in result.stderr
        assert not out.exists() or rank_dirs(out) == []


def test_secrets_in_the_environment_are_not_recorded(shared_run) -> None:
    # the run test_gzip_replaces_the_plain_trace reads too (the trace's gzip is none of the metadata's)
    out, result = _secrets_run(shared_run)
    assert result.returncode == 0, result.stderr
    (rank_dir,) = rank_dirs(out)
    text = (rank_dir / "profiler_metadata.json").read_text()
    recorded = json.loads(text)["ENV_VARIABLES"]
    assert recorded["NCCL_DEBUG"] == "INFO" and recorded["HCCL_ALGO"] == "ring"
    assert "hunter2" not in text and "s3cr3t" not in text
    assert "NCCL_API_KEY" not in recorded and "CUDA_SECRET_PATH" not in recorded


@pytest.mark.parametrize("spelling", ["pipeutilization", "PIPEUTILIZATION", "PipeUtilization"])
def test_aic_metrics_any_case_is_recorded_as_torch_npu_spells_it(shared_run, spelling: str) -> None:
    out, result = _run_with_spelling(shared_run, spelling)
    assert result.returncode == 0, result.stderr
    (rank_dir,) = rank_dirs(out)
    (info,) = rank_dir.glob("profiler_info*.json")
    assert json.loads(info.read_text())["config"]["experimental_config"]["_aic_metrics"] == "PipeUtilization"


def test_gzip_replaces_the_plain_trace(shared_run) -> None:
    out, result = _secrets_run(shared_run)  # the run of the secrets' test
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
