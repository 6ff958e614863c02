"""`npuprof status DIR`: what each process of a `npuprof run --dynamic DIR` job did, from DIR/log/
(docs/architecture.md, "Dynamic capture"): per rank the last step seen, the captures made and where they
went, the errors, and whether the process still runs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from npuprof.agent.dynamic_log import (
    ATTEMPT_RE,
    ENDED_RE,
    HEARTBEAT_RE,
    HEARTBEAT_S,
    NOT_EFFECTIVE,
    NOT_SELECTED_RE,
    PROCESS_ENDS,
    RANKLESS,
    SKIPPED_RE,
    STARTED_AT_RE,
    STOPPED_BY_RE,
    WATCHING,
    line_time,
    span_said,
)
from npuprof.cli.completions import offering
from npuprof.job_processes import ended_unreaped, pid_alive

FORMATS = ("table", "json")
HELP = "Show what each process of a `npuprof run --dynamic DIR` job did, from DIR/log/."  # cli/info.py
LOG_READ_LIMIT = 1 << 20  # each log rotates at 200 KB: a larger file is not one of ours
_STARTED = re.compile(r"^capture started at step (?P<step>\d+) into (?P<where>.+)$")
_PLANNED = re.compile(r"^capture planned: steps (?P<steps>\d+-\d+)")
# where a request's capture goes, in its "loaded" and "capture planned" lines: "loaded: D", "capture planned:
# steps A-B (D)", D being npuprof/agent/dynamic_request.py's Request.describe()
_REQUEST_INTO = (
    re.compile(r"^loaded: capture .* into (?P<into>.+?)(?: \(trigger [^()]*\))?$"),
    re.compile(r"^capture planned: steps \d+-\d+ \(capture .* into (?P<into>.+?)(?: \(trigger [^()]*\))?\)$"),
)
_CANCELLED = re.compile(r"^the capture planned from step \d+ is cancelled")
# npuprof/agent/dynamic_plan.py's line for `npuprof trigger DIR --cancel` during a capture
_CUT_BY_CANCEL = re.compile(r"^the capture in flight ends with step (?P<step>\d+), cancelled")
_RANKS_ASKED = re.compile(r" on (?P<ranks>ranks [\d,-]+) into ")  # in a Request.describe()

EPILOG = """
Examples:

  npuprof status cfg                  # one line per process: rank, state, last step, captures, errors

  npuprof status cfg --format json    # everything, for scripts

A process whose log has no end line and whose pid is gone on this host (or held by another process: the pid given again) is shown as "gone" (killed); one stopped (kill -STOP, Ctrl-Z) as "stopped": it neither trains nor reads the file until kill -CONT PID resumes it.

