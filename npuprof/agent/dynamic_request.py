"""One change of the watched profiler_config.json, read as a capture request (docs/architecture.md,
"Dynamic capture"). The file means what torch_npu's dynamic_profile says (docs/formats.md,
"profiler_config.json"); bad content never stops training:

- unparsable JSON: one ERROR with the parser's message, the change is ignored;
- a field with a bad value: one WARNING naming the field and the value, the field keeps its default (a
  ``start_step`` that is no step: an ERROR and no request, its default would cancel the capture in flight);
- an unknown key: a WARNING (with "did you mean" for a misspelt known key), ignored.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable
from typing import Any

from npuprof.agent.dynamic_files import request_trigger
from npuprof.config import (
    ConfigError,
    ProfileConfig,
    Schedule,
    config_from_json,
    file_ranks,
    in_file_terms,
    parse_config_bytes,
    ranks_text,
)
from npuprof.results.layout import RANK_DIR_SUFFIX

NO_CAPTURE = 0  # start_step 0: no capture (torch_npu's default)
NEXT_STEP = -1  # start_step -1: the step after the change is seen (what `npuprof trigger` writes by default)


def window_text(start_step: int, warmup: int, active: int) -> str:
    """What a request records, in words: torch_npu's ``start_step`` is where the warm-up begins."""
    if not warmup:
        start = "the next step" if start_step == NEXT_STEP else f"step {start_step}"
        return f"{active} step(s) from {start}"
    if start_step == NEXT_STEP:
        return f"{active} step(s) after {warmup} warm-up step(s) from the next step"
    first = start_step + warmup
    return f"{active} step(s) from step {first} (after {warmup} warm-up step(s) from step {start_step})"


FILE_LABEL = "profiler_config.json"

Say = Callable[[str, str], None]  # (level, message)


@dataclasses.dataclass
class Request:
    start_step: int  # NO_CAPTURE, NEXT_STEP, or an absolute step number
    warmup: int
    active: int
    cfg: ProfileConfig
    digest: str
    trigger_id: str | None = None
    queued: bool = False  # arrived while a capture was in flight: runs after it

    def describe(self) -> str:
        label = f" (trigger {self.trigger_id})" if self.trigger_id else ""
        if self.start_step == NO_CAPTURE:  # its id too: npuprof trigger tells who read a cancel by it
            return f"start_step 0: no capture{label}"
        window = window_text(self.start_step, self.warmup, self.active)
        ranks = "every rank" if self.cfg.ranks is None else f"ranks {_ranks(self.cfg.ranks)}"
        return f"capture {window} on {ranks} into {self.cfg.output}{label}"

    def with_window(self, first: int) -> ProfileConfig:
        """This request's configuration for a capture whose window begins at ``first``; its schedule is
        the one torch_npu would record in profiler_info."""
        cfg = copy.deepcopy(self.cfg)
        cfg.schedule = Schedule(skip_first=first, wait=0, warmup=self.warmup, active=self.active, repeat=1)
        return cfg


def _ranks(ranks: list[int]) -> str:
    return ranks_text(ranks) if ranks else "none (empty rank_list)"


def parse_request(raw: bytes, digest: str, base: ProfileConfig, say: Say) -> Request | None:
    """The request in ``raw`` (the file's bytes) on top of ``base`` (the run's configuration), or None when
    nothing in it can be acted on (said through ``say``)."""
    try:
        data = parse_config_bytes(raw, FILE_LABEL, FILE_LABEL)
    except ConfigError as exc:
        say("ERROR", f"{exc.problem}; this content is ignored")
        return None
    if not isinstance(data, dict):
        say("ERROR", f"{FILE_LABEL} must hold a JSON object, not {type(data).__name__}; ignored")
        return None
    if (problem := rank_problem(data)) is not None:
        say("ERROR", f"{problem}; this content is not acted on")
        return None
    cfg = copy.deepcopy(base)
    cfg.schedule = Schedule(off=True)

    def warn(line: str) -> None:
        say("WARNING", line)

    def on_bad(exc: ConfigError) -> None:
        unknown = exc.problem.startswith("unknown key")
        say("WARNING", exc.one_line() + ("; ignored" if unknown else "; its default is used"))

    try:
        config_from_json(data, FILE_LABEL, base=cfg, warn=warn, on_bad=on_bad, schedule=False)
    except ConfigError as exc:  # not an object: checked above; kept for any other whole-file problem
        say("ERROR", f"{exc.one_line()}; ignored")
        return None
    if "min_free_space" in data and cfg.min_free_space != base.min_free_space:
        warn(f"{FILE_LABEL}: min_free_space is the run's (npuprof run --min-free-space); ignored here")
        cfg.min_free_space = base.min_free_space
    cfg.output = _output(cfg.output, base.output, say)
    _fit_metadata(cfg, warn)
    _reconcile(cfg, warn)
    try:
        cfg.validate()
    except ConfigError as exc:  # the run's flags were valid: the file's values are not
        say("ERROR", f"{in_file_terms(exc, FILE_LABEL).one_line()}; this content is not acted on")
        return None
    warmup = int_field(data, "warmup", 0, 0, say)
    active = int_field(data, "active", 1, 1, say)
    start = data.get("start_step", NO_CAPTURE)
    if (problem := _not_an_int(start, "start_step", NEXT_STEP)) is not None:
        # its default (0) would cancel the capture in flight: a mistyped request must not (helper-124)
        say("ERROR", f"{problem}; this content is not acted on")
        return None
    label = request_trigger(data, raw) or None
    return Request(start, warmup, active, cfg, digest, label)


