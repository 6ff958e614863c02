"""The files of dynamic capture (`npuprof run --dynamic DIR`, docs/architecture.md, "Dynamic capture"):
``DIR/profiler_config.json`` and ``DIR/log/``. Shared by the launcher (which makes them), the agent's
watcher (which reads them) and `npuprof trigger` / `npuprof status`; imports nothing heavy.

There is no shared memory and no lock file: a job killed with SIGKILL leaves only the config file and the
logs, and the next job with the same DIR works at once (torch_npu's /dev/shm leftover breaks it for up to
an hour).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONFIG_NAME = "profiler_config.json"
LOG_DIR = "log"
DIR_MODE = 0o750


def template_bytes() -> bytes:
    """torch_npu's template, as its dynamic_profile writes it (start_step 0: no capture until edited)."""
    from npuprof.config import template_json

    return (json.dumps(template_json(), indent=4) + "\n").encode()


def digest(raw: bytes) -> str:
    """A short fingerprint of a config file's content: a change of content, not of mtime, is a request."""
    import hashlib

    return hashlib.sha256(raw).hexdigest()[:20]


def trigger_label(value: object) -> str:
    """A file's ``trigger_id`` as the job's log lines name it ("(trigger ID)"): a printable string of at
    most 80 characters, else "" (no line names it; its request is told by time). One rule for the watcher
    and for who reads its logs (helper-190: an id of 100 characters was captured, and said unread for
    ever)."""
    return value if isinstance(value, str) and value.isprintable() and len(value) <= 80 else ""


# `npuprof trigger`'s id: its time, a random part, and a seal of the file it wrote (see request_trigger)
_SEALED_ID = re.compile(r"^(?P<id>\d{8}-\d{6}-[0-9a-f]{6})-(?P<seal>[0-9a-f]{6})$")
_NO_SEAL = "000000"


def sealed_trigger_id(base: str, written: Callable[[str], bytes]) -> str:
    """``base`` (``YYYYmmdd-HHMMSS-RRRRRR``) with the seal of the file ``written(id)`` makes: the digest of
    its bytes with the seal's own place zeroed."""
    return f"{base}-{digest(written(f'{base}-{_NO_SEAL}'))[:6]}"


def request_trigger(data: dict[str, Any], raw: bytes) -> str:
    """The trigger whose request ``raw`` (``data`` parsed from it) holds, as the job's lines name it
    (trigger_label); "" when the file was changed since `npuprof trigger` wrote it, its id's seal no longer
    the bytes': a hand edit that kept the id is a new request, told by time as any written by hand. It was
    named by the earlier trigger, and taken as read by that trigger's lines (helper-286). An id with no seal
    (an older npuprof's, or one typed by hand) names the request as before."""
    label = trigger_label(data.get("trigger_id"))
    sealed = _SEALED_ID.match(label)
    if sealed is None:
        return label
    unsealed = raw.replace(f'"{label}"'.encode(), f'"{sealed["id"]}-{_NO_SEAL}"'.encode(), 1)
    return label if digest(unsealed)[:6] == sealed["seal"] else ""


def edited_trigger(data: dict[str, Any], raw: bytes) -> str:
    """The id of the trigger whose file ``raw`` was edited by hand since (its seal broken), else ""."""
    label = trigger_label(data.get("trigger_id"))
    return label if label and not request_trigger(data, raw) else ""


def held_request(raw: bytes) -> str:
    """`` (trigger ID)`` when ``raw`` (a profiler_config.json) holds a request sent by npuprof trigger, else
    "": what a job started on it names, the file being no request for it."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, dict) or data.get("start_step", 0) in (0, None):
        return ""
    trigger = request_trigger(data, raw)
    return f" (trigger {trigger})" if trigger else ""


def prepare(path: str, named: str = "--dynamic") -> tuple[Path, str, bool]:
    """Make ``path`` ready for the watchers, at `npuprof run`'s start: the directory (0o750) and ``log/``,
    and the template profiler_config.json when there is none (an existing one is never overwritten).
    Returns (the directory resolved once, the file's digest now, whether the template was written).
    Raises ValueError (a symlink, a file or directory someone else could write) or OSError; the messages
    name the directory as the user gave it (``named``: the flag, or PROF_CONFIG_PATH)."""
    from npuprof.config import read_config_bytes
    from npuprof.file_trust import check_directory
    from npuprof.results.paths import resolve_output_path

    directory = resolve_output_path(path, named)
    _make_dir(directory)
    check_directory(str(directory), named)
    logs = directory / LOG_DIR
    _make_dir(logs)
    check_directory(str(logs), f"{named}'s log directory")
    created = _create_template(directory / CONFIG_NAME)
    if stat.S_ISLNK(os.lstat(directory / CONFIG_NAME).st_mode):
        raise ValueError(
            f"{str(directory / CONFIG_NAME)!r} is a symbolic link (never followed); put the file itself there"
        )
    raw = read_config_bytes(directory / CONFIG_NAME, f"{named}'s profiler_config.json")
    return directory, digest(raw), created


def why_unwritable(directory: Path) -> str:
    """Why this process cannot make files in ``directory`` ("" when it can): a read-only file system (a
    shared folder mounted so on the nodes), or its permissions."""
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "a read-only file system"
    except OSError as exc:
        return exc.strerror or str(exc)
    return "" if os.access(directory, os.W_OK | os.X_OK) else "not writable by you"


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(mode=DIR_MODE, parents=True)
    except FileExistsError:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise ValueError(f"{str(path)!r} is a symbolic link; give the real directory") from None


def _create_template(path: Path) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o640)
    except FileExistsError:
        return False
    try:
        data = template_bytes()
        while data:
            data = data[os.write(fd, data) :]
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return True


def write_request(directory: Path, data: bytes) -> Path:
    """Replace ``directory``'s profiler_config.json with ``data`` atomically (a temporary file beside it,
    then a rename): a watcher reads the old content or the new, never a half-written file."""
    from npuprof.file_trust import check_directory
    from npuprof.results.atomic import atomic_writer

    check_directory(str(directory), "the dynamic directory")
    target = directory / CONFIG_NAME
    if os.path.islink(target):  # the user's link: replaced by the rename, it was lost without a word
        raise ValueError(
            f"{target} is a symbolic link, which the job refuses to read; npuprof does not replace it: "
            "remove it, then trigger again"
        )
    with atomic_writer(target) as handle:
        handle.write(data)
    return target
