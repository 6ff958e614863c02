"""Render an `npuprof analyse` report (npuprof.analysis.report_schema.Report) as rich tables, JSON or CSV."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.report_schema import (
    RankReport,
    Report,
    ReportStep,
    Slowest,
    StartSkew,
    Straggler,
    json_value,
)
from npuprof.analysis.step_fields import OPTIONAL_ORDER, STEP_TIME_FIELDS
from npuprof.invocation import npuprof_cmd
from npuprof.reports.text import printable, shorten_middle, shorten_range_name
from npuprof.results import layout
from npuprof.results.rounds import latest_said

T = TypeVar("T")
STEP_KEYS = (*STEP_TIME_FIELDS, *OPTIONAL_ORDER)
# the step table's columns, as _step_row gives their cells
STEP_COLUMNS = ("step", "ms", "comp", "comm", "exposed", "overlap", "free", "data", "prep ms", "mem MiB")
MIN_NAME_WIDTH = 16
MAX_STEP_ROWS = 30  # a step table longer than this shows only
SHOWN_WHEN_MANY = 10  # the steps that matter most, plus a row over all of them
# the profiler's start is named under the step table from this many ms (a later start takes about 1 ms: no
# news beside a step; the first one tens of ms, seconds in a process with no optimizer: README, "Comparing
# with your own timer"); the JSON has it whatever it took
START_SAID_FROM_MS = 5.0
# the data-loading hint is said above this share of the whole steps' time (docs/formats.md, "Step breakdown")
DATA_HINT_SHARE = 0.2
WEIGHT_WORDS = {"duration_us": "step time", "spread_us": "spread across ranks"}
CAPTION_TAIL = {"duration_us": ", then all whole steps (mean ms)", "spread_us": ""}


def _needed(console: Console, table: Table) -> int:
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=1 << 16), table).maximum


def _plain(table: Table) -> None:
    table.box, table.pad_edge, table.header_style = None, False, "bold"


def print_whole(console: Console, table: Table, plain: bool = False) -> None:
    """Print ``table`` with every figure whole: rich would cut cells to fit the terminal (or 80 columns
    when the output is a file), "1754.646" shown as "1754.6…". A table too wide loses its rules first
    (``plain``: it loses them anyway, as its neighbours did); one still too wide is printed at the width
    it needs (the terminal then wraps its lines)."""
    if plain or _needed(console, table) > console.width:
        _plain(table)
    width = _needed(console, table)
    if width <= console.width:
        console.print(table)
        return
    saved = console.width
    console.width = width  # print(width=) takes no more than the console's own
    try:
        console.print(table)
    finally:
        console.width = saved


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"


def _pct(part: float, whole: float) -> str:
    return f"{part / whole * 100:.1f}%" if whole else "-"


def _shown(rows: list[T], weights: Sequence[float], weight: str) -> tuple[list[T], str | None]:
    """All rows when they are few; else the SHOWN_WHEN_MANY with the largest ``weights``, in their order,
    and a caption saying so (a table of thousands of steps takes seconds to draw and nobody reads it)."""
    if len(rows) <= MAX_STEP_ROWS:
        return rows, None
    keep = set(sorted(range(len(rows)), key=lambda i: -weights[i])[:SHOWN_WHEN_MANY])
    caption = (
        f"the {SHOWN_WHEN_MANY} of {len(rows)} steps with the largest {WEIGHT_WORDS[weight]}"
        f"{CAPTION_TAIL[weight]}; --steps A-B picks steps, --format csv lists every one"
    )
    return [row for i, row in enumerate(rows) if i in keep], caption


def _peak(s: ReportStep) -> float | None:
    return None if s.memory_peak_mb is msgspec.UNSET else s.memory_peak_mb


def _step_row(label: str, times: dict[str, float | None], peak: float | None) -> list[str]:
    d = times["duration_us"]
    data = times["data_us"]
    return [
        label,
        _ms(d),
        _pct(times["computing_us"], d),
        _pct(times["communication_us"], d),
        _pct(times["comm_not_overlapped_us"], d),
        _pct(times["overlapped_us"], d),
        _pct(times["free_us"], d),
        "-" if data is None else _pct(data, d),
        _ms(times["preparing_us"]),
        "-" if peak is None else f"{peak:.1f}",
    ]


def _times(s: ReportStep) -> dict[str, float | None]:
    """The step's times by key; None for one not known (OPTIONAL_ORDER's: no DataLoader fetch seen)."""
    return {k: None if (v := getattr(s, k)) is msgspec.UNSET else v for k in STEP_KEYS}


def _total(steps: list[ReportStep]) -> dict[str, float | None]:
    """The steps' summed times (None for a time some step does not know), and their mean preparation."""
    times = [_times(s) for s in steps]
    values = {k: [t[k] for t in times] for k in STEP_KEYS}
    total = {k: None if None in v else sum(v) for k, v in values.items() if k != "preparing_us"}
    prepared = [p for p in values["preparing_us"] if p is not None]  # unknown where nothing ran
    total["preparing_us"] = statistics.fmean(prepared) if prepared else None  # a mean, not a sum
    return total  # type: ignore[return-value]


