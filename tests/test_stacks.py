"""export-stacks: in-run export (real torch.profiler captures in subprocesses) and the offline command."""

from __future__ import annotations

import gzip
import json
import os
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _forked_cli import npuprof_from_repo as cli  # stacks_support.cli's commands, forked
from stacks_support import (
    FLAMEGRAPH_LINE,
    FULL_CAPTURE_ARGS,
    capture,
    captures,
    exports_record,
    full_capture,
    load_trace_json,
    synthetic_cuda,
    trace_of,
)

from npuprof.reports import flamegraph_svg as fg
from npuprof.reports import stacks as st
from npuprof.results import layout

SVG_NS = "{http://www.w3.org/2000/svg}"


def _parse_lines(text: str) -> dict[tuple[str, ...], int]:
    values: dict[tuple[str, ...], int] = defaultdict(int)
    for line in text.splitlines():
        match = FLAMEGRAPH_LINE.match(line)
        assert match, f"flamegraph.pl would reject {line!r}"
        assert " " not in match.group(1) and "\t" not in match.group(1), line
        values[tuple(match.group(1).split(";"))] += int(match.group(2))
    return dict(values)


def _thread_busy_us(events: list[dict]) -> float:
    """Per host thread, the length of the union of its duration events (independent of any call tree)."""
    spans: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") == "X" and ev.get("cat") in ("cpu_op", "python_function", "user_annotation"):
            spans[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
    total = 0.0
    for items in spans.values():
        items.sort()
        start, end = items[0]
        for s, e in items[1:]:
            if s > end:
                total += end - start
                start, end = s, e
            else:
                end = max(end, e)
        total += end - start
    return total


@pytest.fixture(scope="module")
def made() -> None:
    """The three real captures of this module ("full" as full_capture() asks it, "plain", "nostack"), made
    by one process that imports torch once (stacks_support.captures: a forked child each); the tests then
    get each from the cache by full_capture() / capture(NAME, ...) as before."""
    captures({
        "full": FULL_CAPTURE_ARGS,
        "plain": ("--no-memory", "--stacks", "self_cpu_time_total", "--memory-format", "json"),
        "nostack": ("--no-stack", "--no-memory"),
    })  # fmt: skip


# ------------------------------------------------------------------ in the run


def test_in_run_stacks_are_rebuilt_from_the_trace(made):
    rank_dir = full_capture()
    record = exports_record(rank_dir)
    path = rank_dir / "stacks_self_cpu_time_total.folded"
    assert str(path) in record["written"]
    assert not [m for m in record["log"] if "stacks" in m and "wrote" not in m], record["log"]
    values = _parse_lines(path.read_text())
    assert len(values) > 20
    # Python frames of the training loop, outermost first
    assert any(any("capture.py(" in frame for frame in stack) for stack in values)
    assert values == _parse_lines(st.folded_from_trace(trace_of(rank_dir), st.HOST_METRIC).text())
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)


def test_in_run_memory_timeline_without_its_flags_names_them(made):
    rank_dir = capture("plain", "--no-memory", "--stacks", "self_cpu_time_total", "--memory-format", "json")
    record = exports_record(rank_dir)
    path = rank_dir / "stacks_self_cpu_time_total.folded"
    assert str(path) in record["written"]
    values = _parse_lines(path.read_text())
    assert any(stack[-1].startswith("aten::") for stack in values)
    # memory timeline asked without its flags: not produced, the log names them
    assert any("not produced" in m and "--profile-memory --record-shapes" in m for m in record["log"]), (
        record["log"]
    )
    assert not (rank_dir / "memory_timeline.raw.json.gz").exists()


# ------------------------------------------------------------------ offline


def test_offline_totals_match_the_trace_and_torch_self_times(made):
    rank_dir = full_capture()
    folded = st.folded_from_trace(trace_of(rank_dir), st.HOST_METRIC)
    values = _parse_lines(folded.text())
    total = sum(values.values())
    busy = _thread_busy_us(load_trace_json(trace_of(rank_dir)))
    assert abs(total - busy) <= 0.01 * busy, (total, busy)
    # per operator, against torch's own key_averages() of the same capture
    reference = json.loads((rank_dir / "ref_key_averages.json").read_text())
    # per line the file holds whole µs (rounded up or down, the total kept): compare the exact values
    assert values == {
        tuple(map(st.sanitise_frame, stack)): value for stack, value in folded.integer_values().items()
    }
    by_leaf: dict[str, float] = defaultdict(float)
    for stack, value in folded.values.items():
        by_leaf[st.sanitise_frame(stack[-1])] += value
    ops = [name for name in reference if name.startswith("aten::")]
    assert len(ops) > 10
    ours = sum(by_leaf[st.sanitise_frame(name)] for name in ops)
    theirs = sum(reference[name] for name in ops)
    assert abs(ours - theirs) <= 0.01 * theirs, (ours, theirs)
    assert folded.has_python_frames


def test_integer_rounding_keeps_the_total():
    folded = st.FoldedStacks(st.HOST_METRIC, {("a",): 0.4, ("a", "b"): 0.4, ("a", "c"): 0.4, ("d",): 10.6})
    ints = folded.integer_values()
    assert sum(ints.values()) == round(11.8)
    assert all(abs(ints.get(p, 0) - v) < 1 for p, v in folded.values.items())
    # largest remainders first (helper-368: smallest first also kept the total and failed no test): of
    # 0.2 + 0.7 + 0.45 + 1.65 = 3 µs, the floors (0, 0, 0, 1) lack 2, given to 0.7 and 1.65
    folded = st.FoldedStacks(st.HOST_METRIC, {("a",): 0.2, ("b",): 0.7, ("c",): 0.45, ("d",): 1.65})
    assert folded.integer_values() == {("b",): 1, ("d",): 2}


def test_frames_are_sanitised_as_torch_does():
    assert st.sanitise_frame("a b;c\td\ne") == "a_b_c_d_e"
    text = st.FoldedStacks(st.HOST_METRIC, {("x y", "p;q"): 3.0}).text()
    assert text == "x_y;p_q 3\n"


