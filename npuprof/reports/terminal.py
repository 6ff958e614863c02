"""Render an `npuprof analyse` report (see npuprof.analysis.report) as rich tables, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"


def _pct(part: float, whole: float) -> str:
    return f"{part / whole * 100:.1f}%" if whole else "-"


def render_table(report: dict[str, Any], console: Console) -> None:
    for r in report["ranks"]:
        title = f"rank {r['rank'] if r['rank'] is not None else '?'}  ({r['device']}, {r['rank_dir']})"
        steps = Table(title=title, title_justify="left")
        for col in ("step", "ms", "comp", "comm", "exposed", "overlap", "free", "prep ms", "mem MB"):
            steps.add_column(col, justify="right")
        for s in r["steps"]:
            d = s["duration_us"]
            steps.add_row(
                str(s["step"] if s["step"] is not None else "-"),
                _ms(d),
                _pct(s["computing_us"], d),
                _pct(s["communication_us"], d),
                _pct(s["comm_not_overlapped_us"], d),
                _pct(s["overlapped_us"], d),
                _pct(s["free_us"], d),
                _ms(s["preparing_us"]),
                "-" if s.get("memory_peak_mb") is None else f"{s['memory_peak_mb']:.1f}",
            )
        console.print(steps)
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
        table = Table(title="step time across ranks (ms)", title_justify="left")
        table.add_column("step", justify="right")
        for k in ranks:
            table.add_column(f"rank {k}", justify="right")
        table.add_column("max-min", justify="right")
        for s in cross["steps"]:
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
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()
