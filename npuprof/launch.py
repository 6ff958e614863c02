"""Start the user's command with the agent injected, forward signals, return its exit code."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from npuprof import ENV_CONFIG, ENV_LAUNCHER_PID
from npuprof.config import ENV_PAYLOAD_FILE_PREFIX, ENV_PAYLOAD_INLINE_LIMIT, ProfileConfig
from npuprof.options import ENV_DYNAMIC
from npuprof.proc_stat import state_of
from npuprof.signal_names import SIGSTKFLT

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "_bootstrap"
OPTIMIZER_TRIGGER = "torch.optim.optimizer"
FORWARDED_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    # any other a process dies of by default, sent from outside: SGE's SIGXCPU at a soft CPU limit (a job may
    # catch it to save a checkpoint), `timeout -s ALRM`, SIGPWR. They killed the launcher, whose job then
    # got SIGTERM from its parent-death signal, with no record and no summary (helper-129). Not SIGPROF or
    # SIGVTALRM: a sampling profiler of the launcher's own uses them.
    signal.SIGXCPU,
    signal.SIGALRM,
    signal.SIGPWR,
    # helper-134: the rest that end a process by default: SIGIO/SIGPOLL, SIGSTKFLT (only ever sent by
    # `kill`), and the real-time signals, which a job may use as SIGUSR1/2 (Slurm's --signal=RTMIN+N@T, MPI
    # runtimes). They killed the launcher as the three above did. Not the faults (SIGSEGV, SIGABRT, ...):
    # a handler of ours would hide the launcher's own.
    signal.SIGIO,
    *(() if SIGSTKFLT is None else (SIGSTKFLT,)),
    *range(signal.SIGRTMIN, signal.SIGRTMAX + 1),
)
# Passed on to a stopped job, these are followed by SIGCONT (it takes them only once continued): those that
# end a process by default and come from outside (`kill`, `timeout -s SIG`), not SIGINT/SIGQUIT (a terminal's)
# or SIGUSR1/2 and the real-time signals (a job's own protocol, which may mean "stop").
_CONTINUED_AFTER = (
    *(signal.SIGTERM, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM, signal.SIGPWR),
    signal.SIGIO,
    *(() if SIGSTKFLT is None else (SIGSTKFLT,)),
)
SAME_CTRL_C_S = 0.2  # SIGINTs closer than this are one Ctrl-C (helper-97: `timeout` passes its own on)
# A standard signal (not SIGINT) whose handling begins this soon after the end of the last one's that passed
# it on is a wrapper's copy of it (see counts_as_its_own). `timeout`'s two kill()s are microseconds apart; the
# copy's handler ran 0.2 ms after the first's end (helper-381); a sender's second signal comes later.
SAME_SIGNAL_S = 0.05
# Received by the launcher, these end the job; the launcher then dies of the same signal (see death_signal).
TERMINATING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# Stops made by a shell's job control (Ctrl-Z, a background job touching the terminal): the launcher mirrors
# them. SIGSTOP only while the job holds the terminal (_mirrored).
JOB_CONTROL_STOPS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
# Only the terminal means these for a process (one touching it from the background). Sent to the launcher
# (`kill -TTIN`, in a shell's session) they stopped it alone while the job ran on: ignored while the job runs.
# SIGURG needs nothing (ignored by default); SIGWINCH is passed on (_resizes_reach_the_job). SIGTSTP stays:
# a shell's kill -TSTP stops its non-interactive shell, not the job it waits for.
TERMINAL_ONLY = (signal.SIGTTIN, signal.SIGTTOU)
# Python ignores these; ignored signals survive exec, so the job gets them back at their defaults (and
# TERMINAL_ONLY, unless ignored when npuprof started: _terminal_signals_ignored)
_RESET_IN_CHILD = (signal.SIGPIPE, signal.SIGXFSZ)
# Linux refuses one environment string over 128 KiB (MAX_ARG_STRLEN), "NAME=" and the NUL included.
_ENV_STRING_MAX = 128 * 1024 - len(ENV_CONFIG) - 2
_PYTHON_LAUNCHERS = ("torchrun", "deepspeed", "accelerate", "colossalai", "mpirun", "srun", "msrun")
# shells and wrappers that start another command: what they start is reached (helper-121: `bash -c` and
# `bash train.sh` were warned "does not look like a Python program" at every run); the end of the run says
# so when no process imported torch
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "fish")
_COMMAND_WRAPPERS = (
    *_SHELLS,
    *("env", "nice", "nohup", "timeout", "stdbuf", "taskset", "numactl", "chrt", "setsid", "time"),
    *("uv", "poetry", "pipenv", "conda", "micromamba", "pixi", "hatch", "make"),
)


def triggers(cfg: ProfileConfig) -> list[str]:
    if cfg.step_on:
        module = cfg.step_on.split(":", 1)[0]
        # __main__ is never imported: the bootstrap watches for the name instead (docs/architecture.md)
        return [cfg.step_on if module == "__main__" else module]
    return [OPTIMIZER_TRIGGER]


def child_environment(
    cfg: ProfileConfig, run: dict[str, object], base: dict[str, str], config_value: str | None = None
) -> dict[str, str]:
    """The job's environment: ``base``, the bootstrap first on PYTHONPATH, and the configuration
    (``config_value``, from config_payload, else the configuration inline). PROF_CONFIG_PATH is left out:
    it was taken as --dynamic, and torch_npu's own dynamic mode must not run beside npuprof's."""
    env = dict(base)
    env.pop(ENV_DYNAMIC, None)
    env["PYTHONPATH"] = with_bootstrap(env.get("PYTHONPATH"))
    env[ENV_CONFIG] = config_value if config_value is not None else cfg.to_env(run)
    env["NPUPROF_TRIGGERS"] = ",".join(triggers(cfg))
    if isinstance(log := run.get("log"), str):  # where the bootstrap says an agent failed to start
        env["NPUPROF_LOG"] = log
    if isinstance(launcher := run.get("launcher_pid"), int):  # the bootstrap tells the job's first process
        env[ENV_LAUNCHER_PID] = str(launcher)
    return env


def with_bootstrap(pythonpath: str | None) -> str:
    """The bootstrap dir, then the user's PYTHONPATH exactly as given (less a bootstrap entry of an outer
    npuprof): an empty entry, as ``export PYTHONPATH=$PYTHONPATH:/x`` leaves, is the current directory."""
    ours = str(BOOTSTRAP_DIR)
    if not pythonpath:
        return ours
    return os.pathsep.join([ours, *(p for p in pythonpath.split(os.pathsep) if p != ours)])


@dataclasses.dataclass
class ConfigPayload:
    """What NPUPROF_CONFIG holds: the configuration itself, or ``@path`` of ``file`` when it is large."""

    value: str
    file: Path | None = None
    problem: str | None = None  # one line for the user when the payload had to be cut down
    notes: list[str] = dataclasses.field(default_factory=list)  # more lines for the user

    def remove_file(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.file)


def config_payload(
    cfg: ProfileConfig, run: dict[str, object], output: Path, in_file: bool = False
) -> ConfigPayload:
    """The configuration for the job's environment. Over 64 KiB (metadata within the documented limits
    can reach ~200 KiB of UTF-8), or whatever its size with ``in_file`` (an environment that the inline
    configuration took over the kernel's limit), it goes to ``<output>/.npuprof_payload.<run_id>.json``;
    the launch never fails for its size: without that file, the metadata is left out when it does not fit
    inline. Metadata holding bytes that are not UTF-8 goes to the captures with those bytes as ``\\xNN``
    (their profiler_metadata.json is text for other tools); the run record keeps them exactly."""
    metadata, notes = text_metadata(cfg.metadata)
    if metadata != cfg.metadata:  # (an 'é' read in a C locale: changed to text without a note)
        cfg = dataclasses.replace(cfg, metadata=metadata)
    payload = _config_payload(cfg, run, output, in_file)
    payload.notes = notes
    return payload


def _config_payload(cfg: ProfileConfig, run: dict[str, object], output: Path, in_file: bool) -> ConfigPayload:
    text = json_text(cfg.to_env(run))
    size = len(text.encode("utf-8"))
    if size <= ENV_PAYLOAD_INLINE_LIMIT and not in_file:
        return ConfigPayload(text)
    path = output / f".npuprof_payload.{run['run_id']}.json"
    try:
        _write_new_file(path, text.encode("utf-8"))
        return ConfigPayload(ENV_PAYLOAD_FILE_PREFIX + str(path), path)
    except OSError as exc:
        reason = f"cannot write {str(path)!r}: {exc.strerror or exc}"
    if size <= _ENV_STRING_MAX:
        return ConfigPayload(text)
    slim = dataclasses.replace(cfg, metadata={})
    problem = f"--metadata is left out of the captures ({reason})"
    return ConfigPayload(json_text(slim.to_env(run)), problem=problem)


def text_metadata(metadata: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``metadata`` with every string made valid UTF-8 text (undecodable bytes, read with surrogateescape,
    become ``\\xNN``), and one line for the user per entry changed."""
    notes: list[str] = []
    result: dict[str, Any] = {}
    for key, value in metadata.items():
        text_key, text_value = _as_text(key), _as_text(value)
        if _undecodable(key) or _undecodable(value):  # (an 'é' read in a C locale is UTF-8: no note)
            notes.append(
                f"--metadata {text_key}: not valid UTF-8; the captures get its bytes written as \\xNN "
                "(npuprof_run.json keeps them exactly)"
            )
        result[text_key] = text_value
    return result, notes


def _undecodable(value: Any) -> bool:
    """Whether ``value`` holds bytes, read with surrogateescape, that are not UTF-8."""
    if isinstance(value, str):
        try:
            value.encode("utf-8", "surrogateescape").decode("utf-8")
        except UnicodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_undecodable(k) or _undecodable(v) for k, v in value.items())
    return isinstance(value, list) and any(_undecodable(v) for v in value)


