"""The db export (issue 14) on hand-made CUDA and CPU traces whose tables are known by hand
(analyse_support/handmade.py), and msprof-analyze's db recipes on a 4-rank CUDA cluster of them: each
recipe judged by the tables it writes (it exits 0 when it fails)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest
from analyse_support import handmade
from analyse_support.handmade import T0, x
from analyse_support.recipes import msprof_analyze, python_of, rows, run_forked, run_recipes

from npuprof.analysis.parse import parse_rank_dir

OUT = "ASCEND_PROFILER_OUTPUT"
MSPROF = msprof_analyze()


def _hash(text: str) -> int:
    """msprof's group-name hash, written out from its definition (two 32-bit polynomial hashes)."""
    a = b = 0
    for c in text:
        a, b = (a * 29 + ord(c)) % 2**32, (b * 131 + ord(c)) % 2**32
    return a * 2**32 + b


def _ns(us: float) -> int:
    return round((T0 + us) * 1000)


def _cuda_trace(rank: int = 0, world: int = 2, allreduce_us: float = 250) -> dict[str, Any]:
    trace = handmade.cuda_trace(rank)
    ranks = list(range(world))
    trace["distributedInfo"].update(world_size=world, pg_config=[
        {"pg_name": "0", "pg_desc": "default_pg", "ranks": ranks}
    ])  # fmt: skip
    for ev in trace["traceEvents"]:
        if ev.get("name") == "record_param_comms" and ev["args"]["Process Group Name"] == "0":
            ev["args"]["Process Group Ranks"] = json.dumps(ranks)
        if ev.get("name") == "ncclDevKernel_AllReduce_Sum_f32":
            ev["dur"] = allreduce_us
    # a memcpy in step 2, launched by aten::mul (External id 5), its runtime call on another thread (300)
    trace["traceEvents"] += [
        x("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 1600, 50, pid=0, tid=7, correlation=16, stream=7,
          device=0, **{"External id": 5}),
        x("cudaMemcpyAsync", "cuda_runtime", 1590, 5, tid=300, correlation=16, **{"External id": 5}),
    ]  # fmt: skip
    return trace


def _db(rank_dir: Path, rank: int = 0) -> sqlite3.Connection:
    return sqlite3.connect(rank_dir / OUT / f"ascend_pytorch_profiler_{rank}.db")


def _strings(con: sqlite3.Connection) -> dict[int, str]:
    return dict(con.execute("SELECT id, value FROM STRING_IDS"))


@pytest.fixture(scope="module")
def cuda_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rank_dir = handmade.write_rank_dir(tmp_path_factory.mktemp("cuda"), _cuda_trace())
    outcome = parse_rank_dir(rank_dir, export_db=True)
    assert outcome.status == "parsed", outcome.reason
    assert {"ascend_pytorch_profiler_0.db", "analysis.db"} <= set(outcome.files)
    return rank_dir


def test_tasks_and_kernels_are_the_device_tasks(cuda_dir: Path) -> None:
    con = _db(cuda_dir)
    s = _strings(con)
    tasks = con.execute(
        "SELECT startNs, endNs, connectionId, globalTaskId, taskType, streamId FROM TASK ORDER BY startNs"
    ).fetchall()
    assert [(a, b, c, s[t], st) for a, b, c, _g, t, st in tasks] == [
        (_ns(100), _ns(300), 11, "CUDA kernel", 7),
        (_ns(250), _ns(400), 12, "CUDA kernel", 8),
        (_ns(350), _ns(600), 13, "NCCL", 20),
        (_ns(1100), _ns(1200), 14, "CUDA kernel", 7),
        (_ns(1300), _ns(1500), 15, "NCCL", 20),
        (_ns(1600), _ns(1650), 16, "MEMCPY_ASYNC", 7),
    ]
    assert len({g for _a, _b, _c, g, _t, _s in tasks}) == 6
    # compute tasks only (not NCCL, not the memcpy), with their operator and shapes in torch_npu's form
    info = con.execute(
        "SELECT c.name, c.opType, c.inputShapes, c.blockNum, t.connectionId FROM COMPUTE_TASK_INFO c "
        "JOIN TASK t ON t.globalTaskId = c.globalTaskId ORDER BY t.startNs"
    ).fetchall()
    assert [(s[n], s[o], s[sh], b, c) for n, o, sh, b, c in info] == [
        ("kernel_a", "aten::addmm", "4;\r\n8,4;\r\n4,4", 8, 11),
        ("kernel_b", "aten::addmm", "4;\r\n8,4;\r\n4,4", 2, 12),
        ("kernel_c", "aten::mul", "N/A", 0, 14),
    ]


def test_the_tasks_of_a_process_that_drove_two_gpus_are_each_on_its_own_device(tmp_path: Path) -> None:
    """The db's TASK.deviceId was the rank's device (0) for every task, and msprof-analyze reads it as the
    task's device (its kernel summary's device_id): a kernel of GPU 1 said it ran on GPU 0. Each task is on
    the device its kernel's args say (cuda_trace's six on GPU 0, one more on GPU 1); NPU_INFO names both."""
    trace = _cuda_trace()
    trace["traceEvents"] += [
        *handmade.process_names((1, "GPU 1")),
        handmade.kernel_on("kernel_on_gpu1", 1700, 40, gpu=1, corr=90, ext=5),
    ]
    rank_dir = handmade.write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, export_db=True).ok
    con = _db(rank_dir)
    devices = con.execute("SELECT startNs, deviceId FROM TASK ORDER BY startNs").fetchall()
    assert devices == [
        (_ns(100), 0), (_ns(250), 0), (_ns(350), 0), (_ns(1100), 0), (_ns(1300), 0), (_ns(1600), 0),
        (_ns(1700), 1),
    ]  # fmt: skip
    assert sorted(con.execute("SELECT id FROM NPU_INFO")) == [(0,), (1,)]
    con.close()


