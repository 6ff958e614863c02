"""The typed, versioned hand-overs of a capture (docs/formats.md, "The capture record"):

- :class:`CaptureRecord`, ``npuprof_capture.json``: written by the agent (``capturing``, then ``complete``
  or ``incomplete``), rewritten by the post-processor, read by ``npuprof analyse`` and the launcher;
- :class:`CaptureJob`, one line a capture on the post-processor's stdin.

Readers check every field's type and name a version they cannot read instead of failing later. The wire form
is JSON text written by the standard library (``ensure_ascii`` when a path holds bytes that are not UTF-8:
lone surrogates, which msgspec cannot encode or decode), turned into the types with ``msgspec.convert``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

RECORD_VERSION = 1
JOB_VERSION = 1

Status = Literal["capturing", "complete", "incomplete"]


class CaptureRecord(msgspec.Struct, kw_only=True):
    """Field order is the file's key order. A record without ``version`` was written before versions:
    its form is version 1's."""

    status: Status
    run_id: str | None = None
    pid: int | None = None
    rank: int | None = None
    worker: str | None = None
    backend: str | None = None
    device: str | None = None
    updated_ns: int | None = None
    steps: list[int] = []
    trace: str | None = None  # the raw trace's file name
    detail: str = ""  # why the capture ended early or is incomplete, in words
    # the last step was cut (training ended inside it); None: not said (a record written before this
    # field: a complete record with a detail then has its last step partial)
    last_step_partial: bool | None = None
    # the first step was cut: the capture began inside it (a time window that opened between two step
    # boundaries); None: not said (a record written before this field, or a whole first step)
    first_step_partial: bool | None = None
    extras: list[str] = []  # stacks / memory-timeline files written with it
    # False: the capture was asked not to be parsed (--no-analyse, a trigger's "analyse": false)
    parse: bool | None = None
    # ms of the training process's time the capture's end took after its last step had closed (the trace
    # export, and the stacks / memory copy asked for); None: not measured (older npuprof, a failed export)
    export_ms: float | None = None
    # the profiler's start, at the boundary that ended step start_after_step (inside that step's
    # optimizer.step() or --step-on call: a timer of the user's around it counts it), in ms; absent when it
    # started in step 0 or between two boundaries (a time window), in later captures of a profiler kept
    # running and in records of older npuprof
    start_after_step: int | msgspec.UnsetType = msgspec.UNSET
    start_ms: float | msgspec.UnsetType = msgspec.UNSET
    # the call whose returns ended the steps: the --step-on MODULE:QUALNAME, None for optimizer.step();
    # absent in records of older npuprof (and in those of captures that never finished)
    step_on: str | msgspec.UnsetType | None = msgspec.UNSET
    # torchrun's TORCHELASTIC_RESTART_COUNT in the recording process: 0 in a job's first attempt, N after its
    # N-th elastic restart; absent outside torchrun (and in records of older npuprof)
    restart_count: int | msgspec.UnsetType = msgspec.UNSET
    # when the recording process began (epoch ns, to the clock tick: /proc's start of it), said with
    # restart_count: torchrun counts restarts per node, so a node's count does not tell another node's
    # workers of the same round (npuprof/results/rounds.py); absent in records of older npuprof
    process_start_ns: int | msgspec.UnsetType = msgspec.UNSET
    # the node the recording process ran on (os.uname().nodename): a dir named by --worker-name does not
    # say it, and a pid is checked only there; absent in records of older npuprof
    host: str | msgspec.UnsetType = msgspec.UNSET
    # true in a "capturing" record rewritten as torch's trace export began (its recording over): ``steps``
    # then lists every step recorded, not the first alone; a job killed inside that export leaves it so.
    # Absent otherwise (a record "capturing" without it: the process died while recording)
    export_began: bool | msgspec.UnsetType = msgspec.UNSET
    # said with export_began: the files that capture makes only once its trace is written, as the flags that
    # asked for them ("--export-stacks", "--memory-timeline", "--export-chrome-trace"); absent: none
    exports_asked: list[str] | msgspec.UnsetType = msgspec.UNSET
    version: int = RECORD_VERSION


class ExportsJob(msgspec.Struct, kw_only=True):
    """The requested stacks and memory timeline, finished by the post-processor
    (npuprof/results/extras.py)."""

    stacks: list[str] = []  # metrics, rebuilt from the raw trace
    memory_formats: list[str] = []  # rendered from the memory snapshot the step wrote
    memory_device: str = "cpu"
    memory_snapshot: str | None = None  # its file name in the rank dir


