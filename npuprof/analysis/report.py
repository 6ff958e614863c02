"""The `npuprof analyse` report: parse what is unparsed (in parallel), then summarise per rank and across
ranks.

:func:`build_report` returns a plain JSON-serialisable dict (schema version ``REPORT_VERSION``)::

    {"version", "path", "steps_filter", "ranks": [RankReport...],
     "problems": [{"rank_dir", "status", "reason"}],
     "cross_rank": {"steps": [{"step", "ranks": {rank: duration_us}, "max_us", "min_us"}],
                    "slowest": {...} | None,
                    "start_skew": [{"step", "skew_us", "earliest_rank", "latest_rank"}]}}

RankReport: ``{"rank", "rank_dir", "status", "device", "steps": [step breakdown...], "step_time_mean_us",
"top_operators": [{"name", "count", "self_us", "total_us", "device_us"}], "top_kernels": [{"name", "count",
"total_us"}], "memory_peak_mb"}``.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from npuprof.analysis.parse import SUMMARY_FILE, ParseOutcome, parse_rank_dir, write_outputs
from npuprof.analysis.step_breakdown import STEP_TIME_FIELDS
from npuprof.analysis.summary_schema import SummaryError, as_plain, read_summary
from npuprof.results import layout
from npuprof.results.atomic import make_dir, write_text

REPORT_VERSION = 1
BARE_SUFFIX = ".npuprof"  # a bare trace's tables go to <trace>.npuprof/
OUTLIER_Z = 3.5  # modified z-score (Iglewicz & Hoaglin) above which a rank is an outlier
SMALL_GROUP_EXCESS = 0.10  # with fewer than 3 ranks: slower than the median by more than this


class NothingToAnalyse(Exception):
    pass


def is_bare_trace(path: Path) -> bool:
    """A trace file to analyse on its own: named as Kineto names its traces (whatever it holds: a damaged
    one is reported as such), or any file whose content is a Chrome trace of either form
    (trace_loader.sniff_trace: ``trace.json``, ``chrome_trace_14.json``, torch_npu's ``trace_view.json``)."""
    if not path.is_file():
        return False
    if path.name.endswith(layout.KINETO_SUFFIXES):
        return True
    from npuprof.analysis.trace_loader import sniff_trace

    return sniff_trace(path) is not None


def _parse_bare(trace: Path, force: bool, workers: int) -> tuple[ParseOutcome, Path]:
    out_dir = trace.parent / (trace.name + BARE_SUFFIX)
    outcome = ParseOutcome(trace, "failed")
    done = out_dir / layout.ANALYSE_DONE
    if done.exists() and not force:
        outcome.status = "cached"
        return outcome, out_dir
    try:
        from npuprof.analysis.trace_loader import TraceError

        if done.exists():
            done.unlink()
        make_dir(out_dir)
        outcome.files = write_outputs(trace, out_dir, None, workers)
        write_text(done, "")
        outcome.status = "parsed"
    except TraceError as exc:
        outcome.status, outcome.reason = exc.kind, str(exc)
    except Exception as exc:
        outcome.status, outcome.reason = "failed", f"{type(exc).__name__}: {exc}"
    return outcome, out_dir


def parse_all(
    rank_dirs: list[Path], jobs: int, force: bool, on_done: Callable[[ParseOutcome], None] | None = None
) -> list[ParseOutcome]:
    """Parse rank dirs, ``jobs`` at a time (one process each); a single dir gets ``jobs`` reader processes."""
    if len(rank_dirs) == 1 or jobs <= 1:
        outcomes = []
        for d in rank_dirs:
            outcome = parse_rank_dir(d, force=force, workers=jobs if len(rank_dirs) == 1 else 1)
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
        return outcomes
    results: dict[Path, ParseOutcome] = {}
    todo: list[Path] = []
    for d in rank_dirs:
        if not force and (d / layout.PARSED_DIR / layout.ANALYSE_DONE).exists():
            # already parsed: parse_rank_dir answers "cached" at once; no process is forked for it
            # (a report on 1,000 parsed ranks: ~0.3 s of pool round trips)
            results[d] = outcome = parse_rank_dir(d, force, 1)
            if on_done:
                on_done(outcome)
        else:
            todo.append(d)
    if not todo:
        return [results[d] for d in rank_dirs]
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx) as pool:
        futures = {pool.submit(parse_rank_dir, d, force, 1): d for d in todo}
        for fut in as_completed(futures):
            d = futures[fut]
            try:
                outcome = fut.result()
            except Exception as exc:  # a worker killed (e.g. out of memory)
                outcome = ParseOutcome(d, "failed", f"the parsing process died: {exc}")
            results[d] = outcome
            if on_done:
                on_done(outcome)
    return [results[d] for d in rank_dirs]


