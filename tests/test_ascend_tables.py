"""kernel_details, operator_details and op_statistic as typed columns (npuprof.analysis.ascend_tables):
the values a database writer reads (epoch ns, unrounded µs, string ids), worked out here by hand from
hand-made traces, and the CSV text `npuprof analyse` writes from them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from analyse_support.handmade import PID, T0, cpu_trace, cuda_trace, write_rank_dir, x
from conftest import npuprof

from npuprof.analysis import tables
from npuprof.analysis.ascend_tables import (
    KERNEL_HEADER,
    OP_STAT_HEADER,
    OPERATOR_HEADER,
    KernelTable,
    OperatorTable,
    OpStatTable,
)
from npuprof.analysis.cells import ascend_shapes
from npuprof.analysis.scan import scan

BASE_NS = 1_700_000_000_000_000_000  # the trace's baseTimeNanoseconds: start times are epoch ns


def _with_kernel_d(trace: dict) -> dict:
    """The CUDA trace plus a kernel no operator launched, at a time with sub-µs digits, on its own stream."""
    trace["traceEvents"].append(
        x("kernel_d", "kernel", 1600.567, 12.3456, pid=0, tid=9, correlation=16, stream=9, device=0)
    )
    trace["baseTimeNanoseconds"] = BASE_NS
    return trace


def _parsed(root: Path, trace: dict, name: str) -> tuple[tables.RankTables, Path]:
    """The tables built here from the trace, and the ASCEND_PROFILER_OUTPUT/ `npuprof analyse` wrote."""
    rank_dir = write_rank_dir(root, trace, name=name)
    done = npuprof("analyse", str(rank_dir), "-j", "1", "--format", "json")
    assert done.returncode == 0, done.stderr
    extract, meta, _end = scan(next(rank_dir.glob("*.pt.trace.json")))
    return tables.build_tables(extract, None, tables.base_ns_of(meta)), rank_dir / "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory) -> tuple[tables.RankTables, Path]:
    return _parsed(tmp_path_factory.mktemp("cuda"), _with_kernel_d(cuda_trace()), "host_1_20250101000000000")


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[tables.RankTables, Path]:
    trace = cpu_trace()
    trace["baseTimeNanoseconds"] = BASE_NS
    return _parsed(tmp_path_factory.mktemp("cpu"), trace, "host_1_20250101000000000")


def _texts(table: KernelTable | OperatorTable | OpStatTable, ids: np.ndarray) -> list:
    return [table.strings[i] if i >= 0 else None for i in ids.tolist()]


def _epoch_ns(offset_us: float) -> int:
    return BASE_NS + round((T0 + offset_us) * 1000)


def test_kernel_columns_by_hand(cuda: tuple[tables.RankTables, Path]) -> None:
    k = cuda[0].kernels
    # by start: kernel_a, kernel_b, the all-reduce (step 1), kernel_c, the receive, kernel_d (step 2)
    assert _texts(k, k.name) == [
        "kernel_a",
        "kernel_b",
        "ncclDevKernel_AllReduce_Sum_f32",
        "kernel_c",
        "ncclDevKernel_SendRecv",
        "kernel_d",
    ]
    assert k.step_numbers == (1, 2)
    assert [k.step_numbers[i] for i in k.step.tolist()] == [1, 1, 1, 2, 2, 2]
    assert k.task_id.tolist() == [11, 12, 13, 14, 15, 16]  # the correlation ids
    assert k.stream.tolist() == [7, 8, 20, 7, 20, 9] and k.stream_names is None
    assert k.model_id.tolist() == [4294967295] * 6  # eager mode
    # the launching operator's name (by External id), else the task's kind
    assert _texts(k, k.type) == [
        "aten::addmm",
        "aten::addmm",
        "record_param_comms",
        "aten::mul",
        "record_param_comms",
        "kernel",
    ]
    assert _texts(k, k.core) == ["CUDA kernel", "CUDA kernel", "NCCL", "CUDA kernel", "NCCL", "CUDA kernel"]
    # epoch nanoseconds, exact: kernel_d's 1600.567 µs keeps its 567 ns
    assert k.start_ns.tolist() == [_epoch_ns(t) for t in (100, 250, 350, 1100, 1300, 1600.567)]
    assert k.start_ns.dtype == np.int64
    assert k.duration_us.tolist() == [200.0, 150.0, 250.0, 100.0, 200.0, 12.3456]  # unrounded
    assert k.block_dim.tolist() == [8, 2, 0, 0, 0, 0]  # grid [4, 2, 1] and [2, 1, 1]
    assert k.mix_block_dim.tolist() == [0] * 6
    # addmm's Input Dims (both of its kernels); the others launched by operators without shapes
    assert [ascend_shapes(s) if s else None for s in _texts(k, k.input_shapes)] == [
        '"4;8,4;4,4"',
        '"4;8,4;4,4"',
        None,
        None,
        None,
        None,
    ]
    # kernel_c waits on stream 7 from 300 (kernel_a's end) to 1100; first tasks of a stream wait 0
    assert k.wait_us.tolist()[:4] == [0.0, 0.0, 0.0, 800.0] and k.wait_us[5] == 0.0


def test_wait_time_is_per_stream(cuda: tuple[tables.RankTables, Path]) -> None:
    k = cuda[0].kernels
    assert k.wait_us[4] == 1300.0 - 600.0  # the receive, after the all-reduce [350, 600) on stream 20


def test_kernel_details_csv_is_the_columns_formatted(cuda: tuple[tables.RankTables, Path]) -> None:
    k, out = cuda[0].kernels, cuda[1]
    lines = (out / "kernel_details.csv").read_text().splitlines()
    assert lines[0] == ",".join(KERNEL_HEADER) == ",".join(k.header)
    assert lines[1:] == k.csv_lines()
    cells = lines[6].split(",")  # kernel_d: the kind as its type, µs with ns decimals, 3-decimal duration
    assert cells[:12] == [
        "2",
        "4294967295",
        "16",
        "9",
        "kernel_d",
        "kernel",
        "CUDA kernel",
        f"{(BASE_NS // 1000) + 1_001_600}.567",
        "12.346",
        "0.0",
        "0",
        "0",
    ]


def test_wait_time_keeps_the_tables_nanoseconds(tmp_path: Path) -> None:
    """Wait Time(us) is written to 0.001 µs, as Duration(us) (helper-368: rounded to 0.01 µs it failed no
    test, the hand-made waits being whole µs): kernel_e starts 1700.1234 on kernel_d's stream 9, which ended
    at 1600.567 + 12.3456 = 1612.9126, so it waited 87.2108 µs, written 87.211."""
    trace = _with_kernel_d(cuda_trace())
    trace["traceEvents"].append(
        x("kernel_e", "kernel", 1700.1234, 1.0, pid=0, tid=9, correlation=17, stream=9, device=0)
    )
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    extract, meta, _end = scan(path)
    k = tables.build_tables(extract, None, tables.base_ns_of(meta)).kernels
    rows = list(csv.DictReader([",".join(k.header), *k.csv_lines()]))
    (row,) = [r for r in rows if r["Name"] == "kernel_e"]
    assert (row["Wait Time(us)"], row["Duration(us)"]) == ("87.211", "1.0")


def test_without_steps_the_table_has_no_step_column(tmp_path: Path) -> None:
    trace = _with_kernel_d(cuda_trace())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if not e["name"].startswith("ProfilerStep#")]
    path = tmp_path / "nosteps.json"
    path.write_text(json.dumps(trace))
    extract, meta, _end = scan(path)
    k = tables.build_tables(extract, None, tables.base_ns_of(meta)).kernels
    assert k.step_numbers is None and k.header == KERNEL_HEADER[1:]
    rows = list(csv.reader(k.csv_lines()))
    assert [len(row) for row in rows] == [len(KERNEL_HEADER) - 1] * 6
    assert rows[0][:4] == ["4294967295", "11", "7", "kernel_a"]


def _operator_rows(ops) -> dict[tuple[str | None, str | None], tuple[float, float, float, float]]:
    """(name, input shapes) -> (host self, host total, device self, device total) of each operator row."""
    return {
        (name, shapes): times
        for name, shapes, times in zip(
            _texts(ops, ops.name),
            _texts(ops, ops.input_shapes),
            zip(ops.host_self_us, ops.host_total_us, ops.device_self_us, ops.device_total_us, strict=True),
            strict=True,
        )
    }


def test_operator_columns_by_hand(cuda: tuple[tables.RankTables, Path]) -> None:
    ops, out = cuda[0].operators, cuda[1]
    rows = _operator_rows(ops)
    # linear [10, 110) holds addmm [20, 60); addmm launched kernel_a and kernel_b (350 µs); the two
    # record_param_comms launched the all-reduce (250) and the receive (200); mul launched kernel_c (100)
    assert rows == {
        ("aten::linear", "[[8,4],[4,4]]"): (60.0, 100.0, 0.0, 350.0),
        ("aten::addmm", "[[4],[8,4],[4,4]]"): (40.0, 40.0, 350.0, 350.0),
        ("record_param_comms", None): (20.0, 20.0, 450.0, 450.0),
        ("aten::mul", None): (20.0, 20.0, 100.0, 100.0),
    }
    assert list(ops.host_self_us) == sorted(ops.host_self_us, reverse=True)
    assert _texts(ops, ops.call_stack) == [None] * 4
    lines = (out / "operator_details.csv").read_text().splitlines()
    assert lines == [",".join(OPERATOR_HEADER), *ops.csv_lines()]


def test_op_statistic_columns_by_hand(cuda: tuple[tables.RankTables, Path]) -> None:
    stats, out = cuda[0].op_stats, cuda[1]
    totals = {"record_param_comms": 450.0, "aten::addmm": 350.0, "aten::mul": 100.0, "kernel": 12.346}
    assert _texts(stats, stats.op_type) == list(totals)  # by total time, largest first
    assert _texts(stats, stats.core) == ["NCCL", "CUDA kernel", "CUDA kernel", "CUDA kernel"]
    assert stats.count.tolist() == [2, 2, 1, 1]
    assert stats.total_us.tolist() == pytest.approx(list(totals.values()), abs=1e-9)
    assert stats.min_us.tolist() == pytest.approx([200.0, 150.0, 100.0, 12.346], abs=1e-9)
    assert stats.max_us.tolist() == pytest.approx([250.0, 200.0, 100.0, 12.346], abs=1e-9)
    assert stats.avg_us.tolist() == pytest.approx([225.0, 175.0, 100.0, 12.346], abs=1e-9)
    grand = sum(totals.values())
    assert stats.ratio_pct.tolist() == pytest.approx([t / grand * 100 for t in totals.values()], rel=1e-12)
    lines = (out / "op_statistic.csv").read_text().splitlines()
    assert lines == [",".join(OP_STAT_HEADER), *stats.csv_lines()]
    assert lines[1] == f"record_param_comms,NCCL,2,450.0,200.0,225.0,250.0,{round(450 / grand * 100, 2)}"


def test_cpu_capture_columns_by_hand(cpu: tuple[tables.RankTables, Path]) -> None:
    tabs, out = cpu
    k = tabs.kernels
    # the step thread's operators that do their own work (aten::mm: 190 of its 200 µs; the aten::empty
    # inside it is part of its task), aten::add, and the gloo span
    assert _texts(k, k.name) == _texts(k, k.type) == ["aten::mm", "gloo:all_reduce", "aten::add"]
    assert _texts(k, k.core) == ["CPU", "GLOO", "CPU"]
    assert k.stream_names is not None
    assert [k.stream_names[s] for s in k.stream.tolist()] == ["100", "101", "100"]  # the threads' ids
    assert k.start_ns.tolist() == [_epoch_ns(t) for t in (100, 250, 500)]
    assert k.duration_us.tolist() == [200.0, 300.0, 100.0]
    assert k.wait_us.tolist() == [0.0, 0.0, 500.0 - 300.0]  # aten::add after aten::mm ended
    assert k.model_id.tolist() == k.task_id.tolist() == k.mix_block_dim.tolist() == [-1] * 3  # N/A
    assert k.block_dim.tolist() == [0] * 3
    assert k.step_numbers == (7,) and k.step.tolist() == [0, 0, 0]
    lines = (out / "kernel_details.csv").read_text().splitlines()
    assert lines == [",".join(k.header), *k.csv_lines()]
    assert lines[2].split(",")[:7] == ["7", "N/A", "N/A", "101", "gloo:all_reduce", "gloo:all_reduce", "GLOO"]
    # op_statistic counts the operators by self time: mm 200 - 10 (empty), add 100, empty 10
    stats = tabs.op_stats
    assert _texts(stats, stats.op_type) == ["aten::mm", "aten::add", "aten::empty"]
    assert stats.total_us.tolist() == [190.0, 100.0, 10.0]
    assert _texts(stats, stats.core) == ["CPU"] * 3
    assert (out / "op_statistic.csv").read_text().splitlines()[1:] == stats.csv_lines()


def test_cpu_tasks_are_the_operators_that_do_their_own_work(tmp_path: Path) -> None:
    """helper-288: on a CPU capture kernel_details listed only operators that call no other, so aten::mm
    (which calls a 2 µs aten::resolve_conj) was no task: msprof-analyze's advisor and compare, which
    sum these rows, found 47 ms of computing in 183 ms where npuprof's step_trace_time.csv had 179 ms,
    and no matmul. An operator is a task when its own time is at least half its span; a wrapper of
    little own time (an autograd node, aten::copy_ around a longer aten::empty) is not, its operators are."""
    events = [
        x("ProfilerStep#7", "user_annotation", 0, 1000),
        x("AddmmBackward0", "cpu_op", 100, 300, **{"External id": 1}),  # own time 20 of 300
        x("aten::mm", "cpu_op", 110, 280, **{"External id": 2}),  # own time 278 of 280
        x("aten::resolve_conj", "cpu_op", 112, 2, **{"External id": 3}),
        x("aten::add", "cpu_op", 500, 100, **{"External id": 4}),
        x("aten::copy_", "cpu_op", 700, 100, **{"External id": 5}),  # own time 40 of 100
        x("aten::empty", "cpu_op", 710, 60, **{"External id": 6}),
    ]
    trace = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": BASE_NS}
    k = _parsed(tmp_path, trace, "host_1_20250101000000000")[0].kernels
    assert _texts(k, k.name) == ["aten::mm", "aten::add", "aten::empty"]
    assert k.start_ns.tolist() == [_epoch_ns(t) for t in (110, 500, 710)]
    assert k.duration_us.tolist() == [280.0, 100.0, 60.0]


def _repeats_trace(device: bool) -> dict:
    """Operators that run one of their own name as their only child, as torch's ``aten::sum`` runs
    ``aten::sum.dim_IntList`` (both named ``aten::sum`` in the trace). Step [0, 1000):

    aten::sum [10, 110) holds only aten::sum [20, 100), which launched a 50 µs kernel; a lone aten::sum
    [300, 330) launched a 20 µs kernel; aten::mean [600, 650) [[2,2]] holds only aten::mean [610, 640)
    [[2,2],[]] (other shapes); aten::add [500, 540) holds aten::add [505, 515) and aten::empty [520, 525):
    two children, so two calls of aten::add."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}},
        x("ProfilerStep#1", "user_annotation", 0, 1000),
        x("aten::sum", "cpu_op", 10, 100, **{"External id": 1, "Input Dims": [[8, 4]]}),
        x("aten::sum", "cpu_op", 20, 80, **{"External id": 2, "Input Dims": [[8, 4]]}),
        x("aten::sum", "cpu_op", 300, 30, **{"External id": 3, "Input Dims": [[8, 4]]}),
        x("aten::add", "cpu_op", 500, 40, **{"External id": 4, "Input Dims": [[4], [4]]}),
        x("aten::add", "cpu_op", 505, 10, **{"External id": 5, "Input Dims": [[4]]}),
        x("aten::empty", "cpu_op", 520, 5, **{"External id": 6}),
        x("aten::mean", "cpu_op", 600, 50, **{"External id": 7, "Input Dims": [[2, 2]]}),
        x("aten::mean", "cpu_op", 610, 30, **{"External id": 8, "Input Dims": [[2, 2], []]}),
    ]
    if device:
        ev += [
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
            x("cudaLaunchKernel", "cuda_runtime", 30, 5, correlation=11, **{"External id": 2}),
            x("cudaLaunchKernel", "cuda_runtime", 305, 5, correlation=12, **{"External id": 3}),
            x("sum_kernel", "kernel", 200, 50, pid=0, tid=7, correlation=11, stream=7, device=0,
              **{"External id": 2}),
            x("sum_kernel", "kernel", 400, 20, pid=0, tid=7, correlation=12, stream=7, device=0,
              **{"External id": 3}),
        ]  # fmt: skip
    return {"traceEvents": ev, "baseTimeNanoseconds": BASE_NS}


