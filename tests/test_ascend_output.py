"""`npuprof analyse` on rank dirs torch_npu parsed itself: the report comes from its tables (real
kernel_details.csv files of two releases, tests/fixtures/ascend-real, see SOURCE.md there), nothing is
re-parsed, and torch_npu is not needed. Expected values are computed here from the files, by hand."""

from __future__ import annotations

import csv
import json
import math
import shutil
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from conftest import clean_env

REAL = Path(__file__).resolve().parent / "fixtures" / "ascend-real"
STEP_HEADER = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
]


def _kernels(name: str) -> list[dict[str, str]]:
    with open(REAL / name, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _rank_dir(root: Path, rank: int, kernels: str, steps: list[list[object]], stamp: int = 123) -> Path:
    """A rank dir as torch_npu leaves it after parsing (data simplified: no FRAMEWORK/ left)."""
    d = root / f"node{rank}_{4000 + rank}_20240101120000{stamp:03d}_ascend_pt"
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text(json.dumps({"config": {}, "rank_id": rank}))
    shutil.copyfile(REAL / kernels, out / "kernel_details.csv")
    with open(out / "step_trace_time.csv", "w", newline="") as f:
        csv.writer(f).writerows([STEP_HEADER, *steps])
    return d


def _step(
    step: int | str, computing: float, not_overlapped: float, free: float, preparing: float
) -> list[object]:
    overlapped, bubble = 10.0, 0.0
    stage = computing + not_overlapped + free - bubble
    comm = not_overlapped + overlapped
    return [
        0,
        step,
        computing,
        not_overlapped,
        overlapped,
        comm,
        free,
        stage,
        bubble,
        not_overlapped,
        preparing,
    ]


OPERATOR_TIMES_HEADER = [
    "Host Self Duration(us)",
    "Host Total Duration(us)",
    "Device Self Duration(us)",
    "Device Total Duration(us)",
    "Device Self Duration With AICore(us)",
    "Device Total Duration With AICore(us)",
]


def _report(path: Path, *extra: str) -> dict:
    result = npuprof("analyse", str(path), "--format", "json", *extra, env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Two ranks of the 2023 release's kernels (step 1), the second 300 µs later to start and slower."""
    root = tmp_path_factory.mktemp("torch_npu_cluster")
    _rank_dir(root, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    _rank_dir(root, 1, "kernel_details_2023.csv", [_step(1, 5200.0, 300.0, 1400.0, -287.5)])
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    report = _report(root)
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before, "torch_npu's files were changed or others were added: nothing may be re-parsed"
    return root, report


def test_steps_come_from_step_trace_time(cluster: tuple[Path, dict]) -> None:
    _root, report = cluster
    assert not report["problems"]
    r0, r1 = report["ranks"]
    assert (r0["rank"], r1["rank"], r0["device"]) == (0, 1, "NPU")
    (s0,) = r0["steps"]
    assert s0["step"] == 1
    assert s0["duration_us"] == pytest.approx(5000.0 + 100.0 + 400.0)
    assert (s0["computing_us"], s0["comm_not_overlapped_us"], s0["overlapped_us"]) == (5000.0, 100.0, 10.0)
    assert (s0["communication_us"], s0["free_us"], s0["preparing_us"]) == (110.0, 400.0, 12.5)
    first_task = min(float(k["Start Time(us)"]) for k in _kernels("kernel_details_2023.csv"))
    assert s0["start_us"] == pytest.approx(first_task - 12.5, abs=1e-3)
    assert any("parsed by torch_npu" in w for w in r0["warnings"])
    assert "data_us" not in s0  # torch_npu's tables do not carry it: not known


def test_ranks_parsed_by_torch_npu_are_said_once_not_warned_each(cluster: tuple[Path, dict]) -> None:
    root, _report = cluster
    result = npuprof("analyse", str(root), env=clean_env(COLUMNS="200"))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "parsed by torch_npu" in line]
    assert lines == [
        "npuprof analyse: note: 2 rank dir(s) parsed by torch_npu: read from their tables in "
        "ASCEND_PROFILER_OUTPUT/, not re-parsed"
    ]


def test_top_kernels_are_summed_by_name(cluster: tuple[Path, dict]) -> None:
    _root, report = cluster
    totals: dict[str, list[float]] = {}
    for k in _kernels("kernel_details_2023.csv"):
        totals.setdefault(k["Name"], []).append(float(k["Duration(us)"]))
    expected = sorted(totals.items(), key=lambda kv: -sum(kv[1]))[:5]
    got = report["ranks"][0]["top_kernels"][:5]
    assert [k["name"] for k in got] == [name for name, _ in expected]
    for k, (_name, durations) in zip(got, expected, strict=True):
        assert k["count"] == len(durations)
        assert k["total_us"] == pytest.approx(sum(durations), abs=1e-3)


def test_cross_rank_table_slowest_rank_and_start_skew(cluster: tuple[Path, dict]) -> None:
    _root, report = cluster
    cross = report["cross_rank"]
    (step,) = cross["steps"]
    assert step["ranks"] == {"0": 5500.0, "1": 6900.0}
    assert cross["slowest"]["rank"] == 1
    # 2 ranks, 11% above the median (6900 vs 6200), but in one step: too few to call it an outlier (5)
    assert cross["slowest"]["outlier"] is False
    (skew,) = cross["start_skew"]
    # same first task, preparing 12.5 vs -287.5: rank 1's step started 300 µs later
    assert (skew["earliest_rank"], skew["latest_rank"]) == (0, 1)
    assert skew["skew_us"] == pytest.approx(300.0, abs=1e-3)


def test_csv_format_lists_each_rank_and_step(cluster: tuple[Path, dict]) -> None:
    root, _report = cluster
    result = npuprof("analyse", str(root), "--format", "csv", env=clean_env())
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(result.stdout.splitlines()))
    assert [(r["rank"], r["step"]) for r in rows] == [("0", "1"), ("1", "1")]
    assert [float(r["duration_us"]) for r in rows] == [5500.0, 6900.0]
    # torch_npu's tables carry no DataLoader time: not known, an empty cell rather than a 0
    assert [(r["data_us"], r["data_pct"]) for r in rows] == [("", ""), ("", "")]


def test_2025_release_with_a_step_only_the_trace_view_knows(tmp_path: Path) -> None:
    """The 2025 header (OP State, HF32 Eligible; a tab inside the quoted start times); step 20 ran no task,
    its start comes from trace_view.json's ProfilerStep#20 (string epoch ts, torch_npu's bare array)."""
    d = _rank_dir(
        tmp_path, 3, "kernel_details_2025.csv", [_step(19, 800.0, 0.0, 50.0, 4.0), _step(20, 1.0, 0, 9, 0)]
    )
    (d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text(
        json.dumps(
            [
                {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Python"}},
                {
                    "ph": "X",
                    "name": "ProfilerStep#20",
                    "pid": 7,
                    "tid": 1,
                    "ts": "1736413971600000.250",
                    "dur": 9,
                },
            ]
        )
    )
    report = _report(tmp_path)
    s19, s20 = report["ranks"][0]["steps"]
    kernels = _kernels("kernel_details_2025.csv")
    first = min(float(k["Start Time(us)"].strip()) for k in kernels)
    assert s19["start_us"] == pytest.approx(first - 4.0, abs=1e-3)
    assert s20["start_us"] == pytest.approx(1736413971600000.25, abs=1e-3)
    top = report["ranks"][0]["top_kernels"][0]
    by_name: dict[str, float] = {}
    for k in kernels:
        by_name[k["Name"]] = by_name.get(k["Name"], 0.0) + float(k["Duration(us)"])
    name, total = max(by_name.items(), key=lambda kv: kv[1])
    assert (top["name"], top["total_us"]) == (name, pytest.approx(total, abs=1e-3))


def test_communication_and_memory_tables(tmp_path: Path) -> None:
    """communication.json in torch_npu's per-rank form (SDMA already sums HCCS and PCIE) and
    memory_record.csv with the allocator's (PTA) rows beside CANN's (GE)."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"

    def op(elapse_ms: float, hccs: float, pcie: float, rdma: float) -> dict:
        link = {
            "Transit Time(ms)": 0.1,
            "Bandwidth(GB/s)": 1.0,
            "Large Packet Ratio": 0,
            "Size Distribution": {},
        }
        return {
            "Communication Time Info": {"Start Timestamp(us)": 1.0, "Elapse Time(ms)": elapse_ms},
            "Communication Bandwidth Info": {
                "RDMA": {**link, "Transit Size(MB)": rdma},
                "HCCS": {**link, "Transit Size(MB)": hccs},
                "PCIE": {**link, "Transit Size(MB)": pcie},
                "SDMA": {**link, "Transit Size(MB)": hccs + pcie},
            },
        }

    comm = {
        "step1": {
            "collective": {
                "hcom_allReduce__1_0@123": op(0.25, 2.0, 1.0, 0.5),
                "Total Op Info": op(0.25, 2.0, 1.0, 0.5),
            },
            "p2p": {"hcom_send__1_1@124": op(0.5, 4.0, 0.0, 0.0)},
        }
    }
    (out / "communication.json").write_text(json.dumps(comm))
    first = min(float(k["Start Time(us)"]) for k in _kernels("kernel_details_2023.csv"))
    t = first - 12.5  # the step's start
    with open(out / "memory_record.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)"]
        )
        w.writerows(
            [
                ["PTA", t - 10, 300.0, 320.0, 300.0],  # before the step: what it starts with ...
                ["PTA", t + 1, 100.0, 128.0, 100.0],  # ... until it frees most of it
                ["GE", t + 2, 900.0, 900.0, 900.0],
                ["PTA", t + 3, 250.5, 256.0, 250.5],
                ["PTA", t + 6000, 999.0, 1024.0, 999.0],  # after the step
            ]
        )
    rank = _report(tmp_path)["ranks"][0]
    assert rank["communication"]["operators"] == 2  # "Total Op Info" is an aggregate, not an operation
    assert rank["communication"]["time_us"] == pytest.approx(750.0)
    assert rank["communication"]["size_mb"] == pytest.approx(3.5 + 4.0)
    # the step started with 300 MB allocated (320 reserved), the most it held
    assert (rank["steps"][0]["memory_peak_mb"], rank["steps"][0]["memory_peak_reserved_mb"]) == (300.0, 320.0)
    # the rank's pair is over the steps reported, both of them (the reserved peak was the capture's, 1024)
    assert (rank["memory_peak_mb"], rank["memory_peak_reserved_mb"]) == (300.0, 320.0)


def test_a_steps_memory_window_ends_at_its_first_task_plus_its_duration(tmp_path: Path) -> None:
    """The memory window of a torch_npu step runs from its host start (first task less Preparing) to the end
    of torch_npu's window, its first task plus its duration (docs/formats.md): a record in the last
    Preparing-long stretch of that window counts; one at its end does not (helper-368: a window ending at
    the host start plus the duration, Preparing too early, failed no test)."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    first = min(float(k["Start Time(us)"]) for k in _kernels("kernel_details_2023.csv"))
    end = first + 5000.0 + 100.0 + 400.0  # the first task plus Computing + Not Overlapped + Free
    with open(d / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)"])
        w.writerows(
            [
                ["PTA", first - 100.0, 10.0, 16.0],  # what the step starts with
                ["PTA", end - 5.0, 700.0, 768.0],  # inside the window, after host start + duration
                ["PTA", end, 900.0, 1024.0],  # the window's end: the next step's
            ]
        )
    (step,) = _report(tmp_path)["ranks"][0]["steps"]
    assert (step["memory_peak_mb"], step["memory_peak_reserved_mb"]) == (700.0, 768.0)


def test_sdma_holds_the_sio_link_too(tmp_path: Path) -> None:
    """SDMA sums the on-chip links HCCS, PCIE and SIO (ascend_output.SDMA_PARTS): an operation of all
    three beside RDMA moved SDMA's MB and RDMA's, SIO's not a second time (helper-368: SIO counted again
    beside SDMA failed no test)."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    sizes = {"HCCS": 2.0, "PCIE": 1.0, "SIO": 0.5, "RDMA": 0.25}
    links = {name: {"Transit Size(MB)": mb} for name, mb in sizes.items()}
    links["SDMA"] = {"Transit Size(MB)": 2.0 + 1.0 + 0.5}
    op = {"Communication Time Info": {"Elapse Time(ms)": 1.0}, "Communication Bandwidth Info": links}
    comm = {"step1": {"collective": {"hcom_allReduce__1_0@1": op}, "p2p": {}}}
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(comm))
    rank = _report(tmp_path)["ranks"][0]
    assert rank["communication"]["size_mb"] == pytest.approx(3.5 + 0.25)


def test_a_capture_without_steps_starts_at_its_first_task_less_preparing(tmp_path: Path) -> None:
    """A capture without steps: kernel_details.csv without Step Id, step_trace_time.csv's one row of an
    empty Step; that row's start is its first task less its Preparing, as a step's (helper-368: left
    unknown, start skew lost, it failed no test)."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step("", 5000.0, 100.0, 400.0, 12.5)])
    rows = _kernels("kernel_details_2023.csv")
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        w = csv.DictWriter(f, [c for c in rows[0] if c != "Step Id"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    rank = _report(tmp_path)["ranks"][0]
    (step,) = rank["steps"]
    first = min(float(k["Start Time(us)"]) for k in rows)
    assert (step["step"], step["start_us"]) == (None, pytest.approx(first - 12.5, abs=1e-3))
    assert not any("no start time" in w for w in rank["warnings"])


def test_a_damaged_step_table_is_named_and_the_other_ranks_go_on(tmp_path: Path) -> None:
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    bad = _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [], stamp=456)
    (bad / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_text("")
    report = _report(tmp_path)
    assert [r["rank"] for r in report["ranks"]] == [0]
    (problem,) = report["problems"]
    assert problem["rank_dir"].endswith(bad.name) and "step_trace_time.csv" in problem["reason"]


def test_steps_filter_torch_npus_communication(tmp_path: Path) -> None:
    """helper-104: `--steps 2` summed both steps of communication.json (keyed step1, step2); the operators'
    table has no step column (said), communication.json has one."""
    d = _rank_dir(
        tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0), _step(2, 50.0, 1.0, 4.0, 1.0)]
    )

    def op(ms: float, mb: float) -> dict:
        return {
            "Communication Time Info": {"Elapse Time(ms)": ms},
            "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": mb}},
        }

    comm = {
        "step1": {"collective": {"hcom_allReduce__1@g": op(1.5, 1.0)}, "p2p": {}},
        "step2": {
            "collective": {"hcom_allReduce__2@g": op(2.0, 1.5)},
            "p2p": {"hcom_send__3@g": op(0.5, 0.5)},
        },
    }
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(comm))
    whole = _report(tmp_path)["ranks"][0]["communication"]
    assert whole == {"operators": 3, "time_us": 4000.0, "size_mb": 3.0}
    (rank,) = _report(tmp_path, "--steps", "2")["ranks"]
    assert rank["communication"] == {"operators": 2, "time_us": 2500.0, "size_mb": 2.0}
    assert not any("communication are of the whole capture" in w for w in rank["warnings"])


