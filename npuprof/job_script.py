"""The script a job's command runs (`python train.py`, `python -m pkg.train`, `torchrun ... train.py`,
`accelerate launch --config_file c.py train.py`), for the --step-on fix that names the script's functions
as ``__main__``'s. Imports nothing heavy: `npuprof run` reads it before the job starts.

A ``.py`` word is not always the script: a launcher's option may take a file (``--config_file c.py``), and
the script's own arguments may name one (``train.py --config c.py``). Python's own options are read as
CPython reads them; a launcher's as argparse reads them: an option takes the word after it as its value
unless it is one of the launcher's switches (options without a value) or is written ``--opt=value``. A
``.py`` word after an option not known to be a switch may be that option's value: it is the script only
where no later word is surely one, and is then said to be uncertain. (Neither the first ``.py`` word nor
the last is the script in general: ``--config_file c.py train.py``, ``train.py --config c.py``.) A shell's
-c line is read as a command where it is one simple command (``bash -c "python train.py"``)."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

# CPython's options that take a value (the next word, or attached: -Wignore) and the long one that does
_PYTHON_VALUED = frozenset("WX")
_PYTHON_LONG_VALUED = ("--check-hash-based-pycs",)
_PYTHON_NAME = re.compile(r"(python|pypy)[\w.-]*")
# a shell that may run the job's command line given with -c (`bash -c "python train.py"`), and what makes
# that line more than one simple command (`cd x && python a.py`, `$ARGS`): its script is then not known
_SHELL_NAME = re.compile(r"(ba|da|z|k|mk)?sh")
_SHELL_SYNTAX = frozenset(";&|`$()<>\n")
# launchers run as Python modules (`python -m torch.distributed.run ...`): their arguments follow
_LAUNCHER_MODULES = (
    "torch.distributed.run",
    "torch.distributed.launch",
    "accelerate.commands.launch",
    "deepspeed.launcher.runner",
)
# the launchers' options that take no value, spelt with dashes (argparse takes `--multi_gpu` and
# `--multi-gpu` alike): torchrun and torch.distributed.launch (torch 2.13), accelerate launch (1.15: its
# parser's nargs=0 options), deepspeed's, mpirun's and srun's common ones; any other option takes the word
# after it (unless that word is itself an option)
_SWITCHES = frozenset(
    (
        "-h", "--help", "--standalone", "--no-python", "--run-path", "--virtual-local-rank", "--use-env",
        "--cpu", "--debug", "--downcast-bf16", "--dynamo-use-dynamic", "--dynamo-use-fullgraph",
        "--dynamo-use-regional-compilation", "--enable-cpu-affinity", "--fp8-use-autocast-during-eval",
        "--multi-gpu", "--no-tpu-cluster", "-q", "--quiet", "--same-network", "--tpu", "--tpu-cluster",
        "--tpu-use-sudo", "--use-deepspeed", "--use-fsdp", "--use-megatron-lm", "--use-parallelism-config",
        "--no-local-rank", "--force-multi", "--bind-cores-to-rank", "--save-pid", "--no-ssh-check",
        "--allow-run-as-root", "--oversubscribe", "-v", "--verbose",
    )
)  # fmt: skip
# a launcher's switch that makes its script a module name (`torchrun -m pkg.train`)
_MODULE_SWITCHES = ("-m", "--module")


@dataclass(frozen=True)
class JobScript:
    """What the command runs as its script: a file (``path``) or a module (``module``, `-m`); ``sure``:
    False where the word may be a launcher option's value instead (then the script may be a later one)."""

    path: str | None = None
    module: str | None = None
    sure: bool = True
    # the other .py words that may be the script: taken as a launcher option's value (``--config_file
    # c.py``), or after an uncertain script (its own arguments, or the script after it)
    others: tuple[str, ...] = ()


def job_script(command: list[str]) -> JobScript | None:
    """The script ``command`` runs, or None where it shows none (`bash run.sh`, a binary)."""
    maybe: list[str] = []
    module_next = False
    i = 0
    while i < len(command):
        word = command[i]
        i += 1
        if _is_python(word):
            found, i = _python_script(command, i)
            if found is None:
                return None
            if found.module in _LAUNCHER_MODULES:
                continue  # the launcher's arguments follow, its script among them
            if found.module is not None:  # a launcher or runner not known here may run a later .py word
                maybe += [word for word in command[i:] if word.endswith(".py")]
            return _with_maybe(found, maybe)
        if _SHELL_NAME.fullmatch(os.path.basename(word)) and (line := _shell_command(command, i)) is not None:
            found = _simple_command_script(line)  # (a shell without -c: `bash run.sh` shows no script)
            return _with_maybe(found, maybe) if found is not None else None
        if word.startswith("-"):
            if word in _MODULE_SWITCHES and not _python_later(command, i):  # (srun's -m takes a value)
                module_next = True
            elif "=" not in word and word.replace("_", "-") not in _SWITCHES and i < len(command):
                value = command[i]
                # (never the interpreter: `srun -u python -m torch.distributed.run ...`, -u a switch)
                if not value.startswith("-") and not _is_python(value):
                    i += 1  # the option's value, or the script after a switch not known to be one
                    if value.endswith(".py"):
                        maybe.append(value)
            continue
        if module_next:
            return _with_maybe(JobScript(module=word), maybe)
        if word.endswith(".py"):
            return _with_maybe(JobScript(path=word), maybe)
    if maybe:  # after an option not known to be a switch (`--some_switch train.py --cfg c.py`): the first
        return JobScript(path=maybe[0], sure=False, others=tuple(maybe[1:]))
    return None


