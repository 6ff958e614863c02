"""Communication sizes: known from the trace (gloo's Input Dims with --record-shapes, NCCL's message
size) or unknown (gloo without --record-shapes), and then never reported as 0 MB (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyse_support.handmade import cpu_trace, write_rank_dir

from npuprof.analysis.communication import group_id
from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir


def _parse(root: Path, trace: dict) -> tuple[dict, dict]:
    rank_dir = write_rank_dir(root, trace)
    assert parse_rank_dir(rank_dir).ok
    summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).read_text())
    comm = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    return summary["communication"], comm["step7"]["collective"][f"all_reduce__0@{group_id('default')}"]


def test_size_known_from_input_dims(tmp_path: Path) -> None:
    summary, record = _parse(tmp_path, cpu_trace())
    # 256 float32 elements = 1024 bytes, in a gloo all_reduce of 300 µs
    assert summary == {"operators": 1, "time_us": 300.0, "size_mb": 0.001024}
    sdma = record["Communication Bandwidth Info"]["SDMA"]
    assert sdma["Transit Size(MB)"] == 0.001024
    assert sdma["Bandwidth(GB/s)"] == round(0.001024 / 0.3, 4)


def test_size_unknown_without_shapes_is_not_zero_mb(tmp_path: Path) -> None:
    trace = cpu_trace()
    for event in trace["traceEvents"]:
        if event["name"] == "gloo:all_reduce":
            event["args"] = {}  # what torch writes without record_shapes
    summary, record = _parse(tmp_path, trace)
    assert summary == {"operators": 1, "time_us": 300.0, "size_unknown_operators": 1}
    # communication.json keeps a number: msprof-analyze sums these fields
    assert record["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] == 0.0
    assert record["Communication Time Info"]["Elapse Time(ms)"] == 0.3


# torch 2.x's gloo spans name the element type in C++ (the broadcasts of a real gloo run, helper-104: int8
# and uint8 (what broadcast_object_list sends) were counted 4 bytes each, int64 4 instead of 8)
@pytest.mark.parametrize(
    ("input_type", "element_bytes"),
    [
        ("signed char", 1),
        ("unsigned char", 1),
        ("long int", 8),
        ("c10::Float8_e4m3fn", 1),
        ("c10::Half", 2),
        ("c10::BFloat16", 2),
        ("double", 8),
        ("bool", 1),
        ("float", 4),
    ],
)
def test_gloo_element_types_in_cpp_names_give_their_sizes(
    tmp_path: Path, input_type: str, element_bytes: int
) -> None:
    trace = cpu_trace()
    (span,) = [e for e in trace["traceEvents"] if e["name"] == "gloo:all_reduce"]
    span["args"]["Input type"] = [input_type]
    elements = 1
    for n in span["args"]["Input Dims"][0]:
        elements *= n
    summary, _record = _parse(tmp_path, trace)
    assert summary == {"operators": 1, "time_us": 300.0, "size_mb": elements * element_bytes / 1e6}


def test_an_element_type_not_known_gives_an_unknown_size_not_four_bytes(tmp_path: Path) -> None:
    trace = cpu_trace()
    (span,) = [e for e in trace["traceEvents"] if e["name"] == "gloo:all_reduce"]
    span["args"]["Input type"] = ["c10::quint4x2"]
    summary, record = _parse(tmp_path, trace)
    assert summary == {"operators": 1, "time_us": 300.0, "size_unknown_operators": 1}
    assert record["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] == 0.0


def test_steps_filter_the_communication_totals(tmp_path: Path) -> None:
    """helper-104: `analyse --steps` summed the whole capture's communication. cuda_trace: step 1 holds an
    all-reduce of 1024 float32 on the device for 250 µs, step 2 a receive of 256 bfloat16 for 200 µs."""
    import json as _json

    from analyse_support.handmade import cuda_trace
    from conftest import clean_env, npuprof

    path = tmp_path / "two_steps.json"
    path.write_text(_json.dumps(cuda_trace()))
    expected = {
        None: {"operators": 2, "time_us": 450.0, "size_mb": (1024 * 4 + 256 * 2) / 1e6},
        "1": {"operators": 1, "time_us": 250.0, "size_mb": 1024 * 4 / 1e6},
        "2": {"operators": 1, "time_us": 200.0, "size_mb": 256 * 2 / 1e6},
    }
    for steps, figures in expected.items():
        flags = ("--steps", steps) if steps else ()
        result = npuprof("analyse", str(path), "--format", "json", *flags, env=clean_env())
        assert result.returncode == 0, result.stderr
        (rank,) = _json.loads(result.stdout)["ranks"]
        assert rank["communication"] == figures, steps


def test_a_dim_of_nan_gives_an_unknown_size_not_zero(tmp_path: Path) -> None:
    """A gloo span's Input Dims holding NaN (a tool's json.dump, read as "?": docs/formats.md) was sized
    0 MB, its bandwidth 0; its size is unknown."""
    trace = cpu_trace()
    (span,) = [e for e in trace["traceEvents"] if e["name"] == "gloo:all_reduce"]
    span["args"]["Input Dims"][0][0] = float("nan")
    summary, record = _parse(tmp_path, trace)
    assert summary == {"operators": 1, "time_us": 300.0, "size_unknown_operators": 1}
    assert record["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] == 0.0
