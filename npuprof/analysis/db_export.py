"""torch_npu's db export, from what the parser computed (docs/formats.md, "The db export"):
``ascend_pytorch_profiler_{rank}.db`` and ``analysis.db`` in a rank's ``ASCEND_PROFILER_OUTPUT/``, the
files msprof-analyze's db recipes and MindStudio Insight read.

How a Kineto trace maps onto the tables: operators are ``PYTORCH_API`` rows; the tasks of
``kernel_details.csv`` (device kernels, memcpy and memset; on a CPU capture the step thread's innermost
operators and the collectives' spans, as that table has them) are ``TASK`` rows, the computing ones also
``COMPUTE_TASK_INFO`` rows; each operator is linked to the tasks it launched through ``CONNECTION_IDS``
(a task's connection id: its correlation id, or a number of ours on the CPU), and has its launch as a
``CANN_API`` row (the runtime call; on the CPU the operator). Collectives are ``COMMUNICATION_OP`` rows
named in HCCL's form (``hcom_allReduce__846_0_1``: the same name on every rank of the group), each with
the host call that issued it as a ``CANN_API`` row. Marks and ranges, module spans (``nn.Module: X``
frames, domain ``Module``) are ``MSTX_EVENTS``, a range with a device task also a ``PYTORCH_API`` row of
type ``mstx``; GC pauses ``GC_RECORD``. So every task has a framework call and a launch, as msprof-analyze's
readers expect. Both files are written under temporary names and renamed together: a partial db never
looks complete.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import socket
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from npuprof.agent.metadata import group_label
from npuprof.analysis import db_schema as schema
from npuprof.analysis import memory
from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.cells import ns_of
from npuprof.analysis.communication import CommOp, double_hash, matrix_picks
from npuprof.analysis.extract import Extract
from npuprof.analysis.gc_layer import GcRecord
from npuprof.analysis.marks_ranges import Spans
from npuprof.analysis.step_breakdown import StepWindows
from npuprof.analysis.tables import OpView, RankTables
from npuprof.results.atomic import file_mode, temp_name, writer_pid
from npuprof.results.layout import ANALYSIS_DB, profiler_db_name, read_json_record

MODULE_PREFIX = "nn.Module: "
NA = "N/A"
# our connection ids (never a correlation id: those stay below 2**40 in practice)
_OWN_LINKS = 1 << 40
# the cores of tasks that are not computing: copies, and collectives (NCCL kernels; on CPU gloo's spans...)
_NOT_COMPUTE = {
    vocab.TASK_CORE["memcpy"],
    vocab.TASK_CORE["memset"],
    vocab.COMM_CORE,
    *(prefix.rstrip(":").upper() for prefix in vocab.COMM_ANNOTATION_PREFIXES),
}
_TASK_TYPE = {"memcpy": "MEMCPY_ASYNC", "memset": "MEMSET_ASYNC"}
# torch's collective names -> HCCL's (hcom_<name>_)
_HCCL_NAMES = {
    "allreduce": "allReduce",
    "all_reduce": "allReduce",
    "allgather": "allGather",
    "all_gather": "allGather",
    "_allgather_base": "allGather",
    "allgather_into_tensor_coalesced": "allGather",
    "reduce_scatter": "reduceScatter",
    "_reduce_scatter_base": "reduceScatter",
    "reduce_scatter_tensor_coalesced": "reduceScatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "scatter": "scatter",
    "gather": "gather",
    "send": "send",
    "recv": "receive",
    "recv_anysource": "receive",
    "all_to_all": "alltoall",
    "alltoall": "alltoall",
    "all_to_allv": "alltoallv",
    "alltoall_base": "alltoallv",
}


@dataclass
class DbSources:
    """What the db is made of: the parser's columns and tables of one rank."""

    extract: Extract
    ops: OpView
    tables: RankTables
    windows: StepWindows
    comm_ops: list[CommOp]
    rank: int | None
    base_ns: int
    meta: dict[str, Any]
    rank_dir: Path
    spans: Spans | None = None
    gc: GcRecord | None = None


def hccl_type(name: str) -> str:
    """``hcom_allReduce_`` for ``allreduce``: the operator type of a collective in HCCL's naming."""
    return f"hcom_{_HCCL_NAMES.get(name.lower(), name)}_"


# Tables torch_npu creates only when it has rows for them (its memory parser returns before creating them
# without profile_memory), and whose readers take a table that exists for data: msprof-analyze's
# compare and advisor read max(totalReserved) of an empty MEMORY_RECORD as None and divided it, so a capture
# without --profile-memory got no compare workbook and no advisor Overall Summary (helper-210). Other
# empty tables stay: msprof-analyze's free_analysis joins COMMUNICATION_OP whether or not there were
# collectives, and fails without it.
ONLY_WITH_ROWS = frozenset({"MEMORY_RECORD", "OP_MEMORY"})


def write_databases(out_dir: Path, src: DbSources) -> list[str]:
    """Write both files into ``out_dir``; return their names. Both are written under temporary names and
    renamed when both are complete, the profiler db last (it is what makes a rank dir "have a db")."""
    remove_stale_temps(out_dir)
    tables = _Tables(src)
    name = profiler_db_name(src.rank)
    temps: list[Path] = []
    try:
        analysis = _write_db(out_dir / ANALYSIS_DB, schema.ANALYSIS_TABLES, tables.analysis_rows(), (), temps)
        profiler = _write_db(
            out_dir / name, schema.PROFILER_TABLES, tables.profiler_rows(), schema.PROFILER_INDEXES, temps
        )
        os.replace(analysis, out_dir / ANALYSIS_DB)
        os.replace(profiler, out_dir / name)
    except BaseException:
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise
    return [name, ANALYSIS_DB]