def test_an_empty_operator_table_and_a_communication_file_of_another_form_are_named(tmp_path: Path) -> None:
    """helper-104: a header-only operator_details.csv gave no top operators and a communication.json that
    is a list gave no communication, both without a word (a missing file was named)."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    (out / "operator_details.csv").write_text("Name,Input Shapes,Call Stack,Host Self Duration(us)\n")
    (out / "communication.json").write_text("[]")
    (rank,) = _report(tmp_path)["ranks"]
    assert (
        rank["top_operators"] == [] and "no operator_details.csv rows: no top operators" in rank["warnings"]
    )
    assert any("communication.json is not torch_npu's form" in w for w in rank["warnings"]), rank["warnings"]


def test_communication_files_of_unforeseen_forms_cost_their_rank_a_warning_not_the_report(
    tmp_path: Path,
) -> None:
    """helper-120: an operation whose "Communication Time Info" was a list ended analyse in a traceback (the
    other rank lost too); msprof-analyze's cluster_communication.json put in as a rank's file (groups, then
    "step") read as no communication without a word."""
    step = [_step(1, 50.0, 1.0, 4.0, 1.0)]
    listed = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", step)
    (listed / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(
        json.dumps({"step1": {"collective": {"hcom_allReduce__1_0@1": {"Communication Time Info": [1, 2]}}}})
    )
    cluster_form = _rank_dir(tmp_path, 1, "kernel_details_2023.csv", step)
    (cluster_form / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(
        json.dumps({"(0, 1)": {"step": {"hcom_allReduce__1_0@1": {"0": {"Communication Time Info": {}}}}}})
    )
    by_rank = {r["rank"]: r for r in _report(tmp_path)["ranks"]}
    assert by_rank[0]["communication"] == {"operators": 1, "time_us": 0.0, "size_mb": 0.0}
    assert (
        "communication.json: 1 operation(s) have no 'Elapse Time(ms)' that is a duration (no number"
        in " ".join(by_rank[0]["warnings"])
    )
    assert by_rank[1]["communication"] == {"operators": 0}
    assert "communication.json is not torch_npu's form (no step with 'collective' or 'p2p'" in " ".join(
        by_rank[1]["warnings"]
    )


def test_operator_rows_with_a_damaged_time_are_named(tmp_path: Path) -> None:
    """helper-120: operator_details.csv cells "abc", "-5" and "1e400" counted as 0 without a word (the
    kernel table's were named)."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    header = ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER]
    rows = [
        ["aten::mm", '"4,4"', "a.py(1): f", 100.5, 200, 50, 50, 0, 0],
        ["aten::mm", '"8,8"', "", "abc", "N/A", -5, "1e400", 0, 0],  # damaged: self, device self, total
        ["aten::add", "", "", 99, 99, 1, 1, 0, 0],
        ["aten::add", "", "", 1, 2, "N/A", "", 0, 0],  # torch_npu's own "no value": no damage
    ]
    with open(d / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv", "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    (rank,) = _report(tmp_path)["ranks"]
    by_name = {op["name"]: op for op in rank["top_operators"]}
    assert (by_name["aten::mm"]["count"], by_name["aten::mm"]["self_us"]) == (2, 100.5)
    assert (by_name["aten::mm"]["total_us"], by_name["aten::mm"]["device_us"]) == (200.0, 50.0)
    assert (by_name["aten::add"]["self_us"], by_name["aten::add"]["device_us"]) == (100.0, 1.0)
    assert "operator_details.csv: 1 row(s) have a time that is no duration" in " ".join(rank["warnings"])


def test_tables_that_are_symbolic_links_are_not_followed(tmp_path: Path) -> None:
    """helper-104: torch_npu's tables were opened through links: one to a file out of the tree was read
    (/etc/passwd as 23 operators named ""). Every result file is opened without following a link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copyfile(REAL / "kernel_details_2023.csv", outside / "kernels.csv")
    (outside / "secret.csv").write_text("Name,Host Self Duration(us)\nsecret,1\n")
    d = _rank_dir(tmp_path / "run", 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    (out / "operator_details.csv").symlink_to(outside / "secret.csv")
    result = npuprof("analyse", str(tmp_path / "run"), "--format", "json", env=clean_env())
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert all(op["name"] != "secret" for op in rank["top_operators"]), rank["top_operators"]
    assert "operator_details.csv: a symbolic link: not followed" in " ".join(result.stderr.split())

    (out / "kernel_details.csv").unlink()
    (out / "kernel_details.csv").symlink_to(outside / "kernels.csv")
    result = npuprof("analyse", str(tmp_path / "run"), "--format", "json", env=clean_env())
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert rank["top_kernels"] == [] and [s["step"] for s in rank["steps"]] == [1]
    assert "kernel_details.csv is a symbolic link: not followed: no top kernels" in rank["warnings"]
    assert not any("no kernel_details.csv rows" in w for w in rank["warnings"])


def _cut_after_cells(line: bytes, cells: int) -> bytes:
    """``line`` up to (without) the comma that ends its ``cells``-th cell, quotes respected."""
    quoted, seen = False, 0
    for index, char in enumerate(line):
        if char == ord('"'):
            quoted = not quoted
        elif char == ord(",") and not quoted:
            seen += 1
            if seen == cells:
                return line[:index]
    raise AssertionError("the line has fewer cells")


def test_a_kernel_table_cut_short_is_named(tmp_path: Path) -> None:
    """helper-104: a kernel_details.csv cut by a copy (its last row short) was read without a word. A
    last row without a line break is no sign (helper-120: the real 2025 table ends so, every row whole)."""
    data = (REAL / "kernel_details_2023.csv").read_bytes()
    body = data.rstrip(b"\n")
    last_start = body.rfind(b"\n") + 1
    header = next(csv.reader([data.split(b"\n", 1)[0].decode("utf-8-sig")]))
    assert len(header) > 10
    d = _rank_dir(tmp_path / "cut", 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_bytes(
        body[:last_start] + _cut_after_cells(body[last_start:], 10)
    )
    result = npuprof("analyse", str(d), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    why = "1 row(s) with fewer cells than its header"
    assert f"kernel_details.csv looks cut short ({why})" in " ".join(rank["warnings"]), rank["warnings"]
    assert not (REAL / "kernel_details_2025.csv").read_bytes().endswith(b"\n")  # the real form tried below
    for name in ("kernel_details_2023.csv", "kernel_details_2025.csv"):
        whole = _rank_dir(tmp_path / name, 0, name, [_step(1, 5000.0, 100.0, 400.0, 12.5)])
        result = npuprof("analyse", str(whole), "--format", "json", env=clean_env())
        (rank,) = json.loads(result.stdout)["ranks"]
        assert not any("cut short" in w for w in rank["warnings"]), (name, rank["warnings"])


def test_tables_of_another_form_are_named_not_read_as_zeros(tmp_path: Path) -> None:
    """A step table written with ";" (a spreadsheet's export) gave a step "None" of 0 ms; a kernel table
    without its Name column summed all 591 kernels under the name ""; repeated step rows passed unsaid."""
    semicolon = _rank_dir(tmp_path / "a", 0, "kernel_details_2023.csv", [])
    with open(semicolon / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", "w", newline="") as f:
        csv.writer(f, delimiter=";").writerows([STEP_HEADER, _step(1, 5000.0, 100.0, 400.0, 12.5)])
    result = npuprof("analyse", str(semicolon), "--format", "json", env=clean_env())
    assert result.returncode == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert "step_trace_time.csv has no column 'Step', 'Computing', 'Free'" in problem["reason"]

    # msprof-analyze's table across ranks (the real one, unchanged) put in a rank dir as its step table
    cluster_table = _rank_dir(tmp_path / "c", 0, "kernel_details_2023.csv", [])
    shutil.copyfile(
        REAL / "cluster_step_trace_time.csv", cluster_table / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    )
    result = npuprof("analyse", str(cluster_table), "--format", "json", env=clean_env())
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (problem,) = json.loads(result.stdout)["problems"]
    assert "is msprof-analyze's cluster_step_trace_time.csv" in problem["reason"]

    nameless = _rank_dir(tmp_path / "b", 0, "kernel_details_2023.csv", [_step(1, 5.0, 1.0, 4.0, 1.0)] * 2)
    rows = _kernels("kernel_details_2023.csv")
    with open(nameless / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, [k for k in rows[0] if k != "Name"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    result = npuprof("analyse", str(nameless), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert rank["top_kernels"] == []
    text = " ".join(result.stderr.split())
    assert "kernel_details.csv has no column 'Name': its kernels are not read" in text
    assert "step_trace_time.csv has more than one row for step(s) [1]" in text


def test_a_torch_npu_parse_that_failed_is_not_taken_for_a_parsed_dir(tmp_path: Path) -> None:
    """helper-122: torch_npu writes analyse.done whatever its parse gives (since 2026-01); a rank dir of raw
    data whose parse failed, holding only that marker, read as parsed ("cached", then "no readable
    npuprof_summary.json ... parsed by another tool?")."""
    d = tmp_path / "node_4242_20260101120000123_ascend_pt"
    (d / "FRAMEWORK").mkdir(parents=True)
    (d / "PROF_000001_20260101120000123_ABCDEFGHIJKLMNOP" / "device_0" / "data").mkdir(parents=True)
    (d / "profiler_info_0.json").write_text(json.dumps({"config": {}, "rank_id": 0}))
    (d / "ASCEND_PROFILER_OUTPUT").mkdir()
    (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").write_text("")
    result = npuprof("analyse", str(tmp_path), "--format", "json", env=clean_env())
    (problem,) = json.loads(result.stdout)["problems"]
    assert result.returncode == 1 and problem["status"] == "needs_torch_npu", problem
    standin = Path(__file__).resolve().parent / "fake_torch_npu"
    env = clean_env(PYTHONPATH=str(standin), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    result = npuprof("analyse", str(tmp_path), "--format", "json", env=env)
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["status"] == "failed", problem
    assert "torch_npu's parser wrote none of its tables into ASCEND_PROFILER_OUTPUT/" in problem["reason"]
    # its raw data simplified away too (helper-123: "--force", then "no trace"): said there is nothing left
    for raw in [d / "FRAMEWORK", *d.glob("PROF_*")]:
        shutil.rmtree(raw, ignore_errors=True)
    for forced in ([], ["--force"]):
        result = npuprof("analyse", str(tmp_path), "--format", "json", *forced, env=clean_env())
        (problem,) = json.loads(result.stdout)["problems"]
        assert (
            "torch_npu's parse left none of its tables in ASCEND_PROFILER_OUTPUT/ and no raw data"
            in problem["reason"]
        ), (forced, problem)


def test_npuprof_run_through_torch_npu_marks_its_parse_done(tmp_path: Path) -> None:
    """A run through the torch_npu stand-in (it parses in the run, as torch_npu does): the dir is marked
    done, and `npuprof analyse` without torch_npu reads its tables instead of asking for torch_npu."""
    standin = Path(__file__).resolve().parent / "fake_torch_npu"
    script = tmp_path / "npu_train.py"
    script.write_text(
        "import torch, torch_npu\n"
        "m = torch.nn.Linear(8, 8)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(8):\n"
        "    opt.zero_grad()\n"
        "    m(torch.randn(4, 8)).sum().backward()\n"
        "    opt.step()\n"
        # its end is not what is tested: torch's objects out of the exit's last collection (~0.5 CPU-s;
        # npuprof's exit work, in atexit, runs before it)
        "import gc; gc.freeze()\n"
    )
    out = tmp_path / "out"
    env = clean_env(PYTHONPATH=str(standin), TORCH_DEVICE_BACKEND_AUTOLOAD="0", RANK="0")
    result = npuprof(
        "run",
        "-o",
        str(out),
        "--skip-first",
        "2",
        "--warmup",
        "1",
        "--active",
        "2",
        "--",
        sys.executable,
        str(script),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    (rank_dir,) = out.glob("*_ascend_pt")
    assert (rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()
    report = _report(out)
    assert not report["problems"], report["problems"]
    (rank,) = report["ranks"]
    assert rank["device"] == "NPU"
    with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [s["step"] for s in rank["steps"]] == [int(r["Step"]) for r in rows] == [3, 4]
    for s, r in zip(rank["steps"], rows, strict=True):
        parts = float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"])
        assert math.isclose(s["duration_us"], parts, abs_tol=1e-3)


@pytest.mark.parametrize("form", ["string-ts", "kineto"])
def test_start_skew_across_a_torch_npu_rank_and_one_npuprof_parses(tmp_path: Path, form: str) -> None:
    """Rank 0 torch_npu parsed (its step starts are epoch µs); rank 1 a raw trace npuprof parses, whose
    times count from a base of its own (torch_npu's string epoch times, or Kineto's baseTimeNanoseconds):
    rank 1's step starts 250 µs after rank 0's in epoch time, and the skew says so."""
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    first_task = min(float(k["Start Time(us)"]) for k in _kernels("kernel_details_2023.csv"))
    start0 = first_task - 12.5
    start1_ns = round(start0 * 1000) + 250_000
    d = tmp_path / "node1_4001_20240101120000123_ascend_pt"
    d.mkdir()
    (d / "profiler_info_1.json").write_text(json.dumps({"config": {}, "rank_id": 1}))
    step = {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "dur": 6000.0}
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "dur": 100.0}
    if form == "string-ts":
        us, ns = divmod(start1_ns, 1000)
        step["ts"] = f"{us}.{ns:03d}"
        op["ts"] = f"{us + 10}.{ns:03d}"
        body: object = [step, op]
    else:
        base_ns = 1_690_000_000_000_000_000  # a Kineto base: whole milliseconds before the capture
        step["ts"] = (start1_ns - base_ns) / 1000
        op["ts"] = step["ts"] + 10
        body = {"baseTimeNanoseconds": base_ns, "traceEvents": [step, op]}
    (d / "node1.pt.trace.json").write_text(json.dumps(body))
    report = _report(tmp_path)
    assert not report["problems"]
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    (skew,) = report["cross_rank"]["start_skew"]
    assert (skew["step"], skew["earliest_rank"], skew["latest_rank"]) == (1, 0, 1)
    assert skew["skew_us"] == pytest.approx(250.0, abs=0.01)


def test_a_rank_with_two_captures_is_pooled_in_the_slowest_rank_test(tmp_path: Path) -> None:
    """torch_npu's repeat=2 leaves two rank dirs per rank: rank 0's mean step is over both captures'
    steps (it was the last dir's alone)."""
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 1000.0, 0.0, 0.0, 0.0)], stamp=100)
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(5, 3000.0, 0.0, 0.0, 0.0)], stamp=200)
    _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [_step(1, 2500.0, 0.0, 0.0, 0.0)], stamp=100)
    _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [_step(5, 2500.0, 0.0, 0.0, 0.0)], stamp=200)
    report = _report(tmp_path)
    slowest = report["cross_rank"]["slowest"]
    # rank 0: (1000 + 3000) / 2 = 2000; rank 1: 2500
    assert (slowest["rank"], slowest["mean_step_us"], slowest["median_us"]) == (1, 2500.0, 2250.0)
    steps = {s["step"]: s["ranks"] for s in report["cross_rank"]["steps"]}
    assert steps == {1: {"0": 1000.0, "1": 2500.0}, 5: {"0": 3000.0, "1": 2500.0}}


def test_two_captures_of_one_rank_draw_no_table_across_ranks(tmp_path: Path) -> None:
    """One rank captured twice (a process run twice): there is nothing to compare across ranks."""
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 1000.0, 0.0, 0.0, 0.0)], stamp=100)
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(5, 3000.0, 0.0, 0.0, 0.0)], stamp=200)
    result = npuprof("analyse", str(tmp_path), env={**clean_env(), "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "step time across ranks" not in result.stdout and "slowest rank" not in result.stdout
    assert result.stdout.count("rank 0") == 2, result.stdout  # both captures reported


def test_a_rank_started_again_is_compared_on_its_latest_capture(tmp_path: Path) -> None:
    """torchrun --max-restarts: rank 0's first attempt died in step 6 (a later pid may be lower); the
    table across ranks showed its latest step 6 but the slowest rank's mean took both step 6s in."""
    first = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(6, 18000.0, 0.0, 0.0, 0.0)], stamp=100)
    first.rename(first.with_name(first.name.replace("_4000_", "_4999_")))  # the earlier process, a higher pid
    again = [_step(n, t, 0.0, 0.0, 0.0) for n, t in ((6, 7500.0), (7, 6500.0), (8, 2700.0))]
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", again, stamp=200)
    other = [_step(n, t, 0.0, 0.0, 0.0) for n, t in ((6, 4400.0), (7, 6000.0), (8, 2700.0))]
    _rank_dir(tmp_path, 1, "kernel_details_2023.csv", other, stamp=200)
    report = _report(tmp_path)
    steps = {s["step"]: s["ranks"] for s in report["cross_rank"]["steps"]}
    assert steps[6] == {"0": 7500.0, "1": 4400.0}  # the later capture's step 6
    slowest = report["cross_rank"]["slowest"]
    rank0, rank1 = (7500.0 + 6500.0 + 2700.0) / 3, (4400.0 + 6000.0 + 2700.0) / 3
    assert (slowest["rank"], slowest["mean_step_us"]) == (0, round(rank0, 3))
    assert slowest["median_us"] == round((rank0 + rank1) / 2, 3)


def test_captures_of_one_rank_on_two_kinds_of_device_are_named(tmp_path: Path) -> None:
    from analyse_support.handmade import cpu_trace, write_rank_dir

    npu = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 1000.0, 0.0, 0.0, 0.0)])
    cpu = write_rank_dir(tmp_path, cpu_trace(), rank=0, name="cpuhost_77_20240101130000000")
    result = npuprof("analyse", str(tmp_path), env=clean_env())
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "kinds of device" in line]
    assert len(notes) == 1, result.stderr
    assert f"NPU: {npu}" in notes[0] and f"CPU: {cpu}" in notes[0], notes


def test_ranks_that_share_no_step_are_said_to_be_compared_over_different_steps(tmp_path: Path) -> None:
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 1000.0, 0.0, 0.0, 0.0)])
    _rank_dir(tmp_path, 1, "kernel_details_2025.csv", [_step(19, 1200.0, 0.0, 0.0, 0.0)])
    result = npuprof("analyse", str(tmp_path), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert (
        "note: no step was captured on every rank (rank 0: 1; rank 1: 19): the slowest rank is found from "
        "means over different steps"
    ) in result.stderr
    _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [_step(1, 1100.0, 0.0, 0.0, 0.0)], stamp=456)
    again = npuprof("analyse", str(tmp_path), env=clean_env())
    assert again.returncode == 0 and "no step was captured on every rank" not in again.stderr


def test_top_operators_and_kernels_of_tables_without_steps(tmp_path: Path) -> None:
    """operator_details.csv has no step column and kernel_details.csv has none without steps: their rows
    count for the whole capture, in a report whose steps come from step_trace_time.csv."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    rows = _kernels("kernel_details_2023.csv")
    with open(out / "kernel_details.csv", "w", newline="") as f:
        fields = [c for c in rows[0] if c != "Step Id"]
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    header = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)"]
    header += ["Device Self Duration(us)", "Device Total Duration(us)"]
    header += ["Device Self Duration With AICore(us)"]
    with open(out / "operator_details.csv", "w", newline="") as f:
        w2 = csv.writer(f)
        w2.writerow(header)
        w2.writerows(
            [
                ["aten::mm", '"4,4;4,4"', "", 30.5, 40.0, 7.0, 7.0, 7.0],
                ["aten::add", "", "", 12.0, 12.0, 1.0, 1.0, 1.0],
                ["aten::mm", '"8,8;8,8"', "", 20.0, 25.0, 3.0, 3.0, 3.0],
            ]
        )
    rank = _report(tmp_path)["ranks"][0]
    ops = {
        o["name"]: (o["count"], o["self_us"], o["total_us"], o["device_us"]) for o in rank["top_operators"]
    }
    assert ops == {"aten::mm": (2, 50.5, 65.0, 10.0), "aten::add": (1, 12.0, 12.0, 1.0)}
    by_name: dict[str, float] = {}
    for k in rows:
        by_name[k["Name"]] = by_name.get(k["Name"], 0.0) + float(k["Duration(us)"])
    top = rank["top_kernels"][0]
    name, total = max(by_name.items(), key=lambda kv: kv[1])
    assert (top["name"], top["total_us"]) == (name, pytest.approx(total, abs=1e-3))
    chosen = _report(tmp_path, "--steps", "1")["ranks"][0]  # the tables stay whole, and it is said
    assert chosen["top_operators"] == rank["top_operators"] and chosen["top_kernels"] == rank["top_kernels"]
    said = " ".join(chosen["warnings"])
    assert "top operators and kernels are of the whole capture, not of --steps" in said


def _operators_of_trace_view(path: Path) -> dict[str, tuple[int, float, float, float]]:
    """Each operator name's (calls, self, total, device time) in torch_npu's trace_view.json, worked out
    here: operators nested per thread by start and length, a call that is the only child of one of its
    name part of its parent's call (as torch's key_averages()); each NPU task's time to the innermost
    operator its async_npu flow starts in, a call's device time that of its operators."""
    events = json.loads(path.read_text())
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["ph"] == "X"]
    ops = [e for e in ops if not e["name"].startswith("ProfilerStep#")]  # the step, no operator
    start = {id(e): Decimal(e["ts"]) for e in ops}
    end = {id(e): Decimal(e["ts"]) + Decimal(str(e["dur"])) for e in ops}
    parent: dict[int, dict | None] = {}
    children: dict[int, list[dict]] = {id(e): [] for e in ops}
    for tid in {e["tid"] for e in ops}:
        stack: list[dict] = []
        for e in sorted((e for e in ops if e["tid"] == tid), key=lambda e: (start[id(e)], -e["dur"])):
            while stack and end[id(stack[-1])] <= start[id(e)]:
                stack.pop()
            parent[id(e)] = stack[-1] if stack else None
            if stack:
                children[id(stack[-1])].append(e)
            stack.append(e)
    tasks = {(e["pid"], e["tid"], e["ts"]): e["dur"] for e in events if e["ph"] == "X" and "cat" not in e}
    flows = [e for e in events if e.get("cat") == "async_npu"]
    task_of = {e["id"]: (e["pid"], e["tid"], e["ts"]) for e in flows if e["ph"] == "f"}
    device_self = {id(e): 0.0 for e in ops}
    for flow in (e for e in flows if e["ph"] == "s"):
        at = Decimal(flow["ts"])
        inside = [e for e in ops if e["tid"] == flow["tid"] and start[id(e)] <= at < end[id(e)]]
        device_self[id(max(inside, key=lambda e: (start[id(e)], -e["dur"])))] += tasks[task_of[flow["id"]]]

    def device_total(e: dict) -> float:
        return device_self[id(e)] + sum(device_total(c) for c in children[id(e)])

    totals: dict[str, list[float]] = {}
    for e in ops:
        acc = totals.setdefault(e["name"], [0, 0.0, 0.0, 0.0])
        up = parent[id(e)]
        repeat = up is not None and up["name"] == e["name"] and len(children[id(up)]) == 1
        acc[1] += e["dur"] - sum(c["dur"] for c in children[id(e)])
        if not repeat:
            acc[0] += 1
            acc[2] += e["dur"]
            acc[3] += device_total(e)
    return {name: (int(v[0]), v[1], v[2], v[3]) for name, v in totals.items()}