def _python_later(command: list[str], i: int) -> bool:
    """Whether a word from ``command[i]`` on names a Python interpreter (`srun -m block python t.py`)."""
    return any(_is_python(word) for word in command[i:])


def _shell_command(command: list[str], i: int) -> str | None:
    """The command line a shell whose arguments begin at ``command[i]`` runs with -c (``-c``, ``-lc``), or
    None where it runs none (a script file, stdin)."""
    given_c = False
    while i < len(command):
        word = command[i]
        i += 1
        if word in ("--", "-"):  # the end of the shell's options
            return command[i] if given_c and i < len(command) else None
        if not word.startswith(("-", "+")):
            return word if given_c else None
        if word.startswith("--"):
            continue  # bash's --login, --norc
        given_c = given_c or (word[0] == "-" and "c" in word[1:])
        i += word[1:] in ("o", "O")  # -o pipefail, +O extglob
    return None


def _simple_command_script(line: str) -> JobScript | None:
    """The script of a shell's -c ``line`` where it is one simple command, read as a command is."""
    if not _SHELL_SYNTAX.isdisjoint(line):
        return None
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    return job_script(words)


def _is_python(word: str) -> bool:
    """Whether ``word`` names a Python interpreter (``python3.11``, ``/usr/bin/pypy3``), not a script whose
    name begins as one does (`torchrun python_train.py`: its arguments were read as Python's)."""
    name = os.path.basename(word)
    return _PYTHON_NAME.fullmatch(name) is not None and not name.endswith((".py", ".pyw", ".pyc"))


def _with_maybe(found: JobScript, maybe: list[str]) -> JobScript:
    return JobScript(found.path, found.module, found.sure, tuple(maybe)) if maybe else found


def _python_script(command: list[str], i: int) -> tuple[JobScript | None, int]:
    """The script of the Python whose arguments begin at ``command[i]``, read as CPython reads them (-c
    runs no script), and where the words after it begin."""
    while i < len(command):
        word = command[i]
        i += 1
        if word == "--":
            break
        if word == "-" or not word.startswith("-"):
            return (JobScript(path=word) if word != "-" else None), i
        if word.startswith("--"):
            i += word in _PYTHON_LONG_VALUED
            continue
        for position, letter in enumerate(word[1:], start=1):
            attached = word[position + 1 :]
            if letter == "c":
                return None, i
            if letter == "m":
                module = attached or (command[i] if i < len(command) else "")
                return (JobScript(module=module) if module else None), i + (not attached)
            if letter in _PYTHON_VALUED:
                i += not attached
                break
    if i < len(command):
        return JobScript(path=command[i]), i + 1
    return None, i


def runs_as_main(module: str, command: list[str]) -> str | None:
    """How ``command`` runs ``module`` as its script (``-m pkg.train``, ``train.py``), where its functions
    are ``__main__``'s and no process imports it by its name: None where it does not (or may not)."""
    script = job_script(command)
    if script is None or not script.sure:
        return None
    if script.module is not None:
        return f"-m {script.module}" if runs_module_as_main(script.module, module) else None
    own_file = os.path.abspath(module.replace(".", os.sep) + ".py")
    return script.path if script.path is not None and os.path.abspath(script.path) == own_file else None


def runs_module_as_main(run: str, module: str) -> bool:
    """Whether `python -m run` runs ``module`` as ``__main__``: ``run`` itself, or ``run.__main__`` where
    ``run`` is a package (`python -m pkg` imports pkg, its ``__init__``, and runs pkg/__main__.py), known
    here by its directory in the working directory."""
    if module == f"{run}.__main__":
        return True
    package = os.path.join(*run.split("."))
    return module == run and not any(os.path.isfile(os.path.join(package, n)) for n in _PACKAGE_FILES)


_PACKAGE_FILES = ("__init__.py", "__main__.py")