def _as_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that no byte gave (an escape in a config file)
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_as_text(k): _as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_text(v) for v in value]
    return value


def json_text(text: str) -> str:
    """JSON text that UTF-8 can encode: lone surrogates (undecodable bytes of argv, paths, --metadata,
    read with surrogateescape) become ``\\udcXX`` escapes, which decode back to the same text."""
    from npuprof.results.run_record import escape_surrogates

    return escape_surrogates(text)


def _write_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` (0o640; never an existing file or a link planted there) holding ``data``, or
    raise OSError leaving nothing behind."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o640)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)


# Python's options that take a value (attached, "-Wignore", or the next argument) and those that end
# Python's own options; the letters that keep the injection out.
_PYTHON_VALUE_OPTIONS = frozenset("WXcm")
_PYTHON_LAST_OPTIONS = frozenset("cm")
_PYTHON_LONG_VALUE_OPTIONS = ("--check-hash-based-pycs",)
_NO_INJECTION = {
    "E": "ignores PYTHONPATH (-E)",
    "I": "runs isolated (-I), ignoring PYTHONPATH",
    "S": "does not import site (-S), so no sitecustomize",
}


def python_flags(args: list[str]) -> list[str]:
    """The single-letter flags among Python's options in ``args`` (the arguments after the interpreter),
    parsed as CPython does: ``-uE`` is -u and -E; -W, -X, -c, -m take a value; -c, -m, ``-``, ``--`` and
    the script end the options."""
    letters: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in ("-", "--") or not arg.startswith("-"):
            break
        if arg.startswith("--"):
            if arg in _PYTHON_LONG_VALUE_OPTIONS:
                i += 1
            continue
        for position, letter in enumerate(arg[1:], start=1):
            letters.append(letter)
            if letter in _PYTHON_VALUE_OPTIONS:
                if position == len(arg) - 1:
                    i += 1  # the value is the next argument
                break
        if letters and letters[-1] in _PYTHON_LAST_OPTIONS:
            break
    return letters


def injection_warnings(command: list[str]) -> list[str]:
    """Say when the injection may not reach the job (python -E/-I/-S, or not Python at all)."""
    if not command:
        return []
    exe = command[0]
    name = os.path.basename(exe)
    if name.startswith("python") or name.startswith("pypy"):
        return _flag_warnings(_shown(name, command[1:]), command[1:])
    if name in _PYTHON_LAUNCHERS:
        return []
    if (
        name in _COMMAND_WRAPPERS
        and name not in _SHELLS
        and name != "make"
        and (dropped := _env_drops(command))
    ):
        return [dropped]
    if name in _COMMAND_WRAPPERS:
        # the Python that a prefix wrapper starts (`env A=1 python -I`, `nice python -S`, `timeout 60
        # python -E`) keeps npuprof out as well: said before the run, not "no process imported torch" after
        # it (helper-178); what a shell or make runs is not read
        at = _python_in(command[1:]) if name not in _SHELLS and name != "make" else None
        if at is None:
            return []
        return _flag_warnings(_shown(os.path.basename(command[1 + at]), command[2 + at :]), command[2 + at :])
    import shutil

    path = shutil.which(exe)
    if path and _PYTHON_NAME.fullmatch(os.path.basename(os.path.realpath(path))):
        # a link to Python under a name of its own (`py3` -> python3.11): Python, its options read as such
        # (it was warned "does not look like a Python program": helper-182)
        return _flag_warnings(_shown(exe, command[1:]), command[1:])
    shebang = _shebang_words(Path(path)) if path else []
    if _runs_python(shebang):
        if dropped := _env_drops(shebang):  # #!/usr/bin/env -S -i python3
            return [f"{exe} (#!{' '.join(shebang)}): {dropped}"]
        at = _python_in(shebang)  # #!/usr/bin/python3 -E, #!/usr/bin/env -S python3 -I
        return [] if at is None else _flag_warnings(f"{exe} (#!{' '.join(shebang)})", shebang[at + 1 :])
    return [
        f"{exe!r} does not look like a Python program; npuprof reaches only the Python processes it starts "
        "(through PYTHONPATH), so nothing may be captured"
    ]


def _flag_warnings(shown: str, args: list[str]) -> list[str]:
    """The warning for Python's options in ``args`` that keep npuprof out, if any (``shown``: the command)."""
    flags = python_flags(args)
    reasons = [reason for letter, reason in _NO_INJECTION.items() if letter in flags]
    if not reasons:
        return []
    because = "; ".join(reasons)
    return [f"{shown}: Python {because}, so npuprof cannot reach this process; drop the flag to profile it"]


# GNU env's options (coreutils 9): those that take a value, and its long ones (a unique prefix is taken)
_ENV_VALUED = "aCSu"
_ENV_LONG = {
    "--ignore-environment": "i", "--null": "0", "--unset": "u", "--chdir": "C", "--debug": "v",
    "--split-string": "S", "--argv0": "a", "--block-signal": "", "--default-signal": "",
    "--ignore-signal": "", "--list-signal-handling": "", "--help": "", "--version": "",
}  # fmt: skip
_HOOK_VARIABLES = ("PYTHONPATH", ENV_CONFIG)  # what the job's Python needs to load npuprof's hook


def _env_drops(command: list[str]) -> str | None:
    """How an ``env`` among the leading wrappers of ``command`` (``env -i python ...``, ``timeout 60 env -u
    PYTHONPATH torchrun ...``) keeps npuprof's PYTHONPATH or NPUPROF_CONFIG from everything it starts, as one
    line saying so and what to do, or None. Read as GNU env reads its words: options up to the first word
    that is none (``-S``'s string split into more of them), then NAME=VALUE words, then the command; what a
    shell runs is not read, and a Python, a launcher or a shell ends the look."""
    index = 0
    while index < len(command):
        name = os.path.basename(command[index])
        if _PYTHON_NAME.fullmatch(name) or name in (*_SHELLS, "make", *_PYTHON_LAUNCHERS):
            return None
        index += 1
        if name == "env" and (dropped := _env_of(command[index:])):
            return dropped
    return None


