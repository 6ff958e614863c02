"""The process group of each gloo collective in communication.json (helper-132): gloo's spans name no
group, so every one was put in the default group, a subgroup's too; with --msprof-tx the comm: ranges
name the group of the call, and each gloo worker thread serves one process group."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import clean_env, load_trace, npuprof, rank_dirs, sched

pytestmark = pytest.mark.torchrun

JOB = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
sub = dist.new_group([0, 1])
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


def test_gloo_collectives_of_a_subgroup_are_named_with_that_group(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "result"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    flags = ["--msprof-tx", "--record-shapes", *sched(2, 1, 3)]
    result = npuprof(
        "run", "-o", str(out), *flags, "--", *torchrun, str(script), env=clean_env(), timeout=240
    )
    assert result.returncode == 0, result.stderr
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
        assert groups == {16384: {subgroup}, 12: {default}}, (d.name, groups)