def test_cli_writes_folded_and_an_interactive_svg(tmp_path):
    rank_dir = full_capture()
    out, svg = tmp_path / "cpu.stacks", tmp_path / "flame.svg"
    proc = cli("export-stacks", str(rank_dir), "-o", str(out), "--svg", str(svg))
    assert proc.returncode == 0, proc.stderr
    values = _parse_lines(out.read_text())
    root = ET.parse(svg).getroot()  # valid XML
    assert root.tag == SVG_NS + "svg"
    groups = root.findall(f".//{SVG_NS}g[@class='frame']")
    # one rect per frame: every node of the merged tree at least 0.1 px wide, plus the root
    total = sum(values.values())
    nodes: dict[tuple[str, ...], int] = defaultdict(int)
    for stack, value in values.items():
        for depth in range(1, len(stack) + 1):
            nodes[stack[:depth]] += value
    scale = (fg.WIDTH - 2 * fg.PAD_X) / total
    # a node is drawn when it and all its ancestors are at least 0.1 px wide (ancestors are wider anyway)
    expected = 1 + sum(1 for value in nodes.values() if value * scale >= 0.1)
    assert len(groups) == expected
    assert all(len(g.findall(f"{SVG_NS}rect")) == 1 for g in groups)
    names = {g.get("data-name") for g in groups}
    assert {"all"} | {frame for stack in values for frame in stack} >= names
    titles = [g.find(f"{SVG_NS}title").text for g in groups]
    assert all("µs" in t and "%" in t for t in titles)
    assert "all (" in titles[0] and "100.00%" in titles[0]
    assert all(g.get("onclick") == "npuprofZoom(this)" for g in groups)
    script = root.find(f"{SVG_NS}script").text
    assert "function npuprofZoom" in script and "function npuprofShow" in script
    assert "http://" not in svg.read_text().replace("http://www.w3.org/2000/svg", "")


def test_cli_writes_stdout_without_outputs():
    proc = cli("export-stacks", str(trace_of(full_capture())))
    assert proc.returncode == 0, proc.stderr
    assert _parse_lines(proc.stdout)


def test_svg_has_one_rect_per_frame_when_nothing_is_left_out():
    stacks = {("a", "b"): 5.0, ("a", "c"): 1e-6, ("d",): 2.0, ("a", "b", "e&<x>"): 1.0}
    text = fg.render_svg(stacks, min_width_px=0)
    root = ET.fromstring(text)
    groups = root.findall(f".//{SVG_NS}g[@class='frame']")
    assert len(groups) == 6  # all, a, a;b, a;c, d, a;b;e&<x>
    assert "e&<x>" in {g.get("data-name") for g in groups}


def test_an_svg_of_stacks_thousands_of_frames_deep_is_drawn(tmp_path):
    """helper-104: `--svg` raised RecursionError (a traceback, no SVG) past ~980 frames; a recursive model
    recorded with --with-stack has such stacks. Each frame sits where its parent does."""
    depth = 3000
    stacks = {tuple(f"f{i}" for i in range(depth)): 5.0, ("f0", "g"): 3.0}
    root = fg.build_tree(stacks)
    node = root
    for i in range(depth):  # "f1" sorts before "g": the tower is first under f0, at 0
        node = node.children[f"f{i}"]
        assert node.offset == 0.0 and node.value == 5.0 + (3.0 if i == 0 else 0.0)
    assert root.children["f0"].children["g"].offset == 5.0
    text = fg.render_svg(stacks, min_width_px=0)
    groups = ET.fromstring(text).findall(f".//{SVG_NS}g[@class='frame']")
    assert len(groups) == depth + 2  # all, the tower, f0;g


def test_no_python_stacks_is_operator_nesting_with_a_note(tmp_path, made):
    rank_dir = capture("nostack", "--no-stack", "--no-memory")
    proc = cli("export-stacks", str(rank_dir), "-o", str(tmp_path / "s.folded"))
    assert proc.returncode == 0, proc.stderr
    assert "--with-stack" in proc.stderr
    values = _parse_lines((tmp_path / "s.folded").read_text())
    # the steps are one root, not one each (the capture recorded several): a graph of code paths
    assert {stack[0] for stack in values if stack[0].startswith("ProfilerStep")} == {"ProfilerStep"}
    lines = [line.rsplit(" ", 1)[0] for line in (tmp_path / "s.folded").read_text().splitlines()]
    assert len(lines) == len(set(lines))  # each path once
    assert any(len(stack) > 1 and stack[-1].startswith("aten::") for stack in values)
    raw = layout.find_raw_trace(rank_dir)
    data = raw.read_bytes()
    trace = json.loads(gzip.decompress(data) if raw.name.endswith(".gz") else data)
    assert len({e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}) > 1


@pytest.mark.parametrize(
    ("with_correlation", "with_flows"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_device_time_goes_to_the_launching_stack(tmp_path, with_correlation, with_flows):
    trace = synthetic_cuda.write(
        tmp_path / "w.1.pt.trace.json.gz", with_correlation=with_correlation, with_flows=with_flows
    )
    out = tmp_path / "cuda.stacks"
    proc = cli("export-stacks", str(trace), "--metric", "self_cuda_time_total", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    values = _parse_lines(out.read_text())
    assert sum(values.values()) == round(synthetic_cuda.EXPECTED_DEVICE_TOTAL)
    by_kernel = {stack[-1]: stack[:-1] for stack in values}
    for name, _ts, _dur, _corr, op in synthetic_cuda.KERNELS:
        # correlation, else the ac2g flow, else External id: all lead to the op, not the runtime call
        assert by_kernel[st.sanitise_frame(name)] == (
            "train.py(10):_<module>",
            st.STEP_FRAME,
            "train.py(5):_step",
            op,
        )
    assert by_kernel[synthetic_cuda.UNLINKED[0]] == (st.UNLINKED_FRAME,)
    # the host metric of the same trace counts host time only (the device process is left out)
    host = st.folded_from_trace(trace, st.HOST_METRIC)
    assert abs(host.total_us - 1000.0) < 1e-6
    assert any(path[-1] == "cudaLaunchKernel" for path in host.values)


def test_cli_bad_input(tmp_path, made):
    rank_dir = full_capture()
    bad = cli("export-stacks", str(rank_dir), "--metric", "self_gpu_time")
    assert bad.returncode == 2 and "--metric" in bad.stderr and "self_cpu_time_total" in bad.stderr
    device = cli("export-stacks", str(rank_dir), "--metric", "self_npu_time_total")
    assert device.returncode == 1 and "no device kernels" in device.stderr
    assert "--metric self_cpu_time_total" in device.stderr
    empty = tmp_path / "host_1_20250101000000000_ascend_pt"
    empty.mkdir()
    missing = cli("export-stacks", str(empty))
    assert missing.returncode == 1 and "has no trace" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    (tmp_path / "b_2_20250101000000000_ascend_pt").mkdir()
    several = cli("export-stacks", str(tmp_path))
    assert several.returncode == 1 and "2 captures of 2 processes, none with a rank" in several.stderr
    # torch's tensorboard_trace_handler layout: one of them was taken, silently (helper-87)
    handler = tmp_path / "tb"
    handler.mkdir()
    trace = next(rank_dir.glob("*.pt.trace.json*"))
    for name in ("rank0.1.pt.trace.json", "rank1.2.pt.trace.json"):
        (handler / name).write_bytes(trace.read_bytes())
    for command in ("export-stacks", "memory-timeline"):
        both = cli(
            command, str(handler), *(["-o", str(tmp_path / "m.json")] if command == "memory-timeline" else [])
        )
        assert both.returncode == 1, both.stderr
        assert (
            f"{handler} holds 2 traces (rank0.1.pt.trace.json, rank1.2.pt.trace.json): give one of them"
            in (both.stderr)
        ), both.stderr


def test_an_output_in_a_missing_directory_says_to_make_it(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}}
    ]}))  # fmt: skip
    for flag in ("--svg", "-o"):
        done = cli("export-stacks", str(trace), flag, str(tmp_path / "nodir" / "x.out"))
        assert done.returncode == 2
        assert "does not exist: make it first, or give a file in another" in done.stderr, done.stderr