A process of another host (a multi-node job sharing DIR) cannot be checked by its pid from here: it is shown "running as of" its newest log line, and "silent since" then, "may have ended", once no line came for 10 times its pace (a line a minute at most while its steps pass, one a step when a step takes longer).
"""  # noqa: E501 (one paragraph a line: typer wraps each line to the terminal, a newline inside cut it short)
RUNNING, STOPPED = "running", "stopped"
# a process of another host whose log said nothing for SILENT_TIMES its pace: its pid cannot be looked at from
# here, so it may have ended (killed, its node down) or hang; or it runs on in a step far longer than the rest
SILENT = "silent"
SILENT_TIMES = 10


def status_command(
    directory: Annotated[
        str, typer.Argument(help="The directory given to npuprof run --dynamic.", metavar="DIR")
    ],
    output_format: Annotated[
        str,
        typer.Option(
            "--format", help="table (default) or json.", show_default=False, autocompletion=offering(FORMATS)
        ),
    ] = "table",
) -> None:
    """`npuprof status` (HELP)."""
    if output_format not in FORMATS:
        _fail(f"--format: unknown {output_format!r}; use table or json")
    if not directory:  # Path("") is the current directory (helper-211)
        _fail("DIR: is empty; give the directory of npuprof run --dynamic DIR")
    root = Path(directory)
    logs = root / "log"
    if not root.exists():
        _fail(f"{directory} does not exist: give the directory of npuprof run --dynamic DIR")
    if not logs.is_dir():
        from npuprof.reports.inputs import run_output_hint

        _fail(
            run_output_hint(root, "status")
            or f"{directory}: no log/ directory; is it the directory of npuprof run --dynamic?"
        )
    from npuprof.cli.main import warn_flags_given_twice

    warn_flags_given_twice("status")
    report = {
        "directory": str(root.resolve()),
        "config": _config_summary(root),
        "processes": _processes(logs),
    }
    if (unread := _unread(root)) is not None:
        report["unread_request"] = unread
    if (unwritable := _logs_unwritable(logs)) is not None:
        report["logs_unwritable"] = unwritable
    from npuprof.cli.main import check_stdout

    sys.stdout.write(json.dumps(report, indent=2) + "\n" if output_format == "json" else render(report))
    check_stdout("npuprof status", "the status")


def _fail(line: str) -> None:
    from npuprof.reports.text import printable

    sys.stderr.write(f"npuprof status: error: {printable(line)}\n")  # DIR's newline written out
    raise typer.Exit(2)


def _read(path: Path) -> list[str]:
    from npuprof.results.layout import read_small
    from npuprof.results.logfile import log_records

    try:
        return log_records(read_small(path, LOG_READ_LIMIT).decode("utf-8", "replace"))
    except OSError:
        return []


def _logs_unwritable(logs: Path) -> str | None:
    """Why no process of the job can write in DIR/log/ (a read-only file system: a shared folder mounted
    so), None when they may: "no process has logged yet" read as if the job had not begun training."""
    try:
        read_only = bool(os.statvfs(logs).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    return f"{logs} is on a read-only file system: no process can log there" if read_only else None


def _unread(root: Path) -> dict[str, Any] | None:
    """The request in the file that no process has read yet (`npuprof trigger` a moment ago: each reads the
    file at its poll interval), as npuprof/agent/dynamic_log.py tells it; None when there is none. status
    showed "-" for every process then, as if nothing had been asked (helper-174)."""
    from npuprof.agent.dynamic_log import unread_request

    try:
        unread = unread_request(root)
    except OSError:
        return None
    if unread is None:
        return None
    changed = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unread.changed))
    return {"changed": changed, "trigger_id": unread.trigger_id or None}


def _config_summary(root: Path) -> dict[str, Any]:
    from npuprof.agent.dynamic_files import CONFIG_NAME, edited_trigger
    from npuprof.results.layout import read_small

    path = root / CONFIG_NAME
    summary: dict[str, Any] = {"file": str(path)}
    try:
        raw = read_small(path, LOG_READ_LIMIT)
        text = raw.decode("utf-8", "replace")
    except FileNotFoundError:
        summary["problem"] = "missing"
        return summary
    except OSError as exc:  # a FIFO, a device, a directory: no regular file; unreadable
        summary["problem"] = f"not readable as the job reads it ({exc.strerror or exc})"
        return summary
    try:
        data = json.loads(text)
    except ValueError as exc:
        summary["problem"] = f"not valid JSON ({exc})" if text.strip() else "empty"
        return summary
    if not isinstance(data, dict):
        summary["problem"] = f"must hold a JSON object, not {type(data).__name__}: the job ignores it"
        return summary
    from npuprof.agent.dynamic_request import rank_problem

    if (problem := rank_problem(data)) is not None:
        summary["problem"] = f"{problem}: the job does not act on it"
        return summary
    for key in ("is_rank", "rank_list", "trigger_id"):
        if key in data:
            summary[key] = data[key]
    if edited := edited_trigger(data, raw):  # a new request, not that trigger's (helper-286)
        del summary["trigger_id"]
        summary["edited_since_trigger"] = edited
    # the window as the job reads it (npuprof/agent/dynamic_request.py): a bad value is its default
    from npuprof.agent.dynamic_request import NEXT_STEP, NO_CAPTURE, int_field

    said: list[str] = []
    for key, default, minimum in (("start_step", NO_CAPTURE, NEXT_STEP), ("warmup", 0, 0), ("active", 1, 1)):
        if key in data:
            summary[key] = int_field(data, key, default, minimum, lambda _level, line: said.append(line))
    if said:
        summary["warnings"] = said
    return summary


def _processes(logs: Path) -> list[dict[str, Any]]:
    from npuprof.agent.dynamic_log import FILE_NAME

    files: dict[tuple[str, int, int], dict[str, list[Path]]] = {}
    for entry in sorted(logs.iterdir()):
        match = FILE_NAME.match(entry.name)
        if match is None or not entry.is_file() or entry.is_symlink():
            continue  # a link, a FIFO or a folder of that name is no process's log (its pid may run: pid 1)
        key = (match["host"], int(match["pid"]), int(match["rank"]))
        kind = "monitor" if match["monitor"] else "action"
        # the backup first: its lines are the older ones
        files.setdefault(key, {"action": [], "monitor": []})[kind].insert(0 if match["backup"] else 1, entry)
    processes = [_process(key, paths) for key, paths in files.items()]
    _split_counts(processes)
    return sorted(processes, key=lambda p: (p["rank"] is None, p["rank"] or 0, p["host"], p["pid"]))


def _split_counts(processes: list[dict[str, Any]]) -> None:
    """A process that learnt its rank mid-run has logs under each rank (one row each) whose end lines
    count all its captures so far (helper-127: 1 + 2 shown for 2): in time order, each row's share is its
    highest count less the row before it's (helper-128: a log rotates on its own, so the lines lost may be
    any row's); a row of lines without counts (an older npuprof) counts its lines."""
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for process in processes:
        rows.setdefault((process["host"], process["pid"]), []).append(process)
    for same in rows.values():
        if len(same) < 2:
            continue
        before = 0
        for p in sorted(same, key=lambda p: p.get("_first_seen_at", 0.0)):
            counted = p.pop("_highest_count", 0)
            p["capture_count"] = max(len(p["captures"]), counted - before) if counted else len(p["captures"])
            before = max(before, counted)
    for process in processes:
        for internal in ("_highest_count", "_first_seen_at", "_last_seen_at", "_cancelled_at"):
            process.pop(internal, None)