def test_top_operators_without_operator_details_come_from_the_trace_view(tmp_path: Path) -> None:
    """A rank dir without operator_details.csv (torch_npu writes it only with record_shapes or with_stack)
    got no top operators, though its trace_view.json (the real one) holds every operator: they come from
    there, and a note says so."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    shutil.copyfile(REAL / "trace_view.json", d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    rank = _report(tmp_path)["ranks"][0]
    expected = _operators_of_trace_view(REAL / "trace_view.json")
    top = sorted(expected, key=lambda name: -expected[name][1])[:6]
    got = rank["top_operators"][:6]
    assert [o["name"] for o in got] == top
    for o in got:
        count, self_us, total_us, device_us = expected[o["name"]]
        assert o["count"] == count, o
        assert (o["self_us"], o["total_us"]) == (
            pytest.approx(self_us, abs=1e-3),
            pytest.approx(total_us, abs=1e-3),
        )
        assert o["device_us"] == pytest.approx(device_us, abs=1e-3), o
    assert any(o["device_us"] > 0 for o in got)  # the device time is there, not all zeros
    notes = [w for w in rank["warnings"] if "operator_details.csv" in w]
    assert len(notes) == 1 and "trace_view.json" in notes[0] and "no top operators" not in notes[0], notes


def test_the_rank_the_others_wait_for_in_synchronous_training(tmp_path: Path) -> None:
    """Synchronous data parallel: every rank's step takes as long; rank 0 computes longer and the others
    wait for it in their collectives (exposed communication). Step time cannot name it; busy time can."""
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 8000.0, 100.0, 400.0, 0.0)])
    _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [_step(1, 5000.0, 3100.0, 400.0, 0.0)], stamp=1)
    _rank_dir(tmp_path, 2, "kernel_details_2023.csv", [_step(1, 5100.0, 3000.0, 400.0, 0.0)], stamp=2)
    cross = _report(tmp_path)["cross_rank"]
    assert {s["ranks"]["0"] for s in cross["steps"]} == {8500.0}
    assert set(cross["steps"][0]["ranks"].values()) == {8500.0}  # step time: no difference
    busy = {0: 8500.0 - 100.0, 1: 8500.0 - 3100.0, 2: 8500.0 - 3000.0}
    median = sorted(busy.values())[1]
    deviation = sorted(abs(b - median) for b in busy.values())[1]
    assert cross["straggler"] == {
        "rank": 0,
        "busy_us": busy[0],
        "median_busy_us": median,
        "busier_than_median_pct": round((busy[0] - median) / median * 100, 2),
        "modified_z": round(0.6745 * (busy[0] - median) / deviation, 2),
        "outlier": True,
    }
    table = npuprof("analyse", str(tmp_path), env=clean_env(COLUMNS="200"))
    assert (
        "rank the others wait for: 0 (busy 8.400 ms a step outside exposed communication, +52.7% vs the "
        "median): an outlier" in table.stdout
    ), table.stdout


def test_a_step_whose_start_is_not_known_is_left_out_of_the_start_skew(tmp_path: Path) -> None:
    """A torch_npu rank dir without the step's tasks (no kernel rows, no trace_view) has no start for it:
    taken as 0, it made a skew of 54 years against a rank that had one, and "none" between two such."""
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    bare = _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 0.0)], stamp=1)
    kernels = bare / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kernels.write_text(kernels.read_text().splitlines()[0] + "\n")  # the header alone
    report = _report(tmp_path)
    assert report["cross_rank"]["start_skew"] == []
    assert math.copysign(1.0, report["ranks"][1]["steps"][0]["start_us"]) < 0  # -0.0: not known
    table = npuprof("analyse", str(tmp_path), env=clean_env(COLUMNS="200"))
    assert table.returncode == 0 and "step start skew" not in table.stdout, table.stdout


def test_two_ranks_as_busy_at_the_top_name_no_rank_the_others_wait_for(tmp_path: Path) -> None:
    """Busy 900, 900, 600, 600 µs: naming rank 0 alone hid rank 1, as busy."""
    for rank, (computing, exposed) in enumerate(
        [(800.0, 100.0), (800.0, 100.0), (500.0, 400.0), (500.0, 400.0)]
    ):
        _rank_dir(
            tmp_path, rank, "kernel_details_2023.csv", [_step(1, computing, exposed, 100.0, 0.0)], stamp=rank
        )
    assert "straggler" not in _report(tmp_path)["cross_rank"]


def test_ranks_are_compared_on_the_steps_every_rank_has(tmp_path: Path) -> None:
    """Rank 1 lost a long capture (killed) that rank 0 kept: rank 0's mean over its own steps made it the
    slowest though it was faster on every step both ranks have."""
    _rank_dir(
        tmp_path,
        0,
        "kernel_details_2023.csv",
        [_step(1, 800.0, 0.0, 200.0, 0.0), _step(2, 8000.0, 0.0, 1000.0, 0.0)],
    )
    _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [_step(1, 1300.0, 0.0, 200.0, 0.0)], stamp=1)
    slowest = _report(tmp_path)["cross_rank"]["slowest"]
    assert (slowest["rank"], slowest["mean_step_us"], slowest["median_us"]) == (1, 1500.0, 1250.0)
    table = npuprof("analyse", str(tmp_path), env=clean_env(COLUMNS="200")).stdout
    across = table[table.index("step time across ranks") :]
    (row,) = [line for line in across.splitlines() if line.startswith("│    2 │")]
    assert [cell.strip() for cell in row.strip("│").split("│")] == ["2", "9.000", "-", "-"], table


def test_captures_without_the_steps_asked_draw_no_table(tmp_path: Path) -> None:
    """--steps 1 over captures of which one has it: each other drew an empty table (87 of them in a job
    with many captures), besides the one line that names them."""
    _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 800.0, 0.0, 200.0, 0.0)])
    _rank_dir(tmp_path, 1, "kernel_details_2023.csv", [_step(2, 800.0, 0.0, 200.0, 0.0)], stamp=1)
    result = npuprof("analyse", str(tmp_path), "--steps", "1", env=clean_env(COLUMNS="200"))
    assert result.returncode == 0, result.stderr
    assert "rank 0  (NPU" in result.stdout and "rank 1  (NPU" not in result.stdout, result.stdout
    (said,) = [line for line in result.stderr.splitlines() if "no step of --steps 1" in line]
    assert "_4001_" in said
    assert len(_report(tmp_path, "--steps", "1")["ranks"]) == 2  # the JSON keeps both
    # an open end (no steps_filter pair): the same
    opened = npuprof("analyse", str(tmp_path), "--steps", "2-", env=clean_env(COLUMNS="200"))
    assert opened.returncode == 0, opened.stderr
    assert "rank 1  (NPU" in opened.stdout and "rank 0  (NPU" not in opened.stdout, opened.stdout


def test_kernel_rows_without_a_number_and_a_missing_communication_table_are_named(tmp_path: Path) -> None:
    """A kernel_details.csv row whose duration is not a number (the largest, hcom_broadcast, here) was left
    out without a word; communication read 0 without communication.json though HCCL tasks ran."""
    rows = _kernels("kernel_details_2023.csv")
    largest = max(range(len(rows)), key=lambda k: float(rows[k]["Duration(us)"]))
    damaged = [dict(row) for row in rows]
    damaged[largest]["Duration(us)"] = "N/A"
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(damaged)
    hccl = sum(1 for row in damaged if row["Name"].startswith("hcom_") and row["Duration(us)"] != "N/A")
    assert hccl > 0
    result = npuprof("analyse", str(d), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert rows[largest]["Name"] not in [k["name"] for k in rank["top_kernels"]][:1]
    warnings = " ".join(rank["warnings"])
    assert f"1 of its {len(rows)} rows have no number for 'Start Time(us)' or 'Duration(us)'" in warnings
    assert f"no communication.json, though kernel_details.csv has {hccl} communication task(s)" in warnings
    assert "kernel_details.csv: 1 of its" in " ".join(result.stderr.split())


def test_negative_times_and_a_step_that_is_no_number_are_named(tmp_path: Path) -> None:
    bad = _step(2, -1000.0, 100.0, 400.0, 12.5)
    bad[1] = "x1"
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, -20.0), bad])
    result = npuprof("analyse", str(d), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    warnings = " ".join(rank["warnings"])
    # Preparing may be negative (a step's first task before its start): not named
    assert "step_trace_time.csv has negative times in Computing (a damaged table?)" in warnings
    assert (
        "step_trace_time.csv has 1 Step cell(s) that are no step number (ASCII digits, at most 18: 'x1')"
        in warnings
    )


def test_a_rank_dir_renamed_is_analysed_by_what_it_holds(tmp_path: Path) -> None:
    """A rank dir renamed (copied as `my_capture/`): named itself it is read by what it holds, torch_npu's
    tables as npuprof's own trace; the walk from a directory above finds it the same way."""
    from analyse_support.handmade import write_rank_dir, x

    theirs = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    theirs = theirs.rename(tmp_path / "my_capture")
    kernels = _kernels("kernel_details_2023.csv")
    report = _report(theirs)
    (rank,) = report["ranks"]
    assert rank["rank"] == 0 and [s["step"] for s in rank["steps"]] == [1]
    longest = max(kernels, key=lambda k: float(k["Duration(us)"]))
    assert (rank["top_kernels"][0]["name"], rank["top_kernels"][0]["total_us"]) == (
        longest["Name"],
        float(longest["Duration(us)"]),
    )

    trace = {"traceEvents": [x("ProfilerStep#4", "user_annotation", 0, 800), x("aten::mm", "cpu_op", 10, 50)]}
    ours = write_rank_dir(tmp_path / "copies", trace, rank=None).rename(tmp_path / "copies" / "run_a")
    (rank,) = _report(ours)["ranks"]
    assert [(s["step"], s["duration_us"]) for s in rank["steps"]] == [(4, 800.0)]

    # from above, beside a rank dir named as npuprof names them, each is a rank of one report (the renamed
    # ones were left out without a word when a named one was there); another capture: a copy of one would
    # be counted once
    other = {"traceEvents": [x("ProfilerStep#5", "user_annotation", 0, 900), x("aten::mm", "cpu_op", 10, 50)]}
    named = write_rank_dir(tmp_path, other, rank=None, name="host_9_20250101000000000")
    report = _report(tmp_path, "--run", "all")  # runless captures of two directories: two "runs"
    assert sorted(r["rank_dir"] for r in report["ranks"]) == sorted(map(str, (theirs, ours, named)))


def test_a_result_dir_named_like_a_rank_dir_is_searched(tmp_path: Path) -> None:
    """helper-112: a result dir copied as `exp_ascend_pt/` (its ranks inside) was read as one capture
    without a trace ("missing: no trace in this directory", exit 1), given itself or from above; inside
    a folder beside another capture it was named missing and its ranks left out. It holds no capture of
    its own, so it is searched; a rank dir of that name holding a trace is still a rank dir."""
    from analyse_support.handmade import write_rank_dir, x

    container = tmp_path / "exp_ascend_pt"
    for rank, length in ((0, 800), (1, 900)):
        trace = {"traceEvents": [x("ProfilerStep#4", "user_annotation", 0, length)]}
        write_rank_dir(container, trace, rank=rank, name=f"host_{rank}_20250101000000000")
    for given in (container, tmp_path):
        ranks = _report(given)["ranks"]
        assert [(r["rank"], r["steps"][0]["duration_us"]) for r in ranks] == [(0, 800.0), (1, 900.0)], given

    # a capture named so that holds its own trace stays one rank dir, even with a folder of that kind in it
    inside = {"traceEvents": [x("ProfilerStep#2", "user_annotation", 0, 500)]}
    own = write_rank_dir(tmp_path / "b", inside, rank=3, name="own")
    (own / "nested_ascend_pt").mkdir()
    (rank,) = _report(own)["ranks"]
    assert (rank["rank"], rank["steps"][0]["duration_us"]) == (3, 500.0)


def _memory_record(out: Path, rows: list[list[object]]) -> None:
    with open(out / "memory_record.csv", "w", newline="") as f:
        w = csv.writer(f)
        # torch_npu's header (docs/formats.md), as its files have it
        header = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr"
        w.writerow([*header.split(","), "Device Type"])
        w.writerows(rows)


def test_analyse_of_the_tables_folder_reads_its_rank_dir(tmp_path: Path) -> None:
    """helper-91: ASCEND_PROFILER_OUTPUT/ named itself was read as a folder holding a bare trace: torch_npu's
    tables unread, 0 % communication, and npuprof's tables made inside torch_npu's folder."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    shutil.copyfile(REAL / "trace_view.json", out / "trace_view.json")
    before = sorted(p.name for p in out.iterdir())
    result = npuprof("analyse", str(out), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    assert f"{out} is the tables' folder of the rank directory {d}" in result.stderr
    (step,) = json.loads(result.stdout)["ranks"][0]["steps"]
    assert (step["computing_us"], step["comm_not_overlapped_us"], step["free_us"]) == (5000.0, 100.0, 400.0)
    assert sorted(p.name for p in out.iterdir()) == before  # nothing made inside torch_npu's folder


def test_torch_npus_raw_data_folders_given_read_their_rank_dir(tmp_path: Path) -> None:
    """helper-349: a torch_npu user who gave the rank dir's FRAMEWORK/ or PROF_*/ (where its raw data is,
    with data simplification off) was told "no rank directory (a capture) under FRAMEWORK, and it is not a
    trace file" by analyse, and export-stacks "has no trace (...) (capture unknown: no npuprof capture
    record)": not which directory to give. Each now reads the rank dir above, as ASCEND_PROFILER_OUTPUT/
    given is read, and says so."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    shutil.copyfile(REAL / "trace_view.json", d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    for raw in ("FRAMEWORK", "PROF_000001_20240101120000123_ABCDEFGHIJKLMNOP"):
        (d / raw).mkdir()
        result = npuprof("analyse", raw, "--format", "json", cwd=d, env=clean_env())
        assert result.returncode == 0, result.stderr
        assert (
            f"{raw} is torch_npu's raw data folder of the rank directory {d}: that is analysed"
            in result.stderr
        )
        (step,) = json.loads(result.stdout)["ranks"][0]["steps"]
        assert (step["computing_us"], step["comm_not_overlapped_us"], step["free_us"]) == (
            5000.0,
            100.0,
            400.0,
        )
        stacks = npuprof("export-stacks", str(d / raw), "-o", str(tmp_path / "s.folded"), env=clean_env())
        assert stacks.returncode == 0, stacks.stderr
        assert (
            f"{d / raw} is torch_npu's raw data folder of the rank directory {d}: that is read"
            in stacks.stderr
        )
        assert f"from {d}/ASCEND_PROFILER_OUTPUT/trace_view.json" in stacks.stderr, stacks.stderr


def test_memory_timeline_of_a_torch_npu_rank_dir_reads_its_memory_record(tmp_path: Path) -> None:
    """helper-91: it asked for a capture with --profile-memory, while memory_record.csv holds the allocator's
    totals. The PTA rows (PyTorch's allocator), not CANN's GE, in MB: the timeline's bytes are MB x 2**20
    at the records' epoch µs."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    t = 1699529622790600
    rows = [[100.0, 200.0], [350.5, 512.0], [120.0, 512.0]]
    _memory_record(
        d / "ASCEND_PROFILER_OUTPUT",
        [["PTA", t + 1000 * k, a, r, a, 0, "NPU:3"] for k, (a, r) in enumerate(rows)]
        + [["GE", t + 500, 4096.0, 4096.0, 4096.0, 0, "NPU:3"]],
    )
    target = tmp_path / "memory.json"
    result = npuprof("memory-timeline", str(d), "-o", str(target), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "from memory_record.csv" in result.stderr
    times, sizes = json.loads(target.read_text())
    assert times == [t, t + 1000, t + 2000]
    assert [sum(row) for row in sizes] == [round(a * 2**20) for a, _r in rows]
    wrong = npuprof("memory-timeline", str(d), "--device", "npu:0", "-o", str(target), env=clean_env())
    assert wrong.returncode != 0 and "npu:3" in wrong.stderr


def test_memory_timeline_of_a_torch_npu_rank_dir_without_memory_names_its_switch(tmp_path: Path) -> None:
    """helper-349: a rank dir torch_npu parsed without profile_memory (the real trace_view.json, no
    memory_record.csv) was told "trace_view.json has no [memory] events: capture with --profile-memory
    --record-shapes --with-stack (and --memory-timeline ...)": not which rank dir, nor that torch_npu's
    profile_memory=True writes what is read there."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    shutil.copyfile(REAL / "trace_view.json", d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    result = npuprof("memory-timeline", str(d), "-o", str(tmp_path / "m.json"), env=clean_env())
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert f"{d} (parsed by torch_npu) has no memory data" in line
    assert "memory_record.csv" in line and "profile_memory=True" in line
    assert "--record-shapes" not in line  # torch_npu needs only profile_memory for both
    assert not (tmp_path / "m.json").exists()


