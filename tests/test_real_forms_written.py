"""What npuprof writes into ASCEND_PROFILER_OUTPUT/ is what torch_npu writes (docs/formats.md), checked
against hand-made traces whose answers are known and against real torch_npu files (tests/fixtures/ascend-real,
from Ascend's public test data): trace_view.json a bare array with string epoch times,
torch_npu's processes, threads, sort indexes and four Overlap Analysis lanes, a communication process that
msprof-analyze compare reads, operator -> device task flows, Call stacks rebuilt from the python_function
spans; kernel_details.csv with the real header and ids; operator_details.csv's Call Stack filled."""

from __future__ import annotations

import copy
import csv
import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from analyse_support.handmade import PID, T0, cpu_trace, cuda_trace, write_rank_dir, x

from npuprof.analysis.communication import group_id
from npuprof.analysis.parse import parse_rank_dir

REAL = Path(__file__).resolve().parent / "fixtures" / "ascend-real"
# Kineto's time base as torch 2.x writes it (whole seconds), and one with nanoseconds (the general case)
BASES = [1_790_857_026_000_000_000, 1_700_000_000_123_456_789]


def _epoch(base_ns: int, ts_us: float) -> str:
    """The text torch_npu writes for a trace time ``ts_us`` (µs after ``base_ns``), computed in decimals."""
    ns = base_ns + int(Decimal(repr(ts_us)) * 1000)
    return f"{ns // 1000}.{ns % 1000:03d}"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _parsed(root: Path, trace: dict[str, Any], **kw: Any) -> Path:
    rank_dir = write_rank_dir(root, trace, **kw)
    outcome = parse_rank_dir(rank_dir)
    assert outcome.status == "parsed", outcome.reason
    return rank_dir / "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module", params=BASES)
