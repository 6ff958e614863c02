"""The short report at the end of `npuprof run`: what was captured, where, how big, what next."""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npuprof.agent.dynamic_log import RANKLESS
from npuprof.byte_sizes import human_bytes
from npuprof.config import ProfileConfig, Schedule
from npuprof.invocation import npuprof_cmd
from npuprof.job_processes import outliving_the_job
from npuprof.job_script import job_script, runs_module_as_main
from npuprof.reports import line_width
from npuprof.reports.text import printable, shorten_middle
from npuprof.results import free_space, layout
from npuprof.results.logfile import (
    AGENT_START_FAILED,
    KEPT_UNPARSED,
    NESTED_RUN,
    NOTHING_COUNTED_AT_EXIT,
    OWN_PROFILER_KEPT_OUT,
    OWN_PROFILER_STOPPED,
    SPAWNED_CHILD,
    SPOOLED_AT_EXIT,
    STARTS_WORKERS_AT_EXIT,
    STEPS_AT_EXIT,
    WINDOWS_SKIPPED_AT_EXIT,
)
from npuprof.results.run_record import CaptureSummary
from npuprof.signal_names import known_signal_name, signal_name

if TYPE_CHECKING:
    from collections.abc import Collection

    from rich.console import Console

MIN_DIRECTORY_WIDTH = 24


def _steps(steps: list[int]) -> str:
    if not steps:
        return "-"
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"


def msprof_reads_latest_only(captures: Collection[CaptureSummary]) -> str:
    """What msprof-analyze's cluster leaves out of a run with several db captures of one rank (--repeat,
    --dynamic): it reads each rank's latest capture only (README, "Interop"); "" when none is left out."""
    with_db = [c for c in captures if layout.has_profiler_db(c.rank_dir)]
    left_out = len(with_db) - len({c.rank for c in with_db})
    if not left_out:
        return ""
    return (
        f"; it reads each rank's latest capture only: {left_out} of {len(with_db)} left out, give it a "
        "folder of one capture per rank for them"
    )


def print_run_summary(
    output: Path,
    captures: list[CaptureSummary],
    exit_code: int,
    cfg: ProfileConfig,
    log_path: Path,
    run_id: str | None = None,
    reach_warned: bool = False,
    died_of: int | None = None,
    replaced: bool = False,
) -> str | None:
    """``died_of``: the signal the job's process died of (its exit code then reads 128 + it); ``replaced``:
    the output directory was removed and made again during the run. Returns the line of a run without
    captures (None when there are captures)."""
    if not captures:
        line = no_capture_line(output, exit_code, cfg, log_path, run_id, reach_warned, died_of, replaced)
        _note(line)
        return line
    from rich.markup import escape
    from rich.table import Table

    console = line_width.console(stderr=True, highlight=False)  # a log or a pipe: each line whole
    # No box and the pid left out (it is in the directory's name), so that a row fits 80 columns; a
    # directory name is never split over lines, only shortened in its middle when the terminal is narrow.
    outside = sum(1 for c in captures if not c.rank_dir.is_relative_to(output))
    where = f"in {output}" + (f" ({outside} of them elsewhere, below)" if outside else "")
    lines = run_log_lines(log_path, run_id) if run_id else []  # read once: the notes below use it too
    others = _agents_of_other_runs(lines, run_id)
    agents = _agent_lines(lines, others)  # this run's agents' lines, parsed once
    # the title is a line of its own, not the table's: a table title is wrapped to the table's width
    title = _counted(captures, *_windows_skipped(agents)[::2])
    console.print(escape(f"npuprof: {title} {where}"), style="italic", soft_wrap=True)
    table = Table(
        box=None,
        pad_edge=False,
        header_style="bold",
    )
    attempts = {c.restart_count for c in captures if c.restart_count is not None}
    # torchrun restarted the job between its captures: which attempt made each ("attempt" is 7 columns)
    by_attempt = len(attempts) > 1
    short_columns = ("rank", *(("attempt",) if by_attempt else ()), "steps", "status", "size", "parsed")
    for column in short_columns:
        table.add_column(column, overflow="fold")
    table.add_column("directory", no_wrap=True)
    listed, left_out, notable_left = _listed(captures, cfg)
    rows = []
    for c in listed:
        rank = "-" if c.rank is None else str(c.rank)
        attempt = ["-" if c.restart_count is None else str(c.restart_count)] if by_attempt else []
        status = SKIPPED if skipped_window(c) else c.status
        status = f"{status}*" if c.detail else status  # the detail under the table
        # a capture its process died inside: from its first step to a last no record says
        steps = f"{c.steps[0]}-?" if c.open_ended and c.steps else _steps(c.steps)
        rows.append([rank, *attempt, steps, status, human_bytes(c.size_bytes), "yes" if c.parsed else "no"])
    widths = [max(len(name), *(len(r[k]) for r in rows)) for k, name in enumerate(short_columns)]
    room = max(console.width - sum(widths) - 2 * len(widths), MIN_DIRECTORY_WIDTH)
    if not line_width.isatty(sys.stderr):  # a log or a pipe, FORCE_COLOR or not: names whole
        room = 1 << 16
    for row, c in zip(rows, listed, strict=True):
        table.add_row(*row, escape(shorten_middle(printable(_shown_dir(c.rank_dir, output)), room)))
    from npuprof.reports.terminal import print_whole

    print_whole(console, table)
    if left_out or notable_left:
        size = human_bytes(sum(c.size_bytes or 0 for c in captures))
        parsed = ", parsed" if cfg.analyse else ""
        more = f"{left_out} more complete{parsed} capture(s)" if left_out else ""
        odd = f"{notable_left} more not complete, not parsed or with a note" if notable_left else ""
        console.print(
            f"... and {' and '.join(filter(None, (more, odd)))} between those ({size} in all; "
            "the run's record, npuprof_run*.json, lists every one)"
        )
    if restarted := _restarts_said(
        attempts, set(_attempts_of_agents(agents).values()), _latest_round(captures)
    ):
        console.print(f"[bold yellow]npuprof:[/] {escape(restarted)}", soft_wrap=True)
    if replaced:  # the captures listed are those made since (helper-114: one lost with it, unsaid)
        console.print(f"[bold yellow]npuprof:[/] {escape(replaced_words(output))}", soft_wrap=True)
    from npuprof.reports.footnotes import grouped

    details = (
        (c, "; ".join(filter(None, (_why_not_finalised(c, agents), c.unmade))))
        if c.detail == layout.NOT_FINALISED
        else (c, "; ".join(filter(None, (c.detail, c.unmade))))
        for c in captures
    )
    shown = {id(c) for c in listed}
    # grouped over every capture, not the rows listed: a footnote named by its first and last capture
    # counts all those between that have its note, and says nothing of those that have none (helper-374)
    for alike, detail in grouped(details):
        if not any(id(c) in shown for c in alike):
            continue
        named = _shown_dir(alike[0].rank_dir, output)
        if len(alike) > 1:  # --repeat 0: most captures have the same note (reports/footnotes.py)
            named += f" .. {_shown_dir(alike[-1].rank_dir, output)} ({len(alike)} captures)"
        console.print(f"* {escape(named)}: {escape(detail)}", overflow="fold")
    left = _left_unparsed(captures, cfg)
    if being := _being_parsed(left):
        console.print(
            f"{len(being)} complete capture(s) being parsed as npuprof ended, by another process (npuprof "
            "analyse --force of this directory, or a post-processor still at work): their tables come once "
            "it is done"
        )
        left = [c for c in left if c not in being]
    unparsed = len(left)
    if unparsed:  # the post-processor ended (killed?) or failed before it parsed them
        # the post-processor makes them before the parse: one whose parse failed (a full disk) made them
        asked = [
            name
            for name in ("export-stacks", "memory-timeline")
            if any(name in _exports_lacking(c, cfg) for c in left)
        ]
        made = (
            f"; their --{' and --'.join(asked)} files were not made either ("
            + ", ".join(npuprof_cmd(f"{a} DIR -o FILE") for a in asked)
            + " make them)"
        )
        why = _parse_failure(lines, left) or _killed_before_the_hand_over(
            agents, left, exit_code, died_of, run_id
        )
        if not why and all(c.backend == "torch_npu" for c in left):
            # torch_npu parsed them in the job's own process, no post-processor: npuprof.log holds nothing of
            # it (helper-214: "a post-processor stopped, killed, ...: see npuprof.log")
            failed = escape(TORCH_NPU_PARSE_FAILED)
            console.print(
                f"{unparsed} complete capture(s) not parsed when npuprof ended ({failed}): "
                "npuprof analyse runs torch_npu's parser on them again, where torch_npu is installed"
                + (made if asked else "")
            )
        else:
            why = why or "a post-processor stopped, killed, or still at work in the background"
            console.print(
                f"{unparsed} complete capture(s) not parsed when npuprof ended ({escape(why)}: see "
                f"{escape(str(log_path))}): npuprof analyse parses them" + (made if asked else "")
            )
    if not_asked := _unparsed_as_asked(captures, cfg):
        console.print(
            escape(f"{len(not_asked)} capture(s) not parsed, as {_why_not_asked(cfg)}: ")
            + escape(npuprof_cmd(f"analyse {shell_quote(str(output))}"))
            + " parses them",
            soft_wrap=True,
        )
    if cfg.export_stacks or cfg.memory_timeline:  # parsed, yet without them (the unparsed: said above)
        done = [c for c in captures if c.status == "complete" and c.parsed]
        _say_exports_not_made(console, done, cfg, log_path)
        _say_exports_made(console, done, cfg)
        if cfg.dynamic is not None:
            _say_requests_without_what_exports_need(console, captures, cfg)
    if cfg.dynamic is not None:
        _say_request_not_reached(console, captures, Path(cfg.dynamic))
    if cfg.export_chrome_trace:
        traces = chrome_traces_written(lines, captures)
        if traces:
            more = f" and {len(traces) - 1} more (npuprof.log names them)" if len(traces) > 1 else ""
            console.print(f"npuprof: --export-chrome-trace: {escape(traces[0])}{more}", soft_wrap=True)
    running = outliving_the_job(run_id)  # said below: they may record yet
    for note in _ranks_short_of_captures(agents, captures, cfg, {str(pid) for pid in running}):
        console.print(f"[bold yellow]npuprof:[/] {escape(note)}", soft_wrap=True)
    if unselected := _ranks_left_out(agents, cfg):
        console.print(f"npuprof: {escape(unselected)}", soft_wrap=True)
    stopped = _profiling_stopped(agents)
    if stopped:
        first, log_name = escape(stopped[0]), escape(str(log_path))
        console.print(
            f"[bold yellow]npuprof:[/] profiling stopped after an internal error in {len(stopped)} "
            f"process(es), which recorded nothing after it ({first}); see {log_name}"
        )
    logged, last_reason, exact = _windows_skipped(agents)
    # counted as the title counts them (_counted): a window's own record is one the log may have lost
    recorded = sum(1 for c in captures if skipped_window(c))
    skipped, exact = max(logged, recorded), exact or recorded >= logged
    if skipped:
        why = (
            f"the last: {_short(last_reason.split('; training goes on')[0])}"
            if last_reason
            else "the log could not take the reasons: a full disk, or no file descriptor left to the job; "
            "npuprof's warnings in the job's output give them"
        )
        console.print(
            f"[bold yellow]npuprof:[/] {'' if exact else 'at least '}{skipped} capture window(s) could not "
            f"record ({escape(why)}; see "
            f"{escape(str(log_path))})"
        )
    nested = nested_outputs([message for _pid, _level, message in agents], run_id)
    if nested:  # the processes the job's own npuprof run started are profiled by it, not listed here
        console.print(
            f"npuprof: the job ran npuprof run itself: what it profiled is in {escape('; '.join(nested))}, "
            "not listed here",
            soft_wrap=True,
        )
    if running:
        console.print(
            f"[bold yellow]npuprof:[/] the job's first process ended, but {_still_running(running)}: what "
            "they capture from now on is not listed here (npuprof analyse reads it once they end)"
        )
    if run_id:  # requested outputs that could not be produced, with their fix (npuprof/results/extras.py)
        from npuprof.results.extras import not_produced_notes
        from npuprof.results.postprocess import RESTARTS, deaths_in, pipe_closed

        for note in not_produced_notes(lines):
            console.print(f"[bold yellow]npuprof:[/] {escape(note)}")
        dead = deaths_in(lines)
        if dead:  # killed, out of memory: each was replaced, RESTARTS times at most a training process
            console.print(
                f"[bold yellow]npuprof:[/] a background post-processor was found dead {len(dead)} time(s) "
                f"(killed? out of memory?): replaced, {RESTARTS} times at most a process; see "
                f"{escape(str(log_path))}"
            )
        closed = {pid for pid, _level, message in agents if pipe_closed(message)}
        if closed:  # not a death: the script's os.closerange closed its input (helper-151)
            console.print(
                "[bold yellow]npuprof:[/] the script closed npuprof's pipe to its background post-processor "
                f"in {len(closed)} process(es) (os.closerange?), which ends that post-processor (not a "
                f"kill); a new one takes the captures after it, {RESTARTS} times at most a process; see "
                f"{escape(str(log_path))}"
            )
    # the summary's last lines: what to run next (its notes above, so that the command is what a reader
    # sees last and copies)
    target = escape(shell_quote(str(output)))  # for rich: "[x]" in a path is markup
    run_flag = f" --run {run_id}" if run_id and _analyse_reports_another_run(output, run_id) else ""
    elsewhere = sorted({c.rank_dir.parent for c in captures if not c.rank_dir.is_relative_to(output)})
    if all(c.record_only for c in captures):  # every capture skipped: its record says why, above
        console.print(
            f"next: nothing to analyse, no capture holds a trace   (exit code of the job: {exit_code})"
        )
    elif any(c.rank_dir.is_relative_to(output) for c in captures):
        # one line, however long (the terminal folds it): a command split by newlines cannot be copied
        console.print(
            f"next: [bold]{escape(npuprof_cmd())} analyse {target}{run_flag}[/]   "
            f"(exit code of the job: {exit_code})",
            soft_wrap=True,
        )
    else:  # every capture went to a --dynamic prof_dir outside -o
        console.print(f"next: (exit code of the job: {exit_code}; no capture in {target})")
    for root in elsewhere:  # --dynamic's prof_dir outside -o
        count = sum(1 for c in captures if c.rank_dir.parent == root)
        console.print(
            f"      [bold]{escape(npuprof_cmd('analyse ' + shell_quote(str(root))))}[/]   "
            f"({count} of the captures, "
            f"outside {target})",
            soft_wrap=True,
        )
    if cfg.export_db and any(layout.has_profiler_db(c.rank_dir) for c in captures):
        # the db export is for msprof-analyze's recipes (README); where none was written, nothing to point at
        recipe = "hccl_sum" if any(c.rank is not None for c in captures) else "compute_op_sum"
        console.print(
            f"      [bold]msprof-analyze cluster -d {target} -m {recipe}[/]   (or any db recipe"
            f"{escape(msprof_reads_latest_only(captures))})",
            soft_wrap=True,
        )