def test_operators_are_linked_to_the_tasks_they_launched(cuda_dir: Path) -> None:
    con = _db(cuda_dir)
    s = _strings(con)
    api = con.execute("SELECT name, startNs, endNs, connectionId, type FROM PYTORCH_API").fetchall()
    by_name: dict[str, list[tuple[Any, ...]]] = {}
    for name, *rest in api:
        by_name.setdefault(s[name], []).append(tuple(rest))
    steps = ["ProfilerStep#1", "ProfilerStep#2"]  # the steps' spans, as torch_npu's PYTORCH_API has them
    assert sorted(by_name) == [*steps, "aten::addmm", "aten::linear", "aten::mul", "record_param_comms"]
    assert [by_name[step] for step in steps] == [
        [(_ns(0), _ns(1000), None, 50001)],
        [(_ns(1000), _ns(2000), None, 50001)],
    ]
    assert by_name["aten::linear"] == [(_ns(10), _ns(110), None, 50001)]
    links: dict[int, set[int]] = {}
    for group, link in con.execute("SELECT id, connectionId FROM CONNECTION_IDS"):
        links.setdefault(group, set()).add(link)
    (addmm,) = by_name["aten::addmm"]
    (mul,) = by_name["aten::mul"]
    assert links[addmm[2]] == {11, 12} and links[mul[2]] == {14, 16}
    comm = sorted(links[r[2]] for r in by_name["record_param_comms"])
    assert comm == [{13}, {15}]


def test_collectives_are_communication_ops_in_hccls_naming(cuda_dir: Path) -> None:
    con = _db(cuda_dir)
    s = _strings(con)
    ops = con.execute(
        "SELECT opName, startNs, endNs, connectionId, groupName, dataType, count, opType, rankSize "
        "FROM COMMUNICATION_OP ORDER BY startNs"
    ).fetchall()
    dtypes = dict(con.execute("SELECT id, name FROM ENUM_HCCL_DATA_TYPE"))
    got = [(s[n], a, b, c, s[g], dtypes[d], k, s[t], r) for n, a, b, c, g, d, k, t, r in ops]
    assert got == [
        (f"hcom_allReduce__{str(_hash('0'))[-3:]}_0_1", _ns(350), _ns(600), 13, "0", "FP32", 1024,
         "hcom_allReduce_", 2),
        (f"hcom_receive__{str(_hash('1'))[-3:]}_0_1", _ns(1300), _ns(1500), 15, "1", "BFP16", 256,
         "hcom_receive_", 2),
    ]  # fmt: skip
    # the host call of each, one CANN_API row per connection id (slow_rank joins on it), and the runtime
    # launches of the kernels (node level, on the launching operator's thread)
    api = con.execute(
        "SELECT connectionId, startNs, endNs, type, globalTid FROM CANN_API ORDER BY startNs"
    ).fetchall()
    main = 100 * 2**32 + 100
    assert api == [
        (11, _ns(30), _ns(35), 10000, main),
        (12, _ns(40), _ns(45), 10000, main),
        (13, _ns(300), _ns(310), 5500, main),
        (15, _ns(1250), _ns(1260), 5500, main),
        (16, _ns(1590), _ns(1595), 10000, 100 * 2**32 + 300),  # the runtime call's own thread
    ]
    groups = json.loads(dict(con.execute("SELECT name, value FROM META_DATA"))["parallel_group_info"])
    # the default group is torch_npu's default_group (Kineto describes it default_pg)
    assert groups["0"] == {"group_name": "default_group", "group_rank": 0, "global_ranks": [0, 1]}
    assert con.execute("SELECT * FROM RANK_DEVICE_MAP").fetchall() == [(0, 0)]


def test_steps_memory_and_the_analysis_db(cuda_dir: Path) -> None:
    con = _db(cuda_dir)
    assert con.execute("SELECT * FROM STEP_TIME ORDER BY id").fetchall() == [
        (1, _ns(0), _ns(1000)),
        (2, _ns(1000), _ns(2000)),
    ]
    s = _strings(con)
    memory = con.execute("SELECT component, timestamp, totalAllocated FROM MEMORY_RECORD").fetchall()
    assert [(s[c], t, a) for c, t, a in memory] == [
        ("PTA", _ns(25), 8192),
        ("PTA", _ns(50), 4096),
    ]  # fmt: skip
    (op,) = con.execute("SELECT name, size, allocationTime, releaseTime, duration FROM OP_MEMORY").fetchall()
    assert (s[op[0]], *op[1:]) == ("aten::addmm", 4096, _ns(25), _ns(50), 25000)

    analysis = cuda_dir / OUT / "analysis.db"
    steps = {r["step"]: r for r in rows(analysis, "StepTraceTime")}
    assert sorted(steps) == ["1", "2"]
    one, two = steps["1"], steps["2"]
    assert (one["computing"], one["communication_not_overlapped"], one["overlapped"]) == (300, 200, 50)
    assert (one["communication"], one["free"], one["preparing"]) == (250, 500, 100)
    # step 2: kernel_c computes 100 µs; the memcpy's 50 µs copy (not computing: free, as COMPUTE_TASK_INFO
    # leaves it out), the all-reduce's 200 µs are communication
    assert (two["computing"], two["bubble"], two["stage"], two["free"]) == (100, 200, 800, 700)
    times = rows(analysis, "CommAnalyzerTime")
    assert [(t["step"], t["type"], t["group_name"], t["elapse_time"]) for t in times] == [
        ("step1", "collective", str(_hash("0")), 0.25),
        ("step2", "p2p", str(_hash("1")), 0.2),
    ]
    matrix = {r["hccl_op_name"] for r in rows(analysis, "CommAnalyzerMatrix") if r["step"] == "step1"}
    assert matrix == {"allreduce-top1", "allreduce-middle", "allreduce-bottom1", "allreduce-total"}


def test_the_host_is_the_one_the_trace_was_recorded_on(tmp_path: Path) -> None:
    """helper-172: HOST_INFO named the host that ran the parse: a multi-node run analysed on one node (or a
    result copied to a laptop) had every rank on that host, which msprof-analyze's cluster HOST_INFO and
    RANK_DEVICE_MAP group ranks by. Kineto writes the recording host's name (``host_name``)."""
    trace = _cuda_trace()
    trace["host_name"] = "node-17.cluster"
    rank_dir = handmade.write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    con = _db(rank_dir)
    assert con.execute("SELECT * FROM HOST_INFO").fetchall() == [
        (str(_hash("node-17.cluster")), "node-17.cluster")
    ]


