"""Stand-in only: a rank's collectives as HCCL operators, and torch_npu's communication.json and
communication_matrix.json of them.

On the CPU the collectives run under gloo: Kineto records each as a ``gloo:<collective>`` span on the
backend's worker thread, with its tensors' ``Input Dims`` and ``Input type``. At the end of a capture
(``raw_collectives``) each becomes what HCCL leaves in CANN's data (``PROF_*/device_0/data/hccl.data``):
an operator ``hcom_<op>__<group id>_<index>`` (``hcom_allReduce__445_2``: the index counts the group's
operators) of the group, over the span's time, moving its tensors' bytes. The group is the world's
communicator (``comm``: its HCCL name, as trace_view.json's ``Group <name> Communication`` thread and
profiler_metadata.json's ``parallel_group_info`` name it); ``group`` is msprof's hash of that name (a number,
as in the real communication.json), ``<group id>`` its last three digits. The gloo spans themselves are
not framework operators then (under HCCL there are none).

``communication`` and ``matrix`` write what torch_npu's CommunicationParser makes of CANN's analysis: the
operators split by step (the device windows of FwkCANNRelationParser; a single window takes every operator),
``{"step<N>": {"collective": {...}, "p2p": {...}}}`` with ``"<op>@<group>"`` keys (p2p: names starting
``hcom_send``, ``hcom_receive``, ``hcom_batchsendrecv``), each kind with operators given a ``Total Op Info``
(time info summed but Start Timestamp and the ratios, which are then computed; bandwidth info per transport
with Transit Time, Transit Size and the Size Distribution summed, and no Bandwidth, as torch_npu computes and
drops it); the matrix ``{"step<N>": {"collective": {"<type>-top1@<group>": {"<src>-<dst>": {...}}}}}`` with
top1 / middle / bottom1..3 / total per (type, group, link). The field names and nesting follow torch_npu's
prof_view/_communication_parser.py and the real cluster_communication.json.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from typing import Any

HCCL_DATA = "hccl.data.slice_0"
_HCOM = {
    "all_reduce": "allReduce",
    "allreduce": "allReduce",
    "barrier": "allReduce",  # HCCL's barrier is an allreduce of one element
    "broadcast": "broadcast",
    "all_gather": "allGather",
    "allgather": "allGather",
    "all_gather_into_tensor": "allGather",
    "reduce_scatter": "reduceScatter",
    "reduce_scatter_tensor": "reduceScatter",
    "reduce": "reduce",
    "all_to_all": "alltoall",
    "alltoall": "alltoall",
    "alltoall_base": "alltoall",
    "send": "send",
    "recv": "receive",
    "scatter": "scatter",
    "gather": "gather",
}
_DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "half": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}
P2P_PREFIXES = ("hcom_send", "hcom_receive", "hcom_batchsendrecv")
HCCL_PATTERN = (
    r"send|reduce|invalid|broadcast|allreduce|"
    "receive|allgather|reducescatter|scatter|alltoall|alltoallv|alltoallvc|batchsendrecv"
)
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA")
GBPS = 5.0  # the stand-in's link: 5 GB/s (MB per ms)


def comm_name(ranks: list[int], index: int = 0) -> str:
    """The stand-in's HCCL communicator name of a group, in HCCL's form
    ``<ip>%<interface>_<port>_<index>_<µs>`` (``90.90.92.240%enp189s0f0_60000_0_1732766162316022``), the
    same on every rank of the group: what ``get_hccl_comm_name`` gives torch_npu's ``parallel_group_info``
    (docs/formats.md, "profiler_metadata.json")."""
    digest = hashlib.sha256(f"{index}:{','.join(map(str, ranks))}".encode()).digest()
    return f"127.0.0.1%lo_60000_{index}_{int.from_bytes(digest[:8], 'big') % 10**16:016d}"


def double_hash(text: str) -> int:
    """msprof's hash of a communicator name (two 32-bit polynomial hashes, x29 and x131 a character, side by
    side): the group's number in communication.json and the last three digits in its operators' names."""
    a = b = 0
    for ch in text:
        a = (a * 29 + ord(ch)) & 0xFFFFFFFF
        b = (b * 131 + ord(ch)) & 0xFFFFFFFF
    return (a << 32) | b


def _bytes(args: dict[str, Any]) -> int:
    total = 0
    for dims, dtype in zip(args.get("Input Dims") or [], args.get("Input type") or [], strict=False):
        if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
            count = 1
            for d in dims:
                count *= d
            total += count * _DTYPE_BYTES.get(str(dtype), 4)
    return total


def is_collective_span(event: dict[str, Any]) -> bool:
    return str(event.get("name", "")).startswith("gloo:") and event.get("ph") == "X"


def raw_collectives(kineto: dict[str, Any], ns: Any) -> list[dict[str, Any]]:
    """The HCCL operators of a Kineto recording's gloo spans (see the module's docstring)."""
    info = kineto.get("distributedInfo") or {}
    rank = int(info.get("rank", 0) or 0)
    world = int(info.get("world_size", 1) or 1)
    ranks = list(range(world))
    comm = comm_name(ranks)
    group = str(double_hash(comm))
    out = []
    spans = sorted((e for e in kineto.get("traceEvents", []) if is_collective_span(e)), key=lambda e: e["ts"])
    for index, e in enumerate(spans):
        kind = e["name"].split(":", 1)[1]
        hcom = _HCOM.get(kind, re.sub(r"_(\w)", lambda m: m.group(1).upper(), kind))
        size = 4 if kind == "barrier" else _bytes(e.get("args") or {})
        start = ns(e["ts"])
        out.append(
            {
                "name": f"hcom_{hcom}__{group[-3:]}_{index}",
                "type": f"hcom_{hcom}_",
                "group": group,
                "comm": comm,
                "start_ns": start,
                "dur_ns": max(ns(e["ts"] + e.get("dur", 0)) - start, 1000),
                "bytes": size,
                "rank": rank,
                "ranks": ranks,
            }
        )
    return out


# ---- CANN's analysis of each operator ---------------------------------------------------------------------
def _transport(size_mb: float, time_ms: float) -> dict[str, Any]:
    if not size_mb:
        return {
            "Transit Size(MB)": 0,
            "Transit Time(ms)": 0,
            "Bandwidth(GB/s)": 0,
            "Large Packet Ratio": 0,
            "Size Distribution": {},
        }
    return {
        "Transit Size(MB)": size_mb,
        "Transit Time(ms)": time_ms,
        "Bandwidth(GB/s)": round(size_mb / time_ms, 4) if time_ms else 0,
        "Large Packet Ratio": 0.0,
        "Size Distribution": {str(size_mb): [1, time_ms]},
    }


def op_info(op: dict[str, Any]) -> dict[str, Any]:
    """CANN's Communication Time Info and Communication Bandwidth Info of one operator: its time (ms) split
    into transit (its bytes over the link), wait (most of the rest: the other ranks) and idle."""
    elapse = op["dur_ns"] / 1e6
    size_mb = op["bytes"] / 1e6
    transit = min(size_mb / GBPS, elapse)
    wait = (elapse - transit) * 0.8
    sync = wait * 0.9
    return {
        "Communication Time Info": {
            "Start Timestamp(us)": op["start_ns"] / 1000,
            "Elapse Time(ms)": elapse,
            "Transit Time(ms)": transit,
            "Wait Time(ms)": wait,
            "Synchronization Time(ms)": sync,
            "Idle Time(ms)": elapse - transit - wait,
            "Wait Time Ratio": _ratio(wait, wait + transit),
            "Synchronization Time Ratio": _ratio(sync, sync + transit),
        },
        "Communication Bandwidth Info": {
            "RDMA": _transport(0, 0),
            "HCCS": _transport(size_mb, transit),
            "PCIE": _transport(0, 0),
            "SDMA": _transport(size_mb, transit),  # SDMA: HCCS and PCIE together
        },
    }


def op_links(op: dict[str, Any]) -> dict[str, Any]:
    """CANN's matrix of one operator: its links from this rank (``"<src>-<dst>"``, the self link
    ``"r-r"`` LOCAL)."""
    size_mb = op["bytes"] / 1e6
    transit = op_info(op)["Communication Time Info"]["Transit Time(ms)"]
    links = {}
    for peer in op["ranks"]:
        local = peer == op["rank"]
        links[f"{op['rank']}-{peer}"] = {
            "Transport Type": "LOCAL" if local else "HCCS",
            "Transit Size(MB)": size_mb,
            "Transit Time(ms)": transit,
            "Bandwidth(GB/s)": round(size_mb / transit, 4) if transit else 0,
        }
    return links


def _ratio(dividend: float, divisor: float) -> float:
    return 0 if abs(divisor) < 1e-15 else round(dividend / divisor, 4)


# ---- torch_npu's CommunicationParser ---------------------------------------------------------------------
def _by_step(ops: list[dict[str, Any]], ranges: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``"<op>@<group>"`` -> the operator, per step key (split_comm_op_by_step): a single window takes every
    operator; else each goes to the first window holding its start (µs, ends included), or to none."""
    steps = [
        {"key": f"step{r['step']}", "start_ns": r["start_ns"], "end_ns": r["end_ns"]} for r in ranges
    ] or [{"key": "step", "start_ns": 0, "end_ns": float("inf")}]
    found: dict[str, dict[str, Any]] = {s["key"]: {} for s in steps}
    for op in ops:
        key = f"{op['name']}@{op['group']}"
        if len(steps) == 1:
            found[steps[0]["key"]][key] = op
            continue
        for s in steps:
            if s["start_ns"] <= op["start_ns"] <= s["end_ns"]:
                found[s["key"]][key] = op
                break
    return found