def _all_steps_row(steps: list[ReportStep]) -> list[str]:
    """Every whole step at once (a partial step is left out, as from the mean step time): the mean step
    time, each part's share of the summed time, the mean preparation and the highest memory peak."""
    steps = _whole(steps)
    total = _total(steps)
    peaks = [p for s in steps if (p := _peak(s)) is not None]
    row = _step_row("all", total, max(peaks, default=None))
    row[1] = _ms(total["duration_us"] / len(steps))  # type: ignore[operator]
    return row


def _whole(steps: list[ReportStep]) -> list[ReportStep]:
    """The steps less the partial ones (all of them when every one is partial)."""
    return [s for s in steps if s.partial is not True] or steps


def _sections(report: Report) -> list[RankReport]:
    """The ranks' sections in order: a process with many captures once, pooled (Report.pooled), where its
    first capture would be."""
    pooled_in = {d: p for p in report.pooled or [] for d in p.captures or []}
    sections: list[RankReport] = []
    for r in report.ranks:
        section = pooled_in.get(r.rank_dir, r)
        if not any(s is section for s in sections):
            sections.append(section)
    return sections


def _restarted(report: Report) -> bool:
    """Whether torchrun restarted the job of these captures: some capture is of an attempt after the first."""
    return any(isinstance(r.restart_count, int) and r.restart_count > 0 for r in report.ranks)


def _title(r: RankReport, restarted: bool = True) -> str:
    rank = r.rank if r.rank is not None else "-"
    if r.captures is msgspec.UNSET:
        # torchrun's attempt, where the record says it: a restarted job's ranks have a capture of each. Only
        # then: every torchrun job's title said "attempt 0", unlike the README's example (helper-205)
        named = restarted and r.restart_count is not msgspec.UNSET
        attempt = f"attempt {r.restart_count}, " if named else ""
        return f"rank {rank}  ({r.device}, {attempt}{r.rank_dir})"
    first, last = (Path(r.captures[k]).name for k in (0, -1))
    return f"rank {rank}  ({r.device}, {len(r.captures)} captures pooled, in {r.rank_dir}: {first} .. {last})"


def _reason_unsaid(reason: str, step: int) -> str:
    """The record's reason for a partial step without its own "step N is partial" clause, wherever the
    record put it (a note may follow it: the post-processor ran during the capture), since the line says
    it first."""
    said = f"step {step} is partial"
    return "; ".join(c for c in reason.split("; ") if c != said) or "the capture ended during it"


def _partial_line(r: RankReport) -> str | None:
    partial = [s.step for s in r.steps if s.partial is True]
    if len(partial) == len(r.steps) > 1:
        return (
            f"[yellow]every step is partial[/yellow] (steps {', '.join(map(str, partial))}: the capture "
            "began or ended inside each): the mean step time is over them all"
        )
    if len(partial) > 1:  # each capture's reason, or a capture's first and last steps
        return (
            f"[yellow]steps {', '.join(map(str, partial))} are partial[/yellow] (a capture began or ended "
            "inside each): left out of the mean step time and of the comparison across ranks"
        )
    if r.partial_step is msgspec.UNSET:
        return None
    reason = escape(_reason_unsaid(str(r.partial_reason or ""), r.partial_step))
    if partial == [s.step for s in r.steps]:  # the only step reported (--steps): the mean is its time
        return (
            f"[yellow]step {r.partial_step} is partial[/yellow] ({reason}): the only step reported, so the "
            "mean step time is its time; left out of the comparison across ranks"
        )
    return (
        f"[yellow]step {r.partial_step} is partial[/yellow] ({reason}): left out of the mean "
        "step time and of the comparison across ranks"
    )


