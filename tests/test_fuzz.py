"""Fuzzing (issue 9, must-have 5): whatever the user hands npuprof, it answers with its own clear error or a
default, never an uncaught exception.

* ``profiler_config.json`` documents (random, and mutated bytes of a valid one) through the config reader;
* ``npuprof run`` flag values through the fast parser and typer, in-process, and a handful through the CLI;
* trace files (``{"traceEvents": [...]}`` and bare arrays, gzipped or not, truncated, with mutated bytes and
  fields of the wrong type) through every reader: the loader, the tables, the reports' readers, the
  ``npuprof analyse`` report, and a few through the CLI.

The runs are bounded and derandomized (the same examples on every run), so CI is deterministic.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import typer
from _forked_cli import npuprof as forked_npuprof
from conftest import clean_env, npuprof
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from npuprof import runner as npuprof_runner
from npuprof.cli import run_flags
from npuprof.cli.main import get_app
from npuprof.config import ConfigError, ProfileConfig, config_from_json, load_config_file, template_json

# click's UsageError (typer vendors click: reach it through a public class, as npuprof.cli.main does)
USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---- values -------------------------------------------------------------------------------------------
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _one_line(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text


# ---- profiler_config.json ----------------------------------------------------------------------------
def _valid_or_garbage(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(valid, JSON_VALUES)


EXPERIMENTAL = st.fixed_dictionaries(
    {},
    optional={
        "profiler_level": _valid_or_garbage(
            st.sampled_from(["Level0", "Level1", "Level2", "Level_none", "3"])
        ),
        "aic_metrics": _valid_or_garbage(st.sampled_from(["AiCoreNone", "PipeUtilization", "nope"])),
        "l2_cache": _valid_or_garbage(st.booleans()),
        "op_attr": _valid_or_garbage(st.booleans()),
        "gc_detect_threshold": _valid_or_garbage(st.none() | st.floats(-1, 1e3) | st.integers(-1, 10**400)),
        "data_simplification": _valid_or_garbage(st.booleans()),
        "record_op_args": _valid_or_garbage(st.booleans()),
        "export_type": _valid_or_garbage(st.sampled_from(["text", "db", "TEXT", "csv"])),
        "msprof_tx": _valid_or_garbage(st.booleans()),
        "\nunknown": JSON_VALUES,
    },
)
CONFIG_DOCS = st.fixed_dictionaries(
    {},
    optional={
        "activities": _valid_or_garbage(st.lists(st.sampled_from(["CPU", "NPU", "cuda", "tpu"]), max_size=3)),
        "prof_dir": _valid_or_garbage(st.text(max_size=10) | st.sampled_from(["a\x00b", "\ud800", "\udcff"])),
        "analyse": _valid_or_garbage(st.booleans()),
        "record_shapes": _valid_or_garbage(st.booleans()),
        "profile_memory": _valid_or_garbage(st.booleans()),
        "with_stack": _valid_or_garbage(st.booleans()),
        "with_flops": _valid_or_garbage(st.booleans()),
        "with_modules": _valid_or_garbage(st.booleans()),
        "active": _valid_or_garbage(st.integers(-1, 10)),
        "start_step": _valid_or_garbage(st.integers(-1, 10)),
        "is_rank": _valid_or_garbage(st.booleans()),
        "rank_list": _valid_or_garbage(st.lists(st.integers(-1, 2**40), max_size=4)),
        "experimental_config": _valid_or_garbage(EXPERIMENTAL),
        "metadata": _valid_or_garbage(st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3)),
        "min_free_space": _valid_or_garbage(st.sampled_from(["auto", "0", "2G", "3%", "101%", "1e3"])),
        "unknown key": JSON_VALUES,
    },
)


def _config_outcome(build: Any) -> ProfileConfig | ConfigError:
    """What building a config gave: the config (validated), or the ConfigError, which must be one line."""
    try:
        cfg = build()
        cfg.validate()
    except ConfigError as exc:
        assert _one_line(exc.one_line()), exc.one_line()
        return exc
    json.dumps(cfg.to_payload())  # what the launcher hands every process must serialise
    return cfg


@FUZZ
@given(doc=st.one_of(CONFIG_DOCS, JSON_VALUES))
def test_config_documents_give_a_config_or_a_config_error(doc: Any) -> None:
    _config_outcome(lambda: config_from_json(doc, "profiler_config.json"))


def _mutated(data: bytes, cut: float | None, flips: list[tuple[int, int]]) -> bytes:
    """``data`` truncated at a fraction of its length, then with bytes replaced (at offsets modulo its
    length)."""
    if cut is not None:
        data = data[: int(len(data) * cut)]
    buf = bytearray(data)
    for where, value in flips:
        if buf:
            buf[where % len(buf)] = value
    return bytes(buf)


CUTS = st.none() | st.floats(0, 1)
FLIPS = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4)
# most traces whole (so that the tables see odd events), the rest truncated or mutated or both
DAMAGE = st.sampled_from(["none", "none", "none", "cut", "flips", "both"])
CONFIG_TEXTS = st.one_of(
    st.builds(lambda doc, indent: json.dumps(doc, indent=indent), CONFIG_DOCS, st.sampled_from([None, 2])),
    st.sampled_from(
        [
            json.dumps(template_json()),
            '{"experimental_config": {"gc_detect_threshold": NaN}}',
            '{"active": Infinity}',
            "[" * 5000 + "]" * 5000,
            '{"metadata": ' + '{"a": ' * 3000 + "1" + "}" * 3001,
            "\ufeff{}",
            "",
        ]
    ),
)


@FUZZ
@given(text=CONFIG_TEXTS, cut=CUTS, flips=FLIPS)
def test_config_files_give_a_config_or_a_config_error(text: str, cut: float | None, flips: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profiler_config.json"
        path.write_bytes(_mutated(text.encode("utf-8", "surrogatepass"), cut, flips))
        _config_outcome(lambda: load_config_file(path))
        # the same file as `npuprof run --config FILE` reads it, with flags on top
        _config_outcome(lambda: run_flags.build_config(path, {"active": 2, "ranks": "0"}))


def test_min_free_space_of_400_digits_is_a_config_error() -> None:
    outcome = _config_outcome(lambda: config_from_json({"min_free_space": "9" * 400}, "profiler_config.json"))
    assert isinstance(outcome, ConfigError) and "larger than any disk" in outcome.one_line()


def test_config_file_that_is_no_file_or_too_big(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.json", Path("/dev/zero")):
        outcome = _config_outcome(lambda p=path: load_config_file(p))
        assert isinstance(outcome, ConfigError) and "--config" in outcome.one_line()


# ---- npuprof run flags ---------------------------------------------------------------------------------
FLAG_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["0", "1", "-1", "all", "0,3-5", "5-3", "0-99999999999999", "1e3", "nan", "inf", ""]),
    st.sampled_from(["cpu", "npu", "cuda,cpu", "none", "Level2", "db", "TEXT", "PipeUtilization"]),
    st.sampled_from(["m:f", "a.b:C.d", ":x", "m:", "m:1x", "a=b", "=b", "k=", "html", ".json.gz", "auto"]),
    st.integers(-5, 10**30).map(str),
)
VALUED = sorted(
    k for k, (_, kind) in run_flags.OPTIONS.items() if not isinstance(kind, bool) and k != "--config"
)
SWITCHES = sorted(k for k, (_, kind) in run_flags.OPTIONS.items() if isinstance(kind, bool))
FLAG_TOKENS = st.one_of(
    st.tuples(st.sampled_from(VALUED), FLAG_TEXT).map(list),
    st.tuples(st.sampled_from(VALUED), FLAG_TEXT).map(lambda kv: [f"{kv[0]}={kv[1]}"]),
    st.sampled_from(SWITCHES).map(lambda s: [s]),
    st.sampled_from(["--bogus", "-x", "--", "--help"]).map(lambda s: [s]),
)
ARGVS = st.lists(FLAG_TOKENS, max_size=6).map(lambda parts: [t for p in parts for t in p])


@FUZZ
@given(argv=ARGVS)
def test_run_flags_fast_path_gives_a_config_or_a_config_error(argv: list[str]) -> None:
    parsed = run_flags.parse_fast([*argv, "--", "python", "-c", "pass"])
    if parsed is None:
        return  # typer decides (below)
    flags, config, command = parsed
    assert config is None and command[-1] == "pass"
    _config_outcome(lambda: run_flags.build_config(None, flags))


@contextlib.contextmanager
def _no_execution() -> Iterator[list[ProfileConfig]]:
    """`npuprof run` in-process up to the point where it would start the command."""
    seen: list[ProfileConfig] = []

    def fake_execute(cfg: ProfileConfig, command: list[str]) -> int:
        seen.append(cfg)
        return 0

    with mock.patch.object(npuprof_runner, "execute", fake_execute):
        yield seen


@functools.cache
def _typer_run_command() -> Any:
    """typer's `run` command, built once, as one `npuprof` process builds it (building it is most of the
    cost of an example)."""
    return typer.main.get_command(get_app()).commands["run"]


@FUZZ
@given(argv=ARGVS)
def test_run_flags_typer_path_gives_a_config_or_a_usage_error(argv: list[str]) -> None:
    """And where the fast path takes the flags, both paths agree (same config, or both refuse)."""
    full = [*argv, "--", "python", "-c", "pass"]
    command = _typer_run_command()
    stderr = io.StringIO()
    with (
        _no_execution() as seen,
        contextlib.redirect_stderr(stderr),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        try:
            command.main(full, prog_name="npuprof run", standalone_mode=False)
        except typer.Exit as exc:
            assert exc.exit_code in (0, 2)
            if exc.exit_code == 2:
                assert _one_line(stderr.getvalue()), stderr.getvalue()
        except USAGE_ERROR:
            pass  # becomes one line and exit code 2 in npuprof.cli.main
    parsed = run_flags.parse_fast(full)
    if parsed is not None:
        fast = _config_outcome(lambda: run_flags.build_config(None, parsed[0]))
        typer_payload = seen[0].to_payload() if seen else None
        assert (fast.to_payload() if isinstance(fast, ProfileConfig) else None) == typer_payload


CLI_CASES = [
    ["--ranks", "0-99999999999999"],
    ["--ranks", "1-0"],
    ["--active", "0"],
    ["--level", "9"],
    ["--aic-metrics", "Nope"],
    ["--step-on", "not a module"],
    ["--metadata", "novalue"],
    ["--config", "/dev/zero"],
    ["--gc-detect-threshold", "-1"],
    ["--memory-timeline", "svg", "--profile-memory", "--record-shapes", "--with-stack"],
]


@pytest.mark.parametrize("flags", CLI_CASES, ids=[" ".join(c) for c in CLI_CASES])
def test_run_cli_bad_values_are_one_line_and_exit_2(flags: list[str], tmp_path: Path) -> None:
    result = npuprof("run", "-o", str(tmp_path / "out"), *flags, "--", sys.executable, "-c", "pass")
    assert result.returncode == 2, result.stderr
    assert _one_line(result.stderr) and result.stderr.startswith("npuprof run: error: "), result.stderr
    assert not (tmp_path / "out").exists()


def test_run_cli_config_file_with_garbage_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for index, text in enumerate(
        ['{"rank_list": [1], "is_rank": 1}', "[" * 5000, '{"prof_dir": "a\\u0000b"}']
    ):
        config = tmp_path / f"config{index}.json"
        config.write_text(text)
        result = npuprof("run", "--config", str(config), "--", sys.executable, "-c", "pass", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert _one_line(result.stderr) and str(config) in result.stderr, result.stderr


# ---- traces --------------------------------------------------------------------------------------------
CATS = [
    "cpu_op",
    "cpu_op",
    "user_annotation",
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "cuda_runtime",
    "cuda_driver",
    "cpu_instant_event",
    "python_function",
    "ac2g",
    "fwdbwd",
    "Trace",
    "something_else",
    "",
]
NAMES = [
    "ProfilerStep#1",
    "ProfilerStep#2",
    "ProfilerStep#2",
    "ProfilerStep#x",
    "ProfilerStep#99999999999999999999999",
    "aten::mm",
    "aten::add",
    "record_param_comms",
    "gloo:all_reduce",
    "nccl:all_reduce",
    "ncclDevKernel_AllReduce",
    "cudaLaunchKernel",
    "[memory]",
    "process_name",
    "thread_name",
    "",
    'a"},{"b',  # an event boundary inside a string
]
SMALL_INTS = st.integers(-2, 20)
# args of the types the profiler writes for each key, with odd values
ARG_VALUES = {
    "External id": SMALL_INTS,
    "correlation": SMALL_INTS,
    "stream": SMALL_INTS,
    "device": SMALL_INTS,
    "bytes": SMALL_INTS,
    "Addr": SMALL_INTS,
    "Device Type": st.sampled_from([0, 1, 20, 7, -1]),
    "Device Id": SMALL_INTS,
    "grid": st.lists(st.integers(0, 8), max_size=3) | st.none(),
    "Input Dims": st.lists(
        st.lists(st.integers(-1, 9), max_size=3) | st.lists(st.lists(st.integers(0, 4))), max_size=3
    ),
    "Input type": st.lists(st.sampled_from(["float", "c10::BFloat16", "", "Long"]), max_size=2),
    "Call stack": st.text(max_size=20) | st.lists(st.text(max_size=8), max_size=3),
    "Total Allocated": st.integers(-(2**40), 2**40) | st.floats(-1e12, 1e12),
    "Total Reserved": st.integers(0, 2**40),
    "Bytes": st.integers(-(2**30), 2**30),
    "Collective name": st.sampled_from(["allreduce", "recv", "barrier", "send", ""]),
    "In msg nelems": st.integers(0, 10**6),
    "Out msg nelems": st.integers(0, 10**6),
    "dtype": st.sampled_from(["Float", "BFloat16", "weird"]),
    "Process Group Name": st.sampled_from(["0", "1", ""]),
    "Process Group Ranks": st.sampled_from(["[0, 1]", "[", '[0, "x"]', "{}"])
    | st.lists(SMALL_INTS, max_size=3),
    "name": st.sampled_from(["python3", "GPU 0", "Spans", "stream 7"]),
    # objects in a list look like event boundaries ("},{") inside an event
    "Concrete Inputs": st.lists(st.dictionaries(st.sampled_from(["ts", "ph", "x"]), SMALL_INTS), max_size=3),
}
ARGS = st.fixed_dictionaries({}, optional=ARG_VALUES)
# well-typed fields (what msgspec's event structs accept), with odd values: negative and huge times,
# unknown categories and phases, names that look like steps but are not
TYPED_FIELDS = {
    "ph": st.sampled_from(["X", "X", "X", "i", "I", "M", "s", "f", "t", "B", ""]),
    "cat": st.sampled_from(CATS),
    "name": st.sampled_from(NAMES) | st.text(max_size=6),
    "ts": st.floats(-10, 3000) | st.sampled_from([0.0, 4e15, -4e15]),  # huge, within trace_loader.TIME_LIMIT
    "dur": st.floats(-10, 1500) | st.sampled_from([0.0, 2e15]),  # huge, within its DURATION_LIMIT
    "pid": st.sampled_from([0, 100, 101, "Spans", "stream 7"]),
    "tid": st.sampled_from([0, 7, 100, 101, "stream 7"]),
    "id": SMALL_INTS | st.text(max_size=3),
    "s": st.just("t"),
    "args": ARGS,
}
TYPED_EVENTS = st.fixed_dictionaries({}, optional=TYPED_FIELDS)
# fields and args of any JSON type: ts as a string, ph missing or a number, nested garbage
ANY_EVENTS = st.fixed_dictionaries(
    {},
    optional={
        **{key: _valid_or_garbage(value) for key, value in TYPED_FIELDS.items()},
        "args": _valid_or_garbage(
            st.dictionaries(st.sampled_from(sorted(ARG_VALUES)), JSON_VALUES, max_size=4)
        ),
    },
)
DISTRIBUTED = st.fixed_dictionaries(
    {},
    optional={
        "rank": _valid_or_garbage(st.integers(0, 3)),
        "world_size": _valid_or_garbage(st.sampled_from([1, 2, 10**12, -1])),
        "backend": JSON_VALUES,
        "pg_config": _valid_or_garbage(
            st.lists(
                st.fixed_dictionaries(
                    {"pg_name": _valid_or_garbage(st.just("0"))},
                    optional={"pg_desc": st.just("default_pg"), "ranks": _valid_or_garbage(st.just([0, 1]))},
                ),
                max_size=2,
            )
        ),
    },
)
META = st.fixed_dictionaries(
    {},
    optional={
        "schemaVersion": JSON_VALUES,
        "distributedInfo": _valid_or_garbage(DISTRIBUTED),
        "deviceProperties": JSON_VALUES,
        "traceName": JSON_VALUES,
    },
)
# half the traces have well-typed events only (they reach the tables); the others also hold events of the
# wrong shape, and values that are no event at all
EVENT_LISTS = st.one_of(
    st.lists(TYPED_EVENTS, max_size=30),
    st.lists(st.one_of(TYPED_EVENTS, TYPED_EVENTS, TYPED_EVENTS, ANY_EVENTS, JSON_VALUES), max_size=20),
)


@st.composite
def trace_files(draw: st.DrawFn) -> tuple[bytes, bool]:
    """(bytes of a trace file, gzipped?): an object with traceEvents (keys before and after it) or a bare
    array of events, possibly truncated, mutated, gzipped (and truncated after gzipping)."""
    events = draw(EVENT_LISTS)
    if draw(st.sampled_from(["array", "object", "object"])) == "array":
        doc: Any = events
    else:
        before, after = draw(META), draw(META)
        doc = {**before, "traceEvents": events, **{k: v for k, v in after.items() if k not in before}}
    damage = draw(DAMAGE)
    cut = draw(st.floats(0, 1)) if damage in ("cut", "both") else None
    flips = draw(FLIPS.filter(bool)) if damage in ("flips", "both") else []
    data = _mutated(json.dumps(doc, indent=draw(st.sampled_from([None, 1]))).encode(), cut, flips)
    gz = draw(st.booleans())
    if gz:
        data = gzip.compress(data, mtime=0)
        data = _mutated(data, draw(st.none() | st.none() | st.floats(0.5, 1)), [])
    return data, gz


def _events_read(reader: Any, ranges: list[tuple[int, int]] | None = None) -> list[tuple[Any, ...]] | None:
    """Every event ``reader`` gives (of each byte range, in order, when given), as comparable tuples;
    None when it raises TraceError."""
    from npuprof.analysis.trace_loader import TraceError

    chunks = reader if ranges is None else (c for a, z in ranges for c in reader.iter_range(a, z))
    try:
        return [
            (e.name, e.ph, e.cat, e.ts, e.dur, e.pid, e.tid, e.id, bytes(e.args))
            for c in chunks
            for e in c.events
        ]
    except TraceError:
        return None


def _write_trace(tmp: Path, data: bytes, gz: bool) -> Path:
    path = tmp / ("host.1.pt.trace.json" + (".gz" if gz else ""))
    path.write_bytes(data)
    return path


@settings(FUZZ, max_examples=60)
@given(trace=trace_files())
def test_trace_readers_raise_only_their_own_errors(trace: tuple[bytes, bool]) -> None:
    from npuprof.analysis.parse import write_outputs
    from npuprof.analysis.trace_loader import TraceError, load_trace
    from npuprof.reports import memory_timeline as mt
    from npuprof.reports import stacks
    from npuprof.reports.trace_events import TraceReadError, load_events

    with tempfile.TemporaryDirectory() as tmp:
        path = _write_trace(Path(tmp), *trace)
        with contextlib.suppress(TraceError):
            for loaded in load_trace(path).events:
                loaded.args_dict()
        out = Path(tmp) / "tables"
        out.mkdir()
        for workers in (1, 2):
            try:
                write_outputs(path, out, None, workers)
                event("the tables were written")
            except TraceError as exc:
                event(f"the trace is {exc.kind}")
        with contextlib.suppress(TraceReadError):
            load_events(path)
        for metric in stacks.METRICS:
            with contextlib.suppress(TraceReadError, stacks.StacksError):
                stacks.folded_from_trace(path, metric).text()
        with contextlib.suppress(TraceReadError, mt.MemoryTimelineError):
            data = mt.load(path)
            mt.render(data, Path(tmp) / "memory.json.gz")


@settings(FUZZ, max_examples=130)
@given(trace=trace_files(), block=st.sampled_from([1, 7, 64, 300]), where=st.floats(0, 1))
def test_reading_in_small_blocks_or_in_parts_gives_the_same_events(
    trace: tuple[bytes, bool], block: int, where: float
) -> None:
    """However a trace is cut into blocks (the streaming reader) or byte ranges (forked readers), the events
    are the same, or every way of reading it says it is corrupt."""
    from npuprof.analysis.trace_loader import TraceReader

    with tempfile.TemporaryDirectory() as tmp:
        path = _write_trace(Path(tmp), *trace)
        whole = _events_read(TraceReader(path))
        assert _events_read(TraceReader(path, block=block)) == whole
        if whole is None or trace[1]:
            return
        event("read in two parts")
        reader = TraceReader(path, block=block)
        start, end = reader.region()
        cut = reader.boundary_after(start + int((end - start) * where), end)
        assert _events_read(reader, [(start, cut), (cut, end)]) == whole


@settings(FUZZ, max_examples=60)
@given(trace=trace_files())
def test_analyse_report_names_each_bad_trace(trace: tuple[bytes, bool]) -> None:
    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    with tempfile.TemporaryDirectory() as tmp:
        report = build_report(_write_trace(Path(tmp), *trace), jobs=1)
        for problem in report.problems:
            # "failed" is what an unexpected exception becomes: a reader bug, not a bad trace
            assert problem.status in ("corrupt", "truncated", "missing"), problem
            assert _one_line(problem.reason), problem
        terminal.render_json(report)
        terminal.render_csv(report)
        terminal.render_table(report, Console(file=io.StringIO(), width=120))


MEMORY_RAW = st.one_of(
    st.lists(
        st.tuples(st.integers(-1, 10**6), st.integers(1, 4), st.integers(-(2**20), 2**20), st.integers(-1, 9))
    ),
    st.lists(st.lists(st.integers(-(2**70), 2**70), max_size=5), max_size=4),
    JSON_VALUES,
)


@settings(FUZZ, max_examples=80)
@given(raw=MEMORY_RAW, meta=JSON_VALUES, cut=CUTS, flips=FLIPS)
def test_memory_timeline_raw_data_gives_a_timeline_or_its_error(
    raw: Any, meta: Any, cut: Any, flips: list
) -> None:
    from npuprof.reports import memory_timeline as mt

    with tempfile.TemporaryDirectory() as tmp:
        rank_dir = Path(tmp) / "host_1_20250101000000000_ascend_pt"
        rank_dir.mkdir()
        data = _mutated(gzip.compress(json.dumps(raw).encode(), mtime=0), cut, flips)
        (rank_dir / mt.RAW_FILE).write_bytes(data)
        (rank_dir / mt.META_FILE).write_text(json.dumps(meta))
        with contextlib.suppress(mt.MemoryTimelineError):
            mt.render(mt.load(rank_dir), Path(tmp) / "memory.json")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`npuprof ARGS` forked from tests/_forked_cli.py's server (a report command: see its doc)."""
    return forked_npuprof(*args, env=clean_env(), timeout=120)


