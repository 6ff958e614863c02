"""The stacks and memory timeline of a capture, finished by the post-processor away from the training step
(docs/architecture.md, "The flow of a trace"), and what the user is told about requested outputs that
could not be produced.

- :func:`finish_exports` (post-processor): ``stacks_<metric>.folded`` rebuilt from the raw trace (torch_npu's
  ``trace_view.json`` where its own ``export_stacks`` gave nothing);
  ``memory_timeline.raw.json.gz`` / ``.meta.json`` and the requested formats from the memory snapshot the
  step wrote (npuprof.agent.memory_snapshot), which is then removed. Files are written atomically.
- "not produced" lines: whoever cannot produce a requested output logs one (:func:`not_produced`), with the
  fix; `npuprof run` shows them at the end of the run (:func:`not_produced_notes`).
- :func:`preflight_notes`: what the launcher can tell before the job starts (same interpreter).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npuprof.invocation import npuprof_cmd

if TYPE_CHECKING:
    from npuprof.results.handover import ExportsJob

NOT_PRODUCED = "not produced: "
PLOT_FIX = "pip install 'npuprof[plot]'"
_NOT_PRODUCED_RE = re.compile(r"\] (?P<dir>[^\s]+_ascend_pt): not produced: (?P<what>[^:]+): (?P<why>.*)$")

Say = Callable[[str, str], None]  # (message, level) into npuprof.log


def not_produced(what: str, why: str, fix: str = "") -> str:
    """The log message of a requested output that could not be produced (one line)."""
    return f"{NOT_PRODUCED}{what}: {why}" + (f"; fix: {fix}" if fix else "")


def not_produced_line(rank_dir: Path, what: str, why: str, fix: str = "") -> str:
    """:func:`not_produced` for a log whose lines do not name the rank dir (the agent's)."""
    return f"{Path(rank_dir).name}: {not_produced(what, why, fix)}"


def not_produced_notes(lines: Sequence[str]) -> list[str]:
    """One terminal line per distinct "not produced" message in ``lines`` (npuprof.log of the run), with how
    many captures it concerns."""
    seen: dict[tuple[str, str], set[str]] = {}
    for line in lines:
        match = _NOT_PRODUCED_RE.search(line)
        if match:
            seen.setdefault((match["what"], match["why"]), set()).add(match["dir"])
    notes = []
    for (what, why), dirs in seen.items():
        where = next(iter(dirs)) if len(dirs) == 1 else f"{len(dirs)} captures"
        notes.append(f"{what} not produced ({where}): {why}")
    return notes


def _quoted(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def memory_from_trace_fix(rank_dir: Path) -> str:
    """The fix of a memory timeline whose snapshot is missing: the trace's memory events, uncategorised."""
    command = npuprof_cmd(f"memory-timeline {_quoted(rank_dir)} -o memory.html")
    return f"{command} (from the trace, no categories)"


# ---------------------------------------------------------------- the post-processor's part


def finish_exports(
    rank_dir: Path, trace: Path | None, job: ExportsJob, say: Say, min_free_space: str = "0"
) -> list[str]:
    """Write the requested stacks and memory timeline files of one capture; the names written. What cannot
    be written is logged as "not produced", with its fix. No file takes the disk below ``min_free_space``
    (--min-free-space): each is made whole in memory first, so its exact size is asked for."""
    written: list[str] = []
    if job.stacks:
        written += _stacks(rank_dir, trace, job.stacks, say, min_free_space)
    if job.memory_snapshot:
        written += _memory(rank_dir, job, say, min_free_space)
    return written


def _no_room(rank_dir: Path, min_free_space: str, content: Sequence[bytes]) -> str:
    """Why writing ``content`` into ``rank_dir`` is left ("not written (...)"), or "" when there is room."""
    from npuprof.results.free_space import short_of_room

    short = short_of_room(rank_dir, min_free_space, sum(len(part) for part in content))
    return f"not written ({short})" if short else ""


def _stacks(
    rank_dir: Path, trace: Path | None, metrics: list[str], say: Say, min_free_space: str
) -> list[str]:
    import time

    from npuprof.agent.capture_exports import stacks_file_name
    from npuprof.config import other_device_line
    from npuprof.reports.stacks import StacksError, folded_from_events, ranges_as_called
    from npuprof.reports.trace_events import load_events
    from npuprof.results.atomic import utf8_bytes
    from npuprof.results.layout import find_trace_of_rank

    if trace is None or not trace.is_file():
        trace = find_trace_of_rank(rank_dir)  # torch_npu's capture: its parse's trace_view.json
    if trace is None:
        for metric in metrics:
            where = _quoted(rank_dir)
            fix = f"{npuprof_cmd('analyse ' + where)}, then {npuprof_cmd('export-stacks ' + where)}"
            why = "the capture has no trace (not parsed?)"
            say(not_produced(stacks_file_name(metric), why, fix), "WARNING")
        return []
    started = time.perf_counter()
    try:
        events = load_events(trace)
    except (OSError, ValueError) as exc:
        for metric in metrics:
            say(not_produced(stacks_file_name(metric), f"the trace cannot be read ({exc})"), "WARNING")
        return []
    ranges_as_called(events, rank_dir)
    written = []
    for metric in metrics:
        name = stacks_file_name(metric)
        fix = npuprof_cmd(f"export-stacks {_quoted(rank_dir)} --metric {metric} -o {name}")
        try:
            folded = folded_from_events(events, metric)
            text = folded.text()
        except (StacksError, ValueError) as exc:
            say(not_produced(name, str(exc), fix), "WARNING")
            continue
        for note in folded.notes:
            # the run said it once (CaptureWriter._extras), on an NPU or a GPU
            if note not in (other_device_line(metric, npu=True), other_device_line(metric, npu=False)):
                say(f"{name}: {note}", "WARNING")
        if not text:
            say(not_produced(name, "the trace holds no time for this metric"), "WARNING")
            continue
        if not _wrote(rank_dir, name, utf8_bytes(text), min_free_space, fix, say):
            continue
        written.append(name)
        say(f"wrote {name} ({len(text.splitlines())} stacks, {time.perf_counter() - started:.2f} s)", "INFO")
    return written


def _wrote(rank_dir: Path, name: str, content: bytes, min_free_space: str, fix: str, say: Say) -> bool:
    """``content`` written as ``rank_dir/name`` where it leaves the room --min-free-space keeps; else it is
    said not produced, why, and ``fix``."""
    from npuprof.results.atomic import write_bytes

    no_room = _no_room(rank_dir, min_free_space, [content])
    if no_room:
        say(not_produced(name, no_room, fix), "WARNING")
        return False
    try:
        write_bytes(rank_dir / name, content)
    except OSError as exc:
        say(not_produced(name, f"it could not be written ({exc.strerror or exc})", fix), "WARNING")
        return False
    return True


def _memory(rank_dir: Path, job: ExportsJob, say: Say, min_free_space: str) -> list[str]:
    import time

    from npuprof.agent.capture_exports import memory_file_name
    from npuprof.reports import memory_timeline as mt
    from npuprof.reports.memory_categories import from_snapshot
    from npuprof.results.atomic import write_bytes

    assert job.memory_snapshot is not None
    snapshot = rank_dir / job.memory_snapshot
    started = time.perf_counter()
    try:
        data = from_snapshot(snapshot, job.memory_device, strict=False)
    except mt.MemoryTimelineError as exc:
        say(not_produced("memory_timeline.*", str(exc), memory_from_trace_fix(rank_dir)), "WARNING")
        return []
    _, sizes = data.coalesce()
    # the CPU allocator counts from the start of profiling only, so the categorised peak can be the larger
    data.max_allocated = max(data.max_allocated or 0, max((sum(row) for row in sizes), default=0))
    if not data.raw:
        say(f"memory timeline: no memory events for {data.device} in this capture", "WARNING")
    raw, meta = mt.encoded(data, "raw.json.gz"), mt.meta_bytes(data)
    fix = npuprof_cmd(f"memory-timeline {_quoted(rank_dir)} -o memory.html")
    no_room = _no_room(rank_dir, min_free_space, [raw, meta])
    if no_room:  # the snapshot stays, as below
        say(not_produced("memory_timeline.*", no_room, fix), "WARNING")
        return []
    try:
        write_bytes(rank_dir / mt.RAW_FILE, raw)
        write_bytes(rank_dir / mt.META_FILE, meta)
    except OSError as exc:  # the snapshot stays: npuprof memory-timeline can finish it
        say(not_produced("memory_timeline.*", f"not writable ({exc.strerror or exc})", fix), "WARNING")
        return []
    written = [mt.RAW_FILE, mt.META_FILE]
    snapshot.unlink(missing_ok=True)  # its content is in the raw file now
    for fmt in job.memory_formats:
        if fmt == "raw.json.gz" or fmt not in mt.FORMATS:
            continue
        name = memory_file_name(fmt)
        fix = npuprof_cmd(f"memory-timeline {_quoted(rank_dir)} -o {name}")
        try:
            content = mt.encoded(data, fmt)
        except mt.PlotUnavailableError:
            why = "the plot needs matplotlib, which is not installed"
            say(not_produced(name, why, f"{PLOT_FIX}, then {fix}"), "WARNING")
            continue
        if _wrote(rank_dir, name, content, min_free_space, fix, say):
            written.append(name)
    say(f"wrote the memory timeline ({', '.join(written)}; {time.perf_counter() - started:.2f} s)", "INFO")
    return written


def unfinished_exports(rank_dir: Path, job: dict[str, Any] | None) -> list[str]:
    """For a capture whose exports no post-processor will finish: its memory snapshot written now (at
    once, waiting for a copy in progress), so that `npuprof memory-timeline` can finish it; the "not
    produced" messages."""
    if not job:
        return []
    from npuprof.agent.memory_snapshot import TASK_KEY

    task = job.pop(TASK_KEY, None)
    if task is not None:
        task.run(pause=False)
    from npuprof.agent.capture_exports import stacks_file_name

    why = "no background post-processor took the capture"
    where = _quoted(rank_dir)
    lines = [
        not_produced(stacks_file_name(metric), why, f"npuprof export-stacks {where} --metric {metric}")
        for metric in job.get("stacks") or []
    ]
    if job.get("memory_snapshot") and not (task is not None and task.left_for_room):  # (said by the task)
        fix = f"npuprof memory-timeline {where} -o memory.html"
        lines.append(not_produced("memory_timeline.*", why, fix))
    return lines


def exports_not_made(rank_dir: Path, stacks: Sequence[str], memory_formats: Sequence[str] = ()) -> list[str]:
    """What a finished capture lacks of the exports asked for (``memory-timeline``, ``export-stacks``):
    its memory snapshot left (the post-processor removes it once the timeline is written: it stopped, or
    was killed, before), or the timeline's formats asked for (``memory_formats``: the run's
    --memory-timeline) unwritten by a post-processor stopped after it removed it; a stacks file missing
    for a metric its backend records (``stacks``: the run's --export-stacks metrics) in a capture that
    recorded Python stacks."""
    from npuprof.agent.capture import metric_fits
    from npuprof.agent.capture_exports import stacks_file_name
    from npuprof.agent.memory_snapshot import SNAPSHOT_FILE
    from npuprof.results import layout

    snapshot_left = (rank_dir / SNAPSHOT_FILE).exists()
    missing = ["memory-timeline"] if snapshot_left or _formats_left(rank_dir, memory_formats) else []
    # a --dynamic request without with_stack makes no stacks (its log says so): none are missing there
    if stacks and layout.recorded_option(rank_dir, "with_stack") is not False:
        backend = (layout.read_capture_record(rank_dir) or {}).get("backend")
        if isinstance(backend, str) and any(
            metric_fits(m, backend) and not (rank_dir / stacks_file_name(m)).exists() for m in stacks
        ):
            missing.append("export-stacks")
    return missing


def _formats_left(rank_dir: Path, formats: Sequence[str]) -> bool:
    """The post-processor wrote the categorised timeline (its raw file; the snapshot is then removed) and
    stopped before the formats asked for (killed while it drew the html: the run's summary said nothing):
    a format's file is missing and the capture record, rewritten once it is done with the capture (what
    it could not make is logged "not produced" then), does not name the raw file yet."""
    from npuprof.agent.capture_exports import memory_file_name
    from npuprof.reports.memory_timeline import FORMATS, RAW_FILE
    from npuprof.results import layout

    if not (rank_dir / RAW_FILE).exists():
        return False
    if not any(f in FORMATS and not (rank_dir / memory_file_name(f)).exists() for f in formats):
        return False
    extras = (layout.read_capture_record(rank_dir) or {}).get("extras")
    return not (isinstance(extras, list) and RAW_FILE in extras)


# ---------------------------------------------------------------- before the job starts


def preflight_notes(cfg: Any, command: Sequence[str]) -> list[str]:
    """Requested outputs that the launcher can already tell will not be produced, and flags that will add
    nothing, when the job runs this Python: one line each, with the fix. Costs a few stat calls; imports
    nothing."""
    if not runs_this_python(command):
        return []
    notes = _memory_timeline_notes(cfg)
    if not notes and _modules_without_stacks(cfg):
        notes.append(
            "--with-modules without --with-stack adds nothing on CPU and CUDA: torch's profiler records the "
            "module hierarchy of TorchScript only, eager nn.Module frames come from its Python tracer "
            "(--with-stack; --with-modules stands in for it only on Ascend NPUs); fix: add --with-stack, or "
            "drop --with-modules"
        )
    return notes


def _memory_timeline_notes(cfg: Any) -> list[str]:
    formats = list(getattr(cfg, "memory_timeline", []) or [])
    if not formats:
        return []
    import importlib.util

    notes = []
    if "html" in formats and importlib.util.find_spec("matplotlib") is None:
        notes.append(
            "--memory-timeline html: matplotlib is not installed for this Python, so memory_timeline.html "
            f"will not be written; fix: {PLOT_FIX} (json, json.gz and raw.json.gz need nothing more)"
        )
    if _modules_without_stacks(cfg):
        notes.append(
            "--memory-timeline: on CPU and CUDA torch's memory profiler needs --with-stack (--with-modules "
            "stands in for it only on Ascend NPUs), so no memory timeline will be written; "
            "fix: add --with-stack"
        )
    return notes


def _modules_without_stacks(cfg: Any) -> bool:
    """--with-modules without --with-stack where the job will run torch.profiler (no torch_npu for this
    Python), and the run's flags are each capture's (with --dynamic, the request file's are)."""
    import importlib.util

    return (
        bool(getattr(cfg, "with_modules", False))
        and not getattr(cfg, "with_stack", False)
        and getattr(cfg, "dynamic", None) is None
        and importlib.util.find_spec("torch_npu") is None
    )


def runs_this_python(command: Sequence[str]) -> bool:
    """Does ``command`` run this interpreter (``python ...``, or a script such as torchrun whose ``#!``
    line names it)?"""
    if not command:
        return False
    import shutil

    program = command[0] if os.sep in command[0] else shutil.which(command[0])
    if not program:
        return False
    here = os.path.realpath(sys.executable)
    if os.path.realpath(program) == here:
        return True
    from npuprof.launch import shebang_line

    line = shebang_line(program, 512)
    if line is None:
        return False
    interpreter = line.strip().split(b" ")[0]
    return os.path.realpath(os.fsdecode(interpreter)) == here
