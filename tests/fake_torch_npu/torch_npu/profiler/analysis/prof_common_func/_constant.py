"""Stand-in (tests only): the values of torch_npu's ``Constant`` that its public enums carry."""

from __future__ import annotations

import os
import time


class Constant:
    LEVEL0 = "Level0"
    LEVEL1 = "Level1"
    LEVEL2 = "Level2"
    LEVEL_NONE = "Level_none"
    AicPipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    AicArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    AicMemory = "ACL_AICORE_MEMORY_BANDWIDTH"
    AicMemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    AicMemoryUB = "ACL_AICORE_MEMORY_UB"
    AicResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    AicL2Cache = "ACL_AICORE_L2_CACHE"
    AicMemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AicMetricsNone = "ACL_AICORE_NONE"
    Db = "db"
    Text = "text"
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"

    FRAMEWORK_DIR = "FRAMEWORK"
    OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
    ASCEND_WORK_PATH = "ASCEND_WORK_PATH"
    PROFILING_WORK_PATH = "profiling_data"
    PROFILER_META_DATA = "profiler_metadata.json"
    TENSORBOARD_TRACE_HANDLER = "tensorboard_trace_handler"
    EXPORT_CHROME_TRACE = "export_chrome_trace"
    EXPORT_STACK = "export_stack"
    EXPORT_MEMORY_TIMELINE = "export_memory_timeline"
    METRIC_CPU_TIME = "self_cpu_time_total"
    METRIC_NPU_TIME = "self_npu_time_total"
    MAX_WORKER_NAME_LENGTH = 226


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


def collect_env_vars() -> dict:
    return {"ENV_VARIABLES": {name: os.environ.get(name, "") for name in ENV_VARIABLES}}


def _msg(level: str, message: str) -> None:
    stamp = time.strftime("[%Y-%m-%d %H:%M:%S]", time.localtime())  # as torch_npu's print_*_msg
    print(f"{stamp} [{level}] [{os.getpid()}] profiler.py: {message}", flush=True)


def print_error_msg(message: str) -> None:
    _msg("ERROR", message)


def print_warn_msg(message: str) -> None:
    _msg("WARNING", message)


def print_info_msg(message: str) -> None:
    _msg("INFO", message)
