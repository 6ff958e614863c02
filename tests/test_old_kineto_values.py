"""Values old releases of torch's Kineto wrote that are no JSON (docs/formats.md, "Values torch wrote that are
no JSON"): each trace is laid out here as that release's C++ writer laid it out (its format strings, read in
Kineto's history), and every expected value is computed here from the events (Decimal), never read back
from npuprof's code."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc

HOST, GPU = 13721, 0


def _kineto18(event: dict[str, Any], bandwidth: str = "") -> str:
    """One event as torch 1.8's Kineto wrote it (libkineto/src/output_json.cpp before kineto#110): the
    category first, then the name, pid, tid, ts and dur, then the args; a copy's or memset's bandwidth is
    the text ``bandwidth`` as it is (fmt's inf or nan for a copy of 0 µs)."""
    if event["ph"] == "M":
        return (
            f'\n  {{\n    "name": "process_name", "ph": "M", "ts": {event["ts"]}, "pid": {event["pid"]}, '
            f'"tid": 0,\n    "args": {{\n      "name": "{event["args"]["name"]}"\n    }}\n  }},'
        )
    args = dict(event["args"])
    shown = ", ".join(f'"{k}": {json.dumps(v)}' for k, v in args.items() if k != "memory bandwidth (GB/s)")
    if "memory bandwidth (GB/s)" in args:
        shown += f', "memory bandwidth (GB/s)": {bandwidth}'
    return (
        f'\n  {{\n    "ph": "X", "cat": "{event["cat"]}", \n    "name": "{event["name"]}", '
        f'"pid": {event["pid"]}, "tid": "{event["tid"]}",\n    "ts": {event["ts"]}, "dur": {event["dur"]},'
        f'\n    "args": {{\n      {shown}\n    }}\n  }},'
    )


def _x(name: str, cat: str, ts: int, dur: int, pid: int, tid: str, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _torch18_events() -> list[dict[str, Any]]:
    """A step of torch 1.8 on a GPU: an operator, its launch, its kernel, and a copy and a memset of 0 µs
    (Kineto's times are whole µs: a short copy rounds to 0), whose bandwidth is none (None here)."""
    copy = {"device": 0, "context": 1, "stream": 7, "correlation": 335, "external id": 4}
    return [
        {"ph": "M", "name": "process_name", "ts": 1000, "pid": HOST, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "ts": 1000, "pid": GPU, "args": {"name": "GPU 0"}},
        _x("ProfilerStep#1", "Operator", 1050, 400, HOST, str(HOST), **{"External id": 1}),
        _x("aten::mm", "Operator", 1100, 70, HOST, str(HOST), **{"External id": 4}),
        _x("cudaLaunchKernel", "Runtime", 1110, 20, HOST, str(HOST), cbid=211, correlation=334),
        _x("gemm", "Kernel", 1200, 100, GPU, "stream 7", stream=7, correlation=334, **{"external id": 4}),
        _x("Memcpy HtoD (Pageable -> Device)", "Memcpy", 1305, 0, GPU, "stream 7", **copy, bytes=4)
        | {"args": {**copy, "bytes": 4, "memory bandwidth (GB/s)": None}},
        _x("Memset (Device)", "Memset", 1320, 0, GPU, "stream 7", **copy, bytes=0)
        | {"args": {**copy, "bytes": 0, "memory bandwidth (GB/s)": None}},
        _x("gemm", "Kernel", 1330, 40, GPU, "stream 7", stream=7, correlation=336, **{"external id": 4}),
    ]


def _torch18_text(events: list[dict[str, Any]], values: list[str]) -> bytes:
    """The trace file: Kineto's header, the events (the copies' bandwidths ``values``, in order), and its
    closing "Record Window End" event and ``]}``."""
    left = iter(values)
    body = "".join(
        _kineto18(e, next(left) if "memory bandwidth (GB/s)" in e.get("args", {}) else "") for e in events
    )
    end = (
        '\n  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": 2000'
        "\n  }\n]}"
    )
    return b'\n{\n  "schemaVersion": 1,\n  "traceEvents": [\n  ' + body.encode() + end.encode()


def _span(e: dict[str, Any]) -> tuple[Decimal, Decimal]:
    return Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])


BANDWIDTH_NOTE = (
    '2 copy or memset event(s) have a "memory bandwidth (GB/s)" of inf, nan or N/A, which is no JSON'
)


