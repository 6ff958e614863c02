"""npuprof's start-up hook, put first on PYTHONPATH by `npuprof run`.

It must cost next to nothing in processes that never use torch, so it imports nothing beyond what
the interpreter has already loaded, and it never raises.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_user_sitecustomize() -> "Exception | None":
    """Run the sitecustomize that our directory hides, if any, and leave it as `sitecustomize`; what it
    raised, if it failed (raised again once our hook is installed: see the end of this module).

    Our directory leaves sys.path for good first: it holds nothing but this module, which is already
    imported, and whatever the user's hook does to sys.path (append, insert, remove, rebind) must stand
    exactly as it would without npuprof. Child processes still find us through PYTHONPATH.
    """
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if not _is_our_dir(p)]
    try:
        import sitecustomize  # noqa: F401  (the user's, found further down the path)
    except ImportError as exc:
        if exc.name != "sitecustomize":
            return exc
    except Exception as exc:
        return exc
    if "sitecustomize" not in sys.modules and ours is not None:
        sys.modules["sitecustomize"] = ours
    return None


def _is_our_dir(entry: object) -> bool:
    if not isinstance(entry, str):
        return False
    if os.path.isabs(entry):
        return os.path.normpath(entry) == _HERE
    try:
        return os.path.abspath(entry or ".") == _HERE
    except OSError:  # the working directory was removed: a relative entry is not ours (ours is absolute)
        return False


def _report(message: str) -> None:
    """Once on stderr, and in the run's log (NPUPROF_LOG), where the launcher's last line finds why no
    agent started: an append that never blocks, follows a link nor creates a file (the launcher made it)."""
    try:
        sys.stderr.write(f"npuprof: {message}\n")
    except Exception:
        pass
    log = os.environ.get("NPUPROF_LOG")
    if not log:
        return
    try:
        import stat
        import time

        one_line = " ".join(message.split())
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} [ERROR] [bootstrap pid={os.getpid()}] {one_line}\n"
        flags = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(log, flags)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.write(fd, line.encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)
    except Exception:
        pass


class _TriggerFinder:
    """A meta-path finder that wakes the agent once a trigger module has executed."""

    def __init__(self, triggers: "set[str]") -> None:
        self.triggers = triggers
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name not in self.triggers or self.busy:
            return None
        self.busy = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self.busy = False
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original_exec = loader.exec_module

        def exec_module(module, _original=original_exec, _name=name):
            _original(module)
            _wake(_name, module)

        try:
            loader.exec_module = exec_module
        except Exception:
            return spec
        return spec


def _wake(module_name: str, module: object) -> None:
    try:
        _entry().on_trigger(module_name, module)
    except Exception as exc:
        _report(f"agent failed to start, training goes on without profiling: {exc!r}")


def _entry():  # -> npuprof.agent.entry
    kind, where = _what_npuprof_is()
    if kind == "module":  # the script's own module: never replaced (its imports of it must keep working)
        raise ImportError(f"a module named npuprof ({where}) hides npuprof's package: rename it")
    if kind != "package":
        return _import_entry_from_here(where)
    from npuprof.agent import entry

    return entry


def _what_npuprof_is() -> "tuple[str, list[str]]":
    """What ``import npuprof`` gives in this process: ("package", []) npuprof's (or any regular package);
    ("namespace", its folders) a folder named npuprof that Python takes for a namespace package, found
    before an editable install's finder (an output dir `-o npuprof`, a clone beside the script; helper-101);
    ("module", [its file]) a module npuprof.py of the script's (helper-102); ("none", []) nothing."""
    module = sys.modules.get("npuprof")
    if module is not None:
        if hasattr(module, "__path__"):
            return (
                ("package", []) if getattr(module, "__file__", None) else ("namespace", list(module.__path__))
            )
        return "module", [str(getattr(module, "__file__", None) or module)]
    from importlib.util import find_spec

    try:
        spec = find_spec("npuprof")
    except Exception:
        return "none", []
    if spec is None:
        return "none", []
    if spec.submodule_search_locations is None:
        return "module", [str(spec.origin)]
    if spec.origin in (None, "namespace"):
        return "namespace", list(spec.submodule_search_locations)
    return "package", []