def _tables_of(tmp_path: Path, trace: dict) -> tables.RankTables:
    path = tmp_path / "host.1.pt.trace.json"
    path.write_text(json.dumps(trace))
    extract, meta, _end = scan(path)
    return tables.build_tables(extract, None, tables.base_ns_of(meta))


def test_operator_details_counts_an_inner_repeat_of_its_name_once(tmp_path: Path) -> None:
    """helper-145: aten::sum running aten::sum (its only child) was two calls in operator_details: the
    row's Host Total summed both spans (210 µs for 130 µs of calls) and its Device Total the kernel twice.
    As torch's key_averages (EventList._remove_dup_nodes) and analyse's top operators: one call, of the
    outer operator's name, shapes and stack, its totals the outer one's and its self times both."""
    ops = _tables_of(tmp_path, _repeats_trace(device=True)).operators
    rows = _operator_rows(ops)
    assert rows == {
        # self 20 + 80 + 30, total 100 + 30; the kernels (50 + 20) once
        ("aten::sum", "[[8,4]]"): (130.0, 130.0, 70.0, 70.0),
        ("aten::add", "[[4],[4]]"): (25.0, 40.0, 0.0, 0.0),
        ("aten::add", "[[4]]"): (10.0, 10.0, 0.0, 0.0),
        ("aten::empty", None): (5.0, 5.0, 0.0, 0.0),
        ("aten::mean", "[[2,2]]"): (50.0, 50.0, 0.0, 0.0),  # the inner one's shapes are no call's
    }


