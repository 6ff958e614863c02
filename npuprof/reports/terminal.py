"""Render an `npuprof analyse` report (see npuprof.analysis.report) as rich tables, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from npuprof.analysis.step_breakdown import STEP_TIME_FIELDS

MAX_STEP_ROWS = 30  # a step table longer than this shows only
SHOWN_WHEN_MANY = 10  # the steps that matter most, plus a row over all of them
WEIGHT_WORDS = {"duration_us": "step time", "spread_us": "spread across ranks"}
CAPTION_TAIL = {"duration_us": ", then all steps (mean ms)", "spread_us": ""}


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"


def _pct(part: float, whole: float) -> str:
    return f"{part / whole * 100:.1f}%" if whole else "-"


def _shown(rows: list[dict[str, Any]], weight: str) -> tuple[list[dict[str, Any]], str | None]:
    """All rows when they are few; else the SHOWN_WHEN_MANY with the largest ``weight``, in their order,
    and a caption saying so (a table of thousands of steps takes seconds to draw and nobody reads it)."""
    if len(rows) <= MAX_STEP_ROWS:
        return rows, None
    keep = set(sorted(range(len(rows)), key=lambda i: -rows[i][weight])[:SHOWN_WHEN_MANY])
    caption = (
        f"the {SHOWN_WHEN_MANY} of {len(rows)} steps with the largest {WEIGHT_WORDS[weight]}"
        f"{CAPTION_TAIL[weight]}; --steps A-B picks steps, --format csv lists every one"
    )
    return [row for i, row in enumerate(rows) if i in keep], caption


def _step_row(label: str, s: dict[str, Any], d: float) -> list[str]:
    return [
        label,
        _ms(d),
        _pct(s["computing_us"], d),
        _pct(s["communication_us"], d),
        _pct(s["comm_not_overlapped_us"], d),
        _pct(s["overlapped_us"], d),
        _pct(s["free_us"], d),
        _ms(s["preparing_us"]),
        "-" if s.get("memory_peak_mb") is None else f"{s['memory_peak_mb']:.1f}",
    ]


def _all_steps_row(steps: list[dict[str, Any]]) -> list[str]:
    """Every step at once: the mean step time, each part's share of the summed time, the mean
    preparation and the highest memory peak."""
    total = {k: sum(s[k] for s in steps) for k in STEP_TIME_FIELDS}
    peaks = [s["memory_peak_mb"] for s in steps if s.get("memory_peak_mb") is not None]
    row = _step_row("all", {**total, "memory_peak_mb": max(peaks, default=None)}, total["duration_us"])
    row[1] = _ms(total["duration_us"] / len(steps))
    row[7] = _ms(total["preparing_us"] / len(steps))
    return row


def render_table(report: dict[str, Any], console: Console) -> None:
    for r in report["ranks"]:
        title = f"rank {r['rank'] if r['rank'] is not None else '?'}  ({r['device']}, {r['rank_dir']})"
        shown, caption = _shown(r["steps"], "duration_us")
        steps = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
        for col in ("step", "ms", "comp", "comm", "exposed", "overlap", "free", "prep ms", "mem MB"):
            steps.add_column(col, justify="right")
        for s in shown:
            label = str(s["step"] if s["step"] is not None else "-")
            steps.add_row(*_step_row(label + (" (partial)" if s.get("partial") else ""), s, s["duration_us"]))
        if caption:
            steps.add_section()
            steps.add_row(*_all_steps_row(r["steps"]))
        console.print(steps)
        if r.get("partial_step") is not None:
            reason = escape(str(r.get("partial_reason") or "the capture ended during it"))
            console.print(
                f"[yellow]step {r['partial_step']} is partial[/yellow] ({reason}): left out of the mean "
                "step time and of the comparison across ranks",
                highlight=False,
            )
        if r["top_operators"]:
            ops = Table(title="top operators by self time", title_justify="left")
            for col, just in (
                ("operator", "left"),
                ("calls", "right"),
                ("self ms", "right"),
                ("total ms", "right"),
                ("device ms", "right"),
            ):
                ops.add_column(col, justify=just)
            for o in r["top_operators"]:
                ops.add_row(
                    o["name"], str(o["count"]), _ms(o["self_us"]), _ms(o["total_us"]), _ms(o.get("device_us"))
                )
            console.print(ops)
        if r["top_kernels"]:
            ks = Table(title="top kernels by device time", title_justify="left")
            for col, just in (("kernel", "left"), ("calls", "right"), ("total ms", "right")):
                ks.add_column(col, justify=just)
            for k in r["top_kernels"]:
                ks.add_row(k["name"][:100], str(k["count"]), _ms(k["total_us"]))
            console.print(ks)
        elif r["device"] == "CPU":
            console.print("[dim]no device kernels: CPU-only trace (the CPU is the device)[/dim]")
        console.print()
    cross = report["cross_rank"]
    if len(report["ranks"]) > 1 and cross["steps"]:
        ranks = sorted({k for s in cross["steps"] for k in s["ranks"]}, key=int)
        spread = [{**s, "spread_us": s["max_us"] - s["min_us"]} for s in cross["steps"]]
        shown, caption = _shown(spread, "spread_us")
        table = Table(
            title="step time across ranks (ms)", title_justify="left", caption=caption, caption_justify="left"
        )
        table.add_column("step", justify="right")
        for k in ranks:
            table.add_column(f"rank {k}", justify="right")
        table.add_column("max-min", justify="right")
        for s in shown:
            table.add_row(
                str(s["step"]), *[_ms(s["ranks"].get(k)) for k in ranks], _ms(s["max_us"] - s["min_us"])
            )
        console.print(table)
        slow = cross["slowest"]
        if slow:
            verdict = "[bold red]an outlier[/bold red]" if slow["outlier"] else "within the normal spread"
            console.print(
                f"slowest rank: {slow['rank']} (mean step {_ms(slow['mean_step_us'])} ms, "
                f"{slow['slower_than_median_pct']:+.1f}% vs the median): {verdict}"
            )
        if cross["start_skew"]:
            worst = max(cross["start_skew"], key=lambda s: s["skew_us"])
            console.print(
                f"step start skew: up to {_ms(worst['skew_us'])} ms (step {worst['step']}: rank "
                f"{worst['latest_rank']} started after rank {worst['earliest_rank']})"
            )


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2)


def render_csv(report: dict[str, Any]) -> str:
    from npuprof.analysis.report import csv_rows

    header, rows = csv_rows(report)
    partial = [s.get("partial", False) for r in report["ranks"] for s in r["steps"]]
    if any(partial):  # a column only then: the layout of a report without partial steps stays as it was
        header = [*header, "partial"]
        rows = [[*row, flag] for row, flag in zip(rows, partial, strict=True)]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()
