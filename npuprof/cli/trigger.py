"""`npuprof trigger DIR [flags]`: ask a job running under `npuprof run --dynamic DIR` for a capture, by
writing DIR/profiler_config.json atomically (docs/architecture.md, "Dynamic capture")."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from npuprof.cli.run import _typer_parameter
from npuprof.invocation import npuprof_cmd
from npuprof.options import RUN_OPTIONS, Option

# ruff: noqa: UP045  (typer reads Optional[] at start-up)

# the options a trigger sets: those with a profiler_config.json key (min_free_space is the run's), and ranks
TRIGGER_OPTIONS = tuple(
    o for o in RUN_OPTIONS if (o.config_key and o.key != "min_free_space") or o.key == "ranks"
)
NEXT_STEP = -1  # = npuprof.agent.dynamic_request.NEXT_STEP (kept import-free here)
# the request's window and ranks in one panel: --ranks sat alone under run's "Schedule
# (torch.profiler.schedule semantics)", --start-step, --active and --warmup under "Options" (helper-286)
WINDOW = "Which steps and ranks"
# help=, not the docstring (cli/info.py)
HELP = "Ask a job running under `npuprof run --dynamic DIR` to capture: writes DIR/profiler_config.json."

EPILOG = """
Examples:

  npuprof trigger cfg    (record 1 step, from the next step, on every rank)

  npuprof trigger cfg --active 2 --ranks 0,7    (2 steps from the next step, on ranks 0 and 7)

  npuprof trigger cfg --start-step 5000 --level 1 --with-stack    (steps 5000..; a step already passed: not effective, said in the logs)

  npuprof trigger cfg --cancel    (start_step 0: drop a planned capture, end one in flight at the next step)