SKIPPED = "skipped"  # the status shown of a window skipped (its record says "incomplete")


def skipped_window(c: CaptureSummary) -> bool:
    """A capture window skipped before it recorded anything (below --min-free-space, its files not
    makeable): its directory holds its record alone, which says why. Not a capture."""
    return c.record_only and c.detail.startswith(CAPTURE_SKIPPED) and " skipped: " in c.detail


def _counted(captures: list[CaptureSummary], logged_skipped: int = 0, exact: bool = True) -> str:
    """The summary's title's count: the captures made, and the windows skipped apart (a window skipped was
    counted as "1 capture(s)"). ``logged_skipped``: the windows the log says were skipped, more where the
    full disk or read-only output that skipped them left no record of them (helper-355: "1 capture window(s)
    skipped" over "6 capture window(s) could not record")."""
    recorded = sum(1 for c in captures if skipped_window(c))
    made = len(captures) - recorded
    skipped = max(recorded, logged_skipped)
    if not skipped:
        return f"{made} capture(s)"
    at_least = "" if exact or recorded >= logged_skipped else "at least "
    windows = f"{at_least}{skipped} capture window(s) skipped"
    return f"{made} capture(s), {windows}," if made else f"no capture, {windows},"


def no_capture_line(
    output: Path,
    exit_code: int,
    cfg: ProfileConfig,
    log_path: Path,
    run_id: str | None,
    reach_warned: bool,
    died_of: int | None,
    replaced: bool,
) -> str:
    """The line that ends a run without captures: why none was written (the arguments as
    :func:`print_run_summary`'s)."""
    unwritable = _unwritable(output)
    if unwritable:
        # npuprof.log could not hold the reason either: say what is known, and no pointer to it
        return f"no capture was written (exit code {exit_code}): the output directory {unwritable}."
    if replaced:  # what its log said before is gone: its later lines would mislead (helper-110, -113)
        return f"no capture was written (exit code {exit_code}): {replaced_words(output)}."
    lines = run_log_lines(log_path, run_id) if run_id else []
    short = None
    if run_id and not lines:  # a full disk is the reason, --min-free-space 0 or not (helper-103)
        full = f"the filesystem of --output {str(output)!r} is full (0 B free)"
        short = free_space.shortfall(output, cfg.min_free_space) or (
            full if free_space.full(output) else None
        )
    if short:
        # npuprof.log could not be written for want of space: that is the reason the captures were not
        return (
            f"no capture was written (exit code {exit_code}): {short}, so the captures were skipped and "
            f"{log_path} could not be written (see the warnings above); free some space, or give "
            "--output on another disk."
        )
    if run_id and not lines:  # what the agents said is not there to read: no reason can be given
        return (
            f"no capture was written (exit code {exit_code}); {log_path} does not hold this run's lines "
            "(it could not be written, or read back: see the warnings above), so the reason is not known."
        )
    running = outliving_the_job(run_id)
    if running:  # a process that outlived the job's first one (a daemon it forked) may still capture
        return (
            f"no capture was written yet (exit code {exit_code}): the job's first process ended, but "
            f"{_still_running(running)}; what they capture lands in {output} as they go: "
            f"{npuprof_cmd('analyse ' + shell_quote(str(output)))} once they end. See {log_path}."
        )
    why = why_no_capture(cfg, exit_code, lines, reach_warned, run_id, died_of)
    return f"no capture was written (exit code {exit_code}): {why}. See {log_path}."


def _latest_round(captures: list[CaptureSummary]) -> tuple[bool, set[int], int]:
    """Whether some capture is of a round of torchrun's workers before the latest, the counts the latest
    round's captures say (more than one where its nodes' counts differ: npuprof/results/rounds.py), and the
    most processes one rank made captures in (a rank is one process a round: the rounds seen)."""
    from npuprof.results.rounds import Made, earlier_rounds

    processes: dict[int, set[tuple[int | None, int | None]]] = {}
    for c in captures:
        if c.restart_count is not None and isinstance(c.rank, int):
            processes.setdefault(c.rank, set()).add((c.pid, c.process_start_ns))
    rounds = max(map(len, processes.values()), default=0)

    made = [
        Made(str(c.rank_dir), c.rank, c.restart_count, c.process_start_ns, c.updated_ns) for c in captures
    ]
    earlier = earlier_rounds(made)
    latest = {
        c.restart_count for c in captures if c.restart_count is not None and str(c.rank_dir) not in earlier
    }
    return bool(earlier), latest, rounds


def _restarts_said(
    attempts: set[int], ran: Collection[int] = (), latest_round: tuple[bool, set[int], int] | None = None
) -> str:
    """The line on torchrun's elastic restarts, from the attempts (TORCHELASTIC_RESTART_COUNT) the
    captures were made in and those the agents ran in (``ran``: a later attempt may have captured nothing,
    its ranks' lines below name it), and ``latest_round`` (:func:`_latest_round`; None: by the highest
    count); "" when none is after the first. The highest count is the restarts of one node: torchrun
    counts each node's, so node A's failure then node B's make 2 restarts of count 1 each; a rank's
    processes tell them."""
    rounds = latest_round[2] if latest_round is not None else 0
    restarts = max([*attempts, *ran, rounds - 1, 0])  # no rank under torchrun: no round, no restart
    if not restarts:
        return ""
    said = f"torchrun restarted the job {restarts} time(s)"
    if len(attempts) > 1:
        earlier, latest, _ = latest_round if latest_round is not None else (True, {max(attempts)}, 0)
        column = f"{said}: the attempt column is its TORCHELASTIC_RESTART_COUNT (0: the first attempt)"
        per_node = ""
        if len(latest) > 1:
            counts = sorted(latest, reverse=True)
            per_node = (
                f"attempt {counts[0]} on some nodes, {', '.join(map(str, counts[1:]))} on others: torchrun "
                "counts each node's restarts, and a node whose workers did not fail keeps its count"
            )
        if not earlier:  # the captures are all of one round of workers
            return f"{column}; npuprof analyse compares them all, of one round of workers ({per_node})"
        if per_node:
            return f"{column}; npuprof analyse compares the ranks of the latest attempt ({per_node})"
        return f"{column}; npuprof analyse compares the ranks of the latest attempt ({max(latest)})"
    if attempts:
        only = next(iter(attempts))
        return f"{said}: these captures are all of attempt {only} (TORCHELASTIC_RESTART_COUNT; 0: the first)"
    return f"{said} (TORCHELASTIC_RESTART_COUNT; 0: the first attempt)"


def _still_running(pids: list[int]) -> str:
    shown = ", ".join(map(str, pids[:5])) + (" ..." if len(pids) > 5 else "")
    return f"{len(pids)} process(es) of it still run (pid {shown})"