def test_cpu_op_statistic_counts_an_inner_repeat_of_its_name_once(tmp_path: Path) -> None:
    """helper-145: on a CPU capture op_statistic counted aten::sum running aten::sum as two calls (Count 3
    for 2 calls, Min 20 and Max 80: neither call's self time). One call now, its self time both spans'."""
    stats = _tables_of(tmp_path, _repeats_trace(device=False)).op_stats
    got = {
        name: (count, total, low, avg, high)
        for name, count, total, low, avg, high in zip(
            _texts(stats, stats.op_type),
            stats.count.tolist(),
            stats.total_us.tolist(),
            stats.min_us.tolist(),
            stats.avg_us.tolist(),
            stats.max_us.tolist(),
            strict=True,
        )
    }
    assert got == {
        "aten::sum": (2, 130.0, 30.0, 65.0, 100.0),  # calls of self 20 + 80 and 30
        "aten::mean": (1, 50.0, 50.0, 50.0, 50.0),
        "aten::add": (2, 35.0, 10.0, 17.5, 25.0),
        "aten::empty": (1, 5.0, 5.0, 5.0, 5.0),
    }
    assert _texts(stats, stats.op_type) == ["aten::sum", "aten::mean", "aten::add", "aten::empty"]


def test_input_dims_nested_too_deeply_give_no_traceback() -> None:
    """Input Dims of 600 nested lists (a corrupt trace's, read by the decoder on every Python; on 3.13 it
    reads ~10,000 levels) made `npuprof analyse` fail with 'RecursionError' (its cell walked them, two
    frames a level); a list where a dimension belongs is '?' now, and text nested past the decoder's
    limit has no shapes. A TensorList is written as before."""
    assert ascend_shapes("[" * 600 + "]" * 600) == '"?"'
    assert ascend_shapes("[" * 50_000 + "]" * 50_000) == "N/A"
    assert ascend_shapes("[[4],[[8,4],[]],[]]") == '"4;8,4|;"'
    assert ascend_shapes('[[4],[[8,[1]]],{"a":1}]') == '"4;8,?;?"'


