"""The functions a job's script defines, read from its file, for the --step-on advice at the end of a run
that counted no step (no optimizer stepped: a hand-written update, an inference loop). The advice named
`--step-on MODULE:QUALNAME` only; the script's own names are what a user types (README, "The step
function"). Parsed, never imported: the launcher runs none of the job's code."""

from __future__ import annotations

import ast
import os
import stat

from npuprof.job_script import JobScript

READ_LIMIT = 1 << 21  # a script larger than 2 MiB is no training script to read here
SHOWN = 4  # names listed at most


def script_file(script: JobScript, cwd: str) -> str | None:
    """The file ``script`` runs, relative paths taken from ``cwd``: its path, or for `-m pkg.mod` the
    module's file (pkg/mod.py, or pkg/mod/__main__.py for a package) under ``cwd``; None where not found."""
    if script.path is not None:
        candidates = [script.path]
    elif script.module is not None:
        base = os.path.join(*script.module.split("."))
        candidates = [f"{base}.py", os.path.join(base, "__main__.py")]
    else:
        return None
    for candidate in candidates:
        path = os.path.join(cwd, candidate)
        if os.path.isfile(path):
            return path
    return None


def defined_functions(path: str) -> list[str]:
    """The module-level functions and the public methods of the module-level classes that the file at
    ``path`` defines (``train_step``, ``Trainer.fit``), in the file's order; [] when it cannot be read."""
    try:
        source = _read_script(path)
        if len(source) > READ_LIMIT:
            return []
        tree = ast.parse(source, filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: list[str] = []
    for node in _module_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names += [
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and not item.name.startswith("_")
            ]
    return list(dict.fromkeys(names))


def _read_script(path: str) -> bytes:
    """At most READ_LIMIT + 1 bytes of the regular file at ``path`` (a link to one is followed). Opened
    without blocking and checked on the descriptor: a FIFO put in the script's place after the look that
    found a file hung the launcher at the run's end (helper-381). Raises OSError (ValueError: not a file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        return handle.read(READ_LIMIT + 1)


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run in the module's namespace: ``body`` and the blocks of its ``if`` (``if
    __name__ == "__main__":``), ``try`` and ``with`` statements, whose ``def`` binds a module-level name."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If | ast.Try | ast.With):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:
                found += _module_level(block)
    return found


def step_on_advice(names: list[str]) -> str:
    """A clause naming ``names`` as --step-on takes them: the one whose name says "step" first, as the
    flag to give; "" for none."""
    if not names:
        return ""
    # a name that ends in "step" (train_step, Trainer.step) before one that only holds it (warmup_steps)
    stepping = sorted(
        (name for name in names if "step" in name.rsplit(".", 1)[-1].lower()),
        key=lambda name: not name.lower().endswith("step"),
    )
    if stepping:
        return f" (the script's {stepping[0]}: --step-on __main__:{stepping[0]}, if each call is one step)"
    shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
    return f" (the script defines {shown}: --step-on __main__:NAME of the one called once a step)"