def _process(key: tuple[str, int, int], paths: dict[str, list[Path]]) -> dict[str, Any]:
    from npuprof.agent.dynamic_log import parse_line

    host, pid, rank = key
    info = _fresh(host, pid, rank)
    for path in paths["action"]:
        for line in _read(path):
            fields = parse_line(line)
            if fields is None:
                continue
            _take(info, fields)
    since = info.pop("_image_since", None)  # an earlier process's monitor lines are not this one's
    for path in paths["monitor"]:
        for line in _read(path):
            fields = parse_line(line)
            if fields is None or (since is not None and line_time(fields) < since):
                continue
            if "load json success" in fields["message"]:
                info["loads"] += 1
            elif "load json failed" in fields["message"]:
                info["rejected"] += 1
    return _settled(info, paths, rank)


def _fresh(host: str, pid: int, rank: int) -> dict[str, Any]:
    """A process as no line of its log has said anything of it yet."""
    return {
        "host": host,
        "pid": pid,
        "rank": rank,
        "state": "running",
        "last_step": None,
        "last_seen": None,
        "first_seen": None,
        "captures": [],
        "capture_count": 0,  # its captures in all: the oldest may have rotated out of its logs
        "capturing": None,
        "planned": None,
        "errors": [],
        "warnings": 0,
        "last_warning": None,
        "not_captured": None,  # the latest request that did not capture, and why: {"step", "why"}
        "loads": 0,
        "rejected": 0,
        "attempt": None,  # torchrun's (TORCHELASTIC_RESTART_COUNT) as its first line and heartbeats name it
    }