def test_processes_without_a_rank_are_said_not_to_be_compared(tmp_path: Path) -> None:
    """helper-91: two torch_npu rank dirs without profiler_info_<rank>.json got no table across ranks and
    no word why."""
    for rank in (0, 1):
        d = _rank_dir(tmp_path, rank, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
        (d / f"profiler_info_{rank}.json").unlink()
    result = npuprof("analyse", str(tmp_path), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "2 processes' captures have no rank" in result.stderr
    assert "they are not compared across ranks" in result.stderr
    assert "step time across ranks" not in result.stdout


def test_the_tables_folder_as_dot_or_a_link_reads_its_rank_dir_and_one_with_a_trace_alone_reads_it(
    tmp_path: Path,
) -> None:
    """helper-93: `.` inside ASCEND_PROFILER_OUTPUT/, or a link to it, was read as a folder of traces
    (tables made inside torch_npu's folder); and a rank dir with nothing but trace_view.json there, which
    analysing the folder read before, was refused as a rank dir."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    shutil.copyfile(REAL / "trace_view.json", out / "trace_view.json")
    (tmp_path / "link").symlink_to(out)
    before = sorted(p.name for p in out.iterdir())
    for where, name in ((out, "."), (tmp_path, "link")):
        result = npuprof("analyse", name, "--format", "json", cwd=where, env=clean_env())
        assert result.returncode == 0, result.stderr
        assert f"{name} is the tables' folder of the rank directory" in result.stderr
        (step,) = json.loads(result.stdout)["ranks"][0]["steps"]
        assert step["computing_us"] == 5000.0  # torch_npu's table, not the trace
    assert sorted(p.name for p in out.iterdir()) == before
    lone = tmp_path / "lone" / "host_9_20240101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    lone.mkdir(parents=True)
    shutil.copyfile(REAL / "trace_view.json", lone / "trace_view.json")
    result = npuprof("analyse", str(lone), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ranks"][0]["device"] == "NPU"


def test_memory_record_times_devices_and_components_as_written(tmp_path: Path) -> None:
    """helper-93: times of memory_record.csv were off by up to 125 ns (a float of epoch µs), rows of "NPU"
    and "NPU:0" overwrote each other, a file without PTA rows mixed every component into one series, and a
    damaged trace_view.json beside the file stopped the timeline."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    (out / "trace_view.json").write_text('[{"ph": "X", "name": "cut')  # damaged
    rows = [
        ["GE", "1700000000000000.164", 900.0, 900.0, 900.0, 0, "NPU:0"],
        ["APP", "1700000000000000.164", 10.0, 20.0, 10.0, 0, "NPU:0"],
        ["APP", "1700000000000001.999", 12.5, 20.0, 12.5, 0, "NPU"],
        ["GE", "1700000000000002.5", 500.0, 900.0, 500.0, 0, "NPU:0"],
        ["APP", "1700000000000003.001", 11.0, 20.0, 11.0, 0, ""],
    ]
    _memory_record(out, rows)
    target = tmp_path / "m.raw.json.gz"
    result = npuprof("memory-timeline", str(d), "-o", str(target), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "memory_record.csv (component APP)" in result.stderr  # no PTA rows: the application's total
    import gzip

    raw = json.loads(gzip.decompress(target.read_bytes()))
    app = [r for r in rows if r[0] == "APP"]
    assert [row[0] for row in raw] == [int(r[1].replace(".", "")) for r in app]  # epoch ns, exactly
    assert sum(row[2] for row in raw) == round(app[-1][2] * 2**20)  # the deltas add up to the last total


def test_memory_record_times_and_sizes_to_the_nanosecond_and_byte(tmp_path: Path) -> None:
    """memory-timeline of memory_record.csv: each record at its epoch ns, its MB as the nearest byte, the
    reserved line at the record's epoch µs (helper-368: ns offsets truncated, 1.001 µs read 1000 ns and
    7.013 µs 7012; MB truncated to a byte below; the reserved line 1 µs late: none failed a test)."""
    from npuprof.reports.memory_timeline import from_memory_record

    out = tmp_path / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    times = ["1700000000000000.000", "1700000000000001.001", "1700000000000007.013"]
    allocated, reserved = [10.0, 12.3, 11.1], [20.0, 20.3, 24.7]
    rows = [["PTA", t, a, r, a, 0, "NPU:0"] for t, a, r in zip(times, allocated, reserved, strict=True)]
    _memory_record(out, rows)
    data = from_memory_record(out / "memory_record.csv")
    ns = [int(t.replace(".", "")) for t in times]
    total = [round(Decimal(str(mb)) * 2**20) for mb in allocated]  # the nearest byte
    assert [(t, size) for t, _action, size, _cat in data.raw] == [
        (ns[0], total[0]),  # what was allocated before the first record
        (ns[1], total[1] - total[0]),
        (ns[2], total[2] - total[1]),
    ]
    assert data.reserved == ([t // 1000 for t in ns], [round(Decimal(str(mb)) * 2**20) for mb in reserved])


def test_two_traces_of_one_process_are_not_said_to_be_processes_without_a_rank(tmp_path: Path) -> None:
    """helper-93: tensorboard_trace_handler's two traces of one process (two cycles of a schedule) were
    said to be "2 processes' captures" with no rank."""
    trace = json.loads((REAL / "trace_view.json").read_text())
    for ns in (1796326586436691701, 1796326586459294640):
        (tmp_path / f"vm_12207.{ns}.pt.trace.json").write_text(json.dumps(trace))
    result = npuprof("analyse", str(tmp_path), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "have no rank" not in result.stderr


def test_a_link_in_a_loop_beside_traces_hides_only_itself(tmp_path: Path) -> None:
    """helper-120: a folder of traces holding two links that point at each other read as "no rank
    directory ... and it is not a trace file": the loop (ELOOP) ended the folder's scan."""
    trace = json.loads((REAL / "trace_view.json").read_text())
    (tmp_path / "vm_1.1.pt.trace.json").write_text(json.dumps(trace))
    (tmp_path / "loop1").symlink_to("loop2.json")
    (tmp_path / "loop2.json").symlink_to("loop1")
    result = npuprof("analyse", str(tmp_path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert rank["steps"]
    assert f"skipped {tmp_path / 'loop2.json'}: Too many levels of symbolic links" in result.stderr


def test_memory_record_sizes_no_device_has_are_left_out_and_said(tmp_path: Path) -> None:
    """helper-93: a memory_record.csv cell of 1e300 MB (damage, an edit) was the rank's peak memory. Sizes
    below 0 or over 1 PiB are left out of the peaks and the timeline, and said, in both."""
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    t = 1699529622790600
    good = [[100.0, 200.0], [350.5, 512.0], [120.0, 512.0]]
    bad = [[1e300, 512.0], [-4.0, 512.0], [64.0, 1e30]]
    _memory_record(
        d / "ASCEND_PROFILER_OUTPUT",
        [["PTA", t + 1000 * k, a, r, a, 0, "NPU:0"] for k, (a, r) in enumerate(good + bad)],
    )
    (rank,) = _report(d)["ranks"]
    assert rank["memory_peak_mb"] == max(a for a, _r in good)
    assert rank["memory_peak_reserved_mb"] == max(r for _a, r in good)
    assert any("3 record(s) of memory_record.csv with a size no device has" in w for w in rank["warnings"])
    target = tmp_path / "memory.json"
    result = npuprof("memory-timeline", str(d / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv"), "-o",
                     str(target), env=clean_env())  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "3 record(s) of memory_record.csv with a size no device has" in " ".join(result.stderr.split())
    times, sizes = json.loads(target.read_text())
    assert times == [t, t + 1000, t + 2000]
    assert [sum(row) for row in sizes] == [round(a * 2**20) for a, _r in good]


def test_communication_step_keys_of_odd_digits_cost_no_rank_and_steps_written_twice_are_summed(
    tmp_path: Path,
) -> None:
    """helper-200: a communication.json key "step²" ("²".isdigit() is True, int("²") raises) ended the rank in
    'not analysed' over one key; "step1" and "step01" (one step) kept only the later's figures by step
    while the total had both. In-process: the summary of the rank dir, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])

    def op(ms: float, mb: float) -> dict:
        return {
            "Communication Time Info": {"Elapse Time(ms)": ms},
            "Communication Bandwidth Info": {"RDMA": {"Transit Size(MB)": mb}},
        }

    data = {
        "step²": {"collective": {"a": op(1.0, 2.0)}},
        "step1": {"collective": {"b": op(3.0, 4.0)}},
        "step01": {"p2p": {"c": op(5.0, 6.0)}},
    }
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(data))
    summary = ascend_output.summary_of(d)
    assert summary.communication == {"operators": 3, "time_us": 9000.0, "size_mb": 12.0}
    assert summary.communication_by_step == {"1": {"operators": 2, "time_us": 8000.0, "size_mb": 10.0}}


def test_cells_past_any_real_figure_are_damage_not_summed_to_infinity(tmp_path: Path) -> None:
    """helper-200: two kernel, operator or communication cells of 1e308 summed to inf, which analyse's JSON
    wrote as Infinity (no JSON to a strict reader); a step's Computing of 1e300 was its duration. Cells past
    ascend_output.MAX_CELL are read as damaged and said. In-process, no subprocess."""
    from npuprof.analysis import ascend_output
    from npuprof.analysis.summary_schema import as_plain

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 1e300, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    kernels = (out / "kernel_details.csv").read_text(encoding="utf-8-sig").splitlines()
    header = next(csv.reader([kernels[0]]))
    rows = [next(csv.reader([line])) for line in kernels[1:3]]
    for row in rows:
        row[header.index("Duration(us)")] = "1e308"
    with open(out / "kernel_details.csv", "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    with open(out / "operator_details.csv", "w", newline="") as f:
        csv.writer(f).writerows(
            [
                ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER],
                *[["x", "", "", 1e308, 1e308, 0, 0, 0, 0]] * 2,
            ]
        )
    op = {"Communication Time Info": {"Elapse Time(ms)": 1e308}}
    (out / "communication.json").write_text(json.dumps({"step1": {"collective": {"a": op, "b": op}}}))
    summary = ascend_output.summary_of(d)
    json.dumps(as_plain(summary), allow_nan=False)  # raises on inf or nan
    (step,) = summary.steps
    assert step.duration_us == 5.0  # 1.0 + 4.0: Computing counted as 0, said
    assert summary.communication == {"operators": 2, "time_us": 0.0, "size_mb": 0.0}
    said = " ".join(summary.warnings)
    assert "no value for Computing" in said and "2 of its 3 rows have no number" not in said
    assert "kernel_details.csv: 2 of its 2 rows" in said or "all 2 rows have no number" in said
    assert "operator_details.csv: 2 row(s) have a time that is no duration" in said
    assert (
        "communication.json: 2 operation(s) have no 'Elapse Time(ms)' that is a duration (no number" in said
    )


def test_memory_record_rows_with_no_number_are_said_not_dropped_without_a_word(tmp_path: Path) -> None:
    """helper-200: memory_record.csv rows whose Timestamp(us) or Total Allocated(MB) was no number (N/A, a
    date; a file whose columns are Timestamp(ns) / Total Allocated(KB)) were left out without a word, a
    whole file of them (or a header alone) read as no memory; analyse and memory-timeline say them now.
    In-process, no subprocess."""
    from npuprof.analysis import ascend_output
    from npuprof.reports.memory_timeline import from_memory_record

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    rows = [
        ["PTA", "1699529622790611\t", 10.0, 20.0, 10.0, 1, "NPU:0"],
        ["PTA", "N/A", 90.0, 95.0, 10.0, 1, "NPU:0"],
        ["PTA", "2023-11-09 12:00:00", 80.0, 85.0, 10.0, 1, "NPU:0"],
        ["PTA", "1699529622790700\t", 30.0, 40.0, 10.0, 1, "NPU:0"],
    ]
    _memory_record(out, rows)
    summary = ascend_output.summary_of(d)
    assert summary.memory == {"peak_allocated_mb": 30.0, "peak_reserved_mb": 40.0}  # the two readable rows
    note = "memory_record.csv: 2 row(s) have no number for 'Timestamp(us)' or 'Total Allocated(MB)'"
    assert any(w.startswith(note) for w in summary.warnings), summary.warnings
    assert note in from_memory_record(out / "memory_record.csv").origin

    other_unit = (
        "Component,Timestamp(ns),Total Allocated(KB),Device Type\nPTA,1699529622790611000,10240,NPU:0\n"
    )
    (out / "memory_record.csv").write_text(other_unit)
    summary = ascend_output.summary_of(d)
    assert summary.memory == {}
    assert any(w.startswith("memory_record.csv: 1 row(s) have no number") for w in summary.warnings)
    (out / "memory_record.csv").write_text(other_unit.splitlines()[0] + "\n")
    assert "no memory_record.csv rows: no memory figures" in ascend_output.summary_of(d).warnings


def test_memory_record_rows_of_a_quote_left_open_or_bytes_no_utf8_are_said_with_their_lines(
    tmp_path: Path,
) -> None:
    """helper-202: in memory_record.csv a quote not closed on its line read the lines after it into one
    cell (their records lost, said as one row of no number), and bytes that are no UTF-8 in a Component put
    a record in a pool of its own, left out unsaid. Both are left out and said with their lines, by analyse
    and by memory-timeline. In-process, no subprocess."""
    from npuprof.analysis import ascend_output
    from npuprof.reports.memory_timeline import from_memory_record

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    rows = [
        ["PTA", "1699529622790611\t", 10.0, 20.0, 10.0, 1, "NPU:0"],  # line 2
        ["PTA", "1699529622790620\t", 70.0, 80.0, 10.0, 1, "NPU:0"],  # line 3: a byte no UTF-8 in PTA
        ["PTA", "1699529622790630\t", 30.0, 40.0, 10.0, 1, "NPU:0"],
        ["PTA", "1699529622790640\t", 90.0, 95.0, 10.0, 1, "NPU:0"],  # line 5: a quote opened, never closed
        ["PTA", "1699529622790650\t", 95.0, 99.0, 10.0, 1, "NPU:0"],
    ]
    _memory_record(out, rows)
    table = out / "memory_record.csv"
    lines = table.read_bytes().split(b"\r\n")
    lines[2], lines[4] = lines[2].replace(b"PTA", b"P\xffTA"), b'"' + lines[4]
    table.write_bytes(b"\r\n".join(lines))
    whole = [rows[0], rows[2]]
    expected = {"peak_allocated_mb": max(r[2] for r in whole), "peak_reserved_mb": max(r[3] for r in whole)}
    summary = ascend_output.summary_of(d)
    assert summary.memory == expected
    quote = (
        "memory_record.csv: a quote at line 5 is not closed on its line: the 1 line(s) after it were "
        "misread, their rows lost"
    )
    not_text = "memory_record.csv: 1 line(s) are not UTF-8 text (damaged bytes; line 3): left out"
    said = " ".join(summary.warnings)
    assert quote in said and not_text in said, summary.warnings
    assert "no number" not in said
    origin = from_memory_record(table).origin
    assert quote in origin and not_text in origin, origin


def test_a_step_table_cut_short_leaves_its_last_row_out_and_says_so(tmp_path: Path) -> None:
    """helper-201: step_trace_time.csv cut by a copy (no line break at its end, the last row short:
    "0,2,200,2") read that row as step 2 of made-up figures, said only as "no value for ... (counted as
    0)". The short row is left out and said, as kernel_details.csv's are. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    table.write_bytes(table.read_bytes() + b"0,2,200,2")
    summary = ascend_output.summary_of(d)
    assert [(s.step, s.duration_us) for s in summary.steps] == [(1, 55.0)]  # 50 + 1 + 4
    said = " ".join(summary.warnings)
    assert "step_trace_time.csv looks cut short (1 row(s) with fewer cells than its header): left out" in said
    assert "no value for" not in said
    table.write_bytes(table.read_bytes().split(b"\n", 1)[0] + b"\n0,2,200,2")
    with pytest.raises(ascend_output.AscendTableError, match=r"has no rows whole: .* looks cut short"):
        ascend_output.summary_of(d)


def test_an_unclosed_quote_in_the_step_table_says_the_rows_it_took(tmp_path: Path) -> None:
    """helper-201: a quote never closed in step_trace_time.csv read the rest of the file into one cell:
    the later steps vanished, said only as "no value for Preparing". The loss is said, with its line.
    In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    steps = [_step(n, 50.0, 1.0, 4.0, 1.0) for n in (1, 2, 3, 4)]
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    table = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    lines = table.read_bytes().split(b"\r\n")  # csv.writer's line end; lines 1 (header) to 5 (step 4)
    lines[2] = lines[2].replace(b",2,", b',"2,', 1)  # line 3, step 2's row: its Step cell opens a quote
    table.write_bytes(b"\r\n".join(lines))
    summary = ascend_output.summary_of(d)
    assert [s.step for s in summary.steps] == [1]
    said = " ".join(summary.warnings)
    assert "step_trace_time.csv: a quote at line 3 is not closed on its line: the 2 line(s) after it" in said


def test_a_quote_never_closed_on_the_step_tables_last_line_is_said_as_such(tmp_path: Path) -> None:
    """helper-202: a quote opened on step_trace_time.csv's last line (the file ending in its cell) was said
    as "the 0 line(s) after it were read into one cell, their rows lost": no line was. It is said as a
    quote never closed, that row left out. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(n, 50.0, 1.0, 4.0, 1.0) for n in (1, 2, 3)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    lines = table.read_bytes().split(b"\r\n")  # header, steps 1 to 3 (line 4), b"" after the last line end
    assert lines[-1] == b"" and len(lines) == 5
    lines[3] = lines[3].replace(b",3,", b',"3,', 1)
    table.write_bytes(b"\r\n".join(lines))
    summary = ascend_output.summary_of(d)
    assert [s.step for s in summary.steps] == [1, 2]
    said = " ".join(summary.warnings)
    assert "step_trace_time.csv: a quote at line 4 is never closed" in said, summary.warnings
    assert "0 line(s)" not in said and "cut short" not in said


def test_a_step_table_whose_every_row_is_damaged_says_why_it_has_no_rows(tmp_path: Path) -> None:
    """helper-202: a step_trace_time.csv whose only row was damaged (a quote left open, bytes that are no
    UTF-8) cost the rank its report as "has no rows", the damage unsaid (the warnings that said it are
    dropped with the rank's summary). The error says it. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    header, row, end = table.read_bytes().split(b"\r\n")
    for damaged, said in (
        (row.replace(b",1,", b',"1,', 1), "a quote at line 2 is never closed"),
        (row.replace(b",1,", b",\xff1,", 1), "1 line(s) are not UTF-8 text (damaged bytes; line 2)"),
    ):
        table.write_bytes(b"\r\n".join([header, damaged, end]))
        with pytest.raises(ascend_output.AscendTableError, match=r"has no rows whole: ") as raised:
            ascend_output.summary_of(d)
        assert said in str(raised.value)


def test_a_step_table_line_of_bytes_that_are_no_utf8_is_left_out_and_said(tmp_path: Path) -> None:
    """helper-201: a line of step_trace_time.csv that was no UTF-8 (damaged bytes) read as a step "-" of
    zeros, said only as "no value for ... (counted as 0)". It is left out and said. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(n, 50.0, 1.0, 4.0, 1.0) for n in (1, 2)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    lines = table.read_bytes().split(b"\r\n")
    table.write_bytes(b"\r\n".join([*lines[:2], b"\xff\xfe\x80garbage", *lines[2:]]))  # line 3
    summary = ascend_output.summary_of(d)
    assert [s.step for s in summary.steps] == [1, 2]
    said = " ".join(summary.warnings)
    assert "step_trace_time.csv: 1 line(s) are not UTF-8 text (damaged bytes; line 3): left out" in said
    assert "counted as 0" not in said and "cut short" not in said


def test_kernel_rows_of_a_quote_left_open_or_bytes_no_utf8_are_said_with_their_lines(tmp_path: Path) -> None:
    """helper-202: in kernel_details.csv a quote not closed on its line read the lines after it into one cell
    (their kernels lost, said only as a row "cut short"), and bytes that are no UTF-8 gave a kernel a name of
    U+FFFD, unsaid. The rows are left out, said with their lines; a row whose damaged bytes are in its name
    only keeps its figures and is kept, said. The real 2023 table, damaged here; expected values from its
    undamaged lines. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    lines = (REAL / "kernel_details_2023.csv").read_bytes().split(b"\n")  # lines[0]: line 1, the header
    quoted = next(i for i, line in enumerate(lines) if i and b'"' not in line)  # an HCCL row: no quotes
    closes = next(i for i in range(quoted + 1, len(lines)) if b'"' in lines[i])  # the next quote closes it
    name_at, duration_at = closes + 3, closes + 6
    damaged = list(lines)
    for at, cell, edit in ((quoted, 4, b'"%s'), (name_at, 4, b"%s\xff!"), (duration_at, 8, b"\xfe%s")):
        cells = damaged[at].split(b",", 9)  # Name is the 5th cell, Duration(us) the 9th: no quote before
        cells[cell] = edit % cells[cell]
        damaged[at] = b",".join(cells)
    (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_bytes(b"\n".join(damaged))

    kept = [line for i, line in enumerate(lines) if not quoted <= i <= closes and i != duration_at]
    rows = list(csv.DictReader(b"\n".join(kept).decode("utf-8-sig").splitlines()))
    summary = ascend_output.summary_of(d)
    assert (
        summary.events
        == sum(k.count for k in summary.kernel_totals)
        == len(rows)
        == len(lines) - 2 - (closes - quoted + 1) - 1
    )
    assert math.isclose(
        sum(k.total_us for k in summary.kernel_totals),
        sum(float(r["Duration(us)"]) for r in rows),
        abs_tol=0.01,
    )
    name = damaged[name_at].split(b",")[4].decode("utf-8", "replace")
    assert name.endswith("\ufffd!") and name in {k.name for k in summary.kernel_totals}
    said = " ".join(summary.warnings)
    assert (
        f"kernel_details.csv: a quote at line {quoted + 1} is not closed on its line: the {closes - quoted} "
        "line(s) after it were misread, their rows lost" in said
    ), summary.warnings
    assert (
        f"kernel_details.csv: 1 line(s) are not UTF-8 text (damaged bytes; line {duration_at + 1}): left"
        in said
    )
    assert (
        f"kernel_details.csv: 1 line(s) are not UTF-8 text in 'Name' only (damaged bytes; line {name_at + 1})"
        in said
    )
    assert "cut short" not in said and "no number for" not in said


def test_operator_rows_of_a_quote_left_open_or_bytes_no_utf8_are_said_and_torch_npus_own_lines_kept(
    tmp_path: Path,
) -> None:
    """helper-202: in operator_details.csv a quote not closed on its line read the lines after it into one
    cell, read as an operator of that text, and the rest of the row whose quote closed it as one named "8"
    with its times; bytes that are no UTF-8 named an operator U+FFFD; all unsaid. The rows are left out and
    said with their lines (one damaged in its name only is kept, said). torch_npu's own cells of lines
    (Input Shapes, Call Stack: a break after each ";") are no damage. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    header = ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER]
    rows = [
        ["aten::mm", "4,4;\r\n4,4", "a.py(1): f;\r\nb.py(2): g", 10, 20, 5, 5, 0, 0],
        ["aten::add", "", "", 3, 3, 1, 1, 0, 0],  # a quote opened before its name
        ["aten::relu", "", "", 2, 2, 1, 1, 0, 0],
        ["aten::mm", "8,8;\r\n8,8", "a.py(1): f;\r\nc.py(3): h", 30, 40, 6, 6, 0, 0],  # closes that quote
        ["aten::add", "", "", 4, 5, 1, 1, 0, 0],  # a byte no UTF-8 in its name
        ["aten::mul", "", "", 7, 7, 1, 1, 0, 0],  # one in its Host Self Duration(us)
        ["aten::mm", "2,2", "a.py(1): f;\r\nb.py(2): g", 1, 1, 1, 1, 0, 0],
    ]
    with open(d / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv", "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    table = d / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv"
    data = table.read_bytes()
    line_of, at = [], 2  # the line each row starts on (the header is line 1): a row of n breaks takes n + 1
    for row in rows:
        line_of.append(at)
        at += 1 + sum(str(cell).count("\r\n") for cell in row)
    data = data.replace(b"\r\naten::add,,,3,", b'\r\n"aten::add,,,3,', 1)
    data = data.replace(b"\r\naten::add,,,4,", b"\r\naten::a\xffdd,,,4,", 1)
    data = data.replace(b"\r\naten::mul,,,7,", b"\r\naten::mul,,,\xfe7,", 1)
    table.write_bytes(data)

    expected: dict[str, list[float]] = {}
    for k, row in enumerate(rows):
        if k in (1, 2, 3, 5):  # the quote's row, the rows it took, the one whose quote closed it; aten::mul
            continue
        name = "aten::a\ufffddd" if k == 4 else str(row[0])
        acc = expected.setdefault(name, [0, 0.0, 0.0, 0.0])
        for i, value in enumerate((1, row[3], row[4], row[6])):
            acc[i] += float(value)
    summary = ascend_output.summary_of(d)
    got = {o.name: [o.count, o.self_us, o.total_us, o.device_us] for o in summary.operator_totals}
    assert got == expected
    said = " ".join(summary.warnings)
    taken = line_of[4] - 1 - line_of[1]  # to the end of the row whose quote closed it
    assert (
        f"operator_details.csv: a quote at line {line_of[1]} is not closed on its line: the {taken} line(s) "
        "after it were misread, their rows lost" in said
    ), summary.warnings
    assert (
        f"operator_details.csv: 1 line(s) are not UTF-8 text (damaged bytes; line {line_of[5]}): left" in said
    )
    kept = f"1 line(s) are not UTF-8 text in 'Name' only (damaged bytes; line {line_of[4]}): kept"
    assert f"operator_details.csv: {kept}" in said
    assert "no duration" not in said


def test_step_ids_are_ascii_digits_and_others_are_said_as_such(tmp_path: Path) -> None:
    """helper-201: step ids were read as floats: a Step "1_0" was step 10 (float() takes underscores),
    "1e300" a step '-' said to be "not a whole number", a kernel_details.csv Step Id of 1.5 put its kernel
    in no step without a word. A step written "4.0" (a writer through pandas, a column of ints with gaps) is
    still step 4, as before. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    steps = [_step(k, 50.0, 1.0, 4.0, 1.0) for k in (1, 2, 3, 4)]
    steps[1][1], steps[2][1], steps[3][1] = "1_0", "1e300", "4.0"
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    out = d / "ASCEND_PROFILER_OUTPUT"
    kernels = _kernels("kernel_details_2023.csv")
    kernels[0]["Step Id"] = "1.5"
    with open(out / "kernel_details.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(kernels[0]))
        writer.writeheader()
        writer.writerows(kernels)
    summary = ascend_output.summary_of(d)
    assert [s.step for s in summary.steps] == [1, None, None, 4]
    said = " ".join(summary.warnings)
    assert (
        "step_trace_time.csv has 2 Step cell(s) that are no step number (ASCII digits, at most 18: '1_0', "
        "'1e300')" in said
    )
    assert (
        "kernel_details.csv has 1 Step Id cell(s) that are no step number (ASCII digits, at most 18: "
        "'1.5'): in no" in said
    )


def test_negative_communication_times_and_sizes_are_damage_said_not_summed(tmp_path: Path) -> None:
    """helper-201: communication.json's 'Elapse Time(ms)' -1 and 'Transit Size(MB)' -2 were added in
    without a word (time_us -1000). They are counted as damaged cells are, and said. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])

    def op(ms: float, mb: float) -> dict:
        return {
            "Communication Time Info": {"Elapse Time(ms)": ms},
            "Communication Bandwidth Info": {
                "RDMA": {"Transit Size(MB)": mb},
                "HCCS": {"Transit Size(MB)": 1},
            },
        }

    data = {"step1": {"collective": {"a": op(-1.0, -2.0), "b": op(3.0, 4.0)}}}
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(data))
    summary = ascend_output.summary_of(d)
    # a: no time, its HCCS 1 MB only; b: 3 ms, 4 + 1 MB
    assert summary.communication == {"operators": 2, "time_us": 3000.0, "size_mb": 6.0}
    said = " ".join(summary.warnings)
    assert (
        "1 operation(s) have no 'Elapse Time(ms)' that is a duration (no number, a negative one, or one past "
        "9.2e+12 ms: beyond 2**63 ns): counted without their time" in said
    )
    assert (
        "communication.json: 1 operation(s) have a 'Transit Size(MB)' that is no size (no number, or a"
        in said
    )


def test_memory_records_of_a_negative_time_are_left_out_and_said(tmp_path: Path) -> None:
    """helper-201: a memory_record.csv Timestamp(us) of -5 was read as a time, before every step: its
    record counted as what each step started with (a peak of 900 MB no step had). Left out and said."""
    from npuprof.analysis import ascend_output
    from npuprof.reports.memory_timeline import from_memory_record

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    first_task = min(float(k["Start Time(us)"]) for k in _kernels("kernel_details_2023.csv"))
    rows = [
        ["PTA", "-5", 900.0, 950.0, 10.0, 1, "NPU:0"],
        ["PTA", f"{first_task:.3f}\t", 30.0, 40.0, 10.0, 1, "NPU:0"],
    ]
    _memory_record(out, rows)
    summary = ascend_output.summary_of(d)
    assert summary.memory == {"peak_allocated_mb": 30.0, "peak_reserved_mb": 40.0}
    (step,) = summary.steps
    assert step.memory_peak_mb == 30.0
    note = "1 row(s) have no number for 'Timestamp(us)' or 'Total Allocated(MB)', or a negative time"
    note = f"memory_record.csv: {note}"
    assert any(w.startswith(note) for w in summary.warnings), summary.warnings
    assert note in from_memory_record(out / "memory_record.csv").origin


def _torch_npu_capture_without_device_tables(root: Path) -> Path:
    """A torch_npu capture as the script's own profiler leaves it when it cuts npuprof's capture off at a
    step's start: complete, torch_npu's parse ran (its trace_view.json, its operator table) but wrote no
    kernel_details.csv or step_trace_time.csv, there being no device work; its PROF_* raw data kept."""
    d = root / "w_4242_20261206081217148_ascend_pt"
    (d / "PROF_000001_20261206081217153_ABCDEFGHIJKLMNOP" / "device_0" / "data").mkdir(parents=True)
    (d / "profiler_info.json").write_text(json.dumps({"config": {}}))
    tables = d / "ASCEND_PROFILER_OUTPUT"
    tables.mkdir()
    step = {
        "ph": "X",
        "name": "ProfilerStep#3",
        "pid": 1,
        "tid": 1,
        "ts": "1796544737150000.000",
        "dur": 1184,
    }
    (tables / "trace_view.json").write_text(json.dumps([step]))
    (tables / "operator_details.csv").write_text("Name,Input Shapes\nOptimizer.zero_grad#SGD.zero_grad,\n")
    record = {"status": "complete", "run_id": "r1", "pid": 4242, "backend": "torch_npu", "steps": [3]}
    record.update(detail="the training script started its own profiler", last_step_partial=True, parse=True)
    (d / "npuprof_capture.json").write_text(json.dumps(record))
    return d


def test_a_capture_torch_npu_parsed_without_device_tables_is_not_said_unparsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-214: a capture the script's profiler cut off at a step boundary holds no device work, and
    torch_npu's parse writes no kernel or step table for it; the run said "1 complete capture(s) not parsed
    when npuprof ended ...: npuprof analyse parses them", though torch_npu had parsed it."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import captures_of_run

    _torch_npu_capture_without_device_tables(tmp_path)
    (capture,) = captures_of_run(tmp_path, "r1")
    assert capture.parsed, capture
    assert capture.detail.startswith(
        "the training script started its own profiler; step 3 is partial; torch_npu parsed it but"
    )
    log = tmp_path / "npuprof.log"
    log.write_text("2026-12-06 08:12:15 [INFO] [launcher pid=6 run=r1] run r1 starts: python own.py\n")
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    assert "not parsed" not in said and "npuprof analyse parses them" not in said, said
    assert "wrote no kernel_details.csv or step_trace_time.csv: it found no device work there" in said, said


def test_analyse_reads_the_trace_view_of_a_capture_torch_npu_parsed_without_device_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-214: where torch_npu is installed, analyse ran its parser again on such a capture (its raw
    data kept), which again wrote no table, and said "failed: torch_npu's parser wrote none of its tables";
    without torch_npu the same capture was reported from its trace_view.json."""
    import types

    from npuprof.analysis import report
    from npuprof.analysis.parse import parse_rank_dir

    d = _torch_npu_capture_without_device_tables(tmp_path)
    parses: list[str] = []
    module = types.ModuleType("torch_npu.profiler.profiler")
    module.analyse = parses.append  # type: ignore[attr-defined]  # torch_npu's parse: nothing more written
    for name in ("torch_npu", "torch_npu.profiler", "torch_npu.profiler.profiler"):
        monkeypatch.setitem(sys.modules, name, module)
    outcome = parse_rank_dir(d)
    assert parses == [str(d)]
    assert outcome.status == "missing", outcome
    assert "torch_npu parsed it but wrote no kernel_details.csv" in outcome.reason
    notes: list[str] = []
    instead = report._trace_view_instead(outcome, False, 1, False, notes.append)
    assert instead is not None and instead[0].ok, (instead, notes)
    assert "trace_view.json is analysed instead" in notes[0]


def test_a_raw_capture_of_the_cpu_activity_alone_is_parsed_by_torch_npu_not_said_to_hold_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-273: torch_npu's capture of the CPU activity alone leaves FRAMEWORK/ and no PROF_* (no CANN
    data); unparsed, it was "missing: no trace in this directory", torch_npu's parser never run on it, and
    without torch_npu nothing said it was needed."""
    import types

    from npuprof.analysis.parse import parse_rank_dir

    d = tmp_path / "w_4242_20261206081217148_ascend_pt"
    (d / "FRAMEWORK").mkdir(parents=True)
    (d / "FRAMEWORK" / "torch.op_range").write_bytes(b"\x00" * 64)
    (d / "profiler_info_0.json").write_text(json.dumps({"config": {}, "rank_id": 0}))
    names = ("torch_npu", "torch_npu.profiler", "torch_npu.profiler.profiler")
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)  # not installed: its import fails
    outcome = parse_rank_dir(d)
    assert outcome.status == "needs_torch_npu", outcome
    parses: list[str] = []
    module = types.ModuleType("torch_npu.profiler.profiler")
    module.analyse = parses.append  # type: ignore[attr-defined]  # torch_npu's parse, writing nothing here
    for name in names:
        monkeypatch.setitem(sys.modules, name, module)
    outcome = parse_rank_dir(d)
    assert parses == [str(d)], outcome
    assert outcome.status == "failed", outcome


@pytest.mark.parametrize("raw", ["FRAMEWORK", "PROF_000001_20261206081217153_ABCDEFGHIJKLMNOP"])
def test_stacks_and_memory_of_raw_data_not_parsed_yet_send_to_its_parse_not_to_capture_again(
    tmp_path: Path, raw: str
) -> None:
    """helper-273: export-stacks said a rank dir of torch_npu's raw data, not parsed yet, "has no trace", and
    memory-timeline sent the user to capture again with --profile-memory: its parse writes the trace."""
    from npuprof.reports import memory_timeline
    from npuprof.reports.inputs import InputError, find_trace

    d = tmp_path / "w_4242_20261206081217148_ascend_pt"
    (d / raw).mkdir(parents=True)
    (d / "profiler_info_0.json").write_text(json.dumps({"config": {}, "rank_id": 0}))
    with pytest.raises(InputError) as stacks:
        find_trace(d)
    with pytest.raises(memory_timeline.MemoryTimelineError) as memory:
        memory_timeline.load(d)
    for said in (str(stacks.value), str(memory.value)):
        assert f"{d} has no trace yet: it holds torch_npu's raw data (FRAMEWORK/, PROF_*), unparsed" in said
        assert f"run `npuprof analyse {d}` where torch_npu and CANN are installed" in said
        assert "capture with" not in said, said


def test_warnings_and_notes_naming_a_rank_dir_with_a_newline_stay_one_line_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-273: a rank dir whose name holds a newline split each warning, note and "not analysed" line
    naming it in two, the second line no npuprof's."""
    from npuprof.cli.analyse import analyse

    steps = [_step(1, 100.0, 20.0, 30.0, 5.0)]
    first = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps, stamp=123)
    second = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps, stamp=456)
    second = second.rename(second.with_name("node0\nb_4000_20240101120000456_ascend_pt"))
    raw = tmp_path / "node1\nc_4001_20240101120000123_ascend_pt"
    (raw / "FRAMEWORK").mkdir(parents=True)
    for name in ("torch_npu", "torch_npu.profiler", "torch_npu.profiler.profiler"):
        monkeypatch.setitem(sys.modules, name, None)  # not installed: the raw one is not analysed
    analyse(str(tmp_path), fmt="json")
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("npuprof analyse: ") for line in lines), lines
    shown = [line for line in lines if "node0\\x0ab_" in line]
    assert any(line.startswith("npuprof analyse: warning: ") for line in shown), lines  # no operator_details
    assert any(first.name in line and "step 1 in 2 captures" in line for line in shown), lines
    not_analysed = [line for line in lines if line.startswith("npuprof analyse: not analysed: ")]
    assert any("node1\\x0ac_" in line for line in not_analysed), lines


def test_msprof_analyzes_cluster_output_is_named_with_the_result_dir_to_give(tmp_path: Path) -> None:
    """helper-273: msprof-analyze writes cluster_analysis_output/ into the result dir it reads; given it (or
    its real cluster_step_trace_time.csv) the readers said only "no rank directory" or "neither a result
    directory nor a trace file", and memory-timeline read that table as a memory_record.csv of no
    records."""
    from npuprof.analysis.report import NothingToAnalyse, build_report
    from npuprof.reports import memory_timeline
    from npuprof.reports.inputs import InputError, find_trace

    result = tmp_path / "result"
    _rank_dir(result, 0, "kernel_details_2023.csv", [_step(1, 100.0, 20.0, 30.0, 5.0)])
    output = result / "cluster_analysis_output"
    output.mkdir()
    table = output / "cluster_step_trace_time.csv"
    shutil.copyfile(REAL / table.name, table)
    said = f"msprof-analyze's cluster output of the result directory {result} (its tables across ranks), "
    said += f"not a capture: give that directory, {result}"
    for given in (output, table):
        with pytest.raises(NothingToAnalyse) as analysed:
            build_report(given, jobs=1)
        assert said in str(analysed.value), analysed.value
    with pytest.raises(InputError) as stacks:
        find_trace(output)
    with pytest.raises(memory_timeline.MemoryTimelineError) as memory:
        memory_timeline.load(table)
    assert said in str(stacks.value) and said in str(memory.value), (stacks.value, memory.value)


def test_a_step_whose_tasks_lost_their_step_id_is_not_said_to_have_no_task(tmp_path: Path) -> None:
    """helper-273: a kernel_details.csv whose Step Id cells were all emptied (a spreadsheet's edit) gave "no
    start time for steps [1] (no task in kernel_details.csv, ...)" of a table of 591 tasks."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 100.0, 20.0, 30.0, 5.0)])
    rows = _kernels("kernel_details_2023.csv")
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "Step Id": ""} for row in rows)
    summary = ascend_output.summary_of(d)
    (said,) = [w for w in summary.warnings if w.startswith("no start time for steps [1]")]
    tasks = len(rows)
    assert f"no task of theirs in kernel_details.csv: {tasks} of its {tasks} tasks have no Step Id" in said
    assert [s.start_us for s in summary.steps] == [ascend_output.UNKNOWN_START]


def test_a_capture_torch_npus_parse_left_without_tables_is_not_blamed_on_a_post_processor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-214: torch_npu parses a capture in the job's own process (npuprof starts no post-processor for
    it); when that parse failed the run said "not parsed when npuprof ended (a post-processor stopped,
    killed, or still at work in the background: see npuprof.log)", and npuprof.log said nothing of it."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import captures_of_run

    d = _torch_npu_capture_without_device_tables(tmp_path)
    shutil.rmtree(d / "ASCEND_PROFILER_OUTPUT")  # its parse failed: nothing written
    (d / "FRAMEWORK").mkdir()
    (capture,) = captures_of_run(tmp_path, "r1")
    assert (capture.parsed, capture.backend) == (False, "torch_npu"), capture
    log = tmp_path / "npuprof.log"
    log.write_text("2026-12-06 08:12:15 [INFO] [launcher pid=6 run=r1] run r1 starts: python own.py\n")
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    assert "post-processor" not in said, said
    assert (
        "1 complete capture(s) not parsed when npuprof ended (torch_npu's own parse, run in the job's "
        "process at each capture's end, wrote none of its tables into ASCEND_PROFILER_OUTPUT/: its [ERROR] "
        "or [WARNING] lines in the job's output say why): npuprof analyse runs torch_npu's parser on them "
        "again"
    ) in said, said


def test_operator_and_memory_rows_of_more_or_fewer_cells_than_the_header_are_left_out_and_said(
    tmp_path: Path,
) -> None:
    """helper-217: operator_details.csv and memory_record.csv rows with fewer or more cells than the header
    were read shifted, unsaid: an operator that lost its Call Stack cell had its Device Total as its Host
    Total, a memory record that lost a cell its Total Active as its reserved size, one with a cell too many
    in front its Timestamp as its allocated size (said as "no number"). They are left out and said with
    their lines, as step_trace_time.csv's short rows are; the good rows still read. In-process."""
    from npuprof.analysis import ascend_output
    from npuprof.reports.memory_timeline import from_memory_record

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    header = ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER]
    rows: list[list[object]] = [
        ["aten::mm", "", "", 10, 20, 5, 5, 0, 0],
        ["aten::add", "", 3, 30, 1, 1, 0, 0],  # line 3: its Call Stack cell lost
        ["aten::relu", "", "", "", 2, 2, 1, 1, 0, 0],  # line 4: a cell too many
        ["aten::add", "", "", 7, 8, 1, 1, 0, 0],
    ]
    with open(out / "operator_details.csv", "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    t = 1699529622790611
    records: list[list[object]] = [
        ["PTA", t, 10.0, 20.0, 10.0, 1, "NPU:0"],
        ["PTA", t + 10, 20.0, 40.0, 1, "NPU:0"],  # line 3: Total Reserved(MB) lost
        ["x", "PTA", t + 20, 30.0, 90.0, 10.0, 1, "NPU:0"],  # line 4: a cell too many in front
        ["PTA", t + 30, 12.0, 25.0, 12.0, 1, "NPU:0"],
        ["PTA", t + 40, 5.0],  # line 6: cut short
    ]
    _memory_record(out, records)
    with open(out / "operator_details.csv", newline="") as f:
        whole = [r for r in csv.DictReader(f) if None not in r and None not in r.values()]
    expected: dict[str, list[float]] = {}
    for r in whole:
        acc = expected.setdefault(r["Name"], [0, 0.0, 0.0, 0.0])
        for i, column in enumerate(("Host Self Duration(us)", "Host Total Duration(us)"), 1):
            acc[i] += float(r[column])
        acc[0] += 1
        acc[3] += float(r["Device Total Duration(us)"])
    assert expected == {"aten::mm": [1, 10.0, 20.0, 5.0], "aten::add": [1, 7.0, 8.0, 1.0]}
    summary = ascend_output.summary_of(d)
    got = {o.name: [o.count, o.self_us, o.total_us, o.device_us] for o in summary.operator_totals}
    assert got == expected
    with open(out / "memory_record.csv", newline="") as f:
        good = [r for r in csv.DictReader(f) if None not in r and None not in r.values()]
    assert summary.memory == {
        "peak_allocated_mb": max(float(r["Total Allocated(MB)"]) for r in good),
        "peak_reserved_mb": max(float(r["Total Reserved(MB)"]) for r in good),
    }
    said = " ".join(summary.warnings)
    for note in (
        "operator_details.csv looks cut short (1 row(s) with fewer cells than its header): left out of the "
        "top operators (line 3)",
        "operator_details.csv has 1 row(s) with more cells than its header (two rows run together?): left "
        "out of the top operators (line 4)",
        "memory_record.csv looks cut short (2 row(s) with fewer cells than its header): left out of the "
        "memory figures (line 3, 6)",
        "memory_record.csv has 1 row(s) with more cells than its header (two rows run together?): left out "
        "of the memory figures (line 4)",
    ):
        assert note in said, summary.warnings
    assert "no number" not in said
    timeline = from_memory_record(out / "memory_record.csv")
    assert "memory_record.csv looks cut short (2 row(s)" in timeline.origin
    assert "more cells than its header" in timeline.origin


def test_a_quote_never_closed_on_a_last_line_without_a_line_break_is_said_alike_in_every_table(
    tmp_path: Path,
) -> None:
    """helper-217: a quote opened on a table's last line, the file ending there without a line break (a cut
    copy), left no sign in the cells (csv reads the text up to the end as the cell): opened before the
    row's last cells it was said "cut short" (step_trace_time.csv, kernel_details.csv; "no number" in
    memory_record.csv and nothing in operator_details.csv before their short rows were said), and opened
    in the last cell the row was read as whole, unsaid. Each table says it as the quote never closed it
    is, that row left out; the rows before it read. The real 2025 kernel table, which ends without a line
    break. In-process, no subprocess."""
    from npuprof.analysis import ascend_output
    from npuprof.reports.memory_timeline import from_memory_record

    tables = {
        "step_trace_time.csv": "the steps",
        "kernel_details.csv": "the top kernels and the steps' starts",
        "operator_details.csv": "the top operators",
        "memory_record.csv": "the memory figures",
    }
    for cells_after in (0, 2):  # the quote opens the last cell, or the one two before it
        d = _rank_dir(
            tmp_path / str(cells_after),
            0,
            "kernel_details_2025.csv",
            [_step(n, 5.0, 1.0, 4.0, 1.0) for n in (1, 2)],
        )
        out = d / "ASCEND_PROFILER_OUTPUT"
        with open(out / "operator_details.csv", "w", newline="") as f:
            csv.writer(f).writerows(
                [
                    ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER],
                    ["aten::mm", "", "", 10, 20, 5, 5, 0, 0],
                    ["aten::add", "", "", 3, 4, 1, 1, 0, 0],
                ]
            )
        t = 1699529622790611
        _memory_record(
            out, [["PTA", t, 10.0, 20.0, 10.0, 1, "NPU:0"], ["PTA", t + 10, 99.0, 99.0, 1, 1, "NPU:0"]]
        )
        whole: dict[str, list[dict[str, str]]] = {}
        for name in tables:
            data = (out / name).read_bytes().rstrip(b"\r\n")
            last = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            cell = len(data)
            for _ in range(cells_after + 1):
                cell = data.rfind(b",", 0, cell)
            assert cell > last and b'"' not in data[cell:]
            (out / name).write_bytes(data[: cell + 1] + b'"' + data[cell + 1 :])  # no line break after it
            whole[name] = list(csv.DictReader(data[:last].decode("utf-8-sig").splitlines()))
        summary = ascend_output.summary_of(d)
        said = " ".join(summary.warnings)
        for name, then in tables.items():
            line = len(whole[name]) + 2
            never = "is never closed (the table ends inside it: a cut line?)"
            assert f"{name}: a quote at line {line} {never}: that row is left out of {then}" in said, said
        assert "cut short" not in said and "no number" not in said and "no duration" not in said
        assert (
            [s.step for s in summary.steps] == [int(r["Step"]) for r in whole["step_trace_time.csv"]] == [1]
        )
        kernels = whole["kernel_details.csv"]
        assert summary.events == len(kernels) == 28
        assert math.isclose(
            sum(k.total_us for k in summary.kernel_totals),
            sum(float(r["Duration(us)"]) for r in kernels),
            abs_tol=0.01,
        )
        assert [(o.name, o.self_us, o.total_us) for o in summary.operator_totals] == [
            (r["Name"], float(r["Host Self Duration(us)"]), float(r["Host Total Duration(us)"]))
            for r in whole["operator_details.csv"]
        ]
        (record,) = whole["memory_record.csv"]
        assert summary.memory == {
            "peak_allocated_mb": float(record["Total Allocated(MB)"]),
            "peak_reserved_mb": float(record["Total Reserved(MB)"]),
        }
        origin = from_memory_record(out / "memory_record.csv").origin
        assert "memory_record.csv: a quote at line 3 is never closed" in origin