def test_cli_readers_on_bad_traces_answer_in_their_own_words(tmp_path: Path) -> None:
    step = {
        "ph": "X",
        "cat": "user_annotation",
        "name": "ProfilerStep#1",
        "pid": 1,
        "tid": 1,
        "ts": 0,
        "dur": 9,
    }
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5, "args": {}}
    text = json.dumps({"traceEvents": [step, op]})
    traces = {
        "valid": text,
        "truncated": text[: len(text) // 2],
        "ts_string": text.replace('"ts": 1,', '"ts": "1",'),
        "args_list": text.replace('"args": {}', '"args": {"External id": [1]}'),
        # past every Python's JSON decoders: ~1,000 levels on 3.10 and 3.11, ~1,500 on 3.12.1, ~10,000 on
        # 3.13 (3,000 levels were read there, the args of a list tolerated: analysed, exit 0)
        "deep": text.replace('"args": {}', '"args": ' + "[" * 100_000 + "]" * 100_000),
        "bare_array": json.dumps([step, {"ph": 1}]),
    }
    for name, body in traces.items():
        trace = tmp_path / f"{name}.pt.trace.json"
        trace.write_text(body)
        analysed = _cli("analyse", str(trace))
        # a string ts is torch_npu's form of a time: read, not refused; an event of the wrong shape (args, or
        # a ph) is one damaged event of two, not more than half: left out, said, the step read
        # (docs/formats.md, "Damaged events")
        damaged = name in ("args_list", "bare_array")
        readable = damaged or name in ("valid", "ts_string")
        assert analysed.returncode == (0 if readable else 1), analysed.stderr
        assert ("1 damaged event(s) left out" in analysed.stderr) == damaged, analysed.stderr
        if not readable:
            assert f"not analysed: {trace}: " in analysed.stderr.splitlines()[0], analysed.stderr
        if name in ("ts_string", "args_list"):
            continue  # the reports reject these the way they reject "deep": two subprocesses saved
        for args in (
            ("export-stacks", str(trace)),
            ("memory-timeline", str(trace), "-o", str(tmp_path / f"{name}.json")),
        ):
            result = _cli(*args)
            assert "Traceback" not in result.stderr, (args, result.stderr)
            if readable and args[0] == "export-stacks":
                # the step's 9 us less the 5 us of its one operator are its self time; the step alone of
                # the bare array, its damaged event left out and said
                assert result.returncode == 0, result.stderr
                expected = "ProfilerStep 9\n" if damaged else "ProfilerStep 4\nProfilerStep;aten::mm 5\n"
                assert result.stdout == expected, result.stdout
                assert ("1 damaged event(s) left out" in result.stderr) == damaged, result.stderr
                continue
            # a corrupt trace is an error of each reader; the readable ones have no [memory] event, which
            # memory-timeline says
            assert (result.returncode, result.stdout) == (1, ""), (args, result.stderr)
            assert result.stderr.startswith(f"npuprof {args[0]}: ")
            # one line; the damaged event's note before it in the bare array's
            assert _one_line(result.stderr.split("\n", 1)[1] if damaged else result.stderr), result.stderr
            said = "has no [memory] events" if readable else f"{trace}: "
            assert said in result.stderr, (args, result.stderr)


def test_a_bare_array_nested_too_deeply_is_one_line_in_every_reader(tmp_path: Path) -> None:
    """helper-129: a file of 200,000 nested JSON arrays (a bare array of events, as far as its first byte
    tells) gave export-stacks and memory-timeline a RecursionError traceback (their reader's search for
    where the JSON stops recursed past its limit), and analyse "failed: RecursionError". Each says the trace
    is corrupt, nested too deeply to read."""
    trace = tmp_path / "deep.pt.trace.json"
    trace.write_text("[" * 200_000 + "]" * 200_000)
    for args in (
        ("analyse", str(trace)),
        ("export-stacks", str(trace)),
        ("memory-timeline", str(trace), "-o", str(tmp_path / "deep.json")),
    ):
        result = _cli(*args)
        assert result.returncode == 1 and "Traceback" not in result.stderr, (args, result.stderr)
        first = result.stderr.splitlines()[0]
        assert first.startswith(f"npuprof {args[0]}: ") and "nested too deeply to read" in first, (
            result.stderr
        )
        assert _one_line(result.stderr) or args[0] == "analyse", (
            result.stderr
        )  # + "nothing could be analysed"


# ---- what `npuprof analyse` reads back: its own summary of a parsed rank dir -------------------------
def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (keys and indices from the root)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


@pytest.fixture(scope="module")
def parsed_cuda_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from analyse_support.handmade import cuda_trace, write_rank_dir

    from npuprof.analysis.parse import parse_rank_dir

    rank_dir = write_rank_dir(tmp_path_factory.mktemp("summary"), cuda_trace())
    assert parse_rank_dir(rank_dir).ok
    return rank_dir


@settings(FUZZ, max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), JSON_VALUES), max_size=3), cut=CUTS)
def test_analyse_reads_back_a_damaged_summary_as_unreadable(
    parsed_cuda_dir: Path, changes: list[tuple[float, Any]], cut: float | None
) -> None:
    from rich.console import Console

    from npuprof.analysis.parse import SUMMARY_FILE
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    parsed = parsed_cuda_dir / "ASCEND_PROFILER_OUTPUT"
    summary = json.loads((parsed / SUMMARY_FILE).read_text())
    for where, new in changes:
        places = _paths(summary)
        summary = _replaced(summary, places[int(where * len(places))], new)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / parsed_cuda_dir.name
        (copy / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        for name in ("analyse.done", "npuprof_capture.json"):
            if (parsed / name).exists():
                (copy / "ASCEND_PROFILER_OUTPUT" / name).write_bytes((parsed / name).read_bytes())
        (copy / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).write_bytes(
            _mutated(json.dumps(summary).encode(), cut, [])
        )
        report = build_report(copy, jobs=1)
        assert [p.status for p in report.problems] in ([], ["unreadable"])
        if not changes and cut is None:
            assert report.ranks and report.ranks[0].status == "cached"
        terminal.render_json(report)
        terminal.render_csv(report)
        terminal.render_table(report, Console(file=io.StringIO(), width=120))