def _settled(info: dict[str, Any], paths: dict[str, list[Path]], rank: int) -> dict[str, Any]:
    """``info`` once its lines are read: whether the process still runs, what its death left."""
    from npuprof.agent.dynamic_log import UNKNOWN_RANK

    host, pid = info["host"], info["pid"]
    here = host == os.uname().nodename
    ticks = info.pop("_start_ticks", None)
    if info["state"] == "running" and here and not _the_writer_lives(pid, _last_written(paths), ticks):
        info["state"] = "gone (no end line: killed?)"
    info.pop("_stopped_by", None)  # its "the process ends" line lost (a full disk)
    asked = info.pop("_asked_into", None)
    if info["state"].startswith("gone") and info["capturing"] is None and asked is not None:
        info["capturing"] = _begun_unlogged(pid, info["planned"], asked)
        if info["capturing"] is not None:
            info["planned"] = info["not_captured"] = None
    if info["state"].startswith("gone") and info["capturing"] is not None:
        from npuprof.results.cut_capture import kept_part_said

        directory = Path(info["capturing"]["directory"])
        if (recorded := _recorded_before_the_export(directory, pid)) is not None:
            info["capturing"]["steps"] = recorded
        # killed while torch wrote the trace: the part written kept, and the steps whole in it once parsed
        if kept := kept_part_said(directory):
            info["capturing"]["cut_short"] = kept
    planned, last = info["planned"], info["last_step"]
    if planned and info["state"] != "running" and last is not None and _first(planned) > last:
        info["planned"] = None  # the process ended before that capture's first step
        why = f"never reached: {span_said(planned)} planned, the process ended at step {last}"
        info["not_captured"] = {"step": last, "why": why}
    if info["state"] == RUNNING and here and _is_stopped(pid):
        info["state"] = STOPPED
    _judge_by_time(info, here, paths)
    # torch_npu's -1 in the log's name: null in the JSON, as in analyse's (docs/formats.md)
    if rank == UNKNOWN_RANK:
        info["rank"] = None
    return info


def _is_stopped(pid: int) -> bool:
    """A process stopped by a signal (kill -STOP, Ctrl-Z) or held by a debugger: "running" sent a user
    who had paused the job to wait for a poll interval that never came (helper-286)."""
    from npuprof.proc_stat import state_of

    return state_of(pid) in (b"T", b"t")


def is_alive(process: dict[str, Any]) -> bool:
    """A process of ``_processes`` not known to have ended: running, stopped until resumed, or of another host
    and silent (it may have ended)."""
    return process["state"] in (RUNNING, STOPPED, SILENT)


def _judge_by_time(info: dict[str, Any], here: bool, paths: dict[str, list[Path]]) -> None:
    """How long a process's logs have been silent (``silent_for_s``, by this host's clock against the lines'
    moments; the logs' modification time where no line reads), and, for a process of another host whose
    log has no end line, ``silent_after_s`` and the state by them: its pid is not this host's to look at
    (a torch_npu log of 2024 was shown "running"). A process logs a heartbeat at most every HEARTBEAT_S
    while its steps pass (docs/architecture.md, "Dynamic capture"), so its pace is that or its step time."""
    first, last = info.pop("_first_step", None), info.pop("_last_step", None)
    seen = info.get("_last_seen_at")
    if seen is None:
        seen = _last_written(paths)
    info["on_this_host"] = here
    info["silent_for_s"] = None if seen is None else max(0, round(time.time() - seen))  # a clock ahead: 0
    if here or info["state"] != RUNNING:
        return
    step_s = 0.0
    if first is not None and last is not None and last[1] > first[1] and last[0] > first[0]:
        step_s = (last[0] - first[0]) / (last[1] - first[1])
    info["silent_after_s"] = round(SILENT_TIMES * max(HEARTBEAT_S, step_s))
    if info["silent_for_s"] is not None and info["silent_for_s"] > info["silent_after_s"]:
        info["state"] = SILENT


