"""Hand-made traces with known answers: step breakdown, operators, kernels, collectives, memory."""

from __future__ import annotations

import contextlib
import csv
import json
import sqlite3
from pathlib import Path

import pytest
from analyse_support.handmade import T0, cpu_trace, cuda_trace, write_rank_dir, x

from npuprof.analysis.communication import group_id
from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir
from npuprof.analysis.step_fields import STEP_HEADER


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module", params=["pretty", "compact-gz"])
def cuda_dir(request, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cuda")
    rank_dir = write_rank_dir(
        root, cuda_trace(), gz=request.param == "compact-gz", compact=request.param == "compact-gz"
    )
    outcome = parse_rank_dir(rank_dir)
    assert outcome.status == "parsed", outcome.reason
    return rank_dir / "ASCEND_PROFILER_OUTPUT"


def test_step_trace_time_exact(cuda_dir: Path) -> None:
    text = (cuda_dir / "step_trace_time.csv").read_text().splitlines()
    assert text[0] == ",".join(STEP_HEADER)
    rows = _rows(cuda_dir / "step_trace_time.csv")
    got = [{k: float(v) for k, v in r.items()} for r in rows]
    assert got[0] == {
        "Device_id": 0,
        "Step": 1,
        "Computing": 300,
        "Communication(Not Overlapped)": 200,
        "Overlapped": 50,
        "Communication": 250,
        "Free": 500,
        "Stage": 1000,
        "Bubble": 0,
        "Communication(Not Overlapped and Exclude Receive)": 200,
        "Preparing": 100,
    }
    assert got[1] == {
        "Device_id": 0,
        "Step": 2,
        "Computing": 100,
        "Communication(Not Overlapped)": 200,
        "Overlapped": 0,
        "Communication": 200,
        "Free": 700,
        "Stage": 800,
        "Bubble": 200,
        "Communication(Not Overlapped and Exclude Receive)": 0,
        "Preparing": 100,
    }


def test_operators_and_kernels(cuda_dir: Path) -> None:
    ops = {r["Name"]: r for r in _rows(cuda_dir / "operator_details.csv")}
    assert float(ops["aten::linear"]["Host Self Duration(us)"]) == 60
    assert float(ops["aten::linear"]["Host Total Duration(us)"]) == 100
    assert float(ops["aten::addmm"]["Host Self Duration(us)"]) == 40
    assert float(ops["aten::addmm"]["Device Self Duration(us)"]) == 350
    assert float(ops["aten::linear"]["Device Self Duration(us)"]) == 0
    assert float(ops["aten::linear"]["Device Total Duration(us)"]) == 350
    assert ops["aten::addmm"]["Input Shapes"] == "[[4],[8,4],[4,4]]"
    kernels = _rows(cuda_dir / "kernel_details.csv")
    assert [k["Name"] for k in kernels] == [
        "kernel_a",
        "kernel_b",
        "ncclDevKernel_AllReduce_Sum_f32",
        "kernel_c",
        "ncclDevKernel_SendRecv",
    ]
    a = kernels[0]
    assert (a["Step Id"], a["Type"], a["Accelerator Core"], a["Block Dim"]) == (
        "1",
        "aten::addmm",
        "CUDA kernel",
        "8",
    )
    assert float(a["Start Time(us)"]) == T0 + 100 and float(a["Duration(us)"]) == 200
    assert float(kernels[3]["Wait Time(us)"]) == 800  # stream 7 idle from 300 to 1100
    assert kernels[2]["Accelerator Core"] == "NCCL"
    stats = {(r["OP Type"], r["Core Type"]): r for r in _rows(cuda_dir / "op_statistic.csv")}
    addmm = stats[("aten::addmm", "CUDA kernel")]
    assert (addmm["Count"], float(addmm["Total Time(us)"]), float(addmm["Max Time(us)"])) == ("2", 350, 200)
    assert abs(sum(float(r["Ratio(%)"]) for r in stats.values()) - 100) < 0.05


def test_communication(cuda_dir: Path) -> None:
    comm = json.loads((cuda_dir / "communication.json").read_text())
    assert set(comm) == {"step1", "step2"}
    op = comm["step1"]["collective"][f"allreduce__0@{group_id('0')}"]
    assert op["Communication Time Info"]["Elapse Time(ms)"] == 0.25
    assert op["Communication Time Info"]["Start Timestamp(us)"] == T0 + 350
    assert op["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] == 0.004096
    assert "Total Op Info" in comm["step1"]["collective"] and "Total Op Info" in comm["step1"]["p2p"]
    recv = comm["step2"]["p2p"][f"recv__0@{group_id('1')}"]
    assert recv["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] == 0.000512
    matrix = json.loads((cuda_dir / "communication_matrix.json").read_text())
    assert (
        matrix["1"]["collective"][f"allreduce-total@{group_id('0')}"]["0-0"]["Transit Size(MB)"] == 0.004096
    )


def test_the_groups_of_communication_json_trace_view_and_metadata_join(tmp_path: Path) -> None:
    """helper-195: msprof-analyze's cluster finds a communication.json group (after ``@``) as msprof's hash
    of a profiler_metadata.json ``parallel_group_info`` key, and compare a ``Group <key> Communication``
    thread of trace_view.json by the key (docs/formats.md, "profiler_metadata.json"). The CPU/CUDA path
    wrote torch's group name itself after ``@`` ("0", "1"), which no key hashes to: cluster's groups had no
    pg_name. The agent's metadata of two real process groups (torch names them "0" and "1", as the trace
    does) and the parse of a trace with collectives on both must join in all three files."""
    import torch.distributed as dist

    from npuprof.agent.metadata import build_metadata

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        dist.new_group([0], group_desc="pipeline")
        meta = build_metadata({})
    finally:
        dist.destroy_process_group()
    trace = cuda_trace()
    trace["distributedInfo"]["pg_config"].append({"pg_name": "1", "pg_desc": "pipeline", "ranks": [0, 1]})
    rank_dir = write_rank_dir(tmp_path, trace)
    (rank_dir / "profiler_metadata.json").write_text(json.dumps(meta))
    assert parse_rank_dir(rank_dir, export_db=True).status == "parsed"
    keys = set(meta["parallel_group_info"])
    assert keys == {"0", "1"}
    # each group's name: default_group for the default one, else the description the job gave it
    named_as = {"0": "default_group", "1": "pipeline"}
    assert {k: v["group_name"] for k, v in meta["parallel_group_info"].items()} == named_as
    (db,) = rank_dir.glob("ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")
    with contextlib.closing(sqlite3.connect(db)) as con:
        in_db = json.loads(dict(con.execute("SELECT name, value FROM META_DATA"))["parallel_group_info"])
        op_groups = {
            g
            for (g,) in con.execute(
                "SELECT s.value FROM COMMUNICATION_OP c JOIN STRING_IDS s ON s.id = c.groupName"
            )
        }
    assert {k: v["group_name"] for k, v in in_db.items()} == named_as
    assert op_groups == keys
    ids = {group_id(k): k for k in keys}
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    comm = json.loads((out / "communication.json").read_text())
    named = {n.rpartition("@")[2] for s in comm.values() for ops in s.values() for n in ops if "@" in n}
    matrix = json.loads((out / "communication_matrix.json").read_text())
    named_m = {n.rpartition("@")[2] for s in matrix.values() for ops in s.values() for n in ops}
    assert named == named_m == set(ids), (named, named_m, ids)
    view = json.loads((out / "trace_view.json").read_text())
    comm_pid = next(
        e["pid"] for e in view if e.get("name") == "process_name" and e["args"]["name"] == "Communication"
    )
    threads = {
        e["tid"]: e["args"]["name"]
        for e in view
        if e.get("pid") == comm_pid and e.get("name") == "thread_name"
    }
    assert set(threads.values()) == {f"Group {k} Communication" for k in keys}
    hcom = [(e["name"], threads[e["tid"]]) for e in view if e.get("pid") == comm_pid and e.get("ph") == "X"]
    assert len(hcom) == 2
    for name, thread in hcom:  # hcom_allReduce__<last 3 digits of the group's hash>_<n>
        assert name.split("__")[1].split("_")[0] == group_id(thread.split(" ")[1])[-3:], (name, thread)


def test_memory_and_trace_view(cuda_dir: Path) -> None:
    record = _rows(cuda_dir / "memory_record.csv")
    assert [float(r["Total Allocated(MB)"]) for r in record] == [
        round(8192 / 2**20, 6),
        round(4096 / 2**20, 6),
    ]
    assert record[0]["Device Type"] == "CUDA:0"
    (row,) = _rows(cuda_dir / "operator_memory.csv")
    assert (row["Name"], float(row["Size(KB)"]), float(row["Duration(us)"])) == ("aten::addmm", 4.0, 25.0)
    view = json.loads((cuda_dir / "trace_view.json").read_text())  # torch_npu's form: a bare array
    names = {(e.get("name"), (e.get("args") or {}).get("name")) for e in view if e["ph"] == "M"}
    assert ("process_name", "Overlap Analysis") in names and ("process_name", "Ascend Hardware") in names
    overlap = next(e["pid"] for e in view if e["ph"] == "M" and e["args"].get("name") == "Overlap Analysis")
    free = sum(e["dur"] for e in view if e["pid"] == overlap and e.get("name") == "Free")
    assert free == pytest.approx(1200)
    assert len(view) > len(cuda_trace()["traceEvents"])
    summary = json.loads((cuda_dir / SUMMARY_FILE).read_text())
    assert summary["memory"]["peak_allocated_mb"] == round(8192 / 2**20, 3)


def test_operator_memory_row_and_step_peaks_by_hand(tmp_path: Path) -> None:
    """operator_memory.csv's row of the trace's one block, every figure by hand (4096 B allocated at 25.1234
    inside aten::addmm, totals 8192 B allocated and 4 MiB reserved; freed at 50.4567, 4096 B left), and each
    step's memory peak: step 2 holds no memory event and started with what the free left (helper-368: the
    release's reserved and active columns swapped, a duration rounded to 0.01 µs and step 2's peak lost all
    failed no test)."""
    trace = cuda_trace()
    for e in trace["traceEvents"]:
        if e["name"] == "[memory]":
            e["ts"] = T0 + (25.1234 if e["args"]["Bytes"] > 0 else 50.4567)
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir).status == "parsed"
    (row,) = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv")
    mib = 2**20
    assert (row["Name"], float(row["Size(KB)"]), row["Duration(us)"], row["Active Duration(us)"]) == (
        "aten::addmm",
        4.0,
        "25.334",  # 50.457 - 25.123: the times as written, to the ns
        "25.334",
    )
    figures = {k: float(v) for k, v in row.items() if k.endswith("(MB)")}
    assert figures == {
        "Allocation Total Allocated(MB)": round(8192 / mib, 6),
        "Allocation Total Reserved(MB)": 4.0,
        "Allocation Total Active(MB)": round(8192 / mib, 6),
        "Release Total Allocated(MB)": round(4096 / mib, 6),
        "Release Total Reserved(MB)": 4.0,
        "Release Total Active(MB)": round(4096 / mib, 6),
    }
    summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).read_text())
    peaks = [(s["step"], s["memory_peak_mb"]) for s in summary["steps"]]
    assert peaks == [(1, round(8192 / mib, 3)), (2, round(4096 / mib, 3))]