def test_step_and_kernel_rows_of_more_cells_than_the_header_are_left_out_and_said(tmp_path: Path) -> None:
    """helper-217: only rows of fewer cells were told in step_trace_time.csv and kernel_details.csv: a step
    row with a cell too many in front was read as step 0 of its columns' neighbours' figures, and two
    kernel rows run together (a line break lost) as one kernel, the second lost; both unsaid. They are left
    out and said with their lines, as operator_details.csv's and memory_record.csv's. The real 2023 table,
    damaged here; expected values from its whole rows. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    steps = [
        _step(1, 50.0, 1.0, 4.0, 1.0),
        ["x", *_step(2, 60.0, 1.0, 4.0, 1.0)],
        _step(3, 70.0, 1.0, 4.0, 1.0),
    ]
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    table = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = table.read_bytes().split(b"\n")
    lines[5:7] = [lines[5] + b"," + lines[6]]  # line 6: the rows of lines 6 and 7 run together
    table.write_bytes(b"\n".join(lines))
    with open(table, newline="", encoding="utf-8-sig") as f:
        kernels = [r for r in csv.DictReader(f) if None not in r]
    summary = ascend_output.summary_of(d)
    assert summary.events == len(kernels) == len(_kernels("kernel_details_2023.csv")) - 2
    assert math.isclose(
        sum(k.total_us for k in summary.kernel_totals),
        sum(float(r["Duration(us)"]) for r in kernels),
        abs_tol=0.01,
    )
    assert [(s.step, s.duration_us) for s in summary.steps] == [(1, 55.0), (3, 75.0)]
    said = " ".join(summary.warnings)
    more = "row(s) with more cells than its header (two rows run together?): left out of"
    assert f"kernel_details.csv has 1 {more} the top kernels and the steps' starts (line 6)" in said, said
    assert f"step_trace_time.csv has 1 {more} the steps (line 3)" in said, said


def test_a_quote_left_open_past_csvs_field_limit_keeps_the_rows_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-217: a quote left open in memory_record.csv (no quotes after it) took more than csv's field
    limit (128 KiB) into one cell: csv refused the table, and all its 5,000 records were lost, said as
    "field larger than field limit (131072)". The quote is said as in a small table, the records before it
    read; past npuprof's own limit (CELL_LIMIT, made small here) the table is read up to that row, said.
    In-process, no subprocess."""
    from npuprof.analysis import ascend_output
    from npuprof.reports.memory_timeline import from_memory_record

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    t = 1699529622790611
    _memory_record(out, [["PTA", f"{t + k}\t", 10.0 + k % 50, 200.0, 10.0, 1, "NPU:0"] for k in range(5000)])
    lines = (out / "memory_record.csv").read_bytes().split(b"\r\n")
    lines[100] = b'"' + lines[100]  # line 101
    (out / "memory_record.csv").write_bytes(b"\r\n".join(lines))
    assert len(b"".join(lines[100:])) > csv.field_size_limit()
    before = list(csv.DictReader(b"\r\n".join(lines[:100]).decode().splitlines()))
    peak = max(float(r["Total Allocated(MB)"]) for r in before)
    summary = ascend_output.summary_of(d)
    assert summary.memory == {"peak_allocated_mb": peak, "peak_reserved_mb": 200.0}
    said = " ".join(summary.warnings)
    quote = "memory_record.csv: a quote at line 101 is not closed on its line: the 4900 line(s) after it"
    assert quote in said, summary.warnings
    assert "field limit" not in said
    monkeypatch.setattr(ascend_output, "CELL_LIMIT", 1 << 17)
    summary = ascend_output.summary_of(d)
    assert summary.memory == {"peak_allocated_mb": peak, "peak_reserved_mb": 200.0}
    ended = (
        "memory_record.csv: a quote at line 101 is not closed within 0.125 MiB: the table is not read past "
        "it (that row and those after it left out of the memory figures)"
    )
    assert ended in " ".join(summary.warnings), summary.warnings
    assert ended in from_memory_record(out / "memory_record.csv").origin
    assert csv.field_size_limit() == 128 * 1024  # the process's own limit left as it was