def test_a_carriage_return_in_a_name_keeps_each_csv_row_one_row(tmp_path: Path) -> None:
    """An operator and kernel named with a bare "\\r" (someone's trace): the tables wrote it unquoted (the
    writer quoted a "\\n" alone), and Python's csv reader cut the row there, its cells spread over three
    rows. Quoted now: every row as wide as the header, the name read back whole."""
    from npuprof.analysis.parse import parse_rank_dir

    name = "aten::real\rFAKE"
    trace = cuda_trace()
    trace["traceEvents"] += [
        x(name, "cpu_op", 1080, 10, **{"External id": 6}),
        x("cudaLaunchKernel", "cuda_runtime", 1082, 2, correlation=17, **{"External id": 6}),
        x(name, "kernel", 1800, 5, pid=0, tid=7, correlation=17, stream=7, device=0, **{"External id": 6}),
    ]
    rank_dir = write_rank_dir(tmp_path, trace)
    assert parse_rank_dir(rank_dir, workers=1).ok
    for table, column in (
        ("kernel_details.csv", "Name"),
        ("operator_details.csv", "Name"),
        ("op_statistic.csv", "OP Type"),
    ):
        with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / table, newline="", encoding="utf-8") as handle:
            header, *rows = list(csv.reader(handle))
        assert [len(row) for row in rows] == [len(header)] * len(rows), table
        assert name in [row[header.index(column)] for row in rows], table
    # analyse's --format csv writes its rows (a rank dir's path among them) the same way
    from npuprof.analysis.cells import csv_line

    assert list(csv.reader([csv_line(["res/a\rb_ascend_pt", 1, None, 2.5])])) == [
        ["res/a\rb_ascend_pt", "1", "", "2.5"]
    ]


