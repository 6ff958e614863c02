"""Collectives on the NPU path: `npuprof run` around torchrun (2 gloo ranks) with the torch_npu stand-in
(tests/fake_torch_npu) first on PYTHONPATH. The stand-in turns the ranks' collectives into HCCL operators
and writes torch_npu's communication.json and communication_matrix.json of them (field names and nesting of
Ascend/pytorch's prof_view/_communication_parser.py and the real cluster_communication.json); `npuprof
analyse` reads the totals from there. Expected values are computed here from the files, by hand."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from analyse_support.recipes import cluster_of, msprof_analyze
from conftest import ROOT, clean_env, npuprof, torch_native_abort

from npuprof.analysis.db_export import double_hash
from npuprof.results import layout

pytestmark = pytest.mark.torchrun
STANDIN = ROOT / "tests" / "fake_torch_npu"
REAL = ROOT / "tests" / "fixtures" / "ascend-real"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("npu-comm")
    env = {k: v for k, v in clean_env().items() if not k.startswith(("FAKE_TORCH_NPU", "KINETO_USE_DAEMON"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = tmp / "out"
    command = [*TORCHRUN, str(ROOT / "examples" / "train.py"), "--steps", "9"]
    flags = ["--skip-first", "2", "--wait", "0", "--warmup", "1", "--active", "3"]
    for _attempt in range(2):  # once more only for torch's own aborts (conftest)
        proc = npuprof("run", "-o", str(out), *flags, "--", *command, cwd=tmp, env=env, timeout=240)
        if proc.returncode == 0 or not torch_native_abort(proc.stderr):
            break
        shutil.rmtree(out, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert len(layout.find_rank_dirs(out)) == 2
    return out


def _comm(rank_dir: Path) -> dict[str, Any]:
    return json.loads((rank_dir / layout.PARSED_DIR / "communication.json").read_text())


def _ops(kinds: dict[str, Any]) -> dict[str, Any]:
    return {k: v for ops in kinds.values() for k, v in ops.items() if k != "Total Op Info"}


def _real_op() -> dict[str, Any]:
    real = json.loads((REAL / "cluster_communication.json").read_text())
    step = next(iter(real.values()))["step"]
    return next(iter(next(iter(step.values())).values()))


def test_the_standin_writes_communication_as_torch_npu(run: Path) -> None:
    """communication.json: a key per step (``step<N>``), its ``collective`` and ``p2p`` operators keyed
    ``<op>@<group>``, each with the real file's Communication Time Info and Bandwidth Info fields, and a
    Total Op Info per kind that has operators; kernel_details.csv's HCCL rows as the 2023 release's (at
    Level0 without Task ID)."""
    real = _real_op()
    for rank_dir in layout.find_rank_dirs(run):
        data = _comm(rank_dir)
        assert sorted(data) == ["step3", "step4", "step5"]
        for kinds in data.values():
            assert sorted(kinds) == ["collective", "p2p"]
            ops = kinds["collective"]
            assert "Total Op Info" in ops and len(ops) >= 2  # one allreduce a step and the total
            total = ops["Total Op Info"]
            for key, op in _ops(kinds).items():
                name, _, group = key.partition("@")
                assert name.startswith("hcom_allReduce__") and group.isdigit()
                assert sorted(op) == sorted(real)
                for part in ("Communication Time Info", "Communication Bandwidth Info"):
                    assert sorted(op[part]) == sorted(real[part])
                for transport, info in op["Communication Bandwidth Info"].items():
                    assert sorted(info) == sorted(real["Communication Bandwidth Info"][transport])
            assert "Start Timestamp(us)" not in total["Communication Time Info"]
        matrix = json.loads((rank_dir / layout.PARSED_DIR / "communication_matrix.json").read_text())
        assert sorted(matrix) == sorted(data)
        with open(rank_dir / layout.PARSED_DIR / "kernel_details.csv", newline="") as handle:
            hccl = [r for r in csv.DictReader(handle) if r["Accelerator Core"] == "HCCL"]
        assert len(hccl) == sum(len(_ops(k)) for k in data.values())
        assert all(r.get("Task ID", "N/A") == "N/A" and r["Type"] == "hcom_allReduce_" for r in hccl)


# HCCL's communicator names: <ip>%<interface>_<port>_<index>_<µs> (docs/formats.md, "profiler_metadata.json")
HCCL_COMM_NAME = re.compile(r"^[^%_]+%[^_]+_\d+_\d+_\d+$")


def test_the_standin_names_its_hccl_groups_in_profiler_metadata_as_torch_npu(run: Path) -> None:
    """profiler_metadata.json's ``parallel_group_info``, which torch_npu's finalize_trace writes itself
    (docs/formats.md, "profiler_metadata.json"): each HCCL group keyed by its communicator's name, the same
    on every rank, with exactly ``group_name`` (``default_group`` for the default group), ``group_rank`` and
    ``global_ranks``. msprof-analyze reads it by that key twice: compare names the trace_view.json thread
    ``Group <key> Communication`` with its group_name, and cluster finds the group of communication.json as
    msprof's hash of the key (whose last three digits are in the operators' names)."""
    keys = set()
    for rank_dir in layout.find_rank_dirs(run):
        rank = layout.rank_of(rank_dir)
        groups = json.loads((rank_dir / "profiler_metadata.json").read_text())["parallel_group_info"]
        assert list(groups.values()) == [
            {"group_name": "default_group", "group_rank": rank, "global_ranks": [0, 1]}
        ]
        (key,) = groups
        assert HCCL_COMM_NAME.match(key), key
        keys.add(key)
        trace = json.loads((rank_dir / layout.PARSED_DIR / "trace_view.json").read_text())
        threads = {e["args"]["name"] for e in trace if e.get("ph") == "M" and e.get("name") == "thread_name"}
        assert f"Group {key} Communication" in threads
        names = [k for kinds in _comm(rank_dir).values() for k in _ops(kinds)]
        assert names and {n.partition("@")[2] for n in names} == {str(double_hash(key))}
        assert {n.partition("__")[2].split("_")[0] for n in names} == {str(double_hash(key))[-3:]}
    assert len(keys) == 1


def test_distributed_args_on_the_npu_path_give_msprof_cluster_its_parallel_columns(
    run: Path, tmp_path: Path
) -> None:
    """``distributed_args`` on the NPU path: torch_npu does not write it (Ascend's training frameworks hand it
    over with ``add_metadata_json``), so npuprof's agent does, its view of torch.distributed as on the CPU
    path (docs/formats.md, "profiler_metadata.json"); msprof-analyze's ``cluster`` then has its DP / PP / TP
    Index columns, and names the group by parallel_group_info (judged by its files)."""
    for rank_dir in layout.find_rank_dirs(run):
        args = json.loads((rank_dir / "profiler_metadata.json").read_text())["distributed_args"]
        assert args["rank"] == layout.rank_of(rank_dir) and args["world_size"] == 2
        sizes = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size")
        assert [args[k] for k in sizes] == [1, 1, 2]
    exe = msprof_analyze()
    if exe is None:
        pytest.skip("msprof-analyze not installed (NPUPROF_MSPROF_ANALYZE): the cluster check is skipped")
    out, log = cluster_of(exe, run, tmp_path / "cluster")
    with open(out / "cluster_step_trace_time.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    ranks = [r for r in rows if r["Type"] == "rank"]
    assert ranks, log[-3000:]
    indices = {(r["DP Index"], r["PP Index"], r["TP Index"]) for r in ranks}
    assert indices == {("0", "0", "0"), ("1", "0", "0")}  # rank 1: the second data parallel replica
    groups = json.loads((out / "communication_group.json").read_text())["comm_group_parallel_info"]
    assert [(g["rank_set"], g["pg_name"]) for g in groups] == [([0, 1], "default_group")]


def test_communication_totals_are_communication_json_s(run: Path) -> None:
    """analyse's communication per rank: the operators of communication.json, their Elapse Time summed, and
    their bytes (SDMA's, which holds HCCS's and PCIE's); with --steps, the step's alone."""
    report = npuprof("analyse", str(run), "--format", "json", env=clean_env())
    assert report.returncode == 0, report.stderr
    one = npuprof("analyse", str(run), "--format", "json", "--steps", "4", env=clean_env())
    assert one.returncode == 0, one.stderr
    by_rank = {r["rank"]: r for r in json.loads(report.stdout)["ranks"]}
    step4 = {r["rank"]: r for r in json.loads(one.stdout)["ranks"]}
    for rank_dir in layout.find_rank_dirs(run):
        rank = layout.rank_of(rank_dir)
        data = _comm(rank_dir)

        def totals(steps: list[str], data: dict[str, Any] = data) -> dict[str, Any]:
            ops = [op for s in steps for op in _ops(data[s]).values()]
            elapse = sum(op["Communication Time Info"]["Elapse Time(ms)"] for op in ops)
            size = sum(op["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] for op in ops)
            return {"operators": len(ops), "time_us": round(elapse * 1000, 3), "size_mb": round(size, 6)}

        expected = totals(sorted(data))
        assert expected["size_mb"] > 0
        assert by_rank[rank]["communication"] == pytest.approx(expected, abs=2e-3)
        assert step4[rank]["communication"] == pytest.approx(totals(["step4"]), abs=2e-3)