def test_cpu_only_overlap(tmp_path: Path) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse_rank_dir(rank_dir).ok
    (row,) = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    got = {k: float(v) for k, v in row.items()}
    assert got["Step"] == 7
    assert (
        got["Computing"],
        got["Communication"],
        got["Overlapped"],
        got["Communication(Not Overlapped)"],
        got["Free"],
        got["Preparing"],
    ) == (300, 300, 100, 200, 500, 100)
    comm = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    assert (
        comm["step7"]["collective"][f"all_reduce__0@{group_id('default')}"]["Communication Bandwidth Info"][
            "SDMA"
        ]["Transit Size(MB)"]
        == 0.001024
    )
    # the device is the CPU: its tasks are the step thread's operators that do their own work (aten::mm,
    # 190 of its 200 µs, holding aten::empty) and the gloo collectives
    kernels = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert [(k["Name"], k["Accelerator Core"]) for k in kernels] == [
        ("aten::mm", "CPU"),
        ("gloo:all_reduce", "GLOO"),
        ("aten::add", "CPU"),
    ]


def _one_gloo_step(tmp_path: Path, *ops: tuple[str, float, float], collective: tuple[float, float]) -> dict:
    """step_trace_time.csv's row of a CPU rank's step [0, 1000) running ``ops`` (name, start, duration) on
    its main thread while gloo's all_reduce runs ``collective`` (start, duration) on its worker thread."""
    trace = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2},
        "traceEvents": [
            x("ProfilerStep#3", "user_annotation", 0, 1000),
            *(x(name, "cpu_op", ts, dur, **{"External id": k}) for k, (name, ts, dur) in enumerate(ops, 1)),
            x("gloo:all_reduce", "user_annotation", *collective, tid=101, **{"Input Dims": [[256]]}),
        ],
    }
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir).ok
    (row,) = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    return {k: float(v) for k, v in row.items()}