@pytest.mark.parametrize("values", [["inf", "-nan"], ["inf", "nan"], ["N/A", "N/A"]])
def test_a_bandwidth_that_is_no_number_is_read_as_absent(tmp_path: Path, values: list[str]) -> None:
    """torch 1.8's Kineto wrote a copy's bandwidth as bytes / µs with fmt: a copy of 0 µs got ``inf`` and a
    memset of 0 bytes in 0 µs ``nan`` (``-nan`` on x86, whose 0/0 has its sign set); kineto#110 wrote
    ``N/A`` instead, unquoted until kineto#129. json.load refuses all of them, and npuprof refused the whole
    trace ("malformed JSON ... (corrupt trace)"). Each is read as absent (null), the rest as written."""
    from npuprof.analysis.trace_loader import load_trace

    events = _torch18_events()
    text = _torch18_text(events, values)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    path = tmp_path / "worker0.pt.trace.json"
    path.write_bytes(text)
    trace = load_trace(path)
    read = [(e.name, e.cat, e.ts, e.dur, e.args_dict()) for e in trace.events if e.ph == "X"]
    assert read == [(e["name"], e["cat"], e["ts"], e["dur"], e["args"]) for e in events if e["ph"] == "X"]
    assert trace.repaired_values == {"bandwidth": 2}


def test_a_torch18_trace_with_copies_of_no_time_is_read_by_every_reader(tmp_path: Path) -> None:
    events = _torch18_events()
    path = tmp_path / "worker0.pt.trace.json"
    path.write_bytes(_torch18_text(events, ["inf", "-nan"]))
    (step,) = [e for e in events if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step)
    kernels = [_span(e) for e in events if e.get("cat") == "Kernel"]
    computing = sum((min(e, hi) - max(s, lo) for s, e in kernels if s < hi and e > lo), Decimal(0))
    done = npuprof("analyse", str(path), "-j", "1", "--format", "json", timeout=300)
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert [(s["step"], s["duration_us"], s["computing_us"]) for s in rank["steps"]] == [
        (1, float(hi - lo), float(computing))
    ]
    assert computing == 140  # the case is what it says: both kernels in the step, no overlap
    assert sum(w.startswith(BANDWIDTH_NOTE) for w in rank["warnings"]) == 1, rank["warnings"]
    stacks = npuprof("export-stacks", str(path))
    assert stacks.returncode == 0, stacks.stderr
    assert stacks.stderr.count(BANDWIDTH_NOTE) == 1
    by_name = {e["name"]: e for e in events}
    step_self = (
        step["dur"] - by_name["aten::mm"]["dur"]
    )  # self times: the host's nesting (step numbers merged)
    mm_self = by_name["aten::mm"]["dur"] - by_name["cudaLaunchKernel"]["dur"]
    assert stacks.stdout.splitlines() == [
        f"ProfilerStep {step_self}",
        f"ProfilerStep;aten::mm {mm_self}",
        f"ProfilerStep;aten::mm;cudaLaunchKernel {by_name['cudaLaunchKernel']['dur']}",
    ]
    # torch 1.8's Kineto wrote no [memory] events: the trace is read, and that is what is said
    timeline = npuprof("memory-timeline", str(path), "-o", str(tmp_path / "m.json"))
    assert timeline.returncode != 0
    assert "has no [memory] events" in timeline.stderr and "corrupt" not in timeline.stderr


def _torch20_windows_trace() -> tuple[bytes, list[dict[str, Any]], list[str]]:
    """A CPU trace as torch 2.0's Kineto wrote it on Windows with with_stack (pytorch#98432 shows its bytes:
    the python_function event's keys on one line, its name a path whose '\\' it did not escape, kineto#754
    fixing it for torch 2.1). The text, the events (names as placeholders), and the names written."""
    pid = tid = 21428
    names = [r"C:\Users\x\train.py(12): f", r"torch\cuda\__init__.py(219): _lazy_init"]
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
        _x("ProfilerStep#1", "user_annotation", 1000, 100, pid, tid, **{"External id": 1}),
        _x("FRAME_0", "python_function", 1010, 50, pid, tid, **{"Python id": 2}),
        _x("aten::mm", "cpu_op", 1020, 30, pid, tid, **{"External id": 2}),
        _x("FRAME_1", "python_function", 1060, 30, pid, tid, **{"Python id": 3}),
        _x("aten::add", "cpu_op", 1065, 10, pid, tid, **{"External id": 3}),
        {
            **{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]"},
            **{"pid": pid, "tid": tid, "ts": 1030},
            "args": {"Device Type": 0, "Device Id": -1, "Bytes": 4096, "Total Allocated": 8192},
        },
    ]
    parts = []
    for e in events:
        if e["name"].startswith("FRAME_"):
            name = names[int(e["name"][-1])]
            parts.append(
                f'  {{\n    "ph": "X", "cat": "python_function", "name": "{name}", "pid": {pid}, '
                f'"tid": {tid},\n'
                f'    "ts": {e["ts"]}, "dur": {e["dur"]},\n    "args": {{\n      "Python id": '
                f"{e['args']['Python id']}\n    }}\n  }}"
            )
        else:
            parts.append("  " + json.dumps(e))
    head = b'{\n  "schemaVersion": 1,\n  "deviceProperties": [\n  ],\n  "traceEvents": [\n'
    text = head + ",\n".join(parts).encode() + b'\n],\n  "traceName": "t.pt.trace.json"\n}\n'
    return text, events, names