def _steps_table(r: RankReport, restarted: bool = True) -> tuple[Table, str, str | None]:
    """The step table, with its title and caption to print as lines of their own (print_titled)."""
    title = _title(r, restarted)
    shown, caption = _shown(r.steps, [s.duration_us for s in r.steps], "duration_us")
    steps = Table()
    # the data column where the trace holds DataLoader fetches: a table without one keeps its width
    keep = [k for k, col in enumerate(STEP_COLUMNS) if col != "data" or _knows_data(r.steps)]
    for k in keep:
        steps.add_column(STEP_COLUMNS[k], justify="right")
    for s in shown:
        label = str(s.step if s.step is not None else "-")
        row = _step_row(label + (" (partial)" if s.partial is True else ""), _times(s), _peak(s))
        steps.add_row(*(row[k] for k in keep))
    if caption:
        steps.add_section()
        steps.add_row(*(_all_steps_row(r.steps)[k] for k in keep))
    return steps, title, caption


def print_titled(
    console: Console, table: Table, title: str, caption: str | None, plain: bool = False
) -> None:
    """``table`` with its title above it and its caption below, each a line of its own: rich wraps a
    table's title and caption to the table's width, which split a rank dir's path in the middle of a name
    (a report saved to a file too) and a caption over four lines of a narrow table."""
    # escaped: a path or name holding "[/x]" is rich markup (a MarkupError ended the report)
    console.print(escape(printable(title)), style="table.title", overflow="fold", highlight=False)
    print_whole(console, table, plain)
    if caption:
        console.print(escape(caption), style="table.caption", highlight=False)


def _knows_data(steps: list[ReportStep]) -> bool:
    return any(s.data_us is not msgspec.UNSET for s in steps)


def _step_call(step_on: str | msgspec.UnsetType | None) -> str:
    """The call whose return ends a step, as the capture record says it (an older record does not)."""
    if step_on is msgspec.UNSET:
        return "optimizer.step() (or --step-on function's) call"
    return "optimizer.step() call" if step_on is None else f"call of {step_on} (--step-on)"