def test_an_output_over_the_input_or_a_file_of_its_capture_is_refused(tmp_path):
    """helper-124: -o RANKDIR/<its trace> replaced the only raw trace with folded text (exit 0, "wrote"); the
    capture record and torch_npu's parsed trace were overwritten the same way."""
    rank_dir = tmp_path / "w_1_20260101000000000_ascend_pt"
    (rank_dir / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}}
    ]
    trace = rank_dir / "w.1.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    record = rank_dir / "npuprof_capture.json"
    record.write_text("{}")
    kept = {p: p.read_bytes() for p in (trace, record)}
    targets = {
        trace: "is the trace being read",
        record: "is a file of the capture",
        rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json": "is in a capture's ASCEND_PROFILER_OUTPUT/",
    }
    for target, said in targets.items():
        for flag in ("-o", "--svg"):
            done = cli("export-stacks", str(rank_dir), flag, str(target))
            assert done.returncode == 2 and said in done.stderr, (flag, target, done.stderr)
        done = cli("memory-timeline", str(rank_dir), "-o", str(target))
        assert done.returncode == 2 and said in done.stderr, (target, done.stderr)
    # the memory timeline's own data in the rank dir, and the run's record and log beside it (helper-127)
    run_files = [tmp_path / "npuprof_run.json", tmp_path / "npuprof.log"]
    memory = [rank_dir / "memory_timeline.raw.json.gz", rank_dir / "memory_timeline.meta.json"]
    for target in [*memory, *run_files]:
        done = cli("export-stacks", str(rank_dir), "-o", str(target))
        assert done.returncode == 2 and "is a file of the" in done.stderr, (target, done.stderr)
    done = cli("memory-timeline", str(trace), "-o", str(memory[0]))
    assert done.returncode == 2 and "is a file of the capture" in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in kept} == kept
    assert not any(p.exists() for p in run_files)
    assert not (rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").exists()
    # a sibling capture of the run is protected as well (helper-128)
    sibling = tmp_path / "w_2_20260101000000000_ascend_pt"
    sibling.mkdir()
    (sibling / "w.2.pt.trace.json").write_text("{}")
    done = cli("export-stacks", str(rank_dir), "-o", str(sibling / "w.2.pt.trace.json"))
    assert done.returncode == 2 and "is a file of the capture" in done.stderr, done.stderr
    assert (sibling / "w.2.pt.trace.json").read_text() == "{}"
    mine = cli("export-stacks", str(rank_dir), "-o", str(rank_dir / "mine.folded"))  # a name of its own: fine
    assert mine.returncode == 0 and (rank_dir / "mine.folded").read_text() == "aten::mm 5\n", mine.stderr


def test_status_of_a_directory_that_does_not_exist_says_so(tmp_path):
    done = cli("status", str(tmp_path / "nosuch"))
    assert done.returncode == 2
    assert "nosuch does not exist: give the directory of npuprof run --dynamic DIR" in done.stderr


def ev(name: str, cat: str, ts: float, dur: float) -> dict:
    """A complete event of thread 1 starting ``ts`` µs into a trace."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": 1000.0 + ts, "dur": dur}


def _folded_of(tmp_path: Path, events: list[dict]) -> dict[tuple[str, ...], int]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return _parse_lines(st.folded_from_trace(path).text())


def test_a_range_opened_inside_a_python_call_holds_what_runs_in_it(tmp_path):
    """torch's record_function range (the user's, ProfilerStep#N, Optimizer.step#) starts inside the
    Python call of its __enter__ (`_record_function_enter_new`, a few µs) and runs past it: it was clipped to
    those µs, and what ran in it went to the enclosing frame (helper-87: no "my_range;" stack with
    --with-stack). It now nests in the nearest frame holding it whole. Times in µs."""

    events = [
        ev("job.py(5): <module>", "python_function", 0, 1000),
        ev("torch/autograd/profiler.py(918): __enter__", "python_function", 100, 10),
        ev("<built-in method _record_function_enter_new>", "python_function", 102, 5),
        ev("my_range", "user_annotation", 105, 795),  # [105, 900)
        ev("aten::mm", "cpu_op", 200, 600),  # [200, 800)
        ev("torch/autograd/profiler.py(930): __exit__", "python_function", 895, 15),
    ]
    values = _folded_of(tmp_path, events)
    module = "job.py(5):_<module>"
    assert values[(module, "my_range", "aten::mm")] == 600
    # the range's own time: [105, 900) less aten::mm and the part of __exit__ inside it ([895, 900))
    assert values[(module, "my_range")] == 795 - 600 - 5
    assert values[(module, "my_range", "torch/autograd/profiler.py(930):___exit__")] == 5
    assert sum(values.values()) == pytest.approx(1000, abs=6)  # the thread's time, the overlap µs aside


def test_a_range_of_npuprof_range_holds_what_runs_in_it(tmp_path):
    """helper-258: ``with npuprof.range("fwd"):`` opens its record_function inside npuprof's own calls
    (marks.py's ``__enter__``, ``range_start``): the range was clipped to the µs of those calls and what ran
    in it (the forward pass) went to the script's frame, a flame graph showing "fwd" empty. It now nests in
    the script's frame and holds its work, as torch's own record_function does. Times in µs."""
    marks = "/site-packages/npuprof/marks.py"
    events = [
        ev("job.py(5): step", "python_function", 0, 1000),
        ev(f"{marks}(114): __enter__", "python_function", 100, 12),
        ev(f"{marks}(63): range_start", "python_function", 101, 10),
        ev("torch/_ops.py(1089): __call__", "python_function", 103, 5),
        ev("fwd", "user_annotation", 106, 794),  # [106, 900)
        ev("aten::linear", "cpu_op", 200, 600),  # [200, 800)
        ev(f"{marks}(140): __exit__", "python_function", 890, 20),
    ]
    values = _folded_of(tmp_path, events)
    step = "job.py(5):_step"
    assert values[(step, "fwd", "aten::linear")] == 600
    assert not [stack for stack in values if "aten::linear" in stack and "fwd" not in stack], values


def test_a_range_whose_name_the_trace_cannot_hold_is_named_as_called(tmp_path):
    """helper-258: ``npuprof.range('load "a"')`` is in torch's trace as ``load %22a%22`` (its quotes would
    break the JSON); analyse shows it as called, from the capture's npuprof_marks.json, but export-stacks
    showed ``load_%22a%22`` (in the file written during the run too). Both show ``load_"a"`` now, from the
    raw trace or the parse's trace_view.json."""
    from npuprof.analysis.marks_ranges import MARKS_FILE

    rank_dir = tmp_path / "vm_1_20261206120000000_ascend_pt"
    (rank_dir / layout.PARSED_DIR).mkdir(parents=True)
    called, traced = 'load "a"', "load %22a%22"
    marks = {"version": 1, "names": {traced: "range"}, "names_not_listed": 0, "shown": {traced: called}}
    (rank_dir / MARKS_FILE).write_text(json.dumps(marks))
    events = [ev("ProfilerStep#1", "user_annotation", 0, 100), ev(traced, "user_annotation", 10, 50)]
    for trace in (rank_dir / "vm.1.pt.trace.json", rank_dir / layout.PARSED_DIR / layout.PARSED_TRACE):
        trace.write_text(json.dumps({"traceEvents": events}))
        values = _parse_lines(st.folded_from_trace(trace).text())
        assert values == {("ProfilerStep",): 50, ("ProfilerStep", 'load_"a"'): 50}, (trace, values)
    # the file the post-processor writes during the run
    from npuprof.agent.capture_exports import stacks_file_name
    from npuprof.results.extras import finish_exports
    from npuprof.results.handover import ExportsJob

    raw = rank_dir / "vm.1.pt.trace.json"
    finish_exports(rank_dir, raw, ExportsJob(stacks=[st.HOST_METRIC]), lambda _message, _level: None)
    written = _parse_lines((rank_dir / stacks_file_name(st.HOST_METRIC)).read_text())
    assert written == {("ProfilerStep",): 50, ("ProfilerStep", 'load_"a"'): 50}, written
    # a trace outside a rank dir keeps the names it has
    bare = tmp_path / "t.json"
    bare.write_text(json.dumps({"traceEvents": events}))
    assert ("ProfilerStep", "load_%22a%22") in _parse_lines(st.folded_from_trace(bare).text())


def test_python_frames_that_overlap_without_nesting_say_the_time_not_in_the_stacks(tmp_path):
    """helper-179: a broken trace whose Python frames overlap without nesting (``inner`` begins inside
    ``outer`` and ends 50 µs after it) lost the 50 µs ``inner`` ran alone without a word: the lines added up
    to 100 µs for a thread busy 150 (docs/formats.md: the totals are each thread's busy time). The lines
    stay as they were (the span is cut at its parent's end), and a warning names what is in no stack."""
    events = [
        ev("a.py(1): outer", "python_function", 0, 100),
        ev("a.py(5): inner", "python_function", 50, 100),
        ev("aten::add", "cpu_op", 60, 10),
    ]
    busy = _thread_busy_us(events)
    assert busy == 150
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    folded = st.folded_from_trace(path)
    counted = sum(_parse_lines(folded.text()).values())
    assert counted == 100
    said = " ".join(folded.notes)
    assert "a.py(5): inner" in said and f"{busy - counted:,.0f} µs" in said, folded.notes
    # nested frames, and a frame overrunning its parent by a clock's rounding: nothing said
    events[1]["dur"] = 50.5
    path.write_text(json.dumps({"traceEvents": events}))
    assert st.folded_from_trace(path).notes == []


def test_a_span_cut_at_its_parents_end_inside_another_span_is_said_though_no_time_is_lost(tmp_path):
    """helper-221: ``aten::B`` [150, 250) begins inside ``aten::A`` [100, 200) and runs 50 µs past it, both
    inside ``aten::P`` [50, 220) inside the step: B is cut at A's end, and its last 50 µs went to P (20) and
    the step (30) without a word, the lines adding up to the thread's busy time (the helper-179 warning
    counted only the busy time in no stack, 0 here). The warning names the 50 µs an operator ran past the
    operator it began in (Python frames and ranges cut by design, docs/README's stacks section, are not
    counted)."""
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 1000),
        ev("aten::P", "cpu_op", 50, 170),
        ev("aten::A", "cpu_op", 100, 100),
        ev("aten::B", "cpu_op", 150, 100),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    folded = st.folded_from_trace(path)
    values = _parse_lines(folded.text())
    step = ("ProfilerStep",)
    assert values == {step: 830, (*step, "aten::P"): 70, (*step, "aten::P", "aten::A"): 50,
                      (*step, "aten::P", "aten::A", "aten::B"): 50}  # fmt: skip
    (said,) = [n for n in folded.notes if "aten::B" in n]
    assert "0 µs of those threads' busy time is in no stack, and 50 µs that operators ran past" in said, said