def cuda(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    trace = cuda_trace()
    trace["baseTimeNanoseconds"] = request.param
    out = _parsed(tmp_path_factory.mktemp("cuda"), trace, gz=True, compact=True)
    return {"out": out, "base": request.param, "view": json.loads((out / "trace_view.json").read_text())}


def _meta(view: list[dict[str, Any]], kind: str) -> dict[tuple[Any, Any], Any]:
    """(pid, tid) -> the value of each metadata event of that kind (process ones at tid 0)."""
    key = {"process_name": "name", "thread_name": "name", "process_labels": "labels"}.get(kind, "sort_index")
    return {(e["pid"], e["tid"]): e["args"][key] for e in view if e.get("ph") == "M" and e["name"] == kind}


def _pid_of(view: list[dict[str, Any]], name: str) -> Any:
    (pid,) = [pid for (pid, _t), n in _meta(view, "process_name").items() if n == name]
    return pid


# ---- trace_view.json ---------------------------------------------------------------------------------------
def test_trace_view_is_a_bare_array_with_epoch_string_times(cuda: dict[str, Any]) -> None:
    view, base = cuda["view"], cuda["base"]
    assert isinstance(view, list)  # msprof-analyze reads it with ijson.items(f, "item")
    timed = [e for e in view if "ts" in e]
    assert timed and all(isinstance(e["ts"], str) for e in timed)
    assert all(isinstance(e["dur"], int | float) for e in view if e.get("ph") == "X")
    by_name = {e["name"]: e for e in view if e.get("ph") == "X"}
    for name, ts in (("kernel_a", 100), ("aten::addmm", 20), ("ProfilerStep#2", 1000), ("kernel_c", 1100)):
        assert by_name[name]["ts"] == _epoch(base, T0 + ts), name
    assert by_name["kernel_a"]["dur"] == 200
    # Kineto's own metadata is replaced by torch_npu's (its process was "python3", its GPU "GPU 0")
    assert "python3" not in _meta(view, "process_name").values()
    assert "GPU 0" not in _meta(view, "process_name").values()


def test_the_raw_trace_stays_as_torch_wrote_it(tmp_path: Path) -> None:
    trace = cuda_trace()
    rank_dir = write_rank_dir(tmp_path, trace)
    raw = rank_dir / "host.1.pt.trace.json"
    before = raw.read_bytes()
    assert parse_rank_dir(rank_dir).status == "parsed"
    assert raw.read_bytes() == before
    assert json.loads(raw.read_text()) == trace  # still Kineto's object form with traceEvents


def test_processes_threads_and_sort_indexes_follow_torch_npu(cuda: dict[str, Any]) -> None:
    view = cuda["view"]
    real = json.loads((REAL / "trace_view.json").read_text())
    labels, sorts = (_meta(view, k) for k in ("process_labels", "process_sort_index"))
    real_names, real_labels, real_sorts = (
        _meta(real, k) for k in ("process_name", "process_labels", "process_sort_index")
    )
    for process in ("Python", "Ascend Hardware", "Overlap Analysis"):
        pid, real_pid = _pid_of(view, process), _pid_of(real, process)
        assert labels[(pid, 0)] == real_labels[(real_pid, 0)], process
        assert sorts[(pid, 0)] == real_sorts[(real_pid, 0)], process
    assert _pid_of(view, "Python") == PID
    assert _pid_of(view, "Ascend Hardware") == 0  # the GPU's pid in the hand-made trace
    threads, thread_sorts = _meta(view, "thread_name"), _meta(view, "thread_sort_index")
    assert threads[(PID, PID)] == f"Thread {PID}" and thread_sorts[(PID, PID)] == PID
    for stream in (7, 8, 20):
        assert threads[(0, stream)] == f"Stream {stream}" and thread_sorts[(0, stream)] == stream
    assert len(real_names) == 4  # the real file's processes, all of them compared above or absent here (CANN)
    # torch_npu's metadata events carry ph, name, pid, tid and args only
    assert {tuple(sorted(e)) for e in view if e.get("ph") == "M"} == {("args", "name", "ph", "pid", "tid")}


def test_overlap_analysis_has_torch_npu_four_lanes(cuda: dict[str, Any]) -> None:
    view, real = cuda["view"], json.loads((REAL / "trace_view.json").read_text())
    pid, real_pid = _pid_of(view, "Overlap Analysis"), _pid_of(real, "Overlap Analysis")
    lanes = {tid: name for (p, tid), name in _meta(view, "thread_name").items() if p == pid}
    real_lanes = {tid: name for (p, tid), name in _meta(real, "thread_name").items() if p == real_pid}
    assert (
        lanes
        == real_lanes
        == {
            0: "Computing",
            1: "Communication",
            2: "Communication(Not Overlapped)",
            3: "Free",
        }
    )
    spans = [e for e in view if e["pid"] == pid and e["ph"] == "X"]
    assert all("cat" not in e and e["name"] == lanes[e["tid"]] for e in spans)  # as torch_npu's: no cat
    total = {name: sum(e["dur"] for e in spans if e["name"] == name) for name in lanes.values()}
    # cuda_trace's docstring: step 1 computing 300, communication 250 (200 not overlapped), free 500;
    # step 2 computing 100, communication 200 (all of it not overlapped), free 700
    assert total == pytest.approx(
        {"Computing": 400, "Communication": 450, "Communication(Not Overlapped)": 400, "Free": 1200}
    )
    starts = sorted(e["ts"] for e in spans if e["name"] == "Communication")
    assert starts == [_epoch(cuda["base"], T0 + 350), _epoch(cuda["base"], T0 + 1300)]


def _compare_reads(view: list[dict[str, Any]]) -> dict[str, list[float]]:
    """msprof-analyze compare's reading of the collectives (npu_profiling_parser._filter_meta_id and
    base_profiling_parser._update_communication_dict, restated): the process named Communication or HCCL;
    its threads by sort index, those whose name holds "Communication" hold the operators; an operator's
    type is the part after "hcom_" of its lower-case name split on "_"."""
    pids = [
        e["pid"]
        for e in view
        if e.get("name") == "process_name" and e["args"]["name"] in ("Communication", "HCCL")
    ]
    assert len(pids) == 1
    names = {
        e["tid"]: e["args"]["name"] for e in view if e.get("name") == "thread_name" and e["pid"] == pids[0]
    }
    order = {
        e["args"]["sort_index"]: e["tid"]
        for e in view
        if e.get("name") == "thread_sort_index" and e["pid"] == pids[0]
    }
    op_tids = {order[k] for k in sorted(order) if "Communication" in names.get(order[k], "")}
    found: dict[str, list[float]] = {}
    for e in view:
        if e["pid"] == pids[0] and e["ph"] == "X" and e["tid"] in op_tids:
            parts = e["name"].lower().split("_")
            found.setdefault(parts[1] if parts[0] == "hcom" else parts[0], []).append(e["dur"])
    return found


def test_the_communication_process_is_what_compare_reads(cuda: dict[str, Any]) -> None:
    view = cuda["view"]
    assert _compare_reads(view) == {"allreduce": [250], "receive": [200]}
    pid = _pid_of(view, "Communication")
    threads = {name for (p, _t), name in _meta(view, "thread_name").items() if p == pid}
    # the groups of the record_param_comms operators: "0" (all-reduce) and "1" (the receive)
    assert threads == {"Group 0 Communication", "Group 1 Communication"}
    ops = {e["name"]: e for e in view if e["pid"] == pid and e["ph"] == "X"}
    # the last 3 digits of the group's hash in the name, as torch_npu's (docs/formats.md)
    all_reduce = f"hcom_allReduce__{group_id('0')[-3:]}_0"
    assert set(ops) == {all_reduce, f"hcom_receive__{group_id('1')[-3:]}_0"}
    assert ops[all_reduce]["ts"] == _epoch(cuda["base"], T0 + 350)  # the device's NCCL kernel


def test_collectives_are_numbered_in_their_group_whatever_their_type(tmp_path: Path) -> None:
    """HCCL numbers a group's collectives in one sequence across their types: the real kernel_details.csv
    has hcom_allReduce__328_0, hcom_reduceScatter__328_1, hcom_allReduce__328_2 (checked here). An
    all-reduce then an all-gather of group "0" are hcom_allReduce__<h>_0 and hcom_allGather__<h>_1 in
    trace_view.json, allreduce__0@ and allgather__1@ in communication.json (helper-368: each type was
    numbered on its own, the all-gather _0, unlike HCCL, analysis.db and docs/formats.md)."""
    numbers: dict[str, list[int]] = {}
    for row in _rows(REAL / "kernel_details_2023.csv"):
        if row["Name"].startswith("hcom_"):
            group, n = row["Name"].split("__")[1].split("_")[:2]
            if not numbers.get(group) or numbers[group][-1] != int(n):
                numbers.setdefault(group, []).append(int(n))
    types = {
        row["Name"].split("__")[0]
        for row in _rows(REAL / "kernel_details_2023.csv")
        if "__328_" in row["Name"]
    }
    assert len(types) > 1 and numbers["328"] == list(range(len(numbers["328"])))
    trace = cuda_trace()
    for e in trace["traceEvents"]:
        if e["name"] == "record_param_comms" and e["args"]["Collective name"] == "recv":
            e["args"].update({"Collective name": "allgather", "Process Group Name": "0"})
        if e["name"] == "ncclDevKernel_SendRecv":
            e["name"] = "ncclDevKernel_AllGather_RING_LL"
    out = _parsed(tmp_path, trace)
    view = json.loads((out / "trace_view.json").read_text())
    pid = _pid_of(view, "Communication")
    h = group_id("0")
    names = sorted(e["name"] for e in view if e["pid"] == pid and e["ph"] == "X")
    assert names == [f"hcom_allGather__{h[-3:]}_1", f"hcom_allReduce__{h[-3:]}_0"]
    comm = json.loads((out / "communication.json").read_text())
    keys = {
        name for step in comm.values() for ops in step.values() for name in ops if name != "Total Op Info"
    }
    assert keys == {f"allreduce__0@{h}", f"allgather__1@{h}"}


def test_the_spans_npuprof_adds_keep_their_nanoseconds(tmp_path: Path) -> None:
    """torch_npu writes a span's dur to the nanosecond (0.001 µs): the Communication process's collectives
    and the Overlap Analysis lanes keep an all-reduce of 250.007 µs so (helper-368: rounded to 0.01 µs, they
    failed no test, the hand-made traces' times being whole µs)."""
    trace = cuda_trace()
    trace["baseTimeNanoseconds"] = BASES[1]
    (nccl,) = [e for e in trace["traceEvents"] if e["name"] == "ncclDevKernel_AllReduce_Sum_f32"]
    nccl["dur"] = 250.007
    view = json.loads((_parsed(tmp_path, trace) / "trace_view.json").read_text())
    assert _compare_reads(view) == {"allreduce": [250.007], "receive": [200]}
    pid = _pid_of(view, "Overlap Analysis")
    names = ("Communication", "Communication(Not Overlapped)")
    lanes = {n: sorted(e["dur"] for e in view if e["pid"] == pid and e.get("name") == n) for n in names}
    # the all-reduce [350, 600.007) after the kernels' end at 400: 200.007 of it not overlapped
    assert lanes["Communication"] == [200, 250.007]
    assert lanes["Communication(Not Overlapped)"] == [200, 200.007]


def test_communication_size_distribution_keys_are_mb_to_the_byte(cuda: dict[str, Any]) -> None:
    """communication.json's Size Distribution is keyed by the operation's MB to the byte, six decimals
    as the real file's ("0.003072": 3072 B; tests/fixtures/ascend-real/cluster_communication.json):
    the all-reduce's 1024 floats are "0.004096", the receive's 256 bfloat16 "0.000512" (helper-368: keys
    of three decimals failed no test)."""
    comm = json.loads((cuda["out"] / "communication.json").read_text())
    keys = {
        name.split("__")[0]: list(op["Communication Bandwidth Info"]["SDMA"]["Size Distribution"])
        for step in comm.values()
        for kind in ("collective", "p2p")
        for name, op in step[kind].items()
        if name != "Total Op Info"
    }
    assert keys == {"allreduce": ["0.004096"], "recv": ["0.000512"]}


def test_operators_link_to_the_device_tasks_they_launched(cuda: dict[str, Any]) -> None:
    view, base = cuda["view"], cuda["base"]
    flows: dict[Any, dict[str, dict[str, Any]]] = {}
    for e in view:
        if e.get("cat") == "async_npu":
            flows.setdefault(e["id"], {})[e["ph"]] = e
    ends = {(f["s"]["ts"], f["f"]["pid"], f["f"]["tid"], f["f"]["ts"]) for f in flows.values()}
    op = {n: _epoch(base, T0 + t) for n, t in (("addmm", 20), ("comms", 300), ("mul", 1050), ("recv", 1250))}
    task = {
        n: _epoch(base, T0 + t) for n, t in (("a", 100), ("b", 250), ("nccl", 350), ("c", 1100), ("sr", 1300))
    }
    assert ends == {
        (op["addmm"], 0, 7, task["a"]),
        (op["addmm"], 0, 8, task["b"]),
        (op["comms"], 0, 20, task["nccl"]),
        (op["mul"], 0, 7, task["c"]),
        (op["recv"], 0, 20, task["sr"]),
    }
    assert all(f["s"]["pid"] == PID and f["s"]["tid"] == PID and f["f"]["bp"] == "e" for f in flows.values())
    # each flow's end is a device task: compare keys kernels by pid, tid and start time
    tasks = {(e["pid"], e["tid"], e["ts"]) for e in view if e.get("cat") == "kernel"}
    assert {(pid, tid, ts) for _s, pid, tid, ts in ends} <= tasks


def test_steps_are_operators(cuda: dict[str, Any]) -> None:
    steps = [e for e in cuda["view"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert [(e["name"], e["cat"]) for e in steps] == [
        ("ProfilerStep#1", "cpu_op"),
        ("ProfilerStep#2", "cpu_op"),
    ]


# ---- kernel_details.csv ------------------------------------------------------------------------------------
def _header(path: Path) -> list[str]:
    with open(path, newline="") as handle:
        return next(csv.reader(handle))


def test_step_trace_time_has_the_real_columns_in_their_order(cuda: dict[str, Any]) -> None:
    """step_trace_time.csv's columns are torch_npu's, in its order: Device_id and Step, then the times as
    msprof-analyze's cluster table (built from the ranks' tables) lists them after its Step, Type and
    Index, then Preparing (helper-368: Bubble before Stage failed no test)."""
    real = _header(REAL / "cluster_step_trace_time.csv")
    assert real[:3] == ["Step", "Type", "Index"]
    assert _header(cuda["out"] / "step_trace_time.csv") == ["Device_id", "Step", *real[3:], "Preparing"]


def test_kernel_details_has_the_real_header_and_ids(cuda: dict[str, Any]) -> None:
    real_2023, real_2025 = (
        _header(REAL / "kernel_details_2023.csv"),
        _header(REAL / "kernel_details_2025.csv"),
    )
    header = _header(cuda["out"] / "kernel_details.csv")
    # the 2023 release's columns up to its AI Core metrics (which depend on aic_metrics)
    assert header == real_2023[: real_2023.index("Context ID") + 1]
    assert set(header) <= set(real_2025)
    rows = {r["Name"]: r for r in _rows(cuda["out"] / "kernel_details.csv")}
    a = rows["kernel_a"]
    assert (a["Step Id"], a["Model ID"], a["Task ID"], a["Stream ID"]) == ("1", "4294967295", "11", "7")
    assert (a["Block Dim"], a["Mix Block Dim"], a["Type"]) == ("8", "0", "aten::addmm")  # grid [4, 2, 1]
    assert a["Input Shapes"] == '"4;8,4;4,4"'  # aten::addmm's Input Dims [[4], [8, 4], [4, 4]], Ascend's form
    assert a["Input Data Types"] == "N/A" and a["Context ID"] == "N/A"
    # the start time is trace_view.json's, to the character: compare matches the two
    assert a["Start Time(us)"] == _epoch(cuda["base"], T0 + 100)
    kernel_ts = {e["name"]: e["ts"] for e in cuda["view"] if e.get("cat") == "kernel"}
    assert all(r["Start Time(us)"] == kernel_ts[name] for name, r in rows.items())


def test_cpu_kernel_details_lists_the_cpu_tasks(tmp_path: Path) -> None:
    """The device is the CPU: its tasks are the step thread's operators that do their own work (aten::mm,
    190 of its 200 µs, holding aten::empty) and the collectives."""
    out = _parsed(tmp_path, cpu_trace())
    rows = _rows(out / "kernel_details.csv")
    assert [(r["Name"], r["Accelerator Core"], r["Stream ID"], r["Start Time(us)"]) for r in rows] == [
        ("aten::mm", "CPU", str(PID), _epoch(0, T0 + 100)),
        ("gloo:all_reduce", "GLOO", "101", _epoch(0, T0 + 250)),
        ("aten::add", "CPU", str(PID), _epoch(0, T0 + 500)),
    ]
    assert float(rows[2]["Wait Time(us)"]) == 200  # aten::add starts 200 µs after aten::mm ends


# ---- Call stacks -------------------------------------------------------------------------------------------
def _frame(name: str, ts: float, dur: float, pid: int, parent: int | None, tid: int = PID) -> dict[str, Any]:
    event = x(name, "python_function", ts, dur, tid=tid, **{"Python id": pid, "Python parent id": parent})
    return event


def stacked_trace() -> dict[str, Any]:
    """torch 2.x with_stack: python_function spans (with Python ids) around the operators; a frame of
    npuprof's own and a built-in are left out of stacks; an operator outside every frame has none."""
    trace = copy.deepcopy(cpu_trace())
    trace["with_stack"] = 1
    trace["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    trace["traceEvents"] += [
        _frame("train.py(10): <module>", 50, 600, 1, None),
        _frame("/site-packages/npuprof/agent/steps.py(57): stepped", 60, 580, 2, 1),
        _frame("model.py(20): forward", 90, 250, 3, 2),
        _frame("<built-in method mm of type object at 0x7f>", 95, 220, 4, 3),
        _frame("model.py(30): head", 450, 190, 5, 2),
    ]
    return trace


def test_call_stacks_are_rebuilt_from_the_python_frames(tmp_path: Path) -> None:
    out = _parsed(tmp_path, stacked_trace())
    forward = "model.py(20): forward;\r\ntrain.py(10): <module>"  # innermost first, torch_npu's separator
    head = "model.py(30): head;\r\ntrain.py(10): <module>"
    stacks = {r["Name"]: r["Call Stack"] for r in _rows(out / "operator_details.csv")}
    assert stacks == {"aten::mm": forward, "aten::empty": forward, "aten::add": head}
    view = json.loads((out / "trace_view.json").read_text())
    ops = {e["name"]: e["args"] for e in view if e.get("cat") == "cpu_op" and e["name"].startswith("aten::")}
    assert {name: args.get("Call stack") for name, args in ops.items()} == stacks
    assert ops["aten::mm"]["External id"] == 1  # the operator's own args are kept
    step = next(e for e in view if e["name"] == "ProfilerStep#7")
    assert "Call stack" not in step.get("args", {})  # it starts before every frame


def test_call_stacks_at_the_frames_edges(tmp_path: Path) -> None:
    """A frame is open from its start to before its end: aten::mm starting with two frames at 100 is in
    both, the shorter innermost; aten::add at 500, where model.py(30) ended, is not in it (helper-368: a
    frame starting with the operator left out, the longer of two frames taken for the inner one, and a frame
    ending at the operator's start kept open each failed no test)."""
    trace = copy.deepcopy(cpu_trace())
    trace["with_stack"] = 1
    trace["traceEvents"] += [
        _frame("train.py(10): <module>", 50, 600, 1, None),
        _frame("model.py(20): forward", 100, 300, 2, 1),
        _frame("model.py(25): block", 100, 50, 3, 2),
        _frame("model.py(30): head", 400, 100, 4, 1),
    ]
    out = _parsed(tmp_path, trace)
    stacks = {r["Name"]: r["Call Stack"] for r in _rows(out / "operator_details.csv")}
    block = "model.py(25): block;\r\nmodel.py(20): forward;\r\ntrain.py(10): <module>"
    assert stacks == {"aten::mm": block, "aten::empty": block, "aten::add": "train.py(10): <module>"}


def test_a_stack_the_operator_carries_is_kept(tmp_path: Path) -> None:
    """torch 1.x wrote the stack into the operator's args: operator_details shows it as it was."""
    trace = stacked_trace()
    mm = next(e for e in trace["traceEvents"] if e["name"] == "aten::mm")
    mm["args"]["Call stack"] = "old.py(1): f;old.py(2): g"
    out = _parsed(tmp_path, trace)
    stacks = {r["Name"]: r["Call Stack"] for r in _rows(out / "operator_details.csv")}
    assert stacks["aten::mm"] == "old.py(1): f;old.py(2): g"
    view = json.loads((out / "trace_view.json").read_text())
    args = next(e["args"] for e in view if e["name"] == "aten::mm")
    assert args["Call stack"] == "old.py(1): f;old.py(2): g"


def test_without_stacks_the_column_stays_empty(tmp_path: Path) -> None:
    out = _parsed(tmp_path, cpu_trace())
    assert {r["Call Stack"] for r in _rows(out / "operator_details.csv")} == {""}


def test_a_gzipped_raw_trace_gives_the_same_trace_view(tmp_path: Path) -> None:
    trace = stacked_trace()
    plain = _parsed(tmp_path / "plain", trace)
    packed = _parsed(tmp_path / "packed", trace, gz=True)
    assert (plain / "trace_view.json").read_bytes() == (packed / "trace_view.json").read_bytes()
    assert gzip.decompress((packed.parent / "host.1.pt.trace.json.gz").read_bytes())  # still there


def test_a_trace_in_torch_npu_form_keeps_its_times_and_processes(tmp_path: Path) -> None:
    """torch_npu's own trace_view.json read as a trace (string epoch times: no base is added to them); its
    Overlap Analysis lanes are replaced by ours (tests/test_trace_body.py)."""
    real = json.loads((REAL / "trace_view.json").read_text())
    rank_dir = tmp_path / "host_1_20250101000000000_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "profiler_info_0.json").write_text("{}")
    (rank_dir / "host.1.pt.trace.json").write_text(json.dumps(real))
    assert parse_rank_dir(rank_dir).status == "parsed"
    view = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    lanes = {
        e["pid"] for e in real if e.get("name") == "process_name" and e["args"]["name"] == "Overlap Analysis"
    }
    theirs = [(e["name"], e["ts"]) for e in real if e.get("ph") == "X" and e["pid"] not in lanes]
    ours = [(e["name"], e["ts"]) for e in view if e.get("ph") == "X" and e["pid"] in {r["pid"] for r in real}]
    assert ours == theirs
    names = {e["pid"]: e["args"]["name"] for e in view if e.get("name") == "process_name"}
    assert {names[p] for p in {r["pid"] for r in real} - lanes} == {"Python", "CANN", "Ascend Hardware"}
    rows = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    device = {e["ts"] for e in real if e.get("ph") == "X" and names.get(e["pid"]) == "Ascend Hardware"}
    assert rows and {r["Start Time(us)"] for r in rows} <= device