def _say_exports_not_made(
    console: Console, captures: list[CaptureSummary], cfg: ProfileConfig, log_path: Path
) -> None:
    """One line for the parsed captures that lack the --export-stacks / --memory-timeline files asked
    for (a post-processor stopped or killed between the parse and them), with the commands that make them."""
    from rich.markup import escape

    from npuprof.results.extras import exports_not_made

    lacking: dict[str, list[CaptureSummary]] = {}
    for c in captures:
        for what in exports_not_made(c.rank_dir, cfg.export_stacks, cfg.memory_timeline):
            lacking.setdefault(what, []).append(c)
    for what, which in lacking.items():
        first = shell_quote(str(which[0].rank_dir))
        console.print(
            f"{len(which)} capture(s) lack their --{what} files (not made by the post-processor, or not "
            f"yet where it goes on in the background: see "
            f"{escape(str(log_path))}): npuprof {what} {escape(first)} -o FILE makes them",
            soft_wrap=True,
        )


def _say_exports_made(console: Console, captures: list[CaptureSummary], cfg: ProfileConfig) -> None:
    """Where the --export-stacks / --memory-timeline files are (each capture's directory), and the command
    that draws the stacks as a flame graph: the table lists directories only."""
    from rich.markup import escape

    from npuprof.agent.capture_exports import memory_file_name, stacks_file_name

    stacks = [stacks_file_name(m) for m in cfg.export_stacks]
    names = stacks + [memory_file_name(fmt) for fmt in cfg.memory_timeline]
    made = [name for name in names if any((c.rank_dir / name).is_file() for c in captures)]
    if not made:
        return
    drawn = [c for c in captures if any((c.rank_dir / name).is_file() for name in stacks)]
    said = f"in each capture's directory: {', '.join(made)}"
    if drawn:
        first = shell_quote(str(drawn[0].rank_dir))
        said += f" (a flame graph: {npuprof_cmd(f'export-stacks {first} --svg flame.svg')})"
    console.print(escape(said), soft_wrap=True)


def _say_request_not_reached(console: Console, captures: list[CaptureSummary], directory: Path) -> None:
    """A request its processes planned for a step the job never reached (`npuprof trigger DIR --start-step
    100000`): said at the end of a run without captures, not of one with (helper-286). The logs of the
    processes that captured only: the directory's log/ keeps earlier jobs' too."""
    from rich.markup import escape

    pids = {c.pid for c in captures if c.pid is not None}
    if pids and (found := planned_not_reached(directory, pids)).startswith(NOT_REACHED):
        see = npuprof_cmd(f"status {shell_quote(str(directory))}")
        console.print(escape(f"npuprof: {found} (see {see})"))


def _say_requests_without_what_exports_need(
    console: Console, captures: list[CaptureSummary], cfg: ProfileConfig
) -> None:
    """One line each for --export-stacks and --memory-timeline: the --dynamic captures whose request did not
    record what they need (with_stack; profile_memory, record_shapes and with_stack), so have none. Only
    the dynamic logs said it: a capture asked by `npuprof trigger DIR` alone ended without its stacks and
    the summary was clean (helper-286)."""
    from rich.markup import escape

    from npuprof.results.layout import recorded_option

    def lacks(capture: CaptureSummary, keys: tuple[str, ...]) -> list[str]:
        return [key for key in keys if recorded_option(capture.rank_dir, key) is False]

    asked = [c for c in captures if c.status == "complete" and not c.record_only]
    target = shell_quote(cfg.dynamic or "DIR")
    needs = []
    if cfg.export_stacks:
        without = [c for c in asked if lacks(c, ("with_stack",))]
        needs.append(("--export-stacks", "stacks", without, "with_stack", "--with-stack"))
    if cfg.memory_timeline:
        memory = ("profile_memory", "record_shapes")
        without = [c for c in asked if lacks(c, memory) or len(lacks(c, ("with_stack", "with_modules"))) == 2]
        flags = "--profile-memory --record-shapes --with-stack"
        needs.append(
            (
                "--memory-timeline",
                "memory timeline",
                without,
                "profile_memory, record_shapes and with_stack",
                flags,
            )
        )
    for flag, made, which, keys, flags in needs:
        if not which:
            continue
        steps = ", ".join(_steps(c.steps) for c in which[:3]) + (", ..." if len(which) > 3 else "")
        console.print(
            escape(
                f"{flag}: {len(which)} capture(s) (steps {steps}) have no {made}: their request did not ask "
                f"for {keys} (each request says it: {npuprof_cmd(f'trigger {target} {flags}')})"
            ),
            soft_wrap=True,
        )


def _exports_lacking(capture: CaptureSummary, cfg: ProfileConfig) -> list[str]:
    """What an unparsed capture lacks of the --export-stacks / --memory-timeline files asked for: those its
    post-processor left undone (npuprof.results.extras.exports_not_made), and a memory timeline none of whose
    formats was written (no post-processor ever got it: no snapshot is left then)."""
    from npuprof.agent.capture_exports import MEMORY_FILE
    from npuprof.results.extras import exports_not_made

    lacking = exports_not_made(capture.rank_dir, cfg.export_stacks, cfg.memory_timeline)
    formats = cfg.memory_timeline
    if "memory-timeline" not in lacking and formats and _recorded_memory(capture.rank_dir):
        made = any((capture.rank_dir / MEMORY_FILE.format(fmt=fmt)).exists() for fmt in formats)
        lacking += [] if made else ["memory-timeline"]
    return lacking


def _recorded_memory(rank_dir: Path) -> bool:
    """Whether the capture recorded what a memory timeline needs: a --dynamic request without
    profile_memory or record_shapes makes none (its log says so), and none is missing there."""
    from npuprof.results.layout import recorded_option

    return all(recorded_option(rank_dir, key) is not False for key in ("profile_memory", "record_shapes"))


def _being_parsed(left: list[CaptureSummary]) -> list[CaptureSummary]:
    """Those of ``left`` a parse is at work on (helper-139: an `analyse --force` beside the run's end made
    its captures "not parsed ... a post-processor stopped, killed, or still at work")."""
    return [c for c in left if layout.parse_at_work(c.rank_dir / layout.PARSED_DIR)]


TORCH_NPU_PARSE_FAILED = (
    "torch_npu's own parse, run in the job's process at each capture's end, wrote none of its tables into "
    "ASCEND_PROFILER_OUTPUT/: its [ERROR] or [WARNING] lines in the job's output say why"
)


def _left_unparsed(captures: list[CaptureSummary], cfg: ProfileConfig) -> list[CaptureSummary]:
    """Complete captures not parsed that were to be (their record says; an older one's: the run's flag)."""
    wanted = [cfg.analyse if c.parse_asked is None else c.parse_asked for c in captures]
    return [c for c, w in zip(captures, wanted, strict=True) if c.status == "complete" and not c.parsed and w]


def _unparsed_as_asked(captures: list[CaptureSummary], cfg: ProfileConfig) -> list[CaptureSummary]:
    """Complete captures left unparsed because their configuration said so: their "parsed: no" read as a
    failure, unexplained (helper-286: a --config of torch_npu's template, "analyse": false). Not those of
    a --no-analyse typed by the user."""
    if cfg.dynamic is None and "analyse" not in cfg.given_as:
        return []
    wanted = [cfg.analyse if c.parse_asked is None else c.parse_asked for c in captures]
    return [
        c
        for c, w in zip(captures, wanted, strict=True)
        if c.status == "complete" and not c.parsed and not c.record_only and not w
    ]


def _why_not_asked(cfg: ProfileConfig) -> str:
    if cfg.dynamic is not None:
        return (
            "their request's \"analyse\": false asks (torch_npu's template has it; npuprof trigger writes it "
            "with --ranks or --no-analyse)"
        )
    from npuprof.options import BY_KEY, given_text

    return f"{given_text(cfg, BY_KEY['analyse'])} asks"


# a record's time and level, up to its writer: the patterns below match there only, never a record's text
# (a `python -c` program logged in "run ID starts: COMMAND" holding a line like one of npuprof's own)
_RECORD_HEAD = r"^[^[]*\[[A-Z]+\] "
_PARSE_FAILED = re.compile(
    _RECORD_HEAD + r"\[postprocess pid=\d+(?: run=\w+)?\] (?P<dir>\S+): "
    r"(?P<why>(?:not analysed|analysis failed|could not write).*)$"
)


def _parse_failure(lines: list[str], left: list[CaptureSummary]) -> str:
    """Why ``left`` were not parsed, as logged: what the post-processor said (a full disk), that their
    process could start none (no descriptor left), or that the script closed its pipe to one (replaced
    RESTARTS times at most: helper-151, a script that closed every descriptor at each step)."""
    from npuprof.results.postprocess import POST_NOT_STARTED, RESTARTS, pipe_closed

    names = {c.rank_dir.name for c in left}
    pids = {str(c.pid) for c in left}
    closed = False
    for line in lines:
        found = _PARSE_FAILED.search(line)
        if found and found["dir"] in names:
            return _short(f"the post-processor said: {found['dir']}: {found['why']}")
        agent = _AGENT_LINE.search(line)
        if agent and agent["pid"] in pids and agent["message"].startswith(POST_NOT_STARTED):
            return _short(agent["message"].split(": captures")[0])
        closed = closed or bool(agent and agent["pid"] in pids and pipe_closed(agent["message"]))
    if closed:
        return (
            "the script closed npuprof's pipe to their process's post-processor as they were handed over, or "
            f"once it had been replaced {RESTARTS} times (os.closerange?)"
        )
    return ""


# what an agent logs at its exit, or as it hands the captures left over to the post-processor's spool
_EXIT_LINES = (STEPS_AT_EXIT, NOTHING_COUNTED_AT_EXIT, SPOOLED_AT_EXIT, KEPT_UNPARSED)


def _killed_before_the_hand_over(
    agents: list[tuple[str, str, str]],
    left: list[CaptureSummary],
    exit_code: int,
    died_of: int | None,
    run_id: str | None,
) -> str:
    """Why ``left`` were not parsed when the job died of a signal or failed, their processes logged
    nothing at their exit and no post-processor of the run is left at work: they died with their captures
    still on the way to the post-processor (a SIGTERM between a capture's end and its hand-over, which a
    --memory-timeline copy makes seconds long), and the summary blamed "a post-processor stopped, killed,
    or still at work", of which npuprof.log said nothing. "" when that is not so."""
    signum = died_of or (exit_code - 128 if 128 < exit_code < 128 + 65 else 0)
    # torch_npu parses in the job's own process: no post-processor is handed its captures. A job that failed
    # otherwise counts too: torchrun exits 1 when a rank of it is killed (kill -9, or its SIGTERM to the
    # others once one has failed)
    if not (signum or exit_code) or not run_id or all(c.backend == "torch_npu" for c in left):
        return ""
    from npuprof.results.postprocess import post_processor_of_run_lives

    if post_processor_of_run_lives(run_id):  # a wait for it cut short (Ctrl-C): it may have them still
        return ""
    pids = {str(c.pid) for c in left}
    if None in {c.pid for c in left} or any(
        pid in pids and any(marker in message for marker in _EXIT_LINES) for pid, _level, message in agents
    ):
        return ""
    if not signum:
        ended = f"the job failed (exit code {exit_code})"
    elif died_of:
        ended = f"the job died of {signal_name(signum)}"
    else:  # a wrapper (sh) exits 128 + N for a process of its own that signal N ended
        ended = f"the job's exit code is {exit_code} (128 + {signal_name(signum)})"
    return f"their process ended without its exit lines and {ended}: killed before it handed them over?"