def test_a_range_opened_in_one_function_and_closed_in_another_keeps_the_callers(tmp_path):
    """``opener()`` enters a range and calls ``work()``; ``closer()`` calls ``work()`` and exits it
    (helper-88: the range was lifted out of ``opener`` and took its ``work`` with it: a call path
    ``<module>;crossfn;work`` that never ran). The script's frame stays: the range is cut at its end."""

    events = [
        ev("job.py(9): <module>", "python_function", 0, 200),
        ev("job.py(5): opener", "python_function", 0, 93),
        ev("torch/autograd/profiler.py(918): __enter__", "python_function", 5, 6),
        ev("<built-in method _record_function_enter_new>", "python_function", 7, 3),
        ev("crossfn", "user_annotation", 9, 149),  # [9, 158)
        ev("job.py(4): work", "python_function", 18, 74),
        ev("aten::mm", "cpu_op", 20, 70),
        ev("job.py(7): closer", "python_function", 96, 63),
        ev("job.py(4): work", "python_function", 100, 40),
        ev("aten::mm", "cpu_op", 101, 38),
    ]
    values = _folded_of(tmp_path, events)
    module, opener, work = "job.py(9):_<module>", "job.py(5):_opener", "job.py(4):_work"
    assert values[(module, opener, "crossfn", work, "aten::mm")] == 70
    assert values[(module, "job.py(7):_closer", work, "aten::mm")] == 38
    assert not [stack for stack in values if stack[:2] == (module, "crossfn")], values


