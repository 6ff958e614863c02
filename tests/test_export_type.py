"""--export-type text|db|text,db from the user to the parse call, on every backend: the flag and config-file
forms, the capture job that carries it to the post-processor, the keyword torch_npu receives (the stand-in
of tests/fake_torch_npu, loaded in this process without its torch-patching package), `npuprof analyse
--export-type`, and analyse's rule for a run where only some rank dirs have a profiler db. The db files
themselves are npuprof/analysis/db_export.py's (tested with it); here parse_rank_dir is replaced by a
recorder of what it was asked."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import clean_env

from npuprof import config as c
from npuprof.analysis import report
from npuprof.analysis.parse import ParseOutcome
from npuprof.cli import run_flags
from npuprof.options import BY_KEY, TORCH_NPU_ONLY_OPTIONS
from npuprof.results import handover, layout, postprocess

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "fake_torch_npu" / "torch_npu"
FIX = "use text, db or text,db"


# ---- the values ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("text", "text"),
        ("db", "db"),
        ("text,db", "text,db"),
        ("db,text", "text,db"),
        ("DB", "db"),
        ("Text", "text"),
        ("TEXT, db", "text,db"),
        (" db ,  Text ", "text,db"),
    ],
)
def test_every_spelling_of_the_flag_is_one_normal_form(given: str, normal: str) -> None:
    cfg = run_flags.build_config(None, {"export_type": given})
    assert cfg.export_type == normal
    assert cfg.export_db is (normal != "text")


@pytest.mark.parametrize("bad", ["xml", "csv", "", "text,", "text;db", "text,db,xml", "d b"])
def test_a_bad_flag_value_is_one_line_naming_the_flag_and_the_fix(bad: str) -> None:
    with pytest.raises(c.ConfigError) as caught:
        run_flags.build_config(None, {"export_type": bad})
    line = caught.value.one_line()
    assert line == f"--export-type: unknown type {bad!r}; {FIX}"
    assert "\n" not in line


def test_a_bad_value_set_on_the_config_itself_is_refused_by_validate() -> None:
    with pytest.raises(
        c.ConfigError, match=r"^--export-type: unknown type 'db,text'; use text, db or text,db$"
    ):
        c.ProfileConfig(export_type="db,text").validate()  # only the normal form is a value of the field


@pytest.mark.parametrize(
    ("value", "normal"),
    [
        ("text", "text"),
        ("db", "db"),
        (["db"], "db"),
        (["text", "db"], "text,db"),
        (["DB", "text"], "text,db"),
        ("db,text", "text,db"),
        # anything else falls back to text, as torch_npu's _ExperimentalConfig resets it
        ("xml", "text"),
        (["text", "xml"], "text"),
        ([], "text"),
        (5, "text"),
        (None, "text"),
    ],
)
def test_config_file_export_type(tmp_path: Path, value: Any, normal: str) -> None:
    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps({"experimental_config": {"export_type": value}}))
    assert c.load_config_file(path).validate().export_type == normal


@pytest.mark.parametrize("value", ["csv", "dbb", ["text", "sqlite"], [], 5])
def test_a_config_file_export_type_that_falls_back_to_text_is_said(tmp_path: Path, value: Any) -> None:
    """helper-130: `"export_type": "csv"` (or a typo of db) was read as text without a word, while every
    other unknown key or value of the file is named: the db the user asked for was silently not written."""
    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps({"experimental_config": {"export_type": value}}))
    heard: list[str] = []
    assert c.load_config_file(path, warn=heard.append).validate().export_type == "text"
    assert len(heard) == 1 and "experimental_config.export_type" in heard[0], heard
    assert json.dumps(value) in heard[0] and "text" in heard[0], heard
    for fine in ("db", ["text", "db"], None):  # a null, as a template may hold it: the default, unsaid
        path.write_text(json.dumps({"experimental_config": {"export_type": fine}}))
        heard.clear()
        c.load_config_file(path, warn=heard.append)
        assert heard == [], (fine, heard)


def test_trigger_writes_both_types_as_the_list_torch_npu_reads_and_reads_it_back() -> None:
    for normal, written in (("text", "text"), ("db", "db"), ("text,db", ["text", "db"])):
        cfg = c.ProfileConfig(export_type=normal)
        document = c.json_from_config(cfg)
        assert document["experimental_config"]["export_type"] == written
        assert c.config_from_json(document, "f").export_type == normal
        assert c.ProfileConfig.from_payload(cfg.to_payload()).export_type == normal


def test_profiler_info_names_both_types_as_a_list() -> None:
    # msprof-analyze releases that read the type from profiler_info take a list holding "db" as db data
    # and a string only as itself ("text,db" would be neither)
    assert c.ProfileConfig().experimental_config()["_export_type"] == "text"
    assert c.ProfileConfig(export_type="db").experimental_config()["_export_type"] == "db"
    assert c.ProfileConfig(export_type="text,db").experimental_config()["_export_type"] == ["text", "db"]


def test_the_option_is_no_longer_torch_npu_only() -> None:
    from npuprof.agent.backends.torch_backend import TorchBackend

    assert BY_KEY["export_type"] not in TORCH_NPU_ONLY_OPTIONS
    backend = TorchBackend.__new__(TorchBackend)
    backend.use_cuda, backend.name = False, "torch-cpu"
    for value in ("db", "text,db"):
        ignored = backend.ignored_flags(run_flags.build_config(None, {"export_type": value}))
        assert not [line for line in ignored if "--export-type" in line]


def test_npuprof_run_with_a_bad_type_exits_2_with_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "npuprof", "run", "--export-type", "xml", "--", sys.executable, "-c", "pass"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == f"npuprof run: error: --export-type: unknown type 'xml'; {FIX}\n"
    assert not (tmp_path / c.DEFAULT_OUTPUT).exists()


# ---- the capture job ----------------------------------------------------------------------------------
def _job(**fields: Any) -> handover.CaptureJob:
    return handover.CaptureJob(
        rank_dir="/r/w_1_20250101000000000_ascend_pt",
        record=handover.CaptureRecord(status="complete"),
        analyse=True,
        **fields,
    )


def test_capture_job_carries_export_db_and_a_version_1_job_without_it_still_reads() -> None:
    for export_db in (False, True):
        assert handover.job_from_line(handover.job_line(_job(export_db=export_db))).export_db is export_db
    # a job line written before the field existed (same version)
    old = {"rank_dir": "/r", "record": {"status": "complete"}, "analyse": True, "gzip": True, "version": 1}
    job = handover.job_from_line(json.dumps(old).encode())
    assert (job.analyse, job.export_db) == (True, False)
    with pytest.raises(handover.HandoverError, match="damaged"):
        handover.job_from_line(json.dumps({**old, "export_db": "yes"}).encode())


@pytest.mark.parametrize("export_db", [False, True])
def test_the_post_processor_hands_export_db_to_the_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, export_db: bool
) -> None:
    import npuprof.analysis.parse as parse

    asked: list[tuple[Path, bool]] = []

    def parse_rank_dir(
        rank_dir: Path, force: bool = False, workers: int = 1, export_db: bool = False, **_: object
    ):
        asked.append((rank_dir, export_db))
        if export_db:  # as the parser does (a db missing after the parse is a failure: test_db_export.py)
            (rank_dir / "ASCEND_PROFILER_OUTPUT").mkdir()
            (rank_dir / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db").write_bytes(b"")
        return ParseOutcome(rank_dir, "parsed")

    monkeypatch.setattr(parse, "parse_rank_dir", parse_rank_dir)
    rank_dir = tmp_path / "w_1_20250101000000000_ascend_pt"
    rank_dir.mkdir()
    job = handover.CaptureJob(
        rank_dir=str(rank_dir),
        record=handover.CaptureRecord(status="complete"),
        analyse=True,
        export_db=export_db,
    )
    assert postprocess.run_job(job) == 0
    assert asked == [(rank_dir, export_db)]


class _Backend:
    name = "torch-cpu"
    device = "cpu"

    def __init__(self, own_layout: bool, output: Path) -> None:
        self.writes_own_layout = own_layout  # as torch_npu: it makes the rank dir and parses it itself
        self.output = output

    def export_raw(self, prof: Any, rank_dir: Path | None, worker: str) -> tuple[Path, Path | None]:
        if rank_dir is None:
            rank_dir = self.output / "w_1_20250101000000000_ascend_pt"
            rank_dir.mkdir()
            return rank_dir, None
        trace = rank_dir / f"{worker}.1.pt.trace.json"
        trace.write_text('{"traceEvents": []}')
        return rank_dir, trace

    def version_info(self) -> dict[str, str]:
        return {"torch_version": "0"}


class _Post:
    running = True

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []

    def start(self) -> None:
        pass

    def submit(self, job: dict[str, Any]) -> bool:
        self.jobs.append(job)
        return True


class _NoAnnotations:
    def __init__(self, *args: Any) -> None:
        pass

    def begin(self, cfg: Any) -> None:
        pass

    def end(self) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(
    ("export_type", "analyse", "own_layout", "job"),
    [
        ("text", True, False, (True, False)),
        ("db", True, False, (True, True)),
        ("text,db", True, False, (True, True)),
        ("db", False, False, (False, True)),  # nothing parsed now: analyse parses later
        ("db", True, True, (False, False)),  # torch_npu parses, and writes its db itself
    ],
)
def test_the_agent_asks_for_the_db_when_its_own_parser_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    export_type: str,
    analyse: bool,
    own_layout: bool,
    job: tuple[bool, bool],
) -> None:
    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    cfg = c.ProfileConfig(output=str(tmp_path), export_type=export_type, analyse=analyse).validate()
    post = _Post()
    backend = _Backend(own_layout, tmp_path)
    writer = capture.CaptureWriter(cfg, {"run_id": "r"}, backend, AgentLog(None, "t"), lambda: 0, "w", post)
    writer.begin(2)
    writer.finish(None, 4)
    (sent,) = post.jobs
    assert (sent["analyse"], sent["export_db"]) == job
    assert handover.job_from(sent).export_db is job[1]
    # gzip (on by default) is the post-processor's on npuprof's layout alone; the record says the parse asked
    assert (sent["gzip"], sent["record"]["parse"]) == (not own_layout, analyse), sent
    if own_layout:
        return
    (rank_dir,) = layout.find_rank_dirs(tmp_path)
    info = json.loads((rank_dir / "profiler_info_0.json").read_text())
    assert info["config"]["experimental_config"]["_export_type"] == (
        ["text", "db"] if export_type == "text,db" else export_type
    )


def test_a_capture_without_steps_calls_no_step_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window that recorded no whole step (ended before its first boundary): neither end is a partial step
    in its record, as the began-inside and cut-short flags would say; with steps they are (helper-373)."""
    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    for last, flags in ((1, (None, False)), (3, (True, True))):
        output = tmp_path / f"last-{last}"
        cfg = c.ProfileConfig(output=str(output)).validate()
        post = _Post()
        writer = capture.CaptureWriter(
            cfg, {"run_id": "r"}, _Backend(False, output), AgentLog(None, "t"), lambda: 0, "w", post
        )
        writer.begin(2)
        writer.first_step_partial = True
        writer.finish(None, last, last_partial=True)
        (sent,) = post.jobs
        record = sent["record"]
        assert (record.get("first_step_partial"), record.get("last_step_partial")) == flags, record
        assert record["steps"] == list(range(2, last + 1)), record


