"""Runs npuprof's NpuBackend against the torch_npu stand-in (tests/fake_torch_npu) in this process and
prints one JSON document on the last line of stdout (captures are not made here: tests/npu_support/train.py
runs under `npuprof run`, so that npuprof's own agent and controller drive the backend). Usage:

    driver.py mapping OUTPUT_DIR CASES_JSON   each case: ProfileConfig fields; create a profiler, no capture
    driver.py probe                            npu_available(), the reason, own-mode detection
    driver.py each RUNS_JSON                   several of those, each with its own environment
                                               (``{"args": [...], "env": {...}}``), in children forked once
                                               torch is imported; prints the list of their documents
"""

from __future__ import annotations

import gc
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


def run(args: list[str]) -> dict[str, Any]:
    return mapping(args[1], json.loads(args[2])) if args[0] == "mapping" else probe()


def each(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run in a child forked from this process, its environment set before the child imports
    torch_npu (the stand-in reads its knobs at import) or npuprof: what a process of its own would do,
    without importing torch once a run."""
    import torch  # noqa: F401  (the only thing the children share)

    gc.freeze()  # torch's objects out of the children's collections and this process's last one

    results = []
    for spec in runs:
        read_end, write_end = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(read_end)
                os.environ.update(spec["env"])
                with os.fdopen(write_end, "w", encoding="utf-8") as sink:
                    sink.write(json.dumps(run(spec["args"])))
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end, encoding="utf-8") as source:
            text = source.read()
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit(f"driver run {spec} failed (wait status {status})")
        results.append(json.loads(text))
    return results


def main() -> None:
    result = each(json.loads(sys.argv[2])) if sys.argv[1] == "each" else run(sys.argv[1:])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
