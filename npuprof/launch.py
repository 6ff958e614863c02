"""Start the user's command with the agent injected, forward signals, return its exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from npuprof import ENV_CONFIG
from npuprof.config import ProfileConfig

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "_bootstrap"
OPTIMIZER_TRIGGER = "torch.optim.optimizer"
FORWARDED_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
_PYTHON_LAUNCHERS = ("torchrun", "deepspeed", "accelerate", "colossalai", "mpirun", "srun", "msrun")


def triggers(cfg: ProfileConfig) -> list[str]:
    if cfg.step_on:
        return [cfg.step_on.split(":", 1)[0]]
    return [OPTIMIZER_TRIGGER]


def child_environment(cfg: ProfileConfig, run: dict[str, object], base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    existing = env.get("PYTHONPATH", "")
    parts = [str(BOOTSTRAP_DIR)] + [p for p in existing.split(os.pathsep) if p and p != str(BOOTSTRAP_DIR)]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env[ENV_CONFIG] = cfg.to_env(run)
    env["NPUPROF_TRIGGERS"] = ",".join(triggers(cfg))
    return env


def injection_warnings(command: list[str]) -> list[str]:
    """Say when the injection may not reach the job (python -S/-I, or not Python at all)."""
    if not command:
        return []
    exe = command[0]
    name = os.path.basename(exe)
    if name.startswith("python") or name.startswith("pypy"):
        for arg in command[1:]:
            if not arg.startswith("-") or arg in ("-m", "-c"):
                break
            letters = arg[1:] if not arg.startswith("--") else ""
            if "S" in letters or "I" in letters:
                return [
                    f"{name} {arg}: Python will not import sitecustomize (-S/-I), so npuprof cannot reach "
                    "this process; drop the flag to profile it"
                ]
        return []
    if name in _PYTHON_LAUNCHERS:
        return []
    import shutil

    path = shutil.which(exe)
    if path and _has_python_shebang(Path(path)):
        return []
    return [
        f"{exe!r} does not look like a Python program; npuprof reaches only the Python processes it starts "
        "(through PYTHONPATH), so nothing may be captured"
    ]


def _has_python_shebang(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def new_run_id() -> str:
    return os.urandom(6).hex()  # as uuid4().hex[:12], without importing uuid


def exit_code_of(returncode: int) -> int:
    """A child killed by signal N gives 128+N, as shells do."""
    return 128 - returncode if returncode < 0 else returncode


@contextlib.contextmanager
def _forward_signals(pgid_holder: list[int]) -> Iterator[list[int]]:
    received: list[int] = []

    def forward(signum: int, frame: object) -> None:
        received.append(signum)
        if pgid_holder:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid_holder[0], signum)

    previous = {}
    for sig in FORWARDED_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            previous[sig] = signal.signal(sig, forward)
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, handler)


@contextlib.contextmanager
def _terminal_foreground() -> Iterator[Callable[[int], None]]:
    """Give the terminal to the child's process group (as a shell does) and take it back after,
    so Ctrl-C and interactive debuggers behave as without npuprof."""
    try:
        fd = sys.stdin.fileno()
        ours = os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        yield lambda pgid: None
        return
    old_ttou = signal.signal(signal.SIGTTOU, signal.SIG_IGN)

    def hand_over(pgid: int) -> None:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgid)

    try:
        yield hand_over
    finally:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, os.getpgrp())
        signal.signal(signal.SIGTTOU, old_ttou)


def run_child(command: list[str], env: dict[str, str]) -> tuple[int, list[int]]:
    """Run ``command`` in its own process group; returns (exit code, signals forwarded)."""
    pgid: list[int] = []
    with _terminal_foreground() as hand_over, _forward_signals(pgid) as received:
        try:
            pid = _spawn(command, env)
        except FileNotFoundError:
            raise LaunchError(f"command not found: {command[0]!r}") from None
        except PermissionError:
            raise LaunchError(f"command not executable: {command[0]!r}") from None
        pgid.append(pid)
        hand_over(pid)
        returncode = _wait(pid)
    return exit_code_of(returncode), received


def _spawn(command: list[str], env: dict[str, str]) -> int:
    """Start ``command`` as the leader of a new process group; returns its pid.

    posix_spawn (vfork + exec) rather than subprocess: importing subprocess alone costs ~8 ms of the
    launcher's start. Like a shell, and unlike subprocess's default, it leaves inheritable descriptors
    (a make jobserver, a pipe the caller set up) to the child; npuprof's own are close-on-exec."""
    if os.sep in command[0]:
        return os.posix_spawn(command[0], command, env, setpgroup=0)
    # Search the child's PATH, as subprocess does (posix_spawnp would search the launcher's).
    return os.posix_spawn(_which(command[0], env.get("PATH", os.defpath)), command, env, setpgroup=0)


def _which(name: str, path: str) -> str:
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


def _wait(pid: int) -> int:
    """The child's return code as subprocess gives it (-N when killed by signal N)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except KeyboardInterrupt:  # pragma: no cover - our handler replaces SIGINT's default
            continue
        except ChildProcessError:  # pragma: no cover - reaped elsewhere
            return 0
        if os.WIFSTOPPED(status):  # pragma: no cover - waitpid without WUNTRACED
            continue
        return os.waitstatus_to_exitcode(status)


class LaunchError(RuntimeError):
    pass