def _env_of(words: list[str]) -> str | None:
    """The line for what ``env WORDS`` does to npuprof's variables (see _env_drops), or None."""
    left = list(words)
    emptied, unset, options = "", [], []
    while left and left[0].startswith("-"):
        word = left.pop(0)
        options.append(word)
        if word == "--":
            break
        if word == "-":
            emptied = word  # the same as -i
            continue
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            full = [o for o in _ENV_LONG if o == name] or [o for o in _ENV_LONG if o.startswith(name)]
            if len(full) != 1:
                return None  # env refuses it: the job does not run
            letters = _ENV_LONG[full[0]]
            if letters in _ENV_VALUED and letters and not eq and left:
                value = left.pop(0)
                options.append(value)
        else:
            letters = word[1:]
            value = ""
            for position, letter in enumerate(letters):
                if letter in _ENV_VALUED:
                    value = letters[position + 1 :]
                    if not value and left:
                        value = left.pop(0)
                        options.append(value)
                    letters = letters[: position + 1]
                    break
        emptied = emptied or (word if "i" in letters else "")
        if letters.endswith("u") and value in _HOOK_VARIABLES and value not in unset:
            unset.append(value)  # each one named: dropping one -u of two captured nothing either
        elif letters.endswith("S"):
            left[:0] = value.split()  # shown as the words it is split into
            if options[-1] is value:
                options.pop()
    replaced = ""
    for word in left:
        name, eq, value = word.partition("=")
        if not eq:
            break
        if name == "PYTHONPATH":
            ours = str(BOOTSTRAP_DIR) in value.split(os.pathsep)
            replaced = "" if ours else word
            if ours and name in unset:
                unset.remove(name)
    shown = " ".join(["env", *options])
    if emptied:
        return (
            f"{shown}: env starts the job with an empty environment, without the PYTHONPATH and {ENV_CONFIG} "
            "through which npuprof reaches its Python processes, so nothing will be captured; drop "
            f"{emptied} to profile it"
        )
    if unset:
        return (
            f"{shown}: env removes {' and '.join(unset)}, through which npuprof reaches the job's Python "
            f"processes, so nothing will be captured; drop {' and '.join(f'-u {name}' for name in unset)} to "
            "profile it"
            + (
                " (unset it before npuprof run: npuprof then puts only its own directory there)"
                if "PYTHONPATH" in unset
                else ""
            )
        )
    if replaced:
        from npuprof.invocation import npuprof_cmd

        return (
            f"env {replaced}: env replaces the PYTHONPATH on which npuprof puts its hook, so nothing will be "
            f"captured; set it before npuprof instead ({replaced} {npuprof_cmd('run -- ...')}), which keeps "
            "yours after npuprof's directory"
        )
    return None


def _shown(python: str, args: list[str]) -> str:
    return f"{python} {' '.join(args[:2])}..."


_PYTHON_NAME = re.compile(r"(python|pypy)[\w.-]*")


def _python_in(words: list[str]) -> int | None:
    """Where a wrapper's words name the Python interpreter it starts (``python3``, ``/venv/bin/python``), or
    None: the first word that is one, the wrapper's own options and values (``-n 5``, ``A=1``) being none."""
    for index, word in enumerate(words):
        if _PYTHON_NAME.fullmatch(os.path.basename(word)):
            return index
    return None


# torchrun's options that take no value (torch.distributed.launch adds --use-env); any other takes one
_TORCHRUN_FLAGS = (
    "--help", "--standalone", "--module", "--no-python", "--no_python", "--run-path", "--run_path",
    "--virtual-local-rank", "--virtual_local_rank", "--use-env", "--use_env",
)  # fmt: skip
_RANKS_FILTER = ("--local-ranks-filter", "--local_ranks_filter")
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


_REDIRECTS = ("--redirects",)
_TEE = ("--tee",)
_NPROC = ("--nproc-per-node", "--nproc_per_node")
_LOG_DIR = ("--log-dir", "--log_dir")
_STDERR = 2  # torchrun's Std.ERR bit in --redirects / --tee (3: both streams)


def shown_local_ranks(command: list[str], environ: dict[str, str] | None = None) -> list[int] | None:
    """The local ranks whose stderr torchrun shows (None: every rank's): a warning shown once per run must be
    shown by one of them, not by a rank whose output the user does not see. torchrun hides a rank that
    ``--local-ranks-filter`` leaves out, and one whose stderr ``--redirects`` sends to its log file without
    ``--tee``. Read as torchrun's parser reads it: its options end at the script (``-m``'s module: what
    follows is the script's own), a long option may be cut to a prefix no other shares, and ``PET_*``
    variables stand for options not given. ``--log-dir /dev/null`` shows every rank's output on the console
    (torchrun then redirects and filters nothing)."""
    start = _torchrun_arguments(command)
    if start is None:
        return None
    env = os.environ if environ is None else environ
    given = {
        "filter": env.get("PET_LOCAL_RANKS_FILTER"),
        "redirects": env.get("PET_REDIRECTS"),
        "tee": env.get("PET_TEE"),
        "nproc": env.get("PET_NPROC_PER_NODE"),
        "log_dir": env.get("PET_LOG_DIR"),
    }
    index = start
    while index < len(command):
        arg = command[index]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break  # the script (or "--" before it): its own arguments follow
        name, eq, inline = arg.partition("=")
        if name in ("-h", "-m") or _long_option(name, _TORCHRUN_FLAGS):
            index += 1
            continue
        if len(name) > 2 and not name.startswith("--"):  # -r3: a short option and its value
            short = {"-r": "redirects", "-t": "tee"}.get(arg[:2])
            if short is not None:
                given[short] = arg[2:]
            index += 1
            continue
        value = inline if eq else (command[index + 1] if index + 1 < len(command) else "")
        for key, names, short in (
            ("filter", _RANKS_FILTER, None),
            ("redirects", _REDIRECTS, "-r"),
            ("tee", _TEE, "-t"),
            ("nproc", _NPROC, None),
            ("log_dir", _LOG_DIR, None),
        ):
            if name == short or _long_option(name, names):
                given[key] = value
        index += 1 if eq else 2
    if given["log_dir"] == os.devnull:
        return None  # torchrun's DefaultLogsSpecs: no rank's streams redirected, none filtered (helper-165)
    shown = _filtered_local_ranks(given["filter"])
    redirects, tee = _std_of_ranks(given["redirects"]), _std_of_ranks(given["tee"])
    if redirects is None or tee is None:
        return shown  # torchrun refuses it (or takes none): as without the option
    named = {r for r in (*redirects, *tee) if r >= 0}

    def stderr_shown(rank: int) -> bool:  # rank -2: a rank neither value names
        return not _std_of(redirects, rank) & _STDERR or bool(_std_of(tee, rank) & _STDERR)

    if all(stderr_shown(r) for r in (*named, -2)):
        return shown
    nproc = given["nproc"] or "1"  # torchrun's default
    count = int(nproc) if nproc.isascii() and nproc.isdigit() else max(os.cpu_count() or 1, 8)
    candidates = range(max(count, *(r + 1 for r in named), 0)) if shown is None else shown
    return [r for r in candidates if stderr_shown(r)]


def _std_of(ranks: dict[int, int], rank: int) -> int:
    return ranks.get(rank, ranks.get(-1, 0))


def _filtered_local_ranks(value: str | None) -> list[int] | None:
    """The local ranks ``--local-ranks-filter`` names, as torchrun reads them; none of them a number no
    rank has (torchrun takes ``-1``, which shows no rank: in the job's payload it was "damaged", and
    profiling was off in every process)."""
    from npuprof.config import MAX_RANK

    if not value:
        return None  # torchrun shows every rank's output
    try:
        named = [int(rank) for rank in value.split(",")]
    except ValueError:
        return None  # torchrun refuses it
    return [rank for rank in named if 0 <= rank <= MAX_RANK]


def _std_of_ranks(value: str | None) -> dict[int, int] | None:
    """torchrun's --redirects / --tee value by local rank (``3``, ``0:3,1:2``); key -1 for every rank not
    named (a bare number), or None for a value torchrun refuses."""
    if not value:
        return {}
    if re.fullmatch(r"[0123]", value):
        return {-1: int(value)}
    if re.fullmatch(r"(\d:[0123],)*\d:[0123]", value):
        return {int(rank): int(std) for rank, std in (part.split(":") for part in value.split(","))}
    return None


def _torchrun_arguments(command: list[str]) -> int | None:
    """Where torchrun's own arguments begin in ``command`` (``torchrun``, ``python [opts] -m
    torch.distributed.run``, a wrapper such as ``env X=1 torchrun``), or None when it runs no torchrun."""
    for index, arg in enumerate(command):
        if os.path.basename(arg) == "torchrun":
            return index + 1
        if arg in _TORCHRUN_MODULES and index > 0 and command[index - 1] == "-m":
            return index + 1
        if arg.startswith("-m") and arg[2:] in _TORCHRUN_MODULES:
            return index + 1
        if arg.endswith(".py"):  # a script: the words after it are its own
            return None
    return None


def _long_option(name: str, options: tuple[str, ...]) -> bool:
    """Whether ``name`` is one of ``options`` or a prefix of one that argparse takes for it (one that no
    other torchrun option starts with: --local-r, not --local, which --local-addr shares)."""
    if name in options:
        return True
    if len(name) < 4 or not name.startswith("--") or not any(o.startswith(name) for o in options):
        return False
    others = (*_TORCHRUN_FLAGS, *_RANKS_FILTER, *_TORCHRUN_VALUED)
    return not any(o.startswith(name) for o in others if o not in options)