def _watch_main(target: str) -> None:
    """``--step-on __main__:NAME``: npuprof/_bootstrap/_npuprof_main_target.py, loaded by its path."""
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("_npuprof_main_target", os.path.join(_HERE, "_npuprof_main_target.py"))
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    module.watch(target, _wake, _report, _entry)


def _import_entry_from_here(folders: "list[str] | None" = None):  # -> npuprof.agent.entry
    """The agent from the npuprof this file belongs to (the job's Python lacks npuprof, or a folder named
    npuprof hides it), loaded by its path as the package ``npuprof``, sys.path left as it was: its modules
    are then found through the package's __path__, and after them those of the namespace ``folders`` it
    replaces (a script's own ``npuprof/util.py`` is still found)."""
    from importlib.util import module_from_spec, spec_from_file_location

    package_dir = os.path.dirname(_HERE)
    spec = spec_from_file_location(
        "npuprof",
        os.path.join(package_dir, "__init__.py"),
        submodule_search_locations=[package_dir, *(folders or [])],
    )
    module = module_from_spec(spec)
    for name in [n for n in sys.modules if n == "npuprof" or n.startswith("npuprof.")]:
        del sys.modules[name]  # a namespace package of that name (and what was found through it)
    sys.modules["npuprof"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["npuprof"]
        raise
    from npuprof.agent import entry

    return entry


def _install() -> None:
    triggers = os.environ.get("NPUPROF_TRIGGERS", "")
    if not triggers or not os.environ.get("NPUPROF_CONFIG"):
        return
    names = {t for t in triggers.split(",") if t}
    for target in [n for n in names if n.startswith("__main__:")]:
        names.discard(target)
        _watch_main(target)
    if not names:
        return
    already = [n for n in names if n in sys.modules]
    sys.meta_path.insert(0, _TriggerFinder(names))
    for name in already:
        _wake(name, sys.modules[name])


def _note_the_jobs_first_process() -> None:
    """The job's first process (`npuprof run`'s direct child, or what it execs) says so in its environment
    while the launcher surely lives (npuprof.ENV_LAUNCHER_PID, npuprof.ENV_JOB_PID): its children inherit
    a mark that is not theirs. Only it ends with SIGTERM when its agent finds the launcher dead. The mark is
    its pid and its start (``PID:TICKS``): a process of the run given that pid after the first one died
    (the pids wrapped round) inherited the mark, and must not take itself for the first process."""
    launcher = os.environ.get("NPUPROF_LAUNCHER_PID")
    if launcher and launcher == str(os.getppid()):
        os.environ["NPUPROF_JOB_PID"] = f"{os.getpid()}:{_start_ticks()}"


def _start_ticks() -> str:
    """This process's start in clock ticks after boot (/proc/self/stat's field 22, kept across exec), as
    npuprof.proc_stat.start_ticks reads it; "" where it cannot be read. One small read."""
    try:
        fd = os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            text = os.read(fd, 4096)
        finally:
            os.close(fd)
        return text[text.rindex(b")") + 2 :].split()[19].decode("ascii")
    except Exception:
        return ""


_users_error = None
try:
    _note_the_jobs_first_process()
    _users_error = _chain_user_sitecustomize()
    _install()
except Exception as _exc:  # never break the interpreter's start
    _report(f"bootstrap failed: {_exc!r}")
if _users_error is not None:
    # The user's own hook failed: Python's site module reports it as it would without npuprof ("Error in
    # sitecustomize; set PYTHONVERBOSE for traceback: <its error>") and goes on; ours is installed already.
    # A later `import sitecustomize` runs the user's again, as Python leaves it.
    raise _users_error
