"""Atomic file writes: a reader sees either nothing or the whole file, never a partial one."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

FILE_MODE = 0o640
DIR_MODE = 0o750


def current_umask() -> int:
    """The process umask, read without changing it where Linux shows it (os.umask can only be read by
    setting it, which races with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    previous = os.umask(0o077)
    os.umask(previous)
    return previous


def file_mode() -> int:
    """0o640 less the umask: a stricter umask stays stricter, nothing is looser."""
    return FILE_MODE & ~current_umask()


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "wb", *, fsync: bool = True) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; rename it over ``path`` only if the block succeeds.

    On any error (a full disk included) the temporary file is removed and ``path`` is left as it was.
    ``fsync=False`` skips flushing to disk (~5 ms here): readers still never see a partial file, only
    a power loss may; for small files written inside a training step or on the launcher's start path.
    """
    target = Path(path)
    _refuse_to_replace_a_special_file(target)
    fd, tmp_name = _create_temp(target)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise


def _refuse_to_replace_a_special_file(target: Path) -> None:
    """The rename would replace a device, a FIFO or a socket named as the file (``-o /dev/null`` as root
    would replace the system's): an OSError instead."""
    from npuprof.results.paths import not_a_plain_file

    try:
        info = os.lstat(target)
    except OSError:
        return  # none there (or it cannot be looked up: the write fails on its own then)
    if not_a_plain_file(info) is not None:
        raise OSError(errno.EEXIST, "not a regular file; npuprof does not replace it", str(target))


def temp_name(target: Path) -> Path:
    """A temporary name beside ``target`` carrying the writer's pid (``.NAME.PID-HEX12.tmp``), from which
    remove_dead_writers_temps tells its leftovers once the writer is gone."""
    return target.with_name(f".{target.name}.{os.getpid()}-{os.urandom(6).hex()}.tmp")


def _create_temp(target: Path) -> tuple[int, str]:
    """A new private file beside ``target``, as tempfile.mkstemp makes it (importing tempfile costs
    ~5 ms of the launcher's start)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = str(temp_name(target))
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def remove_dead_writers_temps(
    directory: Path, idle_s: float = 60.0, stuck: dict[str, tuple[int, str]] | None = None
) -> dict[str, int]:
    """Delete the temporary files ``atomic_writer`` (or Kineto, under a name of ``temp_name``'s) left in
    ``directory`` when its writer was killed (kill -9 while a post-processor gzipped a trace of gigabytes,
    or while torch wrote one): those whose pid is gone and that no one wrote for ``idle_s`` seconds (the
    directory may be shared with another host, where the pid says nothing; a live writer writes all the
    time; 0 where the caller knows the directory's writers ran here: no guard). Returns the names removed,
    with their sizes; those a read-only file system or permissions kept go into ``stuck`` (name: size, why
    in words), where given."""
    removed: dict[str, int] = {}
    now = time.time()
    for entry, info in dead_writers_temps(directory):
        if idle_s > 0 and now - info.st_mtime < idle_s:
            continue
        try:
            os.unlink(entry.path)
        except OSError as exc:
            if stuck is not None and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                stuck[entry.name] = (info.st_size, (exc.strerror or os.strerror(exc.errno)).lower())
            continue
        removed[entry.name] = info.st_size
    return removed


def dead_writers_temps(directory: Path) -> list[tuple[os.DirEntry[str], os.stat_result]]:
    """The plain files of ``temp_name``'s form in ``directory`` whose writer has ended (another process's:
    its pid gone, or given again since), each with its ``stat``; one whose writer cannot be told is left
    out. Whether one is old enough to be taken for dead is the caller's to judge (``st_mtime``)."""
    found: list[tuple[os.DirEntry[str], os.stat_result]] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    for entry in entries:
        pid = writer_pid(entry.name)
        if pid is None or pid == os.getpid():
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and _writer_gone(pid, info.st_ctime):
                found.append((entry, info))
        except OSError:
            continue
    return found


def _writer_gone(pid: int, changed: float) -> bool:
    """Whether the writer ``pid`` of a file last changed at ``changed`` has ended: no process has the pid,
    or the one that has it began after the file was written (a pid given again: the file's gigabytes were
    kept as long as that process lived). Raises OSError when it cannot be told (another user's pid)."""
    from npuprof.results.layout import started_after

    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return True
    return started_after(pid, changed)


def writer_pid(name: str) -> int | None:
    """The pid in a name ``temp_name`` makes (``.NAME.PID-HEX12.tmp``, or Kineto's own temporary file of
    one, ``.NAME.PID-HEX12.tmp.tmp``); None for any other name."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    base = name[:-4]
    base = base[:-4] if base.endswith(".tmp") else base
    tag = base.rsplit(".", 1)[-1]
    pid, _, token = tag.partition("-")
    if not (pid.isascii() and pid.isdigit() and len(pid) <= 10 and len(token) == 12):
        return None
    return int(pid) if all(c in "0123456789abcdef" for c in token) else None


def write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    with atomic_writer(path, "wb", fsync=fsync) as handle:
        handle.write(data)


def write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = True) -> None:
    """UTF-8 text. Lone surrogates (bytes that were not UTF-8, read with surrogateescape, e.g. from a path)
    go back to their original bytes; none can make the write fail."""
    write_bytes(path, utf8_bytes(text), fsync=fsync)


def utf8_bytes(text: str) -> bytes:
    """The bytes :func:`write_text` writes of ``text``."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape" if _escaped_bytes_only(text) else "backslashreplace")


def _escaped_bytes_only(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 4, *, fsync: bool = True) -> None:
    """JSON with a stable layout (indent 4 as torch_npu writes its info files). Lone surrogates are written
    as their ``\\uXXXX`` escapes: the same JSON value, in valid UTF-8."""
    import json

    text = json.dumps(obj, indent=indent, ensure_ascii=False)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = json.dumps(obj, indent=indent, ensure_ascii=True).encode("ascii")
    write_bytes(path, data + b"\n", fsync=fsync)


def make_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and its missing parents, each with mode 0o750 less the umask (a stricter umask is
    respected, nothing is looser); an existing directory is kept as is. (``Path.mkdir(parents=True)``
    would create the parents with the umask alone, often 0o755.)"""
    target = Path(path)
    missing: list[Path] = []
    current = target
    while not current.is_dir() and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
    return target