@pytest.mark.parametrize("blocking_call", [False, True])
def test_cpu_an_operator_that_issued_a_collective_waits_while_it_runs(
    tmp_path: Path, blocking_call: bool
) -> None:
    """A rank waiting for a late peer: its autograd Function's backward [100, 900) calls all_reduce
    (``c10d::allreduce_`` [150, 160), or [150, 850) where the call itself blocks, as DDP's AccumulateGrad
    hook's did) and waits for the gloo collective [200, 800) on gloo's thread; inside it aten::clone
    [110, 140); after it aten::add [900, 950). Computing: the backward outside the collective and the call
    with clone and add: [100, 150) [160, 200) [800, 900) [900, 950) = 50 + 40 + 100 + 50 = 240 for the
    short call; [100, 150) [850, 900) [900, 950) = 150 for the blocking one. Communication: the collective
    and the call, where the thread waits for it (helper-99: that wait read as free): 600 + 10 for the short
    call, [150, 850) = 700 for the blocking one, none of it hidden behind computing. Counted as before the
    rule on holders, the backward would have covered the collective: computing 850, exposed 0."""
    call = (150, 700 if blocking_call else 10)
    got = _one_gloo_step(
        tmp_path,
        ("autograd::engine::evaluate_function: WaitsBackward", 100, 800),
        ("WaitsBackward", 100, 799),
        ("aten::clone", 110, 30),
        ("c10d::allreduce_", *call),
        ("aten::add", 900, 50),
        collective=(200, 600),
    )
    computing, communication = (150, 700) if blocking_call else (240, 610)
    assert (
        got["Computing"],
        got["Communication"],
        got["Overlapped"],
        got["Communication(Not Overlapped)"],
    ) == (
        computing,
        communication,
        0,
        communication,
    ), got
    assert got["Free"] == 1000 - computing - communication