def _shown_dir(rank_dir: Path, output: Path) -> str:
    """A capture's directory as the summary names it: under ``output`` relative to it (the name, mostly);
    elsewhere (--dynamic's prof_dir) its name, the directory it is in said under the table."""
    return str(rank_dir.relative_to(output)) if rank_dir.is_relative_to(output) else rank_dir.name


LOG_READ_LIMIT = 4 << 20  # npuprof.log rotates at 1 MiB: a larger file is not ours to read
_AGENT_LINE = re.compile(
    r"^[^[]*\[(?P<level>[A-Z]+)\] \[agent pid=(?P<pid>\d+)(?: run=\w+)?\] (?P<message>.*)$"
)
# "(rank N, run ID)"; "(rank N)" before the run was named: the lines of agents of another run (npuprof
# started inside torchrun: a launcher per worker, all logging into one npuprof.log) are not this run's. A
# process without a rank says so before the brackets, its rank "0" (npuprof.agent.entry.ready_line), or
# "rank None" before: either is read as the rank "None" (_rank_of)
_READY = re.compile(
    rf"^agent ready in .*?(?P<rankless>, {re.escape(RANKLESS)})? "
    r"\(rank (?P<rank>[^,\s)]+)(?:, run (?P<run>\w+))?"
    r"(?:, attempt (?P<attempt>[0-9]+))?\)$"  # torchrun's TORCHELASTIC_RESTART_COUNT (npuprof.agent.entry)
)


def _rank_of(ready: re.Match[str]) -> str:
    """The rank of a _READY line: "None" for a process without one, whichever way its line says it."""
    return "None" if ready["rankless"] else ready["rank"]


# "rank N not selected (--ranks); no capture at step S" (npuprof.agent.controller); a process without a
# rank: "rank 0 not selected (--ranks); <RANKLESS>; ..." ("rank None" before)
_NOT_SELECTED = re.compile(
    rf"^rank (?P<rank>\S+) not selected \(--ranks\)(?P<rankless>; {re.escape(RANKLESS)})?"
)


def _unselected_rank(unselected: re.Match[str]) -> str:
    """The rank of a _NOT_SELECTED line: "None" for a process without one, whichever way its line says it."""
    return "None" if unselected["rankless"] else unselected["rank"]


def _other_runs_in(output: Path, run_id: str) -> bool:
    """Whether ``output`` holds the record of another run (two runs sharing -o, at once or one after the
    other): `npuprof analyse` then reports the latest, which may not be this one."""

    return any(record.get("run_id") != run_id for _path, record in layout.read_run_records(output))


def _analyse_reports_another_run(output: Path, run_id: str) -> bool:
    """Whether `npuprof analyse OUTPUT` would report another run than this one (npuprof.analysis.runs): one
    that recorded later into the same -o. npuprof started inside torchrun is a run id per worker, which
    analyse reports as one run: no --run then (helper-109: each worker's summary named its own id)."""
    if not _other_runs_in(output, run_id):
        return False
    from npuprof.analysis import runs

    try:
        latest = runs.choose(runs.runs_of(layout.find_rank_dirs(output)), None)
    except OSError:
        return True
    return not latest or run_id not in latest[0].run_ids


_CHROME_TRACE = re.compile(
    _RECORD_HEAD
    + r"\[(?:agent pid=(?P<pid>\d+)|postprocess pid=\d+)(?: run=\w+)?\] (?:(?P<rank_dir>[^/\s]+?): )?"
    r"--export-chrome-trace: (?P<path>/.+?)(?: \(copied\))?$"
)


def chrome_traces_written(lines: list[str], captures: list[CaptureSummary]) -> list[str]:
    """The files --export-chrome-trace wrote for ``captures`` (linked by their process, or copied by a
    post-processor into their rank dir's name), as logged, in order: another run sharing the log (and -o)
    writes its own."""
    pids = {str(c.pid) for c in captures if c.pid is not None}
    rank_dirs = {c.rank_dir.name for c in captures}
    found: list[str] = []
    for line in lines:
        match = _CHROME_TRACE.search(line)
        if not match or "[WARNING]" in line or match["path"] in found:
            continue
        if match["pid"] in pids or match["rank_dir"] in rank_dirs:
            found.append(match["path"])
    return found


def run_log_lines(log_path: Path, run_id: str) -> list[str]:
    """The lines of npuprof.log (and its rotated ``.1``) from this run's start line on (included); read
    without following a link or blocking on a FIFO, at most LOG_READ_LIMIT bytes a file."""
    from npuprof.results.layout import read_small
    from npuprof.results.logfile import log_records

    lines: list[str] = []
    for path in (log_path.with_name(log_path.name + ".1"), log_path):
        try:
            lines += log_records(read_small(path, LOG_READ_LIMIT).decode("utf-8", "replace"))
        except OSError:
            continue
    start = f"run {run_id} starts:"
    for index in range(len(lines) - 1, -1, -1):
        if start in lines[index]:
            lines = lines[index:]  # its own line too: the command
            break
    # else its start rotated away in a long run (its lines are the latest), or none to read (a full disk)
    return [line for line in lines if _tagged_run(line) in (None, run_id)]


# "[agent pid=8 run=ID]": the runs sharing -o (a multi-node job's nodes) share the log, and nodes in
# containers share pids too; a line without the tag (an older npuprof's, the bootstrap's) is told by pid
_RUN_TAG = re.compile(r"^[^[]*\[[A-Z]+\] \[[a-z]+ pid=\d+ run=(?P<run>\w+)\] ")


def _tagged_run(line: str) -> str | None:
    tagged = _RUN_TAG.match(line)
    return tagged["run"] if tagged else None


def replaced_words(output: Path) -> str:
    return (
        f"the output directory {output} was replaced during the run (removed and made again, or mounted "
        "over): what npuprof had written in it before (captures, the start of its log) is not there"
    )


def _unwritable(output: Path) -> str:
    """Why nothing can be written into ``output`` now (its filesystem went read-only, it was removed), or
    "" when it can be."""
    try:
        if os.statvfs(output).f_flag & os.ST_RDONLY:
            return f"{output} is on a read-only filesystem (it became read-only during the run?)"
    except OSError as exc:
        return f"{output} cannot be reached ({exc.strerror or exc})"
    if not output.is_dir():
        return f"{output} is no longer a directory (it was replaced during the run?)"
    return ""


LISTED_WHEN_MANY = 10  # a job of days with --repeat 0 makes thousands of captures: their first and last
MANY_CAPTURES = 30


def _listed(captures: list[CaptureSummary], cfg: ProfileConfig) -> tuple[list[CaptureSummary], int, int]:
    """Every capture when they are few; else the first and last LISTED_WHEN_MANY and the first
    MANY_CAPTURES with something to say (not complete, not parsed though asked to be, a detail), in their
    order, those not complete or not parsed before those with a detail only; and how many are left out:
    whole ones, and ones with something to say (a post-processor killed early leaves thousands unparsed)."""
    if len(captures) <= MANY_CAPTURES:
        return captures, 0, 0
    ends = set(range(LISTED_WHEN_MANY)) | set(range(len(captures) - LISTED_WHEN_MANY, len(captures)))
    unparsed = {id(c) for c in _left_unparsed(captures, cfg)}
    # --repeat 0 on a busy host gives most captures a note ("the post-processor ran during this capture"):
    # taken in order, those filled the rows, and a capture stopped by a full disk later in the run was left
    # out of the table and its footnote (helper-374)
    amiss = [
        i for i, c in enumerate(captures) if i not in ends and (c.status != "complete" or id(c) in unparsed)
    ]
    first = set(amiss)
    noted = [i for i, c in enumerate(captures) if i not in ends and i not in first and bool(c.detail)]
    said = set((amiss + noted)[:MANY_CAPTURES])
    kept = [c for i, c in enumerate(captures) if i in ends or i in said]
    notable_left = len(amiss) + len(noted) - len(said)
    return kept, len(captures) - len(kept) - notable_left, notable_left


def _agents_of_other_runs(lines: list[str], run_id: str | None) -> set[str]:
    """The pids of agents whose ready line names another run than ``run_id``."""
    others = set()
    for line in lines:
        match = _AGENT_LINE.search(line)
        ready = _READY.match(match["message"]) if match is not None else None
        if match is not None and ready is not None and run_id and ready["run"] not in (None, run_id):
            others.add(match["pid"])
    return others


_BOOTSTRAP_LINE = re.compile(r"^[^[]*\[ERROR\] \[bootstrap pid=\d+\] (?P<message>.*)$")


def _agent_start_failures(lines: list[str]) -> list[str]:
    """Why the job's processes could not start npuprof's agent, as the bootstrap logged it (before any
    agent's log was set up: a module npuprof.py of the script's hiding npuprof's package, say)."""
    found = []
    for line in lines:
        match = _BOOTSTRAP_LINE.search(line)
        if match and match["message"].startswith(AGENT_START_FAILED):
            found.append(match["message"].removeprefix(AGENT_START_FAILED))
    return found


def nested_outputs(messages: list[str], run_id: str | None) -> list[str]:
    """The output dirs of the `npuprof run` the job ran itself (their launchers' NESTED_RUN lines), but
    this run's own line (a run nested in another that shares its -o reads that log too)."""
    nested = (m.removeprefix(NESTED_RUN) for m in messages if m.startswith(NESTED_RUN))
    own = f"run {run_id}, output "
    return list(dict.fromkeys(n.split(", output ", 1)[-1] for n in nested if not n.startswith(own)))