def test_an_operator_table_whose_every_row_is_damaged_is_not_said_to_have_no_rows(tmp_path: Path) -> None:
    """helper-217: an operator_details.csv whose only rows were left out as damaged (cut short, a quote left
    open) was said both so and as "no operator_details.csv rows", which it has; the kernel and memory
    tables said only the damage. A table of its header alone still says it has no rows. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv"
    header = ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER]
    for rows, said in (
        ([["aten::mm", "", 10, 20, 5, 5, 0, 0]], "operator_details.csv looks cut short (1 row(s)"),
        ([], "no operator_details.csv rows: no top operators"),
    ):
        with open(table, "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
        summary = ascend_output.summary_of(d)
        assert summary.operator_totals == []
        notes = [w for w in summary.warnings if "operator_details.csv" in w]
        assert len(notes) == 1 and notes[0].startswith(said), summary.warnings


def test_kernel_rows_of_a_negative_duration_or_start_are_said_as_such_not_as_no_number(
    tmp_path: Path,
) -> None:
    """helper-217: kernel_details.csv rows of a negative Duration(us) were left out, said as rows that "have
    no number" for it, which they have; one of a negative Start Time(us) (before 1970) was read, its step
    then starting there (-1.7e15 µs), unsaid. Both are left out and said. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    rows = _kernels("kernel_details_2025.csv")
    rows[3]["Duration(us)"] = "-5.5"
    first = min(range(len(rows)), key=lambda k: float(rows[k]["Start Time(us)"]))
    rows[first]["Start Time(us)"] = "-" + rows[first]["Start Time(us)"]
    d = _rank_dir(tmp_path, 0, "kernel_details_2025.csv", [_step(19, 5000.0, 100.0, 400.0, 12.5)])
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = ascend_output.summary_of(d)
    assert summary.events == len(rows) - 2
    second = min(float(r["Start Time(us)"]) for k, r in enumerate(rows) if k not in (3, first))
    assert summary.steps[0].start_us == round(second - 12.5, 3)
    said = " ".join(summary.warnings)
    assert (
        f"kernel_details.csv: 2 of its {len(rows)} rows have no number for 'Start Time(us)' or "
        "'Duration(us)', or a negative one (a damaged or cut file?)" in said
    ), said


def test_rows_on_one_line_of_text_are_not_looked_at_cell_by_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-217: every cell of every row was looked at for a quote left open or damaged bytes (~100 µs a
    row: a kernel table of 236,400 rows took 25 s to read). A row on one line of UTF-8 text can hold
    neither (unless the table ends inside it): only the others are looked at (the damage they hold is
    still said: the tests above). In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = table.read_bytes().split(b"\n")
    cells = lines[7].split(
        b",", 9
    )  # line 8: a damaged byte in its Duration(us), the 9th cell (no quote before)
    cells[8] = b"\xfe" + cells[8]
    lines[7] = b",".join(cells)
    table.write_bytes(b"\n".join(lines))
    looked: list[dict] = []
    of_row = ascend_output._cells
    monkeypatch.setattr(ascend_output, "_cells", lambda row: looked.append(row) or of_row(row))
    summary = ascend_output.summary_of(d)
    assert summary.events == len(_kernels("kernel_details_2023.csv")) - 1
    assert "kernel_details.csv: 1 line(s) are not UTF-8 text (damaged bytes; line 8)" in " ".join(
        summary.warnings
    )
    assert len(looked) == 1, looked  # the damaged row