def test_times_past_an_int64_of_nanoseconds_read_as_0_never_wrapped() -> None:
    """helper-243: ns_of_texts summed a time of 16 digits of µs into an int64 that wrapped past 2**63 ns:
    "9999999999999999.999" was -8446744073709551617 ns (the year 1702), where a longer text past it was 0.
    Its callers bound their times; the function now holds on any text: one past an int64 of ns is 0, as one
    of no number is. Expected values from Decimal, here."""
    from decimal import ROUND_HALF_UP, Decimal

    from npuprof.analysis.cells import ns_of_texts

    def by_hand(text: bytes) -> int:
        ns = int((Decimal(text.strip(b'"').decode()) * 1000).to_integral_value(ROUND_HALF_UP))
        return ns if -(2**63) <= ns < 2**63 else 0

    texts = [
        b"9999999999999999.999",
        b"-9999999999999999.999",
        b"9223372036854775.807",  # 2**63 - 1 ns: the last that fits
        b"9223372036854775.808",
        b"-9223372036854775.808",  # -2**63 ns
        b"-9223372036854775.809",
        b'"9300000000000000.000"',  # torch_npu's string form
        b"9000000000000000.5",
        b"1704161511420306.4915",  # a 4th decimal rounds half up
        b"5298017518195.893",
        b"-1.0005",  # half away from 0, as Decimal's ROUND_HALF_UP (helper-368: -999 ns failed no test)
        b"-2.0004",
        b"7.25",  # fewer than three decimals
    ]
    assert ns_of_texts(texts).tolist() == [by_hand(t) for t in texts]
    assert by_hand(texts[0]) == 0 and by_hand(texts[2]) == 2**63 - 1  # the test's own bound holds
