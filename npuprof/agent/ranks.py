"""Who this process is: its rank (launcher variables first, torch.distributed once it is initialised)
and its worker name (the prefix of its rank dirs)."""

from __future__ import annotations

import os
import sys

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK")


def rank_from_env(environ: dict[str, str] | None = None) -> int | None:
    env = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        rank = _whole_number(env.get(name, ""))
        if rank is not None:
            return rank
    return None


def local_rank_from_env() -> int | None:
    """``LOCAL_RANK``, or None when it is unset or no whole number of ASCII digits."""
    return _whole_number(os.environ.get("LOCAL_RANK", ""))


def _whole_number(text: str) -> int | None:
    """``"²".isdigit()`` is True and ``int("²")`` a ValueError: such a value is no number here."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


# The rank torch.distributed last gave: a capture that ends after destroy_process_group() (at exit, the
# training over) is still that rank's, in a job that starts its ranks without a launcher variable.
_last_process_group_rank: int | None = None


def current_rank() -> int | None:
    global _last_process_group_rank
    rank = rank_from_env()
    if rank is not None:
        return rank
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            _last_process_group_rank = int(dist.get_rank())
    except Exception:
        pass
    return _last_process_group_rank


def one_rank_of_several() -> bool:
    """Whether torch.distributed is initialised here with more than one rank (never imported for this)."""
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(
            dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        )
    except Exception:  # a torch without it, a group torn down
        return False


def worker_name(configured: str | None) -> str:
    """``--worker-name``, else the short host name."""
    if configured:
        return configured
    from npuprof.results.layout import short_host_name

    return short_host_name()