def why_no_capture(
    cfg: ProfileConfig,
    exit_code: int,
    lines: list[str],
    reach_warned: bool = False,
    run_id: str | None = None,
    died_of: int | None = None,
) -> str:
    """The real reason a run wrote no capture, from what its agents logged (``lines``): npuprof never
    reached the job, the trigger module was never imported, --step-on named nothing, no rank was
    selected, the script ran its own profiler, the job failed, or too few steps."""
    ready_ranks: list[str] = []
    unselected: list[str] = []
    messages: list[str] = []
    said: list[tuple[str, str]] = []  # (pid, message) of each of those
    nested_lines: list[str] = []  # launchers of npuprof runs the job ran, not agents of this run
    errors: list[str] = []
    foreign: list[tuple[str, str]] = []  # (pid, message): steps ignored on a thread that does not drive
    took_over: set[str] = set()  # pids where such a thread then took over counting: its steps counted
    held: dict[str, str] = {}  # pid: why such a thread could not take over (a capture open on the driver)
    unread: dict[str, str] = {}  # pid: the wait of the driver for such a thread that npuprof does not read
    others = _agents_of_other_runs(lines, run_id)
    awake: list[str] = []  # pids whose agent was ready
    said_at_exit: set[str] = set()  # pids whose agent logged its line at the process's end
    idle: set[str] = set()  # pids whose agent said at the process's end that it had nothing to count
    for line in lines:
        match = _AGENT_LINE.search(line)
        if match is None or match["pid"] in others:
            continue
        message = match["message"]
        if message.startswith(_AT_EXIT):
            said_at_exit.add(match["pid"])
        if message.startswith(NOTHING_COUNTED_AT_EXIT):
            idle.add(match["pid"])
        if message.startswith(NESTED_RUN):
            nested_lines.append(message)
            continue
        messages.append(message)
        said.append((match["pid"], message))
        if message.startswith(FOREIGN_STEPS):
            foreign.append((match["pid"], message))
        elif TOOK_OVER in message:
            took_over.add(match["pid"])
        elif HELD_BY_A_WAITING_DRIVER in message:
            held.setdefault(match["pid"], message)
        elif UNREAD_WAIT in message:
            unread.setdefault(match["pid"], message)
        if match["level"] == "ERROR":
            errors.append(message)
        if ready := _READY.match(message):
            ready_ranks.append(_rank_of(ready))
            awake.append(match["pid"])
        elif selected := _NOT_SELECTED.match(message):
            unselected.append(_unselected_rank(selected))
    ended = _how_the_job_ended(exit_code, died_of)
    failed = f"{ended} and " if exit_code else ""
    nested = nested_outputs(nested_lines, run_id)
    if nested:
        outputs = "; ".join(nested)
        return (
            f"{failed}the job ran npuprof run itself, which profiled its processes instead of this run: its "
            f"captures are in {outputs}"
        )
    schedule = cfg.schedule
    first = schedule.skip_first + schedule.wait + schedule.warmup
    need = schedule.first_steps_needed()
    # A --step-on target missing (or refused: a class, a module object) in some process (torchrun's own,
    # say) matters only if no process counted steps on it.
    if not any(message.startswith(STEPS_COUNTED_AT) for message in messages):
        for message in messages:
            if message.startswith("--step-on") and ("not found" in message or STEP_ON_REFUSED in message):
                return f"{failed}{_short(message)}"
    # a capture that could not begin (its directory or files could not be made) says why itself
    for message in messages:
        if message.startswith(CAPTURE_SKIPPED) and " skipped: " in message:
            return f"{failed}{_short(message.split('; training goes on')[0])}"
    # npuprof stepped aside (torch_npu's own profiling mode, before any agent was ready; or the script's
    # own profiler): that is the reason, whatever else the log says
    for message in messages:
        if "its own profiler" in message or "steps aside" in message:
            return f"{failed}{_short(message)}{_own_profiler_stopped_before_the_end(messages)}"
    # No agent said it was ready, yet agents logged: the log lost its start (its directory removed and
    # made again during the run: helper-110), and what they logged says more than "no process woke"
    if not ready_ranks and not messages:
        if failed_to_start := _agent_start_failures(lines):
            return f"{failed}npuprof's agent failed to start in the job: {_short(failed_to_start[0])}"
        if reach_warned:
            return f"{failed}npuprof's hook did not reach the job's Python (see the warning above)"
        woke = _what_wakes_the_agent(cfg)
        if exit_code:
            # a signal's death prints nothing of the job's own: the signal is the reason, said in `ended`
            why = "" if died_of else "; its own error output says why"
            return f"{ended} before any of its processes {woke}{why}"
        return (
            f"no process of the job {woke}, so no step was counted{_run_as_its_script(cfg, lines)}"
            f"{_unreached_hint(cfg)}"
        )
    if errors:
        return f"{failed}npuprof's agent failed in the job ({_short(errors[0])})"
    for pid, message in foreign:
        if pid in held:  # the capture held by the waiting driver is the reason, and says what avoids it
            return f"{failed}{_held_in_short(held[pid])}"
        if pid in unread and pid not in took_over:  # the wait not read, named with what hands the steps over
            return f"{failed}{_short(unread[pid])}"
        if pid not in took_over:
            return f"{failed}{_short(message)}; their steps were not counted{_MOVE_THE_STEPS}"
    if unselected:
        wanted = {str(rank) for rank in cfg.ranks or []}
        if not any(rank in wanted for rank in ready_ranks):
            seen = ", ".join(sorted(set(unselected), key=lambda r: (len(r), r)))
            if set(unselected) == {"None"}:
                return (
                    f"{failed}--ranks picks ranks, but the job is not distributed (no process has a rank; "
                    "one without counts as rank 0: --ranks 0, or no --ranks)"
                )
            picked = ",".join(str(rank) for rank in cfg.ranks or [])
            worker = os.environ.get("RANK")  # npuprof run inside torchrun: one per worker, this one's rank
            if os.environ.get("TORCHELASTIC_RUN_ID") and worker in unselected and not failed:
                return f"this worker is rank {worker}, which --ranks {picked} does not select: as asked"
            return f"{failed}no process of the job has a rank selected by --ranks (ranks seen: {seen})"
    for message in messages:
        if message.startswith(TRACE_NOT_WRITTEN) and " was not written: " in message:  # lost (helper-94)
            return f"{failed}{_short(message)}"
        if re.search(r"the training thread (ended|died of .*) before the capture's last step", message):
            moved = sum(1 for m in messages if m.startswith("steps are counted on thread"))
            each = f" (the steps moved to a new thread {moved} times)" if moved > 1 else ""
            return (
                f"{failed}the thread npuprof recorded on ended inside the capture{each}: npuprof follows one "
                "training thread at a time, and a capture ends with its thread"
            )
    if cfg.dynamic:
        where = cfg.dynamic
        unread = unread_request(Path(where)) or before_start(Path(where)) or planned_not_reached(Path(where))
        see = npuprof_cmd(f"status {shell_quote(where)}")
        if unread:
            return f"{failed}{unread} (see {see})"
        return f"{failed}no capture was asked in {where}/profiler_config.json (see {see})"
    if cfg.timed:
        from npuprof.agent.window_plan import WINDOW_NOT_OPENED

        for message in messages:
            if message.startswith(WINDOW_NOT_OPENED):
                return f"{failed}{_short(message.removeprefix('--delay/--duration: '))}"
        flags = "--delay" if cfg.delay is not None else "--duration"
        return f"{failed}the job ended before the {flags} window began{_delay_that_fits(said, cfg)}"
    if cfg.schedule.off:
        return f"{failed}the config file's start_step is 0, which asks for no capture (as in torch_npu)"
    what = "one step is one optimizer.step()" if not cfg.step_on else f"one step is one {cfg.step_on}()"
    killed = _signal_of(exit_code)
    counted = any(m.startswith((OPTIMIZER_COUNTED, STEPS_COUNTED_AT)) for m in messages)
    if killed and not counted:
        return f"{ended} before a step was counted"  # the user stopped it: no advice on counting steps
    counts = _exit_counts(messages, STEPS_AT_EXIT)
    unended = list(dict.fromkeys(pid for pid in awake if pid not in said_at_exit))
    # no process said what it counted, nor that it made no optimizer (a pool's workers it ended by SIGTERM
    # would be blamed), and the job's own end names no signal: one that said nothing was killed
    if unended and not counts and not idle.intersection(awake) and not (killed or died_of):
        return f"{failed}{_ended_unsaid(unended)}"
    if not cfg.step_on and not any(m.startswith(OPTIMIZER_COUNTED) for m in messages) and not any(counts):
        named = _the_scripts_step_functions(lines)
        if exit_code:  # most likely it failed before training (bad arguments): its own error is the news
            return (
                f"{ended} before any optimizer's step() ran ({what}): if it failed, its own error output "
                "says why; if it trains without an optimizer, count the returns of your own step function "
                f"with --step-on MODULE:QUALNAME{named}, or capture by time with --delay and --duration"
            )
        return (
            f"{failed}no step was counted: no optimizer's step() ran in the job ({what}; a step inside "
            "torch.compile'd code is not seen); count the returns of your own step function with --step-on "
            f"MODULE:QUALNAME{named}, or capture by time with --delay and --duration"
        )
    passed = [m for m in messages if m.startswith(WINDOW_UNCOUNTED)]
    if passed:  # its window passed while another optimizer or thread took over counting
        return f"{failed}{_short(passed[0])}"
    if counts and max(counts) > first:  # the capture was due: what stopped it is not in the log
        return (
            f"{failed}a process counted {max(counts)} steps, past the start of the schedule's first capture "
            f"(step {first}), but npuprof's log holds no reason it recorded none: a line it could not write "
            "(a job holding every file descriptor, a full disk); its warnings above, in the job's output, "
            "say more"
        )
    spawned = [m for m in messages if m.startswith("--step-on") and SPAWNED_CHILD in m]
    if spawned and not any(counts):  # the first process defined it, its spawned workers ran it
        return f"{failed}{_short(spawned[0])}"
    if cfg.step_on and counts and not any(counts):  # wrapped, logged 0 at exit: never called
        never = f"no step was counted: {cfg.step_on} never returned in the job"
        why = (
            "it was wrapped when it loaded, and no call of it ran: a subclass's method that overrides it, or "
            "another function the script calls instead, is not it; nor is a call inside a torch.compile'd "
            "function (a model's forward under a compiled step): name the compiled function instead"
        )
        if exit_code:  # most likely it failed before its first step: its own error is the news (helper-131)
            return (
                f"{ended} and {never}: if it failed before training, its own error output says why; "
                f"else {why}"
            )
        return f"{never} ({why})"
    most = f"; the most steps a process counted: {max(counts)}" if counts else ""
    if exit_code:
        return f"{ended} before the schedule's first capture, which records from step {first} ({what}{most})"
    fits = ""
    if any(counts):  # the flags that would have captured: a newcomer's next run
        fits = f": {_flags_that_fit(schedule, max(counts))} records within the steps it counted"
    return (
        f"the job ended before the schedule's first capture, which records from step {first}; the "
        f"schedule needs {need} steps ({what}{most}){fits}"
    )


_RAN_AFTER_WAKE = re.compile(r"it ended (?P<s>\d+(?:\.\d+)?) s after$")


def _delay_that_fits(said: list[tuple[str, str]], cfg: ProfileConfig) -> str:
    """How long the job's processes ran after the window's clock started, and the --delay that would have
    opened it, from their exit lines (``said``: pid, message); the clock's start alone where none said. The
    process that counted steps goes first: a parent that waited in subprocess.run for the trainer ran
    longest, and a --delay under its time opened no window in the trainer."""
    from npuprof.agent.window_plan import WINDOW_DUE_AT_EXIT

    ran = {
        pid: float(m["s"])
        for pid, message in said
        if message.startswith(WINDOW_DUE_AT_EXIT) and (m := _RAN_AFTER_WAKE.search(message)) is not None
    }
    clock = f"the clock starts at {_clock_start(cfg)}"
    if not ran:
        return f" ({clock})"
    trained = _counted_steps(said)
    counted = [s for pid, s in ran.items() if pid in trained]
    if counted and len(counted) < len(ran):
        one = len(counted) == 1
        which = "the process that counted steps" if one else "the last of the processes that counted steps"
        ended = max(counted)
        said_of = f"{which} ended {ended:.1f} s after it"
    else:
        ended = max(ran.values())
        said_of = f"the process that ran longest ended {ended:.1f} s after it"
    if (cfg.delay or 0.0) < ended:
        # the window was due before the end and still did not open: it opens on the main thread, never inside
        # an import (the clock starts inside torch's), the timer asking again every 0.2 s (agent/frames.py's
        # PROFILER_UNSAFE; docs/architecture.md, "Time windows"): a shorter --delay would not help
        return (
            f" ({clock}; {said_of}, past the window's start, before the window could open: it opens on the "
            "main thread outside any import, and the clock starts inside torch's; a job this short is "
            "captured with --step-on MODULE:QUALNAME or the step schedule)"
        )
    return f" ({clock}; {said_of}: a --delay under that opens it)"