def render_table(report: Report, console: Console) -> None:
    sections = [r for r in _sections(report) if not (report.steps_asked and not r.steps)]
    # (none of the steps asked: named in one line on stderr, not an empty table each)
    restarted = _restarted(report)
    step_tables = [_steps_table(r, restarted) for r in sections]
    # one look for every rank's step table: one too wide for its rules loses them, and so do the others
    plain = any(_needed(console, t) > console.width for t, _title, _caption in step_tables)
    for r, (steps, title, caption) in zip(sections, step_tables, strict=True):
        print_titled(console, steps, title, caption, plain)
        if len(r.steps) == 1 and r.steps[0].step is None:  # a --delay window of a job without steps
            if r.cut_short is not msgspec.UNSET and r.cut_short.steps_left_out:  # its steps all cut short
                console.print(
                    "[dim]no step is whole in this trace cut short: the row is all the events read[/dim]"
                )
            else:
                console.print(
                    "[dim]no steps in this trace (no ProfilerStep): the row is the whole capture[/dim]"
                )
        if (line := _partial_line(r)) is not None:
            console.print(line, highlight=False)
        if r.export_ms is not msgspec.UNSET:
            pooled = r.captures is not msgspec.UNSET
            each = " (each capture's last step pays its own: their records' export_ms)" if pooled else ""
            which = "the last capture" if pooled else "the capture"
            console.print(
                f"[dim]step {r.export_after_step} ended {which}: writing its trace then took the training "
                f"process {r.export_ms:.1f} ms more (and a few ms to hand it over), which a timer of your "
                f"own around that step counts and this table does not{each}[/dim]",
                highlight=False,
            )
        if r.start_ms is not msgspec.UNSET and r.start_ms >= START_SAID_FROM_MS:
            console.print(
                f"[dim]the profiler started at the end of step {r.start_after_step}, inside its "
                f"{escape(_step_call(r.step_on))}: that took the training process "
                f"{r.start_ms:.1f} ms, which a timer of your own around step {r.start_after_step} counts and "
                "no table shows[/dim]",
                highlight=False,
            )
        if r.top_operators:
            ops = Table(title="top operators by self time", title_justify="left")
            # a CPU-only trace has no device time: a column of 0.000 read as "the device did nothing"
            on_device = r.device != "CPU" or any(o.device_us for o in r.top_operators)
            figures = ("calls", "self ms", "total ms", *(("device ms",) if on_device else ()))
            ops.add_column("operator", justify="left")
            for col in figures:
                ops.add_column(col, justify="right")
            cells = [
                [str(o.count), _ms(o.self_us), _ms(o.total_us), *([_ms(o.device_us)] if on_device else [])]
                for o in r.top_operators
            ]
            names = [printable(o.name) for o in r.top_operators]
            room = _name_room(console, names, cells, figures)
            for name, row in zip(names, cells, strict=True):
                ops.add_row(escape(shorten_middle(name, room)), *row)
            print_whole(console, ops)
        if r.top_kernels:
            ks = Table(title="top kernels by device time", title_justify="left")
            for col, just in (("kernel", "left"), ("calls", "right"), ("total ms", "right")):
                ks.add_column(col, justify=just)
            cells = [[str(k.count), _ms(k.total_us)] for k in r.top_kernels]
            names = [printable(k.name) for k in r.top_kernels]
            room = _name_room(console, names, cells, ("calls", "total ms"))
            for name, row in zip(names, cells, strict=True):
                ks.add_row(escape(shorten_middle(name, room)), *row)
            print_whole(console, ks)
        elif any(w.startswith(vocab.NO_EVENTS) for w in r.warnings or ()):
            pass  # said in the warning
        elif r.device == "CPU" and any(vocab.MAYBE_DEVICE_WORK in w for w in r.warnings or ()):
            console.print(
                "[dim]no device kernels counted: read as a CPU-only trace (see the warning on the events "
                "left out)[/dim]"
            )
        elif r.device == "CPU" and not r.top_operators:
            numbered = sorted(s.step for s in r.steps if s.step is not None)
            console.print(f"[dim]{escape(vocab.no_operator_ran(numbered) + NO_STACKS)}[/dim]")
        elif r.device == "CPU":
            # a pooled section's rank_dir is the folder of its captures, which export-stacks refuses (one
            # capture at a time): the note names the latest of them
            latest = r.captures[-1] if r.captures is not msgspec.UNSET and r.captures else None
            console.print(
                f"[dim]{escape(_cpu_only_note(latest or r.rank_dir, pooled=latest is not None))}[/dim]"
            )
        _render_ranges(r, console)
        _render_gc(r, console)
        if (line := _data_line(r.steps, on_device=r.device != "CPU")) is not None:
            console.print(line, highlight=False)
        console.print()
    _render_cross_rank(report, console)
    _render_cross_ranges(report, console)


# A capture of a process that ran no torch operator while it recorded (a --delay window of the parent of
# a subprocess that trains; torch.profiler's trace of a step begun as its profile ended): export-stacks has
# no operator to build stacks from.
NO_STACKS = "; npuprof export-stacks has no operator to show of it"


def _cpu_only_note(rank_dir: str, pooled: bool = False) -> str:
    """What comp, free and prep ms are on a CPU-only trace, and the command that shows what the free time
    was: prep ends at the step's first operator (docs/formats.md, "Step breakdown", its Preparing row), so a
    DataLoader's wait after any operator of the step (a logged loss.item()) is free time, seen in no table.
    ``pooled``: ``rank_dir`` is the latest capture of a pooled section, and the note says so. A capture
    without Python stacks gets operator nesting only from export-stacks, its free time ProfilerStep's own
    (README, "Stacks after the run"): the note says so, and which flag records the frames."""
    from npuprof.reports.run_summary import shell_quote

    no_stacks = layout.recorded_with_stack(Path(rank_dir)) is False
    return printable(
        "no device kernels: CPU-only trace (the CPU is the device: comp is its operators' time, free the "
        "rest of the step, the Python between operators and waits included; prep ms runs to the step's first "
        "operator, a loss.item() before the DataLoader's wait, say); what the free time was: "
        + npuprof_cmd(f"export-stacks {shell_quote(rank_dir)} --svg flame.svg")
        + (" (its latest capture)" if pooled else "")
        + (NO_PYTHON_STACKS if no_stacks else "")
    )


# the capture's profiler_info says with_stack false: export-stacks has operators and ranges to nest, no frame
NO_PYTHON_STACKS = (
    "; this capture has no Python stacks, so that shows operator nesting only (free time as ProfilerStep's "
    "own, DataLoader waits and your ranges by name): add --with-stack to npuprof run for your code's frames"
)


