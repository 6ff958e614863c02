"""The tables of torch_npu's db export, as npuprof writes them (docs/formats.md, "The db export"):
``ascend_pytorch_profiler_{rank}.db`` (torch_npu's own tables and those CANN's msprof writes into the
same file) and ``analysis.db`` (communication and step times). Column names, order and types are
torch_npu's and msprof's; the shared tables use msprof's definitions (with their primary keys), since in a
real NPU run torch_npu adds its tables to the file msprof wrote. Pure data: db_export.py fills them.
"""

from __future__ import annotations

SCHEMA_VERSION = "1.2.0"  # msprof's META_DATA SCHEMA_VERSION

# table -> column definitions, in order
PROFILER_TABLES: dict[str, tuple[str, ...]] = {
    "STRING_IDS": ("id INTEGER PRIMARY KEY", "value TEXT"),
    "META_DATA": ("name TEXT", "value TEXT"),
    "HOST_INFO": ("hostUid TEXT", "hostName TEXT"),
    "RANK_DEVICE_MAP": ("rankId INTEGER", "deviceId INTEGER"),
    "NPU_INFO": ("id INTEGER", "name TEXT"),
    "SESSION_TIME_INFO": ("startTimeNs INTEGER", "endTimeNs INTEGER"),
    "ENUM_API_TYPE": ("id INTEGER PRIMARY KEY", "name TEXT"),
    "ENUM_MSTX_EVENT_TYPE": ("id INTEGER PRIMARY KEY", "name TEXT"),
    "ENUM_HCCL_DATA_TYPE": ("id INTEGER PRIMARY KEY", "name TEXT"),
    "ENUM_HCCL_LINK_TYPE": ("id INTEGER PRIMARY KEY", "name TEXT"),
    "ENUM_HCCL_TRANSPORT_TYPE": ("id INTEGER PRIMARY KEY", "name TEXT"),
    "ENUM_HCCL_RDMA_TYPE": ("id INTEGER PRIMARY KEY", "name TEXT"),
    "ENUM_MEMCPY_OPERATION": ("id INTEGER PRIMARY KEY", "name TEXT"),
    "STEP_TIME": ("id INTEGER", "startNs INTEGER", "endNs INTEGER"),
    # torch_npu declares PYTORCH_API's times TEXT; INTEGER here, as msprof-analyze's readers that do
    # arithmetic on them need (docs/formats.md)
    "PYTORCH_API": (
        "startNs INTEGER",
        "endNs INTEGER",
        "globalTid INTEGER",
        "connectionId INTEGER",
        "name INTEGER",
        "sequenceNumber INTEGER",
        "fwdThreadId INTEGER",
        "inputDtypes INTEGER",
        "inputShapes INTEGER",
        "callchainId INTEGER",
        "type INTEGER",
    ),
    "CONNECTION_IDS": ("id INTEGER", "connectionId INTEGER"),
    "PYTORCH_CALLCHAINS": ("id INTEGER", "stack INTEGER", "stackDepth INTEGER"),
    "CANN_API": (
        "startNs INTEGER",
        "endNs INTEGER",
        "type INTEGER",
        "globalTid INTEGER",
        "connectionId INTEGER PRIMARY KEY",
        "name INTEGER",
    ),
    "TASK": (
        "startNs INTEGER",
        "endNs INTEGER",
        "deviceId INTEGER",
        "connectionId INTEGER",
        "globalTaskId INTEGER",
        "globalPid INTEGER",
        "taskType INTEGER",
        "contextId INTEGER",
        "streamId INTEGER",
        "taskId INTEGER",
        "modelId INTEGER",
    ),
    "COMPUTE_TASK_INFO": (
        "name INTEGER",
        "globalTaskId INTEGER PRIMARY KEY",
        "blockNum INTEGER",
        "mixBlockNum INTEGER",
        "taskType INTEGER",
        "opType INTEGER",
        "inputFormats INTEGER",
        "inputDataTypes INTEGER",
        "inputShapes INTEGER",
        "outputFormats INTEGER",
        "outputDataTypes INTEGER",
        "outputShapes INTEGER",
        "attrInfo INTEGER",
        "opState INTEGER",
        "hf32Eligible INTEGER",
    ),
    "COMMUNICATION_OP": (
        "opName INTEGER",
        "startNs INTEGER",
        "endNs INTEGER",
        "connectionId INTEGER",
        "groupName INTEGER",
        "opId INTEGER PRIMARY KEY",
        "relay INTEGER",
        "retry INTEGER",
        "dataType INTEGER",
        "algType INTEGER",
        "count NUMERIC",
        "opType INTEGER",
        "deviceId INTEGER",
        "rankSize INTEGER",
    ),
    "MSTX_EVENTS": (
        "startNs INTEGER",
        "endNs INTEGER",
        "eventType INTEGER",
        "rangeId INTEGER",
        "category INTEGER",
        "message INTEGER",
        "globalTid INTEGER",
        "endGlobalTid INTEGER",
        "domainId INTEGER",
        "connectionId INTEGER",
    ),
    "GC_RECORD": ("startNs INTEGER", "endNs INTEGER", "globalTid INTEGER"),
    "MEMORY_RECORD": (
        "component INTEGER",
        "timestamp INTEGER",
        "totalAllocated INTEGER",
        "totalReserved INTEGER",
        "totalActive INTEGER",
        "streamPtr INTEGER",
        "deviceId INTEGER",
    ),
    "OP_MEMORY": (
        "name INTEGER",
        "size INTEGER",
        "allocationTime INTEGER",
        "releaseTime INTEGER",
        "activeReleaseTime INTEGER",
        "duration INTEGER",
        "activeDuration INTEGER",
        "allocationTotalAllocated INTEGER",
        "allocationTotalReserved INTEGER",
        "allocationTotalActive INTEGER",
        "releaseTotalAllocated INTEGER",
        "releaseTotalReserved INTEGER",
        "releaseTotalActive INTEGER",
        "streamPtr INTEGER",
        "deviceId INTEGER",
    ),
}
# msprof's index on TASK
PROFILER_INDEXES = ("CREATE INDEX IF NOT EXISTS TaskIndex ON TASK (startNs,globalTaskId)",)