def _counted_steps(said: list[tuple[str, str]]) -> set[str]:
    """The pids that counted a step: their optimizer's or --step-on function's first, or a count at exit."""
    return {
        pid
        for pid, message in said
        if message.startswith((OPTIMIZER_COUNTED, STEPS_COUNTED_AT))
        or (message.startswith(STEPS_AT_EXIT) and _digits(n := message[len(STEPS_AT_EXIT) :]) and int(n) > 0)
    }


def _clock_start(cfg: ProfileConfig) -> str:
    """Where a time window's clock starts: as npuprof's agent wakes, at `import torch` or, with --step-on,
    where its function is defined or its module imported when that comes first (README, "Time windows")."""
    if not cfg.step_on:
        return "`import torch`"
    module, _, qualname = cfg.step_on.partition(":")
    first = (
        f"the script's definition of {qualname.split('.')[0]}"
        if module == "__main__"
        else f"the import of {module}"
    )
    return f"`import torch`, or at {first} when that comes first"


def _flags_that_fit(schedule: Schedule, steps: int) -> str:
    """The schedule flags whose first capture lies within ``steps`` counted steps (at least 1): a later
    start, or, where one cycle is longer than that, no wait and a shorter warm-up and recording (steps
    0..steps-1 are whole by then: their boundaries came)."""
    wanted = {"skip_first": steps - schedule.wait - schedule.warmup - schedule.active}
    if wanted["skip_first"] < 0:
        warmup = min(schedule.warmup, steps - 1)
        active = min(schedule.active, steps - warmup)
        wanted = {"skip_first": steps - warmup - active, "wait": 0, "warmup": warmup, "active": active}
    changed = {name: value for name, value in wanted.items() if getattr(schedule, name) != value}
    return " ".join(f"--{name.replace('_', '-')} {value}" for name, value in changed.items())


OPTIMIZER_COUNTED = "steps are counted on the optimizer "  # logged by npuprof.agent.steps
CAPTURE_SKIPPED = "capture at step "  # "capture at step N skipped: why", logged by npuprof.agent.controller
# logged by npuprof.agent.controller.steps_missed: steps of a window passed uncounted (a take-over)
WINDOW_UNCOUNTED = "capture window not recorded: "
TRACE_NOT_WRITTEN = "the trace of "  # "the trace of steps 6-8 was not written: why", npuprof.agent.capture


def _agent_lines(lines: list[str], others: set[str]) -> list[tuple[str, str, str]]:
    """(pid, level, message) of each line of this run's agents in ``lines`` (``others``: other runs')."""
    found = (_AGENT_LINE.search(line) for line in lines)
    return [(m["pid"], m["level"], m["message"]) for m in found if m is not None and m["pid"] not in others]


def _windows_skipped(agents: list[tuple[str, str, str]]) -> tuple[int, str, bool]:
    """The capture windows this run's processes skipped, the last reason logged ("" if none), and whether
    the count is exact: each process's count at its exit, or, for one that logged none (a child of
    ``os.fork`` ends by ``os._exit``: helper-108; a disk full until the job's end: helper-117), its "capture
    at step N skipped" lines, which a full disk may have lost too: then at least that many."""
    at_exit: dict[str, int] = {}
    seen: dict[str, int] = {}
    last = ""
    for pid, _level, message in agents:
        if message.startswith(WINDOWS_SKIPPED_AT_EXIT) and _digits(message[len(WINDOWS_SKIPPED_AT_EXIT) :]):
            at_exit[pid] = int(message[len(WINDOWS_SKIPPED_AT_EXIT) :])
        elif message.startswith(CAPTURE_SKIPPED) and " skipped: " in message:
            seen[pid] = seen.get(pid, 0) + 1
            last = message.split(" skipped: ", 1)[1]
    uncounted = [n for pid, n in seen.items() if pid not in at_exit]
    return sum(at_exit.values()) + sum(uncounted), last, not uncounted


CONTROL_FAILED = "capture control failed at step "  # logged by npuprof.agent.controller, an ERROR


def _ranks_short_of_captures(
    agents: list[tuple[str, str, str]],
    captures: list[CaptureSummary],
    cfg: ProfileConfig,
    running: Collection[str] = (),
) -> list[str]:
    """The lines on the ranks of the job that made fewer captures than the schedule asks (``repeat``; one
    at least where it is 0), with the steps their processes counted and the step their next capture records
    from (helper-129: a torchrun rank that never reached a step was left unsaid: the summary listed the other
    rank's capture alone, as if the job had one; a rank that ended in its second warm-up under --repeat 2
    silently had one capture). A rank is counted in each of torchrun's attempts apart (its captures of
    attempt 0 and 1 made 2 of --repeat 2), a process without a rank on its own when it stepped or
    captured; one whose agent woke before its rank was known (mp.spawn, no RANK) goes by its captures'
    rank. The ranks in the same state share a line (a job of hundreds of ranks had a line each). Not for
    --dynamic or a time window (their captures come from a request or the clock), nor a rank --ranks
    leaves out, nor one whose process still runs (``running``: pids; the summary says they may record
    yet)."""
    if cfg.dynamic or cfg.timed or cfg.schedule.off:
        return []
    ranks = _ranks_learnt_from_captures(_ranks_of_agents(agents), captures)
    attempts = _attempts_of_agents(agents)
    for c in captures:  # a line lost from the log: the capture's record knows its attempt too
        if c.pid is not None and c.restart_count is not None:
            attempts.setdefault(str(c.pid), c.restart_count)
    counts: dict[str, int] = {}
    uncountable: dict[str, str] = {}  # pid -> why it had nothing to count steps on
    for pid, _level, message in agents:
        if message.startswith(STEPS_AT_EXIT) and _digits(message[len(STEPS_AT_EXIT) :]):
            counts[pid] = int(message[len(STEPS_AT_EXIT) :])
        elif message.startswith(NOTHING_COUNTED_AT_EXIT):
            uncountable[pid] = message[len(NOTHING_COUNTED_AT_EXIT) :]
    # torchrun restarts a node's workers with its count unchanged when another node's fail: a rank then
    # has a process of each round under one count, each counted on its own
    processes: dict[tuple[str, int], set[str]] = {}
    for pid, rank in ranks.items():
        if rank != "None" and (attempt := attempts.get(pid)) is not None:
            processes.setdefault((rank, attempt), set()).add(pid)
    again = {key: len(pids) for key, pids in processes.items() if len(pids) > 1}
    made = Counter(_maker_of_capture(c, again) for c in captures)
    wanted = None if cfg.ranks is None else {str(rank) for rank in cfg.ranks}
    makers: dict[_Maker, list[str]] = {}
    for pid, rank in ranks.items():
        attempt = attempts.get(pid)
        split = pid if attempt is not None and (rank, attempt) in again else None
        makers.setdefault(_Maker(rank, attempt, pid if rank == "None" else None, split), []).append(pid)
    groups: dict[tuple[_Shortfall, str | None], list[tuple[_Maker, list[str], list[int]]]] = {}
    asked = max(cfg.schedule.repeat, 1)
    # in rank order: a line comes where its first rank does
    for maker, pids in sorted(makers.items(), key=lambda item: _place(item[0])):
        if (wanted is not None and maker.rank not in wanted) or made[maker] >= asked:
            continue
        if any(pid in running for pid in pids):  # helper-131: said "it ended ...", then it recorded
            continue
        known = [counts[pid] for pid in pids if pid in counts]
        if (maker.pid is not None or maker.process is not None) and not made[maker] and not any(known):
            continue  # no step: not a process that trains (an evaluation's, a spawned worker's)
        idle = "" if known else next((uncountable[pid] for pid in pids if pid in uncountable), "")
        state = _Shortfall(maker.attempt, made[maker], maker.pid is not None, bool(known), idle)
        groups.setdefault((state, maker.process), []).append((maker, pids, [max(known)] if known else []))
    restarted = any(attempt for attempt in attempts.values()) or bool(again)
    return [
        _shortfall_said(
            state, members, cfg, restarted, again.get((members[0][0].rank, state.attempt or 0), 0)
        )
        if process is not None
        else _shortfall_said(state, members, cfg, restarted)
        for (state, process), members in groups.items()
    ]


@dataclass(frozen=True)
class _Maker:
    """Who a capture is counted for: a rank in one of torchrun's attempts, or a process without a rank."""

    rank: str  # "None": no rank
    attempt: int | None  # TORCHELASTIC_RESTART_COUNT; None: not under torchrun
    pid: str | None  # only for a process without a rank
    # the pid of a rank's process where the rank had several of one count (its node's count kept by a restart)
    process: str | None = None


@dataclass(frozen=True)
class _Shortfall:
    """What the makers said in one line share."""

    attempt: int | None
    made: int
    rankless: bool
    counted: bool  # they logged the steps they counted
    idle: str  # else, why they had nothing to count ("": they ended without a word)


def _maker_of_capture(capture: CaptureSummary, again: Collection[tuple[str, int]] = ()) -> _Maker:
    rank = str(capture.rank)
    pid = str(capture.pid) if rank == "None" else None
    split = (rank, capture.restart_count) in again if capture.restart_count is not None else False
    return _Maker(rank, capture.restart_count, pid, str(capture.pid) if split else None)


def _place(maker: _Maker) -> tuple[bool, int, int, int]:
    """The ranks by attempt, each attempt's in their order, then the processes without one."""
    rank = int(maker.rank) if _digits(maker.rank) else -1
    return (maker.pid is not None, -1 if maker.attempt is None else maker.attempt, rank, int(maker.pid or 0))


def _attempts_of_agents(agents: list[tuple[str, str, str]]) -> dict[str, int]:
    """pid -> the attempt of torchrun's its agent said it was ready in (TORCHELASTIC_RESTART_COUNT)."""
    attempts: dict[str, int] = {}
    for pid, _level, message in agents:
        if (ready := _READY.match(message)) and ready["attempt"] is not None:
            attempts[pid] = int(ready["attempt"])
    return attempts