RANGE_COLUMNS = ("calls", "total ms", "mean ms", "max ms")
# --msprof-tx wraps torch.distributed's Python functions; DTensor's collectives go to torch's ops without
# one (README, "Marks")
FUNCTIONAL_UNRANGED = (
    ": its top operators hold functional collectives ({}), which DTensor, tensor parallel and compiled code "
    "issue and --msprof-tx does not range; their time is in the comm column"
)


# a DDP job under --msprof-tx: its gradient buckets' all-reduces come from C++, with no torch.distributed
# call to range (README, "Marks")
CPP_UNRANGED = (
    ": their {} collective call(s) have none, as --msprof-tx ranges the script's torch.distributed calls, "
    "not the collectives issued from C++ (DDP's gradient buckets); their time is in the comm column"
)


def _render_ranges(r: RankReport, console: Console) -> None:
    """The rank's slowest ranges (the user's and --msprof-tx's comm: ones), when the capture had any."""
    if r.ranges is msgspec.UNSET:
        return
    if not r.ranges:
        functional = [op.name for op in r.top_operators if op.name.startswith(vocab.C10D_PREFIXES[1:])]
        calls = r.communication.get("operators", 0)
        if functional:
            why = FUNCTIONAL_UNRANGED.format(functional[0])
        else:
            why = CPP_UNRANGED.format(f"{calls:,}") if isinstance(calls, int) and calls > 0 else ""
        console.print(
            "[dim]no ranges in these steps (marks and --msprof-tx ranges were looked for)"
            + escape(why)
            + "[/dim]"
        )
        return
    table = Table(title="slowest ranges by total time", title_justify="left")
    for col, just in (("range", "left"), ("kind", "left"), *((c, "right") for c in RANGE_COLUMNS)):
        table.add_column(col, justify=just)
    cells = [[str(g.count), _ms(g.total_us), _ms(g.mean_us), _ms(g.max_us)] for g in r.ranges]
    names = [printable(g.name) for g in r.ranges]
    room = _name_room(
        console,
        names,
        [[g.kind, *row] for g, row in zip(r.ranges, cells, strict=True)],
        ("kind", *RANGE_COLUMNS),
    )
    for g, name, row in zip(r.ranges, names, cells, strict=True):
        table.add_row(escape(shorten_range_name(name, room)), g.kind, *row)
    print_whole(console, table)


def _data_line(steps: list[ReportStep], on_device: bool) -> str | None:
    """The hint when the training thread spent more than DATA_HINT_SHARE of the whole steps' time inside
    the DataLoader's fetches (docs/formats.md, "Step breakdown"); None otherwise or when not known.
    pin_memory=True is named only ``on_device``: it speeds the copy to a device, and a CPU-only job has
    none (torch then leaves the memory unpinned)."""
    whole = _whole(steps)
    total = _total(whole)
    data, duration = total["data_us"], total["duration_us"]
    if data is None or not duration or data <= DATA_HINT_SHARE * duration:
        return None
    mean, step = _ms(data / len(whole)), _ms(duration / len(whole))
    return (
        f"[yellow]data loading: {_pct(data, duration)} of the step time[/yellow] (mean {mean} of {step} ms "
        "a step) went to the training thread's batch fetches (enumerate(DataLoader)): it waits on the input "
        f"pipeline; more DataLoader workers (num_workers=){', pin_memory=True' if on_device else ''} or a "
        "cheaper Dataset.__getitem__ feed it faster"
    )


def _render_gc(r: RankReport, console: Console) -> None:
    """One line: the GC pauses of the steps shown, their share of the step time, and the step with the
    most GC."""
    gc = r.gc
    if gc is msgspec.UNSET:
        return
    dropped = f"; {gc.dropped} more pauses were not kept (raise the threshold)" if gc.dropped else ""
    if not gc.pauses:
        console.print(
            f"GC: no pause at or above {gc.threshold_ms:g} ms in these steps{dropped}", highlight=False
        )
        return
    whole = sum(s.duration_us for s in r.steps)
    worst = max(r.steps, key=lambda s: s.gc_us if s.gc_us is not msgspec.UNSET else -1.0)
    worst_gc = worst.gc_us if worst.gc_us is not msgspec.UNSET else 0.0
    console.print(
        f"GC: {gc.pauses} pause{'s' if gc.pauses != 1 else ''} (threshold {gc.threshold_ms:g} ms), "
        f"{_ms(gc.gc_us)} ms, {_pct(gc.gc_us, whole)} of the step time; most in step "
        f"{worst.step if worst.step is not None else '-'}: {_ms(worst_gc)} ms "
        f"({_pct(worst_gc, worst.duration_us)} of it){dropped}",
        highlight=False,
    )


