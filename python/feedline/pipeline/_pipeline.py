"""Pipeline: the consumer's handle on a built pipeline.

Lifecycle: ``build`` → ``start()`` (or the first read) → read with
``for x in pipeline`` / ``get_item()`` → ``stop()``. A pipeline that is
garbage-collected, or still running when the interpreter exits, is stopped
for you: its threads never keep the process alive.

Differences from ``spdl.pipeline`` (on purpose):

- A failed stage is reported to the consumer: after the items that made it
  through, the iterator and ``get_item()`` raise :class:`PipelineFailure`
  (SPDL ends iteration normally and raises only from ``stop()``).
  ``stop()`` raises it only if the consumer has not seen it yet.
- ``stop()`` discards items still buffered; reads after it raise EOFError.
- Ctrl-C while the consumer waits raises KeyboardInterrupt at once and stops
  the pipeline.
- ``stop()`` called inside an op of the same pipeline requests the stop and
  returns at once (it cannot wait for the call it is in); the stop completes
  once that call returns.
- After ``os.fork()`` a pipeline of the parent is dead in the child: reading
  or starting it raises :class:`feedline.Error`, ``stop()`` does nothing, and
  neither the child's exit nor the garbage collector touches it. The child
  may build and run pipelines of its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref

from .._errors import PipelineFailure, _add_note
from .._feedline_ext import _drain_released, _set_leak_warnings
from ._common import Subscriptable

_LG = logging.getLogger("feedline.pipeline")

_STAGE_NOTE = "Pipeline stage: "
_DEFINED_AT = "Stage defined at "

__all__ = ["Pipeline"]

# Seconds a garbage-collected pipeline, or one alive at exit, may take to stop.
_CLEANUP_TIMEOUT = 10.0

_live_lock = threading.Lock()
_live: weakref.WeakSet = weakref.WeakSet()
_exit_hook_registered = False


def _stop_live_pipelines():
    """Stops every running pipeline before the interpreter shuts down."""
    with _live_lock:
        pipelines = list(_live)
    for p in pipelines:
        try:
            p._shutdown(_CLEANUP_TIMEOUT)
            # Drop the native handle now: a module-level pipeline would
            # otherwise be freed only by the interpreter's last garbage
            # collection, after its extension module is gone. (Also after a
            # timeout: the stop goes on without it.)
            p._release_native()
        except TimeoutError:
            p._release_native()
            _LG.warning(
                "a pipeline was still running a call %s s after exit began; exiting without it",
                _CLEANUP_TIMEOUT,
            )
            # What the stuck call holds (its Completion, its op) stays alive
            # on purpose: no report of nanobind objects left at exit.
            _set_leak_warnings(False)
        except Exception:
            _LG.exception("stopping a pipeline at exit failed")


def _forget_parent_pipelines():
    """In a child process after fork: the lock may have been held by a thread
    that no longer exists. The parent's pipelines stay listed so that exit
    drops their handles (stopping them does nothing in the child)."""
    global _live_lock, _live
    _live_lock = threading.Lock()
    _live = weakref.WeakSet(list(_live))


os.register_at_fork(after_in_child=_forget_parent_pipelines)


def _register_exit_hook():
    global _exit_hook_registered
    with _live_lock:
        if _exit_hook_registered:
            return
        _exit_hook_registered = True
    # threading._register_atexit runs before the interpreter waits for its
    # non-daemon threads and before it finalizes, while ops can still run;
    # plain atexit would run too late for a pipeline that is mid-call.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(_stop_live_pipelines)
    else:  # pragma: no cover
        import atexit

        atexit.register(_stop_live_pipelines)


def _finalize(native, loop_thread, stage_hooks, pid):
    """Cleanup of a pipeline that was garbage-collected without stop()."""
    if os.getpid() != pid:
        return  # a pipeline of the parent process, in a forked child
    try:
        if loop_thread is not None:
            loop_thread.begin_close()
        # Not waiting when the collection runs on a pipeline worker thread:
        # the stop then completes on the engine's stopper thread.
        native.stop(_CLEANUP_TIMEOUT)
        stage_hooks.exit()  # first: background tasks' cleanup needs the loop
        if loop_thread is not None:
            loop_thread.close(_CLEANUP_TIMEOUT)
    except Exception:
        _LG.exception("cleaning up a garbage-collected pipeline failed")


class Pipeline(Subscriptable):
    """A built pipeline. Made by ``PipelineBuilder.build()`` or
    :func:`build_pipeline`; not started until :meth:`start` or the first read.
    """

    def __init__(self, native, *, description, loop_thread, stage_hooks, infos, locations=None, resume=None):
        self._native = native
        self._resume = resume  # _resume.Resume of a resumable source, else None
        self._locations = list(locations or ())
        self._description = description
        self._loop_thread = loop_thread
        self._stage_hooks = stage_hooks
        self._infos = infos
        self._lock = threading.Lock()
        self._started = False
        self._start_error: BaseException | None = None
        self._stopped = False
        self._failure_seen = False
        self._failure = None  # the PipelineFailure, once stopped
        # What stats() and trace_json() return once the exit hook has dropped
        # the native handle (a thread that outlives it may still ask).
        self._final_stats = None
        self._final_trace: str | None = None
        self._pid = os.getpid()  # another pid: inherited through fork
        self._finalizer = weakref.finalize(self, _finalize, native, loop_thread, stage_hooks, self._pid)
        # Tracked for its whole life: at exit every pipeline is stopped (even
        # one that never started), which releases what its stages hold.
        _register_exit_hook()
        with _live_lock:
            _live.add(self)

    # -- lifecycle -----------------------------------------------------------

    def start(self, *, timeout: float | None = None, **kwargs) -> None:
        """Starts the stages. Raises RuntimeError if already started.

        ``timeout`` and ``daemon`` are accepted for SPDL compatibility; the
        engine starts at once and its threads never block interpreter exit.
        """
        del timeout, kwargs
        with self._lock:
            if self._started:
                raise RuntimeError("The pipeline was already started.")
            if self._stopped:
                raise RuntimeError("The pipeline was stopped; build a new one.")
            self._started = True
        try:
            self._stage_hooks.enter()
            if self._loop_thread is not None:
                self._loop_thread.start()
        except BaseException as e:
            # A pipeline whose stage hooks failed to enter must not run
            # without them (or its event loop): reading it raises this too.
            self._start_error = e
            with contextlib.suppress(Exception):
                self._shutdown(None)
            raise
        with self._lock:
            stopped = self._stopped
            native = self._native  # dropped (under the lock) only once stopped
        if stopped:  # stop() came first, with nothing running yet to stop
            self._stage_hooks.exit()
            if self._loop_thread is not None:
                self._loop_thread.close()
            return
        # The engine's own start may fail (a worker thread refused) and be
        # tried again by the first read.
        native.start()

    def _ensure_started(self) -> None:
        if not self._started:
            with contextlib.suppress(RuntimeError):  # another thread won the race
                self.start()
        if self._start_error is not None:
            raise RuntimeError(
                f"The pipeline failed to start: {type(self._start_error).__name__}: {self._start_error}"
            ) from self._start_error

    def stop(self, *, timeout: float | None = None) -> None:
        """Stops the pipeline: cancels every stage, waits for calls in flight
        and joins its threads. Items still buffered are discarded.

        Idempotent. Raises TimeoutError if calls in flight did not finish
        within ``timeout`` seconds (the stop then completes in the
        background). Raises :class:`PipelineFailure` if a stage failed and the
        consumer has not received that failure yet.

        Called inside an op of this pipeline, it requests the stop and
        returns without waiting (the stop completes once the op returns).
        """
        self._shutdown(timeout)
        if self._failure is not None and not self._failure_seen:
            self._failure_seen = True
            raise self._failure

    def _shutdown(self, timeout):
        with self._lock:
            self._stopped = True
        self._finalizer.detach()
        if os.getpid() != self._pid:
            return  # the parent's pipeline: nothing of it runs here
        if self._loop_thread is not None:
            self._loop_thread.begin_close()
        if self._resume is not None and self._resume.run is not None:
            self._resume.run.active = False  # what the stop drops was not done
        native = self._native
        # None: the exit hook stopped the pipeline and dropped the handle
        # (its stop took the failure, if any).
        done = native is None or native.stop(timeout)
        if done and self._failure is None and native is not None:
            self._failure = native.take_failure()
            if self._failure is not None:
                self._locate(self._failure)
        # The hooks end first, while the loop still runs: a background task
        # cancelled there may await in its cleanup.
        self._stage_hooks.exit()
        if self._loop_thread is not None:
            self._loop_thread.close(timeout)
        _drain_released()
        if not done:
            raise TimeoutError(f"The pipeline did not stop within {timeout} s; it stops in the background.")

    def _release_native(self) -> None:
        """Drops the native handle of a stopped pipeline (at exit), keeping
        its last statistics and trace for threads that still ask."""
        native = self._native
        if native is None:
            return
        if os.getpid() == self._pid:  # a parent's pipeline in a forked child: never touched
            try:
                self._final_stats = native.stats()
                self._final_trace = native.trace_json()
            except Exception:
                _LG.exception("taking a stopped pipeline's statistics at exit failed")
        with self._lock:
            self._native = None

    @contextlib.contextmanager
    def auto_stop(self, *, timeout: float | None = None):
        """Starts the pipeline and stops it when the block exits."""
        self.start(timeout=timeout)
        try:
            yield self
        finally:
            self.stop(timeout=timeout)

    # -- reading -------------------------------------------------------------

    def get_item(self, *, timeout: float | None = None):
        """Returns the next item.

        Raises:
            EOFError: at the end of an epoch (continuous sources), at the end
                of the pipeline and after stop().
            TimeoutError: when no item arrives within ``timeout`` seconds
                (:class:`feedline.Timeout`, a TimeoutError).
            PipelineFailure: once the items that made it through are drained,
                if a stage failed.
        """
        self._ensure_started()
        resume = self._tracking()
        native = self._native
        if native is None:  # stopped at exit
            raise EOFError("Reached the end of the pipeline.")
        try:
            value = native.get(timeout)
        except PipelineFailure as e:
            self._failure_seen = True
            self._locate(e)
            raise
        except EOFError:
            if resume is not None and not self._stopped:
                resume.end_pass()
            raise
        return value if resume is None else resume.deliver(value)

    def _tracking(self):
        """The Resume that tracks delivered items, or None."""
        resume = self._resume
        return resume if resume is not None and resume.unsupported is None else None

    def get_iterator(self, *, timeout: float | None = None):
        """Returns an iterator over one epoch (the whole stream for a
        non-continuous source). Each next() waits at most ``timeout`` seconds.
        A new iterator continues where the previous one stopped.
        """
        self._ensure_started()
        native = self._native
        return self._iterate(iter(()) if native is None else native.epoch(timeout))  # None: stopped at exit

    def _iterate(self, epoch):
        resume = self._tracking()
        try:
            if resume is None:
                yield from epoch
                return
            for value in epoch:
                yield resume.deliver(value)
        except PipelineFailure as e:
            self._failure_seen = True
            self._locate(e)
            raise
        if not self._stopped:
            resume.end_pass()

    def __iter__(self):
        return self.get_iterator()

    def _locate(self, failure) -> None:
        """Adds ``"Stage defined at file:line"`` (the user's line that made
        the stage's config) after each stage exception's stage note, once."""
        for exc in getattr(failure, "exceptions", ()):
            notes = getattr(exc, "__notes__", None) or []
            if any(n.startswith(_DEFINED_AT) for n in notes):
                continue
            for note in notes:
                if not note.startswith(_STAGE_NOTE):
                    continue
                index = note[len(_STAGE_NOTE) :].split(":", 1)[0]
                if index.isdigit() and int(index) < len(self._locations) and self._locations[int(index)]:
                    _add_note(exc, f"{_DEFINED_AT}{self._locations[int(index)]}")
                break

    # -- checkpoints (feedline's addition) ---------------------------------------

    def _resumable(self, what):
        if self._resume is None:
            raise TypeError(
                f"Pipeline.{what}: the pipeline's source is not resumable; build it with "
                "PipelineBuilder.add_source(src, resumable=True) from a source that has "
                "state_dict() and load_state_dict()"
            )
        return self._resume

    def state_dict(self) -> dict:
        """A checkpoint of a pipeline built from a resumable source: which
        items of the pass being read the consumer has received (or failed,
        or were dropped), and the source's state at the start of that pass;
        a few integers. See docs/python.md "Resumable pipelines".

        Raises:
            TypeError: the source was not added with ``resumable=True``.
            ValueError: a stage cannot pass item positions on (named).
        """
        resume = self._resumable("state_dict()")
        if resume.run is not None:
            _drain_released()  # tags released by native threads mark failed items
        return resume.state_dict()

    def load_state_dict(self, state) -> None:
        """Restores a :meth:`state_dict` into this freshly built pipeline
        (same config, not started): the source is restored and the items
        already done are skipped.

        Raises:
            TypeError: the source was not added with ``resumable=True``.
            ValueError: a bad state, or a stage that cannot pass positions on.
            RuntimeError: the pipeline was already started.
        """
        resume = self._resumable("load_state_dict()")
        if self._started or self._stopped:
            raise RuntimeError("Pipeline.load_state_dict() must be called before the pipeline starts")
        resume.load_state_dict(state)

    # -- observability -------------------------------------------------------

    def stats(self):
        """A :class:`PipelineStats` snapshot of every stage (cheap; callable
        while running, from any thread)."""
        native = self._native
        if native is None:  # stopped and released at exit
            return self._released("stats()", self._final_stats)
        return native.stats()

    def trace_json(self) -> str:
        """The calls sampled so far (build with ``trace_every=N``) in the
        Trace Event Format: one slice per call on the thread that ran it,
        named after its stage, that Perfetto (ui.perfetto.dev) and
        chrome://tracing open. Without ``trace_every`` it has no calls."""
        native = self._native
        if native is None:  # stopped and released at exit
            return self._released("trace_json()", self._final_trace)
        return native.trace_json()

    @staticmethod
    def _released(what, kept):
        if kept is None:
            raise RuntimeError(f"Pipeline.{what}: the pipeline was released at interpreter exit")
        return kept

    def write_trace(self, path) -> None:
        """Writes :meth:`trace_json` to ``path`` (e.g. ``trace.json``)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.trace_json())

    @property
    def stage_infos(self):
        """The StageInfo of every stage, in the order of ``stats().stages``."""
        return list(self._infos)

    def __str__(self):
        state = "stopped" if self._stopped else ("running" if self._started else "not started")
        return f"Pipeline ({state})\n{self._description}"