def test_cpu_the_wait_of_a_functional_collective_is_communication(tmp_path: Path) -> None:
    """torch.distributed._functional_collectives: the rank waits in ``_c10d_functional::wait_tensor``
    [102, 898) under PythonSubclass [101, 899) under aten::copy_ [100, 900), while gloo's collective runs
    [150, 850) (helper-86: read as ~97% computing). The wait is a communication call, its holders wait with
    it: computing is copy_ outside the call, [100, 102) and [898, 900), 4 µs; exposed communication the
    wait and the collective, [102, 898): 796."""
    got = _one_gloo_step(
        tmp_path,
        ("aten::copy_", 100, 800),
        ("PythonSubclass", 101, 798),
        ("_c10d_functional::wait_tensor", 102, 796),
        collective=(150, 700),
    )
    assert (got["Computing"], got["Communication(Not Overlapped)"], got["Overlapped"]) == (4, 796, 0), got


def test_cpu_the_launch_of_a_functional_collective_is_communication(tmp_path: Path) -> None:
    """docs/formats.md, "Step breakdown": the functional collectives' launch is a communication call, as
    ``c10d::allreduce_`` with ``async_op=True`` is (a reader of the doc's two examples counted it as
    computing). ``_c10d_functional::all_reduce`` [100, 140), then aten::mm [200, 300) while gloo's
    collective runs [150, 850): computing the mm, 100; communication the launch and the collective, 40 +
    700 = 740, of which the mm hides 100."""
    got = _one_gloo_step(
        tmp_path,
        ("_c10d_functional::all_reduce", 100, 40),
        ("aten::mm", 200, 100),
        collective=(150, 700),
    )
    assert (got["Computing"], got["Communication"], got["Overlapped"]) == (100, 740, 100), got
    assert got["Communication(Not Overlapped)"] == 640 and got["Free"] == 1000 - 100 - 640, got