def _render_cross_ranges(report: Report, console: Console) -> None:
    """The slowest ranges over every rank, when there are several ranks and some has ranges."""
    ranges = report.cross_rank.ranges
    if len(report.ranks) < 2 or ranges is msgspec.UNSET or not ranges:
        return
    table = Table(title="slowest ranges across ranks", title_justify="left")
    headers = ("ranks", *RANGE_COLUMNS, "max on rank")
    for col, just in (("range", "left"), *((c, "right") for c in headers)):
        table.add_column(col, justify=just)
    cells = [
        [
            str(c.ranks),
            str(c.count),
            _ms(c.total_us),
            _ms(c.mean_us),
            _ms(c.max_us),
            "-" if c.max_rank is None else str(c.max_rank),
        ]
        for c in ranges
    ]
    names = [printable(c.name) for c in ranges]
    room = _name_room(console, names, cells, headers)
    for name, row in zip(names, cells, strict=True):
        table.add_row(escape(shorten_range_name(name, room)), *row)
    print_whole(console, table)


def _name_room(console: Console, names: list[str], figures: list[list[str]], headers: Sequence[str]) -> int:
    """The width left for the name column beside columns of figures (rows of cells, their headers) and
    the table's borders, so that a name is shortened in its middle instead of wrapping over lines."""
    used = sum(max(len(h), *(len(row[k]) for row in figures)) for k, h in enumerate(headers))
    used += 3 * (len(headers) + 1) + 1  # "│ " and " │" around every column
    return max(min(max(map(len, names)), console.width - used), MIN_NAME_WIDTH)


def _render_cross_rank(report: Report, console: Console) -> None:
    cross = report.cross_rank
    ranks = sorted({k for s in cross.steps for k in s.ranks}, key=int)
    if len(ranks) < 2:  # one rank's captures (a process run twice) have nothing to compare across
        _say_nothing_across(report, ranks, console)
    else:
        # a step one rank alone has has no spread (-1: never among the widest)
        spread = [s.max_us - s.min_us if len(s.ranks) > 1 else -1.0 for s in cross.steps]
        shown, caption = _shown(cross.steps, spread, "spread_us")
        if cross.restart_count is not msgspec.UNSET:  # a line of its own: a title is wrapped to the table
            latest, why = latest_said(report.ranks)
            console.print(
                f"across ranks: the captures of {latest} (torchrun restarted the job; an earlier attempt's "
                f"are not compared{f'; {why}' if why else ''})"
            )
        table = Table()
        table.add_column("step", justify="right")
        for k in ranks:
            table.add_column(f"rank {k}", justify="right")
        table.add_column("max-min", justify="right")
        for s in shown:
            width = _ms(s.max_us - s.min_us) if len(s.ranks) > 1 else "-"
            label = "-" if s.step is None else str(s.step)  # a trace without steps: its whole capture
            table.add_row(label, *[_ms(s.ranks.get(k)) for k in ranks], width)
        print_titled(console, table, "step time across ranks (ms)", caption)
        slow = cross.slowest
        if slow:
            figure = f"mean step {_ms(slow.mean_step_us)} ms"
            standing = (slow.slower_than_median_pct, slow.outlier, slow.mean_step_us <= slow.median_us)
            _say_rank(
                console,
                "slowest rank",
                slow.rank,
                figure,
                *standing,
                slow.too_few_steps is not msgspec.UNSET,
                slow.modified_z,
                len(ranks),
            )
        waited_for = cross.straggler
        if waited_for:
            busy = f"busy {_ms(waited_for.busy_us)} ms a step outside exposed communication"
            above = waited_for.busier_than_median_pct
            standing = (above, waited_for.outlier, waited_for.busy_us <= waited_for.median_busy_us)
            _say_rank(
                console,
                "rank the others wait for",
                waited_for.rank,
                busy,
                *standing,
                waited_for.too_few_steps is not msgspec.UNSET,
                waited_for.modified_z,
                len(ranks),
            )
        _say_too_few_steps(slow, waited_for, console)
        if cross.start_skew:
            worst = max(cross.start_skew, key=lambda s: s.skew_us)
            if worst.skew_us <= 0:
                console.print("step start skew: none (each step started at the same time on every rank)")
                return
            from npuprof.analysis.report import on_two_hosts

            # each host's starts are read on its own clock: across hosts the skew holds their clocks' offset
            hosts = on_two_hosts(report, worst.latest_rank, worst.earliest_rank)
            # a worker name is the host's by default, not always (--worker-name rank$RANK): said as such
            clocks = ""
            if hosts is not None:
                clocks = f"; workers {hosts[0]} and {hosts[1]}: if two hosts, their clocks' offset in it"
            console.print(
                f"step start skew: up to {_ms(worst.skew_us)} ms "
                f"({'the capture' if worst.step is None else f'step {worst.step}'}: rank "
                f"{worst.latest_rank} started after rank {worst.earliest_rank}{clocks}"
                f"{_profiler_start_in_skew(worst, cross.start_skew)})"
            )


