"""``--step-on __main__:NAME``: a placeholder for NAME in ``__main__`` (docs/architecture.md, "Step
boundaries"). Kept out of sitecustomize.py, which every Python process of the job compiles and runs at start:
this file is loaded, by its path, only by processes given a ``__main__`` target."""

import gc
import sys
from _thread import get_ident  # builtin modules: nothing more imported
from _weakref import ref

_wake = _report = _entry = None  # set by watch(): sitecustomize's functions
_target = ["__main__:?"]  # --step-on's value
_watched = []  # (module, name, weak reference to the placeholder) while a collection may see it bound
_collecting = []  # the thread whose garbage collection runs, while one runs


class _Unbound:
    """Holds the place of NAME in ``__main__``'s namespace for ``--step-on __main__:NAME[.attr]``, which no
    import can announce. The script's ``def``/``class`` binding NAME frees it, and its ``__del__`` wakes
    the agent there, before the script's next statement can save a reference. Until then, calling it fails
    as the undefined name would."""

    __slots__ = ("__weakref__", "module", "name")

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def __call__(self, *args, **kwargs):
        raise NameError(f"name {self.name!r} is not defined")

    def __repr__(self):
        return f"<npuprof: {self.name} not defined yet>"

    def __del__(self):
        try:
            if self.name and self.name in self.module.__dict__ and not sys.is_finalizing():
                _stop_watching(remove=not _collecting)  # a collection may be calling gc.callbacks now
                _wake("__main__", self.module)
                # freed by a collection, not by the script's binding (see _at_collection); a binding in
                # another thread while one collects (its callbacks or finalizers let go of the GIL) is not
                if get_ident() in _collecting:
                    _seen_late(self.module)
        except Exception as exc:
            _report(f"--step-on __main__: {exc!r}")


def watch(target, wake, report, entry):
    """``target`` is ``__main__:QUALNAME``; at exit, a name never bound is reported by the agent's code."""
    global _wake, _report, _entry
    _wake, _report, _entry = wake, report, entry
    import atexit

    module = sys.modules.get("__main__")
    name = target.partition(":")[2].partition(".")[0]
    if module is None or not name or name in module.__dict__:
        return
    placeholder = _Unbound(module, name)
    module.__dict__[name] = placeholder
    _target[0] = target
    _watched.append((module, name, ref(placeholder)))
    gc.callbacks.append(_at_collection)
    atexit.register(_main_at_exit, module, name, target, ref(placeholder))
    del placeholder


def _at_collection(phase, info):
    """While the placeholder lives, each garbage collection looks whether the script has bound the name
    all the same: something else held the placeholder then, so the binding did not free it (torch.jit.script
    keeps a copy of the script's globals, in a reference cycle, for each function it compiles; helper-325).
    The agent wakes at the first collection after the binding (not at a full one that may never come),
    and says that calls before it were not counted."""
    if phase != "start":
        _collecting.clear()
        return
    _collecting.append(get_ident())
    try:
        if not _watched or sys.is_finalizing():
            return
        module, name, placeholder = _watched[0]
        held = placeholder()
        if held is None or not held.name:
            _stop_watching(remove=False)
            return
        if module.__dict__.get(name, held) is held:
            return  # not bound yet (or deleted again)
        held.name = ""  # its __del__, whenever it comes, wakes nothing
        del held
        _stop_watching(remove=False)
        _wake("__main__", module)
        _seen_late(module)
    except Exception as exc:
        _stop_watching(remove=False)
        _report(f"--step-on __main__: {exc!r}")


def _stop_watching(remove=True):
    """``remove``: False from _at_collection, which stays in gc.callbacks, doing nothing but its flag:
    Python is calling that list in order, and taking an entry out then moves the next one into its place,
    skipped for this phase (a job's own GC timer after it got a 'stop' without its 'start')."""
    _watched.clear()
    if not remove:
        return
    try:
        gc.callbacks.remove(_at_collection)
    except ValueError:
        pass


def _seen_late(module):
    _entry().on_main_target_seen_late(module, _target[0])


def _main_at_exit(module, name, target, placeholder):
    try:
        if isinstance(module.__dict__.get(name), _Unbound):
            del module.__dict__[name]
            current = sys.modules.get("__main__")
            if current is module:
                _entry().on_main_target_missing(module, target)
            elif current is not None and name in vars(current):  # multiprocessing's spawn: __mp_main__
                _entry().on_main_target_spawned(target)
        elif (held := placeholder()) is not None and held.name and sys.modules.get("__main__") is module:
            # The script bound the name, yet the placeholder lives and no collection ran since to see it:
            # something else held it then (see _at_collection), so the binding freed nothing and the agent
            # never woke: said, not taken for a name never defined. Its __del__, when the import below
            # collects that cycle, must not start an agent now.
            held.name = ""
            del held
            _stop_watching()
            _entry().on_main_target_held(module, target)
    except Exception as exc:
        _report(f"--step-on {target}: {exc!r}")