def test_idempotent_and_force(tmp_path: Path) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse_rank_dir(rank_dir).status == "parsed"
    done = rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done"
    before = done.stat().st_mtime_ns
    assert parse_rank_dir(rank_dir).status == "cached"
    assert done.stat().st_mtime_ns == before
    assert parse_rank_dir(rank_dir, force=True).status == "parsed"
    assert oct(done.stat().st_mode & 0o777) == "0o640"


@pytest.mark.parametrize("workers", [1, 2])
def test_reparse_replaces_or_keeps_trace_view(tmp_path: Path, workers: int) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    assert parse_rank_dir(rank_dir, workers=workers).status == "parsed"
    first = (out / "trace_view.json").read_bytes()
    # a successful re-parse replaces it and leaves no old copy behind
    assert parse_rank_dir(rank_dir, force=True, workers=workers).status == "parsed"
    assert (out / "trace_view.json").read_bytes() == first
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    # a failed one (the raw trace is now cut inside its first event: nothing to read; a trace cut later is
    # read up to the cut, docs/formats.md "Traces cut short") keeps the previous trace_view.json as it was
    raw = next(rank_dir.glob("*.pt.trace.json*"))
    text = raw.read_bytes()
    if text[:2] == b"\x1f\x8b":
        import gzip

        text = gzip.decompress(text)
        raw.unlink()
        raw = raw.with_suffix("")
    raw.write_bytes(text[: text.index(b"{", text.index(b'"traceEvents"')) + 5])
    failed = parse_rank_dir(rank_dir, force=True, workers=workers)
    assert failed.status == "truncated", failed
    assert (out / "trace_view.json").read_bytes() == first
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_the_whole_capture_top_is_not_cut_at_each_steps_top(tmp_path: Path) -> None:
    """Each step has 100 operators of 10 µs and aten::hidden of 9 µs: 101st in every step, first over the
    three (27 µs). The summary keeps each step's top 100; the capture's top 100 must be kept in every step."""
    from conftest import npuprof

    from npuprof.analysis.summary_schema import TOP_PER_STEP

    events = []
    for step in range(3):
        base = step * 10_000
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": base,
                       "dur": 9_000, "pid": 1, "tid": 1, "args": {}})  # fmt: skip
        for k in range(TOP_PER_STEP):
            events.append({"ph": "X", "cat": "cpu_op", "name": f"op_{step}_{k}", "ts": base + 20 * k + 1,
                           "dur": 10, "pid": 1, "tid": 1, "args": {}})  # fmt: skip
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::hidden", "ts": base + 5_000, "dur": 9,
                       "pid": 1, "tid": 1, "args": {}})  # fmt: skip
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    expected = {}
    for e in events:
        if e["cat"] == "cpu_op":
            count, total = expected.get(e["name"], (0, 0))
            expected[e["name"]] = (count + 1, total + e["dur"])
    first = max(expected, key=lambda name: expected[name][1])
    done = npuprof("analyse", str(trace), "--format", "json", "--top", "3", "-j", "1")
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    top = rank["top_operators"][0]
    assert (top["name"], top["count"], top["self_us"]) == (first, *expected[first]) == ("aten::hidden", 3, 27)