def _profiler_start_in_skew(worst: StartSkew, skews: list[StartSkew]) -> str:
    """When the largest skew is the late rank's profiler start right before the step (report.py's
    profiler_start_ms): that said, and the largest skew of the steps it did not delay."""
    if worst.profiler_start_ms is msgspec.UNSET:
        return ""
    said = (
        f"; its profiler started right before it, which took rank {worst.latest_rank} "
        f"{worst.profiler_start_ms:.1f} ms: the profiler's cost, not the job's"
    )
    others = [s for s in skews if s.profiler_start_ms is msgspec.UNSET]
    if not others:
        return said
    other = max(others, key=lambda s: s.skew_us)
    step = "the capture" if other.step is None else f"step {other.step}"
    return f"{said}; up to {_ms(other.skew_us)} ms on the other steps ({step})"


def _say_nothing_across(report: Report, compared: list[str], console: Console) -> None:
    """Ranks were reported but no step of two of them can be compared (--steps left one rank only partial
    or no steps; torchrun's latest attempt captured one rank only): one line, where the section would have
    been, so that it does not vanish unexplained."""
    known = sorted({r.rank for r in report.ranks if r.rank is not None})
    if len(known) < 2:
        return
    missing = [k for k in known if str(k) not in compared]
    earlier: list[int] = []  # ranks whose captures are all of a round before the latest (not compared)
    if report.cross_rank.restart_count is not msgspec.UNSET:
        rounds = {k: [r.earlier_round is True for r in report.ranks if r.rank == k] for k in missing}
        earlier = [k for k in missing if all(rounds[k])]
    why = []
    if earlier:
        latest, counts = latest_said(report.ranks)
        why.append(
            f"no capture of {latest} on rank(s) {', '.join(map(str, earlier))}: torchrun restarted the job, "
            f"and an earlier attempt's captures are not compared{f' ({counts})' if counts else ''}"
        )
    if without := [k for k in missing if k not in earlier]:
        asked = "" if report.steps_asked is msgspec.UNSET else f" among --steps {report.steps_asked}"
        why.append(
            f"no whole step{asked} on rank(s) {', '.join(map(str, without))}; a partial step is left out"
        )
    console.print(f"step time across ranks: nothing to compare ({'; '.join(why)})")


def _say_rank(
    console: Console,
    what: str,
    rank: int,
    figure: str,
    above: float,
    outlier: bool,
    at_median: bool,
    undecided: bool = False,
    z: float | None = None,
    ranks: int = 0,
) -> None:
    """One line naming a rank, its figure and how far above the median it is, and whether it is an outlier;
    ``undecided``: 2 ranks sharing too few steps to tell, the figures alone (:func:`_say_too_few_steps`
    says why, once); ``z``: its modified z-score; ``ranks``: how many are compared."""
    if at_median:  # the largest figure is the median's: no rank stands out (e.g. all equal)
        console.print(f"{what}: none stands out (the largest, rank {rank}'s {figure}, is the median)")
        return
    if undecided:
        console.print(f"{what}: {rank} ({figure}, {above:+.1f}% vs the median)")
        return
    if outlier:
        verdict = "[bold red]an outlier[/bold red]"
    else:
        from npuprof.analysis.report import OUTLIER_MIN_EXCESS, OUTLIER_Z, SMALL_GROUP_EXCESS

        # a z-score above the bar, not the excess: ranks that all sit very close (README, "analyse")
        close = z is not None and z > OUTLIER_Z and above <= OUTLIER_MIN_EXCESS * 100
        verdict = f"within {OUTLIER_MIN_EXCESS:.0%} of the median" if close else "within the normal spread"
        if z is None and above > SMALL_GROUP_EXCESS * 100:
            verdict += _above_by_its_mean_alone(ranks)
    console.print(f"{what}: {rank} ({figure}, {above:+.1f}% vs the median): {verdict}")


