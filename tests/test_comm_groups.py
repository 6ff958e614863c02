"""The process group of each gloo collective in communication.json (helper-132): gloo's spans name no
group, so every one was put in the default group, a subgroup's too; with --msprof-tx the comm: ranges
name the group of the call, and each gloo worker thread serves one process group."""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

import pytest
from analyse_support.recipes import cluster_of, msprof_analyze, run_forked
from conftest import clean_env, load_trace, npuprof, rank_dirs, sched

from npuprof.analysis.communication import group_id

pytestmark = pytest.mark.torchrun

JOB = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
sub = dist.new_group([0, 1], group_desc="dp_shard")
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(8):
    model(torch.randn(2, 4)).sum().backward()
    dist.all_reduce(torch.ones(64, 64), group=sub)  # 16384 bytes, on the subgroup
    dist.all_reduce(torch.ones(3))  # 12 bytes, on the default group
    opt.step()
    opt.zero_grad()
dist.barrier()
dist.destroy_process_group()
os._exit(0)
"""


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job's result, run once for the module (copy it before changing it)."""
    tmp_path = tmp_path_factory.mktemp("groups")
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "result"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    flags = ["--msprof-tx", "--record-shapes", *sched(2, 1, 3)]
    result = npuprof(
        "run", "-o", str(out), *flags, "--", *torchrun, str(script), env=clean_env(), timeout=240
    )
    assert result.returncode == 0, result.stderr
    return out


def test_gloo_collectives_of_a_subgroup_are_named_with_that_group(out: Path) -> None:
    dirs = rank_dirs(out)
    assert len(dirs) == 2
    for d in dirs:
        pgs = load_trace(d)["distributedInfo"]["pg_config"]
        default = next(p["pg_name"] for p in pgs if p["pg_desc"] == "default_pg")
        (subgroup,) = [p["pg_name"] for p in pgs if p["pg_desc"] != "default_pg"]
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        groups: dict[int, set[str]] = {}
        for step in comm.values():
            for name, record in step["collective"].items():
                if name == "Total Op Info" or not name.startswith("all_reduce"):
                    continue
                size = round(record["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] * 1e6)
                groups.setdefault(size, set()).add(name.rsplit("@", 1)[1])
        # each group as msprof's hash of its name (docs/formats.md, "profiler_metadata.json")
        assert groups == {16384: {group_id(subgroup)}, 12: {group_id(default)}}, (d.name, groups)


def test_msprof_analyze_names_each_group_by_parallel_group_info(out: Path, tmp_path: Path) -> None:
    """helper-195: msprof-analyze's cluster joins communication.json's group (after ``@``) to msprof's hash
    of a profiler_metadata.json ``parallel_group_info`` key (docs/formats.md, "profiler_metadata.json"); the
    CPU path wrote torch's group name there, so no group had a group_id or pg_name (judged by its files).
    Each group's group_name is the subgroup's group_desc (it was torch's number, "1"), which compare also
    shows, by the ``Group <key> Communication`` thread of trace_view.json."""
    exe = msprof_analyze()
    if exe is None:
        pytest.skip("msprof-analyze not installed (NPUPROF_MSPROF_ANALYZE): the cluster check is skipped")
    output, log = cluster_of(exe, out, tmp_path / "cluster")
    found = output / "communication_group.json"
    assert found.is_file(), log[-3000:]
    groups = json.loads(found.read_text())["comm_group_parallel_info"]
    named = {g["group_id"]: (g["group_name"], g["pg_name"], g["rank_set"]) for g in groups}
    assert named == {
        "0": (group_id("0"), "default_group", [0, 1]),
        "1": (group_id("1"), "dp_shard", [0, 1]),  # the subgroup's group_desc
    }, groups
    # compare names each group's communication by the group_name of the trace_view.json thread's key
    base, other = rank_dirs(out)
    log = run_forked(exe, "compare", "-d", str(base), "-bp", str(other), "-o", str(tmp_path), "--force")
    (sheet,) = tmp_path.glob("performance_comparison_result_*.xlsx")
    with zipfile.ZipFile(sheet) as z:
        texts = z.read("xl/sharedStrings.xml").decode()
    rows = set(re.findall(r"\t([^<\t]+): Communication<", texts))
    assert rows == {"default_group", "dp_shard"}, (rows, log[-2000:])
