"""--export-stacks and --memory-timeline are finished by the post-processor, not in the training step
(issue 12): real `npuprof run -- python trainer.py` runs, files checked against the trace itself, and the
requested outputs that could not be produced named at the end of the run."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, capture_record, clean_env, npuprof, rank_dirs, sched, trainer
from stacks_support import capture, full_capture

CAPTURE_FLAGS = ["--with-stack", "--record-shapes", "--profile-memory"]
LOG_LINE = re.compile(
    r"\[(?P<level>[A-Z]+)\] \[(?P<who>\w+) pid=(?P<pid>\d+) run=(?P<run>\w+)\] (?P<message>.*)$"
)


def _blocked_matplotlib(root: Path) -> Path:
    blocker = root / "block"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    return blocker


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """Two captures back to back (skip 3, no warm-up, record 2, twice: steps 3-4, then 5-6; Adam:
    parameters, gradients and optimizer state) with both exports; the html plot asked for while matplotlib
    cannot be imported. The tests of the exports read the first capture (``rank_dir``, ``record``); the
    test of a snapshot copied during the next capture reads the second (``second``) too."""
    root = tmp_path_factory.mktemp("offloaded")
    out = root / "result"
    env = clean_env(PYTHONPATH=str(_blocked_matplotlib(root)))
    result = npuprof(
        "run", "-o", str(out), "--skip-first", "3", "--warmup", "0", "--active", "2", "--repeat", "2",
        "--no-analyse", *CAPTURE_FLAGS, "--export-stacks", "self_cpu_time_total",
        "--memory-timeline", "json", "--memory-timeline", "html",
        "--", *trainer("--steps", "8", "--optimizer", "adam", "--sleep", "0.05"),
        env=env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first, second = rank_dirs(out)
    return SimpleNamespace(
        out=out, rank_dir=first, second=second, stderr=result.stderr, record=capture_record(first)
    )


def _trace_events(rank_dir: Path) -> list[dict]:
    (trace,) = rank_dir.glob("*.pt.trace.json*")
    opener = gzip.open if trace.name.endswith(".gz") else open
    with opener(trace, "rt") as handle:
        return json.load(handle)["traceEvents"]


def _log(run: SimpleNamespace) -> list[re.Match[str]]:
    lines = (run.out / "npuprof.log").read_text().splitlines()
    return [m for m in map(LOG_LINE.search, lines) if m]


def test_the_files_are_there_and_the_snapshot_is_gone(run: SimpleNamespace) -> None:
    names = {p.name for p in run.rank_dir.iterdir()}
    expected = {
        "stacks_self_cpu_time_total.folded",
        "memory_timeline.raw.json.gz",
        "memory_timeline.meta.json",
        "memory_timeline.json",
    }
    assert expected <= names, names
    assert "memory_timeline.snapshot.msgpack" not in names  # categorised, then removed
    assert "memory_timeline.html" not in names  # matplotlib blocked
    assert set(run.record["extras"]) == expected
    assert run.record["trace"].endswith(".pt.trace.json.gz")


def test_the_step_hands_the_work_over(run: SimpleNamespace) -> None:
    """The step ends the capture; the copy of the profiler's tree is made by the hand-over thread, the
    files are written by the post-processor (another process)."""
    records = _log(run)
    # every line names its run: the runs of a multi-node job share -o, the log, and (containers) pids
    assert {m["who"] for m in records} == {"launcher", "agent", "postprocess"}
    assert {m["run"] for m in records} == {run.record["run_id"]}
    training_pid = str(run.record["pid"])
    (capture_line,) = [
        m for m in records if m["who"] == "agent" and m["message"].startswith("capture of steps 3-4 written")
    ]
    assert capture_line["pid"] == training_pid
    assert capture_line["message"].endswith("memory snapshot: copied in the background")
    (copied,) = [m for m in records if m["message"].startswith(f"{run.rank_dir.name}: memory snapshot: ")]
    assert copied["pid"] == training_pid
    found = re.search(r"(\d+) events, (\d+) tensors, [\d.]+ ms of CPU in (.+)$", copied["message"])
    assert found and int(found[1]) > 50 and int(found[2]) > 50, copied["message"]
    assert found[3] == "the hand-over thread"
    wrote = [m for m in records if m["message"].split(": ", 1)[-1].startswith("wrote ")]
    assert {m["who"] for m in wrote} == {"postprocess"}
    assert training_pid not in {m["pid"] for m in wrote}
    text = " ".join(m["message"] for m in wrote)
    assert "stacks_self_cpu_time_total.folded" in text and "memory_timeline.json" in text


def _busy_us_per_thread(events: list[dict]) -> float:
    """The trace's own host time: per thread, the union of its operator, annotation and Python spans;
    npuprof's own threads (Python frames only, some in npuprof's files) left out, as the stacks leave
    them."""
    spans: dict[tuple, list[dict]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") == "X" and ev.get("cat") in ("cpu_op", "python_function", "user_annotation"):
            spans[(ev["pid"], ev["tid"])].append(ev)
    total = 0.0
    for thread in spans.values():
        python_only = all(ev["cat"] == "python_function" for ev in thread)
        if python_only and any("/npuprof/" in ev["name"] for ev in thread):
            continue
        items = sorted((ev["ts"], ev["ts"] + ev["dur"]) for ev in thread)
        start, end = items[0]
        for s, e in items[1:]:
            if s > end:
                total += end - start
                start, end = s, e
            else:
                end = max(end, e)
        total += end - start
    return total


def test_stacks_add_up_to_the_traced_time(run: SimpleNamespace) -> None:
    values: dict[str, int] = {}
    for line in (run.rank_dir / "stacks_self_cpu_time_total.folded").read_text().splitlines():
        stack, _, value = line.rpartition(" ")
        values[stack] = int(value)
    busy = _busy_us_per_thread(_trace_events(run.rank_dir))
    total = sum(values.values())
    assert abs(total - busy) <= 0.01 * busy, (total, busy)
    assert any("trainer.py" in stack and stack.split(";")[-1].startswith("aten::") for stack in values)


def test_memory_timeline_matches_the_allocator_records(run: SimpleNamespace) -> None:
    raw = json.loads(gzip.decompress((run.rank_dir / "memory_timeline.raw.json.gz").read_bytes()))
    created = sorted(n for t, action, n, _ in raw if action == 2 and t != -1)  # CREATE inside the capture
    events = _trace_events(run.rank_dir)
    allocations = sorted(
        e["args"]["Bytes"] for e in events if e.get("name") == "[memory]" and e["args"]["Bytes"] > 0
    )
    assert created == allocations
    times, sizes = json.loads((run.rank_dir / "memory_timeline.json").read_text())
    assert len(times) == len(sizes) > 10
    # [0, PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, UNKNOWN]
    peak = [max(row[i] for row in sizes) for i in range(9)]
    # trainer.py: model = Linear(16, 32), Linear(32, 4), trained by Adam; `second` = Linear(4, 4), in the
    # loss but not in the optimizer; all float32
    optimized = 4 * (16 * 32 + 32 + 32 * 4 + 4)
    every = optimized + 4 * (4 * 4 + 4)
    assert sizes[0][1] == every, sizes[0]  # the parameters, there before the capture
    assert peak[6] == every, peak  # a gradient for each
    assert peak[2] == 2 * optimized + 4 * 4, peak  # Adam: exp_avg, exp_avg_sq, a float32 step each
    meta = json.loads((run.rank_dir / "memory_timeline.meta.json").read_text())
    assert meta["device"] == "cpu" and meta["source"] == "categorised"
    assert meta["max_allocated_bytes"] == max(sum(row) for row in sizes)


def test_an_output_not_produced_is_named_at_the_end_with_its_fix(run: SimpleNamespace) -> None:
    """(Each of the run's two captures is named once, with its fix.)"""
    tail = run.stderr[run.stderr.index(" capture(s) in ") :]  # the run's summary
    assert len([x for x in tail.splitlines() if "memory_timeline.html not produced" in x]) == 2, tail
    said = " ".join(tail.split())  # whole lines in a log, wrapped where COLUMNS is set: the words count
    for rank_dir in (run.rank_dir, run.second):
        assert said.count(f"memory_timeline.html not produced ({rank_dir.name})") == 1, tail
    assert "matplotlib" in said and "pip install 'npuprof[plot]'" in said, tail


def test_a_snapshot_copied_during_the_next_capture_stays_out_of_its_trace(run: SimpleNamespace) -> None:
    """Back-to-back captures (the run's: --warmup 0 --repeat 2): the hand-over thread copies capture 1's
    tree while capture 2 records with --with-stack. torch's Python tracer hooks every thread; the copy used
    to land in capture 2's trace (~4,000 `memory_snapshot.py` frames here) and slow its steps."""
    first, second = run.rank_dir, run.second
    assert (second / "memory_timeline.json").is_file() and (first / "memory_timeline.json").is_file()
    events = [e for e in _trace_events(second) if e.get("cat") == "python_function"]
    copying = Counter((e["tid"], e["name"]) for e in events if "memory_snapshot.py" in e["name"])
    # what may stay: each thread's stack at the moment capture 2 began (torch records every thread's open
    # frames then), each frame once: the copier's run, _copy, _walk, tensor, and the hand-over thread's run
    # where it already waits for that copy (seen in 2 runs of 3: counted together, the two reached 4)
    per_thread = Counter(tid for tid, _name in copying)
    assert max(copying.values(), default=0) <= 1 and max(per_thread.values(), default=0) <= 4, copying
    assert any("trainer.py" in e["name"] for e in events)  # the tracer did record the training thread
    assert "acc_events" not in run.stderr  # torch's warning on its second cycle: each is a capture here


def test_with_modules_without_with_stack_is_named_at_the_end(tmp_path: Path) -> None:
    out = tmp_path / "result"
    result = npuprof(
        "run", "-o", str(out), *sched(1, 1, 1), "--no-analyse",
        "--with-modules", "--record-shapes", "--profile-memory", "--memory-timeline", "json",
        "--", *trainer("--steps", "4"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (rank_dir,) = rank_dirs(out)
    assert not list(rank_dir.glob("memory_timeline.*"))
    notes, _, last = result.stderr.partition("\nnext: ")
    assert "memory_timeline.* not produced" in notes and "fix: add --with-stack" in notes, result.stderr
    assert "\n" not in last.rstrip("\n"), result.stderr  # `next:` is the summary's last line, after its notes


def test_the_launcher_can_tell_before_the_job_starts(tmp_path: Path) -> None:
    """Without site-packages (python -S) neither matplotlib nor torch_npu can be found: both problems are
    known before the job runs when the job runs this Python; another program says nothing."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from types import SimpleNamespace as N\n"
        "from npuprof.results.extras import preflight_notes\n"
        "cfg = N(memory_timeline=['html'], with_modules=True, with_stack=False)\n"
        "for note in preflight_notes(cfg, [sys.executable, 'train.py']): print(note)\n"
        "print('other:', preflight_notes(cfg, ['/bin/sh', 'train.sh']))\n"
        "print('fine:', preflight_notes(N(memory_timeline=['json'], with_modules=False, with_stack=True),"
        " [sys.executable]))\n"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert (
        lines[0].startswith("--memory-timeline html: matplotlib is not installed")
        and "npuprof[plot]" in lines[0]
    )
    assert "needs --with-stack" in lines[1] and lines[1].endswith("fix: add --with-stack")
    assert lines[2:] == ["other: []", "fine: []"]


def test_not_produced_notes_count_captures() -> None:
    from npuprof.results.extras import not_produced, not_produced_notes

    message = not_produced("memory_timeline.html", "needs matplotlib", "pip install x")
    lines = [
        f"2026-01-01 00:00:00 [WARNING] [postprocess pid=7] h_{pid}_20260101000000000_ascend_pt: {message}"
        for pid in (1, 2, 2)
    ]
    lines.append("2026-01-01 00:00:00 [INFO] [postprocess pid=7] h_1_20260101000000000_ascend_pt: wrote x")
    assert not_produced_notes(lines) == [
        "memory_timeline.html not produced (2 captures): needs matplotlib; fix: pip install x"
    ]
    (one,) = not_produced_notes(lines[:1])  # one capture: named
    assert one.startswith("memory_timeline.html not produced (h_1_20260101000000000_ascend_pt): ")


def _folded_total(path: Path) -> int:
    return sum(int(line.rpartition(" ")[2]) for line in path.read_text().splitlines() if line.strip())


def test_rebuilt_stacks_total_is_within_1_percent_of_torchs_export_stacks() -> None:
    """The claim the move rests on: the stacks the post-processor rebuilds from the trace add up to what
    torch's own export_stacks gives for the same capture (its profiler started with verbose=True)."""
    totals = []
    for rank_dir in (
        full_capture(),
        capture("stacks-again", "--torch-stacks", "--stacks", "self_cpu_time_total"),
    ):
        theirs = _folded_total(rank_dir / "ref_torch_stacks.txt")
        ours = _folded_total(rank_dir / "stacks_self_cpu_time_total.folded")
        assert theirs > 1_000, theirs  # µs: a real capture, not an empty export
        # 1%, plus a fixed few hundred µs measured between the two on short captures (4 ms ones differ by
        # 300-330 µs, 40 ms ones by 70): torch's export leaves out some of the step boundary's own time
        if abs(ours - theirs) <= 0.01 * theirs + 500:
            return
        # Seen once in ~20 full runs under load: 8,056 against 8,728 µs. A second capture, made only
        # then, must agree: a fault in the rebuild is in both.
        totals.append((ours, theirs))
    raise AssertionError(f"two captures' stack totals, ours against torch's: {totals}")


def test_plot_units_follow_the_peak_and_cpu_has_no_reserved() -> None:
    from npuprof.reports import memory_timeline as mt

    mib3 = 3 * 1024**2
    cpu = mt.MemoryData("cpu", mt.SOURCE_TRACE, [(0, 2, mib3, 7)], max_allocated=mib3, max_reserved=5 * mib3)
    assert mt.peak_lines(cpu) == (
        "Max memory allocated: 3.00 MiB (3,145,728 bytes)",
        "Max memory reserved: n/a (the CPU allocator keeps no cache; reserved = allocated)",
    )
    gib2 = 2 * 1024**3
    gpu = mt.MemoryData(
        "cuda:0", mt.SOURCE_TRACE, [(0, 2, gib2, 7)], max_allocated=gib2, max_reserved=gib2 + gib2 // 2
    )
    assert mt.peak_lines(gpu) == (
        "Max memory allocated: 2.00 GiB (2,147,483,648 bytes)",
        "Max memory reserved: 3.00 GiB (3,221,225,472 bytes)",
    )
    small = mt.MemoryData("cpu", mt.SOURCE_CATEGORISED, [(0, 2, 512, 0)], max_allocated=512)
    assert mt.peak_lines(small)[0] == "Max memory allocated: 0.50 KiB (512 bytes)"
    # a peak of exactly one unit is given in it (the largest unit in which it is at least 1)
    one = mt.MemoryData("cpu", mt.SOURCE_CATEGORISED, [(0, 2, 1024**2, 0)], max_allocated=1024**2)
    assert mt.peak_lines(one)[0] == "Max memory allocated: 1.00 MiB (1,048,576 bytes)"


def test_snapshots_waiting_behind_a_slow_copy_make_it_go_at_full_speed(tmp_path: Path) -> None:
    """The copy leaves the GIL to training (slices of 10 events, ~2 % of the time: helper-99 measured the
    steps after a capture at 2-3x their length with the slices before), so captures back to back outpace it;
    each snapshot waiting holds its capture's event tree. Past WAITING_SNAPSHOTS waiting, the copy under way
    is hurried (no pauses): the trees held stay bounded."""
    import threading

    from npuprof.agent.memory_snapshot import TASK_KEY, WAITING_SNAPSHOTS
    from npuprof.owned_fd import OwnedFd
    from npuprof.results import postprocess

    class SlowCopy:
        left_for_room = ""  # written (SnapshotTask: not left for --min-free-space)

        def __init__(self) -> None:
            self.hurried = threading.Event()
            self.started = threading.Event()

        def hurry(self) -> None:
            self.hurried.set()

        def run(self, pause: bool = True) -> None:
            # as SnapshotTask.run: no pauses from its start is hurried (the copier, taking it late with more
            # than WAITING_SNAPSHOTS behind it, asks that: a copier thread started 0.6 s late on busy cores
            # failed the test)
            if not pause:
                self.hurry()
            self.started.set()
            assert self.hurried.wait(timeout=30), "never hurried"

    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    handover._write = lambda job: True  # type: ignore[method-assign]  # the pipe is not what is tested
    copies = [SlowCopy() for _ in range(WAITING_SNAPSHOTS + 2)]
    try:
        for n, copy in enumerate(copies):
            handover.put({"exports": {TASK_KEY: copy}, "n": n})
            if n == 0:
                assert copy.started.wait(timeout=30)
            if n <= WAITING_SNAPSHOTS:  # the first under way, up to WAITING_SNAPSHOTS behind it
                assert not copies[0].hurried.wait(timeout=0.2), f"hurried with {n} waiting"
        assert copies[0].hurried.wait(timeout=30)  # one too many waiting: the first goes at full speed
    finally:
        for copy in copies:
            copy.hurry()
        os.close(read_end)


def test_snapshots_are_copied_while_the_pipe_is_full(tmp_path: Path) -> None:
    """helper-100: with the post-processor stopped while captures record back to back, its pipe filled, the
    hand-over thread blocked in its write, and every later capture's event tree stayed alive behind it
    (357 -> 868 MB over 100 captures). The copies go on apart from the pipe: each tree is let go once
    copied, however long the job waits to be written."""
    import threading

    from npuprof.agent.memory_snapshot import TASK_KEY
    from npuprof.owned_fd import OwnedFd
    from npuprof.results import postprocess

    class Copy:
        left_for_room = ""  # written (SnapshotTask: not left for --min-free-space)

        def __init__(self) -> None:
            self.done = threading.Event()
            self.lock = threading.Lock()

        def hurry(self) -> None:
            pass

        def run(self, pause: bool = True) -> None:
            with self.lock:
                self.done.set()

    pipe_full = threading.Event()
    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    handover._write = lambda job: pipe_full.wait(timeout=60)  # type: ignore[method-assign,assignment]
    copies = [Copy() for _ in range(6)]
    try:
        for n, copy in enumerate(copies):
            handover.put({"exports": {TASK_KEY: copy}, "n": n})
        for copy in copies:  # all copied while the first job's write still waits for room
            assert copy.done.wait(timeout=30)
        assert handover.sent == 0
    finally:
        pipe_full.set()
        os.close(read_end)


def _notes_where_torch_npu(present: bool, monkeypatch: pytest.MonkeyPatch, **flags: object) -> list[str]:
    """preflight_notes of `npuprof run FLAGS -- python train.py` (this Python), torch_npu found or not."""
    import importlib.util

    from npuprof.cli import run_flags
    from npuprof.results.extras import preflight_notes

    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        if name == "torch_npu":
            return SimpleNamespace(name=name) if present else None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    return preflight_notes(run_flags.build_config(None, flags), [sys.executable, "train.py"])


def test_with_modules_without_with_stack_is_said_at_start_where_it_adds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--with-modules on the CPU (torch.profiler: TorchScript modules only) without --with-stack added
    nothing and said nothing; one warning names both flags and the fix. Not on an NPU (torch_npu's
    with_modules records eager modules), not with --with-stack, not with --dynamic (each request's own)."""
    (note,) = _notes_where_torch_npu(False, monkeypatch, with_modules=True)
    assert note.startswith("--with-modules without --with-stack adds nothing on CPU and CUDA"), note
    assert note.endswith("fix: add --with-stack, or drop --with-modules"), note
    assert _notes_where_torch_npu(True, monkeypatch, with_modules=True) == []
    assert _notes_where_torch_npu(False, monkeypatch, with_modules=True, with_stack=True) == []
    assert _notes_where_torch_npu(False, monkeypatch, with_modules=True, dynamic="cfg") == []
    # with --memory-timeline the memory timeline's own line says it, with the same fix: one line, not two
    memory = {"record_shapes": True, "profile_memory": True, "memory_timeline": ["json"]}
    (note,) = _notes_where_torch_npu(False, monkeypatch, with_modules=True, **memory)
    assert note.startswith("--memory-timeline: on CPU and CUDA torch's memory profiler needs --with-stack")


def test_with_modules_warning_reaches_stderr_once_and_the_exit_code_stands(tmp_path: Path) -> None:
    """The launcher says it before the job starts (a plain Python job: no torch needed to show it)."""
    result = npuprof(
        "run", "-o", str(tmp_path / "out"), "--with-modules", "--",
        sys.executable, "-c", "import sys; sys.exit(3)",
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    lines = [line for line in result.stderr.splitlines() if "--with-modules without --with-stack" in line]
    assert len(lines) == 1 and lines[0].startswith("npuprof: "), result.stderr


def test_a_capture_begun_in_the_copys_pause_traces_nothing_of_it_from_its_resumption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch's Python tracer, put on the copying thread while the copy paused after a slice (where it
    spends nearly all its time), saw the tensors of the event the copy took on resuming before it left the
    tracer: frames of npuprof's in the user's next capture. Only the copy's own resumption may be seen."""
    from torch._C import _profiler

    from npuprof.agent import memory_snapshot

    class Op:  # the tree's operator fields and tensor metadata, stood in for (they cannot be made)
        def __init__(self, inputs: list[object]) -> None:
            self.inputs, self.scope = inputs, 0

    class Meta:
        id = storage_data_ptr = allocation_id = 1
        device, layout, sizes, strides, dtype = "cpu", "strided", [2], [1], "float"

    monkeypatch.setattr(_profiler, "_ExtraFields_TorchOp", Op, raising=False)
    monkeypatch.setattr(_profiler, "_TensorMetadata", Meta, raising=False)
    ops = [
        SimpleNamespace(extra_fields=Op([Meta(), Meta()]), start_time_ns=n, name=f"aten::op{n}", children=[])
        for n in range(2 * memory_snapshot.SLICE_EVENTS)
    ]
    events: list[tuple] = []
    tensors: list[tuple] = []
    seen: list[str] = []
    copy = memory_snapshot._walk(ops, events, tensors)
    next(copy)  # the first slice, up to its pause
    sys.setprofile(lambda frame, what, arg: seen.append(frame.f_code.co_name) if what == "call" else None)
    try:
        next(copy)  # the second slice, resumed under a tracer
    finally:
        left = sys.getprofile() is None
        sys.setprofile(None)
    assert seen == ["_walk"], seen
    assert left
    assert len(events) == 2 * memory_snapshot.SLICE_EVENTS - 1 and len(tensors) == 2 * len(events)