def test_rows_of_empty_cells_are_blank_rows_not_steps_of_zeros(tmp_path: Path) -> None:
    """helper-217: a row of empty cells (",,,,": a spreadsheet saves its blank rows so) was read as a step
    '-' of 0 ms in step_trace_time.csv (in the report's steps, said only as "no value ... (counted as 0)"),
    an operator named "" in operator_details.csv, and a damaged row of no number in kernel_details.csv and
    memory_record.csv. Such rows are blank rows, skipped as blank lines are. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(
        tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0), [""] * 11, [""] * 11]
    )
    out = d / "ASCEND_PROFILER_OUTPUT"
    table = out / "kernel_details.csv"
    table.write_bytes(table.read_bytes() + b"," * 32 + b"\n")
    with open(out / "operator_details.csv", "w", newline="") as f:
        header = ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER]
        csv.writer(f).writerows([header, ["aten::mm", "", "", 10, 20, 5, 5, 0, 0], [""] * 9])
    _memory_record(out, [["PTA", 1699529622790611, 10.0, 20.0, 10.0, 1, "NPU:0"], [""] * 7])
    summary = ascend_output.summary_of(d)
    assert [(s.step, s.duration_us) for s in summary.steps] == [(1, 55.0)]
    assert [o.name for o in summary.operator_totals] == ["aten::mm"]
    assert summary.events == len(_kernels("kernel_details_2023.csv"))
    assert summary.memory == {"peak_allocated_mb": 10.0, "peak_reserved_mb": 20.0}
    said = " ".join(summary.warnings)
    assert "counted as 0" not in said and "no number" not in said and "no start time" not in said, said


def test_rows_ending_in_a_comma_the_header_lacks_are_read(tmp_path: Path) -> None:
    """helper-217: rows with more cells than the header are left out (their cells may be another column's),
    but a row whose cells past the header are empty (every row ending in a comma, as some tools write) has
    its cells where the header says: each table is read whole. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(n, 50.0, 1.0, 4.0, 1.0) for n in (1, 2)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    with open(out / "operator_details.csv", "w", newline="") as f:
        header = ["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER]
        csv.writer(f).writerows([header, ["aten::mm", "", "", 10, 20, 5, 5, 0, 0]])
    _memory_record(out, [["PTA", 1699529622790611, 10.0, 20.0, 10.0, 1, "NPU:0"]])
    for name in ("step_trace_time.csv", "kernel_details.csv", "operator_details.csv", "memory_record.csv"):
        head, *rows = (out / name).read_bytes().splitlines()
        (out / name).write_bytes(b"\n".join([head, *(row + b"," for row in rows)]) + b"\n")
    summary = ascend_output.summary_of(d)
    assert [s.step for s in summary.steps] == [1, 2]
    assert summary.events == len(_kernels("kernel_details_2023.csv"))
    assert [(o.name, o.total_us) for o in summary.operator_totals] == [("aten::mm", 20.0)]
    assert summary.memory == {"peak_allocated_mb": 10.0, "peak_reserved_mb": 20.0}
    assert "more cells" not in " ".join(summary.warnings), summary.warnings


def test_a_header_repeated_inside_a_table_is_no_row(tmp_path: Path) -> None:
    """helper-217: two tables joined into one (`cat`, the second with its BOM) put the second's header inside
    the first: step_trace_time.csv read it as a step '-' of 0 ms (said as "no value ... (counted as 0)" and
    a Step that is no number), kernel_details.csv as a row of no number. It is no row, said as a repeated
    header. In-process, no subprocess."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    for name in ("step_trace_time.csv", "kernel_details.csv"):
        data = (out / name).read_bytes()
        again = (
            data.replace(b"\r\n", b"\n").replace(b",1,50.0,", b",2,60.0,")
            if name.startswith("step")
            else data
        )
        (out / name).write_bytes(data + b"\xef\xbb\xbf" + again)
    summary = ascend_output.summary_of(d)
    assert [(s.step, s.duration_us) for s in summary.steps] == [(1, 55.0), (2, 65.0)]
    assert summary.events == 2 * len(_kernels("kernel_details_2023.csv"))
    said = " ".join(summary.warnings)
    kernels = len(_kernels("kernel_details_2023.csv")) + 2
    assert (
        f"kernel_details.csv: its header is repeated at line {kernels} (tables joined?): not read as a row"
        in said
    )
    assert "step_trace_time.csv: its header is repeated at line 3 (tables joined?)" in said, said
    assert "counted as 0" not in said and "no number" not in said and "'-'" not in said


def test_negative_step_figures_count_as_0_not_into_the_steps_duration(tmp_path: Path) -> None:
    """helper-228: a Computing of -1000 was summed into its step's duration (-1000 + 100 + 400: a step of
    -500 µs) and shown, "a damaged table?" said beside it. A negative figure counts as 0, said; Preparing
    may be negative (a task before the host span). In-process."""
    from npuprof.analysis import ascend_output

    steps = [_step(1, 5000.0, 100.0, 400.0, -20.0), _step(2, -1000.0, 100.0, -400.0, 12.5)]
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    with open(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    expected = {}
    for row in rows:  # by hand: each of the three parts, a negative one as 0
        parts = [float(row[c]) for c in ("Computing", "Communication(Not Overlapped)", "Free")]
        expected[int(row["Step"])] = sum(max(p, 0.0) for p in parts)
    summary = ascend_output.summary_of(d)
    assert {s.step: s.duration_us for s in summary.steps} == expected == {1: 5500.0, 2: 100.0}
    step2 = summary.steps[1]
    assert (step2.computing_us, step2.free_us, step2.comm_not_overlapped_us) == (0.0, 0.0, 100.0)
    assert summary.steps[0].preparing_us == -20.0
    said = " ".join(summary.warnings)
    assert "has negative times in Computing, Free (a damaged table?): counted as 0" in said


def test_tables_starting_with_two_byte_order_marks_are_read_by_their_columns(tmp_path: Path) -> None:
    """helper-228: a table written over itself, or copied by a tool that adds its own BOM, starts with two;
    read as UTF-8 with one, the second was text of the first column's name: kernel_details.csv had no
    "Step Id" (every kernel in no step, the steps' starts unknown) and memory_record.csv no "Component"
    (every pool's records mixed into one series: GE's 900 MB taken as the allocator's peak), unsaid.
    In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    kernels = _kernels("kernel_details_2023.csv")
    rows = [
        ["PTA", "1699529622790600.000", 100.0, 200.0, 100.0, 0, "NPU:0"],
        ["GE", "1699529622790601.000", 900.0, 900.0, 900.0, 0, "NPU:0"],
        ["PTA", "1699529622790700.000", 150.0, 200.0, 150.0, 0, "NPU:0"],
    ]
    _memory_record(out, rows)
    bom = "\ufeff".encode()
    for name in ("kernel_details.csv", "memory_record.csv", "step_trace_time.csv"):
        raw = (out / name).read_bytes()
        (out / name).write_bytes(bom * 2 + raw.removeprefix(bom))
    summary = ascend_output.summary_of(d)
    # by hand: the step's first task, less its Preparing; the step of each kernel as written
    first = min(float(k["Start Time(us)"]) for k in kernels if k["Step Id"] == "1")
    (step,) = summary.steps
    assert step.start_us == round(first - 12.5, 3)
    assert {k.step for k in summary.top_kernels} == {int(k["Step Id"]) for k in kernels} == {1}
    assert summary.device_id == 0
    assert summary.memory == {"peak_allocated_mb": 150.0, "peak_reserved_mb": 200.0}  # PTA's alone
    assert not [w for w in summary.warnings if "no start time" in w or "no number" in w]


def test_times_past_an_int64_of_nanoseconds_are_left_out_and_said_with_their_lines(tmp_path: Path) -> None:
    """helper-228: torch_npu's times are int64 ns; a memory record at 9.3e15 µs became a raw event of 9.3e18
    ns in memory-timeline's output (past the int64 torch's raw events hold), and a kernel starting there was
    read as the step's first task. Such rows are left out, said with their lines. In-process."""
    from npuprof.analysis import ascend_output
    from npuprof.reports import memory_timeline

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    kernels = _kernels("kernel_details_2023.csv")
    header = list(kernels[0])
    kernels[0]["Start Time(us)"] = "9300000000000000.5"
    kernels[3]["Duration(us)"] = "9223372036854775.9"  # rounds to a float below 2**63 ns, the text past it
    with open(out / "kernel_details.csv", "w", newline="") as f:
        w = csv.DictWriter(f, header)
        w.writeheader()
        w.writerows(kernels)
    rows = [
        ["PTA", "1699529622790600.125", 100.0, 200.0, 100.0, 0, "NPU:0"],
        ["PTA", "9300000000000000.5", 900.0, 900.0, 900.0, 0, "NPU:0"],
        ["PTA", "1699529622790700.000", 150.0, 200.0, 150.0, 0, "NPU:0"],
    ]
    _memory_record(out, rows)
    data = memory_timeline.from_memory_record(out / "memory_record.csv")
    kept = [r for r in rows if float(r[1]) < 2**63 / 1000]
    assert [event[0] for event in data.raw] == [
        int(r[1].replace(".", "")) * 10 ** (3 - len(r[1].split(".")[1])) for r in kept
    ]
    assert data.max_allocated == round(150.0 * 2**20)
    past = "have a 'Timestamp(us)' past 9.2e+15 µs (beyond 2**63 ns: no clock's time; a damaged file?)"
    assert f"memory_record.csv: 1 row(s) {past}: left out of the memory figures (line 3)" in data.origin
    summary = ascend_output.summary_of(d)
    # by hand: the step starts at its first task that is a time, less its Preparing
    first = min(float(k["Start Time(us)"]) for k in kernels[1:] if k["Step Id"] == "1")
    assert summary.steps[0].start_us == round(first - 12.5, 3)
    assert summary.memory == {"peak_allocated_mb": 150.0, "peak_reserved_mb": 200.0}
    assert sum(k.count for k in summary.kernel_totals) == len(kernels) - 2
    said = " ".join(summary.warnings)
    assert "kernel_details.csv: 2 row(s) have a 'Start Time(us)' or 'Duration(us)' past 9.2e+15 µs" in said
    assert "left out of the top kernels and the steps' starts (line 2, 5)" in said


def test_tasks_longer_than_their_whole_step_are_said_with_their_lines(tmp_path: Path) -> None:
    """helper-228: a kernel_details.csv task of 1e12 µs (11 days) was the top kernel of a step of 2.9 s,
    unsaid. torch_npu's step holds its tasks whole (docs/formats.md, "Step breakdown"): a task longer than
    its step (Computing + Communication(Not Overlapped) + Free) says one table is damaged or of another
    capture. Which is not known: the task is counted as written, said with its line. In-process."""
    from npuprof.analysis import ascend_output

    steps = [_step(19, 2_000_000.0, 0.0, 900_000.0, 12.5)]
    d = _rank_dir(tmp_path, 0, "kernel_details_2025.csv", steps)
    assert not [w for w in ascend_output.summary_of(d).warnings if "longer than" in w]  # the real table
    kernels = _kernels("kernel_details_2025.csv")
    kernels[2]["Duration(us)"] = "1e12"
    kernels[5]["Duration(us)"] = "2900001.5"  # 1.5 µs longer than the step
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(kernels[0]))
        w.writeheader()
        w.writerows(kernels)
    summary = ascend_output.summary_of(d)
    # by hand: every task counted as written
    totals: dict[str, float] = {}
    for k in kernels:
        totals[k["Name"]] = totals.get(k["Name"], 0.0) + float(k["Duration(us)"])
    assert {k.name: k.total_us for k in summary.kernel_totals} == {n: round(t, 3) for n, t in totals.items()}
    (said,) = [w for w in summary.warnings if "longer than" in w]
    assert said == (
        "kernel_details.csv: 2 task(s) last longer than their whole step in step_trace_time.csv (Computing + "
        f"Communication(Not Overlapped) + Free; the longest: {kernels[2]['Name']!r}, 1000000000000 µs in "
        "step 19 of 2900000 µs, line 4): one of the two tables is damaged or of another capture; their "
        "durations are counted as written (line 4, 7)"
    )


def test_a_preparing_that_puts_its_steps_start_before_1970_leaves_that_start_unknown(tmp_path: Path) -> None:
    """helper-228: a Preparing of 1e17 µs (a damaged cell) started its step at -9.8e16 µs, before 1970, and
    one of -1e16 µs in the year 2340 (here 2e15 and -8e15: figures past 9.2e15 µs count as 0, said); both
    starts were compared across ranks, unsaid. Such a start is not
    known (as a step's without a task), said; the other steps' are first task less Preparing. In-process."""
    from npuprof.analysis import ascend_output

    steps = [_step(1, 5000.0, 100.0, 400.0, 2e15), _step(1, 5000.0, 100.0, 400.0, -8e15)]
    steps.append(_step(1, 5000.0, 100.0, 400.0, 12.5))
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    summary = ascend_output.summary_of(d)
    first = min(float(k["Start Time(us)"]) for k in _kernels("kernel_details_2023.csv"))
    assert [s.start_us for s in summary.steps] == [-0.0, -0.0, round(first - 12.5, 3)]
    assert [math.copysign(1, s.start_us) for s in summary.steps[:2]] == [-1, -1]  # UNKNOWN_START
    said = " ".join(summary.warnings)
    assert "step_trace_time.csv: the Preparing of step(s) [1, 1] puts their start before 1970 or past" in said


def test_json_files_starting_with_two_byte_order_marks_are_read(tmp_path: Path) -> None:
    """helper-228: communication.json written over itself (two BOMs in front) was "unreadable (Expecting
    value: line 1 column 1 (char 0))", its totals lost, and profiler_metadata.json's world size unread. The
    BOMs in front are dropped, as the CSV tables'. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    op = {
        "Communication Time Info": {"Elapse Time(ms)": 1.5},
        "Communication Bandwidth Info": {
            "HCCS": {"Transit Size(MB)": 2.0},
            "RDMA": {"Transit Size(MB)": 0.5},
        },
    }
    data = {"step1": {"collective": {"a": op, "b": op}}}
    bom = "\ufeff".encode()
    (out / "communication.json").write_bytes(bom * 2 + json.dumps(data).encode())
    (d / "profiler_metadata.json").write_bytes(bom * 2 + b'{"distributed_args": {"world_size": 8}}')
    summary = ascend_output.summary_of(d)
    assert summary.communication == {"operators": 2, "time_us": 2 * 1.5 * 1000, "size_mb": 2 * (2.0 + 0.5)}
    assert summary.world_size == 8
    assert not [w for w in summary.warnings if "communication.json" in w]


def test_cells_of_underscores_or_other_scripts_digits_are_no_number(tmp_path: Path) -> None:
    """helper-228: float() read a kernel's Duration(us) "1_000" as 1000, a step's Computing "５０００" (full
    width) as 5000 and a record's Total Allocated(MB) "١٠٠" (Arabic-Indic) as 100, where the trace reader
    refuses "1_000" as a time: no writer of these tables makes them. They are cells of no number, said.
    In-process."""
    from npuprof.analysis import ascend_output

    steps = [_step(1, 5000.0, 100.0, 400.0, 12.5)]
    steps[0][2] = "５０００"
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    out = d / "ASCEND_PROFILER_OUTPUT"
    kernels = _kernels("kernel_details_2023.csv")
    kernels[0]["Duration(us)"] = "1_000"
    with open(out / "kernel_details.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(kernels[0]))
        w.writeheader()
        w.writerows(kernels)
    rows = [
        ["PTA", "1699529622790600.000", "١٠٠", 200.0, 100.0, 0, "NPU:0"],
        ["PTA", "1699529622790700.000", 50.0, 200.0, 50.0, 0, "NPU:0"],
    ]
    _memory_record(out, rows)
    summary = ascend_output.summary_of(d)
    assert summary.steps[0].duration_us == 100.0 + 400.0  # Computing counted as 0, said
    assert summary.events == len(kernels) - 1
    assert summary.memory == {"peak_allocated_mb": 50.0, "peak_reserved_mb": 200.0}
    said = " ".join(summary.warnings)
    assert "step_trace_time.csv has no value for Computing (counted as 0)" in said
    assert f"kernel_details.csv: 1 of its {len(kernels)} rows have no number for 'Start Time(us)'" in said
    assert "memory_record.csv: 1 row(s) have no number for 'Timestamp(us)' or 'Total Allocated(MB)'" in said


def test_a_byte_order_mark_starting_a_row_is_dropped_and_said(tmp_path: Path) -> None:
    """helper-228: a table joined after another without its header (`cat` of two files, the second's BOM
    kept) had a row starting with a BOM: memory_record.csv's "\\ufeffPTA" was a pool of its own, its 900 MB
    record left out unsaid (peak 100 MB); a kernel's Step Id "\\ufeff1" was in no step. The BOM is dropped,
    the row read, said. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    rows = [
        ["PTA", "1699529622790600.000", 100.0, 200.0, 100.0, 0, "NPU:0"],
        ["PTA", "1699529622790700.000", 900.0, 950.0, 900.0, 0, "NPU:0"],
    ]
    _memory_record(out, rows)
    for name in ("memory_record.csv", "kernel_details.csv"):
        lines = (out / name).read_text(encoding="utf-8-sig").splitlines(keepends=True)
        lines[2] = "\ufeff" + lines[2]  # the row of line 3
        (out / name).write_text("".join(lines), encoding="utf-8")
    summary = ascend_output.summary_of(d)
    kernels = _kernels("kernel_details_2023.csv")
    assert summary.memory == {"peak_allocated_mb": 900.0, "peak_reserved_mb": 950.0}
    # by hand: every kernel in its step, Step Id as written
    assert sum(k.count for k in summary.top_kernels if k.step is None) == 0
    assert summary.events == len(kernels)
    said = " ".join(summary.warnings)
    for name in ("memory_record.csv", "kernel_details.csv"):
        assert f"{name}: a byte order mark starts line 3 (tables joined?): dropped, the row read" in said
    assert "no step number" not in said


def test_step_figures_past_an_int64_of_nanoseconds_count_as_0(tmp_path: Path) -> None:
    """helper-228: a step's Computing of 9e17 µs (28,500 years; within the 1e18 µs bound of figures) was
    its duration, and a Preparing of -9e17 µs its start. torch_npu's figures are int64 nanoseconds: one past
    9.2e15 µs is no value, counted as 0 and said. In-process."""
    from npuprof.analysis import ascend_output

    steps = [_step(1, 9e17, 100.0, 400.0, -9e17)]
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    summary = ascend_output.summary_of(d)
    first = min(float(k["Start Time(us)"]) for k in _kernels("kernel_details_2023.csv"))
    (step,) = summary.steps
    assert (step.duration_us, step.computing_us, step.preparing_us) == (100.0 + 400.0, 0.0, 0.0)
    assert step.start_us == round(first, 3)  # the first task, less a Preparing of 0
    said = " ".join(summary.warnings)
    assert "step_trace_time.csv has no value for Computing, Preparing (counted as 0)" in said


def test_operator_rows_whose_self_time_passes_their_total_are_said(tmp_path: Path) -> None:
    """helper-228: an operator_details.csv row with a Host Self Duration(us) of 1e12 beside a Host Total of
    10 (no call's own time is longer than its whole) made its operator the top one, unsaid. Which cell is
    wrong is not known: the row is counted as written, said with its line. In-process. An operator's device
    time is its Device Total (helper-368: read from Device Self, and a self time 0.5 µs past its total let
    through as rounding, each failed no test)."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    rows = [
        ["aten::add", "", "", 5.0, 5.0, 0, 0, 0, 0],  # no child: self = total
        ["aten::mul", "", "", 1e12, 10.0, 0, 0, 0, 0],
        ["aten::mm", "", "", 3.0, 8.0, 0.5, 2.0, 0, 0],
        ["aten::relu", "", "", 2.5, 2.0, 0, 0, 0, 0],  # past its total by more than the tables' rounding
    ]
    with open(d / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv", "w", newline="") as f:
        csv.writer(f).writerows([["Name", "Input Shapes", "Call Stack", *OPERATOR_TIMES_HEADER], *rows])
    summary = ascend_output.summary_of(d)
    # by hand: every row counted as written, by host self time
    assert [(o.name, o.self_us, o.total_us, o.device_us) for o in summary.operator_totals] == [
        (r[0], r[3], r[4], r[6]) for r in sorted(rows, key=lambda r: -r[3])
    ]
    said = " ".join(summary.warnings)
    assert (
        "operator_details.csv: 2 row(s) have a 'Host Self Duration(us)' longer than their 'Host Total "
        "Duration(us)' (no call's own time is: a damaged table?): counted as written (line 3, 5)" in said
    )


def test_kernel_rows_repeating_an_earlier_task_whole_are_said(tmp_path: Path) -> None:
    """helper-228: kernel_details.csv joined with itself (`cat`, the second with its BOM) counted every task
    twice, its top kernels' counts and times doubled, said only as a repeated header. Each row is still
    counted (helper-217's decision: both tables' rows are read); the rows that repeat an earlier task whole
    are said with their lines. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5e6, 100.0, 400.0, 12.5)])
    out = d / "ASCEND_PROFILER_OUTPUT"
    data = (out / "kernel_details.csv").read_bytes()
    (out / "kernel_details.csv").write_bytes(data + b"\xef\xbb\xbf" + data)
    kernels = _kernels("kernel_details_2023.csv")
    summary = ascend_output.summary_of(d)
    assert summary.events == 2 * len(kernels)
    said = " ".join(summary.warnings)
    n = len(kernels)  # by hand: the second copy's rows, after both headers (lines 1 and n + 2)
    assert (
        f"kernel_details.csv: {n} row(s) repeat an earlier task whole (its step, stream, name, start and "
        "duration: a table written twice, or joined with itself?): each is counted, in the top kernels' "
        f"counts and times (line {n + 3}, {n + 4}, {n + 5}, {n + 6}, {n + 7}, ...)" in said
    )