def test_each_frame_of_a_call_stack_is_one_string_as_torch_npus(tmp_path: Path) -> None:
    """helper-172: the stacks torch >= 2 records (python_function spans, joined by ``;\\r\\n`` as
    torch_npu's) were split at ``;`` only: every frame but the innermost was ``\\r\\nmodel.py(5): ...``
    in PYTORCH_CALLCHAINS, a string of its own beside the same frame without it (docs/formats.md, "The db
    export": a frame's text); Kineto's own ``Call stack`` arg is joined by ``;``."""
    trace = handmade.cpu_trace()
    trace["with_stack"] = 1
    trace["traceEvents"] += [
        x("train.py(10): main", "python_function", 90, 600, **{"Python id": 1, "Python parent id": 0}),
        x("model.py(5): forward", "python_function", 95, 250, **{"Python id": 2, "Python parent id": 1}),
        x("aten::relu", "cpu_op", 700, 10, **{"External id": 4, "Call stack": "a.py(1): f;b.py(2): g"}),
    ]
    rank_dir = handmade.write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    con = _db(rank_dir)
    strings = _strings(con)
    chains: dict[int, list[str]] = {}
    for chain, frame, depth in con.execute("SELECT * FROM PYTORCH_CALLCHAINS ORDER BY id, stackDepth"):
        assert depth == len(chains.setdefault(chain, []))
        chains[chain].append(strings[frame])
    named = dict(
        con.execute("SELECT s.value, p.callchainId FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name")
    )
    assert chains[named["aten::mm"]] == ["model.py(5): forward", "train.py(10): main"]
    assert chains[named["aten::add"]] == ["train.py(10): main"]
    assert chains[named["aten::relu"]] == ["a.py(1): f", "b.py(2): g"]


def test_a_cpu_capture_has_its_operators_as_tasks_and_gloo_as_communication(tmp_path: Path) -> None:
    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    con = _db(rank_dir)
    s = _strings(con)
    tasks = con.execute("SELECT startNs, endNs, taskType, connectionId FROM TASK ORDER BY startNs").fetchall()
    # the step thread's operators that do their own work (aten::mm, holding aten::empty; aten::add) and
    # the gloo span
    assert [(a, b, s[t]) for a, b, t, _c in tasks] == [
        (_ns(100), _ns(300), "CPU"),
        (_ns(250), _ns(550), "GLOO"),
        (_ns(500), _ns(600), "CPU"),
    ]
    # each operator task launched by itself (its CANN_API row, as free_analysis joins them)
    launches = con.execute("SELECT startNs, endNs, connectionId FROM CANN_API WHERE type = 10000").fetchall()
    assert sorted(launches) == sorted((a, b, c) for a, b, t, c in tasks if s[t] == "CPU")
    compute = con.execute("SELECT name FROM COMPUTE_TASK_INFO").fetchall()
    assert sorted(s[n] for (n,) in compute) == ["aten::add", "aten::mm"]
    (op,) = con.execute(
        "SELECT startNs, endNs, connectionId, dataType, count FROM COMMUNICATION_OP"
    ).fetchall()
    assert op == (_ns(250), _ns(550), tasks[1][3], 4, 256)  # the gloo task shares its connection id


def test_a_parse_without_the_flag_keeps_an_existing_db_current(tmp_path: Path) -> None:
    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    db = rank_dir / OUT / "ascend_pytorch_profiler_0.db"
    first = db.stat().st_mtime_ns
    assert parse_rank_dir(rank_dir).status == "cached"
    assert parse_rank_dir(rank_dir, force=True).status == "parsed"  # rewritten, never left stale
    assert db.stat().st_mtime_ns != first
    assert not list((rank_dir / OUT).glob(".*tmp"))
    same = (rank_dir / OUT / "trace_view.json").stat().st_mode  # the result tree's file mode (0640)
    assert db.stat().st_mode == (rank_dir / OUT / "analysis.db").stat().st_mode == same


def test_a_parsed_dir_without_a_db_gets_one_when_asked(tmp_path: Path) -> None:
    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    assert parse_rank_dir(rank_dir).status == "parsed"
    assert not list((rank_dir / OUT).glob("*.db"))
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    assert (rank_dir / OUT / "ascend_pytorch_profiler_0.db").is_file()


# ---- msprof-analyze's recipes on a 4-rank CUDA cluster -------------------------------------------------
CUDA_RECIPES = (
    "hccl_sum", "compute_op_sum", "communication_group_map", "communication_time_sum",
    "communication_matrix_sum", "slow_rank", "cluster_time_summary", "free_analysis", "cann_api_sum",
    "pp_chart", "mstx_sum", "module_statistic", "all",
)  # fmt: skip


def _with_marks_and_modules(rank_dir: Path) -> None:
    """Ranges "forward" [5, 120) (aten::linear and aten::addmm: kernel_a and kernel_b, device [100, 400))
    and "backward" [1040, 1100) (aten::mul: kernel_c and the memcpy, device [1100, 1650)), as
    ``npuprof.range`` records them, and the module frame ``nn.Module: Linear_0`` [8, 115) of the Python
    tracer."""
    path = next(rank_dir.glob("*.pt.trace.json"))
    trace = json.loads(path.read_text())
    trace["traceEvents"] += [
        x("forward", "user_annotation", 5, 115),
        x("backward", "user_annotation", 1040, 60),
        x("nn.Module: Linear_0", "python_function", 8, 107, **{"Python id": 1, "Python parent id": 0}),
    ]
    path.write_text(json.dumps(trace))
    marks = {"version": 1, "names": {"forward": "range", "backward": "range"}, "names_not_listed": 0}
    (rank_dir / "npuprof_marks.json").write_text(json.dumps(marks))