def _the_writer_lives(pid: int, last_written: float | None, ticks: int | None = None) -> bool:
    """Whether the process that wrote this log still runs: its pid exists, is no zombie (killed with
    kill -9, not reaped yet by a parent busy elsewhere: a multiprocessing child's parent in a collective;
    status said "running" until it was), and began before its logs were last written (``last_written``,
    their modification time: a clock of this host's, whatever time zone wrote their lines): a pid the kernel
    gave again to a later process is not the writer's (a dead rank read as running for as long as another
    process held its pid). The start its lines give (``ticks``, after boot) tells it exactly: the modification
    time and /proc's boot time are wall-clock times, which a clock set forward since the last line moves
    apart (a live process that logged nothing since, stalled or between heartbeats, said "gone")."""
    if not pid_alive(pid) or ended_unreaped(pid):  # no /proc: the signal check is all there is
        return False
    from npuprof.proc_stat import start_ticks

    now = start_ticks(pid) if ticks is not None else None
    if now is not None:
        return now == ticks
    if last_written is None:
        return True
    from npuprof.results.layout import started_after

    return not started_after(pid, last_written)


def _last_written(paths: dict[str, list[Path]]) -> float | None:
    """When a process's logs were last written (epoch s), None when none can be looked up."""
    times = []
    for path in (*paths["action"], *paths["monitor"]):
        with contextlib.suppress(OSError):
            times.append(os.lstat(path).st_mtime)
    return max(times, default=None)


def _recorded_before_the_export(rank_dir: Path, pid: int) -> str | None:
    """The steps (``"6-9"``) a capture of process ``pid`` had recorded when torch's export of its trace began,
    from its record rewritten then (docs/formats.md, ``export_began``); None where the record does not say
    (the process died while recording, or an older npuprof's)."""
    from npuprof.results import layout
    from npuprof.results.run_record import export_began

    record = layout.read_capture_record(rank_dir)
    if not record or record.get("pid") != pid or not export_began(record):
        return None
    steps = record.get("steps")
    if not (isinstance(steps, list) and steps and all(type(n) is int for n in (steps[0], steps[-1]))):
        return None
    return f"{steps[0]}-{steps[-1]}"


def _which_steps(capturing: dict[str, Any]) -> str:
    """The steps of a capture its process died in: those recorded where its record names them (it died in
    torch's export), else from its first."""
    if capturing.get("steps"):
        return f"of {span_said(capturing['steps'])}"
    return f"from step {capturing['from_step']}"


def _begun_unlogged(pid: int, planned: str | None, asked: tuple[str, float]) -> dict[str, Any] | None:
    """The capture a killed process had begun when its log says only that a request was loaded (or
    planned): the lines "capture planned" and "capture started" are written by the watcher at its next poll
    (1 to 5 s later; a training step never writes the logs, docs/architecture.md "Dynamic capture"), so a
    kill -9 in between lost them and status showed "-" while the run's summary listed the capture as
    incomplete (helper-224). Its rank dir in the request's directory says it: the process's pid in its
    name, its record "capturing" (from a step of the planned window), made after the request was logged
    (a pid used again by a later process is not it)."""
    from npuprof.results import layout

    where, when = asked
    planned_at = when - 1.0  # (the line's ms against the record's ns: the second it was in)
    try:
        candidates = sorted(Path(where).glob(f"*_{pid}_*{layout.RANK_DIR_SUFFIX}"))
    except (OSError, ValueError):
        return None
    last = int(planned.split("-", 1)[1]) if planned else None
    for rank_dir in reversed(candidates[-16:]):  # the newest first
        record = layout.read_capture_record(rank_dir)
        if not isinstance(record, dict) or record.get("pid") != pid or record.get("status") != "capturing":
            continue
        steps, updated = record.get("steps"), record.get("updated_ns")
        if not (isinstance(steps, list) and steps and isinstance(steps[0], int)):
            continue
        if last is not None and steps[0] > last:
            continue
        if not isinstance(updated, int) or updated / 1e9 < planned_at:
            continue
        return {"from_step": steps[0], "directory": str(rank_dir)}
    return None