def _say_too_few_steps(
    slow: Slowest | None, waited_for: Straggler | msgspec.UnsetType | None, console: Console
) -> None:
    """One line, as information, after the rank lines that 2 ranks sharing too few steps leave undecided:
    whether the rank is an outlier cannot be told from so few steps (README, "Analysing": why 5, and
    why the default schedule stays at 3). It was a "not judged ... capture more" verdict on each line, which
    every 2-rank run with the default schedule (3 steps, 2 or 3 of them whole on both ranks) printed twice.
    Each undecided rank is named by its line's question and figure: "whether rank 1 is an outlier: not
    told" followed "slowest rank: 1 (...): within the normal spread" where the other line's rank 1 (the rank
    the others wait for) was the one undecided."""
    undecided: list[tuple[str, int, float, int]] = []  # (its line's question, rank, % above, shared steps)
    if slow and slow.too_few_steps is not msgspec.UNSET:
        undecided.append(("the slowest rank", slow.rank, slow.slower_than_median_pct, slow.too_few_steps))
    if waited_for and waited_for.too_few_steps is not msgspec.UNSET:
        above = waited_for.busier_than_median_pct
        undecided.append(("the rank the others wait for", waited_for.rank, above, waited_for.too_few_steps))
    if not undecided:
        return
    from npuprof.analysis.report import SMALL_GROUP_STEPS

    steps = "/".join(dict.fromkeys(str(shared) for *_, shared in undecided))
    if len(undecided) == 1:
        ((what, rank, above, _),) = undecided
        question = f"{what} ({rank}, {above:+.1f}% vs the median) is an outlier"
    else:  # each rank named by its line's question: "rank 1 or rank 0" said neither which
        (first, rank, above, _), (second, other, other_above, _) = undecided
        if rank == other:
            question = (
                f"rank {rank}, {first} ({above:+.1f}% vs the median) and {second} ({other_above:+.1f}%), "
                "is an outlier"
            )
        else:
            question = (
                f"{first} ({rank}, {above:+.1f}% vs the median) and {second} ({other}, {other_above:+.1f}%) "
                "are outliers"
            )
    console.print(
        f"whether {question}: not told by {steps} steps (with 2 ranks it takes {SMALL_GROUP_STEPS} "
        f"whole steps both have, which {npuprof_cmd(f'run --active {SMALL_GROUP_STEPS}')} or more captures)"
    )


def _above_by_its_mean_alone(ranks: int) -> str:
    """Why a rank more than SMALL_GROUP_EXCESS above the median by its mean is no outlier where there is no
    z-score (2 ranks; more whose deviation is 0): the rule's other tests (README, "analyse"), which its
    mean alone does not pass (a 2-rank job's "+19.1% vs the median: within the normal spread" read as a
    contradiction)."""
    from npuprof.analysis.report import SMALL_GROUP_CONSISTENCY, SMALL_GROUP_EXCESS

    who = "with 2 ranks" if ranks == 2 else "with most ranks alike"
    steps = f" and in {SMALL_GROUP_CONSISTENCY:.0%} of the steps both have" if ranks == 2 else ""
    return (
        f" ({who}, an outlier is more than {SMALL_GROUP_EXCESS:.0%} above the median by its mean, by its "
        f"median step{steps}: a few slow steps are not)"
    )


def render_json(report: Report | dict[str, Any]) -> str:
    """The report as JSON (indent 2); a plain dict of the same shape gives the same text."""
    return json.dumps(report, indent=2, default=json_value)


def render_csv(report: Report, table: str = "steps") -> str:
    """``table``: ``steps`` (one row per rank and step) or ``ranges`` (report.csv_range_rows)."""
    from npuprof.analysis.report import csv_range_rows, csv_rows

    if table == "ranges":
        header, rows = csv_range_rows(report)
    else:
        header, rows = csv_rows(report)
        partial = [s.partial is True for r in report.ranks for s in r.steps]
        if any(partial):  # a column only then: the layout of a report without partial steps stays as it was
            header = [*header, "partial"]
            rows = [[*row, flag] for row, flag in zip(rows, partial, strict=True)]
    from npuprof.analysis.cells import csv_line

    return "".join(csv_line(row) + "\n" for row in [header, *rows])  # a rank dir's "\r" quoted too
