"""The typed, versioned hand-over from the launcher to every process of the job: ``NPUPROF_CONFIG``
(docs/architecture.md, "Hand-overs").

The launcher writes ``{"version", "config", "run"}`` (``ProfileConfig.to_env``); the agent reads it with
:func:`read_payload`, which checks every field's type and names a version it cannot read (a job that runs
another npuprof installation than the launcher, e.g. inside a container) instead of failing later with a
KeyError. Imported only in the training processes (msgspec stays off the launcher's start path).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import msgspec

from npuprof.config import (
    MAX_RANK,
    PAYLOAD_VERSION,
    ConfigError,
    ProfileConfig,
    decode_env_payload,
    is_safe_name,
)


class RunFacts(msgspec.Struct, kw_only=True):
    """What the launcher knows of the run, for the agents' records and log."""

    run_id: str = ""
    log: str | None = None  # npuprof.log's path
    output: str | None = None  # the result directory
    launcher_pid: int | None = None  # `npuprof run`'s pid: the job's own process dies with it
    # --dynamic: the digest of profiler_config.json when the job started (content there before is no request)
    dynamic_baseline: str | None = None
    start_ns: int | None = None  # when the run began (epoch ns): a file written since is this run's
    # torchrun's --local-ranks-filter: the local ranks whose output the user sees (None: all)
    shown_local_ranks: list[int] | None = None


class PayloadError(ValueError):
    """The payload cannot be used; the message says why and what to do."""


def read_payload(value: str) -> tuple[ProfileConfig, RunFacts]:
    """``NPUPROF_CONFIG``'s value as (config, run facts), or PayloadError naming the problem."""
    try:
        document: Any = decode_env_payload(value)
    except (OSError, ValueError, RecursionError) as exc:
        raise PayloadError(f"NPUPROF_CONFIG cannot be read ({exc})") from None
    # A payload without a version comes from a launcher older than versions; its form is version 1's.
    version = document.get("version", PAYLOAD_VERSION)
    if version != PAYLOAD_VERSION:
        raise PayloadError(
            f"NPUPROF_CONFIG is version {version!r}, this npuprof reads {PAYLOAD_VERSION}: the job runs "
            "another npuprof than the launcher; install the same version in both"
        )
    try:
        config = msgspec.convert(document.get("config", {}), ProfileConfig)
        run = msgspec.convert(document.get("run") or {}, RunFacts)
    except msgspec.ValidationError as exc:
        raise PayloadError(f"NPUPROF_CONFIG is damaged ({exc})") from None
    # both go into file names (the capture dirs, the post-processor's locks): "../x" would put them
    # outside the output (helper-117, -118)
    for field, value in (("worker_name", config.worker_name), ("run_id", run.run_id or None)):
        if value is not None and not is_safe_name(value):
            raise PayloadError(f"NPUPROF_CONFIG is damaged ({field} {value!r} is no file name)")
    # every value in range, as the launcher's flags are: a payload written by hand (a child started without
    # npuprof run) with a --wait of -1 or an empty output was taken as it was. Not metadata's lengths:
    # the launcher checked them on the values given, then wrote bytes that are not UTF-8 as \xNN, four
    # characters each (launch.text_metadata); a number JSON cannot hold is refused all the same.
    try:
        dataclasses.replace(config, metadata={}).validate()
        json.dumps(config.metadata, allow_nan=False)
    except ConfigError as exc:
        raise PayloadError(f"NPUPROF_CONFIG is damaged ({exc.source}: {exc.problem})") from None
    except ValueError:
        raise PayloadError("NPUPROF_CONFIG is damaged (a metadata number out of JSON's range)") from None
    for field, path in (
        ("output", config.output),
        ("dynamic", config.dynamic),
        ("export_chrome_trace", config.export_chrome_trace),
        ("log", run.log),
        ("output", run.output),
    ):
        try:  # a JSON escape can hold what no argument can: a surrogate the file system cannot encode
            os.fsencode(path or "")
        except UnicodeError:
            raise PayloadError(f"NPUPROF_CONFIG is damaged ({field} {path!r} is no usable path)") from None
    for field, number in (("launcher_pid", run.launcher_pid), ("start_ns", run.start_ns)):
        if number is not None and not 0 < number < 1 << 63:
            raise PayloadError(f"NPUPROF_CONFIG is damaged (run.{field} {number!r} is out of range)")
    if any(not 0 <= rank <= MAX_RANK for rank in run.shown_local_ranks or ()):
        raise PayloadError(f"NPUPROF_CONFIG is damaged (run.shown_local_ranks {run.shown_local_ranks!r})")
    return config, run
