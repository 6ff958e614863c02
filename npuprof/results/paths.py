"""Path safety: output paths must not be, or pass through, a symbolic link an attacker could plant."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path


def trace_cache_root() -> Path:
    """Where `npuprof analyse` writes the tables of a trace file whose own directory cannot take them."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "npuprof" / "traces"


def missing_home() -> str | None:
    """The home directory that :func:`trace_cache_root` lies in when it does not exist (HOME=/nonexistent,
    a system user's): a cache is never a reason to make a home (root could, at the filesystem's root).
    None when it exists or XDG_CACHE_HOME names the cache."""
    if os.environ.get("XDG_CACHE_HOME"):
        return None
    home = Path.home()
    return None if home.is_dir() else str(home)


def why_missing(path: str | os.PathLike[str]) -> str:
    """Why ``path``, which does not resolve to anything, is not there, in words: a symbolic link that leads
    nowhere (or round in a loop) is not said not to exist."""
    if not os.path.lexists(path):
        return "does not exist"
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a loop of symbolic links"
        if exc.errno == errno.ENOENT:
            return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
        return f"cannot be looked up ({exc.strerror})"
    return "does not exist"


class UnsafePathError(ValueError):
    """Raised for an output path that is, or passes through, a symbolic link we must not follow."""


_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def not_a_plain_file(info: os.stat_result) -> str | None:
    """What a file that is not a regular one (nor a directory or a link) is, in words; None otherwise."""
    return next((kind for test, kind in _KINDS if test(info.st_mode)), None)


def is_stream(path: str | os.PathLike[str]) -> bool:
    """``path`` is a character device or a FIFO itself (not a link to one): ``/dev/null``, a named pipe;
    or a descriptor of this process open on one (``descriptor_stream``). Written into, never replaced
    (what ``cp x /dev/null`` does)."""
    if descriptor_stream(path):
        return True
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


_DESCRIPTOR_PATH = re.compile(r"/(?:dev|proc/self)/fd/(\d{1,9})")