def test_the_steps_of_a_torch_npu_trace_view_merge_into_one_frame(tmp_path):
    """helper-100: torch_npu writes ProfilerStep#N as a cpu_op (torch as a user_annotation): its steps
    stayed one tower each. The real trace_view.json with a copy of its step 20 ms later: one root."""
    from decimal import Decimal

    real = json.loads((Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json").read_text())
    (step,) = [e for e in real if str(e.get("name", "")).startswith("ProfilerStep#")]
    lo, hi = Decimal(step["ts"]), Decimal(step["ts"]) + Decimal(str(step["dur"]))
    later = []
    for e in real:
        if e.get("ph") == "X" and isinstance(e.get("ts"), str) and lo <= Decimal(e["ts"]) < hi:
            moved = {**e, "ts": str(Decimal(e["ts"]) + 20000)}
            if moved["name"] == step["name"]:
                moved["name"] = "ProfilerStep#2"
            later.append(moved)
    trace = tmp_path / "trace_view.json"
    trace.write_text(json.dumps(real + later))
    proc = cli("export-stacks", str(trace), "-o", str(tmp_path / "s.folded"))
    assert proc.returncode == 0, proc.stderr
    roots = {
        line.split(";", 1)[0].rsplit(" ", 1)[0] for line in (tmp_path / "s.folded").read_text().splitlines()
    }
    assert "ProfilerStep" in roots and not any(r.startswith("ProfilerStep#") for r in roots), roots


def test_a_device_metric_named_for_the_other_device_shows_the_traces_device_and_says_so(tmp_path):
    """--metric self_cuda_time_total on an NPU trace reported the NPU's device time under the CUDA name,
    unsaid. As torch's export_stacks (any device metric name is the device's time) it is taken, and one line
    says the NPU's time is shown: the real trace_view.json's Ascend Hardware tasks, summed here; and the
    other way round on a CUDA trace."""
    real = Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json"
    events = json.loads(real.read_text())
    (npu,) = [
        e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "Ascend Hardware"
    ]
    device_us = sum(e["dur"] for e in events if e.get("ph") == "X" and e["pid"] == npu)
    stacks = {}
    for metric in ("self_cuda_time_total", "self_npu_time_total"):
        out = tmp_path / f"{metric}.folded"
        proc = cli("export-stacks", str(real), "--metric", metric, "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        stacks[metric] = _parse_lines(out.read_text())
        said = [line for line in proc.stderr.splitlines() if "device time is shown" in line]
        assert len(said) == (metric == "self_cuda_time_total"), proc.stderr
        assert all("self_cuda_time_total on an NPU trace: the NPU's device time is shown" in s for s in said)
    assert stacks["self_cuda_time_total"] == stacks["self_npu_time_total"]
    assert sum(stacks["self_npu_time_total"].values()) == round(device_us)
    cuda = synthetic_cuda.write(tmp_path / "w.1.pt.trace.json.gz", with_correlation=True, with_flows=True)
    on_cuda = st.folded_from_trace(cuda, "self_npu_time_total")
    assert round(on_cuda.total_us) == round(synthetic_cuda.EXPECTED_DEVICE_TOTAL)
    assert [n for n in on_cuda.notes if "device time is shown" in n] == [
        "self_npu_time_total on a CUDA trace: the GPU's device time is shown, under that name (torch's "
        "export_stacks reads any device metric as the device's time; --metric self_cuda_time_total names it)"
    ]
    assert not [n for n in st.folded_from_trace(cuda, "self_cuda_time_total").notes if "shown" in n]


def test_the_runs_npu_stacks_under_the_cuda_name_are_said_once_not_again_per_capture(tmp_path):
    """A run's --export-stacks self_cuda_time_total on torch_npu says once that the NPU's time is shown
    (tests/test_npu_backend.py); the post-processor, building the stacks torch_npu gave nothing for from a
    capture's trace_view.json, said it again for each capture. It writes them, the NPU's, and says nothing."""
    real = Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json"
    cuda, npu = _post_processors_stacks(tmp_path, real, ["self_cuda_time_total", "self_npu_time_total"])
    assert cuda and cuda == npu


def _post_processors_stacks(rank_dir: Path, trace: Path, metrics: list[str]) -> list[str]:
    """The stacks files the post-processor writes into ``rank_dir`` from ``trace`` for ``metrics`` (all of
    them written, in that order), checked to say nothing of whose device time is shown: the run says it."""
    from npuprof.results.extras import finish_exports
    from npuprof.results.handover import ExportsJob

    said: list[str] = []
    written = finish_exports(rank_dir, trace, ExportsJob(stacks=metrics), lambda text, _: said.append(text))
    assert written == [f"stacks_{metric}.folded" for metric in metrics], said
    assert not [line for line in said if "device time is shown" in line], said
    return [(rank_dir / name).read_text() for name in written]


def test_a_range_around_the_iteration_keeps_what_runs_after_the_step_boundary(tmp_path):
    """helper-121: npuprof's step boundary (optimizer.step()'s return) falls inside a range the script
    wraps its whole iteration in; what the range ran after the boundary ("tiny") was drawn as the next
    step's own (ProfilerStep;tiny), not under the range. Expected values by hand, in µs."""

    def ev(name, ts, dur):
        return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur}

    events = [
        ev("ProfilerStep#1", 1000, 100),
        ev("ProfilerStep#2", 1100, 100),
        ev("ProfilerStep#3", 1200, 100),
        ev("iteration", 1050, 100),  # runs past step 1's end, inside step 2
        ev("opt", 1090, 15),  # the boundary is its optimizer.step()'s return: past it by 5 µs
        ev("tiny", 1110, 10),
        ev("iteration", 1150, 100),  # runs past step 2's end
        ev("tiny", 1210, 10),
    ]
    trace = tmp_path / "t.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    done = cli("export-stacks", str(trace))
    assert done.returncode == 0, done.stderr
    assert _parse_lines(done.stdout) == {
        ("ProfilerStep",): 100,  # 1000-1050 and 1250-1300
        ("ProfilerStep", "iteration"): 40 + 35 + 50 + 40,
        ("ProfilerStep", "iteration", "opt"): 10 + 5,
        ("ProfilerStep", "iteration", "tiny"): 10 + 10,
    }


def test_operators_of_a_torch_npu_trace_keep_their_own_call_stacks_under_a_step(tmp_path):
    """helper-123: torch_npu records the ProfilerStep#N range's own call stack (where npuprof's step
    boundary called prof.step()); its operators, taken as framed by it, lost theirs: every operator under
    npuprof's frames. And torch writes a frame's file relative to its sys.path entry
    ("npuprof/agent/steps.py(103): _stepped", no "/" before it): npuprof's frames were not told apart."""

    def op(name, ts, dur, stack):
        args = {"Call stack": ";\r\n".join(stack)} if stack else {}
        return {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 9,
            "tid": 9,
            "ts": ts,
            "dur": dur,
            "args": args,
        }

    boundary = ["npuprof/agent/steps.py(103): _stepped", "train.py(9): main"]  # innermost first
    events = [
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Python"}},
        op("ProfilerStep#1", "1704161511420306.000", 100.0, boundary),
        op(
            "aten::mm",
            "1704161511420316.000",
            40.0,
            ["torch/nn/functional.py(10): linear", "train.py(7): main"],
        ),
        op(
            "aten::add",
            "1704161511420366.000",
            10.0,
            ["npuprof/agent/steps.py(110): _stepped", "train.py(8): main"],
        ),
    ]
    trace = tmp_path / "trace_view.json"
    trace.write_text(json.dumps(events))
    done = cli("export-stacks", str(trace))
    assert done.returncode == 0, done.stderr
    assert _parse_lines(done.stdout) == {
        ("ProfilerStep",): 50,
        ("ProfilerStep", "train.py(7):_main", "torch/nn/functional.py(10):_linear", "aten::mm"): 40,
        ("ProfilerStep", "train.py(8):_main", "aten::add"): 10,  # npuprof's frame left out
    }


def test_a_range_running_on_between_steps_and_after_the_last_keeps_its_time(tmp_path):
    """helper-123: what a range ran between two steps (a gap) or after the last step was lost, so the totals
    fell short of the thread's busy time (452 µs of 3,445 on a real run). Expected values by hand, in µs."""

    def ev(name, ts, dur, cat="user_annotation"):
        return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur}

    events = [
        ev("ProfilerStep#1", 1000, 100),
        ev("ProfilerStep#2", 1150, 100),  # 50 µs after step 1 ends
        ev("R", 1050, 120),  # through the gap into step 2
        ev("aten::mul", 1110, 20, "cpu_op"),  # in the gap, inside R
        ev("S", 1200, 100),  # past the last step's end (1250), to 1300
        ev("aten::add", 1260, 30, "cpu_op"),  # after the last step, inside S
    ]
    trace = tmp_path / "t.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    done = cli("export-stacks", str(trace))
    assert done.returncode == 0, done.stderr
    folded = _parse_lines(done.stdout)
    assert folded == {
        ("ProfilerStep",): 50 + 30,  # step 1: 1000-1050; step 2: 1170-1200
        ("ProfilerStep", "R"): 50 + 20,  # 1050-1100 in step 1, 1150-1170 in step 2
        ("R",): 30,  # the gap 1100-1150 less aten::mul
        ("R", "aten::mul"): 20,
        ("ProfilerStep", "S"): 50,  # 1200-1250
        ("S",): 20,  # 1250-1300 less aten::add
        ("S", "aten::add"): 30,
    }
    assert sum(folded.values()) == 1300 - 1000  # every µs the thread was busy


def test_a_frame_open_when_the_profiler_started_is_named_as_its_calls_are(tmp_path: Path) -> None:
    """helper-125: torch names the frames open at the profiler's start by the line they were at
    (``s.py(17): train_step``) and later calls by their def line (``s.py(12): train_step``): the step function
    at whose boundary every npuprof capture begins was two boxes of one flame graph."""
    py = "python_function"
    events = [
        ev("s.py(18): <module>", py, 0, 1000),
        ev("s.py(17): train_step", py, 1, 300),  # open at the start: the line it was at
        ev("aten::mm", "cpu_op", 10, 100),
        ev("s.py(12): train_step", py, 400, 500),  # a call: its def line
        ev("aten::mm", "cpu_op", 410, 200),
    ]
    folded = _folded_of(tmp_path, events)
    assert folded == {
        ("s.py(18):_<module>",): 200,
        ("s.py(18):_<module>", "s.py(12):_train_step"): 500,
        ("s.py(18):_<module>", "s.py(12):_train_step", "aten::mm"): 300,
    }, folded
    # two functions of that name (two def lines): the frame keeps the line torch gave it
    events.append(ev("s.py(30): train_step", py, 950, 10))
    assert ("s.py(18):_<module>", "s.py(17):_train_step") in _folded_of(tmp_path, events)


def test_frames_open_at_the_start_are_renamed_at_epoch_times(tmp_path: Path) -> None:
    """helper-219: a real capture's times (epoch µs, `python -m pkg.train`): main's ts + dur came out one
    float rounding past <module>'s, though both end at the capture's end, so the chain of frames open at
    the start stopped there and the step function stayed two boxes, (12) and (9)."""
    py = "python_function"

    def at(name: str, cat: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}

    events = [
        at("pkg/train.py(29): <module>", py, 5694744237895.186, 131382.687),
        at("pkg/train.py(23): main", py, 5694744237896.627, 131381.246),  # ends as <module> does
        at("pkg/train.py(12): step", py, 5694744237898.353, 14577.845),  # open at the start
        at("aten::mm", "cpu_op", 5694744237998.353, 100.0),
        at("pkg/train.py(9): step", py, 5694744271688.055, 5546.1),  # a call: its def line
        at("aten::mm", "cpu_op", 5694744271700.0, 200.0),
    ]
    names = {frame for stack in _folded_of(tmp_path, events) for frame in stack}
    assert "pkg/train.py(12):_step" not in names, names
    assert "pkg/train.py(9):_step" in names, names


def test_frames_torch_could_not_name_are_said(tmp_path: Path) -> None:
    """helper-219: every frame of a script 训练.py (--with-stack) was `unknown` in the stacks, unexplained."""
    py = "python_function"
    events = [ev("unknown", py, 0, 1000), ev("unknown", py, 10, 500), ev("aten::mm", "cpu_op", 20, 100)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert st.UNNAMED_NOTE in st.folded_from_trace(path).notes
    events[0]["name"] = events[1]["name"] = "train.py(3): step"
    path.write_text(json.dumps({"traceEvents": events}))
    assert st.UNNAMED_NOTE not in st.folded_from_trace(path).notes


def test_unnamed_frames_of_an_import_in_the_capture_are_said_as_such(tmp_path: Path) -> None:
    """A 2-rank FSDP2 job that imported torch.distributed.checkpoint inside its loop (Python 3.11): 38
    `unknown` frames, every one the body of a module run by `exec` or of a class by `__build_class__`, all
    of ASCII names; export-stacks said the names held characters the trace cannot hold and that an ASCII
    name shows. The names and nesting are that trace's."""
    py = "python_function"
    events = [
        ev("job.py(80): <module>", py, 0, 1000),
        ev("<frozen importlib._bootstrap>(233): _call_with_frames_removed", py, 10, 900),
        ev("<built-in function exec>", py, 20, 800),
        ev("unknown", py, 30, 700),  # torch/distributed/checkpoint/__init__.py's body
        ev("<built-in function __build_class__>", py, 40, 200),
        ev("unknown", py, 50, 100),  # a class body of that module
        ev("aten::empty", "cpu_op", 300, 50),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    notes = st.folded_from_trace(path).notes
    assert any("imported while the profiler recorded" in n for n in notes), notes
    assert not any("an ASCII name shows" in n for n in notes), notes
    # a frame of a name torch cannot hold (a function 步骤 called by the script) is said as before, too
    events.append(ev("unknown", py, 850, 100))
    path.write_text(json.dumps({"traceEvents": events}))
    notes = st.folded_from_trace(path).notes
    assert any("imported while the profiler recorded" in n for n in notes), notes
    assert any("an ASCII name shows" in n for n in notes), notes


def test_rank_picks_that_ranks_latest_capture_of_a_result(tmp_path):
    """helper-125: export-stacks and memory-timeline on a result of several ranks could only say "give one of
    them"; --rank N reads that rank's latest capture (said when it had several)."""
    sys.path.insert(0, str(Path(__file__).parent / "analyse_support"))
    from handmade import write_rank_dir

    def trace(op: str) -> dict:
        return {"traceEvents": [ev(op, "cpu_op", 0, 7)]}

    out = tmp_path / "result"
    write_rank_dir(out, trace("aten::first"), rank=1, name="w_10_20260101000000000")
    write_rank_dir(out, trace("aten::latest"), rank=1, name="w_11_20260101000500000")
    write_rank_dir(out, trace("aten::rank0"), rank=0, name="w_12_20260101000900000")
    both = cli("export-stacks", str(out), "-o", str(tmp_path / "x"))
    assert both.returncode == 1 and "pick a rank's latest with --rank N" in both.stderr, both.stderr
    done = cli("export-stacks", str(out), "--rank", "1", "-o", str(tmp_path / "r1.folded"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r1.folded").read_text() == "aten::latest 7\n"
    assert (
        "rank 1 has 2 captures in" in done.stderr
        and "w_11_20260101000500000_ascend_pt, is read" in done.stderr
    )
    done = cli("export-stacks", str(out), "--rank", "0")
    assert done.returncode == 0 and done.stdout == "aten::rank0 7\n", done.stderr
    missing = cli("export-stacks", str(out), "--rank", "3")
    assert missing.returncode == 1 and "holds no capture of rank 3 (ranks there: 0, 1)" in missing.stderr
    rank0 = out / "w_12_20260101000900000_ascend_pt"
    wrong = cli("memory-timeline", str(rank0), "--rank", "1", "-o", str(tmp_path / "m.json"))
    assert wrong.returncode == 1 and "is the capture of rank 0, not of rank 1" in wrong.stderr, wrong.stderr
    # its trace file or parsed folder given: the capture's rank is checked; a renamed capture's time is its
    # folder's (helper-128: "rank0_new" sorted after every time)
    trace_file = rank0 / "host.1.pt.trace.json"
    other = cli("export-stacks", str(trace_file), "--rank", "1")
    assert other.returncode == 1 and "is the capture of rank 0, not of rank 1" in other.stderr, other.stderr
    (rank0 / "ASCEND_PROFILER_OUTPUT").mkdir()
    parsed = cli(
        "memory-timeline",
        str(rank0 / "ASCEND_PROFILER_OUTPUT"),
        "--rank",
        "0",
        "-o",
        str(tmp_path / "m.json"),
    )
    assert "is the capture of rank" not in parsed.stderr, parsed.stderr
    renamed = out / "w_11_20260101000500000_ascend_pt"
    renamed.rename(out / "rank1_new_ascend_pt")
    os.utime(out / "rank1_new_ascend_pt", (0, 0))  # 1970: older than the other capture of rank 1
    done = cli("export-stacks", str(out), "--rank", "1")
    assert done.returncode == 0 and done.stdout == "aten::first 7\n", done.stderr
    loose = tmp_path / "loose.json"
    loose.write_text(json.dumps(trace("aten::x")))
    alone = cli("export-stacks", str(loose), "--rank", "0")
    assert alone.returncode == 1 and "is no capture of a result directory" in alone.stderr, alone.stderr
    negative = cli("export-stacks", str(out), "--rank", "-1")
    assert negative.returncode == 2 and "--rank" in negative.stderr and "Traceback" not in negative.stderr


def test_rank_0_of_a_single_process_run_is_its_only_process(tmp_path):
    """A run without torchrun writes captures without a rank: --rank 0 (a user's habit from torchrun) said
    "none of its captures has a rank"; its one process is rank 0, as torch.distributed would number it."""
    sys.path.insert(0, str(Path(__file__).parent / "analyse_support"))
    from handmade import write_rank_dir

    out = tmp_path / "result"
    old, new = ({"traceEvents": [ev(f"aten::{n}", "cpu_op", 0, us)]} for n, us in (("old", 5), ("new", 9)))
    write_rank_dir(out, old, rank=None, name="w_10_20260101000000000")
    latest = write_rank_dir(out, new, rank=None, name="w_10_20260101000500000")
    done = cli("export-stacks", str(out), "--rank", "0")
    assert done.returncode == 0 and done.stdout == "aten::new 9\n", done.stderr
    assert "rank 0 has 2 captures in" in done.stderr, done.stderr
    alone = cli("memory-timeline", str(latest), "--rank", "0", "-o", str(tmp_path / "m.json"))
    assert "is the capture of rank" not in alone.stderr, alone.stderr
    other = cli("export-stacks", str(out), "--rank", "1")
    assert other.returncode == 1 and "none of its captures has a rank" in other.stderr, other.stderr


def test_captures_without_ranks_are_not_told_to_pick_one_with_rank(tmp_path):
    """helper-130: a single-process script run twice into ./npuprof_result (two captures, no rank):
    export-stacks and memory-timeline said "give one of them, or pick a rank's latest with --rank N", and
    --rank 0 then failed with "none of its captures has a rank". Without ranks the advice names the latest
    capture, which --rank 0 reads (a single process is rank 0)."""
    sys.path.insert(0, str(Path(__file__).parent / "analyse_support"))
    from handmade import write_rank_dir

    out = tmp_path / "npuprof_result"
    for name in ("w_10_20260101000000000", "w_11_20260101000500000"):
        write_rank_dir(out, {"traceEvents": [ev("aten::mm", "cpu_op", 0, 7)]}, rank=None, name=name)
    for command in (
        ["export-stacks", str(out)],
        ["memory-timeline", str(out), "-o", str(tmp_path / "m.json")],
    ):
        proc = cli(*command)
        assert proc.returncode == 1, proc.stderr
        latest = "give one of them, or --rank 0 for the latest (w_11_20260101000500000_ascend_pt)"
        assert latest in proc.stderr and "rank N" not in proc.stderr, proc.stderr


def test_captures_of_one_process_are_named_so_not_rank_directories(tmp_path):
    """helper-371: a --repeat 3 run of one process (3 captures, no rank) was said to hold "3 rank
    directories ... --rank 0", which reads as if the job had ranks. The line says whose captures they are."""
    sys.path.insert(0, str(Path(__file__).parent / "analyse_support"))
    from handmade import write_rank_dir

    out = tmp_path / "npuprof_result"
    for stamp in ("20260101000000000", "20260101000001000", "20260101000002000"):
        trace = {"traceEvents": [ev("aten::mm", "cpu_op", 0, 7)]}
        write_rank_dir(out, trace, rank=None, name=f"w_42_{stamp}")
    for command in (
        ["export-stacks", str(out)],
        ["memory-timeline", str(out), "-o", str(tmp_path / "m.json")],
    ):
        proc = cli(*command)
        assert proc.returncode == 1, proc.stderr
        assert f"{out} holds 3 captures of one process, pid 42, no rank (w_42_" in proc.stderr, proc.stderr
        assert "--rank 0 for the latest (w_42_20260101000002000_ascend_pt)" in proc.stderr, proc.stderr
        assert "rank directories" not in proc.stderr, proc.stderr


def test_a_gpu_runs_stacks_under_the_npu_name_are_the_gpus_said_once_not_reported_ignored(tmp_path):
    """`npuprof run --export-stacks self_npu_time_total` on a GPU was reported "ignored on the torch-cuda
    backend" and wrote nothing, where `export-stacks --metric self_npu_time_total` of the same trace shows
    the GPU's time (torch's export_stacks reads any device metric name as the device's) and the reverse on
    torch_npu is taken. Taken on a GPU too: not in the ignored flags, and the post-processor writes the
    GPU's time without saying again what the run said once. A CPU capture has no device: still ignored."""
    from npuprof.agent.backends.torch_backend import TorchBackend
    from npuprof.config import ProfileConfig

    def ignored(use_cuda: bool) -> list[str]:
        backend = object.__new__(TorchBackend)  # no GPU here: the backend's name is what decides
        backend.use_cuda, backend.name = use_cuda, "torch-cuda" if use_cuda else "torch-cpu"
        cfg = ProfileConfig(with_stack=True, export_stacks=["self_npu_time_total", "self_cuda_time_total"])
        return backend.ignored_flags(cfg)

    assert ignored(use_cuda=True) == []
    assert ignored(use_cuda=False) == [
        "--export-stacks self_npu_time_total",
        "--export-stacks self_cuda_time_total",
    ]
    cuda = synthetic_cuda.write(tmp_path / "w.1.pt.trace.json.gz", with_correlation=True, with_flows=True)
    npu, gpu = _post_processors_stacks(tmp_path, cuda, ["self_npu_time_total", "self_cuda_time_total"])
    assert npu and npu == gpu
    assert sum(int(line.rsplit(" ", 1)[1]) for line in npu.splitlines()) == pytest.approx(
        synthetic_cuda.EXPECTED_DEVICE_TOTAL, abs=len(npu.splitlines())
    )
