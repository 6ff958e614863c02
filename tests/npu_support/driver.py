"""Runs npuprof's NpuBackend against the torch_npu stand-in (tests/fake_torch_npu) in this process and
prints one JSON document on the last line of stdout (captures are not made here: tests/npu_support/train.py
runs under `npuprof run`, so that npuprof's own agent and controller drive the backend). Usage:

    driver.py mapping OUTPUT_DIR CASES_JSON   each case: ProfileConfig fields; create a profiler, no capture
    driver.py probe                            npu_available(), the reason, own-mode detection
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _log_path() -> str:
    return os.environ["FAKE_TORCH_NPU_LOG"]


def _log_offset() -> int:
    try:
        return os.path.getsize(_log_path())
    except OSError:
        return 0


def _calls_since(offset: int) -> list[dict[str, Any]]:
    try:
        with open(_log_path(), encoding="utf-8") as f:
            f.seek(offset)
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def _config(case: dict[str, Any], output: str) -> Any:
    from npuprof.config import ProfileConfig

    cfg = ProfileConfig.from_payload({"output": output, **case})
    return cfg.validate()


def _jsonable(value: Any) -> Any:
    from torch_npu._calls import jsonable

    return jsonable(value)


def mapping(output: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    from npuprof.agent.backends.npu_backend import NpuBackend
    from npuprof.agent.schedule import SchedulePlan

    backend = NpuBackend()
    results = []
    for case in cases:
        cfg = _config(case, output)
        offset = _log_offset()
        ignored = backend.ignored_flags(cfg)
        prof = backend.create_profiler(cfg, SchedulePlan(cfg.schedule).action_at, lambda p: None, worker="w")
        results.append(
            {
                "ignored": ignored,
                "calls": _calls_since(offset),
                "experimental": _jsonable(vars(prof.prof_if.experimental_config)),
                "schedule_dict": _jsonable(vars(prof.schedule)),
                "schedule_actions": [prof.schedule(i).name for i in range(12)],
            }
        )
    return {
        "name": backend.name,
        "device": backend.device,
        "versions": backend.version_info(),
        "results": results,
    }


def probe() -> dict[str, Any]:
    from npuprof.agent.backends.npu_backend import (
        npu_available,
        torch_npu_own_mode_active,
        unavailable_reason,
    )

    available = npu_available()
    result: dict[str, Any] = {
        "available": available,
        "reason": unavailable_reason(),
        "own_mode": torch_npu_own_mode_active(),
    }
    if available:
        import torch

        result["torch_npu_registered"] = bool(torch.npu.is_available())
        from npuprof.agent.backends import select_backend
        from npuprof.agent.log import AgentLog

        result["selected"] = select_backend(AgentLog(None, "test")).name
    return result


def main() -> None:
    result = mapping(sys.argv[2], json.loads(sys.argv[3])) if sys.argv[1] == "mapping" else probe()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