def _load_summary(parsed_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """The rank's summary as plain values, or (None, why it cannot be used: missing, damaged, or written by
    another version; re-parsing with --force rewrites it)."""
    try:
        data = (parsed_dir / SUMMARY_FILE).read_bytes()
    except OSError as exc:
        why = f"no readable {SUMMARY_FILE} ({exc.strerror or exc}; parsed by another tool?)"
        return None, why + "; re-run with --force"
    try:
        return as_plain(read_summary(data)), ""
    except SummaryError as exc:
        return None, f"{SUMMARY_FILE}: {exc}"


def _in_steps(step: Any, steps: tuple[int, int] | None) -> bool:
    return steps is None or (isinstance(step, int) and steps[0] <= step <= steps[1])


def _aggregate(items: list[dict[str, Any]], steps: tuple[int, int] | None, key: str, top: int) -> list[dict]:
    merged: dict[str, dict[str, Any]] = {}
    for item in items:
        if not _in_steps(item.get("step"), steps):
            continue
        m = merged.setdefault(item["name"], {"name": item["name"], "count": 0})
        for k, v in item.items():
            if k.endswith("_us"):
                m[k] = round(m.get(k, 0.0) + v, 3)
        m["count"] += item["count"]
    return sorted(merged.values(), key=lambda m: -m.get(key, 0.0))[:top]


def rank_report(
    summary: dict[str, Any], rank_dir: Path, status: str, steps: tuple[int, int] | None, top: int
) -> dict[str, Any]:
    chosen = [s for s in summary.get("steps", []) if _in_steps(s.get("step"), steps)]
    durations = [s["duration_us"] for s in chosen]
    peaks = [s.get("memory_peak_mb") for s in chosen if s.get("memory_peak_mb") is not None]
    memory = summary.get("memory") or {}
    out = {
        "rank": summary.get("rank"),
        "rank_dir": str(rank_dir),
        "status": status,
        "device": summary.get("device"),
        "trace": summary.get("trace"),
        "steps": chosen,
        "step_time_mean_us": round(statistics.fmean(durations), 3) if durations else None,
        "top_operators": _aggregate(summary.get("top_operators", []), steps, "self_us", top),
        "top_kernels": _aggregate(summary.get("top_kernels", []), steps, "total_us", top),
        "memory_peak_mb": max(peaks) if peaks else memory.get("peak_allocated_mb"),
        "memory_peak_reserved_mb": memory.get("peak_reserved_mb"),
        "communication": summary.get("communication", {}),
    }
    # what the parser could not fully understand (device work of unknown categories: Extract.warnings())
    warnings = summary.get("warnings")
    if isinstance(warnings, list) and warnings:
        out["warnings"] = [str(w) for w in warnings]
    return out


def slowest_rank(means: dict[int, float]) -> dict[str, Any] | None:
    """The slowest rank by mean step time, and whether it is an outlier (modified z-score over the ranks'
    median absolute deviation; with fewer than 3 ranks, > 10% above the median)."""
    if len(means) < 2:
        return None
    values = list(means.values())
    med = statistics.median(values)
    rank, worst = max(means.items(), key=lambda kv: kv[1])
    mad = statistics.median(abs(v - med) for v in values)
    excess = (worst - med) / med if med > 0 else 0.0
    if len(values) >= 3 and mad > 0:
        z = 0.6745 * (worst - med) / mad
        outlier = z > OUTLIER_Z
    else:
        z = None
        outlier = excess > SMALL_GROUP_EXCESS
    return {
        "rank": rank,
        "mean_step_us": round(worst, 3),
        "median_us": round(med, 3),
        "slower_than_median_pct": round(excess * 100, 2),
        "modified_z": None if z is None else round(z, 2),
        "outlier": bool(outlier),
    }


def cross_rank(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    by_step: dict[Any, dict[int, dict[str, float]]] = {}
    means: dict[int, float] = {}
    for r in ranks:
        if r["rank"] is None:
            continue
        if r["step_time_mean_us"] is not None:
            means[r["rank"]] = r["step_time_mean_us"]
        for s in r["steps"]:
            by_step.setdefault(s["step"], {})[r["rank"]] = {"dur": s["duration_us"], "start": s["start_us"]}
    steps_out, skew = [], []
    for step in sorted(by_step, key=lambda s: (s is None, s if isinstance(s, int) else 0)):
        per = by_step[step]
        durs = {k: v["dur"] for k, v in per.items()}
        steps_out.append(
            {
                "step": step,
                "ranks": {str(k): v for k, v in sorted(durs.items())},
                "max_us": max(durs.values()),
                "min_us": min(durs.values()),
            }
        )
        if len(per) > 1:
            starts = {k: v["start"] for k, v in per.items()}
            early = min(starts, key=starts.__getitem__)
            late = max(starts, key=starts.__getitem__)
            skew.append(
                {
                    "step": step,
                    "skew_us": round(starts[late] - starts[early], 3),
                    "earliest_rank": early,
                    "latest_rank": late,
                }
            )
    return {"steps": steps_out, "slowest": slowest_rank(means), "start_skew": skew}


def build_report(
    path: Path,
    steps: tuple[int, int] | None = None,
    top: int = 10,
    jobs: int | None = None,
    force: bool = False,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[ParseOutcome], None] | None = None,
) -> dict[str, Any]:
    """Parse (as needed) and report on ``path``: a result dir, one rank dir, or a bare Kineto trace.
    Raises NothingToAnalyse when ``path`` holds nothing to analyse."""
    jobs = jobs or os.cpu_count() or 1
    path = Path(path)
    if not path.exists():
        raise NothingToAnalyse(f"{path} does not exist")
    targets: list[tuple[ParseOutcome, Path]] = []
    if is_bare_trace(path):
        if on_start:
            on_start(1)
        outcome, out_dir = _parse_bare(path, force, jobs)
        if on_done:
            on_done(outcome)
        targets.append((outcome, out_dir))
    elif path.is_dir():
        rank_dirs = layout.find_rank_dirs(path)
        if not rank_dirs:
            raise NothingToAnalyse(f"no *_ascend_pt rank directory under {path} (and it is not a trace file)")
        if on_start:
            on_start(len(rank_dirs))
        for outcome in parse_all(rank_dirs, jobs, force, on_done):
            targets.append((outcome, outcome.rank_dir / layout.PARSED_DIR))
    else:
        raise NothingToAnalyse(
            f"{path} is neither a result directory nor a trace file (a Chrome trace: a JSON object with "
            "traceEvents, or a JSON array of events; gzipped or not)"
        )
    ranks, problems = [], []
    for outcome, out_dir in targets:
        summary, why = _load_summary(out_dir) if outcome.ok else (None, "")
        if summary is None:
            reason = outcome.reason or why
            problems.append(
                {
                    "rank_dir": str(outcome.rank_dir),
                    "status": outcome.status if not outcome.ok else "unreadable",
                    "reason": reason,
                }
            )
            continue
        if summary.get("rank") is None and outcome.rank is not None:
            summary["rank"] = outcome.rank
        ranks.append(rank_report(summary, outcome.rank_dir, outcome.status, steps, top))
    ranks.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0, r["rank_dir"]))
    return {
        "version": REPORT_VERSION,
        "path": str(path),
        "steps_filter": list(steps) if steps else None,
        "ranks": ranks,
        "problems": problems,
        "cross_rank": cross_rank(ranks),
    }


def csv_rows(report: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """One row per rank and step (the --format csv output)."""
    header = ["rank", "step", *STEP_TIME_FIELDS, "memory_peak_mb", "rank_dir"]
    rows = [
        [r["rank"], s["step"], *(s[k] for k in STEP_TIME_FIELDS), s.get("memory_peak_mb"), r["rank_dir"]]
        for r in report["ranks"]
        for s in r["steps"]
    ]
    return header, rows