def test_nul_bytes_are_damaged_bytes_said_and_never_a_kernels_name(tmp_path: Path) -> None:
    """helper-243: a NUL inside kernel_details.csv's Name reached the report's kernels (and its JSON and
    CSV) unsaid, one in a Duration(us) was said as "no number", and a tail zero-filled by a crash was a row
    of its own; on Python 3.10, whose csv refuses NULs, the whole table was unread. A NUL is read as bytes
    that are no UTF-8 are: a row with one in a figure is left out, one with it in its name only kept, its
    figures whole, each said with its line. The real 2025 table, damaged here. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2025.csv", [_step(19, 2_000_000.0, 0.0, 900_000.0, 12.5)])
    kernels = _kernels("kernel_details_2025.csv")
    header = list(kernels[0])
    name_at, duration_at = 3, 7  # rows (0-based); their lines: + 2
    damaged = [dict(k) for k in kernels]
    damaged[name_at]["Name"] = damaged[name_at]["Name"][:3] + "\x00\x00" + damaged[name_at]["Name"][3:]
    damaged[duration_at]["Duration(us)"] = damaged[duration_at]["Duration(us)"] + "\x00"
    table = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(table, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, header)
        w.writeheader()
        w.writerows(damaged)
        f.write("\x00" * 300)  # the tail a crash left zero-filled
    summary = ascend_output.summary_of(d)
    # by hand: every row but the one whose duration holds a NUL, the damaged name's NULs as U+FFFD
    kept = [k for i, k in enumerate(kernels) if i != duration_at]
    assert summary.events == len(kept)
    names = {k.name for k in summary.kernel_totals}
    assert not [n for n in names if "\x00" in n]
    assert damaged[name_at]["Name"].replace("\x00", "\ufffd") in names
    assert math.isclose(
        sum(k.total_us for k in summary.kernel_totals),
        sum(float(k["Duration(us)"]) for k in kept),
        abs_tol=0.01,
    )
    said = " ".join(summary.warnings)
    last = len(kernels) + 2  # the header is line 1, the zero-filled tail the line after the last row
    assert (
        f"kernel_details.csv: 2 line(s) are not UTF-8 text (damaged bytes; line {duration_at + 2}, {last}): "
        "left out" in said
    ), summary.warnings
    assert (
        f"kernel_details.csv: 1 line(s) are not UTF-8 text in 'Name' only (damaged bytes; line {name_at + 2})"
        in said
    )
    assert "no number" not in said


def test_tasks_alike_on_two_streams_are_no_repeat(tmp_path: Path) -> None:
    """helper-243: two tasks of one step, name, start and duration on two streams (a collective's tasks on
    its streams, run at once) were said to repeat one another, as a table joined with itself. A repeat is of
    the same stream too; the one on the same stream is still said. The real 2023 table, edited. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5e6, 100.0, 400.0, 12.5)])
    kernels = _kernels("kernel_details_2023.csv")
    other = next(s for s in (str(n) for n in range(1000)) if s not in {k["Stream ID"] for k in kernels})
    kernels.insert(5, {**kernels[4], "Stream ID": other})  # line 7: kernels[4]'s task on another stream
    kernels.insert(9, dict(kernels[8]))  # line 11: kernels[8] again, on its stream
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(kernels[0]))
        w.writeheader()
        w.writerows(kernels)
    summary = ascend_output.summary_of(d)
    assert summary.events == len(kernels)  # each counted
    (said,) = [w for w in summary.warnings if "repeat an earlier task" in w]
    assert said.startswith("kernel_details.csv: 1 row(s) repeat an earlier task whole") and said.endswith(
        "(line 11)"
    ), said


def test_communication_times_past_an_int64_of_nanoseconds_are_damage_said(tmp_path: Path) -> None:
    """helper-243: communication.json's 'Elapse Time(ms)' was bounded only as any figure (1e18), where every
    other time of torch_npu's stops at 2**63 ns: an operation of 1e15 ms (31,700 years) was the rank's
    communication time, unsaid. It is counted without its time, said. In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])
    int64_ms = 2**63 / 1e6  # 9.22e12 ms

    def op(ms: float) -> dict:
        return {"Communication Time Info": {"Elapse Time(ms)": ms}}

    times = {"a": 1e15, "b": 2.5, "c": int64_ms * 1.01, "d": 4.0}
    data = {"step1": {"collective": {name: op(ms) for name, ms in times.items()}}}
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(data))
    summary = ascend_output.summary_of(d)
    kept = [ms for ms in times.values() if ms < int64_ms]
    assert summary.communication == {"operators": len(times), "time_us": sum(kept) * 1000, "size_mb": 0.0}
    assert summary.communication_by_step == {"1": summary.communication}
    said = " ".join(summary.warnings)
    assert f"communication.json: {len(times) - len(kept)} operation(s) have no 'Elapse Time(ms)'" in said


def test_tasks_of_a_capture_without_steps_longer_than_its_whole_are_said(tmp_path: Path) -> None:
    """helper-243: the tasks of no step were not checked for their length, while those of a step are: in a
    capture without steps (kernel_details.csv without Step Id, step_trace_time.csv one row of no Step, the
    capture's whole) a task of 1e12 µs was its top kernel, unsaid. That row bounds them as a step bounds its
    own. The real 2023 table, its Step Id left out. In-process."""
    from npuprof.analysis import ascend_output

    steps = [_step(1, 900_000.0, 100.0, 50_000.0, 0.0)]
    steps[0][1] = ""  # no step: the capture as one
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    kernels = _kernels("kernel_details_2023.csv")
    kernels[6]["Duration(us)"] = "1e12"
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        w = csv.DictWriter(f, [c for c in kernels[0] if c != "Step Id"], extrasaction="ignore")
        w.writeheader()
        w.writerows(kernels)
    summary = ascend_output.summary_of(d)
    assert summary.events == len(kernels)  # counted as written
    whole = 900_000.0 + 100.0 + 50_000.0  # by hand: Computing + Communication(Not Overlapped) + Free
    longer = [i for i, k in enumerate(kernels) if float(k["Duration(us)"]) > whole + 1.0]
    assert longer == [6]
    (said,) = [w for w in summary.warnings if "longer than" in w]
    assert (
        f"the longest: {kernels[6]['Name']!r}, 1000000000000 µs in step - of {whole:.15g} µs, line 8)" in said
    ), said


def test_tasks_of_a_step_the_step_table_has_no_row_for_are_said(tmp_path: Path) -> None:
    """helper-243: step_trace_time.csv without the row of a step kernel_details.csv's tasks are in (a row
    deleted, or tables of two captures): the step was gone from the report and its tasks stayed in the top
    kernels, unsaid. torch_npu writes a row for every step its tasks are in: said, the tasks counted. The
    real 2023 table, its tasks spread over steps 1 to 4 and the rows of 2 and 4 left out. In-process."""
    from npuprof.analysis import ascend_output

    steps = [_step(3, 5e6, 100.0, 400.0, 12.5), _step(1, 5e6, 100.0, 400.0, 12.5)]  # out of order too
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    kernels = _kernels("kernel_details_2023.csv")
    for i, k in enumerate(kernels):
        k["Step Id"] = str(i % 4 + 1)
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(kernels[0]), lineterminator="\r\n")
        w.writeheader()
        w.writerows(kernels)
    summary = ascend_output.summary_of(d)
    assert [s.step for s in summary.steps] == [3, 1]
    assert summary.events == len(kernels)
    # by hand: the tasks of steps 2 and 4, from the table as csv reads it
    with open(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as f:
        rowless = [r for r in csv.DictReader(f) if r["Step Id"] in ("2", "4")]
    assert {k.step for k in summary.top_kernels} == {1, 2, 3, 4}  # counted, in their steps
    said = " ".join(summary.warnings)
    assert (
        f"kernel_details.csv has {len(rowless)} task(s) of 2 step(s) that step_trace_time.csv has no row for "
        "(step 2, 4: a row lost, or tables of two captures?)" in said
    ), summary.warnings


def test_step_numbers_of_more_digits_than_an_int64_holds_are_no_step_number(tmp_path: Path) -> None:
    """helper-243: a Step cell of 5,000 digits was past Python's limit on int(): the rank was unreadable
    ("Exceeds the limit (4300 digits)"), the only one of the report; one of 30 digits was a step no int64
    holds; so was communication.json's key "step" and 5,000 digits. A step number is ASCII digits, at most
    18 (below 2**63): others are no step number, said, the cell shown cut (such a key's operations count in
    the rank's total, as any key's that is no step). The real 2023 table. In-process."""
    from npuprof.analysis import ascend_output

    huge, wide = "9" * 5000, "1" * 30
    steps = [_step(huge, 5000.0, 100.0, 400.0, 12.5), _step(wide, 5000.0, 100.0, 400.0, 12.5)]
    steps.append(_step("0" * 40 + "1", 5000.0, 100.0, 400.0, 12.5))  # leading zeros: step 1
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", steps)
    summary = ascend_output.summary_of(d)
    assert [s.step for s in summary.steps] == [None, None, 1]
    assert all(s.step is None or s.step < 2**63 for s in summary.steps)
    op = {"Communication Time Info": {"Elapse Time(ms)": 1.5}}
    data = {f"step{n}": {"collective": {"a": op}} for n in (huge, wide, "1")}
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(data))
    summary = ascend_output.summary_of(d)
    assert summary.communication == {"operators": 3, "time_us": 3 * 1500.0, "size_mb": 0.0}
    assert summary.communication_by_step == {"1": {"operators": 1, "time_us": 1500.0, "size_mb": 0.0}}
    said = " ".join(summary.warnings)
    assert (
        "step_trace_time.csv has 2 Step cell(s) that are no step number (ASCII digits, at most 18: "
        f"'{huge[:40]}...', '{wide}'): shown as step '-'" in said
    ), summary.warnings


def test_communication_sizes_of_no_number_are_damage_said_not_counted_as_0(tmp_path: Path) -> None:
    """helper-243: communication.json's 'Transit Size(MB)' of no number ("abc", null, 1e300: past any
    figure) was counted as 0 MB, unsaid, where a negative one is said. torch_npu writes a number for every
    transport: such a size is left out of the sum and said; a transport without the key moved nothing.
    In-process."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 50.0, 1.0, 4.0, 1.0)])

    def op(*sizes: object) -> dict:
        links = {f"link{k}": {"Transit Size(MB)": mb} for k, mb in enumerate(sizes)}
        return {"Communication Time Info": {"Elapse Time(ms)": 1.0}, "Communication Bandwidth Info": links}

    ops = {"a": op("abc", 2.0), "b": op(None), "c": op(1e300, 0.5), "d": op(3.0, 4.0)}
    ops["e"] = {
        "Communication Bandwidth Info": {"RDMA": {"Transit Time(ms)": 0}, "HCCS": {"Transit Size(MB)": 1}}
    }
    data = {"step1": {"collective": ops}}
    (d / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(data))
    summary = ascend_output.summary_of(d)
    # by hand: the sizes that are numbers, none negative nor past any figure
    sizes = [2.0, 0.5, 3.0, 4.0, 1.0]
    assert summary.communication["size_mb"] == sum(sizes)
    said = " ".join(summary.warnings)
    assert "communication.json: 3 operation(s) have a 'Transit Size(MB)' that is no size (no number" in said


def test_an_unquoted_cell_past_the_cell_limit_leaves_out_its_line_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-243: a line of kernel_details.csv holding a cell past the cell limit with no quote around it
    (a run of damaged bytes without a line break) was said to be "a quote ... not closed", and every row
    after it was lost. No quote holds the lines after it: that line is left out alone, said, the rest read.
    The real 2023 table (CELL_LIMIT made small here). In-process."""
    from npuprof.analysis import ascend_output

    monkeypatch.setattr(ascend_output, "CELL_LIMIT", 1 << 17)
    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5e6, 100.0, 400.0, 12.5)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = table.read_bytes().split(b"\n")
    lines.insert(5, b"1,2,3,4," + b"x" * (1 << 18) + b",5")  # line 6
    table.write_bytes(b"\n".join(lines))
    kernels = _kernels("kernel_details_2023.csv")  # by hand: every row of the real table
    summary = ascend_output.summary_of(d)
    assert summary.events == len(kernels)
    assert math.isclose(
        sum(k.total_us for k in summary.kernel_totals),
        sum(float(k["Duration(us)"]) for k in kernels),
        abs_tol=0.01,
    )
    said = " ".join(summary.warnings)
    assert (
        "kernel_details.csv: line 6 hold(s) a cell past 0.125 MiB with no quote around it (no cell of "
        "torch_npu's comes near: damaged bytes?): left out of the top kernels and the steps' starts, the "
        "rows after read" in said
    ), summary.warnings
    assert "quote at line" not in said
    assert csv.field_size_limit() == 128 * 1024  # the process's own limit left as it was


def _memory_window_steps(windows: list[tuple[float, float]]) -> list[dict[str, object]]:
    """Steps as ascend_output._steps hands them on: each with the end of its memory window."""
    from npuprof.analysis import ascend_output
    from npuprof.analysis.step_fields import SUMMARY_ORDER

    return [
        {"step": i, **dict.fromkeys(SUMMARY_ORDER, 0.0), "start_us": lo, ascend_output._WINDOW: hi}
        for i, (lo, hi) in enumerate(windows)
    ]


def _peaks_by_hand(
    rows: list[tuple[float, float, float | None]], lo: float, hi: float
) -> tuple[float | None, float | None]:
    """The last record before ``lo`` (when it is before ``hi`` too: a window that ends before it starts
    holds nothing else) and every record in [lo, hi): their largest sizes, record by record."""
    before = [r for r in rows if r[0] < lo][-1:]
    before = [r for r in before if r[0] < hi]
    inside = before + [r for r in rows if lo <= r[0] < hi]
    reserved = [r for _t, _a, r in inside if r is not None]
    return (
        round(max(a for _t, a, _r in inside), 3) if inside else None,
        round(max(reserved), 3) if reserved else None,
    )


def test_memory_peaks_of_overlapping_step_windows_are_each_windows_records(tmp_path: Path) -> None:
    """Windows that overlap, hold no record, start before or end past every record, or end before they
    start, and records without a reserved size: each step's peaks are those of its own records."""
    import random

    from npuprof.analysis import ascend_output

    rng = random.Random(7)
    times = sorted(rng.uniform(0, 1000) for _ in range(300))
    rows = [(t, rng.uniform(0, 500), rng.choice([None, rng.uniform(0, 600)])) for t in times]
    windows = [(-5.0, -1.0), (-5.0, 2000.0), (1500.0, 1600.0), (400.0, 300.0), (times[10], times[10])]
    windows += [(t, t + rng.uniform(0, 400)) for t in (rng.uniform(-50, 1050) for _ in range(200))]
    steps = ascend_output._with_memory(_memory_window_steps(windows), rows)
    got = [(s.memory_peak_mb, s.memory_peak_reserved_mb) for s in steps]
    assert got == [_peaks_by_hand(rows, lo, hi) for lo, hi in windows]
    assert got[1] == (round(max(r[1] for r in rows), 3), round(max(r[2] for r in rows if r[2]), 3))
    last = rows[-1]  # what a window past every record started with
    assert got[0] == (None, None) and got[2] == (round(last[1], 3), last[2] and round(last[2], 3))


def test_a_line_break_inside_a_quoted_kernel_name_is_read_as_csv_reads_it(tmp_path: Path) -> None:
    """A kernel Name holding a line break, quoted (csv.writer writes it so; torch_npu writes none), was said
    "a quote at line N is not closed on its line: the 1 line(s) after it were misread, their rows lost" and
    its kernel left out. It is one cell, as csv reads it: the kernel counted, the break said as what it is.
    A quote left open still is one (the real 2023 table; expected values read with Python's csv)."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    table = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(table, newline="", encoding="utf-8-sig") as f:
        header, *rows = list(csv.reader(f))
    at = len(rows) // 2
    rows[at][header.index("Name")] = "Mat\nMul"
    with open(table, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    line = 1 + at + 1  # the header is line 1, no cell before this row holds a line break

    summary = ascend_output.summary_of(d)
    assert summary.events == sum(k.count for k in summary.kernel_totals) == len(rows)
    assert "Mat\nMul" in {k.name for k in summary.kernel_totals}
    said = " ".join(summary.warnings)
    assert "not closed" not in said and "never closed" not in said, summary.warnings
    assert (
        f"kernel_details.csv: 1 row(s) hold a line break inside a quoted cell of 'Name' (line {line}; "
        in said
    ), summary.warnings

    # the same row with its quote left open: its Name takes the rest of the row, commas and all, up to
    # the quote of its next cell; that row is left out, said
    text = table.read_text(encoding="utf-8").replace('"Mat\nMul"', '"Mat\nMul')
    table.write_text(text, encoding="utf-8")
    summary = ascend_output.summary_of(d)
    assert summary.events == len(rows) - 1
    assert f"kernel_details.csv: a quote at line {line} is not closed" in " ".join(summary.warnings)


def test_a_trace_view_too_large_for_every_report_is_not_read_for_its_operators(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch_npu's tables are read again at every analyse of a cluster: a rank's trace_view.json of GBs read
    for its operators (no operator_details.csv) would cost every report tens of seconds. Over the limit it
    is not read; the note names the file's size and torch_npu's switch that writes the table."""
    from npuprof.analysis import ascend_output

    d = _rank_dir(tmp_path, 0, "kernel_details_2023.csv", [_step(1, 5000.0, 100.0, 400.0, 12.5)])
    view = d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    shutil.copyfile(REAL / "trace_view.json", view)
    monkeypatch.setattr(ascend_output, "TRACE_VIEW_OPERATORS_LIMIT", view.stat().st_size - 1)
    summary = ascend_output.summary_of(d)
    assert summary.top_operators == []
    (note,) = [w for w in summary.warnings if "operator_details.csv" in w]
    assert "not read at every report" in note and "record_shapes=True" in note, note
    assert summary.top_kernels  # the rank's kernels and steps still come through
    monkeypatch.setattr(ascend_output, "TRACE_VIEW_OPERATORS_LIMIT", view.stat().st_size)
    assert ascend_output.summary_of(d).top_operators  # at the limit: read