# torchrun's options that take a value (torch 2.13; "--nproc_per_node" too), for telling an abbreviation
# of another option apart
_VALUED_NAMES = (
    "nnodes", "nproc-per-node", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "rdzv-conf", "max-restarts",
    "monitor-interval", "start-method", "event-log-handler", "role", "log-dir", "redirects", "tee",
    "duplicate-stdout-filters", "duplicate-stderr-filters", "node-rank", "master-addr", "master-port",
    "local-addr", "logs-specs", "numa-binding", "signals-to-handle", "shutdown-timeout",
)  # fmt: skip
_TORCHRUN_VALUED = tuple(f"--{spelling}" for n in _VALUED_NAMES for spelling in {n, n.replace("-", "_")})


def shebang_line(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """What follows ``#!`` on the first line of ``path`` within its first ``limit`` bytes (a carriage return
    kept, as the kernel keeps it), or None: no ``#!`` line, or unreadable."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(limit)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    return head[2:].split(b"\n", 1)[0]


def _shebang_words(path: Path) -> list[str]:
    """The words of the ``#!`` line of ``path`` (``["/usr/bin/env", "bash"]``), or [] for none."""
    line = shebang_line(path, 200)
    return [] if line is None else line.decode("utf-8", "surrogateescape").split()


def _runs_python(shebang: list[str]) -> bool:
    """Whether a ``#!`` line starts Python or what may start it: a shell, a wrapper (``./train.sh`` whose
    ``#!/bin/bash`` runs python was warned "does not look like a Python program": helper-178)."""
    words = list(shebang)
    if words and os.path.basename(words[0]) == "env":  # #!/usr/bin/env [-S] [NAME=VALUE...] PROGRAM
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not words:
        return False
    name = os.path.basename(words[0])
    return "python" in name or "pypy" in name or name in _COMMAND_WRAPPERS or name in _PYTHON_LAUNCHERS


def new_run_id() -> str:
    return os.urandom(6).hex()  # as uuid4().hex[:12], without importing uuid


def exit_code_of(returncode: int) -> int:
    """A child killed by signal N gives 128+N, as shells do."""
    return 128 - returncode if returncode < 0 else returncode


@dataclasses.dataclass
class JobEnd:
    returncode: int  # as subprocess gives it: -N when killed by signal N
    forwarded: list[int]  # the signals the launcher received and passed on, in order
    # received once the job's process group was gone (reaped), before the caller took the signals over:
    # the launcher's own, as those that come during its post-processing wait
    after_the_end: list[int] = dataclasses.field(default_factory=list)
    # when each Ctrl-C that counted came (time.monotonic): a copy of the last one that comes after the job's
    # end is the same Ctrl-C (counts_as_ctrl_c)
    interrupts: list[float] = dataclasses.field(default_factory=list)
    at_the_terminal: bool = False  # the job held the terminal (the launcher gave it) when it ended
    stopped_s: float = 0.0  # how long the job was stopped (_JobStops), of the time it ran
    # when each signal received first came (time.monotonic): a batch system's SIGKILL follows its SIGTERM
    first_came: dict[int, float] = dataclasses.field(default_factory=dict)
    # npuprof's own failure while the job ran (the job then waited for plainly), or None
    internal_error: Exception | None = None
    internal_error_after_the_end: bool = False  # that failure came once the job had been reaped

    def terminal_signal(self) -> int | None:
        """The terminal's Ctrl-C or Ctrl-\\ that the job died of, or None. The terminal sent it to the job's
        group alone (the launcher gave it the terminal): without npuprof it reaches the launcher's own group
        too, where a shell that runs npuprof without job control (`bash train_all.sh`, whose loop stops at
        Ctrl-C only if the shell got it as well), a pipeline's other commands or make wait (helper-203)."""
        if self.at_the_terminal and -self.returncode in (signal.SIGINT, signal.SIGQUIT):
            job_signal = -self.returncode
            return None if job_signal in self.forwarded else job_signal
        return None

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.returncode)

    def death_signal(self) -> int | None:
        """The signal the launcher must die of once its records are written, or None to exit normally.

        Shells "wait and cooperate": at Ctrl-C a loop around a job goes on only when the job caught SIGINT
        and exited; when the job died of SIGINT, the shell stops too. An exit code of 130 reads as caught,
        so a job that died of SIGINT (or SIGQUIT), or of a signal the launcher got and passed on (SIGUSR1/2
        included), or of any signal after the launcher got SIGINT, SIGTERM, SIGHUP or SIGQUIT, makes the
        launcher die of that signal: its parent sees what it would see without npuprof."""
        if self.returncode >= 0:
            return None
        job_signal = -self.returncode
        # a shell cooperates at Ctrl-\ (SIGQUIT) as at Ctrl-C: both reach the job from the terminal alone
        if job_signal in (signal.SIGINT, signal.SIGQUIT) or job_signal in self.forwarded:
            return job_signal
        received = [sig for sig in self.forwarded if sig in TERMINATING_SIGNALS]
        if job_signal in received:
            return job_signal
        return received[0] if received else None


def die_of(signum: int, group: bool = False) -> None:
    """End the launcher by ``signum`` at its default action (the parent sees WIFSIGNALED); returns only if
    the signal did not kill it. ``group``: sent to the launcher's whole process group (a terminal's signal
    that only the job got: JobEnd.terminal_signal)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if signum in (signal.SIGQUIT, signal.SIGXCPU):  # their default action dumps core: not of the launcher
        import resource

        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    if group:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signum)
    os.kill(os.getpid(), signum)


def _kill_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to process group ``pgid``; False when no process of it is left (the job reaped)."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` (the job's first, which leads its group) is stopped by a signal now."""
    return state_of(pid) == b"T"


