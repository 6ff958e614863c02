"""The npuprof command as the user can run it, for the messages that suggest one (``next: npuprof analyse
DIR``): bare ``npuprof`` where that name on PATH is this installation, else the path the user ran
(``.venv/bin/npuprof``, README's first command, in a venv not activated). Imports nothing heavy: every
command's start-up reads it.

The launcher's own command line decides; its processes (the job's agents, the post-processors) write
their suggestions into the log the run's end shows, so it is handed to them in ``NPUPROF_COMMAND``.
"""

from __future__ import annotations

import os

ENV_COMMAND = "NPUPROF_COMMAND"
NAME = "npuprof"


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
    user ran it in, this process's working directory at its start). `python -m npuprof` (``__main__.py``)
    and a bare name (found on PATH) are ``npuprof``."""
    if "/" not in argv0 or os.path.basename(argv0) == "__main__.py":
        return NAME
    try:
        ran = os.stat(argv0)
    except OSError:
        return NAME
    if (found := _on_path()) is not None and (found.st_dev, found.st_ino) == (ran.st_dev, ran.st_ino):
        return NAME
    import shlex

    return shlex.quote(argv0)


def _on_path() -> os.stat_result | None:
    """What `npuprof` runs from the shell: the first executable of that name on PATH (shutil.which's rule,
    without its import)."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", NAME)
        try:
            found = os.stat(candidate)
        except OSError:
            continue
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return found
    return None
