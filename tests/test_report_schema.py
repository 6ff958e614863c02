"""The typed, versioned `npuprof analyse --format json` report (npuprof.analysis.report_schema): read back
whole by its reader, with the values worked out by hand from hand-made traces; another version, a damaged
field or a cut file is a ReportError naming it, never a KeyError."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cuda_trace, write_rank_dir, x

from npuprof.analysis.report_schema import REPORT_VERSION, Report, ReportError, read_report
from npuprof.cli.analyse import write_json
from npuprof.reports.terminal import render_json


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Two CUDA ranks (rank 0's capture ended inside step 2, rank 1 has a warning) and an interrupted capture;
    the JSON report."""
    root = tmp_path_factory.mktemp("report")
    rank0 = write_rank_dir(root, cuda_trace(0), rank=0, name="host_1_20250101000000000")
    record = {"version": 1, "status": "complete", "detail": "training ended in step 2", "steps": [1, 2]}
    (rank0 / "npuprof_capture.json").write_text(json.dumps(record))
    odd = cuda_trace(1)  # device work of a category npuprof does not know: the rank's report warns
    odd["traceEvents"].append(x("mystery", "a_new_device_category", 1700, 10, pid=0, tid=7))
    write_rank_dir(root, odd, rank=1, name="host_2_20250101000000000")
    cut = write_rank_dir(root, cuda_trace(0), rank=2, name="host_3_20250101000000000")
    (cut / "npuprof_capture.json").write_text(json.dumps({"version": 1, "status": "capturing", "steps": [1]}))
    for trace in cut.glob("*.pt.trace.json"):  # killed while it wrote: a whole trace means a finished capture
        trace.write_bytes(trace.read_bytes()[:-40])
    done = npuprof("analyse", str(root), "-j", "1", "--format", "json")
    assert done.returncode == 0, done.stderr
    return root, done.stdout


def test_the_json_reads_back_as_a_report_with_the_values_by_hand(analysed: tuple[Path, str]) -> None:
    root, text = analysed
    report = read_report(text)
    assert isinstance(report, Report) and report.version == REPORT_VERSION == 1
    assert report.path == str(root) and report.steps_filter is None
    r0, r1 = report.ranks
    assert (r0.rank, r1.rank, r0.device, r0.status) == (0, 1, "CUDA", "parsed")
    # step 1 [0, 1000): computing 300, communication 250 of which 200 not overlapped, free 500, preparing 100
    s1, s2 = r0.steps
    assert (s1.step, s1.duration_us, s1.computing_us, s1.communication_us) == (1, 1000.0, 300.0, 250.0)
    assert (s1.comm_not_overlapped_us, s1.overlapped_us, s1.free_us, s1.preparing_us) == (
        200.0,
        50.0,
        500.0,
        100.0,
    )
    # step 2 is where rank 0's capture ended: partial, out of the mean and of the comparison across ranks
    assert (s2.step, s2.partial, s2.bubble_us) == (2, True, 200.0)
    assert (r0.partial_step, r0.partial_reason, r0.step_time_mean_us) == (
        2,
        "training ended in step 2",
        1000.0,
    )
    assert [s.partial for s in r1.steps] == [msgspec.UNSET, msgspec.UNSET]  # absent from the JSON
    assert [(s.step, s.ranks) for s in report.cross_rank.steps] == [
        (1, {"0": 1000.0, "1": 1000.0}),
        (2, {"1": 1000.0}),
    ]
    assert report.cross_rank.slowest is not None and report.cross_rank.slowest.outlier is False
    assert [(k.skew_us, k.earliest_rank, k.latest_rank) for k in report.cross_rank.start_skew] == [
        (0.0, 0, 0)
    ]
    # kernels over both steps: the all-reduce 250, kernel_a 200, the receive 200, kernel_b 150, kernel_c 100
    assert {k.name: (k.count, k.total_us) for k in r0.top_kernels} == {
        "ncclDevKernel_AllReduce_Sum_f32": (1, 250.0),
        "kernel_a": (1, 200.0),
        "ncclDevKernel_SendRecv": (1, 200.0),
        "kernel_b": (1, 150.0),
        "kernel_c": (1, 100.0),
    }
    assert r0.top_kernels[0].name == "ncclDevKernel_AllReduce_Sum_f32"
    addmm = next(o for o in r0.top_operators if o.name == "aten::addmm")
    assert (addmm.count, addmm.self_us, addmm.total_us, addmm.device_us) == (1, 40.0, 40.0, 350.0)
    assert r0.warnings is msgspec.UNSET
    assert r1.warnings and "a_new_device_category" in r1.warnings[0]
    (problem,) = report.problems
    assert problem.rank_dir.endswith("host_3_20250101000000000_ascend_pt") and problem.status == "incomplete"


