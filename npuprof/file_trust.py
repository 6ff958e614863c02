"""Whom a configuration file or directory may come from (docs/architecture.md, "Safety").

A ``profiler_config.json`` starts captures, and captures can fill a disk: a file or directory that someone
else could write (group- or world-writable, or owned by another user) is refused, and so is a symbolic link
in its place (torch_npu's path rule). root's files are trusted, as ssh trusts them. Imports nothing heavy:
the launcher checks at every start.
"""

from __future__ import annotations

import os
import stat

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class UntrustedPathError(ValueError):
    """The one line saying why a path is not trusted, and what to do."""


def problem_with(info: os.stat_result, path: str, what: str, parent: bool = False) -> str | None:
    """Why ``info`` (an lstat or fstat of ``path``) is not trusted as ``what``, or None when it is.
    ``parent``: the directory holding a file, where a sticky world-writable directory (/tmp) is fine (no
    one else may replace our file in it)."""
    if stat.S_ISLNK(info.st_mode):
        return f"{what} {path!r} is a symbolic link; give the real path (links are not followed)"
    if info.st_uid not in (os.geteuid(), 0):
        return (
            f"{what} {path!r} is owned by another user (uid {info.st_uid}): anyone able to edit it could "
            "start captures that fill the disk; use a file or directory of your own"
        )
    writable = info.st_mode & _OTHERS_WRITE
    if writable and parent and info.st_mode & stat.S_ISVTX:
        return None
    if writable:
        return (
            f"{what} {path!r} is writable by others (mode {stat.S_IMODE(info.st_mode):04o}): anyone could "
            f"start captures that fill the disk; run chmod go-w {path!r}"
        )
    return None


def check_directory(path: str, what: str) -> None:
    """Raise UntrustedPathError when the directory ``path`` (not followed if a link) is not trusted."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UntrustedPathError(f"{what} {path!r}: {exc.strerror or exc}") from None
    problem = problem_with(info, path, what)
    if problem is None and not stat.S_ISDIR(info.st_mode):
        problem = f"{what} {path!r} is not a directory"
    if problem:
        raise UntrustedPathError(problem)


def check_file(fd: int, path: str, what: str) -> None:
    """Raise UntrustedPathError when the open file ``fd`` (opened from ``path`` without following a link)
    is not trusted, or its directory is writable by others."""
    problem = problem_with(os.fstat(fd), path, what)
    if problem is None:
        parent = os.path.dirname(os.path.abspath(path))
        try:
            problem = problem_with(os.stat(parent), parent, f"the directory of {what}", parent=True)
        except OSError:
            problem = None
    if problem:
        raise UntrustedPathError(problem)