def _kill_run(pgid: int, run_id: str | None) -> bool:
    """SIGKILL to the job's process group and to every other process of the run; False when none was
    left to kill."""
    killed = _kill_group(pgid, signal.SIGKILL)
    from npuprof.job_processes import processes_of_the_run

    for pid in processes_of_the_run(run_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed = True
    return killed


def counts_as_ctrl_c(interrupts: list[float]) -> bool:
    """Whether a SIGINT received now is a Ctrl-C of its own (then noted in ``interrupts``, the times of
    those that counted), not a copy of the last one: one Ctrl-C passed on again by a wrapper (`timeout`)
    arrives twice, the copy within SAME_CTRL_C_S (as late as the wrapper is scheduled)."""
    now = time.monotonic()
    if interrupts and now - interrupts[-1] <= SAME_CTRL_C_S:
        return False
    interrupts.append(now)
    return True


def counts_as_its_own(signum: int, came: dict[int, float]) -> bool:
    """Whether ``signum`` (not SIGINT: counts_as_ctrl_c) handled now is a signal of its own, not a copy of
    the last one of its kind. ``came``: when the handling of each signal that counted ended (math.inf while
    it runs: see handled). `timeout` sends its signal (SIGTERM, or -s SIG) to the launcher and again to its
    own process group, the launcher in it: passed on twice, the job's handler ran twice, and one that raises
    SystemExit (a graceful stop) raised it again inside the job's cleanup, a checkpoint written in its
    `finally` lost (helper-378: 2 runs of 3); without npuprof the two reach the job at once and the kernel
    merges them. The copy comes microseconds after the first, before or as the first is handled; a signal
    sent again on purpose comes later: a cluster manager's second SIGTERM 0.1 s after its first ("now"),
    a job's count of SIGUSR1s (helper-381: a window of 0.2 s from the first dropped those). Only a launcher
    in a group it does not lead can get a copy by its group (_a_group_copy_can_come). Real-time signals are
    queued, each its own: always passed on."""
    if signal.SIGRTMIN <= signum <= signal.SIGRTMAX or not _a_group_copy_can_come():
        return True
    last = came.get(signum)
    if last is not None and time.monotonic() - last <= SAME_SIGNAL_S:
        return False
    came[signum] = math.inf  # being handled: a copy whose handler runs inside this one's is one too
    return True


def handled(signum: int, came: dict[int, float]) -> None:
    """The end of the handling of a signal counts_as_its_own counted."""
    if came.get(signum) == math.inf:
        came[signum] = time.monotonic()


def _a_group_copy_can_come() -> bool:
    """Whether a sender that signals the launcher and its process group (`timeout`, which leads the group
    it made for its child) reaches the launcher twice: not when the launcher leads its group (a shell's job
    at a terminal, a container's first process), where every signal that comes was sent to it once."""
    return os.getpgrp() != os.getpid()


@dataclasses.dataclass
class _Forwarding:
    """What _forward_signals yields."""

    received: list[int]  # every signal received, less the copies of a Ctrl-C
    # told the job's pid once it is spawned: the signals that came while it was being started are passed on
    # from there, as any later one is
    job_started: Callable[[int], None]


@contextlib.contextmanager
def _forward_signals(
    pgid_holder: list[int],
    run_id: str | None = None,
    unreached: list[int] | None = None,
    interrupts: list[float] | None = None,
    terminal: _Terminal | None = None,
    first_came: dict[int, float] | None = None,
) -> Iterator[_Forwarding]:
    """Pass the launcher's signals on to the job's process group; a second SIGINT while the job still runs
    kills the group and every other process of the run (SIGKILL): torchrun's workers lead sessions of their
    own, and torchrun killed so cannot end them. A signal ignored when npuprof started stays ignored, in the
    job too (nohup). Yields every signal received, less the copies of a Ctrl-C; those that found the group
    gone (the job reaped, before run_child blocks them) go to ``unreached`` too: they were the launcher's
    alone. ``interrupts`` gets the time of each Ctrl-C that counted (a SIGINT's copy within SAME_CTRL_C_S is
    none), ``first_came`` the time each signal first came. ``terminal``: one the launcher's group holds
    while the job runs is given to the job first. An empty ``pgid_holder``: the job is not started yet;
    what comes meanwhile is held until ``job_started``."""
    received: list[int] = []
    interrupts = [] if interrupts is None else interrupts
    first_came = {} if first_came is None else first_came
    killing: list[bool] = []  # non-empty while the handler kills the run's processes
    counted: dict[int, float] = {}  # when the handling of each signal (not SIGINT) that counted ended
    held: list[tuple[int, int]] = []  # (signal, its Ctrl-C number) received before the job was started

    def forward(signum: int, frame: object) -> None:
        # one Ctrl-C passed on again by a wrapper (`timeout`) arrives twice: one, and passed on once (a
        # second copy raised KeyboardInterrupt again inside the job's own `except KeyboardInterrupt:`
        # handler, which then never ran); the copy is not among those received (helper-203: the record
        # said it was passed on, and one that came after an unreached SIGINT put that one among those
        # passed on to the job)
        if signum == signal.SIGINT and not counts_as_ctrl_c(interrupts):
            return
        if signum != signal.SIGINT and not counts_as_its_own(signum, counted):
            return  # the same signal again, from a wrapper: passed on once (the copy is not received)
        try:
            received.append(signum)
            first_came.setdefault(signum, time.monotonic())
            if not pgid_holder:
                held.append((signum, len(interrupts)))
                return
            pass_on(signum, len(interrupts))
        finally:
            handled(signum, counted)

    def job_started(pid: int) -> None:
        pgid_holder.append(pid)  # from here the handler passes on what comes itself
        while held:
            pass_on(*held.pop(0))

    def pass_on(signum: int, ctrl_c: int) -> None:
        """One way for a signal received while the job runs and for one held while it was started: passed
        on without the SIGCONT below, a held SIGTERM never reached a job that had stopped itself as it
        started (helper-334)."""
        if terminal is not None and not (terminal.stopped_with_the_job or terminal.job_ended):
            # a shell's `fg` of a running job gave the launcher's group the terminal (see
            # _ctrl_z_at_the_launchers_group): its Ctrl-C came here, and a second one, which a job that
            # stops gracefully at the first takes as "now", killed the run (SIGKILL). The job gets the
            # terminal, and its next Ctrl-C, itself.
            terminal.give_to(pgid_holder[0])
        if signum == signal.SIGINT and ctrl_c >= 2:  # ctrl_c: this one's number among the Ctrl-Cs
            if killing:  # a flood of SIGINTs lands here again while the processes are listed (helper-96)
                return
            killing.append(True)
            try:
                if not _kill_run(pgid_holder[0], run_id):  # the job reaped: the launcher's own, as below
                    if unreached is not None:
                        unreached.append(signum)
                    return
                if ctrl_c == 2:  # said once, by the Ctrl-C that counts as the second
                    sys.stderr.write(
                        "npuprof: second SIGINT (Ctrl-C): killed the job's processes (SIGKILL)\n"
                    )
                    sys.stderr.flush()
            finally:
                killing.clear()
            return
        if not _kill_group(pgid_holder[0], signum):
            if unreached is not None:
                unreached.append(signum)
            return
        if signum in _CONTINUED_AFTER and _stopped(pgid_holder[0]):
            # a stopped job (SIGSTOP) would only take it once continued: continued, as a shell's `kill`
            # does (helper-124: `timeout 6 npuprof run` of a stopped job never ended; helper-131: nor did
            # `timeout -s ALRM`, whose SIGCONT reaches the launcher alone); a running one is not sent
            # SIGCONT (helper-127: its handler ran)
            _kill_group(pgid_holder[0], signal.SIGCONT)

    previous = {}
    for sig in FORWARDED_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(sig) != signal.SIG_IGN:
                previous[sig] = signal.signal(sig, forward)
    try:
        yield _Forwarding(received, job_started)
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, handler)


class _Terminal:
    """The terminal on stdin, else the controlling terminal, if any. Like a shell, the launcher gives it to
    the job's process group while it is in the foreground, so Ctrl-C, Ctrl-Z and interactive debuggers reach
    the job as without npuprof, and takes it back when the job stops or ends (``close`` once the job has)."""

    def __init__(self) -> None:
        self.stopped_with_the_job = False  # the launcher stops itself, mirroring the job's stop
        self.continued = 0  # the SIGCONTs the launcher has handled
        self.said_left_stopped = False
        self.job_ended = False  # the job was reaped: nothing to give the terminal to
        self.ctrl_z_before_the_job = False  # a Ctrl-Z came as the job was started
        self.continued_before_the_job = False  # a SIGCONT came as the job was started
        self.resized_before_the_job = False  # a SIGWINCH came as the job was started
        self.job_stops = _JobStops()  # told by the wait (_wait), which is given this object
        self._opened = False
        self.fd = _terminal_on_stdin()
        self.on_stdin = self.fd is not None
        if self.fd is None:
            # `npuprof run ... < /dev/null > log 2>&1` at a shell: its job control signals npuprof's group
            # from the controlling terminal all the same; not given to the job, Ctrl-Z stopped npuprof alone
            # while the job trained on (docs/architecture.md, "Process model")
            self.fd = _controlling_terminal()
            self._opened = self.fd is not None

    def may_have_made(self, job: int, stop_signal: int) -> bool:
        """Whether this stop of the job may be the terminal's (a shell's job control then continues us):
        with the terminal on stdin, any; else SIGTTIN/SIGTTOU, or a SIGTSTP while the job's group or ours
        holds the terminal (Ctrl-Z). A scheduler's `kill -TSTP` of a job started with stdin redirected by
        a process that has a terminal, which that process holds, is continued by the scheduler alone."""
        if self.on_stdin:
            return True
        if not self.present:
            return False
        return stop_signal != signal.SIGTSTP or self.held_by(job) or self.held_by(os.getpgrp())

    def close(self) -> None:
        if self._opened and self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self._opened, self.fd = False, None

    @property
    def present(self) -> bool:
        return self.fd is not None

    def _owner(self) -> int | None:
        if self.fd is None:
            return None
        try:
            return os.tcgetpgrp(self.fd)
        except OSError:
            return None

    def _set_owner(self, pgid: int) -> None:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(self.fd, pgid)  # type: ignore[arg-type]

    def give_to(self, job: int) -> None:
        """Hand the terminal to the job, when it is ours to give (not when we run in the background)."""
        if self._owner() == os.getpgrp():
            self._set_owner(job)

    def take_back(self, job: int) -> None:
        """Take the terminal back from the job; never from a shell that holds it (after ``bg``)."""
        if self._owner() == job:
            self._set_owner(os.getpgrp())

    def held_by(self, job: int) -> bool:
        return self._owner() == job

    def continued_since(self, count: int) -> bool:
        """Whether a SIGCONT was handled since ``continued`` was ``count`` (called, this runs a handler
        still pending first)."""
        return self.continued != count