Each process of the job reads DIR/profiler_config.json every poll interval (2 s, then the time of step 10 to 11, 1 to 5 s; or npuprof run's --poll-interval), and starts the capture at the next step boundary. A trigger during a capture runs after it; --cancel ends it. npuprof status DIR says what each rank did. Flags not given are written with the defaults shown above, not with the flags npuprof run was given: a request says all it wants.
"""  # noqa: E501 (one paragraph a line: cli/run_help.py's layout wraps it to the terminal)


def print_help() -> None:
    """`npuprof trigger --help`, laid out as `run`'s (cli/run_help.py): typer's rich panels cut the names of
    the flags it shares with `run` at 80 columns (``--gc-detect-thresho…``, ``--data-simplificat…``)."""
    from npuprof.cli.main import get_app
    from npuprof.cli.run_help import render_params

    command = typer.main.get_command(get_app()).commands["trigger"]  # type: ignore[attr-defined]
    summary = (
        "Ask a job running under `npuprof run --dynamic DIR` to capture: writes DIR/profiler_config.json."
    )
    sys.stdout.write(
        render_params("Usage: npuprof trigger [OPTIONS] DIR", summary, command.params, epilog=EPILOG)
    )


LOCK_WAIT_S = 5.0  # the longest wait for another trigger's look and write (milliseconds when it runs)
LONG_CAPTURE_STEPS = 1000  # more steps than this in one capture gets a word on memory


def _was_given(flag: str) -> bool:
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in sys.argv[2:])


def _not_a_directory(path: Path, directory: Path) -> str:
    """Why ``path`` can be no directory ("" when it can): it, or the nearest part of it that exists, is
    something else (a file), or that part is not writable for a job on this machine (DIR's)."""
    for part in (path, *path.parents):
        try:
            if part.is_dir():
                if part == path or _writable_for_the_job(part, directory):
                    return ""
                return f"{part} is not writable"
            if part.exists() or part.is_symlink():
                return f"{part} exists and is not a directory"
        except OSError as exc:
            return f"cannot look up {part}: {exc.strerror or exc}"
    return ""


def _writable_for_the_job(part: Path, directory: Path) -> bool:
    """Whether the job can make a missing -o under ``part``, its nearest part that exists here. Where the
    logs of ``directory`` (DIR) name a host other than this one, or none, the job may run on another node,
    where the path may exist or be writable (/data missing here, / not writable for a user): it is taken,
    and _note_if_output_missing says so."""
    return os.access(part, os.W_OK | os.X_OK) or _hosts_watching(directory) != {os.uname().nodename}


def trigger_command(**params: Any) -> None:
    """`npuprof trigger` (HELP)."""
    from npuprof import config as c
    from npuprof.results.layout import RANK_DIR_SUFFIX

    if not params["directory"]:  # Path("") is the current directory (helper-211)
        _fail("DIR", "is empty", "give the directory of npuprof run --dynamic DIR")
    directory = Path(params.pop("directory"))
    start_step, active, warmup = params.pop("start_step"), params.pop("active"), params.pop("warmup")
    cancel = params.pop("cancel")
    flags = {k: v for k, v in params.items() if v is not None}
    if cancel:
        given = [f for f in ("--start-step", "--active", "--warmup") if _was_given(f)]
        if given:
            drop = "drop them" if len(given) > 1 else "drop it"
            _fail("--cancel", f"excludes {', '.join(given)} (it asks for no capture)", drop)
    if start_step is not None and start_step < 1:
        _fail("--start-step", f"must be >= 1, got {start_step}", "omit it for the next step")
    if active < 1:
        _fail("--active", f"must be >= 1, got {active}", "e.g. --active 2")
    if warmup < 0:
        _fail("--warmup", f"must be >= 0, got {warmup}", "e.g. --warmup 1")
    cfg = c.ProfileConfig()
    try:
        for option in TRIGGER_OPTIONS:
            if option.key in flags:
                c.set_option(cfg, option, flags[option.key])
        cfg.validate()
    except c.ConfigError as exc:
        _fail_line(exc.one_line())
    if cfg.ranks is not None and "analyse" not in flags:
        cfg.analyse = False  # is_rank turns torch_npu's automatic parsing off; say it in the file too
    prof_dir = os.path.abspath(cfg.output) if "output" in flags else None
    if prof_dir is not None and any(part.endswith(RANK_DIR_SUFFIX) for part in Path(prof_dir).parts):
        _fail(
            "-o", f"{prof_dir!r} is inside a capture's directory (*_ascend_pt)", "give a directory of its own"
        )
    if prof_dir is not None and (problem := _not_a_directory(Path(prof_dir), directory)):
        _fail("-o", problem, "give a directory (it is made if it does not exist)")
    if prof_dir is not None:  # the job would refuse it (npuprof run -o refuses the same)
        from npuprof.results.paths import UnsafePathError, resolve_output_path

        try:
            resolve_output_path(prof_dir, "-o")
        except UnsafePathError as exc:
            _fail_line(str(exc))
    document = c.json_from_config(cfg, prof_dir)
    document["start_step"] = 0 if cancel else (start_step if start_step is not None else NEXT_STEP)
    document["active"] = active
    document["warmup"] = warmup
    data = _sealed(document, f"{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}")
    _refuse_if_too_large(data, cfg.ranks)
    with _one_trigger_at_a_time(directory):
        replaced = _request_not_picked_up(directory)
        partly = "" if replaced else _request_not_picked_up_by_some(directory)
        waiting = "" if replaced or cancel else _request_taken_not_begun(directory)  # a cancel means it
        target = _write(directory, data)
    from npuprof.cli.main import warn_flags_given_twice

    warn_flags_given_twice("trigger")  # (once written: a refused request says one line)
    sys.stdout.write(f"npuprof trigger: wrote {target}: {_describe(document, cfg)}\n")
    if replaced:
        sys.stderr.write(
            f"npuprof trigger: note: this replaces request {replaced}, which no process had picked up yet "
            "(the last change wins)\n"
        )
    if partly:
        sys.stderr.write(f"npuprof trigger: note: this replaces {partly}\n")
    if waiting:
        sys.stderr.write(f"npuprof trigger: note: this replaces {waiting}\n")
    if cfg.ranks is not None:
        sys.stdout.write(
            "  (--ranks is torch_npu's is_rank: these captures are not parsed in the job; run "
            f"{npuprof_cmd('analyse')} on them)\n"
        )
    see = npuprof_cmd(f"status {shlex.quote(str(directory))}")
    sys.stdout.write(f"  each process picks it up within its poll interval; see {see}\n")
    _note_if_nobody_watches(directory)
    if prof_dir is not None:
        _note_if_output_missing(Path(prof_dir), directory)
    if not cancel and start_step is not None:
        _note_if_start_step_passed(directory, start_step, cfg.ranks)
    if not cancel:
        _note_if_no_process_selected(directory, cfg.ranks)
    if not cancel and active + warmup > LONG_CAPTURE_STEPS:
        steps = (
            f"--warmup {warmup} --active {active}" if warmup else f"--active {active}"
        )  # (warm-up records)
        cancel_it = npuprof_cmd(f"trigger {shlex.quote(str(directory))} --cancel")
        sys.stderr.write(
            f"npuprof trigger: note: {steps}: a capture holds every step's events in memory until it ends "
            f"(often megabytes a step); {cancel_it} ends it at the next step\n"
        )


def _sealed(document: dict[str, Any], base: str) -> bytes:
    """The file's bytes, its trigger_id ``base`` sealed with them: an edit by hand that keeps the id is
    then told from this request (dynamic_files.request_trigger)."""
    from npuprof import config as c
    from npuprof.agent.dynamic_files import sealed_trigger_id

    def written(trigger_id: str) -> bytes:
        document[c.TRIGGER_ID_KEY] = trigger_id
        return (json.dumps(document, indent=4) + "\n").encode()

    return written(sealed_trigger_id(base, written))


@contextlib.contextmanager
def _one_trigger_at_a_time(directory: Path) -> Iterator[None]:
    """Two `npuprof trigger` on one DIR at the same moment: each looked for a request not picked up yet,
    found none, and wrote; the last rename won and neither said so (helper-224). The look and the write are
    one step now, under an advisory lock on DIR itself (flock on the directory: no lock file, which
    docs/architecture.md's dynamic capture has none of, and a SIGKILL frees it), so the second sees the
    first's request and says it replaces it. Where DIR cannot be locked (missing, a file system without
    flock), it goes on without: as before; so after waiting LOCK_WAIT_S for a holder that
    stopped."""
    import fcntl

    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break  # its holder stopped (^Z): not waited for longer
                time.sleep(0.02)
            except OSError:
                break
        yield
    finally:
        os.close(fd)  # frees the lock


def _refuse_if_too_large(data: bytes, ranks: list[int] | None) -> None:
    """A request larger than a job reads (npuprof.config.CONFIG_FILE_LIMIT) would be written, said to be
    on its way, and then rejected by every process as no profiler_config.json (helper-152)."""
    from npuprof.config import CONFIG_FILE_LIMIT

    if len(data) <= CONFIG_FILE_LIMIT:
        return
    size = f"{len(data) / (1 << 20):.1f} MiB, over the {CONFIG_FILE_LIMIT >> 20} MiB a job reads"
    if ranks:
        _fail("--ranks", f"{len(ranks)} ranks make the request {size}", "use all, or fewer ranks")
    _fail_line(f"the request would be {size}; give smaller values")


def _request_not_picked_up(directory: Path) -> str:
    """The request DIR/profiler_config.json holds now, in words, when no process has read it yet ("" when
    none is asked, or it was read, or that cannot be told)."""
    import time

    from npuprof.agent import dynamic_log

    unread = dynamic_log.unread_request(directory)
    if unread is None:
        return ""
    if unread.trigger_id:
        return unread.trigger_id
    return f"written at {time.strftime('%H:%M:%S', time.localtime(unread.changed))}"


def _request_not_picked_up_by_some(directory: Path) -> str:
    """The request DIR/profiler_config.json holds now (a cancel too), in words with the running processes
    that have not read it yet, when some have and some not ("" otherwise). The last change wins: those
    never act on it (helper-190: a --cancel followed at once by a trigger; rank 1 had not read the cancel
    and recorded its 200 steps to the end, nothing said)."""
    import json

    from npuprof.agent.dynamic_files import CONFIG_NAME, LOG_DIR, request_trigger
    from npuprof.agent.dynamic_log import FILE_NAME, READ_LIMIT
    from npuprof.cli.status import _processes, is_alive
    from npuprof.results.layout import read_small

    try:
        raw = read_small(directory / CONFIG_NAME, 1 << 20)
        data = json.loads(raw)
        trigger = request_trigger(data, raw) if isinstance(data, dict) else ""
        running = [p for p in _processes(directory / LOG_DIR) if is_alive(p)]
    except (OSError, ValueError, RecursionError, KeyError):
        return ""
    if not trigger or not running:
        return ""
    read: set[tuple[str, int]] = set()
    for log in (directory / LOG_DIR).iterdir():
        match = FILE_NAME.match(log.name)
        if match is None or (match["host"], int(match["pid"])) in read:
            continue
        try:
            if f"(trigger {trigger})".encode() in read_small(log, READ_LIMIT):
                read.add((match["host"], int(match["pid"])))
        except OSError:
            continue
    # a process the request does not select would never have acted on it (helper-370: "the cancel ...
    # --ranks 1, which rank 0 had not picked up: a capture in flight there goes on")
    asked = _ranks_asked(data)
    running = [p for p in running if _selects(asked, p)]
    unread = [p for p in running if (p["host"], p["pid"]) not in read]
    if not unread or len(unread) == len(running):
        return ""  # read by every process that runs, or by none (said by _request_not_picked_up)
    who = ", ".join(_named(p) for p in unread[:8])
    who += f" and {len(unread) - 8} more" if len(unread) > 8 else ""
    what = "the cancel" if data.get("start_step") == 0 else "request"
    after = (
        ": a capture in flight there goes on to its end, and this request waits for it"
        if what == "the cancel"
        else ""
    )
    return (
        f"{what} {trigger}, which {len(unread)} of {_the_processes(running)} had not picked up yet ({who}): "
        f"the last change wins, they never act on it{after}"
    )


def _ranks_asked(data: Any) -> list[int] | None:
    """The ranks a request's is_rank / rank_list select, as a job reads them (config.file_ranks); None for
    every rank (or a choice a job would not take: it is no request there)."""
    from npuprof.config import ConfigError, file_ranks

    if not isinstance(data, dict):
        return None
    try:
        return file_ranks(data, "profiler_config.json")
    except ConfigError:
        return None


def _selects(ranks: Any, process: dict[str, Any]) -> bool:
    """Whether a request for ``ranks`` (None: every rank) is one for ``process`` (one without a rank counts
    as rank 0, as in its job)."""
    return ranks is None or (process["rank"] if process["rank"] is not None else 0) in ranks


def _request_taken_not_begun(directory: Path) -> str:
    """The request DIR/profiler_config.json holds now, in words with the running processes that have taken
    it and not begun its capture (its window planned from a step they have not reached, or waiting for the
    capture in flight), "" when there are none. The last change wins: there it never runs. A second trigger
    before the first's capture began replaced it without a word; only each process's log said so. (A
    request only loaded is not told: the training thread's lines reach the log at the watcher's next poll,
    so its capture may have begun.)"""
    import json

    from npuprof.agent.dynamic_files import CONFIG_NAME, LOG_DIR, request_trigger
    from npuprof.cli.status import _processes, is_alive
    from npuprof.results.layout import read_small

    try:
        raw = read_small(directory / CONFIG_NAME, 1 << 20)
        data = json.loads(raw)
        asks = isinstance(data, dict) and data.get("start_step") not in (0, None)
        trigger = request_trigger(data, raw) if asks else ""
        processes = _processes(directory / LOG_DIR)
    except (OSError, ValueError, RecursionError, KeyError):
        return ""
    running = {(p["host"], p["pid"]): p for p in processes if is_alive(p)}
    if not trigger or not running:
        return ""
    waiting = []
    for key, message in _last_lines_naming(directory, f"(trigger {trigger})", set(running)).items():
        if state := _not_begun(message, running[key]):
            waiting.append(f"{_named(running[key])}: {state}")
    if not waiting:
        return ""
    shown = "; ".join(sorted(waiting)[:8]) + ("; ..." if len(waiting) > 8 else "")
    return (
        f"request {trigger}, which {len(waiting)} of {_the_processes(list(running.values()))} had taken and "
        f"not begun ({shown}): the last change wins, it never runs there"
    )


def _last_lines_naming(
    directory: Path, said: str, processes: set[tuple[str, int]]
) -> dict[tuple[str, int], str]:
    """For each of ``processes`` (host, pid), the message of its latest action-log line that names ``said``
    or starts a capture (one begun after the request's plan is the request's)."""
    from npuprof.agent.dynamic_files import LOG_DIR
    from npuprof.agent.dynamic_log import ACTION_PREFIX, FILE_NAME, READ_LIMIT, line_time, parse_line
    from npuprof.results.layout import read_small
    from npuprof.results.logfile import log_records

    last: dict[tuple[str, int], tuple[float, str]] = {}  # (moment, message)
    for log in sorted((directory / LOG_DIR).glob(f"{ACTION_PREFIX}*.log*"), reverse=True):  # .1 first
        match = FILE_NAME.match(log.name)
        key = (match["host"], int(match["pid"])) if match else None
        if key not in processes:
            continue
        try:
            text = read_small(log, READ_LIMIT).decode("utf-8", "replace")
        except OSError:
            continue
        for fields in filter(None, map(parse_line, log_records(text))):
            message = fields["message"]
            moment = line_time(fields)  # (the job's time zone may not be this one's: its offset tells)
            earlier = last.get(key, (0.0, ""))[0]
            if (said in message or message.startswith(CAPTURE_STARTED)) and moment >= earlier:
                last[key] = (moment, message)
    return {key: message for key, (_, message) in last.items()}


CAPTURE_STARTED = "capture started at step "  # npuprof/agent/dynamic_plan.py's line
MAY_HAVE_ENDED = "silent (may have ended)"  # npuprof status's word for them (cli/status.py's SILENT)


def _named(process: dict[str, Any]) -> str:
    """A process not known to have ended, as its lines name it, and "silent (may have ended)" where it is
    of another host and has logged nothing for long (npuprof status's state): it was counted as running."""
    from npuprof.cli.status import SILENT, process_named

    return process_named(process) + (f" {MAY_HAVE_ENDED}" if process["state"] == SILENT else "")


def _the_processes(alive: list[dict[str, Any]]) -> str:
    """The words "the N running processes", or, where some of ``alive`` are silent, "the N processes that
    may run (R running, S silent (may have ended))"."""
    from npuprof.cli.status import SILENT

    silent = sum(p["state"] == SILENT for p in alive)
    if not silent:
        return f"the {len(alive)} running processes"
    running = len(alive) - silent
    return f"the {len(alive)} processes that may run ({running} running, {silent} {MAY_HAVE_ENDED})"


def _not_begun(message: str, process: dict[str, Any]) -> str:
    """What a process's latest line about a request says of a capture it has surely not begun ("" when it
    began one, may have, or will not: not selected, a step passed, cancelled), by its state in its logs
    (npuprof status's: the steps it has done, a capture in flight)."""
    from npuprof.agent.dynamic_log import span_said

    if message.startswith("capture planned: steps "):
        steps = message.split()[3]
        first = int(steps.split("-")[0])
        return (
            f"planned: {span_said(steps)}"
            if process["last_step"] is None or first > process["last_step"]
            else ""
        )
    if "the new request waits for its end" in message and process["capturing"] is not None:
        return "waiting for the capture in flight"
    return ""


def _note_if_output_missing(prof_dir: Path, directory: Path) -> None:
    """-o names no directory here: the job makes it at the capture's start, a typo included. Where the job
    runs on another node (its logs name other hosts, or none: DIR on a shared filesystem), it may exist
    there; both are said."""
    if os.path.lexists(prof_dir):
        return
    hosts = _hosts_watching(directory)
    here = os.uname().nodename
    if hosts == {here}:
        where = "the job (on this machine) makes it when the capture begins"
    else:
        node = f"the job's node ({', '.join(sorted(hosts - {here}))})" if hosts - {here} else "the job's node"
        where = f"on {node} it may exist; if not, the job makes it there when the capture begins"
        where += _unwritable_here(prof_dir)
    sys.stderr.write(
        f"npuprof trigger: note: -o {prof_dir} does not exist on this machine: {where}; check the path if "
        "you meant a directory that exists\n"
    )


def _unwritable_here(path: Path) -> str:
    """ ", if it may write there (PART is not writable here)" when the nearest part of the missing ``path``
    that exists here is not writable: the job on another node makes it only where it may; else ""."""
    part = next((p for p in path.parents if p.is_dir()), None)
    if part is None or os.access(part, os.W_OK | os.X_OK):
        return ""
    return f", if it may write there ({part} is not writable here)"


def _hosts_watching(directory: Path) -> set[str]:
    """The hosts of the processes DIR's logs name (none when they cannot be read)."""
    from npuprof.agent.dynamic_files import LOG_DIR
    from npuprof.cli.status import _processes

    try:
        return {str(p["host"]) for p in _processes(directory / LOG_DIR)}
    except OSError:
        return set()


def _note_if_nobody_watches(directory: Path) -> None:
    """No process of a job watches DIR: none has yet (its logs name none), or every one the logs know of
    has ended (or died). A job launched on it that has not begun training reads the request when it does;
    a job launched later takes the file as it finds it as no request (docs/architecture.md, "The
    baseline")."""
    from npuprof.agent.dynamic_files import LOG_DIR
    from npuprof.cli.status import SILENT, STOPPED, _processes, is_alive, process_named

    try:
        processes = _processes(directory / LOG_DIR)
    except FileNotFoundError:
        processes = []
    except OSError:
        return
    if not processes:
        sys.stderr.write(
            f"npuprof trigger: note: no process has watched {directory} yet (its log/ names none): a job "
            "launched on it that has not begun training reads this request when it begins; one launched "
            "after now takes the file as no request (trigger once the job runs)\n"
        )
    elif all(not is_alive(p) for p in processes):
        # torchrun's workers name their attempt: between a failed attempt's end and the restarted workers'
        # first look none runs, and those take the request (docs/architecture.md, "Dynamic capture")
        restart = any(p["attempt"] is not None for p in processes)
        sys.stderr.write(
            f"npuprof trigger: note: no process watches {directory} now (every process its logs know of "
            "has ended): unless a job on it is starting (its first process takes it)"
            + (
                " or torchrun is restarting its workers (its processes name torchrun's attempts; with "
                "--max-restarts the restarted workers take it)"
                if restart
                else ""
            )
            + ", this request is read by no one, and a job started later on it takes the file as no "
            "request\n"
        )
    elif all(p["state"] == SILENT for p in processes if is_alive(p)):
        silent = [p for p in processes if p["state"] == SILENT]
        who = ", ".join(f"{process_named(p)} on {p['host']}" for p in silent[:8])
        who += f" and {len(silent) - 8} more" if len(silent) > 8 else ""
        sys.stderr.write(
            f"npuprof trigger: note: no process watches {directory} for sure now (every process its logs "
            f"know of has ended, or is of another host and {MAY_HAVE_ENDED}: {who}; see npuprof status): "
            "unless one still runs or a job on it is starting, this request is read by no one\n"
        )
    elif stopped := [p for p in processes if p["state"] == STOPPED]:
        who = ", ".join(
            process_named(p) + (f" (pid {p['pid']})" if p["rank"] is not None else "") for p in stopped
        )
        pids = " ".join(str(p["pid"]) for p in stopped)
        sys.stderr.write(
            f"npuprof trigger: note: {who} {'is' if len(stopped) == 1 else 'are'} stopped (kill -STOP, "
            f"Ctrl-Z): this request is read once resumed: kill -CONT {pids}\n"
        )


def _note_if_start_step_passed(directory: Path, start_step: int, ranks: Any = None) -> None:
    """--start-step N that the running processes have passed by their logs (a step a log names is one
    done: the job is at least there): each takes the request as not effective, which only its log said
    (helper-224: --start-step 5 at step 861, nothing said by npuprof trigger)."""
    from npuprof.agent.dynamic_files import LOG_DIR
    from npuprof.cli.status import SILENT, _processes, is_alive

    try:
        running = [p for p in _processes(directory / LOG_DIR) if is_alive(p) and _selects(ranks, p)]
    except OSError:
        return
    passed = [p for p in running if p["last_step"] is not None and p["last_step"] >= start_step]
    if not passed:
        return
    least = min(p["last_step"] for p in passed)
    which = "every" if len(passed) == len(running) else f"{len(passed)} of the {len(running)}"
    kind = "running" if all(p["state"] != SILENT for p in passed) else f"running or {MAY_HAVE_ENDED}"
    noun = "process" if len(passed) == len(running) else "processes"  # "every ... process", "1 of the 3 ..."
    sys.stderr.write(
        f"npuprof trigger: note: --start-step {start_step} has passed in {which} {kind} {noun} "
        f"(their logs are at step {least} or later): there it is not effective; omit --start-step for the "
        "next step\n"
    )


def _note_if_no_process_selected(directory: Path, ranks: list[int] | None) -> None:
    """--ranks that selects none of the running processes DIR's logs know of: each reads the request and
    makes no capture (helper-378: --ranks 1 on a job of one process, which counts as rank 0; only status
    and the run's end said so). A process that has not begun yet (a late rank) may still be selected: the
    note says which processes it is about."""
    from npuprof.agent.dynamic_files import LOG_DIR
    from npuprof.agent.dynamic_log import RANKLESS
    from npuprof.cli.status import _processes, is_alive
    from npuprof.config import ranks_text

    if ranks is None:
        return
    try:
        running = [p for p in _processes(directory / LOG_DIR) if is_alive(p)]
    except OSError:
        return
    if not running or any(_selects(ranks, p) for p in running):
        return
    seen = ranks_text([p["rank"] if p["rank"] is not None else 0 for p in running])
    rankless = f"; {RANKLESS}" if any(p["rank"] is None for p in running) else ""
    noun = "the running process" if len(running) == 1 else f"the {len(running)} running processes"
    sys.stderr.write(
        f"npuprof trigger: note: --ranks {ranks_text(ranks)} selects none of {noun} its logs "
        f"know of (rank(s) {seen}{rankless}): none of them captures; --ranks {seen} asks them, no --ranks "
        "every rank\n"
    )


def _describe(document: dict[str, Any], cfg: Any) -> str:
    from npuprof.agent.dynamic_request import window_text
    from npuprof.config import ranks_text

    if document["start_step"] == 0:
        # a rank the cancel does not select keeps its capture in flight (npuprof/agent/dynamic_plan.py)
        where = "" if cfg.ranks is None else f" on ranks {ranks_text(cfg.ranks)}"
        return (
            f"start_step 0: no capture (one planned is dropped; one recording{where} ends at the next step, "
            "what it recorded is saved)"
        )

    window = window_text(document["start_step"], document["warmup"], document["active"])
    ranks = "every rank" if cfg.ranks is None else "ranks " + ranks_text(cfg.ranks)
    return f"capture {window} on {ranks} (trigger {document['trigger_id']})"


def _write(directory: Path, data: bytes) -> Path:
    from npuprof.agent.dynamic_files import CONFIG_NAME, LOG_DIR, write_request

    # a job's watchers leave log/ (the file itself may have been deleted while the job runs: they wait for it)
    if not (directory / CONFIG_NAME).exists() and not (directory / LOG_DIR).is_dir():
        from npuprof.reports.inputs import run_output_hint

        if hint := run_output_hint(directory, "trigger"):
            _fail_line(hint)
        start = npuprof_cmd(f"run --dynamic {shlex.quote(str(directory))}")
        _fail_line(
            f"{directory}: no {CONFIG_NAME} there; start the job with {start} first (a file written before "
            "the job starts is not a request)"
        )
    try:
        return write_request(directory, data)
    except ValueError as exc:  # not trusted
        _fail_line(str(exc))
    except OSError as exc:
        _fail_line(f"cannot write {directory / CONFIG_NAME}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


def _fail(source: str, problem: str, fix: str) -> None:
    _fail_line(f"{source}: {problem}; {fix}")


def _fail_line(line: str) -> None:
    from npuprof.reports.text import printable

    sys.stderr.write(f"npuprof trigger: error: {printable(line)}\n")  # DIR's newline written out
    raise typer.Exit(2)


# run's help lines that say otherwise of trigger: -o is this capture's, by default the run's output; trigger
# has no --config; --ranks writes torch_npu's is_rank, which turns parsing off unless --analyse is given
_OWN_HELP = {
    "output": "Where the capture goes (prof_dir) \\[default: the run's --output].",
    "gc_detect_threshold": "Record Python GC pauses of at least MS (0 = all; off = none). \\[default: off]",
    "analyse": "Parse each capture into ASCEND_PROFILER_OUTPUT/ in the background. \\[default: on; off with "
    "--ranks, as torch_npu's is_rank]",
}


def _parameter(option: Option) -> inspect.Parameter:
    """run's parameter for ``option``, with trigger's own help line where run's would mislead."""
    parameter = _typer_parameter(option)
    info = parameter.annotation.__metadata__[0]  # a typer.Option made for this parameter alone
    if option.key == "ranks":
        info.rich_help_panel = WINDOW
    if option.key in _OWN_HELP:
        info.help = _OWN_HELP[option.key]
    return parameter


def _signature() -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY

    def option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(name, keyword, default=default, annotation=annotation)

    directory = Annotated[
        str,
        typer.Argument(
            help="The directory given to npuprof run --dynamic.", metavar="DIR", show_default=False
        ),
    ]
    parameters = [
        option("directory", directory, inspect.Parameter.empty),
        option(
            "start_step",
            Annotated[
                Optional[int],
                typer.Option(
                    "--start-step",
                    metavar="N",
                    rich_help_panel=WINDOW,
                    help="First step of the window, warm-up included (absolute, as ProfilerStep#N) "
                    "\\[default: the next step].",
                    show_default=False,
                ),
            ],
            None,
        ),
        option(
            "active",
            Annotated[
                int, typer.Option("--active", metavar="N", help="Steps to record.", rich_help_panel=WINDOW)
            ],
            1,
        ),
        option(
            "warmup",
            Annotated[
                int,
                typer.Option(
                    "--warmup", metavar="N", help="Warm-up steps before them.", rich_help_panel=WINDOW
                ),
            ],
            0,
        ),
        option(
            "cancel",
            Annotated[
                bool,
                typer.Option(
                    "--cancel",
                    rich_help_panel=WINDOW,
                    help="Write start_step 0: drop a planned capture; end one in flight at the next step.",
                ),
            ],
            False,
        ),
        *(_parameter(o) for o in TRIGGER_OPTIONS),
    ]
    return inspect.Signature(parameters, return_annotation=None)


trigger_command.__signature__ = _signature()  # type: ignore[attr-defined]
trigger_command.__annotations__ = {
    p.name: p.annotation
    for p in trigger_command.__signature__.parameters.values()  # type: ignore[attr-defined]
} | {"return": None}


def register(app: typer.Typer) -> None:
    app.command("trigger", help=HELP, epilog=EPILOG)(trigger_command)