def test_the_torch_npu_kernel_top_keeps_the_capture_top_in_every_step() -> None:
    from npuprof.analysis.ascend_output import _top_kernels
    from npuprof.analysis.summary_schema import TOP_PER_STEP

    kernels = [(s, f"k_{s}_{k}", 0.0, 10.0) for s in range(2) for k in range(TOP_PER_STEP)]
    kernels += [(s, "hidden", 0.0, 9.0) for s in range(2)]
    kept = [(k.step, k.total_us) for k in _top_kernels(kernels) if k.name == "hidden"]
    assert kept == [(0, 9.0), (1, 9.0)]


def test_a_table_deleted_after_the_parse_makes_it_parse_again(tmp_path: Path) -> None:
    """analyse.done there and kernel_details.csv deleted (by hand, a cleaning script): the report came from
    what was left without a word, and Ascend's tools found the rank dir short of a table."""
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    assert parse_rank_dir(rank_dir).status == "parsed"
    kernels = (out / "kernel_details.csv").read_bytes()
    assert parse_rank_dir(rank_dir).status == "cached"
    (out / "kernel_details.csv").unlink()
    assert parse_rank_dir(rank_dir).status == "parsed"
    assert (out / "kernel_details.csv").read_bytes() == kernels


def test_the_cpu_only_note_names_the_command_that_shows_the_free_time(tmp_path: Path) -> None:
    """helper-293: a training script's CPU capture showed steps 40-60% free and `prep ms` 0.2 while its
    DataLoader waited 2-7 ms a step (the script's own timer, and the trace's enumerate(DataLoader) spans):
    prep ends at the step's first operator, a logged loss.item(), and the note named no next command;
    `npuprof export-stacks` shows the wait as the largest frame."""
    import io
    import shlex

    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    rank_dir = write_rank_dir(tmp_path / "my run", cpu_trace(), rank=0)
    out = io.StringIO()
    terminal.render_table(build_report(tmp_path / "my run", jobs=1), Console(file=out, width=400))
    said = " ".join(out.getvalue().split())
    assert "no device kernels: CPU-only trace" in said and "prep ms runs to the step's first operator" in said
    command = said.split("what the free time was: ", 1)[1]
    assert shlex.split(command) == ["npuprof", "export-stacks", str(rank_dir), "--svg", "flame.svg"], said


def test_the_cpu_only_note_says_a_capture_without_python_stacks_gets_operator_nesting(tmp_path: Path) -> None:
    """helper-371: the note sent a capture without --with-stack to export-stacks "for the free time", where
    that flame graph shows operator nesting only (the free time ProfilerStep's own), and only export-stacks
    then said to add the flag. The note says it, from the profiler_info that npuprof run writes."""
    import io
    import json

    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    said = {}
    for with_stack in (False, True):
        rank_dir = write_rank_dir(tmp_path / str(with_stack), cpu_trace(), rank=0)
        # as npuprof run writes it (config.common_config, torch_npu's layout)
        info = {"config": {"common_config": {"with_stack": with_stack, "profile_memory": False}}}
        (rank_dir / "profiler_info_0.json").write_text(json.dumps(info))
        out = io.StringIO()
        terminal.render_table(build_report(tmp_path / str(with_stack), jobs=1), Console(file=out, width=400))
        said[with_stack] = " ".join(out.getvalue().split())
        assert f"what the free time was: npuprof export-stacks {rank_dir} --svg flame.svg" in said[with_stack]
    assert "this capture has no Python stacks, so that shows operator nesting only" in said[False], said
    assert "add --with-stack to npuprof run" in said[False], said
    assert "Python stacks" not in said[True] and "--with-stack" not in said[True], said