def _take(info: dict[str, Any], fields: dict[str, str]) -> None:
    message = fields["message"]
    if (started := STARTED_AT_RE.search(message)) is not None:
        ticks = int(started["ticks"])
        if message.startswith(WATCHING) and info.get("_start_ticks") not in (None, ticks):
            # another process given the same pid (a job restarted in a new container, whose pids start
            # again from 1, on the same host name and rank) appends to the same log: its lines alone are
            # this process's (an os.exec* keeps its start). Status said the running process was at the dead
            # one's step 5000 and "capturing from step 15" into the dead one's directory (helper-370).
            fresh = _fresh(info["host"], info["pid"], info["rank"])
            info.clear()
            info.update(fresh, _image_since=line_time(fields))
        info["_start_ticks"] = ticks
        if message.startswith(WATCHING) or HEARTBEAT_RE.match(message):
            attempt = ATTEMPT_RE.search(message)
            info["attempt"] = int(attempt["attempt"]) if attempt else None
    # lines of a process reach its log out of order (an event queued behind a later heartbeat): the
    # newest step and time are kept, not the last line's
    if fields["step"] is not None and (info["last_step"] is None or int(fields["step"]) >= info["last_step"]):
        info["last_step"] = int(fields["step"])
    # by the moment, not the text: a line's local time repeats an hour as summer time ends, and a script
    # may change its TZ (the offset beside it tells)
    moment = line_time(fields)
    if fields["step"] is not None:  # the earliest and the newest (moment, step): the process's pace
        point = (moment, int(fields["step"]))
        if "_first_step" not in info or point[0] < info["_first_step"][0]:
            info["_first_step"] = point
        if "_last_step" not in info or point[0] >= info["_last_step"][0]:
            info["_last_step"] = point
    if info["last_seen"] is None or moment > info["_last_seen_at"]:
        info["last_seen"], info["_last_seen_at"] = fields["time"], moment
    if info["first_seen"] is None or moment < info["_first_seen_at"]:
        info["first_seen"], info["_first_seen_at"] = fields["time"], moment
    if fields["level"] == "ERROR":
        info["errors"].append(f"{fields['time']} {message}")
    elif fields["level"] == "WARNING":
        info["warnings"] += 1
        info["last_warning"] = f"{fields['time']} {message}"
    for pattern in _REQUEST_INTO:
        if (into := pattern.match(message)) is not None:
            info["_asked_into"] = (into["into"], moment)
    if (ended := ENDED_RE.match(message)) is not None:
        capture = {
            "steps": f"{ended['first']}-{ended['last']}",
            "status": ended["status"],
            "directory": ended["where"],
        }
        if ended["note"]:  # a capture cut short (its last step partial) did not read as whole (helper-223)
            capture["note"] = ended["note"]
        elif info.pop("_cancelled_at", None) == int(ended["last"]):  # read as the whole window asked
            capture["note"] = f"cancelled at step {ended['last']}"
        info["captures"].append(capture)
        info["capture_count"] = max(info["capture_count"] + 1, int(ended["count"] or 0))
        info["_highest_count"] = max(info.get("_highest_count", 0), int(ended["count"] or 0))
        info["capturing"] = None
        if info["planned"] and _first(info["planned"]) <= int(ended["last"]):
            info["planned"] = None  # the plan this capture carried out
    elif (started := _STARTED.match(message)) is not None:
        info["capturing"] = {"from_step": int(started["step"]), "directory": started["where"]}
    elif (planned := _PLANNED.match(message)) is not None:
        info["planned"] = planned["steps"]
        info["not_captured"] = None
    elif _CANCELLED.match(message):
        info["planned"] = None
    elif (cut := _CUT_BY_CANCEL.match(message)) is not None:
        info["_cancelled_at"] = int(cut["step"])
    elif (skipped := SKIPPED_RE.match(message)) is not None:
        info["planned"] = None
        info["not_captured"] = {"step": int(skipped["step"]), "why": f"skipped: {skipped['why']}"}
    elif message.endswith(NOT_EFFECTIVE) and fields["step"] is not None:
        why = message.removesuffix(NOT_EFFECTIVE)
        info["not_captured"] = {"step": int(fields["step"]), "why": f"not effective: {why}"}
    elif (other := NOT_SELECTED_RE.match(message)) is not None and fields["step"] is not None:
        # shown as "-" before, as if no request had come: a --ranks 1 sent to a job of one process
        ranks = _RANKS_ASKED.search(other["request"])
        said = [RANKLESS] if other["request"].startswith(RANKLESS) else []
        said += [f"it asks for {ranks['ranks']}"] if ranks else []
        asked = f" ({'; '.join(said)})" if said else ""
        info["not_captured"] = {"step": int(fields["step"]), "why": f"not for this process's rank{asked}"}
    elif (stopped := STOPPED_BY_RE.match(message)) is not None:
        info["_stopped_by"] = stopped["signal"]
    elif message == PROCESS_ENDS:
        signalled = info.pop("_stopped_by", None)
        info["state"] = f"ended ({signalled})" if signalled else "ended"
    elif message.startswith(WATCHING):  # the image an os.exec* started (same pid, same log) watches again
        if info["state"].startswith("ended") and fields["step"] is not None:
            info["last_step"] = int(fields["step"])  # it counts its steps from 0 again
        info["state"] = "running"
        info.pop("_stopped_by", None)


