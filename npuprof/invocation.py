"""The npuprof command as the user can run it, for the messages that suggest one (``next: npuprof analyse
DIR``): bare ``npuprof`` where that name on PATH is this installation, else the path the user ran
(``.venv/bin/npuprof``, README's first command, in a venv not activated), or, run as ``python -m npuprof``,
that interpreter as typed with ``-m npuprof``. Imports nothing heavy: every command's start-up reads it.

The launcher's own command line decides; its processes (the job's agents, the post-processors) write
their suggestions into the log the run's end shows, so it is handed to them in ``NPUPROF_COMMAND``.
"""

from __future__ import annotations

import os
import sys

ENV_COMMAND = "NPUPROF_COMMAND"
NAME = "npuprof"
# pip's console script for an interpreter path with a space or too long for "#!": "#!/bin/sh", then this
SH_EXEC = "'''exec' \""


def remember(argv0: str) -> None:
    """At a command's start: how it was run (``sys.argv[0]``), for this process and those it starts. An
    outer run's value (a run inside another's job) is replaced or removed."""
    prefix = as_invoked(argv0)
    if prefix == NAME:
        os.environ.pop(ENV_COMMAND, None)
    else:
        os.environ[ENV_COMMAND] = prefix


def npuprof_cmd(words: str = "") -> str:
    """``npuprof WORDS`` as the user can type it (WORDS already quoted for the shell)."""
    prefix = os.environ.get(ENV_COMMAND, "")
    if not prefix or not prefix.isprintable():  # not ours (a newline would be a line of its own in the log)
        prefix = NAME
    return f"{prefix} {words}" if words else prefix


def as_invoked(argv0: str) -> str:
    """``npuprof``, or ``argv0`` quoted for the shell: relative as given (valid from the directory the
    user ran it in, this process's working directory at its start). A bare name (found on PATH) is
    ``npuprof``; `python -m npuprof` (``__main__.py``) is :func:`as_module`'s."""
    if _is_our_main(argv0):
        return as_module()
    if os.path.basename(argv0) == "__main__.py":  # another module's (`python -m pytest` calling main)
        return NAME
    if "/" not in argv0:
        return NAME
    try:
        ran = os.stat(argv0)
    except OSError:
        return NAME
    if (found := _on_path()) is not None and (found.st_dev, found.st_ino) == (ran.st_dev, ran.st_ino):
        return NAME
    import shlex

    return shlex.quote(argv0)


def _is_our_main(argv0: str) -> bool:
    """Whether ``argv0`` is this package's ``__main__.py``: `python -m npuprof`."""
    ours = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")
    try:
        return os.path.basename(argv0) == "__main__.py" and os.path.samefile(argv0, ours)
    except OSError:
        return False


def as_module() -> str:
    """`python -m npuprof`: ``npuprof`` where that name on PATH runs this interpreter (this installation's
    console script), else the interpreter as the user typed it, quoted for the shell, with ``-m npuprof``:
    a bare ``npuprof`` was "command not found" with none on PATH, and ran another installation with one."""
    script = _on_path_name()
    if script is not None and _runs_this_python(script):
        return NAME
    typed = sys.orig_argv[0] if sys.orig_argv else ""
    if not typed or not typed.isprintable():  # an embedded interpreter: nothing the user could type
        return NAME
    import shlex

    return f"{shlex.quote(typed)} -m {NAME}"


def _runs_this_python(script: str) -> bool:
    """Whether the console script ``script`` (pip's: a ``#!`` line naming its interpreter, or ``#!/bin/sh``
    and an ``exec`` of it) runs this Python: the same executable in the same directory (a venv's python
    and python3 link to one base executable; two venvs of one base share it, not the directory)."""
    try:
        with open(script, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace").splitlines()
    except OSError:
        return False
    named = head[0][2:].strip() if head and head[0].startswith("#!") else ""
    if named == "/bin/sh" and len(head) > 1 and head[1].startswith(SH_EXEC):
        named = head[1][len(SH_EXEC) :].split('"', 1)[0]
    elif " " in named:  # "#!/usr/bin/env python3", an interpreter with flags: not told, not claimed
        return False
    if not named or not sys.executable:
        return False
    try:
        same_dir = os.path.samefile(os.path.dirname(named), os.path.dirname(sys.executable))
    except OSError:
        return False
    return same_dir and os.path.realpath(named) == os.path.realpath(sys.executable)


def _on_path() -> os.stat_result | None:
    """What `npuprof` runs from the shell: the first executable of that name on PATH (shutil.which's rule,
    without its import)."""
    found = _on_path_name()
    try:
        return None if found is None else os.stat(found)
    except OSError:
        return None


def _on_path_name() -> str | None:
    """The path of :func:`_on_path`'s executable."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", NAME)
        try:
            os.stat(candidate)
        except OSError:
            continue
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None
