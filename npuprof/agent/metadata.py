"""profiler_metadata.json content (docs/formats.md, "profiler_metadata.json"): user metadata, the environment
variables Ascend's tools expect, and torch.distributed's layout when it is initialised.

torch_npu's limits hold: 4096 characters a value (a non-string value counts as its JSON text) and 50 KiB
for the user's entries in all. A value over the limit is cut (a non-string one becomes its JSON text, cut)
and user entries past 50 KiB are left out, each with a warning naming the key."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from npuprof.config import METADATA_TOTAL_LIMIT, METADATA_VALUE_LIMIT

ENV_VARIABLES = (
    "ASCEND_GLOBAL_LOG_LEVEL",
    "HCCL_RDMA_TC",
    "HCCL_RDMA_SL",
    "ACLNN_CACHE_LIMIT",
    "HOST_CACHE_CAPACITY",
    "ASCEND_ENHANCE_ENABLE",
    "PYTORCH_NPU_ALLOC_CONF",
    "ASCEND_LAUNCH_BLOCKING",
    "HCCL_ALGO",
)
CUDA_ENV_PREFIXES = ("NCCL_", "CUDA_", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_NCCL_")
_SECRET_HINTS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def env_variables(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    result = {name: env.get(name, "") for name in ENV_VARIABLES}
    for name in sorted(env):
        if name.startswith(CUDA_ENV_PREFIXES) and not any(h in name for h in _SECRET_HINTS):
            result[name] = env[name]
    return result


def distributed_info() -> dict[str, Any]:
    """distributed_args and parallel_group_info, or {} when torch.distributed is not initialised."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return {}
        from torch.distributed import distributed_c10d as c10d

        world = dist.get_world_size()
        args: dict[str, Any] = {
            "rank": dist.get_rank(),
            "world_size": world,
            "backend": str(dist.get_backend()),
            "local_rank": _count(os.environ.get("LOCAL_RANK", "")) or 0,
        }
        for key, env_name in (
            ("tensor_model_parallel_size", "NPUPROF_TP"),
            ("pipeline_model_parallel_size", "NPUPROF_PP"),
        ):
            size = _count(os.environ.get(env_name, ""))
            if size is not None:
                args[key] = size
        args.setdefault("tensor_model_parallel_size", 1)
        args.setdefault("pipeline_model_parallel_size", 1)
        args["data_parallel_size"] = (
            world // (args["tensor_model_parallel_size"] * args["pipeline_model_parallel_size"]) or 1
        )
        groups: dict[str, Any] = {}
        for group, name in list(c10d._world.pg_names.items()):
            try:
                ranks = c10d.get_process_group_ranks(group)
                world_group = group is c10d.GroupMember.WORLD
                groups[str(name)] = {
                    "group_name": group_label(str(name), _description(group), world_group),
                    "group_rank": c10d.get_rank(group),
                    "global_ranks": sorted(int(r) for r in ranks),
                }
            except Exception:
                continue
        return {"distributed_args": args, "parallel_group_info": groups}
    except Exception:
        return {}


def group_label(name: str, desc: Any, default: bool | None = None) -> str:
    """A process group's ``group_name`` in ``parallel_group_info`` (docs/formats.md,
    "profiler_metadata.json"): ``default_group`` for the default group (torch_npu's name for it; ``default``
    None: the group torch names "0" or describes ``default_pg``), else the description the job gave it
    (``new_group(group_desc=...)``, a DeviceMesh's ``mesh_<dim>``), else its name: torch describes a group
    given none as ``undefined``, and torch before 2.3 describes none."""
    text = "" if desc is None else str(desc)
    if default is None:
        default = text == "default_pg" or (name == "0" and text in ("", "undefined"))
    if default:
        return "default_group"
    return name if text in ("", "undefined") else text


def _description(group: Any) -> Any:
    """torch's description of a process group (``pg_desc``; None before torch 2.3)."""
    try:
        return group.group_desc
    except Exception:
        return None


def _count(text: str) -> int | None:
    """A whole number written in ASCII digits (``int`` would also take ``٣``; ``"²".isdigit()`` is True
    and ``int("²")`` fails), or None."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def build_metadata(user: dict[str, Any], warn: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """The file's content. ``warn(key, line)`` hears of every value cut or entry left out."""
    told = warn or (lambda key, line: None)
    data: dict[str, Any] = {}
    env = env_variables()
    for name, value in env.items():
        env[name] = _cut(value, f"environment variable {name}", told)
    data["ENV_VARIABLES"] = env
    data.update(distributed_info())  # npuprof's own view, written whole as torch_npu writes its own
    total = 0
    for key, value in user.items():
        key = str(key)
        if len(key) > METADATA_VALUE_LIMIT:
            told(
                "metadata-key",
                f"profiler_metadata.json: a key of {len(key)} characters left out (limit 4096)",
            )
            continue
        value = _cut(value, f"metadata {key!r}", told)
        size = len(key) + len(value if isinstance(value, str) else _json_text(value))
        if total + size > METADATA_TOTAL_LIMIT:
            told(
                f"metadata-total:{key}",
                f"profiler_metadata.json: metadata {key!r} left out: the entries reach 50 KiB in all "
                "(torch_npu's limit)",
            )
            continue
        total += size
        data[key] = value
    return data


def _cut(value: Any, what: str, told: Callable[[str, str], None]) -> Any:
    """``value`` if its text fits in 4096 characters; else its text cut there (a JSON text for a
    non-string value), with a warning."""
    text = value if isinstance(value, str) else _json_text(value)
    if len(text) <= METADATA_VALUE_LIMIT:
        return value
    told(
        f"metadata-cut:{what}",
        f"profiler_metadata.json: {what} cut from {len(text)} to {METADATA_VALUE_LIMIT} characters "
        "(torch_npu's limit)",
    )
    return text[:METADATA_VALUE_LIMIT]


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)