def test_the_reader_keeps_every_field_the_writer_writes(analysed: tuple[Path, str]) -> None:
    """Read back and written again, the report is the same text: no field the writer adds is unknown to
    the schema (msgspec would drop it), and no value changes type (an int read as a float)."""
    text = analysed[1]
    assert render_json(read_report(text)) + "\n" == text


def test_the_report_streams_as_render_json_writes_it(
    analysed: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    report = read_report(analysed[1])
    write_json(report, chunk_count=5)
    assert capsys.readouterr().out == render_json(report) + "\n" == analysed[1]


def _with(text: str, change: object) -> bytes:
    data = json.loads(text)
    change(data)  # type: ignore[operator]
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("version", "words"),
    [
        (2, ["written by a newer npuprof", "report version 2, this one reads 1", "upgrade npuprof"]),
        (0, ["written by an older npuprof", "report version 0", "npuprof analyse --format json"]),
        ("1", ["written by an older npuprof", "report version '1'"]),
        (None, ["written by an older npuprof", "report version None"]),
    ],
)
def test_another_version_is_named(analysed: tuple[Path, str], version: object, words: list[str]) -> None:
    def change(data: dict) -> None:
        if version is None:
            del data["version"]
        else:
            data["version"] = version
            data["ranks"] = "not read: the version is checked first"

    with pytest.raises(ReportError) as caught:
        read_report(_with(analysed[1], change))
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda d: d["ranks"][0]["steps"][0].update(duration_us="fast"),
            ["damaged", "Expected `float`, got `str`", "$.ranks[0].steps[0].duration_us"],
        ),
        (lambda d: d.pop("cross_rank"), ["damaged", "missing required field `cross_rank`"]),
        (lambda d: d["ranks"][1].update(rank="one"), ["damaged", "$.ranks[1].rank"]),
        (lambda d: d["problems"][0].update(reason=None), ["damaged", "$.problems[0].reason"]),
        (
            lambda d: d["cross_rank"]["slowest"].update(outlier="no"),
            ["damaged", "Expected `bool`", "$.cross_rank.slowest.outlier"],
        ),
    ],
)
def test_a_damaged_field_is_named(analysed: tuple[Path, str], change: object, words: list[str]) -> None:
    with pytest.raises(ReportError) as caught:
        read_report(_with(analysed[1], change))
    for word in words:
        assert word in str(caught.value)


def test_an_infinite_time_is_damage(analysed: tuple[Path, str]) -> None:
    text = analysed[1].replace('"max_us": 1000.0', '"max_us": 1e999', 1)
    assert text != analysed[1]
    with pytest.raises(ReportError, match=r"damaged .*\$\.cross_rank\.steps\[0\]\.max_us"):
        read_report(text)


@pytest.mark.parametrize("cut", [0.0, 0.5, 0.999])
def test_a_cut_or_foreign_file_is_not_a_report(analysed: tuple[Path, str], cut: float) -> None:
    text = analysed[1]
    with pytest.raises(ReportError, match="not an npuprof report"):
        read_report(text[: int(len(text) * cut)])
    with pytest.raises(ReportError, match="not an npuprof report"):
        read_report(b"[1, 2]")