def _shortfall_said(
    state: _Shortfall,
    members: list[tuple[_Maker, list[str], list[int]]],
    cfg: ProfileConfig,
    restarted: bool,
    of_count: int = 0,
) -> str:
    """One line of ``_ranks_short_of_captures``: a rank's, or the ranks' in the same state; ``of_count``:
    the rank's processes of that attempt, where torchrun restarted it with its node's count unchanged."""
    from npuprof.analysis.report import _spans_shown

    schedule = cfg.schedule
    asked = max(schedule.repeat, 1)
    cycle = schedule.wait + schedule.warmup + schedule.active
    # torch.profiler.schedule's cycles: capture k (from 0) records from this step
    start = schedule.skip_first + state.made * cycle + schedule.wait + schedule.warmup
    one = len(members) == 1
    pids = [pid for _maker, its, _known in members for pid in its]
    shown_pids = ", ".join(pids[:8]) + (", ..." if len(pids) > 8 else "")
    if state.rankless:
        who = f"process {shown_pids} (no rank)" if one else f"processes {shown_pids} (no rank)"
        pids_said = ""
    else:
        numbers = sorted(int(m.rank) for m, _pids, _known in members if _digits(m.rank))
        many = f"ranks {_spans_shown(numbers)} ({len(numbers)} of them)"
        who = f"rank {members[0][0].rank}" if one else many
        pids_said = f" (pid {shown_pids})" if one else f" (pids {shown_pids})"
    if restarted and state.attempt is not None:
        who += f" in attempt {state.attempt}"
        if of_count:
            who += (
                f" (one of its {of_count} processes of that count: torchrun counts each node's restarts, and "
                "restarts a node's workers with its count unchanged when another node's fail)"
            )
    known = [n for _maker, _pids, counted in members for n in counted]
    if state.counted:
        low, high = min(known), max(known)
        steps = str(low) if low == high else f"{low} to {high}"
        counted = f"it counted {steps} step(s)" if one else f"each counted {steps} step(s)"
    elif state.idle:  # helper-153: a rank that only logs ended normally, and was said to be killed
        counted = f"{state.idle}, so it counted no step"
        counted = counted if one else f"each: {counted}"
    else:
        ended = "it" if one else "each"
        counted = f"{ended} ended without logging the steps it counted (by os._exit, or killed)"
    its = "its" if one else "their"
    if state.made:
        return (
            f"{who} made {state.made} of the {asked} captures the schedule asks (--repeat "
            f"{schedule.repeat}): {counted}; {its} capture {state.made + 1} records from step {start}"
            f"{pids_said}"
        )
    return f"{who} recorded nothing: {counted}; the schedule records from step {start}{pids_said}"


def _ranks_learnt_from_captures(ranks: dict[str, str], captures: list[CaptureSummary]) -> dict[str, str]:
    """``ranks`` (pid -> rank), a process's "None" replaced by the rank its captures' records name: its
    agent woke before torch.distributed gave it one (torch.multiprocessing.spawn, no RANK in the
    environment), and it was taken for a process without a rank that recorded nothing."""
    learnt = {str(c.pid): str(c.rank) for c in captures if c.rank is not None and c.pid is not None}
    return {pid: learnt.get(pid, rank) if rank == "None" else rank for pid, rank in ranks.items()}


def _ranks_of_agents(agents: list[tuple[str, str, str]]) -> dict[str, str]:
    """pid -> the rank its agent said it was ready in ("None": no rank), less the processes that start a
    node's workers (their rank is their node's, SLURM_PROCID under srun, not one that records)."""
    ranks: dict[str, str] = {}
    starters: set[str] = set()
    for pid, _level, message in agents:
        if ready := _READY.match(message):
            ranks[pid] = _rank_of(ready)
        elif message.startswith(STARTS_WORKERS_AT_EXIT):
            starters.add(pid)
    return {pid: rank for pid, rank in ranks.items() if pid not in starters}


def _ranks_left_out(agents: list[tuple[str, str, str]], cfg: ProfileConfig) -> str:
    """The line naming the ranks whose processes ran but that --ranks did not select (they only counted
    steps: no capture of theirs is listed, and no other line says why); "" when there are none. Worded as
    `npuprof analyse` words it (npuprof.analysis.report.ranks_not_here)."""
    if cfg.ranks is None:
        return ""
    seen = {int(rank) for rank in _ranks_of_agents(agents).values() if _digits(rank)}
    for _pid, _level, message in agents:
        if (unselected := _NOT_SELECTED.match(message)) and _digits(rank := _unselected_rank(unselected)):
            seen.add(int(rank))
    left_out = sorted(seen - set(cfg.ranks))
    if not left_out:
        return ""
    from npuprof.analysis.report import _spans_shown

    return (
        f"rank(s) {_spans_shown(left_out)} ({len(left_out)} of them) were not captured: this run was started "
        f"with --ranks {_spans_shown(sorted(cfg.ranks))}"
    )


def _profiling_stopped(agents: list[tuple[str, str, str]]) -> list[str]:
    """One line for each process of this run whose agent stopped profiling after an internal error: its
    rank and its first error's first line (a process that logged two, a decision re-entered from a signal
    handler's step, was counted as two processes)."""
    ranks: dict[str, str] = {}
    stopped: dict[str, str] = {}
    for pid, level, message in agents:
        if ready := _READY.match(message):
            ranks[pid] = _rank_of(ready)
        elif level == "ERROR" and message.startswith(CONTROL_FAILED) and pid not in stopped:
            rank = ranks.get(pid, "None")
            who = f"pid {pid}" if rank == "None" else f"rank {rank}"
            stopped[pid] = f"{who}: {_short(message)}"
    return list(stopped.values())


def _why_not_finalised(capture: CaptureSummary, agents: list[tuple[str, str, str]]) -> str:
    """What its agent logged of a capture whose record was left "capturing" (the record could not be
    written either: no descriptor left, a full disk), or the record's own guess."""
    where = str(capture.rank_dir)
    for _pid, _level, message in agents:
        if message.startswith(TRACE_NOT_WRITTEN) and " was not written: " in message and where in message:
            return f"its record could not be finalised: {message}"  # the process may have trained on
    if _handler_still_asked_of_the_main_thread(capture, agents):
        return (
            f"{layout.NOT_FINALISED}: it recorded on a thread other than the main one, and the main thread, "
            "outside Python since it began (in C code, a sleep), had not installed npuprof's SIGTERM handler "
            "(only it may), so a SIGTERM ended the process at once"
        )
    from npuprof.agent.signals import LOST_WHILE_BLOCKED

    if any(pid == str(capture.pid) and message.startswith(LOST_WHILE_BLOCKED) for pid, _, message in agents):
        # the agent said why (a rank waiting in a collective on a peer the SIGTERM did not reach): the
        # summary said only "ended before the capture was finalised" (helper-342)
        return (
            f"{layout.NOT_FINALISED}: a SIGTERM came while its main thread was blocked outside Python (in a "
            "collective, C code) through the handler's grace, so it died of it as without npuprof (a rank "
            "whose peers get the same SIGTERM, from torchrun or the scheduler, finalises its capture)"
        )
    return layout.NOT_FINALISED


def _handler_still_asked_of_the_main_thread(
    capture: CaptureSummary, agents: list[tuple[str, str, str]]
) -> bool:
    """Whether the capture's process last logged that its capture asked the main thread for a SIGTERM
    handler, and not that the main thread installed it or left it out (agent/signals.py)."""
    from npuprof.agent.signals import HANDLER_ASKED, HANDLER_INSTALLED_THERE, HANDLER_LEFT_OUT_THERE

    asked = False
    for pid, _level, message in agents:
        if pid != str(capture.pid):
            continue
        if message.startswith(HANDLER_ASKED):
            asked = True
        elif message.startswith((HANDLER_INSTALLED_THERE, HANDLER_LEFT_OUT_THERE)):
            asked = False  # the main thread acted on it
    return asked


# what an agent logs as its process ends normally (npuprof/agent/entry.py): one of these, always
_AT_EXIT = (STEPS_AT_EXIT, NOTHING_COUNTED_AT_EXIT, STARTS_WORKERS_AT_EXIT)


def _ended_unsaid(pids: list[str]) -> str:
    """The processes whose agent woke and that logged nothing at their end (npuprof/agent/entry.py logs a
    line there, always): they were killed, or left by os._exit or os.exec*. A process killed before its
    first step read as "no optimizer's step() ran in the job", and advice on counting steps."""
    shown = ", ".join(pids[:8]) + (", ..." if len(pids) > 8 else "")
    which = "a process of the job (pid" if len(pids) == 1 else f"{len(pids)} processes of the job (pids"
    return (
        f"{which} {shown}) never reached its exit, so the steps it counted are not known: it was killed "
        "by a signal (kill -9, the out-of-memory killer, SIGTERM: whatever started it names the signal) "
        "or left by os._exit or os.exec*, before any capture began in it"
    )


def _exit_counts(messages: list[str], prefix: str) -> list[int]:
    """The counts the agents logged at exit after ``prefix``, one per process."""
    counts = [m.removeprefix(prefix) for m in messages if m.startswith(prefix)]
    return [int(c) for c in counts if _digits(c)]


def _digits(text: str) -> bool:
    """Whether ``text`` is a count as the agents log it: ASCII digits (``"²".isdigit()`` is True, and
    ``int`` refuses it: a log line so damaged cost the run its summary)."""
    return text.isascii() and text.isdigit()


STEPS_COUNTED_AT = "steps counted at each return of "  # logged by npuprof.agent.steps.wrap_step_function
# logged by npuprof.agent.controller.foreign_boundary: the job stepped on a thread that does not drive
FOREIGN_STEPS = ("step boundaries from thread ", "npuprof's profiler started on the thread that created")
TOOK_OVER = " takes over counting the steps: "  # logged by npuprof.agent.controller._take_over
# what the run's last line adds to FOREIGN_STEPS's "step boundaries from thread X are ignored": how the
# steps move to the thread that trains (docs/architecture.md, "Step boundaries")
_MOVE_THE_STEPS = (
    ": they move to a thread only while the thread that drives waits for it (join() it, a future's result(), "
    "an event or queue that thread sets after its loop); or take no step before training moves there"
)
# logged by npuprof.agent.controller._say_unread_wait: the driver's wait for the thread, not read, and its fix
UNREAD_WAIT = "'s steps are not counted: thread "
# logged by npuprof.agent.controller._say_capture_held_by_a_waiting_driver
HELD_BY_A_WAITING_DRIVER = ", which has npuprof's profiler open (at its step "
STEP_ON_REFUSED = "; no steps counted"  # ends the line npuprof.agent.steps logs for a target it cannot wrap


def _signal_of(exit_code: int) -> str:
    """The signal's name when ``exit_code`` says the job died of one (128 + N, as a shell reports it)."""
    number = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code < 128 + 65 else 0
    return (known_signal_name(number) or "") if number else ""


def _how_the_job_ended(exit_code: int, died_of: int | None = None) -> str:
    """The job's process died of a signal (``died_of``), or exited with a code; one of 128 + N is how a
    shell (a wrapper script) reports a process of its own that signal N ended, or a script's own choice
    (``sys.exit(130)``): said as such, not as a death of the job."""
    if died_of:
        return f"the job was ended by {signal_name(died_of)} (exit code {exit_code})"
    killed = _signal_of(exit_code)
    if killed:
        return f"the job failed (exit code {exit_code}: 128 + {killed}, as a shell reports a process it ends)"
    return f"the job failed (exit code {exit_code})"