def test_a_capture_in_which_no_operator_ran_is_said_so_not_sent_to_export_stacks(tmp_path: Path) -> None:
    """A `--delay` window of a parent that waits in subprocess.run for the script that trains: its capture
    holds the profiler's own span and no operator; analyse's CPU note sent the user to `npuprof
    export-stacks` for its 100 % free time, which refuses such a trace ("no host operator events")."""
    import io

    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal
    from npuprof.reports.stacks import StacksError, folded_from_trace

    trace = {"schemaVersion": 1, "traceEvents": [x("PyTorch Profiler (0)", "Trace", 0, 500_000)]}
    rank_dir = write_rank_dir(tmp_path / "run", trace, rank=None)
    out = io.StringIO()
    terminal.render_table(build_report(tmp_path / "run", jobs=1), Console(file=out, width=400))
    said = " ".join(out.getvalue().split())
    assert "no operator ran in this capture" in said, said
    assert "what the free time was" not in said, said
    with pytest.raises(StacksError) as refused:  # what the old note sent the user to: it says why
        folded_from_trace(rank_dir / "host.1.pt.trace.json")
    assert str(refused.value).startswith("no operator ran in this capture"), refused.value


def test_torch_profilers_trace_of_a_step_begun_as_its_profile_ended_is_said_as_such(tmp_path: Path) -> None:
    """helper-349: a `with torch.profiler.profile(schedule=...)` block left right after its last
    prof.step() began a new cycle writes a last trace holding that step alone, nothing in it (here:
    ProfilerStep#4 of 13.26 µs, measured with tensorboard_trace_handler); analyse said of it only that the
    process "did no torch work while it recorded (it waited, for a subprocess or workers that train ...)"."""
    import io

    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    trace = {
        "schemaVersion": 1,
        "traceEvents": [
            x("ProfilerStep#4", "user_annotation", 100, 13.26),
            x("PyTorch Profiler (0)", "Trace", 0, 129),
        ],
    }
    write_rank_dir(tmp_path / "run", trace, rank=None)
    out = io.StringIO()
    terminal.render_table(build_report(tmp_path / "run", jobs=1), Console(file=out, width=400))
    said = " ".join(out.getvalue().split())
    assert (
        "no operator ran in this capture (step 4): torch.profiler writes such a trace when its profile"
        in said
    )
    assert "the trace before it holds the steps recorded" in said, said
    assert "npuprof export-stacks has no operator to show of it" in said, said


def test_prep_ms_of_a_step_in_which_nothing_ran_is_unknown_not_0(tmp_path: Path) -> None:
    """Such a capture's step read "prep ms 0.000": a figure that looked measured, with no first operator to
    measure it to. It is unknown: "-" in the table, null in the JSON, empty in the CSV; a step in which an
    operator ran keeps its own (cpu_trace: the step's first operator, aten::mm, 100 µs after its start)."""
    import io

    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    trace = {"schemaVersion": 1, "traceEvents": [x("PyTorch Profiler (0)", "Trace", 0, 500_000)]}
    write_rank_dir(tmp_path / "idle", trace, rank=None)
    report = build_report(tmp_path / "idle", jobs=1)
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=400))
    (row,) = [line.split() for line in out.getvalue().splitlines() if "500.000" in line]
    cells = [c for c in row if c not in "│┃"]
    assert cells == ["-", "500.000", "0.0%", "0.0%", "0.0%", "0.0%", "100.0%", "-", "-"], row
    (step,) = json.loads(terminal.render_json(report))["ranks"][0]["steps"]
    assert step["preparing_us"] is None and step["free_us"] == 500_000, step
    (csv_row,) = csv.DictReader(io.StringIO(terminal.render_csv(report)))
    assert csv_row["preparing_us"] == "" and float(csv_row["free_us"]) == 500_000, csv_row

    write_rank_dir(tmp_path / "busy", cpu_trace(), rank=0)
    busy = json.loads(terminal.render_json(build_report(tmp_path / "busy", jobs=1)))["ranks"][0]["steps"]
    step_start = min(e["ts"] for e in cpu_trace()["traceEvents"] if e["name"].startswith("ProfilerStep#"))
    first_op = min(e["ts"] for e in cpu_trace()["traceEvents"] if e.get("cat") == "cpu_op")
    assert [s["preparing_us"] for s in busy] == [first_op - step_start], busy