def remove_stale_temps(out_dir: Path) -> None:
    """Delete the temporary files of db writers that died (kill -9): ``.<name>.<pid>-<hex12>.tmp`` (an
    older npuprof's ``.<name>.<pid>.tmp``) whose process is gone. A live writer's (a concurrent parse) is
    left alone."""
    for tmp in out_dir.glob(".*.db.*.tmp"):
        pid = writer_pid(tmp.name)
        if pid is None:
            tag = tmp.name.rsplit(".", 2)[-2]
            pid = int(tag) if tag.isascii() and tag.isdigit() else None
        if pid is None or pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                tmp.unlink()
        except (PermissionError, OverflowError):
            pass


def _write_db(
    path: Path,
    tables: dict[str, tuple[str, ...]],
    rows: Iterable[tuple[str, Iterable[Sequence[Any]]]],
    indexes: Sequence[str],
    temps: list[Path],
) -> Path:
    """Write the tables into a temporary file beside ``path`` (added to ``temps``), synced; return it. Its
    name is atomic.temp_name's, which names the writer: a parse sweeping a killed one's leftovers keeps a
    live writer's (a concurrent parse's, helper-172)."""
    tmp = temp_name(path)
    temps.append(tmp)
    con = sqlite3.connect(tmp, isolation_level=None)
    try:
        # a private file until renamed: no journal, no syncs but the one below, big pages, one writer
        for pragma in (
            "journal_mode=OFF",
            "synchronous=OFF",
            "page_size=65536",
            "cache_size=-65536",
            "locking_mode=EXCLUSIVE",
            "temp_store=MEMORY",
        ):
            con.execute(f"PRAGMA {pragma}")
        con.execute("BEGIN")
        for statement in schema.create_statements(tables):
            con.execute(statement)
        filled: set[str] = set()
        for table, table_rows in rows:
            if con.executemany(schema.insert_statement(table, tables), table_rows).rowcount > 0:
                filled.add(table)
        for table in ONLY_WITH_ROWS & (tables.keys() - filled):
            con.execute(f"DROP TABLE {table}")
        for statement in indexes:
            con.execute(statement)
        con.execute("COMMIT")
    finally:
        con.close()
    os.chmod(tmp, file_mode())
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    return tmp


class _Strings:
    """STRING_IDS: each text once, numbered from 0."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        found = self.ids.get(text)
        if found is None:
            found = self.ids[text] = len(self.ids)
        return found

    def of_extract(self, strings: list[str], sids: np.ndarray, missing: int | None = None) -> list[Any]:
        """Our ids of the extract's string ids ``sids`` (``missing`` for -1)."""
        table = np.full(len(strings) + 1, -1, np.int64)
        used = np.unique(sids[sids >= 0]) if len(sids) else np.zeros(0, np.int64)
        for sid in used.tolist():
            table[sid] = self(strings[sid])
        out = table[sids].tolist()
        return [missing if v < 0 else v for v in out] if (table[sids] < 0).any() else out

    def rows(self) -> list[tuple[int, str]]:
        return [(i, _utf8(text)) for text, i in self.ids.items()]


def _span_ns(ts: float, dur: float, base_ns: int) -> tuple[int, int]:
    """[start, end] in epoch ns of a span of the trace (µs): each of its numbers converted on its own."""
    start, length = ns_of(np.array([ts, dur])).tolist()
    return start + base_ns, start + base_ns + length


def _integers(values: np.ndarray) -> list[Any]:
    """Byte counts (float64) as the cells of an INTEGER column, rounded; NULL for an unknown one (NaN). One
    beyond an int64 (a Total Allocated of 2**64 - 1 from a damaged trace: numpy's cast made it -2**63, with
    a RuntimeWarning, helper-181) is the REAL SQLite itself keeps for such an integer in an INTEGER column
    (its type affinity), never a wrong integer."""
    rounded = np.round(values)
    fits = np.abs(rounded) < 2.0**63
    with np.errstate(invalid="ignore"):
        whole = np.where(fits, rounded, 0).astype(np.int64).tolist()
    if fits.all():
        return whole
    cells = zip(whole, fits.tolist(), rounded.tolist(), strict=True)
    return [w if f else None if v != v else v for w, f, v in cells]  # v != v: NaN


def _in_db(step: int) -> bool:
    """Whether a step number fits STEP_TIME's id, an SQLite INTEGER (an int64)."""
    return step < 1 << 63


def steps_left_out(windows: StepWindows) -> list[str]:
    """What the rank's warnings say of the steps STEP_TIME cannot hold (numbered past an int64: a damaged
    or hand-made trace), which the text tables keep; none when every step fits."""
    past = [n for n in windows.numbers if n is not None and not _in_db(n)]
    if not past:
        return []
    shown = ", ".join(f"ProfilerStep#{n}" for n in past[:3]) + (", ..." if len(past) > 3 else "")
    return [
        f"{len(past)} step(s) numbered past 2**63 - 1 ({shown}) are not in the db's STEP_TIME, whose id is "
        "an SQLite INTEGER (an int64); the text tables (step_trace_time.csv) and analysis.db's "
        "StepTraceTime have them"
    ]


