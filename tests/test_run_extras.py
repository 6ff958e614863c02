"""`npuprof run` with in-run exports (stacks, memory timeline) and on the torch_npu stand-in."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import capture_record, clean_env, npuprof, profiler_steps, rank_dirs, sched, trainer

FAKE_TORCH_NPU = Path(__file__).resolve().parent / "fake_torch_npu"


# --export-stacks and --memory-timeline in a run: tests/test_exports_offloaded.py (its files checked against
# the trace itself); the html's content: tests/test_memory_timeline.py


def test_flags_meaningless_on_cpu_are_reported_once_and_the_users_sitecustomize_runs_where_it_profiles(
    out: Path, tmp_path: Path
) -> None:
    """One job for two checks: the flags that mean nothing on the CPU are named once as ignored, and a
    sitecustomize of the user's (on PYTHONPATH) still runs in the process npuprof profiles."""
    site = tmp_path / "usersite"
    site.mkdir()
    marker = tmp_path / "user_site_pids"
    (site / "sitecustomize.py").write_text(
        f"import os\nwith open({str(marker)!r}, 'a') as f:\n    f.write(f'{{os.getpid()}}\\n')\n"
    )
    result = npuprof(
        "run", "-o", str(out), *sched(1, 1, 1), "--no-analyse", "--with-stack",
        "--export-stacks", "self_cuda_time_total", "--l2-cache", "--gc-detect-threshold", "5",
        "--", *trainer("--steps", "4"), env=clean_env(PYTHONPATH=str(site)),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("--export-stacks self_cuda_time_total") == 1
    (line,) = [x for x in result.stderr.splitlines() if "ignored on the torch-cpu backend" in x]
    assert "--l2-cache" in line
    assert "--gc-detect-threshold" not in line  # GC pauses are recorded on torch.profiler too
    (d,) = rank_dirs(out)
    assert not (d / "stacks_self_cuda_time_total.folded").exists()
    assert profiler_steps(d) == [2]
    # the rank dir is {worker}_{pid}_..._ascend_pt: the profiled process itself ran the user's hook
    assert d.name.split("_")[-4] in marker.read_text().split()


def test_run_on_the_torch_npu_stand_in(out: Path, tmp_path: Path) -> None:
    """No NPU here: the stand-in mirrors torch_npu's API; this checks npuprof drives it end to end."""
    calls = tmp_path / "calls.jsonl"
    env = clean_env(
        PYTHONPATH=str(FAKE_TORCH_NPU),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        FAKE_TORCH_NPU_LOG=str(calls),
        RANK="0",
    )
    script = tmp_path / "npu_train.py"
    script.write_text(
        "import torch, torch_npu, runpy, sys\n"
        f"sys.argv = ['trainer.py', '--steps', '6']\n"
        f"runpy.run_path({str(Path(__file__).parent / 'scripts' / 'trainer.py')!r}, run_name='__main__')\n"
    )
    result = npuprof(
        "run",
        "-o",
        str(out),
        *sched(2, 1, 2),
        "--level",
        "1",
        "--aic-metrics",
        "PipeUtilization",
        "--no-analyse",
        "--",
        *trainer()[:1],
        str(script),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(out)
    assert (d / "FRAMEWORK").is_dir()
    assert (d / "profiler_info_0.json").exists()
    record = capture_record(d)
    assert record["backend"] == "torch_npu" and record["steps"] == [3, 4]
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    profiles = [c["args"]["kwargs"] for c in logged if c.get("call") == "profile"]
    assert profiles, [c.get("call") for c in logged]
    experimental = profiles[-1]["experimental_config"]
    assert experimental["_profiler_level"] == "Level1"
    assert experimental["_aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