class _JobStops:
    """How long the job was stopped (Ctrl-Z, SIGSTOP, a scheduler's suspend), from the stop its wait reports
    to the continuation it reports (a stop the job dies in counts until its end): the run record gives it
    beside the run's wall time, which counts it (docs/formats.md)."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self._since: float | None = None

    def stopped(self) -> None:
        if self._since is None:
            self._since = time.monotonic()

    def continued(self) -> None:
        if self._since is not None:
            self.total_s += time.monotonic() - self._since
            self._since = None


def _terminal_on_stdin() -> int | None:
    try:
        fd = sys.stdin.fileno()
        return fd if os.isatty(fd) else None
    except (OSError, ValueError, AttributeError):  # (no sys.stdin: None)
        return None


def _controlling_terminal() -> int | None:
    """A descriptor of the controlling terminal (/dev/tty; closed at exec), or None without one."""
    try:
        return os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # ENXIO: no controlling terminal (a batch job, setsid)
        return None


@contextlib.contextmanager
def _continued_with_the_launcher(pgid_holder: list[int], terminal: _Terminal) -> Iterator[None]:
    """A SIGCONT to the launcher continues a stopped job too. `timeout` follows its signal with SIGCONT to
    the command and to its own process group, not to the job's: a stopped job never took the signal, and
    `timeout -s INT` (or QUIT, USR1, ...: not followed by SIGCONT of ours) of a stopped job never ended
    (helper-203). Not while the launcher mirrors a job-control stop: it continues the job itself once it has
    given it the terminal."""

    def continued(signum: int, frame: object) -> None:
        terminal.continued += 1
        if not pgid_holder:
            # run_child continues the job once it runs, as here: `timeout -s INT`'s SIGCONT that came as the
            # job was started, stopped by then, was lost, the SIGINT held for it pending (helper-334)
            terminal.continued_before_the_job = True
            return
        if terminal.stopped_with_the_job or terminal.job_ended:
            return
        # `fg` of a launcher stopped alone (`kill -TSTP`): the shell gave the terminal to its group, where the
        # job, which ran on, would not have it
        terminal.give_to(pgid_holder[0])
        if _stopped(pgid_holder[0]):
            _kill_group(pgid_holder[0], signal.SIGCONT)

    with _handled_in_the_block(signal.SIGCONT, continued):
        yield


@contextlib.contextmanager
def _resizes_reach_the_job(pgid_holder: list[int], terminal: _Terminal) -> Iterator[None]:
    """SIGWINCH received is passed on to the job, which gets the terminal with it when the launcher's group
    holds it. A resized terminal signals its foreground group: the job's, once the launcher gave it the
    terminal, but a shell's `fg` of a job that runs (after `bg`, or `npuprof run ... &`) gives it to the
    launcher's group (see _ctrl_z_at_the_launchers_group): the launcher ignored the resize there, and the job
    kept the old size. Not when SIGWINCH was ignored when npuprof started: the job inherits that."""
    if signal.getsignal(signal.SIGWINCH) == signal.SIG_IGN:
        yield
        return

    def resized(signum: int, frame: object) -> None:
        if not pgid_holder:
            # passed on by run_child once the job runs, as the other signals held then are: the job may
            # have read the old size already
            terminal.resized_before_the_job = True
            return
        if terminal.job_ended:
            return
        if not terminal.stopped_with_the_job:
            terminal.give_to(pgid_holder[0])
        _kill_group(pgid_holder[0], signal.SIGWINCH)

    with _handled_in_the_block(signal.SIGWINCH, resized):
        yield


@contextlib.contextmanager
def _handled_in_the_block(signum: int, handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for ``signum`` during the block, the handler found before put back after it."""
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, TypeError):  # None: set outside Python
            signal.signal(signum, previous)


@contextlib.contextmanager
def _ctrl_z_at_the_launchers_group(pgid_holder: list[int], terminal: _Terminal) -> Iterator[None]:
    """Ctrl-Z of a terminal that the launcher's own group holds reaches the job. The launcher gives the job
    the terminal when it starts it in the foreground, but a shell's `fg` of a job that runs (after `bg`, or
    `npuprof run ... &`) gives it to the launcher's group and sends no SIGCONT: Ctrl-Z then stopped the
    launcher alone, the job training on. A SIGTSTP that comes then gives the job the terminal and is passed
    on to it; the job's stop is then mirrored (_on_job_stopped). Any other SIGTSTP (`kill -TSTP` while the
    job holds the terminal) stops the launcher alone, as before. Only with a terminal, and not when SIGTSTP
    was ignored when npuprof started."""
    if not terminal.present or signal.getsignal(signal.SIGTSTP) != signal.SIG_DFL:
        yield
        return

    def tstp(signum: int, frame: object) -> None:
        if not pgid_holder and terminal.held_by(os.getpgrp()):
            # Ctrl-Z while the job is started (handled as the spawn returns): passed on once it runs, by
            # run_child; stopping the launcher alone left the new job training on
            terminal.ctrl_z_before_the_job = True
            return
        if terminal.stopped_with_the_job:
            # the launcher stops for the job's stop already: a second Ctrl-Z that reached its group once it
            # took the terminal back would stop it a second time, past `fg` (run late, after that `fg`, the
            # job has the terminal again for the next one)
            return
        if pgid_holder and not terminal.job_ended and terminal.held_by(os.getpgrp()):
            terminal.give_to(pgid_holder[0])
            if _kill_group(pgid_holder[0], signal.SIGTSTP):
                return
        _stop_the_launcher()

    signal.signal(signal.SIGTSTP, tstp)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signal.SIGTSTP, signal.SIG_DFL)


@contextlib.contextmanager
def _launchers_stop_held() -> Iterator[None]:
    """A SIGTSTP of the launcher's own sent in the block is held (blocked) until the block ends, where the
    launcher stops, unless a SIGCONT since discarded the stop (the kernel's doing) or the block took it back
    (``signal.sigtimedwait``). Held at its default action, a handler of ours (_ctrl_z_at_the_launchers_group)
    put aside until the launcher is continued: unblocked, the stop ran that handler instead of stopping the
    launcher. An ignored SIGTSTP stays ignored."""
    handler = signal.getsignal(signal.SIGTSTP)
    ours = handler not in (signal.SIG_DFL, signal.SIG_IGN, None)
    if ours:
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    try:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTSTP])
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # the launcher stops here
    finally:
        if ours:
            signal.signal(signal.SIGTSTP, handler)


def _stop_the_launcher() -> None:
    """Stop the launcher alone by SIGTSTP at its default action until continued (_launchers_stop_held)."""
    with _launchers_stop_held():
        os.kill(os.getpid(), signal.SIGTSTP)


@contextlib.contextmanager
def _terminal_signals_ignored() -> Iterator[tuple[int, ...]]:
    """The launcher ignores TERMINAL_ONLY while the job runs (tcsetpgrp from a background group raises
    SIGTTOU too); yields the signals the job gets at their defaults: not those ignored when npuprof started
    (as nohup's ignored SIGHUP, they stay ignored in the job)."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in TERMINAL_ONLY}
    try:
        yield (*_RESET_IN_CHILD, *(sig for sig, handler in previous.items() if handler != signal.SIG_IGN))
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):  # None: set outside Python
                signal.signal(sig, handler)


def run_child(
    command: list[str],
    env: dict[str, str],
    run_id: str | None = None,
    on_start: Callable[[int], None] | None = None,
    mask: set[signal.Signals] | None = None,
    retry: Callable[[LaunchError], dict[str, str] | None] | None = None,
) -> JobEnd:
    """Run ``command`` in its own process group and wait for it, passing signals and job control on
    (``run_id``: the run whose processes a second SIGINT kills wherever they are; ``on_start`` is told the
    job's pid once it runs; ``mask``: the signal mask to set once the forwarders are in place, where the
    caller blocked the signals over its hand-over to them: those that came meanwhile are passed on).
    ``retry``: told why the job could not start, the environment to start it with once more, or None.
    Failing before ``mask`` is set (npuprof's fault, not the job's), it is set all the same: the signals the
    caller blocked are acted on, not left blocked in a launcher that reports its error. npuprof's own
    failure (an exception other than LaunchError) before the job runs is an InternalLaunchError, the
    signals held as for a LaunchError; one once the job runs is the JobEnd's ``internal_error``, the job
    waited for."""
    child = _Child(mask)
    try:
        return _run_child(command, env, run_id, on_start, retry, child)
    except LaunchError:
        child.set_the_callers_mask()
        raise
    except Exception as exc:  # npuprof's own fault, outside the job's wait (_run_child's own)
        # held (blocked), as for a job that could not start: set to the caller's mask, a signal pending
        # since the caller blocked them killed npuprof before its record said how the run ended
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
        if child.pid is None:
            raise InternalLaunchError(exc) from exc
        # the job ran (putting the forwarders down failed): its end, never "the job did not run"
        if child.returncode is not None:
            return JobEnd(child.returncode, [], internal_error=exc, internal_error_after_the_end=True)
        return JobEnd(_wait_plainly(child.pid), [], internal_error=exc)
    except BaseException:
        child.set_the_callers_mask()
        raise


@dataclasses.dataclass
class _Child:
    """What run_child and _run_child share: what the outer one needs to act on a failure of the inner one
    (npuprof's own, not the job's)."""

    mask: set[signal.Signals] | None  # the caller's, to set once the forwarders are in place (None: set)
    pid: int | None = None  # the job's, once it is started
    returncode: int | None = None  # the job's, once it is reaped

    def set_the_callers_mask(self) -> None:
        """Set the caller's mask unless set already (its signals acted on, not left blocked)."""
        if self.mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            self.mask = None