BACKSLASH_NOTE = "2 string(s) hold a '\\' that torch's trace writer did not escape"


def test_windows_paths_torch_did_not_escape_are_read_with_slashes(tmp_path: Path) -> None:
    """torch < 2.1 on Windows wrote a Python frame's file path as it is: json.load refuses its '\\U', '\\c',
    '\\_' ("Invalid \\escape"), and npuprof refused the whole trace ("malformed JSON ... (corrupt trace)").
    Each such name is read with '/' for its backslashes, as Kineto writes it since (kineto#754), and said."""
    text, events, names = _torch20_windows_trace()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(text)
    readable = [n.replace("\\", "/") for n in names]
    assert readable[0] == "C:/Users/x/train.py(12): f"  # its "\t" too: the whole path is one string
    (step,) = [e for e in events if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step)
    computing = sum((_span(e)[1] - _span(e)[0] for e in events if e.get("cat") == "cpu_op"), Decimal(0))
    done = npuprof("analyse", str(path), "-j", "1", "--format", "json", timeout=300)
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert [(s["step"], s["duration_us"], s["computing_us"]) for s in rank["steps"]] == [
        (1, float(hi - lo), float(computing))
    ]
    assert sum(w.startswith(BACKSLASH_NOTE) for w in rank["warnings"]) == 1, rank["warnings"]
    stacks = npuprof("export-stacks", str(path))
    assert stacks.returncode == 0, stacks.stderr
    assert stacks.stderr.count(BACKSLASH_NOTE) == 1
    frames = [line.rsplit(" ", 1)[0].split(";") for line in stacks.stdout.splitlines()]
    for readable_name in readable:
        assert any(readable_name.replace(" ", "_") in frame for frame in frames), (readable_name, frames)
    assert "\\" not in stacks.stdout
    timeline = npuprof("memory-timeline", str(path), "-o", str(tmp_path / "m.json"))
    assert timeline.returncode == 0, timeline.stderr
    assert timeline.stderr.count(BACKSLASH_NOTE) == 1
    (memory,) = [e for e in events if e["name"] == "[memory]"]
    times, sizes = json.loads((tmp_path / "m.json").read_text())
    # on the CPU the capture's own changes, summed (helper-215: torch's totals carry earlier captures' blocks)
    assert times == [memory["ts"]] and sizes[-1][-1] == memory["args"]["Bytes"]


def test_windows_paths_whose_backslashes_all_make_json_escapes_are_mended(tmp_path: Path) -> None:
    """The same writer's path 'C:\\tmp\\new\\train.py' is valid JSON, each '\\' before t or n an escape: it
    read as a tab and a newline (export-stacks wrote 'C:_mp_ew_rain.py', analyse's call stacks the control
    characters). No Windows path holds one: each is mended into the '/' and letter later torch writes."""
    from types import SimpleNamespace

    from npuprof.analysis.call_stacks import frames_of
    from npuprof.reports.stacks import folded_from_trace

    pid = tid = 7
    raw = r"C:\tmp\new\train.py(12): step"
    assert "\t" in json.loads(f'"{raw}"')  # what a JSON reader makes of it
    written = raw.replace("\\", "/")
    events = [
        json.dumps(_x("ProfilerStep#1", "user_annotation", 1000, 100, pid, tid)),
        f'{{"ph": "X", "cat": "python_function", "name": "{raw}", "pid": {pid}, "tid": {tid}, '
        '"ts": 1010, "dur": 50, "args": {"Python id": 2}}',
        json.dumps(_x("aten::mm", "cpu_op", 1020, 30, pid, tid)),
    ]
    path = tmp_path / "t.pt.trace.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(events) + "\n]}\n")
    folded = folded_from_trace(path)
    frame = written.replace(" ", "_")
    assert folded.values == {
        ("ProfilerStep",): 50.0,
        ("ProfilerStep", frame): 20.0,
        ("ProfilerStep", frame, "aten::mm"): 30.0,
    }, folded.values
    scanned = SimpleNamespace(
        frame_threads=[], f_thread=None, f_ts=None, f_dur=None, f_name=None, f_id=None, f_parent=None,
        frame_names=[json.loads(f'"{raw}"'), "/home/x/train.py(3): <module>", "a\tb"],
    )  # fmt: skip
    assert frames_of(scanned).names == [written, "/home/x/train.py(3): <module>", "a\tb"]
