"""Autotune: the pipeline sets its own concurrency while it runs.

The controller is native (``feedline::AutotuneOptions``); this module only
describes its settings. See docs/stats.md#autotune.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Autotune"]


@dataclasses.dataclass(frozen=True)
class Autotune:
    """Settings of autotune (``build(..., autotune=Autotune(...))``).

    While the pipeline runs, a native controller reads the statistics every
    ``interval`` seconds, finds what limits the output rate (a stage at its
    concurrency, or a saturated pool of threads), raises that knob, keeps the
    change only if the rate rose, and lowers the pool's active threads when
    its CPU use goes over ``cpu_budget``. Each change is logged (INFO, logger
    ``feedline``) and listed in ``Pipeline.stats().autotune``. The
    concurrency given to each stage and ``num_threads`` are where it starts.

    Args:
        cpu_budget: the share of the machine's CPUs the pipeline's threads
            may use, in (0, 1]; the rest is left to the trainer.
        cpus: the CPUs the budget is a share of; 0: those this process may
            run on.
        max_concurrency: the most concurrency a tuned stage gets (a stage
            built with more keeps its own as its bound). Tuned stages: pipe
            stages without state; aggregates, sources and generator ops in
            input order keep theirs.
        max_threads: the most pool threads; 0: ``max(num_threads,
            max_concurrency)``. They are all started, ``num_threads`` of
            them active at first.
        interval: seconds between the controller's steps.
    """

    cpu_budget: float = 0.5
    cpus: int = 0
    max_concurrency: int = 32
    max_threads: int = 0
    interval: float = 0.2

    def __post_init__(self):
        if not 0 < self.cpu_budget <= 1:
            raise ValueError(f"cpu_budget must be in (0, 1], got {self.cpu_budget!r}")
        for name, low in (("cpus", 0), ("max_concurrency", 1), ("max_threads", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if not self.interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {self.interval!r}")

    def _native(self) -> tuple[float, int, int, int, float]:
        return (float(self.cpu_budget), self.cpus, self.max_concurrency, self.max_threads, float(self.interval))


def native_args(autotune) -> tuple[float, int, int, int, float] | None:
    """What the native build takes for ``build(autotune=...)``: None/False
    (off), True (the defaults) or an :class:`Autotune`."""
    if autotune is None or autotune is False:
        return None
    if autotune is True:
        return Autotune()._native()
    if isinstance(autotune, Autotune):
        return autotune._native()
    raise TypeError(f"autotune takes True, False, None or an Autotune, got {type(autotune).__name__}")