def _utf8(text: str) -> str:
    """``text`` as SQLite stores it (UTF-8): lone surrogates (bytes of a name that were not UTF-8) become
    U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _global_tid(pid: Any, tid: Any) -> int:
    """``(pid << 32) | tid``, torch_npu's thread id; 0 for ids that are not numbers."""
    try:
        return ((int(pid) & 0x7FFFFFFF) << 32) | (int(tid) & 0xFFFFFFFF)  # an SQLite INTEGER: < 2**63
    except (TypeError, ValueError, OverflowError):
        return 0


def _group_label(name: str, desc: Any) -> str:
    """A process group's ``group_name`` in ``parallel_group_info``, named as the agent's
    profiler_metadata.json names it (``metadata.group_label``; docs/formats.md, "profiler_metadata.json").
    Every group without a description (torch before 2.3, an empty one) was ``default_group`` (helper-181)."""
    return group_label(name, desc)


def _group_entry(value: dict[str, Any]) -> dict[str, Any]:
    """A parallel_group_info entry of strings, integers and lists only (no JSON true/false/null, which
    msprof-analyze's ``ast.literal_eval`` of it cannot read)."""
    ranks = value.get("global_ranks")
    rank = value.get("group_rank")
    return {
        "group_name": str(value.get("group_name") or "default_group"),
        "group_rank": rank if isinstance(rank, int) and not isinstance(rank, bool) else -1,
        "global_ranks": [r for r in ranks if isinstance(r, int) and not isinstance(r, bool)]
        if isinstance(ranks, list)
        else [],
    }


@functools.lru_cache(maxsize=4096)
def _shapes_text(dims: str) -> str:
    """Kineto's ``[[2,3],[3]]`` in torch_npu's form ``2,3;\\r\\n3`` (scalars: empty)."""
    try:
        value = json.loads(dims)
    except ValueError:
        return dims
    if not isinstance(value, list):
        return dims
    return ";\r\n".join(",".join(map(str, d)) if isinstance(d, list) else "" for d in value)