# ---- torch_npu ----------------------------------------------------------------------------------------
def _standin_profiler(api: str, monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """``torch_npu.profiler``'s experimental-config names from the stand-in's ``api`` release, loaded under a
    private package name: the stand-in's own package would rename torch's PrivateUse1 backend in this
    process."""
    monkeypatch.setenv("FAKE_TORCH_NPU_API", api)
    monkeypatch.delenv("FAKE_TORCH_NPU_LOG", raising=False)
    root = f"_standin_torch_npu_{api.replace('.', '_')}"
    for name, path in ((root, STANDIN), (f"{root}.profiler", STANDIN / "profiler")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        monkeypatch.setitem(sys.modules, name, package)
    module = importlib.import_module(f"{root}.profiler.experimental_config")
    names = ("_ExperimentalConfig", "ProfilerLevel", "AiCMetrics", "ExportType")
    return types.SimpleNamespace(**{n: getattr(module, n) for n in names if hasattr(module, n)})


@pytest.mark.parametrize(
    ("export_type", "keyword", "kept"),
    [("text", "text", ["text"]), ("db", "db", ["db"]), ("text,db", ["text", "db"], ["db", "text"])],
)
def test_torch_npu_receives_its_export_type(
    monkeypatch: pytest.MonkeyPatch, export_type: str, keyword: Any, kept: list[str]
) -> None:
    from npuprof.agent.backends.npu_backend import experimental_kwargs

    tp = _standin_profiler("latest", monkeypatch)
    kwargs, unsupported = experimental_kwargs(c.ProfileConfig(export_type=export_type), tp)
    assert kwargs["export_type"] == keyword  # ExportType.Text == "text", ExportType.Db == "db"
    assert unsupported == []
    # what torch_npu keeps after its own checks (it resets anything it cannot take to text)
    assert sorted(tp._ExperimentalConfig(**kwargs).export_type) == kept


def test_a_release_taking_one_type_reports_both_as_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    from npuprof.agent.backends.npu_backend import experimental_kwargs

    tp = _standin_profiler("6.0.0", monkeypatch)  # export_type: str = "text"
    kwargs, unsupported = experimental_kwargs(c.ProfileConfig(export_type="text,db"), tp)
    assert "export_type" not in kwargs
    assert unsupported == [
        "--export-type text,db (this torch_npu takes one export type, not a list: give text or db)"
    ]
    kwargs, unsupported = experimental_kwargs(c.ProfileConfig(export_type="db"), tp)
    assert (kwargs["export_type"], unsupported) == ("db", [])
    old = _standin_profiler("5.0.0", monkeypatch)  # no export_type, no ExportType
    kwargs, unsupported = experimental_kwargs(c.ProfileConfig(export_type="text,db"), old)
    assert "export_type" not in kwargs
    assert unsupported == ["--export-type text,db (this torch_npu's _ExperimentalConfig has no export_type)"]


@pytest.mark.parametrize(("export_type", "reported"), [("text", True), ("db", False), ("text,db", False)])
def test_op_attr_is_kept_whenever_db_is_exported(
    monkeypatch: pytest.MonkeyPatch, export_type: str, reported: bool
) -> None:
    from npuprof.agent.backends.npu_backend import NpuBackend

    backend = NpuBackend.__new__(NpuBackend)
    backend._tp = _standin_profiler("latest", monkeypatch)
    cfg = c.ProfileConfig(op_attr=True, export_type=export_type).validate()
    ignored = backend.ignored_flags(cfg)
    assert any(line.startswith("--op-attr (") for line in ignored) is reported


# ---- npuprof analyse ----------------------------------------------------------------------------------
def _analyse(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> int:
    from npuprof.cli.main import _run_typer

    monkeypatch.setattr(sys, "argv", ["npuprof", "analyse", *args])
    return _run_typer()


def test_analyse_with_a_bad_type_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _analyse(monkeypatch, capsys, str(tmp_path), "--export-type", "bogus") == 2
    err = capsys.readouterr().err
    assert err == (
        "npuprof analyse: error: Invalid value for --export-type: unknown type 'bogus'; "
        f"{FIX}; see npuprof analyse --help\n"
    )


@pytest.mark.parametrize(
    ("args", "export_db"),
    [
        ((), False),
        (("--export-type", "text"), False),
        (("--export-type", "db"), True),
        (("--export-type", "DB,text"), True),
    ],
)
def test_analyse_hands_its_choice_to_the_report(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    export_db: bool,
) -> None:
    asked: dict[str, Any] = {}

    def build_report(path: Path, **kwargs: Any) -> Any:
        asked.update(kwargs)
        kwargs["on_note"]("2 of 3 rank dirs had no profiler db")
        raise report.NothingToAnalyse("nothing here")

    monkeypatch.setattr(report, "build_report", build_report)
    assert _analyse(monkeypatch, capsys, str(tmp_path), *args) == 1
    assert asked["export_db"] is export_db
    assert (
        capsys.readouterr().err.splitlines()[0]
        == "npuprof analyse: note: 2 of 3 rank dirs had no profiler db"
    )


# ---- the mixed-run rule -------------------------------------------------------------------------------
def _rank_dir(root: Path, rank: int, kind: str) -> Path:
    """A rank dir of ``kind``: "db" (npuprof's, with a profiler db), "text" (npuprof's, without),
    "npu" (parsed by torch_npu, no db) or "npu-db"."""
    d = root / f"w_{rank}_20250101000000000_ascend_pt"
    out = d / layout.PARSED_DIR
    out.mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text("{}")
    if kind.startswith("npu"):
        (out / "step_trace_time.csv").write_text("Step,Computing\n")
    else:
        (d / "w.1.pt.trace.json").write_text('{"traceEvents": []}')
    if kind.endswith("db"):
        (out / f"ascend_pytorch_profiler_{rank}.db").write_bytes(b"")
    return d


ASKED_LOG = "asked.jsonl"


def recording_parse(rank_dir: Path, force: bool = False, workers: int = 1, export_db: bool = False):
    """parse_rank_dir as a recorder (a module-level function: the process pool pickles it by name); one
    line per call, appended to a file so that calls in pool processes are heard too."""
    with open(Path(rank_dir).parent / ASKED_LOG, "a") as f:
        f.write(json.dumps([Path(rank_dir).name, export_db]) + "\n")
    out = Path(rank_dir) / "ASCEND_PROFILER_OUTPUT"
    if export_db and out.is_dir() and not list(out.glob("*.csv")):  # the db, as the parser writes it
        (out / f"ascend_pytorch_profiler_{Path(rank_dir).name.split('_')[1]}.db").write_bytes(b"")
    return ParseOutcome(Path(rank_dir), "failed", "recorded only")


def _asked(root: Path) -> dict[int, bool]:
    lines = (root / ASKED_LOG).read_text().splitlines()
    calls = [json.loads(line) for line in lines]
    asked = {int(name.split("_")[1]): export_db for name, export_db in calls}
    assert len(asked) == len(calls), calls  # each rank dir once
    return asked


def _report(root: Path, monkeypatch: pytest.MonkeyPatch, jobs: int = 1, export_db: bool = False) -> list[str]:
    monkeypatch.setattr(report, "parse_rank_dir", recording_parse)
    notes: list[str] = []
    report.build_report(root, jobs=jobs, export_db=export_db, on_note=notes.append)
    return notes


@pytest.mark.parametrize(
    ("kinds", "export_db", "expected", "notes"),
    [
        # nothing has a db: text only, nothing said
        (["text", "text"], False, {0: False, 1: False}, []),
        # every rank has one: nothing to add
        (["db", "db"], False, {0: False, 1: False}, []),
        # the flag: every rank dir
        (["text", "text", "db"], True, {0: True, 1: True, 2: True}, []),
        # some have a db: the others get one, said once
        (
            ["db", "text", "text"],
            False,
            {0: False, 1: True, 2: True},
            [
                "2 of 3 rank dirs had no profiler db: writing one for each parsed, so that msprof-analyze "
                "reads the whole run (it drops the ranks without one)"
            ],
        ),
        # torch_npu's rank dirs are never written into: msprof-analyze will leave them out
        (
            ["npu-db", "text", "npu"],
            False,
            {0: False, 1: True, 2: False},
            [
                "1 of 3 rank dirs had no profiler db: writing one for each parsed, so that msprof-analyze "
                "reads the whole run (it drops the ranks without one)",
                "1 of 3 rank dirs were parsed by torch_npu without a db (npuprof does not write into them): "
                "msprof-analyze will use only the ranks with a db",
            ],
        ),
        (
            ["npu", "npu"],
            True,
            {0: True, 1: True},
            [
                "2 of 2 rank dirs were parsed by torch_npu without a db (npuprof does not write into them): "
                "torch_npu writes one when the capture runs with --export-type db"
            ],
        ),
    ],
)
def test_a_run_where_some_ranks_have_a_db_gets_one_for_every_rank_npuprof_parses(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kinds: list[str],
    export_db: bool,
    expected: dict[int, bool],
    notes: list[str],
) -> None:
    for rank, kind in enumerate(kinds):
        _rank_dir(tmp_path, rank, kind)
    assert _report(tmp_path, monkeypatch, export_db=export_db) == notes
    assert _asked(tmp_path) == expected


def test_a_parsed_rank_without_its_db_is_parsed_again_in_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # all three parsed already (analyse.done); the one without a db must reach the parser with export_db,
    # the others are answered from their cache without a process
    for rank, kind in enumerate(["db", "text", "db"]):
        (_rank_dir(tmp_path, rank, kind) / layout.PARSED_DIR / layout.ANALYSE_DONE).write_text("")
    notes = _report(tmp_path, monkeypatch, jobs=2)
    assert len(notes) == 1 and notes[0].startswith("1 of 3 rank dirs had no profiler db")
    assert _asked(tmp_path) == {0: False, 1: True, 2: False}


def test_has_profiler_db_takes_the_names_msprof_analyze_takes(tmp_path: Path) -> None:
    d = tmp_path / "w_0_20250101000000000_ascend_pt"
    out = d / layout.PARSED_DIR
    assert not layout.has_profiler_db(d)  # no ASCEND_PROFILER_OUTPUT at all
    out.mkdir(parents=True)
    for name in ("analysis.db", "ascend_pytorch_profiler_x.db", "ascend_pytorch_profiler_0.db.tmp"):
        (out / name).write_bytes(b"")
    (out / "ascend_pytorch_profiler_1.db").symlink_to(out / "analysis.db")
    assert not layout.has_profiler_db(d)
    (out / "ascend_pytorch_profiler.db").write_bytes(b"")
    assert layout.has_profiler_db(d)
    assert [layout.profiler_db_name(r) for r in (None, 0, 12)] == [
        "ascend_pytorch_profiler.db",
        "ascend_pytorch_profiler_0.db",
        "ascend_pytorch_profiler_12.db",
    ]
    assert all(layout.PROFILER_DB_RE.match(layout.profiler_db_name(r)) for r in (None, 0, 12))


@pytest.mark.parametrize("typed", ["gpu", "cuda", "npu", "NPU"])
def test_activities_ignored_on_the_cpu_are_named_as_typed(typed: str) -> None:
    """`npuprof run --activities gpu` on a CPU-only machine was told "ignored on the torch-cpu backend:
    --activities npu", a value the user never wrote (README: a value is named as you wrote it)."""
    from npuprof.agent.backends.torch_backend import TorchBackend

    backend = TorchBackend.__new__(TorchBackend)
    backend.use_cuda, backend.name = False, "torch-cpu"
    ignored = backend.ignored_flags(run_flags.build_config(None, {"activities": typed}))
    assert ignored == [f"--activities {typed} (no accelerator here; the CPU is profiled)"]


def test_an_export_cut_short_by_the_scripts_signal_handler_keeps_its_steps_in_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export of a capture of steps 2-4 cut short by an exception of the script's signal handler
    (raised_by_a_signal_handler: passed on to the script) was abandoned without its steps: its record named
    step 2 alone, where a failed export's names all three."""
    import signal
    import threading

    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog

    class Stop(Exception):
        pass

    def scripts_handler(signum: int, frame: Any) -> None:
        raise Stop("the script's handler")

    class Interrupted(_Backend):
        def export_raw(self, prof: Any, rank_dir: Path | None, worker: str) -> tuple[Path, Path | None]:
            scripts_handler(signal.SIGUSR2, None)  # as it runs between two bytecodes of the export
            raise AssertionError("unreached")

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)
    previous = signal.signal(signal.SIGUSR2, scripts_handler)
    try:
        cfg = c.ProfileConfig(output=str(tmp_path), analyse=False).validate()
        backend = Interrupted(False, tmp_path)
        writer = capture.CaptureWriter(
            cfg, {"run_id": "r"}, backend, AgentLog(None, "t"), lambda: 0, "w", _Post()
        )
        writer.begin(2)
        raised: list[BaseException] = []

        def finish() -> None:  # off the main thread: the script's handlers are not deferred there
            try:
                writer.finish(None, 4)
            except Stop as exc:
                raised.append(exc)

        thread = threading.Thread(target=finish)
        thread.start()
        thread.join(60)
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert len(raised) == 1  # the script's exception reaches the script
    (rank_dir,) = layout.find_rank_dirs(tmp_path)
    record = json.loads((rank_dir / layout.CAPTURE_RECORD).read_text())
    assert (record["status"], record["steps"]) == ("incomplete", [2, 3, 4]), record
    assert "interrupted by the script's signal handler" in record["detail"], record


@pytest.mark.parametrize(
    ("typed", "named"), [(" gpu ", "gpu"), ("gpu , ", "gpu"), (" NPU", "NPU"), (" npu", "npu")]
)
def test_activities_ignored_on_the_cpu_are_named_without_the_spaces_typed(typed: str, named: str) -> None:
    """`npuprof run --activities ' gpu '` was told "ignored on the torch-cpu backend: --activities  gpu  (no
    accelerator ...)": the spaces that parsing drops were kept in the name of what was typed."""
    from npuprof.agent.backends.torch_backend import TorchBackend

    backend = TorchBackend.__new__(TorchBackend)
    backend.use_cuda, backend.name = False, "torch-cpu"
    ignored = backend.ignored_flags(run_flags.build_config(None, {"activities": typed}))
    assert ignored == [f"--activities {named} (no accelerator here; the CPU is profiled)"]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("cpu,gpu", ["the device part of --activities cpu,gpu (no accelerator here)"]),
        ("cuda, CPU", ["the device part of --activities cuda,CPU (no accelerator here)"]),
        ("cpu,npu", []),
        ("cpu", []),
    ],
)
def test_a_device_activity_dropped_beside_the_cpu_is_said(typed: str, said: list[str]) -> None:
    """`npuprof run --activities cpu,gpu` on a machine without an accelerator profiled the CPU alone and
    said nothing of the gpu it dropped (`--activities gpu` alone was said ignored)."""
    from npuprof.agent.backends.torch_backend import TorchBackend

    backend = TorchBackend.__new__(TorchBackend)
    backend.use_cuda, backend.name = False, "torch-cpu"
    assert backend.ignored_flags(run_flags.build_config(None, {"activities": typed})) == said