def _what_wakes_the_agent(cfg: ProfileConfig) -> str:
    """What a process of the job does that starts npuprof's agent in it, as "no process of the job ..."
    ends."""
    if not cfg.step_on:
        return "imported torch.optim (one step is one optimizer.step())"
    module, _, qualname = cfg.step_on.partition(":")
    if module == "__main__":
        return f"defined {qualname.split('.')[0]} in its __main__ (--step-on {cfg.step_on})"
    return f"imported {module}, the module of --step-on {cfg.step_on}"


def _unreached_hint(cfg: ProfileConfig) -> str:
    """Where such a process may have been all the same (helper-125), as a clause."""
    runner = (
        "; and a script run by a runner - runpy, a debugger, pdb, cProfile, exec, multiprocessing's spawn - "
        "defines its functions outside __main__: name a function of a module it imports"
        if (cfg.step_on or "").startswith("__main__:")
        else ""
    )
    return (
        " (npuprof reaches the processes that inherit its environment: a child started with an environment "
        f"or PYTHONPATH of its own is not reached, nor a Python run with -E, -I or -S{runner})"
    )


def _run_as_its_script(cfg: ProfileConfig, lines: list[str]) -> str:
    """A module the job runs as its script (``python -m pkg.train``, or ``python pkg/train.py``, whose file
    it is, or named by that file: ``--step-on train.py:step``) is ``__main__``, never imported: the
    --step-on that names it, as a clause."""
    module, _, qualname = (cfg.step_on or "").partition(":")
    commands = [started["command"] for line in lines if (started := _RUN_STARTS.search(line))]
    if not qualname:
        return ""
    main = f"where it is __main__: --step-on __main__:{qualname}"
    path = module.replace(".", "/") + ".py"
    # the script as the launcher reads the command (npuprof/job_script.py), not any word of it: `python
    # run.py --file pkg/train.py` runs run.py
    scripts = [job_script(_shell_words(command)) for command in commands]
    for script in (s for s in scripts if s is not None and s.sure):
        if script.module is not None and runs_module_as_main(script.module, module):  # (or pkg's __main__)
            how = "-m" if script.module == module else f"-m {script.module}"
            return f"; the job runs {module} as its script ({how}), {main}"
        word = script.path or ""
        if word == path or word.endswith(f"/{path}"):
            return f"; the job runs {word}, the file of {module}, as its script, {main}"
        if module.endswith(".py") and (word == module or word.endswith(f"/{module}")):
            return f"; --step-on names a file, the one the job runs as its script ({word}), {main}"
    return ""


def _the_scripts_step_functions(lines: list[str]) -> str:
    """The functions of the script the run's command runs (its first start line), as a clause naming the
    --step-on that counts one of them (npuprof/script_functions.py); "" where the script is not known."""
    from npuprof.script_functions import defined_functions, script_file, step_on_advice

    command = next((started["command"] for line in lines if (started := _RUN_STARTS.search(line))), None)
    script = job_script(_shell_words(command)) if command is not None else None
    if script is None or not script.sure:
        return ""
    path = script_file(script, os.getcwd())
    return step_on_advice(defined_functions(path)) if path is not None else ""


def _shell_words(command: str) -> list[str]:
    """The words of a logged command (quoted by runner.command_line); split at blanks where it is not
    shell syntax (a $'...' word, an older npuprof's unquoted line)."""
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


_RUN_STARTS = re.compile(_RECORD_HEAD + r"\[launcher pid=\d+(?: run=\w+)?\] run \S+ starts: (?P<command>.*)$")


def _held_in_short(message: str) -> str:
    """The warning of a capture held by a driver that waits for the stepping thread
    (``HELD_BY_A_WAITING_DRIVER``), said again as the run's last line: who waited for whom, and what avoids
    it (its last parenthesis); the whole line where it has not that form."""
    who, _, why = message.partition(": torch's profiler belongs")
    fix = why[why.rfind(" (") + 2 : -1] if why.endswith(")") and " (" in why else ""
    if not fix:
        return _short(message)
    handed = "torch's profiler cannot be handed over, so none of those steps was recorded"
    return _short(f"{who}; {handed}: {fix}")


_KEPT_OUT_AT = re.compile(rf"^no capture at step (\d+){re.escape(OWN_PROFILER_KEPT_OUT)}$")


def _own_profiler_stopped_before_the_end(messages: list[str]) -> str:
    """What to add to "npuprof steps aside" when the script's own profiler kept capture windows from
    opening and stopped after the last of them, the schedule holding no window after its stop: "" when
    it ran on (the warning says all)."""
    matches = enumerate(map(_KEPT_OUT_AT.match, messages))
    kept_out = [(index, int(match[1])) for index, match in matches if match]
    if not kept_out or OWN_PROFILER_STOPPED not in messages[kept_out[-1][0] :]:
        return ""
    steps = [step for _index, step in kept_out]
    at = f"step {steps[0]}" if len(steps) == 1 else f"steps {', '.join(map(str, steps))}"
    return (
        f"; it ran at {at}, where a capture was to begin, and stopped later, no capture window of the "
        "schedule coming after: a --skip-first past the steps it profiles records after it"
    )


def _short(message: str, limit: int = 400) -> str:
    line = message.strip().splitlines()[0] if message.strip() else message
    return line if len(line) <= limit else line[: limit - 3] + "..."


def shell_quote(text: str, escaped: str = "") -> str:
    """``text`` quoted for a POSIX shell; a path with bytes that are not UTF-8 (surrogateescape) or not
    printable, or holding a character of ``escaped``, as bash's ``$'...'`` with ``\\xNN`` escapes, so that it
    can be pasted back exactly."""
    if text.isprintable() and not any(char in text for char in escaped):
        try:
            text.encode("utf-8")
            return shlex.quote(text)
        except UnicodeEncodeError:
            pass
    try:
        data = os.fsencode(text)
    except UnicodeEncodeError:  # a surrogate that no byte gave
        data = text.encode("utf-8", "backslashreplace")
    out = []
    for byte in data:
        char = chr(byte)
        if 0x20 <= byte < 0x7F and char not in "\\'" and char not in escaped:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "$'" + "".join(out) + "'"


def _note(text: str) -> None:
    """The one-paragraph note of a run without captures, as rich would print it (bold yellow
    "npuprof:" on a colour terminal, wrapped to its width) without rich's ~40 ms import."""
    stream = sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    width = line_width.NO_WRAP_WIDTH if line_width.unwrapped(tty) else 80
    if (columns := line_width.columns()) is not None:
        width = columns
    elif tty:
        import shutil

        width = shutil.get_terminal_size((80, 24)).columns
    lines = _wrap("npuprof: " + text, max(width, 20))
    color = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    if color and lines:
        lines[0] = "\x1b[1;33mnpuprof:\x1b[0m" + lines[0][len("npuprof:") :]
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def _wrap(text: str, width: int) -> list[str]:
    """Greedy word wrap (textwrap's import alone costs ~5 ms)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def unread_request(directory: Path) -> str:
    """When ``directory/profiler_config.json`` asks for a capture no process read before the job ended
    (npuprof.agent.dynamic_log.unread_request): that, in words; else "". A trigger sent a moment before
    the job ended is otherwise reported as never asked."""
    from npuprof.agent import dynamic_log

    unread = dynamic_log.unread_request(directory)
    if unread is None:
        return ""
    which = f" (trigger {unread.trigger_id})" if unread.trigger_id else ""
    when = time.strftime("%H:%M:%S", time.localtime(unread.changed))
    return (
        f"a capture was asked in {unread.path} at {when}{which}, but the job ended before any of its "
        "processes read the file (it is read at each poll: --poll-interval)"
    )


def before_start(directory: Path) -> str:
    """When the request in ``directory/profiler_config.json`` was there before the job started (and so is
    no request for it: npuprof.agent.dynamic_log.request_before_start): that, in words; else ""."""
    from npuprof.agent import dynamic_log

    found = dynamic_log.request_before_start(directory)
    if found is None:
        return ""
    when = time.strftime("%H:%M:%S", time.localtime(found.changed))
    return (
        f"the capture asked in {found.path} at {when} (trigger {found.trigger_id}) was there before the "
        "job started, and a job takes the file it starts with as no request: run npuprof trigger once the "
        "job runs"
    )


NOT_REACHED = "a capture of steps "


def planned_not_reached(directory: Path, pids: Collection[int] | None = None) -> str:
    """What became of the last capture a process's log in ``directory/log`` planned, when none began: the
    job ended before its first step, or it was cancelled (``npuprof trigger --cancel``); or the last
    request was for other ranks (``npuprof trigger DIR --ranks 1`` on a job of one process, which counts as
    rank 0: "no capture was asked" was said of it); in words, else "". ``pids``: only the logs of these
    processes."""
    from npuprof.agent.dynamic_log import (
        ENDED_RE,
        FILE_NAME,
        NOT_EFFECTIVE,
        NOT_SELECTED_RE,
        REPLACED,
        SKIPPED_RE,
    )

    found = unselected = ""
    for log in sorted((directory / "log").glob("dp_*.log")):
        named = FILE_NAME.match(log.name)
        if pids is not None and (named is None or int(named["pid"]) not in pids):
            continue
        planned, cancelled, missed, elsewhere, last_step = "", "", "", "", None
        for fields in _dynamic_log_fields(log):
            if fields["step"] is not None:
                last_step = int(fields["step"])
            message = fields["message"]
            if message.startswith("capture planned: steps "):
                planned = message.removeprefix("capture planned: steps ").split(" ", 1)[0]
                cancelled = missed = elsewhere = ""
            elif message.startswith("capture started") or ENDED_RE.match(message):
                planned = cancelled = missed = elsewhere = ""
            elif NOT_SELECTED_RE.match(message):
                elsewhere = message
            elif message.startswith("the capture planned from step") and " is cancelled" in message:
                planned, cancelled = "", message
            elif fields["level"] == "WARNING" and (
                message.endswith(NOT_EFFECTIVE) or SKIPPED_RE.match(message)
            ):  # a request too late (its start_step passed), never begun, or a capture skipped
                planned, missed = "", message
        if planned and (last_step is None or int(planned.split("-")[0]) > last_step):
            at = f" at step {last_step}" if last_step is not None else ""
            found = f"{NOT_REACHED}{planned} was planned, but the job ended{at}, before its first step"
        elif cancelled:  # by npuprof trigger --cancel, or by a later request (npuprof.agent.dynamic_plan)
            found = cancelled if REPLACED in cancelled else f"{cancelled} (npuprof trigger --cancel)"
        elif missed:
            found = f"the request was not acted on: {missed}"
        elif elsewhere:  # said only where no process has a reason of its own (its rank was selected)
            unselected = unselected or f"the request selects none of the job's processes: {elsewhere}"
    return found or unselected


def _dynamic_log_fields(log: Path) -> list[dict[str, Any]]:
    """The parsed lines of one of --dynamic's action logs (npuprof/agent/dynamic_log.py), read without
    following a link, at most LOG_READ_LIMIT bytes; [] when it cannot be read."""
    from npuprof.agent.dynamic_log import parse_line
    from npuprof.results.layout import read_small
    from npuprof.results.logfile import log_records

    try:
        text = read_small(log, LOG_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return []
    return [fields for line in log_records(text) if (fields := parse_line(line)) is not None]
