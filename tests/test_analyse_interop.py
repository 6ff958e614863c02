"""Interop (docs/formats.md) on a 2-rank gloo capture analysed by npuprof: what Ascend's
msprof-analyze makes of it, mode by mode (`cluster -m all`, `advisor all`, `advisor computation`, `compare`),
and HolisticTraceAnalysis on the raw traces. Every tool is judged by the files it writes (msprof-analyze
exits 0 when it fails), and by what its own readers find in npuprof's files.

Point NPUPROF_MSPROF_ANALYZE at the msprof-analyze executable and NPUPROF_HTA_PYTHON at a Python that has
HolisticTraceAnalysis (`eval "$(.ci/interop.sh)"` builds such a side environment and prints both). A tool
that is missing is never skipped silently: a warning names it in the warnings summary, and the skip reason
is listed in the short summary (-ra)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest
from analyse_support.recipes import msprof_analyze as _msprof
from analyse_support.recipes import python_of as _python_of
from analyse_support.recipes import run_forked
from conftest import npuprof

from npuprof.analysis.synthetic import write_synthetic_trace

pytestmark = [pytest.mark.interop, pytest.mark.torchrun]


class InteropToolMissing(pytest.PytestWarning):
    """An interop tool is not installed here: its checks are skipped (set up by .ci/interop.sh)."""


def _hta_python() -> str | None:
    candidate = os.environ.get("NPUPROF_HTA_PYTHON") or sys.executable
    probe = subprocess.run([candidate, "-c", "import hta.trace_analysis"], capture_output=True, timeout=120)
    return candidate if probe.returncode == 0 else None


MSPROF_ABSENT = (
    "msprof-analyze not installed (pip install msprof-analyze 'pandas<3', or set "
    "NPUPROF_MSPROF_ANALYZE; .ci/interop.sh does both): its interop checks are SKIPPED"
)
HTA_ABSENT = (
    "HolisticTraceAnalysis not importable (pip install HolisticTraceAnalysis 'pandas<3', or set "
    "NPUPROF_HTA_PYTHON; .ci/interop.sh does both): its interop checks are SKIPPED"
)
# decided before the (slow) capture fixture runs; said out loud when a tool is missing
MSPROF, HTA = _msprof(), _hta_python()
for _absent, _reason in ((MSPROF is None, MSPROF_ABSENT), (HTA is None, HTA_ABSENT)):
    if _absent:
        warnings.warn(InteropToolMissing(_reason), stacklevel=1)
needs_msprof = pytest.mark.skipif(MSPROF is None, reason=MSPROF_ABSENT)
needs_hta = pytest.mark.skipif(HTA is None, reason=HTA_ABSENT)


@pytest.fixture(scope="module")
def result(torchrun_capture: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("interop") / "out"
    shutil.copytree(torchrun_capture, out)
    parsed = npuprof("analyse", str(out), "--format", "json")
    assert parsed.returncode == 0, parsed.stderr
    return out


def _rank_dirs(result: Path) -> list[Path]:
    """The rank dirs, by rank (from profiler_info_{rank}.json)."""
    dirs = {
        int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1]): d
        for d in result.glob("*_ascend_pt")
    }
    return [dirs[r] for r in sorted(dirs)]


def _msprof_run(*args: str, cwd: Path) -> str:
    """msprof-analyze with its workers forked (analyse_support/recipes.py, run_forked): the same code on the
    same files, without a fresh interpreter for each worker."""
    assert MSPROF is not None
    return run_forked(MSPROF, *args, cwd=cwd, timeout=600)


_NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
}


def read_xlsx(path: Path) -> dict[str, list[list[str]]]:
    """Sheet name -> rows of cell texts, read with the standard library (no openpyxl in either venv)."""
    m = "{" + _NS["m"] + "}"
    with zipfile.ZipFile(path) as z:
        shared: list[str] = []
        if "xl/sharedStrings.xml" in z.namelist():
            for si in ElementTree.fromstring(z.read("xl/sharedStrings.xml")).findall("m:si", _NS):
                shared.append("".join(t.text or "" for t in si.iter(m + "t")))
        rels = ElementTree.fromstring(z.read("xl/_rels/workbook.xml.rels"))
        target = {r.get("Id"): r.get("Target", "") for r in rels}
        sheets: dict[str, list[list[str]]] = {}
        for sheet in ElementTree.fromstring(z.read("xl/workbook.xml")).find("m:sheets", _NS) or []:
            name = target[sheet.get("{" + _NS["r"] + "}id")].lstrip("/")
            rows = []
            for row in ElementTree.fromstring(z.read(name if name.startswith("xl/") else "xl/" + name)).iter(
                m + "row"
            ):
                cells = []
                for c in row.findall("m:c", _NS):
                    v, inline = c.find("m:v", _NS), c.find("m:is", _NS)
                    if c.get("t") == "s" and v is not None:
                        cells.append(shared[int(v.text or 0)])
                    elif inline is not None:
                        cells.append("".join(t.text or "" for t in inline.iter(m + "t")))
                    else:
                        cells.append(v.text or "" if v is not None else "")
                rows.append(cells)
            sheets[sheet.get("name", "")] = rows
    return sheets


def _one(pattern: str, where: Path) -> Path:
    found = sorted(where.glob(pattern))
    assert len(found) == 1, (pattern, sorted(p.name for p in where.rglob("*")))
    return found[0]


# ---- msprof-analyze ----------------------------------------------------------------------------------------
@needs_msprof
def test_msprof_analyze_cluster(result: Path, tmp_path: Path) -> None:
    assert MSPROF is not None
    work = tmp_path / "cluster"
    shutil.copytree(result, work)
    # the executable itself, as a user runs it (its workers spawned): the one check of `cluster -m all` so
    proc = subprocess.run(
        [MSPROF, "cluster", "-d", str(work), "-m", "all", "--force"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    log = proc.stdout + proc.stderr
    table = work / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    assert table.is_file(), log[-3000:]
    with open(table, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((int(r["Index"]), int(float(r["Step"]))) for r in rows if r["Type"] == "rank") == [
        (0, 3),
        (0, 4),
        (1, 3),
        (1, 4),
    ]
    assert all(float(r["Computing"]) > 0 for r in rows)
    assert (work / "cluster_analysis_output" / "cluster_communication.json").is_file()


_TIMELINE_PROBE = """
import json, sys
from msprof_analyze.advisor.dataset.timeline_event_dataset import ScheduleAnalysisDataset
data = ScheduleAnalysisDataset(sys.argv[1], {})
print(json.dumps({"steps": [e.name for e in data.profiler_step], "aten": len(data.aten or []),
                  "events": data.dataset_len}))
