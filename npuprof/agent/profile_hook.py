"""``--with-stack`` and the job's own profile hook (``sys.setprofile``).

A thread has one profile hook, and torch's Python tracer (``with_stack``) is one: starting to record, torch
takes the place of the hook the job had set (``python -m cProfile``, and every ``cProfile`` before Python
3.12), and stopping, it leaves none, so that the job's profiler silently records nothing more. A hook the
job sets while torch records (a ``cProfile`` enabled and disabled around each action, as Lightning's
AdvancedProfiler does) takes torch's place instead, and the capture's Python frames end there: the frames
open at that moment keep the time of every call made after. torch says neither; npuprof says both, and
gives a ``cProfile`` profiler it displaced its place back when the capture ends, as long as the job has not
touched the hook meanwhile (then the job still believes its profiler runs).
"""

from __future__ import annotations

import sys
from typing import Any

from npuprof.agent.log import AgentLog

FRAMES_MISSING = "Python frames (--with-stack) are missing"  # how a capture record's detail says it
# what sets the hook in a job: cProfile until Python 3.12, which moved it to sys.monitoring (it leaves torch's
# tracer alone there), not the pure-Python profile module
_WHO_SETS_THE_HOOK = (
    "a cProfile enabled or disabled there does it, as Lightning's AdvancedProfiler does around each action"
    if sys.version_info < (3, 12)
    else "a profiler of the job's that calls sys.setprofile there does it, as the profile module does"
)
TORCH_MONITORING_TOOL = "PyTorch Profiler"  # the name torch's tracer gives sys.monitoring (Python 3.12)


def _name(hook: Any) -> str:
    if _is_cprofile(hook):  # `python -m cProfile` runs its module as __main__
        return "cProfile"
    named = hook if hasattr(hook, "__qualname__") else type(hook)  # a function is named, not its type
    return f"{getattr(named, '__module__', '?')}.{named.__qualname__}"


def _is_cprofile(hook: Any) -> bool:
    try:
        import _lsprof
    except ImportError:
        return False
    return isinstance(hook, _lsprof.Profiler)


class ProfileHookWatch:
    """Follows the driving thread's profile hook across the captures of a ``--with-stack`` profiler."""

    def __init__(self, log: AgentLog) -> None:
        self.log = log
        self.tracer: Any = None  # torch's hook while it records (None: not recording, or not known)
        self.displaced: Any = None  # the job's hook torch took the place of
        self.previous: Any = None  # torch's hook in the capture that ended last
        self.lost = False  # the job changed the hook while torch recorded
        self.slot_freed = False  # npuprof freed torch's sys.monitoring slot in the capture under way

    def before_start(self, with_stack: bool) -> Any:
        """The hook just before torch starts recording (None when there is nothing to follow)."""
        return sys.getprofile() if with_stack else None

    def started(self, before: Any, with_stack: bool) -> None:
        """torch has started recording; ``before`` is what ``before_start`` returned."""
        if not with_stack:
            self.tracer = None
            return
        self._free_the_profiler_slot()
        after = sys.getprofile()
        if before is not None and before is self.previous:
            before = self.displaced  # the next cycle began in the same step(): the job's hook is the same
        self.tracer = after if after is not None and after is not before else None
        self.displaced = before if self.tracer is not None else None
        self.lost = False
        if self.displaced is not None:
            again = _is_cprofile(before)
            after_it = "npuprof enables it again after each capture" if again else "it stays off"
            self.log.warn_once(
                "profile-hook-taken",
                f"--with-stack: torch's Python tracer takes the place of the job's own profile hook "
                f"({_name(before)}, sys.setprofile) while it records, and leaves none; {after_it}",
            )

    def _free_the_profiler_slot(self) -> None:
        """On Python 3.12, torch's Python tracer also takes sys.monitoring's profiler slot while it records,
        for one event its profile hook already sees (a ``CALL``): a ``cProfile`` the job enabled then (each
        action of Lightning's AdvancedProfiler) raised "ValueError: Another profiling tool is already
        active" and ended the job. The slot is given back at once; torch records the same frames through
        its profile hook, as on 3.11 and 3.13, and a profiler of the job's may take the slot."""
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None:
            return
        try:
            if monitoring.get_tool(monitoring.PROFILER_ID) != TORCH_MONITORING_TOOL:
                return
            monitoring.free_tool_id(monitoring.PROFILER_ID)
        except Exception as exc:
            self.log.warning(f"sys.monitoring's profiler slot, taken by torch's Python tracer: {exc!r}")
            return
        self.slot_freed = True
        self.log.info("torch's Python tracer took sys.monitoring's profiler slot: freed for the job's own")

    def _clear_the_freed_slot(self) -> None:
        """torch has stopped: on 3.12 ``free_tool_id`` frees only the name, torch's ``CALL`` event and its
        callback stay, and torch, no longer finding its name on the slot, leaves them: every call of the
        rest of the job then went through torch's callback (a call-bound loop twice as slow). Cleared here
        unless a tool of the job's has taken the slot since (it set its own events then)."""
        if not self.slot_freed:
            return
        self.slot_freed = False
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None:
            return
        try:
            if monitoring.get_tool(monitoring.PROFILER_ID) is not None:
                return
            # 3.12 changes the events and callbacks of a tool in use only: taken for the time it takes
            monitoring.use_tool_id(monitoring.PROFILER_ID, "npuprof")
            try:
                monitoring.register_callback(monitoring.PROFILER_ID, monitoring.events.CALL, None)
                monitoring.set_events(monitoring.PROFILER_ID, monitoring.events.NO_EVENTS)
            finally:
                monitoring.free_tool_id(monitoring.PROFILER_ID)
        except Exception as exc:
            self.log.warning(f"torch's event on sys.monitoring's profiler slot not cleared: {exc!r}")

    def lost_at(self, step: int) -> str | None:
        """At a step boundary while recording: the note for the capture when the job's own hook has
        replaced torch's since (once a capture), else None."""
        if self.tracer is None or self.lost or sys.getprofile() is self.tracer:
            return None
        self.lost = True
        now = sys.getprofile()
        how = (
            f"the job's own profile hook ({_name(now)}) took the place of torch's Python tracer"
            if now is not None
            else "the job removed torch's Python tracer, with sys.setprofile(None)"
        )
        note = f"{FRAMES_MISSING} from step {step} on: {how} ({_WHO_SETS_THE_HOOK})"
        self.log.warn_once("profile-hook-lost", note)
        return note

    def stopped(self) -> None:
        """torch has stopped recording: a cProfile profiler it displaced, and that the job has not
        replaced since, is enabled again."""
        self._clear_the_freed_slot()
        displaced, lost = self.displaced, self.lost
        self.previous, self.tracer = self.tracer, None
        if displaced is None or lost or sys.getprofile() is not None or not _is_cprofile(displaced):
            return
        try:
            displaced.enable()
        except Exception as exc:
            self.log.warning(f"the job's profile hook ({_name(displaced)}) not enabled again: {exc!r}")
            return
        self.log.info(f"the job's profile hook ({_name(displaced)}) is enabled again")