_COMM_TAIL = ("step TEXT", "type TEXT")
ANALYSIS_TABLES: dict[str, tuple[str, ...]] = {
    "CommAnalyzerTime": (
        "hccl_op_name TEXT",
        "group_name TEXT",
        "start_timestamp NUMERIC",
        "elapse_time NUMERIC",
        "transit_time NUMERIC",
        "wait_time NUMERIC",
        "synchronization_time NUMERIC",
        "idle_time NUMERIC",
        *_COMM_TAIL,
    ),
    "CommAnalyzerBandwidth": (
        "hccl_op_name TEXT",
        "group_name TEXT",
        "transport_type TEXT",
        "transit_size NUMERIC",
        "transit_time NUMERIC",
        "bandwidth NUMERIC",
        "large_packet_ratio NUMERIC",
        "package_size NUMERIC",
        "count NUMERIC",
        "total_duration NUMERIC",
        *_COMM_TAIL,
    ),
    "CommAnalyzerMatrix": (
        "hccl_op_name TEXT",
        "group_name TEXT",
        "src_rank TEXT",
        "dst_rank TEXT",
        "transport_type TEXT",
        "transit_size NUMERIC",
        "transit_time NUMERIC",
        "bandwidth NUMERIC",
        *_COMM_TAIL,
        "op_name TEXT",
    ),
    "StepTraceTime": (
        "deviceId INTEGER",
        "step TEXT",
        "computing NUMERIC",
        "communication_not_overlapped NUMERIC",
        "overlapped NUMERIC",
        "communication NUMERIC",
        "free NUMERIC",
        "stage NUMERIC",
        "bubble NUMERIC",
        "communication_not_overlapped_and_exclude_receive NUMERIC",
        "preparing NUMERIC",
    ),
}

# ENUM_API_TYPE: msprof's levels, then torch_npu's own
API_ACL, API_MODEL, API_NODE, API_COMMUNICATION, API_RUNTIME = 20000, 15000, 10000, 5500, 5000
API_OP, API_QUEUE, API_TRACE, API_MSTX = 50001, 50002, 50003, 50004
UNSET = 4294967295  # msprof's "not applicable" for ids (contextId, modelId, rangeId)
MSTX_NO_DEVICE_LINK = 4000000000  # an mstx event's connectionId without a device task
MSTX_FIRST_LINK = 4000000001  # + the mark's id: an mstx event's link to its device task
MSTX_MARKER, MSTX_PUSH_POP, MSTX_RANGE, MSTX_MARKER_EX = 0, 1, 2, 3