def _run_child(
    command: list[str],
    env: dict[str, str],
    run_id: str | None,
    on_start: Callable[[int], None] | None,
    retry: Callable[[LaunchError], dict[str, str] | None] | None,
    child: _Child,
) -> JobEnd:
    """run_child's work; ``child``: its caller's mask, set once the forwarders are in place; given the
    job's pid once it is started, then its return code once it is reaped."""
    pgid: list[int] = []
    terminal = _Terminal()
    unreached: list[int] = []
    interrupts: list[float] = []
    first_came: dict[int, float] = {}
    with (
        contextlib.closing(terminal),
        _terminal_signals_ignored() as reset_in_child,
        _forward_signals(pgid, run_id, unreached, interrupts, terminal, first_came) as forwarding,
        _continued_with_the_launcher(pgid, terminal),
        _ctrl_z_at_the_launchers_group(pgid, terminal),
        _resizes_reach_the_job(pgid, terminal),
    ):
        child.set_the_callers_mask()  # (before the spawn: the job inherits it)
        try:
            pid = _started(command, env, reset_in_child, retry)
        except Exception as exc:  # (the E2BIG retry's own failure included: npuprof's, InternalLaunchError)
            # held (blocked) from here, as at the job's end: the caller writes its record, then dies of
            # those that came (LaunchError.received), which were held for a job that never ran (helper-342)
            signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
            error = exc if isinstance(exc, LaunchError) else InternalLaunchError(exc)
            error.received = list(forwarding.received)
            raise error from (None if error is exc else exc)
        child.pid = pid
        reaped: list[int] = []
        internal_error: Exception | None = None
        error_after_the_end = False
        try:
            try:
                forwarding.job_started(pid)  # (passes on those that came while it was being started)
                terminal.give_to(pid)
                if terminal.ctrl_z_before_the_job:
                    _kill_group(pid, signal.SIGTSTP)
                elif terminal.continued_before_the_job and _stopped(pid):
                    _kill_group(pid, signal.SIGCONT)
                if terminal.resized_before_the_job:
                    _kill_group(pid, signal.SIGWINCH)
                if on_start is not None:
                    with contextlib.suppress(Exception):  # never the job's wait
                        on_start(pid)
                reaped.append(_wait(pid, terminal))
                terminal.job_ended = True
                at_the_terminal = terminal.held_by(pid)
            except Exception as exc:
                # npuprof's fault with the job running: the job is the user's and runs to its end, waited
                # for plainly with the signals still passed on; it was left orphaned, its exit code lost
                internal_error, at_the_terminal, error_after_the_end = exc, False, bool(reaped)
                if not reaped:
                    reaped.append(_wait_plainly(pid, terminal))
                terminal.job_ended = True
            returncode = reaped[0]
            child.returncode = returncode
            # held (pending, not lost) from here until the caller takes them over: the forwarders are
            # about to go, and a signal then would kill the launcher before its record (helper-96)
            signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
        finally:
            with contextlib.suppress(Exception):
                terminal.take_back(pid)
    # once the group is gone every later signal finds it gone: the unreached ones are the last received
    received = forwarding.received
    forwarded = received[: len(received) - len(unreached)]
    terminal.job_stops.continued()  # (ended stopped: killed)
    stopped_s = terminal.job_stops.total_s
    return JobEnd(
        returncode,
        forwarded,
        list(unreached),
        interrupts,
        at_the_terminal,
        stopped_s,
        first_came,
        internal_error,
        error_after_the_end,
    )


def _wait_plainly(pid: int, terminal: _Terminal | None = None) -> int:
    """The job's return code, waited for after _wait failed. ``terminal``: the job's job-control stops are
    still mirrored as _wait mirrors them, a failure there leaving the job to this wait: waited for blindly,
    a Ctrl-Z stopped the job alone, npuprof waiting on with the shell's terminal (docs/architecture.md,
    "Process model"). None: no stop is seen (the launcher's handlers put down)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0 if terminal is None else os.WUNTRACED | os.WCONTINUED)
        except ChildProcessError:  # reaped by the failed _wait itself: its code is lost
            return 0
        if terminal is None or not (os.WIFSTOPPED(status) or os.WIFCONTINUED(status)):
            return os.waitstatus_to_exitcode(status)
        with contextlib.suppress(Exception):
            if os.WIFCONTINUED(status):
                terminal.job_stops.continued()
                continue
            terminal.job_stops.stopped()
            if _mirrored(pid, os.WSTOPSIG(status), terminal):
                _on_job_stopped(pid, os.WSTOPSIG(status), terminal)


def _started(
    command: list[str],
    env: dict[str, str],
    reset: tuple[int, ...],
    retry: Callable[[LaunchError], dict[str, str] | None] | None,
) -> int:
    """The job's pid, started once more with the environment ``retry`` gives for why it could not start
    (LaunchError otherwise). Inside run_child's forwarders: a signal that came during the first start stays
    held for the job started again (the E2BIG retry ran without it when the caller started it anew)."""
    try:
        return _spawn(command, env, reset)
    except OSError as exc:
        error = _launch_error(command[0], exc)
    again = retry(error) if retry is not None else None
    if again is None:
        raise error
    try:
        return _spawn(command, again, reset)
    except OSError as exc:
        raise _launch_error(command[0], exc) from None


def _spawn(command: list[str], env: dict[str, str], reset: tuple[int, ...] = _RESET_IN_CHILD) -> int:
    """Start ``command`` as the leader of a new process group; returns its pid.

    posix_spawn (vfork + exec) rather than subprocess: importing subprocess alone costs ~8 ms of the
    launcher's start. Like a shell, and unlike subprocess's default, it leaves inheritable descriptors
    (a make jobserver, a pipe the caller set up) to the child; npuprof's own are close-on-exec."""
    path = command[0] if os.sep in command[0] else which(command[0], env.get("PATH", os.defpath))
    # Search the child's PATH (above), as subprocess does (posix_spawnp would search the launcher's).
    return os.posix_spawn(path, command, env, setpgroup=0, setsigdef=reset)


def which(name: str, path: str) -> str:
    """The first executable ``name`` on ``path`` (as execvpe finds it); FileNotFoundError if none,
    PermissionError if the only matches are not executable."""
    denied = False
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return candidate
            denied = True
    if denied:
        raise PermissionError(name)
    raise FileNotFoundError(name)


def _wait(pid: int, terminal: _Terminal) -> int:
    """The child's return code as subprocess gives it (-N when killed by signal N)."""
    while True:
        try:
            _, status = os.waitpid(pid, os.WUNTRACED | os.WCONTINUED)
        except KeyboardInterrupt:  # pragma: no cover - our handler replaces SIGINT's default
            continue
        except ChildProcessError:  # pragma: no cover - reaped elsewhere
            return 0
        if os.WIFCONTINUED(status):
            terminal.job_stops.continued()
            continue
        if os.WIFSTOPPED(status):
            terminal.job_stops.stopped()
            if _mirrored(pid, os.WSTOPSIG(status), terminal):
                _on_job_stopped(pid, os.WSTOPSIG(status), terminal)
            continue
        return os.waitstatus_to_exitcode(status)