def descriptor_stream(path: str | os.PathLike[str]) -> bool:
    """``path`` is ``/dev/fd/N`` (or ``/proc/self/fd/N``) of a descriptor this process has open on a pipe
    or a character device: a shell's ``-o >(gzip > x.gz)`` (``/dev/fd/63``). A symbolic link, but to the
    user's own descriptor, which no one else can have planted: written into, as a named pipe is."""
    match = _DESCRIPTOR_PATH.fullmatch(os.fspath(path))
    if match is None:
        return False
    try:
        mode = os.fstat(int(match[1])).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def directory_form_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` as typed cannot name a file: it ends as only a directory's name does (a ``/``, or a last
    component ``.`` or ``..``), which ``os.path.abspath`` and ``Path`` drop: ``-o out/``, with no ``out``
    there, wrote the file ``out``, where a shell's ``> out/`` or Python's ``open("out/", "w")`` fail. None
    when it does not end so."""
    text = os.fspath(path)
    last = os.path.basename(text)
    if not text.endswith(os.sep) and last not in (".", ".."):
        return None
    target = os.path.abspath(text)
    if os.path.isdir(target):
        return f"{target} is a directory"
    ending = os.sep if text.endswith(os.sep) else last
    there = f"{target} is not a directory" if os.path.lexists(target) else f"there is no directory {target}"
    return f"{text} ends with {ending!r}, which names a directory, and {there}"


def output_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot take an output file that npuprof writes whole (to a temporary name, then
    renamed over it): its directory is missing or not one, it is a directory, a device, a FIFO or a
    socket, or a symbolic link to one of them (which the rename would replace), or it cannot be looked up,
    or it ends as a directory's name does (directory_form_problem). None when it can."""
    if (problem := directory_form_problem(path)) is not None:
        return problem
    target = Path(os.path.abspath(path))
    try:
        parent = os.stat(target.parent)
    except FileNotFoundError:
        return f"the directory {target.parent} does not exist"
    except OSError as exc:
        return f"cannot look up {target.parent}: {exc.strerror}"
    if not stat.S_ISDIR(parent.st_mode):
        return f"{target.parent} is not a directory"
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot look up {target}: {exc.strerror}"
    if stat.S_ISDIR(info.st_mode):
        return f"{target} is a directory"
    kind = not_a_plain_file(info)
    if kind is not None:
        return f"{target} is {kind} (writing the file would replace it)"
    if stat.S_ISLNK(info.st_mode):
        # the rename replaces the link itself: as root, --export-chrome-trace /dev/stdout (a link to the
        # terminal, a pipe or the file stdout was redirected to) left the trace in /dev in the place of the
        # system's /dev/stdout
        if names_a_descriptor(target):
            link = os.readlink(target)
            return (
                f"{target} names a file descriptor (-> {link!r}), not a file (writing the file would "
                "replace the link, not write to the descriptor)"
            )
        try:
            followed = os.stat(target)
        except OSError:
            return None  # a link to nowhere (or a loop): replaced by the file, as one to a file is
        kind = "a directory" if stat.S_ISDIR(followed.st_mode) else not_a_plain_file(followed)
        if kind is not None:
            link = os.readlink(target)
            return (
                f"{target} is a symbolic link to {kind} (-> {link!r}; writing the file would replace the "
                "link)"
            )
    return None


_MAX_LINKS = 40  # as the kernel's MAXSYMLINKS
_ANY_DESCRIPTOR_PATH = re.compile(r"/(?:dev|proc/(?:self|thread-self|\d+)(?:/task/\d+)?)/fd/\d+")


def names_a_descriptor(path: str | os.PathLike[str]) -> bool:
    """``path``, or a symbolic link on the way from it, is ``/dev/fd/N`` or ``/proc/PID/fd/N``: a descriptor
    of whatever process opens it (``/dev/stdout``, ``/dev/stderr``), whatever it is open on."""
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        if _ANY_DESCRIPTOR_PATH.fullmatch(current):
            return True
        try:
            link = os.readlink(current)
        except OSError:
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return False


def character_torch_cannot_write(path: str) -> str | None:
    """What in an output path makes torch lose its traces, in words, or None: its trace writer turns "\\"
    into "/" in an absolute path (the trace is written nowhere) and writes a control character or a '"'
    raw into the trace's JSON (its traceName: no reader takes it)."""
    if "\\" in path:
        return "a backslash"
    if '"' in path:
        return "a double quote"
    if any(c < " " or c == "\x7f" for c in path):
        return "a control character"
    return None


def resolve_output_path(path: str | os.PathLike[str], what: str = "--output") -> Path:
    """``path`` resolved once, component by component as the kernel walks it; raises UnsafePathError for
    the two symlinks an attacker could plant: the final component (we would write into whatever it
    names), and a link in a sticky world-writable directory (/tmp) that the kernel's
    ``fs.protected_symlinks`` would refuse to follow (see ``_followable``). Other symlinked components
    (a home or scratch directory that is a link) are followed. Components that do not exist yet are
    appended as given, to be created by the caller."""
    text = os.fspath(path)
    # an absolute path needs no working directory (which may have been removed: helper-98)
    pending = [p for p in (text if text.startswith("/") else os.path.join(os.getcwd(), text)).split("/") if p]
    current = "/"
    followed = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            return Path(os.path.normpath(os.path.join(candidate, *pending)))
        except OSError as exc:
            raise UnsafePathError(f"{what} {text!r}: cannot look up {candidate!r}: {exc.strerror}") from None
        if not stat.S_ISLNK(info.st_mode):
            current = candidate
            continue
        if not pending:
            raise UnsafePathError(
                f"{what} {text!r} is a symbolic link (-> {os.readlink(candidate)!r}); "
                "give the real path instead"
            )
        if not _followable(info, current):
            raise UnsafePathError(
                f"{what} {text!r} passes through the symbolic link {candidate!r}, owned by uid "
                f"{info.st_uid} in the shared sticky directory {current!r}: not followed (as the "
                "kernel's fs.protected_symlinks); give a path that avoids it"
            )
        followed += 1
        if followed > _MAX_LINKS:
            raise UnsafePathError(f"{what} {text!r}: too many levels of symbolic links")
        target = os.readlink(candidate)
        if target.startswith("/"):
            current = "/"
        pending[:0] = [p for p in target.split("/") if p]
    return Path(current)


def _followable(link: os.stat_result, directory: str) -> bool:
    """The kernel's fs.protected_symlinks rule: a symlink in a sticky world-writable directory is followed
    only when we own the link or the directory's owner does."""
    try:
        parent = os.stat(directory)
    except OSError:
        return False
    shared = parent.st_mode & (stat.S_ISVTX | stat.S_IWOTH) == (stat.S_ISVTX | stat.S_IWOTH)
    return not shared or link.st_uid in (os.geteuid(), parent.st_uid)