def render(report: dict[str, Any]) -> str:
    config = report["config"]
    lines = [f"{config['file']}: " + _config_line(config)]
    processes = report["processes"]
    if (unread := report.get("unread_request")) is not None:
        trigger = f" (trigger {unread['trigger_id']})" if unread["trigger_id"] else ""
        written = f"the request written at {unread['changed'][11:]}{trigger}"
        if not processes or any(p["state"] == RUNNING for p in processes):
            lines.append(
                f"{written} is not read yet: each process reads the file at its poll interval "
                "(--poll-interval)"
            )
        elif any(p["state"] == STOPPED for p in processes):
            lines.append(f"{written} is not read yet: the job's processes are stopped (below)")
        elif any(p["state"] == SILENT for p in processes):
            lines.append(f"{written} is not read yet: the processes that may read it are silent (below)")
        elif any(p["attempt"] is not None for p in processes):
            # between a torchrun attempt's end and its restarted workers' first look none runs, and those
            # take the request (docs/architecture.md, "Dynamic capture")
            lines.append(
                f"{written} is not read yet: no process of the job runs now; if torchrun is restarting its "
                "workers (its processes name torchrun's attempts; --max-restarts), the restarted ones take it"
            )
        else:
            lines.append(f"{written} was not read: no process of the job runs")
    if (unwritable := report.get("logs_unwritable")) is not None:
        lines.append(unwritable)
    if not processes:
        lines.append("no process has logged yet (the watcher starts when training starts)")
        return _shown(lines)
    rows = [["rank", "host", "pid", "state", "steps done", "captures", "errors", "last capture / now"]]
    for p in processes:
        now = p["capturing"]
        last = p["captures"][-1] if p["captures"] else None
        planned = p["planned"]
        if now is not None and p["state"].startswith("gone") and now.get("cut_short"):
            doing = f"capture {_which_steps(now)} cut short ({now['cut_short']}): {now['directory']}"
        elif now is not None and p["state"].startswith("gone"):
            died = " while torch wrote its trace" if now.get("steps") else ""
            doing = f"capture {_which_steps(now)} never finished (the process died{died}): {now['directory']}"
        elif now is not None:
            doing = f"capturing from step {now['from_step']} into {now['directory']}"
        elif planned and (last is None or _first(planned) > _first(last["steps"])):
            doing = f"planned: {span_said(planned)}"
        elif (missed := p["not_captured"]) is not None and (
            last is None or missed["step"] > _first(last["steps"])
        ):
            doing = f"request at step {missed['step']} {missed['why']}"
        elif last is not None:
            doing = f"{span_said(last['steps'])} {last['status']} in {last['directory']}"
            if last.get("note"):
                doing += f" ({last['note']})"
        else:
            doing = "-"
        step = "-" if p["last_step"] is None else f"{p['last_step']} ({(p['last_seen'] or '')[11:19]})"
        rows.append(
            [
                "-" if p["rank"] is None else str(p["rank"]),
                p["host"],
                str(p["pid"]),
                _state_said(p),
                step,
                str(p["capture_count"]),
                str(len(p["errors"])),
                doing,
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])
    if unchecked := sorted({p["host"] for p in processes if not p["on_this_host"] and is_alive(p)}):
        hosts = ", ".join(unchecked[:4]) + (f" and {len(unchecked) - 4} more" if len(unchecked) > 4 else "")
        lines.append(
            f"not checked: the processes of {hosts} (this host's pids alone can be looked at from here): "
            f"each is judged by its newest log line, silent after {SILENT_TIMES} times its pace without one "
            "(a line a minute at most while its steps pass, one a step when a step takes longer)"
        )
    for p in processes:
        if p["state"] == STOPPED:
            lines.append(
                f"{process_named(p)}: stopped (kill -STOP, Ctrl-Z): it neither trains nor reads the file "
                f"until resumed: kill -CONT {p['pid']}"
            )
        if p["errors"]:
            lines.append(f"{process_named(p)}: last error: {p['errors'][-1]}")
        if p["last_warning"]:
            lines.append(f"{process_named(p)}: last warning ({p['warnings']} in all): {p['last_warning']}")
    return _shown(lines)