def _split(ops: dict[str, Any]) -> dict[str, dict[str, Any]]:
    kinds: dict[str, dict[str, Any]] = {"p2p": {}, "collective": {}}
    for key, op in ops.items():
        low = key.lower()
        if low.startswith(P2P_PREFIXES):
            kinds["p2p"][key] = op
        elif low.startswith("total"):
            continue
        else:
            kinds["collective"][key] = op
    return kinds


def _total(infos: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """compute_total_info's Total Op Info of one kind's operators."""
    times: dict[str, float] = defaultdict(float)
    bandwidth: dict[str, dict[str, Any]] = {}
    for info in infos.values():
        for name, value in info["Communication Time Info"].items():
            if name not in ("Wait Time Ratio", "Synchronization Time Ratio", "Start Timestamp(us)"):
                times[name] += value
        for transport, part in info["Communication Bandwidth Info"].items():
            total = bandwidth.setdefault(
                transport, {"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": {}}
            )
            for name in ("Transit Time(ms)", "Transit Size(MB)"):
                total[name] += part.get(name, 0)
            for size, (count, time_ms) in part.get("Size Distribution", {}).items():
                slot = total["Size Distribution"].setdefault(size, [0, 0])
                slot[0] += count
                slot[1] += time_ms
    times["Wait Time Ratio"] = _ratio(
        times.get("Wait Time(ms)", 0), times.get("Wait Time(ms)", 0) + times.get("Transit Time(ms)", 0)
    )
    times["Synchronization Time Ratio"] = _ratio(
        times.get("Synchronization Time(ms)", 0),
        times.get("Transit Time(ms)", 0) + times.get("Synchronization Time(ms)", 0),
    )
    return {"Communication Time Info": dict(times), "Communication Bandwidth Info": bandwidth}


def communication(ops: list[dict[str, Any]], ranges: list[dict[str, Any]]) -> dict[str, Any]:
    """communication.json's content (empty without operators: torch_npu then writes no file)."""
    if not ops:
        return {}
    out = {}
    for step, found in _by_step(ops, ranges).items():
        kinds = _split({key: op_info(op) for key, op in found.items()})
        for infos in kinds.values():
            if infos:
                infos["Total Op Info"] = _total(infos)
        out[step] = kinds
    return out


def matrix(ops: list[dict[str, Any]], ranges: list[dict[str, Any]]) -> dict[str, Any]:
    """communication_matrix.json's content (get_matrix_ops_dict of each step's operators)."""
    if not ops:
        return {}
    by_step = _by_step(ops, ranges)
    if not any(by_step.values()):  # split_matrix_by_step: no step holds any, all under "step"
        by_step = {"step": {f"{op['name']}@{op['group']}": op for op in ops}}
    out = {}
    for step, found in by_step.items():
        if not found:
            continue  # a step without operators has no entry
        kinds = _split({key: op_links(op) for key, op in found.items()})
        out[step] = {kind: _integrate(_by_type(links)) for kind, links in kinds.items()}
    return out


def _by_type(ops: dict[str, dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for key, links in ops.items():
        found = re.search(HCCL_PATTERN, key.lower())
        kind = found.group() if found else key.split("__")[0]
        for link, data in links.items():
            grouped[(kind, key.split("@")[-1], link)].append({**data, "Op Name": key.split("@")[0]})
    return grouped


def _integrate(grouped: dict[tuple[str, str, str], list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for (kind, group, link), data in grouped.items():
        data.sort(key=lambda d: d["Bandwidth(GB/s)"], reverse=True)
        size = sum(d.get("Transit Size(MB)", 0) for d in data)
        time_ms = sum(d.get("Transit Time(ms)", 0) for d in data)
        out[f"{kind}-top1@{group}"][link] = data[0]
        out[f"{kind}-middle@{group}"][link] = data[len(data) // 2]
        out[f"{kind}-bottom1@{group}"][link] = data[-1]
        out[f"{kind}-total@{group}"][link] = {
            "Transport Type": data[0].get("Transport Type", ""),
            "Transit Size(MB)": size,
            "Transit Time(ms)": time_ms,
            "Bandwidth(GB/s)": _ratio(size, time_ms),
        }
        if len(data) >= 2:
            out[f"{kind}-bottom2@{group}"][link] = data[-2]
        if len(data) >= 3:
            out[f"{kind}-bottom3@{group}"][link] = data[-3]
    return dict(out)