def _mirrored(pgid: int, stop_signal: int, terminal: _Terminal) -> bool:
    """Whether the launcher mirrors this stop of the job (_on_job_stopped). A SIGSTOP (`kill -STOP`, a job
    that stops itself to wait for a debugger) only while the job holds the terminal: a shell reports its
    foreground job stopped by it as by Ctrl-Z and takes the terminal back, where npuprof left the terminal
    with the stopped job and waited on: the terminal froze, its Ctrl-C and Ctrl-Z pending on the stopped
    job. ptrace's stops (gdb or py-spy attaching) are the tracer's alone and never reach this wait."""
    if stop_signal == signal.SIGSTOP:
        return terminal.held_by(pgid)
    # Without a terminal no shell's job control stops and continues us: whoever stopped the job
    # (`kill -TSTP` from a scheduler) continues it alone, as a non-interactive shell waits on.
    return stop_signal in JOB_CONTROL_STOPS and terminal.may_have_made(pgid, stop_signal)


def _on_job_stopped(pgid: int, stop_signal: int, terminal: _Terminal) -> None:
    """Mirror a job-control stop of the job, as its shell would see it without npuprof: take the terminal
    back and stop the launcher (the shell then reports the job stopped and takes its terminal); once
    continued (``fg``, ``bg``, SIGCONT), give the job the terminal again if it is ours, and continue it."""
    if stop_signal in TERMINAL_ONLY and (terminal.held_by(pgid) or terminal.held_by(os.getpgrp())):
        # It touched the terminal in the instant before we handed it over, or while the launcher's group
        # held it (a shell's `fg` of a running job gives it to us, not to the job): it may use it now.
        terminal.give_to(pgid)
        _kill_group(pgid, signal.SIGCONT)
        return
    # SIGTSTP, not SIGSTOP: an outer npuprof mirrors it in turn, the shell shows "Stopped" as for the job,
    # and the kernel discards it in an orphaned process group, where nobody could continue us. To our whole
    # process group, as the terminal's would reach it without npuprof: the shell reports a job stopped once
    # all its processes are, and a pipeline's other commands (`npuprof run ... | tee log`) or a process
    # that waits for npuprof (a script without job control, `bash train.sh`; `bash -c 'npuprof run ...;
    # ...'`, `timeout`, make) ran on: the shell hung, holding no terminal, until a second Ctrl-Z. Whatever
    # stopped the job, not only a Ctrl-Z while it held the terminal: the kernel's SIGTTIN/SIGTTOU of a read
    # from the background stops the reader's whole group too (`bash train.sh &` ran on, said running).
    # Held (blocked) until we know we were not continued meanwhile. Sent plainly, a SIGCONT to us between
    # the job's stop and ours was lost: we stopped for good, and the job, which its handler continued, ran
    # on (with no exit code for the shell until a second `fg`). Now one handled before the check drops
    # the stop, and one that comes after it discards the held stop (the kernel's doing). Whatever continues
    # us continues the rest of our group, which our stop reached: a SIGCONT to us alone (`kill -CONT`,
    # `timeout`'s), or one that discarded our held stop, left a pipeline's `tee` stopped while the job wrote
    # into its pipe (until `fg`; docs/architecture.md, "Process model"). A second Ctrl-Z,
    # which reaches our group once we hold the terminal, is held with ours: it stopped us inside this
    # function, and `fg` found us stopping again (docs/architecture.md, "Process model"). Held at SIGTSTP's
    # default action (_launchers_stop_held): unblocked, our own stop ran our Ctrl-Z handler instead.
    terminal.stopped_with_the_job = True
    try:
        continued = terminal.continued
        with _launchers_stop_held():
            terminal.take_back(pgid)
            group_stopped = _stop_the_launchers_group(stop_signal)
            # (a handler pending from before the kill runs at the latest as _stopped is called)
            if not _stopped(pgid) or terminal.continued != continued:
                signal.sigtimedwait([signal.SIGTSTP], 0)  # continued meanwhile: our stop is dropped
        # (stopped as the block ended, unless continued since the kill; continued here)
        if stop_signal == signal.SIGSTOP and _stopped(pgid) and not terminal.continued_since(continued):
            # our stop was discarded (an orphaned process group: `ssh -t host npuprof run`): the job stays
            # stopped, as it stopped itself, with the terminal it held; SIGCONT continues it
            terminal.give_to(pgid)
            return
        if (
            stop_signal in TERMINAL_ONLY
            and _stopped(pgid)
            and not terminal.continued_since(continued)
            and not terminal.held_by(os.getpgrp())
        ):
            # Our stop was discarded: our process group is orphaned (its parent gone, or in another
            # session), where no shell continues us or gives us the terminal. Continued, the job touched
            # the terminal again and stopped again at once: npuprof and the job spun so for ever, at full
            # CPU. Left stopped, as a stop is without a terminal (docs/architecture.md, "Process model").
            _say_left_stopped(pgid, stop_signal, terminal)
            return
        if group_stopped:
            _kill_group(os.getpgrp(), signal.SIGCONT)
        terminal.give_to(pgid)
        _kill_group(pgid, signal.SIGCONT)
    finally:
        terminal.stopped_with_the_job = False


def _stop_the_launchers_group(stop_signal: int) -> bool:
    """Stop the launcher (SIGTSTP) and its process group as the job's stop would have without npuprof;
    whether the group got a signal. A SIGTTIN/SIGTTOU goes to the group as itself, as the kernel's reaches
    the reader's whole group: `timeout`, which ignores them, ran on bare and ended the job in time, and was
    stopped by SIGTSTP with npuprof (`bash -c 'timeout 60 npuprof run ...'` reading the terminal hung for
    ever); the launcher ignores them while the job runs, and stops by its own SIGTSTP. A SIGSTOP stops the
    launcher alone: the kernel's stops the one process, and a shell running npuprof shows it stopped."""
    group_got_it = False
    if stop_signal != signal.SIGSTOP:
        group_signal = stop_signal if stop_signal in TERMINAL_ONLY else signal.SIGTSTP
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), group_signal)
            group_got_it = True
        if group_got_it and group_signal == signal.SIGTSTP:
            return True  # the launcher's own stop with it
    os.kill(os.getpid(), signal.SIGTSTP)
    return group_got_it


def _say_left_stopped(pgid: int, stop_signal: int, terminal: _Terminal) -> None:
    if terminal.said_left_stopped:
        return
    terminal.said_left_stopped = True
    touched = "reading" if stop_signal == signal.SIGTTIN else "writing to or setting"
    sys.stderr.write(
        f"npuprof: the job (pid {pgid}) stopped {touched} the terminal from the background "
        f"({signal.Signals(stop_signal).name}), and npuprof cannot stop with it (its process group is "
        "orphaned, or it ignores SIGTSTP): no shell can bring it to the foreground, so the job is left "
        f"stopped (without npuprof, the terminal would have failed it with EIO); `kill -CONT -{pgid}` "
        f"continues it, `kill -TERM -{pgid}` ends it\n"
    )
    sys.stderr.flush()


class LaunchError(RuntimeError):
    """The job could not be started: the shell's exit code for it (127: not found; 126: found, cannot
    run) and the errno of the failed exec, where there was one (E2BIG: the arguments and environment
    over the kernel's limit). ``received``: the signals that came while run_child started it, held
    (blocked since) for the caller to die of once its record is written (``die_of_the_held``)."""

    def __init__(self, message: str, exit_code: int = 127, errno: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.errno = errno
        self.received: list[int] = []

    def die_of_the_held(self) -> None:
        """Die of the first of TERMINATING_SIGNALS received (else the first received), as the launcher
        would have at its default action; with none, act on what is pending (unblocked)."""
        stops = [sig for sig in self.received if sig in TERMINATING_SIGNALS] or self.received
        if stops:
            die_of(stops[0])
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)


class InternalLaunchError(LaunchError):
    """npuprof's own failure (not the job's, nor its command's) before the job started: ``cause``; the exit
    code npuprof's own failures give (1, as `npuprof analyse` and the other commands), not a shell's 126 or
    127, which would say the command is at fault."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}", 1)
        self.cause = cause


def _launch_error(name: str, exc: OSError) -> LaunchError:
    if isinstance(exc, FileNotFoundError):
        return LaunchError(f"command not found: {name!r}")
    if isinstance(exc, PermissionError):
        return LaunchError(f"command not executable: {name!r}", 126)
    # a shell's exit code for a command found that cannot run: 126
    return LaunchError(f"cannot start {name!r}: {exc.strerror or exc}", 126, exc.errno)