@pytest.mark.interop
@pytest.mark.skipif(MSPROF is None, reason="msprof-analyze not installed (.ci/interop.sh): SKIPPED")
def test_msprof_analyze_recipes_on_a_cuda_cluster(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    for rank in range(4):
        # rank 3's all-reduce is much shorter: it waited least, msprof-analyze's "slow rank"
        trace = _cuda_trace(rank, world=4, allreduce_us=50 if rank == 3 else 250 + rank)
        rank_dir = handmade.write_rank_dir(cluster, trace, rank, name=f"host_{rank}_2025010100000000{rank}")
        _with_marks_and_modules(rank_dir)
        assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    python = python_of(MSPROF)
    assert python is not None
    log = run_recipes(python, cluster, *CUDA_RECIPES)
    out = cluster / "cluster_analysis_output" / "cluster_analysis.db"

    per_rank = rows(out, "HcclPerRankStats")
    assert sorted((r["Rank"], r["OpType"], r["Count"]) for r in per_rank) == [
        (rank, op, 1) for rank in range(4) for op in ("hcom_allReduce_", "hcom_receive_")
    ], log[-3000:]
    by_type = rows(out, "ComputeOpPerRankStatsByOpType")
    assert sorted((r["Rank"], r["OpType"], r["Count"]) for r in by_type) == [
        (rank, op, n) for rank in range(4) for op, n in (("aten::addmm", 2), ("aten::mul", 1))
    ]
    groups = {r["group_name"]: r for r in rows(out, "CommunicationGroupMapping")}
    assert groups[str(_hash("0"))]["rank_set"] == "(0,1,2,3)"
    totals = [r for r in rows(out, "ClusterCommunicationTime") if r["hccl_op_name"] == "Total Op Info"]
    assert {(r["rank_id"], r["step"]) for r in totals} >= {(rank, "step1") for rank in range(4)}
    assert rows(out, "ClusterCommunicationMatrix")
    assert [(r["rankId"], r["slowAffectCount"]) for r in rows(out, "SlowRank")] == [(3, 1)]
    summary = rows(out, "ClusterTimeSummary")
    assert sorted((r["rank"], r["step"]) for r in summary) == [(r, s) for r in range(4) for s in (1, 2)]
    assert rows(out, "FreeAnalysis")
    step_rows = [r for r in rows(out, "ClusterStepTraceTime") if r["type"] == "rank"]
    # step 2: kernel_c's 100 µs; its memcpy copies, it does not compute (as msprof-analyze counts SDMA apart)
    assert sorted((int(r["index"]), int(float(r["step"])), r["computing"]) for r in step_rows) == [
        (rank, step, 300 if step == 1 else 100) for rank in range(4) for step in (1, 2)
    ]
    assert len(rows(out, "RankDeviceMap")) == 4
    assert {r["name"] for r in rows(out, "CannApiSum")} == {
        "c10d:allreduce",
        "c10d:recv",
        "launch",
        "mstxRangeStart",
    }
    # pp_chart: each rank's ranges at the device times of what they launched
    for rank_dir in sorted(cluster.glob("*_ascend_pt")):
        rank = int(rank_dir.name.split("_")[1])
        phases = rows(rank_dir / OUT / f"ascend_pytorch_profiler_{rank}.db", "StepTaskInfo")
        assert sorted((r["name"], r["startNs"], r["endNs"]) for r in phases) == [
            ("BP", _ns(1100), _ns(1650)),
            ("FP", _ns(100), _ns(400)),
        ], log[-3000:]
    device = {(r["Name"], r["StepId"]): r for r in rows(out, "MSTXAllDeviceStats")}
    assert (device["forward", 1]["Count"], device["forward", 1]["MeanNs"]) == (4, 300_000)
    assert (device["backward", 2]["Count"], device["backward", 2]["MeanNs"]) == (4, 550_000)
    modules = {(r["module"], r["opName"], r["rankID"]) for r in rows(out, "ModuleStatistic")}
    assert {(m, op) for m, op, _rank in modules} == {("Linear_0", "aten::addmm")}
    assert {rank for _m, _op, rank in modules} == {0, 1, 2, 3}
    shutil.rmtree(cluster)


@pytest.mark.parametrize("recorded", ["db", ["text", "db"]])
def test_a_capture_made_with_the_db_type_gets_its_db_at_any_later_parse(
    tmp_path: Path, recorded: Any
) -> None:
    """`npuprof run --export-type db --no-analyse`, then `npuprof analyse` without the flag: the capture's
    profiler_info says what was asked."""
    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    info = {"config": {"experimental_config": {"_export_type": recorded}}}
    (rank_dir / "profiler_info_0.json").write_text(json.dumps(info))
    assert parse_rank_dir(rank_dir).status == "parsed"
    assert (rank_dir / OUT / "ascend_pytorch_profiler_0.db").is_file()


def test_a_bare_trace_gets_its_db_beside_its_tables(tmp_path: Path) -> None:
    from npuprof.analysis.report import build_report

    trace = tmp_path / "trace.json"  # prof.export_chrome_trace("trace.json")
    trace.write_text(json.dumps(_cuda_trace()))
    build_report(trace, jobs=1, export_db=True)
    con = sqlite3.connect(tmp_path / "trace.json.npuprof" / "ascend_pytorch_profiler_0.db")
    assert con.execute("SELECT count(*) FROM TASK").fetchone() == (6,)
    build_report(trace, jobs=1)  # parsed: nothing rewritten, the db stays
    assert (tmp_path / "trace.json.npuprof" / "analysis.db").is_file()


def test_a_failed_db_export_leaves_the_text_tables_complete_and_no_db(tmp_path: Path) -> None:
    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    out = rank_dir / OUT
    # the db's place taken by a directory: the export fails at its rename, after writing both files
    (out / "ascend_pytorch_profiler_0.db").unlink()
    (out / "ascend_pytorch_profiler_0.db").mkdir()
    outcome = parse_rank_dir(rank_dir, force=True, export_db=True)
    assert outcome.status == "parsed" and (out / "analyse.done").is_file()
    summary = json.loads((out / "npuprof_summary.json").read_text())
    (warning,) = [w for w in summary["warnings"] if "db export" in w]
    assert "the text tables are complete" in warning and "Is a directory: " in warning
    # no db of the earlier parse left to look current, no temporary file
    assert not (out / "analysis.db").exists()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_the_temporary_files_of_a_killed_db_writer_are_removed(tmp_path: Path) -> None:
    """A db writer's temporary file names its process; one whose process is gone is removed by the next
    export even where the directory's other leftovers cannot be (another parse holds it)."""
    import subprocess
    import sys

    from npuprof.analysis.db_export import remove_stale_temps

    out = tmp_path
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = out / f".analysis.db.{dead.stdout.strip()}.tmp"  # its writer was kill -9'ed
    live = out / f".ascend_pytorch_profiler_0.db.{os.getppid()}.tmp"  # a running writer's: kept
    stale.write_bytes(b"partial")
    live.write_bytes(b"partial")
    remove_stale_temps(out)
    assert not stale.exists() and live.exists()


_HELD_WRITER = """
import sys
from pathlib import Path
from npuprof.analysis import db_export, db_schema
temps = []
def rows():
    print(temps[0], flush=True)  # its temporary file is there: held until told to go on
    sys.stdin.readline()
    yield "StepTraceTime", []
db_export._write_db(Path(sys.argv[1]) / "analysis.db", db_schema.ANALYSIS_TABLES, rows(), (), temps)
"""


def test_a_parse_leaves_the_temporary_files_of_a_live_db_writer_alone(tmp_path: Path) -> None:
    """helper-172: three analyses of one dir (the third takes the lock the first let go while the second
    still writes): the third's sweep of a killed parse's leftovers deleted the second's db files as an
    older npuprof's (their names carried no writer it could check), whose export then failed and dropped
    the db in place."""
    import subprocess
    import sys

    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    out = rank_dir / OUT
    out.mkdir()
    writer = subprocess.Popen(
        [sys.executable, "-c", _HELD_WRITER, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        held = Path(writer.stdout.readline().strip())
        assert held.parent == out and held.exists()
        assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"  # it has the directory's lock
        assert held.exists()
    finally:
        writer.stdin.write("\n")
        writer.stdin.close()
        writer.wait(timeout=60)
    assert writer.returncode == 0


def test_a_run_whose_db_failed_says_so_at_its_end(tmp_path: Path) -> None:
    """The post-processor (`npuprof run --export-type db`): a rank left without a db is named in the run's
    log as not produced (the run's end lists those lines), since msprof-analyze would drop it silently."""
    from npuprof.results import handover, postprocess
    from npuprof.results.extras import not_produced_notes

    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    (rank_dir / OUT / "ascend_pytorch_profiler_0.db").mkdir(parents=True)  # the db cannot take its place
    job = handover.CaptureJob(
        rank_dir=str(rank_dir), record=handover.CaptureRecord(status="complete"), analyse=True, export_db=True
    )
    assert postprocess.run_job(job) == 1
    assert (rank_dir / OUT / "analyse.done").is_file()  # the text tables are complete
    (note,) = not_produced_notes((tmp_path / "npuprof.log").read_text().splitlines())
    assert note.startswith("the db export not produced") and "fix: npuprof analyse --export-type db" in note


def test_a_db_writer_that_dies_leaves_no_db_and_the_next_parse_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-j 2: the db is written by a forked process; one killed mid-write (kill -9, the OOM killer) must not
    leave the previous parse's db looking current, nor its temporary files."""
    from npuprof.analysis import db_export

    rank_dir = handmade.write_rank_dir(tmp_path, _cuda_trace())
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    out = rank_dir / OUT

    def dies(out_dir: Path, _src: Any) -> list[str]:
        (out_dir / f".analysis.db.{os.getpid()}.tmp").write_bytes(b"partial")
        os._exit(9)

    monkeypatch.setattr(db_export, "write_databases", dies)
    assert parse_rank_dir(rank_dir, force=True, workers=2, export_db=True).status == "parsed"
    assert not list(out.glob("*.db")) and not list(out.glob(".*tmp"))
    summary = json.loads((out / "npuprof_summary.json").read_text())
    assert any("db export" in w and "failed" in w for w in summary["warnings"])
    monkeypatch.undo()
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"  # not "cached": no db
    assert (out / "ascend_pytorch_profiler_0.db").is_file() and (out / "analysis.db").is_file()


def test_a_killed_parses_leftovers_are_removed_unless_a_parse_is_running_there(tmp_path: Path) -> None:
    """A parse killed mid-way leaves its temporary files and the trace_view.json it moved aside; the next
    parse removes them, unless another parse holds the directory (its files are live)."""
    import fcntl

    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())
    out = rank_dir / OUT
    out.mkdir()
    left = [out / ".trace_view.json.0a1b2c.old", out / ".kernel_details.csv.3d4e5f.tmp"]
    for path in left:
        path.write_bytes(b"left by kill -9")
    held = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another parse is writing here
        assert parse_rank_dir(rank_dir).status == "parsed"
        assert all(path.exists() for path in left)
    finally:
        os.close(held)
    assert parse_rank_dir(rank_dir, force=True).status == "parsed"
    assert not any(path.exists() for path in left)
    assert (out / "trace_view.json").is_file()


def test_a_killed_parses_leftovers_beside_a_bare_trace_are_removed(tmp_path: Path) -> None:
    """helper-172: the same for a bare trace's ``<trace>.npuprof/``: parses of it killed mid-way (kill -9)
    left the trace_view.json they had moved aside and their temporary files (160 MB for two kills of a
    124 MB trace), which every later parse kept."""
    import subprocess
    import sys

    from npuprof.analysis.report import build_report

    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(handmade.cpu_trace()))
    build_report(trace, jobs=1)
    out = tmp_path / "trace.json.npuprof"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = dead.stdout.strip()
    left = [
        out / f".trace_view.json.{pid}-0a1b2c3d4e5f.old",
        out / f".trace_view.json.{pid}-6a7b8c9d0e1f.tmp",
    ]
    for path in left:
        path.write_bytes(b"left by kill -9")
    (out / "analyse.done").unlink()  # as the killed parse left it
    build_report(trace, jobs=1)
    assert not any(path.exists() for path in left)
    assert (out / "trace_view.json").is_file()


def _db_only_rank_dir(tmp_path: Path) -> Path:
    """A rank dir as torch_npu leaves it with export_type=Db: its raw data and the db, no text tables."""
    rank_dir = tmp_path / "h_1_20250101000000000_ascend_pt"
    for sub in ("FRAMEWORK", "PROF_000001_x", OUT):
        (rank_dir / sub).mkdir(parents=True)
    (rank_dir / "profiler_info_0.json").write_text('{"config": {}}')
    sqlite3.connect(rank_dir / OUT / "ascend_pytorch_profiler_0.db").execute(
        "CREATE TABLE STEP_TIME (id INTEGER)"
    )
    return rank_dir


@pytest.mark.parametrize("marked_done", [False, True])
def test_a_rank_dir_torch_npu_parsed_into_its_db_only_is_named_as_such(
    tmp_path: Path, marked_done: bool
) -> None:
    """torch_npu with export_type=Db leaves its raw data and the db, no text tables: not "needs torch_npu"
    nor "unreadable", but what it is and what to do."""
    rank_dir = _db_only_rank_dir(tmp_path)
    if marked_done:  # npuprof ran torch_npu's parser in the run and marked the dir
        (rank_dir / OUT / "analyse.done").write_text("")
    outcome = parse_rank_dir(rank_dir)
    assert (outcome.status, outcome.ok) == ("db_only", False)
    assert "--export-type text,db" in outcome.reason and "msprof-analyze" in outcome.reason


def test_export_stacks_and_memory_timeline_of_a_db_only_rank_dir_say_what_it_is(tmp_path: Path) -> None:
    """helper-349: torch_npu's export_type=Db rank dir (its raw data and the db, no text tables) was told by
    export-stacks "has no trace (...) (capture unknown: no npuprof capture record)", and by memory-timeline
    to capture with npuprof's memory flags: neither said that the db is all there is, nor the fix."""
    from _forked_cli import npuprof

    rank_dir = _db_only_rank_dir(tmp_path)
    for command in (("export-stacks", str(rank_dir)), ("memory-timeline", str(rank_dir), "-o", "m.json")):
        result = npuprof(*command, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        (line,) = result.stderr.splitlines()
        assert f"{rank_dir} has no trace" in line, line
        assert "torch_npu parsed it into its db only" in line and "--export-type text,db" in line, line
        assert "capture unknown" not in line and "--profile-memory" not in line, line
    assert not (tmp_path / "m.json").exists()


def test_torch_npus_own_trace_view_gets_a_db_of_its_operators_and_tasks(tmp_path: Path) -> None:
    """The real trace_view.json of a torch_npu run (tests/fixtures/ascend-real, SOURCE.md there), analysed as
    a trace with --export-type db: its operators, its Ascend Hardware tasks linked to them by its async_npu
    flows, its step; counted here from the JSON itself."""
    from npuprof.analysis.report import build_report

    real = Path(__file__).resolve().parent / "fixtures" / "ascend-real" / "trace_view.json"
    trace = tmp_path / "trace_view.json"
    shutil.copyfile(real, trace)
    build_report(trace, jobs=1, export_db=True)
    events = json.loads(real.read_text())
    processes = {
        e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
    }
    x_events = [e for e in events if e.get("ph") == "X"]
    ops = [e for e in x_events if e.get("cat") == "cpu_op"]  # its ProfilerStep#N spans among them, as here
    tasks = [e for e in x_events if processes.get(e["pid"]) == "Ascend Hardware"]
    flows = {e["id"] for e in events if e.get("cat") == "async_npu" and e["ph"] == "f"}
    (db,) = (tmp_path / "trace_view.json.npuprof").glob("ascend_pytorch_profiler*.db")
    con = sqlite3.connect(db)
    s = _strings(con)
    assert con.execute("SELECT count(*) FROM PYTORCH_API WHERE type = 50001").fetchone() == (len(ops),)
    names = sorted(s[n] for (n,) in con.execute("SELECT t.name FROM COMPUTE_TASK_INFO t"))
    assert names == sorted(e["name"] for e in tasks)
    linked = con.execute("SELECT count(DISTINCT connectionId) FROM CONNECTION_IDS").fetchone()[0]
    assert linked == len(flows)  # each flow ends at one task: that task is linked to its operator
    assert [r[0] for r in con.execute("SELECT id FROM STEP_TIME")] == [1]


def test_analyse_says_when_a_rank_of_the_run_is_left_without_a_db(tmp_path: Path) -> None:
    """One rank's export fails (its db's place taken): the run is mixed, which msprof-analyze hides."""
    from npuprof.analysis.report import build_report

    good = handmade.write_rank_dir(tmp_path, handmade.cpu_trace(), 0, name="h_1_20250101000000000")
    bad = handmade.write_rank_dir(tmp_path, handmade.cpu_trace(), 1, name="h_2_20250101000000000")
    (bad / OUT / "ascend_pytorch_profiler_1.db").mkdir(parents=True)
    notes: list[str] = []
    build_report(tmp_path, jobs=1, export_db=True, on_note=notes.append)
    assert (good / OUT / "ascend_pytorch_profiler_0.db").is_file()
    (gap,) = [n for n in notes if "no profiler db" in n]
    assert gap.startswith("1 of 2 rank dirs") and bad.name in gap and good.name not in gap


def test_the_run_points_at_msprof_analyze_only_when_a_db_was_written(tmp_path: Path) -> None:
    """helper-105: `--export-type db` ended every run with the msprof-analyze command, also when no
    capture held a db (the job killed, a full disk, --no-analyse): a command that finds nothing."""
    from conftest import npuprof as run_npuprof
    from conftest import sched, trainer

    out = tmp_path / "out"
    flags = ("--export-type", "db", *sched(1, 1, 2))
    unparsed = run_npuprof("run", "-o", str(out), *flags, "--no-analyse", "--", *trainer("--steps", "6"))
    assert unparsed.returncode == 0, unparsed.stderr
    assert "msprof-analyze cluster" not in unparsed.stderr, unparsed.stderr
    parsed = run_npuprof("run", "-o", str(tmp_path / "out2"), *flags, "--", *trainer("--steps", "6"))
    assert parsed.returncode == 0, parsed.stderr
    assert "msprof-analyze cluster -d" in parsed.stderr, parsed.stderr


def test_memory_totals_beyond_an_int64_are_kept_as_sqlite_keeps_them(tmp_path: Path) -> None:
    """helper-181: a total beyond an int64 went into MEMORY_RECORD as -2**63 (numpy's cast of a float beyond
    an int64, with a RuntimeWarning on stderr). A trace's own sizes stop at 2**62 now (a larger one is a
    damaged event, tests/test_damaged_events.py), but the CPU's totals are the running sum of its Bytes
    (analysis/memory.py): three blocks of just under 2**62 bytes pass an int64. Such a total is kept as
    SQLite keeps an integer written into an INTEGER column, a REAL; the others are integers as before."""
    trace = handmade.cpu_trace()
    block = 2**62 - 1024  # a float holds it exactly
    for k in range(3):
        sample = handmade.mem(100 + 100 * k, block, block, 0x9000 + k)
        sample["args"].update({"Device Type": 0, "Device Id": -1, "Total Reserved": 0})
        trace["traceEvents"].append(sample)
    rank_dir = handmade.write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    con = _db(rank_dir)
    expected = sqlite3.connect(":memory:")
    expected.execute("CREATE TABLE t (v INTEGER)")
    expected.executemany("INSERT INTO t VALUES (?)", [(str(block * k),) for k in (1, 2, 3)])
    stored = expected.execute("SELECT v, typeof(v) FROM t").fetchall()
    assert [kind for _v, kind in stored] == ["integer", "integer", "real"]
    memory = "SELECT totalAllocated, typeof(totalAllocated) FROM MEMORY_RECORD ORDER BY timestamp"
    assert con.execute(memory).fetchall() == stored
    sizes = con.execute("SELECT size, typeof(size), allocationTotalAllocated FROM OP_MEMORY").fetchall()
    assert sorted(sizes, key=lambda row: row[2]) == [(block, "integer", v) for v, _kind in stored]


def test_steps_numbered_past_an_int64_are_said_to_be_left_out_of_step_time(tmp_path: Path) -> None:
    """STEP_TIME's id is an SQLite INTEGER: steps numbered past 2**63 - 1 (a damaged or hand-made trace) were
    left out of it without a word, the text tables and the report listing them. The rank's warning says
    which, and how many."""
    big = [2**63, 2**63 + 7, 10**30]
    trace = handmade.with_steps(handmade.cpu_trace(), {5: 400, big[0]: 300, big[1]: 200, big[2]: 100})
    rank_dir = handmade.write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    assert [row[0] for row in _db(rank_dir).execute("SELECT id FROM STEP_TIME")] == [5]
    summary = json.loads((rank_dir / OUT / "npuprof_summary.json").read_text())
    shown = ", ".join(f"ProfilerStep#{n}" for n in big)
    (said,) = [w for w in summary["warnings"] if "STEP_TIME" in w]
    assert said.startswith(f"{len(big)} step(s) numbered past 2**63 - 1 ({shown}) are not in the db's "), said
    fitting = handmade.write_rank_dir(tmp_path / "fitting", handmade.cpu_trace())
    assert parse_rank_dir(fitting, export_db=True).status == "parsed"
    warnings = json.loads((fitting / OUT / "npuprof_summary.json").read_text()).get("warnings", [])
    assert not [w for w in warnings if "STEP_TIME" in w]


def test_a_process_group_without_a_description_is_named_by_its_name(tmp_path: Path) -> None:
    """helper-181: a pg_config entry whose pg_desc is empty, null or absent (torch before 2.3 writes none)
    was read, but every such group was "default_group" in parallel_group_info, a subgroup too (msprof-analyze
    groups collectives by it). The default group ("0") is default_group, another its own name, as the
    agent's profiler_metadata.json names them; an empty "Process Group Description" in the collective's
    args is read as before."""
    trace = _cuda_trace()
    trace["distributedInfo"]["pg_config"] = [
        {"pg_name": "0", "pg_desc": "", "ranks": [0, 1]},
        {"pg_name": "1", "ranks": [0, 1]},
        {"pg_name": "7", "pg_desc": None, "ranks": "[0, 1]"},
    ]
    for ev in trace["traceEvents"]:
        if ev.get("name") == "record_param_comms":
            ev["args"]["Process Group Description"] = ""
    rank_dir = handmade.write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    meta = dict(_db(rank_dir).execute("SELECT name, value FROM META_DATA"))
    groups = json.loads(meta["parallel_group_info"])
    expected = {"0": "default_group", "1": "1", "7": "7"}
    assert {k: v["group_name"] for k, v in groups.items()} == expected
    assert all(v["global_ranks"] == [0, 1] for v in groups.values())


def _without_memory(rank: int = 0) -> dict[str, Any]:
    trace = _cuda_trace(rank)
    trace["traceEvents"] = [ev for ev in trace["traceEvents"] if ev.get("name") != "[memory]"]
    return trace


def test_a_capture_without_memory_has_no_memory_tables(tmp_path: Path) -> None:
    """helper-210: a capture without --profile-memory had an empty MEMORY_RECORD (and OP_MEMORY) in its db,
    which torch_npu never writes (it creates them only with rows). msprof-analyze takes a table that exists
    for data: its compare and advisor read max(totalReserved) of no rows as None and divided it, so compare
    wrote no workbook and advisor no Overall Summary for such a capture. The other empty tables stay
    (free_analysis joins COMMUNICATION_OP with or without collectives)."""
    rank_dir = handmade.write_rank_dir(tmp_path, _without_memory())
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    con = _db(rank_dir)
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"MEMORY_RECORD", "OP_MEMORY"} & tables
    assert {"PYTORCH_API", "TASK", "COMMUNICATION_OP", "STEP_TIME", "GC_RECORD", "MSTX_EVENTS"} <= tables
    assert con.execute("SELECT count(*) FROM TASK").fetchone()[0] > 0


@pytest.mark.skipif(MSPROF is None, reason="msprof-analyze not installed (.ci/interop.sh)")
def test_msprof_compare_and_advisor_read_a_db_without_memory(tmp_path: Path) -> None:
    """helper-210: with an empty MEMORY_RECORD msprof-analyze's compare wrote no workbook and its advisor no
    Overall Summary ("unsupported operand type(s) for /: 'NoneType' and 'int'" in their logs, exit 0)."""
    assert MSPROF is not None
    base, other = (
        handmade.write_rank_dir(
            tmp_path / "runs" / str(r), _without_memory(r), r, name=f"host_{r}_2025010100000000{r}"
        )
        for r in (0, 1)
    )
    for rank_dir in (base, other):
        assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    out = tmp_path / "compare"
    log = run_forked(MSPROF, "compare", "-d", str(base), "-bp", str(other), "-o", str(out), "--force")
    assert "'NoneType' and 'int'" not in log
    (workbook,) = out.glob("performance_comparison_result_*.xlsx")
    with zipfile.ZipFile(workbook) as z:
        assert "OverallMetrics" in z.read("xl/workbook.xml").decode()
    advisor = tmp_path / "advisor"
    log = run_forked(MSPROF, "advisor", "all", "-d", str(base), "-o", str(advisor), "-l", "en", "--force")
    (book,) = advisor.glob("log/mstt_advisor_*.xlsx")
    with zipfile.ZipFile(book) as z:
        assert "Overall Summary" in z.read("xl/workbook.xml").decode(), log[-3000:]


def test_the_run_says_msprof_analyze_reads_each_ranks_latest_capture_only(tmp_path: Path) -> None:
    """helper-288: `--repeat 2 --export-type db` ended with `msprof-analyze cluster -d OUT -m compute_op_sum`,
    which read only the second capture ("Multiple profiling paths detected. Selected latest timestamp path",
    an INFO line of its log): the first one's operators were in no table, and nothing said so."""
    from npuprof.reports.run_summary import msprof_reads_latest_only
    from npuprof.results.run_record import CaptureSummary

    def capture(name: str, rank: int | None, db: bool) -> CaptureSummary:
        tables = tmp_path / name / "ASCEND_PROFILER_OUTPUT"
        tables.mkdir(parents=True)
        if db:
            (tables / f"ascend_pytorch_profiler{'' if rank is None else f'_{rank}'}.db").write_bytes(b"")
        return CaptureSummary(tmp_path / name, "complete", rank, 1, [7, 8], 1, "", True)

    two_of_one = [capture("a", None, True), capture("b", None, True)]
    assert msprof_reads_latest_only(two_of_one) == (
        "; it reads each rank's latest capture only: 1 of 2 left out, give it a folder of one capture per "
        "rank for them"
    )
    ranks = [capture("r0", 0, True), capture("r1", 1, True), capture("r0b", 0, True)]
    ranks.append(capture("r1b", 1, False))  # no db: msprof-analyze's db recipes do not see it
    assert msprof_reads_latest_only(ranks).startswith("; it reads each rank's latest capture only: 1 of 3")
    assert msprof_reads_latest_only(ranks[:2]) == ""  # one capture a rank: all read


def test_the_steps_are_pytorch_api_rows_as_torch_npus(tmp_path: Path) -> None:
    """helper-288: msprof-analyze finds a db's steps among its PYTORCH_API rows (``ProfilerStep#N``, as
    torch_npu records them), where npuprof wrote none: `compare --base_step 11 --comparison_step 7` of two
    db captures wrote no workbook ("There is no operator event data for step 11"), and advisor's timeline
    dataset found no step. Each step is a row of type op over its span, on its thread."""
    rank_dir = handmade.write_rank_dir(tmp_path, handmade.cpu_trace())  # ProfilerStep#7 [0, 1000), thread 100
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    con = _db(rank_dir)
    s = _strings(con)
    steps = [
        (s[name], a, b, kind)
        for name, a, b, kind in con.execute("SELECT name, startNs, endNs, type FROM PYTORCH_API")
        if s[name].startswith("ProfilerStep")
    ]
    assert steps == [("ProfilerStep#7", _ns(0), _ns(1000), 50001)]  # ENUM_API_TYPE's op
    (thread,) = con.execute(
        "SELECT DISTINCT globalTid FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
        "WHERE s.value IN ('ProfilerStep#7', 'aten::mm')"
    ).fetchall()
    assert thread[0] > 0


def test_ranges_without_a_device_task_are_linked_to_none(tmp_path: Path) -> None:
    """helper-288: a CPU capture with --with-stack and no range of the user's had only module spans in
    MSTX_EVENTS, each with connectionId 4000000000 and no task: msprof-analyze's mstx_sum takes every range
    whose connectionId is not 4294967295 (msprof's "no device task") and subtracted their tasks' missing
    times ("unsupported operand type(s) for -: 'NoneType' and 'NoneType'", no table). Such ranges are
    linked to 4294967295 now, as msprof's own; marks keep 4000000000."""
    trace = handmade.cpu_trace()
    trace["traceEvents"].append(
        x("nn.Module: Linear_0", "python_function", 90, 220, **{"Python id": 1, "Python parent id": 0})
    )
    rank_dir = handmade.write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    con = _db(rank_dir)
    s = _strings(con)
    events = con.execute("SELECT message, domainId, eventType, connectionId FROM MSTX_EVENTS").fetchall()
    assert [(s[m], s[d], t, c) for m, d, t, c in events] == [("Linear_0", "Module", 2, 4294967295)]
    assert con.execute("SELECT count(*) FROM TASK WHERE connectionId = 4294967295").fetchone() == (0,)