def _state_said(process: dict[str, Any]) -> str:
    """The state column: a process of another host with the moment of its newest line, which is all that
    tells of it here."""
    state = process["state"]
    if process["on_this_host"] or state not in (RUNNING, SILENT):
        return state
    ago = process["silent_for_s"]
    if ago is None:
        return "running? (no line read; another host: not checked)"
    when = process["last_seen"] or time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - ago))
    if state == SILENT:
        return f"silent since {when[:16]} ({_duration(ago)}; may have ended)"
    return f"running as of {when[11:19]} ({_duration(ago)} ago; another host: not checked)"


def _duration(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{round(seconds / 3600)} h"
    return f"{round(seconds / 86400)} days"


def process_named(process: dict[str, Any]) -> str:
    """A process of ``_processes`` as its lines name it: "rank N", or "pid P" for one without a rank."""
    return f"pid {process['pid']}" if process["rank"] is None else f"rank {process['rank']}"


def _shown(lines: list[str]) -> str:
    """The table's lines, each one line on the terminal: what they quote of the file and the logs (a
    trigger_id edited by hand, an error's text) has its control characters written as ``\\xNN`` (helper-190:
    a trigger_id holding a newline and an escape sequence reached the terminal as they are)."""
    from npuprof.reports.text import printable

    return "".join(printable(line) + "\n" for line in lines)


def _first(steps: str) -> int:
    return int(steps.split("-", 1)[0])


def _config_line(config: dict[str, Any]) -> str:
    if "problem" in config:
        return config["problem"]
    if config.get("warnings"):
        return _window_line(config) + " (" + "; ".join(config["warnings"]) + ")"
    return _window_line(config)


def _listed(rank_list: Any) -> Any:
    """The file's rank_list as --ranks writes it (runs as ranges), or as it is when it holds no ranks."""
    from npuprof.config import ranks_text

    if not isinstance(rank_list, list):
        return rank_list
    if all(isinstance(r, int) and not isinstance(r, bool) for r in rank_list):
        return ranks_text(rank_list)
    return ",".join(map(str, rank_list))


def _window_line(config: dict[str, Any]) -> str:
    start = config.get("start_step", 0)
    if start == 0:
        return "start_step 0 (no capture asked)"
    rank_list = config.get("rank_list")
    if not config.get("is_rank"):
        ranks = "every rank"
    elif not rank_list:  # as the job takes it: no rank captures (it said "ranks None", or "ranks ")
        ranks = "no rank (is_rank true, rank_list empty)"
    else:
        ranks = f"ranks {_listed(rank_list)}"
    label = f", trigger {config['trigger_id']}" if "trigger_id" in config else ""
    if "edited_since_trigger" in config:
        label = f", edited by hand since trigger {config['edited_since_trigger']}"
    warmup = config.get("warmup", 0)
    warmup = warmup if isinstance(warmup, int) and warmup > 0 else 0
    from npuprof.agent.dynamic_request import window_text

    return f"{window_text(start, warmup, config.get('active', 1))} on {ranks}{label}"


def register(app: typer.Typer) -> None:
    app.command("status", help=HELP, epilog=EPILOG)(status_command)