ENUMS: dict[str, tuple[tuple[int, str], ...]] = {
    "ENUM_API_TYPE": (
        (API_ACL, "acl"),
        (API_MODEL, "model"),
        (API_NODE, "node"),
        (API_COMMUNICATION, "communication"),
        (API_RUNTIME, "runtime"),
        (API_OP, "op"),
        (API_QUEUE, "queue"),
        (API_TRACE, "trace"),
        (API_MSTX, "mstx"),
    ),
    "ENUM_MSTX_EVENT_TYPE": (
        (MSTX_MARKER, "marker"),
        (MSTX_PUSH_POP, "push/pop"),
        (MSTX_RANGE, "start/end"),
        (MSTX_MARKER_EX, "marker_ex"),
    ),
    "ENUM_HCCL_DATA_TYPE": (
        (0, "INT8"),
        (1, "INT16"),
        (2, "INT32"),
        (3, "FP16"),
        (4, "FP32"),
        (5, "INT64"),
        (6, "UINT64"),
        (7, "UINT8"),
        (8, "UINT16"),
        (9, "UINT32"),
        (10, "FP64"),
        (11, "BFP16"),
        (12, "INT128"),
        (14, "HIF8"),
        (15, "FP8E4M3"),
        (16, "FP8E5M2"),
        (17, "FP8E8M0"),
        (255, "RESERVED"),
        (65534, "N/A"),
        (65535, "INVALID_TYPE"),
    ),
    "ENUM_HCCL_LINK_TYPE": (
        (0, "ON_CHIP"),
        (1, "HCCS"),
        (2, "PCIE"),
        (3, "ROCE"),
        (4, "SIO"),
        (5, "HCCS_SW"),
        (6, "STANDARD_ROCE"),
        (7, "UB"),
        (8, "UBoE"),
        (255, "RESERVED"),
        (65534, "N/A"),
        (65535, "INVALID_TYPE"),
    ),
    "ENUM_HCCL_TRANSPORT_TYPE": (
        (0, "SDMA"),
        (1, "RDMA"),
        (2, "LOCAL"),
        (3, "UB"),
        (4, "ROCE"),
        (255, "RESERVED"),
        (65534, "N/A"),
        (65535, "INVALID_TYPE"),
    ),
    "ENUM_HCCL_RDMA_TYPE": (
        (0, "RDMA_SEND_NOTIFY"),
        (1, "RDMA_SEND_PAYLOAD"),
        (255, "RESERVED"),
        (65534, "N/A"),
        (65535, "INVALID_TYPE"),
    ),
    "ENUM_MEMCPY_OPERATION": (
        (0, "host to host"),
        (1, "host to device"),
        (2, "device to host"),
        (3, "device to device"),
        (4, "managed memory"),
        (5, "addr device to device"),
        (6, "host to device ex"),
        (7, "device to host ex"),
        (65535, "other"),
    ),
}
DATA_TYPE_NA = 65534
# torch dtype names (as Kineto writes them: "float", "c10::Half", "torch.bfloat16", ...) -> HCCL's
HCCL_DATA_TYPE = {
    "char": 0,
    "int8": 0,
    "short": 1,
    "int16": 1,
    "int": 2,
    "int32": 2,
    "half": 3,
    "float16": 3,
    "float": 4,
    "float32": 4,
    "long": 5,
    "int64": 5,
    "uint64": 6,
    "byte": 7,
    "uint8": 7,
    "uint16": 8,
    "uint32": 9,
    "double": 10,
    "float64": 10,
    "bfloat16": 11,
}


def create_statements(tables: dict[str, tuple[str, ...]]) -> list[str]:
    """``CREATE TABLE`` of each table, in msprof's form."""
    return [f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)})" for name, cols in tables.items()]


def insert_statement(table: str, tables: dict[str, tuple[str, ...]]) -> str:
    return f"INSERT INTO {table} VALUES ({', '.join('?' * len(tables[table]))})"