def rank_problem(data: dict[str, Any]) -> str | None:
    """What makes the file's ``is_rank`` / ``rank_list`` no choice of ranks, or None. Not a field that keeps
    its default: that default is every rank, and a request meant for two ranks of thousands, mistyped
    (``"rank_list": [0, "1"]``), captured on all of them (helper-152)."""
    try:
        file_ranks(data, FILE_LABEL)
    except ConfigError as exc:
        return f"{exc.one_line()} (a request for some ranks is not widened to every rank)"
    return None


def int_field(data: dict[str, Any], key: str, default: int, minimum: int, say: Say) -> int:
    value = data.get(key, default)
    if (problem := _not_an_int(value, key, minimum)) is not None:
        say("WARNING", f"{problem}; its default ({default}) is used")
        return default
    return value


def _not_an_int(value: Any, key: str, minimum: int) -> str | None:
    """What is wrong with ``value`` as the integer ``key`` (``minimum`` or more), or None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        shown = repr(value) if not isinstance(value, str) else f'"{value[:40]}"'
        return f"{FILE_LABEL}: {key}: must be an integer >= {minimum}, got {shown}"
    return None


def _output(prof_dir: str, run_output: str, say: Say) -> str:
    """``prof_dir`` relative to the run's output directory (the template's "./" is that directory itself),
    resolved as `npuprof run -o` resolves its own; the run's output when it is not safe."""
    from npuprof.results.paths import UnsafePathError, character_torch_cannot_write, resolve_output_path

    if prof_dir == run_output:
        return run_output
    try:
        resolved = resolve_output_path(os.path.join(run_output, prof_dir), f"{FILE_LABEL}: prof_dir")
    except UnsafePathError as exc:
        say("WARNING", f"{exc}; the run's output directory {run_output} is used")
        return run_output
    if (odd := character_torch_cannot_write(str(resolved))) is not None:  # helper-96
        say(
            "WARNING",
            f"{FILE_LABEL}: prof_dir {str(resolved)!r} holds {odd}, where torch cannot write its traces; the "
            f"run's output directory {run_output} is used",
        )
        return run_output
    if any(part.endswith(RANK_DIR_SUFFIX) for part in resolved.parts):
        say(
            "WARNING",
            f"{FILE_LABEL}: prof_dir {str(resolved)!r} is inside a capture's directory (*{RANK_DIR_SUFFIX}), "
            f"where no reader looks; the run's output directory {run_output} is used",
        )
        return run_output
    return str(resolved)


def _fit_metadata(cfg: ProfileConfig, warn: Callable[[str], None]) -> None:
    """torch_npu's limits on metadata (4096 characters a value, a JSON value counting as its text, and 50 KiB
    in all): an entry of a request over them is cut, or left out, with a warning (docs/formats.md,
    "profiler_metadata.json"), as ``npuprof.agent.metadata`` does with what reaches the file. helper-190: the
    request was refused whole, no capture for one long entry ("metadata: entry 'a' is over 4096
    characters; this content is not acted on")."""
    import json

    from npuprof.config import METADATA_TOTAL_LIMIT, METADATA_VALUE_LIMIT

    kept: dict[str, Any] = {}
    total = 0
    for key, value in cfg.metadata.items():
        name = f"{FILE_LABEL}: metadata {str(key)[:40]!r}"
        try:  # measured as ProfileConfig.validate measures it
            text = value if isinstance(value, str) else json.dumps(value, allow_nan=False)
        except ValueError:  # 1e400 reads as infinity
            warn(f"{name} holds a number out of JSON's range (infinity or NaN); left out")
            continue
        if len(str(key)) > METADATA_VALUE_LIMIT:
            warn(f"{name}: a key of {len(str(key))} characters; left out (torch_npu's limit is 4096)")
            continue
        if len(text) > METADATA_VALUE_LIMIT:
            warn(f"{name} cut from {len(text)} to {METADATA_VALUE_LIMIT} characters (torch_npu's limit)")
            value = text = text[:METADATA_VALUE_LIMIT]
        if total + len(str(key)) + len(text) > METADATA_TOTAL_LIMIT:
            warn(f"{name} left out: the entries reach 50 KiB in all (torch_npu's limit)")
            continue
        total += len(str(key)) + len(text)
        kept[key] = value
    cfg.metadata = kept


def _reconcile(cfg: ProfileConfig, warn: Callable[[str], None]) -> None:
    """Settings the file makes meaningless, dropped with a warning rather than refusing the request."""
    if cfg.op_attr and cfg.level == "Level_none":
        warn(f"{FILE_LABEL}: op_attr has no effect with profiler_level Level_none (as in torch_npu); off")
        cfg.op_attr = False
    if cfg.export_stacks and not cfg.with_stack:
        warn(f"{FILE_LABEL}: with_stack is false, so --export-stacks writes nothing for this capture")
        cfg.export_stacks = []
    if cfg.memory_timeline and not (
        cfg.record_shapes and cfg.profile_memory and (cfg.with_stack or cfg.with_modules)
    ):
        warn(
            f"{FILE_LABEL}: --memory-timeline needs record_shapes, profile_memory and with_stack (or "
            "with_modules) true; no memory timeline for this capture"
        )
        cfg.memory_timeline = []