"""


@needs_msprof
def test_msprof_advisor_all_finds_the_steps_and_operators(result: Path, tmp_path: Path) -> None:
    rank0 = shutil.copytree(_rank_dirs(result)[0], tmp_path / _rank_dirs(result)[0].name)
    out = tmp_path / "advisor"
    log = _msprof_run("advisor", "all", "-d", str(rank0), "-o", str(out), "-l", "en", "--force", cwd=tmp_path)
    assert "Do analysis error" not in log, log[-3000:]
    _one("mstt_advisor_*.html", out)
    sheets = read_xlsx(_one("log/mstt_advisor_*.xlsx", out))
    overall = {row[0].strip(): row[1:] for row in sheets["Overall Summary"][1:] if row}
    assert float(overall["Computing Time"][0]) > 0  # from the Overlap Analysis lanes
    e2e = re.search(r"E2E Time is ([\d.]+)ms", json.dumps(sheets["problems"]))
    assert e2e and float(e2e.group(1)) > 0
    # what its own timeline reader finds in trace_view.json: the steps and the operators. (Its progress bar,
    # "Building dataset for timeline analysis: Nit", says the same, but only when it happens to be drawn;
    # given an object instead of a bare array that reader sees no event at all: "0it".)
    python = _python_of(MSPROF)
    assert python is not None
    probe = subprocess.run(
        [python, "-c", _TIMELINE_PROBE, str(rank0)], capture_output=True, text=True, timeout=600
    )
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["steps"] == ["ProfilerStep#3", "ProfilerStep#4"]
    assert found["aten"] > 10 and found["events"] > 100


@needs_msprof
def test_msprof_advisor_sums_up_a_bare_traces_tables(result: Path, tmp_path: Path) -> None:
    """`npuprof analyse trace.json` writes its tables to `trace.json.npuprof/`, where the advisor found no
    profiling data for its Overall Summary (no profiler_info* file) and wrote none."""
    from npuprof.results import layout

    raw = layout.find_raw_trace(_rank_dirs(result)[0])
    assert raw is not None
    bare = Path(shutil.copy(raw, tmp_path / raw.name))
    parsed = npuprof("analyse", str(bare))
    assert parsed.returncode == 0, parsed.stderr
    out = tmp_path / "advisor"
    tables = tmp_path / f"{bare.name}.npuprof"
    log = _msprof_run(
        "advisor", "all", "-d", str(tables), "-o", str(out), "-l", "en", "--force", cwd=tmp_path
    )
    assert "Do analysis error" not in log, log[-3000:]
    sheets = read_xlsx(_one("log/mstt_advisor_*.xlsx", out))
    assert "Overall Summary" in sheets, sorted(sheets)
    overall = {row[0].strip(): row[1:] for row in sheets["Overall Summary"][1:] if row}
    assert float(overall["Computing Time"][0]) > 0


@needs_msprof
def test_msprof_advisor_computation_runs(result: Path, tmp_path: Path) -> None:
    rank0 = shutil.copytree(_rank_dirs(result)[0], tmp_path / _rank_dirs(result)[0].name)
    out = tmp_path / "computation"
    log = _msprof_run(
        "advisor", "computation", "-d", str(rank0), "-o", str(out), "-l", "en", "--force", cwd=tmp_path
    )
    assert "Do analysis error" not in log, log[-3000:]
    assert "No valid op info" not in log  # kernel_details.csv has the CPU's tasks
    _one("mstt_advisor_*.html", out)
    sheets = read_xlsx(_one("log/mstt_advisor_*.xlsx", out))
    assert len(sheets["problems"]) > 1


@needs_msprof
@pytest.mark.parametrize("module", [True, False], ids=["modules", "operators"])
def test_msprof_compare_fills_its_sheets(result: Path, tmp_path: Path, module: bool) -> None:
    base, other = _rank_dirs(result)
    out = tmp_path / "compare"
    out.mkdir()
    flags = [] if module else ["--disable_module"]
    log = _msprof_run(
        "compare", "-d", str(base), "-bp", str(other), "-o", str(out), "--force", *flags, cwd=tmp_path
    )
    sheets = read_xlsx(_one("performance_comparison_result_*.xlsx", out))
    data = {name: rows[2:] for name, rows in sheets.items()}  # below the two header rows
    overall = {row[0].strip(): row for row in data["OverallMetrics"] if row}
    assert float(overall["Computing Time"][1]) > 0 and float(overall["Computing Time"][4]) > 0, log[-2000:]
    assert "Uncovered Communication Time" in overall
    # operators: by nn.Module when the traces hold python_function spans, else one by one
    operators = data["ModuleCompare"] if module else data["OperatorCompare"]
    assert sum("aten::linear" in row for row in operators) >= 2
    assert len(data["MemoryCompare"]) > 5 and len(data["ApiCompare"]) > 5
    (allreduce,) = [row for row in data["CommunicationCompare"] if "allreduce" in row]
    assert int(allreduce[3]) >= 4  # the calls of the base rank: 4 gradients a step, 2 steps


# ---- HolisticTraceAnalysis ---------------------------------------------------------------------------------
@needs_hta
def test_hta_loads_the_raw_traces(result: Path, tmp_path: Path) -> None:
    # the raw traces where npuprof left them, named one by one (trace_files=): HTA would take every *.json
    # and *.gz of a directory, trace_view.json and the summaries included
    traces = [str(next(d.glob("*.pt.trace.json*"))) for d in _rank_dirs(result)]
    # HTA's temporal breakdown needs GPU kernels: check it on synthetic CUDA-style traces of two ranks
    cuda = tmp_path / "cuda"
    cuda.mkdir()
    for rank in (0, 1):
        write_synthetic_trace(cuda / f"r{rank}.pt.trace.json", 1, rank=rank)
    script = (
        "import json, sys\nfrom hta.trace_analysis import TraceAnalysis\n"
        "a = TraceAnalysis(trace_files=json.loads(sys.argv[1]))\n"
        "cpu_ranks = sorted(int(r) for r in a.t.get_ranks())\n"
        "steps = [int(s) for s in a.get_profiler_steps()]\n"
        "b = TraceAnalysis(trace_dir=sys.argv[2])\n"
        "df = b.get_temporal_breakdown(visualize=False)\n"
        "print(json.dumps([cpu_ranks, steps, sorted(int(r) for r in df['rank'].tolist()), "
        "float(df['compute_time(us)'].min())]))\n"
    )
    assert HTA is not None
    files = json.dumps(traces)  # a list: HTA takes each file's rank from its distributedInfo
    proc = subprocess.run([HTA, "-c", script, files, str(cuda)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cpu_ranks, steps, cuda_ranks, compute = json.loads(proc.stdout.strip().splitlines()[-1])
    assert cpu_ranks == [0, 1] and cuda_ranks == [0, 1] and compute > 0
    assert steps  # HTA leaves out the last step: what is left of 3 and 4