class CaptureJob(msgspec.Struct, kw_only=True):
    """What the post-processor does with one capture: write ``files`` and the record (unless ``written``),
    copy the trace for --export-chrome-trace (``chrome_trace``), parse (``analyse``; with ``export_db`` also
    the SQLite files of --export-type db), write the requested stacks / memory timeline (``exports``), gzip
    the raw trace (``gzip``). A field added with a default keeps JOB_VERSION: a job without it still reads."""

    rank_dir: str
    trace: str | None = None  # the raw trace's path
    files: dict[str, Any] = {}  # file name -> JSON content (profiler_info, profiler_metadata)
    record: CaptureRecord
    analyse: bool = False
    export_db: bool = False
    gzip: bool = False
    written: bool = False
    exports: ExportsJob | None = None
    chrome_trace: tuple[str, str] | None = None  # --export-chrome-trace: (source, target) to copy
    min_free_space: str = "0"  # --min-free-space: the parse and the gzip never take the disk below it
    version: int = JOB_VERSION


class HandoverError(ValueError):
    """A record or job that cannot be used; the message says why."""


def record_from(value: Any) -> CaptureRecord:
    """A decoded ``npuprof_capture.json`` as a CaptureRecord, or HandoverError naming the problem. An
    optional field that only labels the capture (``restart_count``, ``process_start_ns``) with a bad value
    is left out, not taken as damage: the capture itself is whole."""
    if isinstance(value, dict) and "restart_count" in value and restart_count_of(value) is None:
        value = {k: v for k, v in value.items() if k != "restart_count"}
    if isinstance(value, dict) and "process_start_ns" in value and process_start_ns_of(value) is None:
        value = {k: v for k, v in value.items() if k != "process_start_ns"}
    return _convert(value, CaptureRecord, "capture record", RECORD_VERSION)


def restart_count_of(record: Any) -> int | None:
    """The record's ``restart_count`` (a dict as read, or a CaptureRecord): a whole number from 0, else
    None (absent, or a bad value: a bool, a negative or a fraction, text)."""
    if isinstance(record, dict):
        value = record.get("restart_count")
    else:
        value = getattr(record, "restart_count", None)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def process_start_ns_of(record: Any) -> int | None:
    """The record's ``process_start_ns`` (a dict as read): a whole number above 0, else None (absent, or a
    bad value: it only places the capture among torchrun's rounds, never damage)."""
    value = record.get("process_start_ns") if isinstance(record, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def restart_count_from_env(environ: Any) -> int | None:
    """torchrun's TORCHELASTIC_RESTART_COUNT in ``environ`` (0 in a job's first attempt), or None when it
    is not set or not a whole number from 0."""
    text = environ.get("TORCHELASTIC_RESTART_COUNT")
    text = text.strip() if isinstance(text, str) else ""
    return int(text) if text.isascii() and text.isdigit() else None


def job_from(value: dict[str, Any]) -> CaptureJob:
    """The agent's job (a dict) as a CaptureJob, checked before it is sent."""
    return _convert(value, CaptureJob, "capture job", JOB_VERSION)


def job_from_line(line: bytes) -> CaptureJob:
    """One line of the post-processor's stdin as a CaptureJob, or HandoverError."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise HandoverError(f"a capture job is not JSON ({exc})") from None
    return _convert(value, CaptureJob, "capture job", JOB_VERSION)


def job_line(job: CaptureJob) -> bytes:
    """The wire form of ``job``: one line of UTF-8 JSON."""
    plain = msgspec.to_builtins(job, enc_hook=_plain_value)
    return json_bytes(plain, separators=(",", ":"), indent=None) + b"\n"


def _plain_value(value: Any) -> Any:
    """Subclasses of str, int, float (``torch.__version__`` is a TorchVersion) as their plain values."""
    for kind in (str, int, float):
        if isinstance(value, kind):
            return kind(value)
    raise TypeError(f"a capture job cannot carry a {type(value).__name__}")


def record_plain(record: CaptureRecord) -> dict[str, Any]:
    return msgspec.to_builtins(record)


def json_bytes(value: Any, *, indent: int | None = 4, separators: tuple[str, str] | None = None) -> bytes:
    """JSON as UTF-8: readable text, or every non-ASCII character escaped when lone surrogates (bytes that
    were not UTF-8) would not encode; the same JSON value either way."""
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, indent=indent, separators=separators).encode("ascii")


def _convert(value: Any, kind: Any, what: str, readable: int) -> Any:
    if not isinstance(value, dict):
        raise HandoverError(f"the {what} is not a JSON object")
    version = value.get("version", readable)
    if version != readable:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > readable
        raise HandoverError(
            f"the {what} is version {version!r}, this npuprof reads {readable}"
            + (": written by a newer npuprof; upgrade npuprof" if newer else "")
        )
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise HandoverError(f"the {what} is damaged ({exc})") from None
