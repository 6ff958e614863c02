"""profiler_metadata.json content (docs/formats.md, "profiler_metadata.json"): user metadata, the environment
variables Ascend's tools expect, and torch.distributed's layout when it is initialised."""

from __future__ import annotations

import os
import sys
from typing import Any

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
            "local_rank": int(os.environ.get("LOCAL_RANK", "0") or 0),
        }
        for key, env_name in (
            ("tensor_model_parallel_size", "NPUPROF_TP"),
            ("pipeline_model_parallel_size", "NPUPROF_PP"),
        ):
            if os.environ.get(env_name, "").isdigit():
                args[key] = int(os.environ[env_name])
        args.setdefault("tensor_model_parallel_size", 1)
        args.setdefault("pipeline_model_parallel_size", 1)
        args["data_parallel_size"] = (
            world // (args["tensor_model_parallel_size"] * args["pipeline_model_parallel_size"]) or 1
        )
        groups: dict[str, Any] = {}
        for group, name in list(c10d._world.pg_names.items()):
            try:
                ranks = c10d.get_process_group_ranks(group)
                groups[str(name)] = {
                    "group_name": "default_group" if group is c10d.GroupMember.WORLD else str(name),
                    "group_rank": c10d.get_rank(group),
                    "global_ranks": sorted(int(r) for r in ranks),
                }
            except Exception:
                continue
        return {"distributed_args": args, "parallel_group_info": groups}
    except Exception:
        return {}


def build_metadata(user: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    data["ENV_VARIABLES"] = env_variables()
    data.update(distributed_info())
    for key, value in user.items():
        data[str(key)] = value
    return data