class _Tables:
    def __init__(self, src: DbSources) -> None:
        self.src = src
        self.s = _Strings()
        x = src.extract
        self.threads = list(x.threads)
        self.gtid = np.array([_global_tid(p, t) for p, t in self.threads] or [0], np.int64)
        self.device_id = src.tables.device_id
        pids = [p for p, _t in self.threads if isinstance(p, int)]
        self.host_pid = (max(set(pids), key=pids.count) if pids else 0) & 0x7FFFFFFF
        self.next_link = _OWN_LINKS
        self.callchains: list[tuple[int, int, int]] = []
        self.task_links = self._task_links()
        self.conn_of_op = self._op_groups(src.tables.kernels.launcher)
        self.comm_links = self._comm_links()
        self.next_group = int(self.conn_of_op.max()) + 1 if len(self.conn_of_op) else 0
        self.extra_links = self._collective_task_links()
        # the ranges' host side, made with MSTX_EVENTS (mstx()): PYTORCH_API, CONNECTION_IDS and CANN_API rows
        self.range_rows: dict[str, list[tuple[Any, ...]]] = {
            "PYTORCH_API": [],
            "CONNECTION_IDS": [],
            "CANN_API": [],
        }

    def _group(self) -> int:
        self.next_group += 1
        return self.next_group - 1

    def _collective_task_links(self) -> list[tuple[int, int]]:
        """CONNECTION_IDS rows of a CPU capture's collective spans (gloo's worker threads): each to the
        communication operator (``c10d::allreduce_``...) that issued it, the last one to start before it."""
        k, ops, x = self.src.tables.kernels, self.src.ops, self.src.extract
        if k.launcher is None or k.stream_names is None or not len(k) or not len(ops.ts):
            return []
        spans = np.flatnonzero(k.launcher < 0)
        names = np.unique(ops.name)
        comm_names = names[[vocab.is_comm_operator(x.strings[i]) for i in names.tolist()]]
        issuers = np.flatnonzero(np.isin(ops.name, comm_names))
        if not len(spans) or not len(issuers):
            return []
        starts = ns_of(ops.ts[issuers]) + self.src.base_ns
        order = np.argsort(starts, kind="stable")
        issuers, starts = issuers[order], starts[order]
        at = np.searchsorted(starts, k.start_ns[spans], side="right") - 1
        links = []
        for task, op in zip(spans[at >= 0].tolist(), issuers[at[at >= 0]].tolist(), strict=True):
            if self.conn_of_op[op] < 0:
                self.conn_of_op[op] = self._group()
            links.append((int(self.conn_of_op[op]), int(self.task_links[task])))
        return links

    def _link(self) -> int:
        self.next_link += 1
        return self.next_link

    # ---- ids that tie the tables together ---------------------------------------------------------------
    def _task_links(self) -> np.ndarray:
        """Each task's connection id: its correlation id when it has a unique one, else one of ours."""
        k = self.src.tables.kernels
        links = k.task_id.astype(np.int64).copy() if len(k) else np.zeros(0, np.int64)
        if len(links):
            uniq, counts = np.unique(links, return_counts=True)
            dup = np.isin(links, uniq[counts > 1]) | (links < 0)
            own = np.flatnonzero(dup)
            links[own] = _OWN_LINKS + 1 + np.arange(len(own))
            self.next_link = _OWN_LINKS + len(own)
        return links

    def _op_groups(self, launcher: np.ndarray | None) -> np.ndarray:
        """CONNECTION_IDS' id of each operator that launched a task (-1: none), numbered in operator
        order."""
        n = len(self.src.ops.ts)
        conn = np.full(n, -1, np.int64)
        if launcher is not None and len(launcher):
            used = np.unique(launcher[launcher >= 0])
            conn[used] = np.arange(len(used))
        return conn

    def _comm_links(self) -> list[int]:
        """Each collective's connection id: its device task's correlation id, else one of ours (the tasks
        of a CPU capture's collective spans get the same one: matched by start)."""
        taken: set[int] = set()
        out = []
        for op in self.src.comm_ops:
            own = op.corr < 0 or op.corr in taken or op.corr >= _OWN_LINKS
            link = self._link() if own else op.corr
            taken.add(link)
            out.append(link)
        k = self.src.tables.kernels
        if k.launcher is not None and len(k) and self.src.comm_ops:
            by_start = {}
            for op, link in zip(self.src.comm_ops, out, strict=True):
                if op.corr < 0 and op.host is not None:
                    by_start[int(ns_of(np.array([op.host[0]]))[0]) + self.src.base_ns] = link
            spans = np.flatnonzero(k.launcher < 0)
            for i, start in zip(spans.tolist(), k.start_ns[spans].tolist(), strict=True):
                link = by_start.get(start)
                if link is not None:
                    self.task_links[i] = link
        return out

    # ---- the profiler db ------------------------------------------------------------------------------
    def profiler_rows(self) -> Iterable[tuple[str, Iterable[Sequence[Any]]]]:
        # STRING_IDS last: every other table adds to it
        yield "META_DATA", self.meta_data()
        yield "HOST_INFO", [self.host_info()]
        yield "RANK_DEVICE_MAP", [(self.src.rank if self.src.rank is not None else -1, self.device_id)]
        devices = dict.fromkeys([self.device_id, *sorted(set(self.task_devices()))])
        yield "NPU_INFO", [(device, self.src.tables.device) for device in devices]
        yield "SESSION_TIME_INFO", [self.session()]
        yield from schema.ENUMS.items()
        yield "STEP_TIME", self.step_time()
        yield "PYTORCH_API", self.pytorch_api()
        yield "CONNECTION_IDS", self.connection_ids()
        yield "PYTORCH_CALLCHAINS", self.callchains
        tasks, compute = self.tasks()
        yield "TASK", tasks
        yield "COMPUTE_TASK_INFO", compute
        comm_ops, cann = self.communication()
        yield "COMMUNICATION_OP", comm_ops
        yield "CANN_API", cann
        yield "CANN_API", self.launches({row[4] for row in cann})
        mstx, mstx_tasks = self.mstx()
        yield "MSTX_EVENTS", mstx
        yield "TASK", mstx_tasks
        yield from self.range_rows.items()
        yield "GC_RECORD", self.gc_record()
        records, op_memory = self.memory()
        yield "MEMORY_RECORD", records
        yield "OP_MEMORY", op_memory
        yield "STRING_IDS", self.s.rows()

    def meta_data(self) -> list[tuple[str, str]]:
        major, minor, micro = schema.SCHEMA_VERSION.split(".")
        rows = [
            ("SCHEMA_VERSION", schema.SCHEMA_VERSION),
            ("SCHEMA_VERSION_MAJOR", major),
            ("SCHEMA_VERSION_MINOR", minor),
            ("SCHEMA_VERSION_MICRO", micro),
        ]
        user = self._user_metadata()
        groups = self.parallel_groups()
        recorded = user.get("parallel_group_info")  # the agent's view, as torch_npu records it
        for key, value in (recorded if isinstance(recorded, dict) else {}).items():
            if isinstance(value, dict):
                groups[str(key)] = _group_entry(value)
        if groups:
            rows.append(("parallel_group_info", json.dumps(groups)))
        rows += [(k, json.dumps(v)) for k, v in user.items() if k != "parallel_group_info"]
        return rows

    def _user_metadata(self) -> dict[str, Any]:
        """profiler_metadata.json of the rank dir (the user's add_metadata keys), as torch_npu copies it."""
        path = self.src.rank_dir / "profiler_metadata.json"
        try:
            value = read_json_record(path)
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def parallel_groups(self) -> dict[str, dict[str, Any]]:
        """torch_npu's ``parallel_group_info`` from Kineto's ``distributedInfo.pg_config``: only strings,
        numbers and lists (msprof-analyze reads it with ``ast.literal_eval``)."""
        dist = self.src.meta.get("distributedInfo")
        pgs = dist.get("pg_config") if isinstance(dist, dict) else None
        out: dict[str, dict[str, Any]] = {}
        for pg in pgs if isinstance(pgs, list) else []:
            if not isinstance(pg, dict) or "pg_name" not in pg:
                continue
            ranks = pg.get("ranks")
            if isinstance(ranks, str):
                with contextlib.suppress(ValueError):
                    ranks = json.loads(ranks)
            ranks = [int(r) for r in ranks if isinstance(r, int)] if isinstance(ranks, list) else []
            rank = self.src.rank
            out[str(pg["pg_name"])] = {
                "group_name": _group_label(str(pg["pg_name"]), pg.get("pg_desc")),
                "group_rank": ranks.index(rank) if rank in ranks else -1,
                "global_ranks": ranks,
            }
        for op in self.src.comm_ops:  # groups the trace names but pg_config does not list
            if op.group not in out:
                ranks = list(op.ranks)
                out[op.group] = {
                    "group_name": _group_label(op.group, None),
                    "group_rank": ranks.index(self.src.rank) if self.src.rank in ranks else -1,
                    "global_ranks": ranks,
                }
        return out

    def host_info(self) -> tuple[str, str]:
        """The host the trace was recorded on (Kineto's ``host_name``), not the one parsing it (a multi-node
        run analysed on one node); this host's only for a trace that does not name one (an older torch's)."""
        named = self.src.meta.get("host_name")
        host = _utf8(named) if isinstance(named, str) and named.strip() else socket.gethostname()
        return str(double_hash(host)), host

    def session(self) -> tuple[int, int]:
        x = self.src.extract
        if x.first_ts > x.last_ts:
            return 0, 0
        first, last = ns_of(np.array([x.first_ts, x.last_ts])).tolist()
        return first + self.src.base_ns, last + self.src.base_ns

    def step_time(self) -> list[tuple[Any, int, int]]:
        w = self.src.windows
        start = ns_of(w.start) + self.src.base_ns
        starts, ends = start.tolist(), (start + ns_of(w.end - w.start)).tolist()
        return [
            (n, a, b) for n, a, b in zip(w.numbers, starts, ends, strict=True) if n is not None and _in_db(n)
        ]

    def pytorch_api(self) -> Iterable[tuple[Any, ...]]:
        return itertools.chain(self._operator_apis(), self._step_apis())

    def _step_apis(self) -> list[tuple[Any, ...]]:
        """A row per ``ProfilerStep#N`` span, as torch_npu records the step's range among its operators:
        msprof-analyze finds the steps of a db there (compare's ``--base_step``, advisor's step filter)."""
        rows = []
        for number, ts, dur, thread in self.src.extract.steps:
            start = int(ns_of(np.array([ts]))[0]) + self.src.base_ns
            end = start + int(ns_of(np.array([dur]))[0])
            name = self.s(f"{vocab.STEP_PREFIX}{number}")
            rows.append(
                (start, end, int(self.gtid[thread]), None, name, None, None, None, None, None, schema.API_OP)
            )
        return rows

    def _operator_apis(self) -> Iterable[tuple[Any, ...]]:
        ops, x = self.src.ops, self.src.extract
        n = len(ops.ts)
        if not n:
            return []
        start = ns_of(ops.ts) + self.src.base_ns
        end = start + ns_of(ops.dur)  # the trace's own digits of each: ns_of(ts + dur) may be 1 ns off
        names = self.s.of_extract(x.strings, ops.name.astype(np.int64))
        shapes = self._shapes(ops.shapes.astype(np.int64))
        chains = self._callchains(ops.stack.astype(np.int64))
        conn = [None if c < 0 else c for c in self.conn_of_op.tolist()]
        return zip(
            start.tolist(),
            end.tolist(),
            self.gtid[ops.thread].tolist(),
            conn,
            names,
            [None] * n,
            [None] * n,
            [None] * n,
            shapes,
            chains,
            [schema.API_OP] * n,
            strict=True,
        )

    def _shapes(self, sids: np.ndarray, missing: Any = None) -> list[Any]:
        strings = self.src.extract.strings
        table: dict[int, Any] = {-1: missing}
        for sid in np.unique(sids).tolist():
            if sid >= 0:
                table[sid] = self.s(_shapes_text(strings[sid])) if strings[sid] else missing
        return list(map(table.__getitem__, sids.tolist()))

    def _callchains(self, sids: np.ndarray) -> list[Any]:
        """PYTORCH_CALLCHAINS' id of each operator's call stack (None: none); its rows in
        ``self.callchains``, frames outermost last as Kineto lists them."""
        strings = self.src.extract.strings
        table: dict[int, Any] = {-1: None}
        for sid in np.unique(sids).tolist():
            if sid < 0 or not strings[sid]:
                table[sid] = None
                continue
            chain = len(table) - 1
            table[sid] = chain
            text = strings[sid]  # joined by ";\r\n" (call_stacks.py) or, Kineto's, by ";" (docs/formats.md)
            frames = [f for f in text.split(";\r\n" if ";\r\n" in text else ";") if f]
            self.callchains += [(chain, self.s(f), depth) for depth, f in enumerate(frames)]
        return list(map(table.__getitem__, sids.tolist()))

    def connection_ids(self) -> Iterable[tuple[int, int]]:
        k = self.src.tables.kernels
        if k.launcher is None or not len(k):
            return []
        launched = np.flatnonzero(k.launcher >= 0)
        groups = self.conn_of_op[k.launcher[launched]]
        order = np.lexsort((launched, groups))
        rows = list(zip(groups[order].tolist(), self.task_links[launched[order]].tolist(), strict=True))
        return sorted(rows + self.extra_links, key=lambda row: row[0])

    def task_devices(self) -> list[int]:
        """Each task's device: the trace's for the task where it says one (a kernel's args.device: a process
        that drove two GPUs), else the rank's (helper-257: every task was the rank's device, 0)."""
        k = self.src.tables.kernels
        if k.device is None:
            return [self.device_id] * len(k)
        return np.where(k.device >= 0, k.device, self.device_id).tolist()

    def tasks(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        k, x = self.src.tables.kernels, self.src.extract
        m = len(k)
        if not m:
            return [], []
        strings = x.strings
        start = k.start_ns
        end = start + ns_of(k.duration_us)
        cores = [strings[c] for c in k.core.tolist()]
        core_kind = {c: _TASK_TYPE.get(c, c) for c in set(cores)}
        task_type = {c: self.s(t) for c, t in core_kind.items()}
        if k.stream_names is not None:  # a CPU capture: each thread is a stream, named by its tid
            tids = [int(t) if t.isascii() and t.isdigit() and len(t) < 19 else -1 for t in k.stream_names]
            streams = [tids[s] if 0 <= s < len(tids) else -1 for s in k.stream.tolist()]
        else:
            streams = k.stream.tolist()
        task_ids = [schema.UNSET if t < 0 else t for t in k.task_id.tolist()]
        tasks = list(
            zip(
                start.tolist(),
                end.tolist(),
                self.task_devices(),
                self.task_links.tolist(),
                range(m),
                [self.host_pid] * m,
                [task_type[c] for c in cores],
                [schema.UNSET] * m,
                streams,
                task_ids,
                [schema.UNSET] * m,
                strict=True,
            )
        )
        compute = [i for i, c in enumerate(cores) if c not in _NOT_COMPUTE]
        if not compute:
            return tasks, []
        idx = np.array(compute, np.int64)
        na = self.s(NA)
        names = self.s.of_extract(strings, k.name[idx])
        op_types = self.s.of_extract(strings, k.type[idx], na)
        shapes = self._shapes(k.input_shapes[idx], na)
        blocks = np.maximum(k.block_dim[idx], 0).tolist()
        info = [
            (name, int(i), b, 0, task_type[cores[i]], t, na, na, s, na, na, na, na, na, na)
            for name, i, b, t, s in zip(names, idx.tolist(), blocks, op_types, shapes, strict=True)
        ]
        return tasks, info

    def launches(self, taken: set[int]) -> list[tuple[Any, ...]]:
        """CANN_API: the host launch of each task (type ``node``, name ``launch``, as CANN's node-level
        launch): a CUDA task's runtime call (kernel_details' own: ``KernelTable.launch``), on the CPU the
        operator itself; not for the tasks of collectives (their host call is there already, ``taken``)."""
        k, x, ops = self.src.tables.kernels, self.src.extract, self.src.ops
        if k.launcher is None or not len(k):
            return []
        if k.stream_names is not None:  # CPU: the task is the operator
            rows = np.flatnonzero(k.launcher >= 0)
            start = k.start_ns[rows]
            end = start + ns_of(k.duration_us[rows])
        else:
            if k.launch is None or not len(x.launch_corr):
                return []
            # the call kernel_details' Step Id takes: in a trace of several processes whose correlation ids
            # meet, the task's own process's (helper-247: B's call of id 5 was A's kernel's launch)
            rows = np.flatnonzero(k.launch >= 0)
            at = k.launch[rows]
            start = ns_of(np.frombuffer(x.launch_ts, dtype=np.float64)[at]) + self.src.base_ns
            end = start + ns_of(np.frombuffer(x.launch_dur, dtype=np.float64)[at])
        launcher = k.launcher[rows]
        tids = np.where(
            launcher >= 0, self.gtid[ops.thread[np.maximum(launcher, 0)]] if len(ops.ts) else 0, 0
        )
        if k.stream_names is None:  # the runtime call's own thread, where the trace numbers it
            pid = np.frombuffer(x.launch_pid, dtype=np.int64)[at]
            tid = np.frombuffer(x.launch_tid, dtype=np.int64)[at]
            known = (pid >= 0) & (tid >= 0)
            tids = np.where(known, ((pid & 0x7FFFFFFF) << 32) | (tid & 0xFFFFFFFF), tids)
        name = self.s("launch")
        out = []
        for a, b, tid, link in zip(
            start.tolist(), end.tolist(), tids.tolist(), self.task_links[rows].tolist(), strict=True
        ):
            if link not in taken:
                taken.add(link)
                out.append((a, b, schema.API_NODE, tid, link, name))
        return out

    def communication(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        src = self.src
        ops_out, cann = [], []
        seq: dict[str, int] = {}
        threads = self.gtid
        for op_id, (op, link) in enumerate(zip(src.comm_ops, self.comm_links, strict=True)):
            n = seq.get(op.group, 0)
            seq[op.group] = n + 1
            start, end = _span_ns(op.ts, op.dur, src.base_ns)
            kind = hccl_type(op.name)
            name = f"{kind}_{str(double_hash(op.group))[-3:]}_{n}_1"
            dtype = op.dtype.lower().replace("torch.", "").replace("c10::", "")
            ops_out.append(
                (
                    self.s(name),
                    start,
                    end,
                    link,
                    self.s(op.group),
                    op_id,
                    0,
                    0,
                    schema.HCCL_DATA_TYPE.get(dtype, schema.DATA_TYPE_NA),
                    self.s(NA),
                    op.count,
                    self.s(kind),
                    self.device_id,
                    len(op.ranks),
                )
            )
            h_ts, h_dur, h_thread = op.host if op.host is not None else (op.ts, op.dur, -1)
            h_start, h_end = _span_ns(h_ts, h_dur, src.base_ns)
            tid = int(threads[h_thread]) if 0 <= h_thread < len(self.threads) else 0
            cann.append((h_start, h_end, schema.API_COMMUNICATION, tid, link, self.s(f"c10d:{op.name}")))
        return ops_out, cann

    def mstx(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """MSTX_EVENTS: the marks and ranges, then the module spans; and the device tasks of the ranges
        (on a CPU capture the range itself: the CPU is the device; elsewhere the span of the device tasks
        its operators launched, when there are any)."""
        src = self.src
        rows: list[tuple[Any, ...]] = []
        tasks: list[tuple[Any, ...]] = []
        mstx_type = self.s("MSTX")
        spans = src.spans
        next_task = len(src.tables.kernels)
        if spans is not None and len(spans):
            starts = (ns_of(np.array(spans.ts, np.float64)) + src.base_ns).tolist()
            device = self._range_device_spans(spans)
            for mark_id, (name, kind, pid, tid, start, dur) in enumerate(
                zip(spans.name, spans.kind, spans.pid, spans.tid, starts, spans.dur_ns, strict=True)
            ):
                gtid = _global_tid(pid, tid)
                domain = self.s("communication" if kind == "comm" else "default")
                if kind == "mark":
                    event, end, link = schema.MSTX_MARKER_EX, start, schema.MSTX_NO_DEVICE_LINK
                else:
                    event, end = schema.MSTX_RANGE, start + int(dur)
                    link = schema.UNSET  # as msprof's ranges without a device task: mstx_sum skips them
                    span = (start, end) if device is None else device[mark_id]
                    if span is not None:
                        link = schema.MSTX_FIRST_LINK + mark_id
                        tasks.append(
                            (span[0], span[1], self.device_id, link, next_task, self.host_pid, mstx_type,
                             schema.UNSET, -1, schema.UNSET, schema.UNSET)
                        )  # fmt: skip
                        next_task += 1
                        self._range_host_side(start, end, gtid, self.s(name), link)
                rows.append((start, end, event, schema.UNSET, 0, self.s(name), gtid, gtid, domain, link))
        rows += self._module_ranges()
        return rows, tasks

    def _range_host_side(self, start: int, end: int, gtid: int, name: int, link: int) -> None:
        """A range with a device task: its host call as torch_npu's and CANN's tables have an mstx range's
        (a PYTORCH_API row of type ``mstx`` linked to the task, and the runtime call that started it), so
        that readers joining a task to its framework call and its launch (free_analysis) find both."""
        group = self._group()
        self.range_rows["PYTORCH_API"].append(
            (start, end, gtid, group, name, None, None, None, None, None, schema.API_MSTX)
        )
        self.range_rows["CONNECTION_IDS"].append((group, link))
        self.range_rows["CANN_API"].append(
            (start, start, schema.API_RUNTIME, gtid, link, self.s("mstxRangeStart"))
        )

    def _range_device_spans(self, spans: Spans) -> list[tuple[int, int] | None] | None:
        """Per range, (first start, last end) of the device tasks launched by operators that start
        inside it; None for a CPU capture (a range is its own device span)."""
        if self.src.tables.device == "CPU":
            return None
        k, ops = self.src.tables.kernels, self.src.ops
        out: list[tuple[int, int] | None] = [None] * len(spans)
        if k.launcher is None or not len(k):
            return out
        launched = np.flatnonzero(k.launcher >= 0)
        op_start = ops.ts[k.launcher[launched]]
        order = np.argsort(op_start, kind="stable")
        op_start, launched = op_start[order], launched[order]
        t_start = k.start_ns[launched]
        t_end = t_start + ns_of(k.duration_us[launched])
        for i, (ts, dur) in enumerate(zip(spans.ts, spans.dur_ns, strict=True)):
            lo = np.searchsorted(op_start, ts, side="left")
            hi = np.searchsorted(op_start, ts + dur / 1000.0, side="right")
            if hi > lo:
                out[i] = (int(t_start[lo:hi].min()), int(t_end[lo:hi].max()))
        return out

    def _module_ranges(self) -> list[tuple[Any, ...]]:
        """``nn.Module: X`` frames (recorded with --with-modules) as ranges of the ``Module`` domain."""
        x = self.src.extract
        names = x.frame_names
        wanted = [i for i, n in enumerate(names) if n.startswith(MODULE_PREFIX)]
        if not wanted or not len(x.f_name):
            return []
        keep = np.flatnonzero(np.isin(x.f_name, wanted))
        if not len(keep):
            return []
        frame_threads = list(x.frame_threads)
        domain = self.s("Module")
        start = ns_of(x.f_ts[keep]) + self.src.base_ns
        end = start + ns_of(x.f_dur[keep])
        rows = []
        for s, e, f, t in zip(
            start.tolist(), end.tolist(), x.f_name[keep].tolist(), x.f_thread[keep].tolist(), strict=True
        ):
            gtid = _global_tid(*frame_threads[t]) if 0 <= t < len(frame_threads) else 0
            message = self.s(names[f][len(MODULE_PREFIX) :])
            rows.append(
                (s, e, schema.MSTX_RANGE, schema.UNSET, 0, message, gtid, gtid, domain, schema.UNSET)
            )  # fmt: skip
        return rows

    def gc_record(self) -> list[tuple[int, int, int]]:
        gc = self.src.gc
        if gc is None:
            return []
        tid = _global_tid(gc.pid, gc.pid)
        return [(p.start_ns, p.end_ns, tid) for p in gc.events]

    def memory(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        cols = memory.memory_columns(self.src.extract)
        if not cols:
            return [], []
        base = self.src.base_ns
        ts = ns_of(cols["ts"]) + base
        alloc = _integers(cols["alloc"])
        reserved = _integers(cols["reserved"])  # unknown before torch 1.10 (NaN): NULL
        pta = self.s("PTA")
        n = len(ts)
        records = list(
            zip([pta] * n, ts.tolist(), alloc, reserved, alloc, [None] * n, [self.device_id] * n, strict=True)
        )
        allocs, release, owner = memory.pair_allocations(cols, self.src.ops)
        ops = self.src.ops
        unknown = self.s("[unknown]")
        name_sids = np.where(owner >= 0, ops.name[np.maximum(owner, 0)], -1) if len(ops.name) else owner
        names = self.s.of_extract(self.src.extract.strings, name_sids.astype(np.int64), unknown)
        sizes = _integers(cols["bytes"][allocs])
        op_rows = []
        for k, (a, r) in enumerate(zip(allocs.tolist(), release.tolist(), strict=True)):
            t_alloc = int(ts[a])
            t_rel = int(ts[r]) if r >= 0 else None
            dur = t_rel - t_alloc if t_rel is not None else None
            rel_alloc = alloc[r] if r >= 0 else None
            rel_res = reserved[r] if r >= 0 else None
            op_rows.append(
                (names[k], sizes[k], t_alloc, t_rel, t_rel, dur, dur, alloc[a], reserved[a], alloc[a],
                 rel_alloc, rel_res, rel_alloc, None, self.device_id)
            )  # fmt: skip
        return records, op_rows

    # ---- analysis.db --------------------------------------------------------------------------------
    def analysis_rows(self) -> Iterable[tuple[str, Iterable[Sequence[Any]]]]:
        times, bandwidth, matrix = self.comm_analysis()
        yield "CommAnalyzerTime", times
        yield "CommAnalyzerBandwidth", bandwidth
        yield "CommAnalyzerMatrix", matrix
        yield (
            "StepTraceTime",
            [(row[0], None if row[1] == "" else str(row[1]), *row[2:]) for row in self.src.tables.step_rows],
        )

    def comm_analysis(self) -> tuple[list[tuple[Any, ...]], ...]:
        """The collectives per step as torch_npu's analysis.db has them (times in ms, sizes in MB, the
        start in epoch µs, the group by its hash); wait and synchronisation need every rank: 0."""
        src = self.src
        times, bandwidth, matrix = [], [], []
        if not src.comm_ops:
            return times, bandwidth, matrix
        w = src.windows
        starts = np.array([op.ts for op in src.comm_ops], np.float64)
        if len(w):
            inside = w.index_of(starts).tolist()
            labels = ["step" if n is None else f"step{n}" for n in w.numbers]
        else:
            inside, labels = [0] * len(starts), ["step"]
        seq: dict[str, int] = {}
        per_kind: dict[tuple[str, str, str], list[tuple[str, CommOp]]] = {}
        for op, where in zip(src.comm_ops, inside, strict=True):
            n = seq.get(op.group, 0)
            seq[op.group] = n + 1
            if where < 0:
                continue
            step = labels[where]
            group = str(double_hash(op.group))
            name = f"{hccl_type(op.name)}_{group[-3:]}_{n}_1"
            kind = "p2p" if op.p2p else "collective"
            ms, mb = op.dur / 1000.0, op.size_bytes / 1e6
            start_us = op.ts + src.base_ns / 1000.0
            times.append((name, group, start_us, ms, ms, 0.0, 0.0, 0.0, step, kind))
            bw = mb / ms if ms > 0 else 0.0  # MB/ms = GB/s
            bandwidth.append((name, group, "SDMA", mb, ms, bw, 0.0, mb, 1, ms, step, kind))
            per_kind.setdefault((step, kind, group), []).append((name, op))
        for (step, kind, group), items in per_kind.items():
            by_type: dict[str, list[tuple[str, CommOp]]] = {}
            for name, op in items:
                by_type.setdefault(_HCCL_NAMES.get(op.name.lower(), op.name).lower(), []).append((name, op))
            for op_kind, members in by_type.items():
                ranks = list(members[0][1].ranks)
                local = str(ranks.index(src.rank)) if src.rank in ranks else "0"
                for label, chosen in matrix_picks(members).items():
                    ms = sum(m[1].dur for m in chosen) / 1000.0
                    mb = sum(m[1].size_bytes for m in chosen) / 1e6
                    bw = mb / ms if ms > 0 else 0.0
                    op_name = chosen[0][0] if label != "total" else ""
                    matrix.append(
                        (f"{op_kind}-{label}", group, local, local, "LOCAL", mb, ms, bw, step, kind, op_name)
                    )
        return times, bandwidth, matrix
