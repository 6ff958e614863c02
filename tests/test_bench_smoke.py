"""The benches run end to end and print their tables (tiny --quick sizes). No figure is judged here (speed
is judged by running the benches), but every verdict must follow from the figures printed beside it: a
bench that printed "met" for a missed budget would fail here."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env

BENCH = ROOT / "bench"


ROWS = {
    "startup.py": ["launcher: npuprof run -- python -c pass", "bootstrap in a child that never uses torch"],
    "scale.py": [
        "npuprof analyse, unparsed (parse + report), 4 ranks",
        "npuprof analyse, unparsed (parse + report), 8 ranks",
        "npuprof analyse, parsed (report only), 4 ranks",
        "npuprof analyse, parsed (report only), 8 ranks",
        "2 post-processors at once",
        "one post-processor's peak against its trace",
    ],
    "handover.py": [
        "the driver polling a flag of its function's: npuprof's looks at the driver's wait",
        "the driver polling an Event set elsewhere: npuprof's looks at the driver's wait",
    ],
    "reports_bench.py": [
        "export-stacks, mix, 2 MB: CPU time",
        "export-stacks, string-ts, 2 MB: memory",
        "memory-timeline, mix, 2 MB: memory",
        "memory-timeline, string-ts, 2 MB: CPU time",
    ],
}
# overhead.py, export_stall.py and dynamic_latency.py are left out here: their --quick runs start several
# training processes each (~15-30 s of CPU apiece), which the suite's 10-minute budget cannot carry; run
# them with run_all.py (bench/marks.py's --quick is run by tests/test_marks.py).
# beyond --quick (scale.py: two small result dirs, 4 and 8 ranks)
EXTRA_ARGS = {"scale.py": ["--ranks", "4,8"]}


def _bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )


# Each bench runs in a session of its own, which says at its end the nice of its autogroup (the kernel's CPU
# share of a session): a bench that lowered it would have lowered the session of whoever ran it.
IN_ITS_OWN_SESSION = '"$@"; c=$?; echo "autogroup: $(cat /proc/self/autogroup 2>/dev/null)" >&2; exit $c'
AUTOGROUP = re.compile(r"^autogroup: (?:/autogroup-\d+ nice (-?\d+))?$", re.MULTILINE)


@pytest.fixture(scope="module")
def quick_outputs() -> dict[str, tuple[int, str, str]]:
    """Every bench in --quick mode, all at once (they are mostly waiting for torch to import)."""
    wrapper = ["sh", "-c", IN_ITS_OWN_SESSION, "sh"]
    procs = {
        script: subprocess.Popen(
            [*wrapper, sys.executable, str(BENCH / script), "--quick", *EXTRA_ARGS.get(script, [])],
            cwd=ROOT,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for script in ROWS
    }
    results = {}
    for script, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        results[script] = (proc.returncode, out, err)
    return results


@pytest.mark.parametrize("script", sorted(ROWS))
def test_a_bench_leaves_the_cpu_share_of_the_session_it_runs_in(
    script: str, quick_outputs: dict[str, tuple[int, str, str]]
) -> None:
    """scale.py started its post-processors in its own session, and each lowered its autogroup to nice 19,
    as a post-processor does to the session npuprof gives it: whoever ran the bench (or the test suite, or
    the terminal that started either) then got a 19th of its CPU share beside other sessions' work, until
    that session ended."""
    *_, stderr = quick_outputs[script]
    said = AUTOGROUP.findall(stderr)
    assert said, stderr[-3000:]
    assert said[-1] in ("", "0"), f"{script} left its session's autogroup at nice {said[-1]}"


@pytest.mark.parametrize("script", sorted(ROWS))
def test_bench_prints_its_table(script: str, quick_outputs: dict[str, tuple[int, str, str]]) -> None:
    code, stdout, stderr = quick_outputs[script]
    assert code == 0, stderr[-3000:]
    lines = stdout.splitlines()
    header = [i for i, line in enumerate(lines) if "budget" in line and "verdict" in line]
    assert len(header) == 1, stdout
    for row in ROWS[script]:
        matching = [line for line in lines if row in line]
        assert matching, f"no row {row!r} in:\n{stdout}"
        # every row of the table ends with a verdict (met / MISSED) or '-' where no budget applies
        assert all(line.rstrip().endswith(("met", "MISSED", "-")) for line in matching), matching
    for line in lines:
        if line.rstrip().endswith(("met", "MISSED")):
            assert verdict_follows_from_figures(line), line


NUMBER = r"(-?\d+(?:\.\d+)?)"


def verdict_follows_from_figures(line: str) -> bool:
    """Re-judge a table row from its printed figures. The budget cell says ``<= xR`` (a ratio: the first
    ``xV`` of the row's figures), ``memory <= xR`` (the ``xV memory`` figure), ``<= +N unit`` (an
    addition: the ``+V unit`` figure), ``<= N unit`` (a figure in that unit), or scale's
    ``time <= xR, memory +N MB``."""
    cells = [cell.strip() for cell in line.split(" | ")]
    budget, said = cells[-2], cells[-1]
    figures = " ".join(cells[2:-2])
    pairs: list[tuple[float, float]]  # (figure, its limit) as printed
    if m := re.fullmatch(rf"time <= x{NUMBER}, memory \+{NUMBER} MB .*", budget):
        pairs = [(float(re.search(rf"x{NUMBER} time", figures).group(1)), float(m.group(1)))]
        added = re.search(r"\(([+-]?\d+(?:\.\d+)?) MB since", figures)
        if added is not None:
            pairs.append((float(added.group(1)), float(m.group(2))))
    elif m := re.fullmatch(rf"memory <= x{NUMBER}", budget):
        pairs = [(float(re.search(rf"x{NUMBER} memory", figures).group(1)), float(m.group(1)))]
    elif m := re.fullmatch(rf"<= x{NUMBER}", budget):
        pairs = [(float(re.search(rf"x{NUMBER}", figures).group(1)), float(m.group(1)))]
    elif m := re.fullmatch(rf"<= \+{NUMBER} (\S+)(?: \(.*\))?", budget):  # "(+100 x 1.89)": a scaled budget
        # the added figure, signed as printed ("+0.36 µs", "-1.36 µs": less than the baseline)
        added = re.search(rf"(?<![\w.])([+-]\d+(?:\.\d+)?) {re.escape(m.group(2))}", figures)
        pairs = [(float(added.group(1)), float(m.group(1)))]
    elif m := re.fullmatch(rf"<= {NUMBER} (\S+)", budget):
        figure = float(re.search(rf"\+?{NUMBER} {re.escape(m.group(2))}", figures).group(1))
        pairs = [(figure, float(m.group(1)))]
    else:
        raise AssertionError(f"a budget this test cannot read: {budget!r}")
    if said == "MISSED" and all(figure <= limit for figure, limit in pairs):
        # a figure printed equal to its limit may be over it by less than the last digit printed
        return any(figure == limit for figure, limit in pairs)
    return said == ("met" if all(figure <= limit for figure, limit in pairs) else "MISSED")


def test_a_verdict_near_its_budget_follows_from_the_figures_printed() -> None:
    """startup.py judged the unrounded figures and printed the budget to the ms: "+222.7 ms" against
    "<= +223 ms" said MISSED (a fresh-clone CI run failed so). Judged as printed, to 0.1 ms, each verdict
    near its budget agrees with its row."""
    sys.path.insert(0, str(BENCH))
    try:
        from _common import verdict_as_printed
    finally:
        sys.path.remove(str(BENCH))
    for budget in (222.66, 222.64, 100.05, 99.95):
        for added in (budget - 0.06, budget - 0.04, budget, budget + 0.04, budget + 0.06):
            said = verdict_as_printed(added, budget)
            line = f" launcher | base 1.0 ms | 2.0 ms (+{added:.1f} ms) | <= +{budget:.1f} ms | {said} "
            assert verdict_follows_from_figures(line), line


def test_the_re_judge_takes_a_miss_hidden_by_the_last_digit_printed() -> None:
    """A fixed budget printed as written ("<= x1.2") beside a figure of 1.2004 printed "x1.20": MISSED is
    what the figures allow; a miss whose figure is printed below its budget, or "met" above it, is not."""
    row = " what | base | {fig} | {budget} | {said} "
    assert verdict_follows_from_figures(row.format(fig="x1.20 time", budget="<= x1.2", said="MISSED"))
    assert verdict_follows_from_figures(row.format(fig="x1.20 time", budget="<= x1.2", said="met"))
    assert not verdict_follows_from_figures(row.format(fig="x1.19 time", budget="<= x1.2", said="MISSED"))
    assert not verdict_follows_from_figures(row.format(fig="x1.21 time", budget="<= x1.2", said="met"))
    assert verdict_follows_from_figures(row.format(fig="x1.21 time", budget="<= x1.2", said="MISSED"))


def test_run_all_lists_every_bench() -> None:
    result = _bench("-c", "import sys; sys.path.insert(0, 'bench'); import run_all; print(run_all.BENCHES)")
    assert result.returncode == 0, result.stderr
    for script in ("startup.py", "overhead.py", "export_stall.py", "scale.py"):
        assert script in result.stdout
        assert (BENCH / script).exists()


def test_scale_compares_each_size_with_the_one_before(quick_outputs: dict[str, tuple[int, str, str]]) -> None:
    """bench/scale.py --ranks 4,8 --quick: the smallest size is the baseline; the next one is given as
    ratios of time and memory to it, with the budget (linear time, bounded memory)."""
    code, stdout, stderr = quick_outputs["scale.py"]
    assert code == 0, stderr[-3000:]
    lines = stdout.splitlines()
    for label in ("unparsed (parse + report)", "parsed (report only)"):
        (first,) = [line for line in lines if f"{label}, 4 ranks" in line]
        (second,) = [line for line in lines if f"{label}, 8 ranks" in line]
        assert "(the baseline)" in first and "ms/rank" in first and " MB" in first, first
        cells = [cell.strip() for cell in second.split(" | ")]
        assert cells[1].startswith("4 ranks: "), second
        assert re.search(r"x\d+\.\d+ time for x2 ranks .* x\d+\.\d+ memory", cells[3]), second
        assert re.fullmatch(r"time <= x2\.20, memory \+\d+ MB \(a reader\) since 4 ranks", cells[4]), second
    (post,) = [line for line in lines if "2 post-processors at once" in line]
    assert "1 alone: " in post and re.search(r"x\d+\.\d+ memory", post), post
    assert any(line.strip().startswith("1 round(s)") for line in lines), stdout


def test_streamed_json_report_is_render_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`npuprof analyse --format json` writes the report as it is encoded (bench/scale.py: the joined text
    of a 1,000-rank report took 30 MB): the bytes must stay those of terminal.render_json."""
    sys.path.insert(0, str(ROOT))
    from npuprof.cli.analyse import write_json
    from npuprof.reports.terminal import render_json

    report = {
        "version": 1,
        "path": "r\u00e9sultat/",
        "steps_filter": None,
        "ranks": [
            {"rank": r, "steps": [{"step": s, "duration_us": 1.5 * s} for s in range(3)]} for r in range(50)
        ],
        "problems": [],
        "cross_rank": {"steps": [], "slowest": None, "start_skew": [{"skew_us": float("inf")}]},
    }
    for chunk_count in (1, 7, 8192):
        write_json(report, chunk_count=chunk_count)
        assert capsys.readouterr().out == render_json(report) + "\n"
