"""Native core of feedline (private; import feedline instead)."""

from collections.abc import Sequence

from feedline._feedline_ext import io as io


_build_type: str

class Error(RuntimeError): ...

class IoError(Error): ...

class FormatError(Error): ...

class DecodeError(Error): ...

class UnsupportedFormat(DecodeError): ...

class Cancelled(Error): ...

class Internal(Error): ...

class Timeout(Error, TimeoutError): ...

class TooManyFailures(Error): ...

class ProcessGroupResourceUsage:
    """
    One sample of a process group's resources, read from /proc (ProcessGroupStatsMonitor).
    """

    @property
    def pid(self) -> int:
        """The monitoring process."""

    @property
    def pgid(self) -> int: ...

    @property
    def cpu_percent(self) -> float | None:
        """
        CPU time of the group per wall second since the previous sample, in percent of one CPU; None on the first.
        """

    @property
    def rss_bytes(self) -> int: ...

    @property
    def pss_bytes(self) -> int | None:
        """None when no smaps_rollup could be read."""

    @property
    def private_bytes(self) -> int | None: ...

    @property
    def disk_read_bytes(self) -> int | None:
        """None when no /proc/<pid>/io could be read."""

    @property
    def disk_write_bytes(self) -> int | None: ...

    @property
    def num_procs(self) -> int: ...

    @property
    def net_rx_bytes(self) -> int | None:
        """
        Host-wide bytes received (not on lo) since the previous sample; None on the first.
        """

    @property
    def net_tx_bytes(self) -> int | None: ...

    @property
    def problems(self) -> list[str]:
        """Malformed /proc files met for the first time, one per kind."""

    def __repr__(self) -> str: ...

class _ProcessGroupMonitor:
    """Samples a process group's resources from /proc (proc_usage.h)."""

    def __init__(self, pgid: int = 0, proc_root: str = '/proc') -> None: ...

    @property
    def pgid(self) -> int: ...

    def sample(self) -> ProcessGroupResourceUsage:
        """Reads every process of the group now (without the GIL)."""

class LatencyHistogram:
    """Durations of calls, in log-linear buckets (values within 12.5%)."""

    @property
    def count(self) -> int: ...

    @property
    def total(self) -> float:
        """Sum of all durations, in seconds."""

    @property
    def mean(self) -> float: ...

    @property
    def max(self) -> float: ...

    def quantile(self, q: float) -> float:
        """The duration at quantile q in [0, 1], in seconds (0 when empty)."""

    def since(self, earlier: LatencyHistogram) -> LatencyHistogram:
        """
        What was recorded after `earlier`, an older snapshot of the same histogram.
        """

class QueueStats:
    """The queue in front of a stage."""

    @property
    def capacity(self) -> int: ...

    @property
    def depth(self) -> int: ...

    @property
    def max_depth(self) -> int: ...

    @property
    def items_put(self) -> int: ...

    @property
    def items_got(self) -> int: ...

    @property
    def time_empty(self) -> float: ...

    @property
    def time_full(self) -> float: ...

    @property
    def elapsed(self) -> float: ...

    @property
    def put_wait(self) -> float:
        """Total time the producer waited for room, in seconds."""

    @property
    def get_wait(self) -> float:
        """Total time the consumer waited for an item, in seconds."""

    @property
    def occupancy(self) -> float:
        """Mean depth / capacity over the elapsed time, in [0, 1]."""

class StageStats:
    """One stage's counters."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def concurrency(self) -> int: ...

    @property
    def items_in(self) -> int: ...

    @property
    def items_out(self) -> int: ...

    @property
    def items_skipped(self) -> int: ...

    @property
    def calls(self) -> int: ...

    @property
    def failures(self) -> int: ...

    @property
    def epochs(self) -> int: ...

    @property
    def op_time(self) -> LatencyHistogram: ...

    @property
    def wait_input(self) -> float: ...

    @property
    def wait_output(self) -> float: ...

    @property
    def gil_acquisitions(self) -> int:
        """Times the stage's Python calls took the GIL (0: native)."""

    @property
    def gil_wait(self) -> float:
        """Seconds its calls waited to take the GIL."""

    @property
    def gil_held(self) -> float:
        """CPU seconds its calls used while holding the GIL."""

    @property
    def finished(self) -> bool: ...

    @property
    def failed(self) -> bool: ...

    @property
    def input_queue(self) -> QueueStats: ...

class RegionStats:
    """The stages of a placement region, summed over its worker processes."""

    @property
    def name(self) -> str: ...

    @property
    def host_stage(self) -> int:
        """Index in PipelineStats.stages of the stage that feeds it."""

    @property
    def workers(self) -> int: ...

    @property
    def reporting(self) -> int:
        """Workers whose counters are included."""

    @property
    def stages(self) -> list[StageStats]: ...

def encode_stage_stats(stages: Sequence[StageStats]) -> bytes:
    """
    A compact record of `stages` for another process of this machine (Pipeline.report_region there).
    """

class Bottleneck:
    """The stage that limits throughput and why (PipelineStats.bottleneck())."""

    @property
    def kind(self) -> str:
        """'consumer', 'gil', 'stage', 'threads' or 'none'."""

    @property
    def stage(self) -> int:
        """Index in PipelineStats.stages, or -1."""

    @property
    def stage_name(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def advice(self) -> str: ...

    def __repr__(self) -> str: ...

class AutotuneDecision:
    """One change autotune made (PipelineStats.autotune)."""

    @property
    def at(self) -> float:
        """Seconds since the pipeline started."""

    @property
    def stage(self) -> int:
        """Index in PipelineStats.stages; -1: the pool's threads."""

    @property
    def target(self) -> str:
        """The stage's name, or 'threads'."""

    @property
    def before(self) -> int:
        """Concurrency (or active threads) before."""

    @property
    def after(self) -> int:
        """... and after."""

    @property
    def reason(self) -> str: ...

    def __repr__(self) -> str: ...

class AutotuneStats:
    """What autotune did (PipelineStats.autotune)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def cpu_budget(self) -> float:
        """CPUs the pool may use (the share times the machine's CPUs)."""

    @property
    def cpu_used(self) -> float:
        """CPUs the pool used in the controller's last interval."""

    @property
    def decisions(self) -> list[AutotuneDecision]:
        """The latest changes (at most 256), oldest first."""

    @property
    def decisions_total(self) -> int:
        """Changes made, including those no longer listed."""

class PipelineStats:
    """A snapshot of every stage's counters (totals since start)."""

    @property
    def name(self) -> str: ...

    @property
    def num_threads(self) -> int: ...

    @property
    def elapsed(self) -> float: ...

    @property
    def stages(self) -> list[StageStats]: ...

    @property
    def items_delivered(self) -> int: ...

    @property
    def regions(self) -> list[RegionStats]:
        """RegionStats of each placement region, after its host stage."""

    @property
    def autotune(self) -> AutotuneStats:
        """
        AutotuneStats: the changes autotune made (enabled is False when it is off).
        """

    def to_json(self) -> str:
        """
        One JSON object on one line, with every field (durations in seconds, keys ending in _s).
        """

    def format_table(self) -> str:
        """A human-readable table, one row per stage, and the bottleneck."""

    @staticmethod
    def from_json(record: str) -> PipelineStats:
        """
        Reads one object of to_json() back (a line of a JSON Lines export). Raises FormatError naming a bad field.
        """

    def bottleneck(self) -> Bottleneck:
        """
        The stage that limits throughput, the kind of limit, the figures behind it and what to change (docs/stats.md).
        """

    def __repr__(self) -> str: ...

class _Completion:
    """Finishes one asynchronous call of a pipeline stage."""

    def emit(self, result: object | None) -> None:
        """Delivers the call's result (None skips the item)."""

    def fail(self, exception: object) -> None:
        """Reports the call as failed with `exception`."""

    @property
    def pending(self) -> bool:
        """True until emit() or fail() is called."""

    @property
    def stop_requested(self) -> bool:
        """True once the pipeline is stopping; long work may give up."""

class FailureBudget:
    """How many failed calls a stage (or a pipeline) tolerates."""

    @staticmethod
    def unlimited() -> FailureBudget: ...

    @staticmethod
    def max_count(n: int) -> FailureBudget:
        """Fails once more than `n` calls failed."""

    @staticmethod
    def max_rate(numerator: int, denominator: int, probation_calls: int = 100) -> FailureBudget:
        """
        Fails once more than numerator/denominator of the calls failed, after `probation_calls` calls.
        """

    def exceeded(self, failures: int, calls: int) -> bool: ...

    def __repr__(self) -> str: ...

class _EpochIterator:
    def __iter__(self) -> object: ...

    def __next__(self) -> object: ...

class _NativePipeline:
    def start(self) -> None: ...

    @property
    def started(self) -> bool: ...

    def get(self, timeout: float | None) -> object: ...

    def epoch(self, timeout: float | None) -> _EpochIterator: ...

    def stop(self, timeout: float | None) -> bool: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def consumer_waiting(self) -> bool: ...

    def stats(self) -> PipelineStats: ...

    def trace_json(self) -> str: ...

    def report_region(self, region: str, host_stage: int, worker: int, workers: int, record: bytes) -> None: ...

    def take_failure(self) -> object: ...

def _set_log_handler(handler: object | None) -> None:
    """Routes engine log messages to handler(level, message); None: stderr."""

def _set_log_level(level: int) -> None: ...

def _set_leak_warnings(on: bool) -> None:
    """
    nanobind's report of objects alive at exit: off once a pipeline is left running at exit (what it holds is left on purpose).
    """

def _drain_released() -> None:
    """Releases Python references dropped by native threads."""

def _live_pool_threads() -> int:
    """Worker threads of all pipelines alive in the process."""

def _threads_waiting_for_gil() -> int:
    """Engine threads waiting for the GIL now."""

def _begin_exit(timeout: float = 2.0) -> None:
    """
    Run by the last atexit function: engine threads stop taking the GIL (see py_ref.h).
    """

class NativeOp:
    """
    A pipeline op implemented in C++. Pass it to PipelineBuilder.pipe(): it
    runs without the GIL and passes native items on without converting
    them to Python objects.
    """

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def input_type(self) -> str | None:
        """Name of the native type the op takes; None: any item."""

    @property
    def output_type(self) -> str | None:
        """Name of the native type the op produces; None: what it was given."""

    def __repr__(self) -> str: ...

class NativeSource:
    """A pipeline source implemented in C++; pass it to add_source()."""

    @property
    def name(self) -> str: ...

    def __repr__(self) -> str: ...

class _PipelineSpec:
    def __init__(self) -> None: ...

    def set_source(self, source: object, name: str, continuous: bool) -> None: ...

    def set_merge(self, inputs: Sequence[_PipelineSpec], name: str) -> None: ...

    def add_pipe(self, kind: str, op: object, name: str, concurrency: int, input_order: bool, budget: FailureBudget | None) -> None: ...

    def add_aggregate(self, op: object, drop_last: bool, name: str, budget: FailureBudget | None) -> None: ...

    def add_disaggregate(self, arg: str, /) -> None: ...

    def set_sink(self, arg: int, /) -> None: ...

    def build(self, num_threads: int, max_failures: FailureBudget | None, report_interval: float, stats_callback: object | None, failure_log_burst: int, failure_log_interval: float, name: str, trace_every: int, trace_capacity: int, autotune: tuple[float, int, int, int, float] | None) -> object: ...

class _ArenaLease:
    """
    An adopted segment; free again once this and every view of it are gone.
    """

class _ArenaUnit:
    """One segment being written."""

    @property
    def segment(self) -> int: ...

    @property
    def used(self) -> int: ...

    @property
    def active(self) -> bool: ...

    def write(self, data: object) -> int:
        """
        Copies a bytes-like object to the next 64-byte-aligned offset; returns the offset.
        """

    def commit(self) -> int:
        """Publishes the unit; returns bytes used."""

    def abort(self) -> None:
        """Frees the segment unpublished."""

class _SharedArena:
    """Shared-memory segments in one anonymous file."""

    @staticmethod
    def create(segment_size: int, count: int) -> _SharedArena: ...

    @staticmethod
    def attach(fd: int) -> _SharedArena:
        """Maps the arena of `fd` (duplicated; the caller keeps fd)."""

    @property
    def fd(self) -> int: ...

    @property
    def segment_size(self) -> int: ...

    @property
    def count(self) -> int: ...

    @property
    def is_shutdown(self) -> bool: ...

    def free_segments(self) -> int: ...

    def begin_unit(self, timeout: float) -> _ArenaUnit:
        """Takes a free segment, waiting up to `timeout` seconds."""

    def adopt(self, segment: int) -> _ArenaLease: ...

    def view(self, lease: _ArenaLease, offset: int, dtype: str, shape: Sequence[int]) -> io.Buffer: ...

    def shutdown(self) -> None: ...

class _RingUnit:
    """One unit being written."""

    @property
    def start(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def active(self) -> bool: ...

    def write(self, data: object, timeout: float) -> int:
        """
        Copies a bytes-like object after the unit's last bytes, waiting up to `timeout` seconds for room; returns its position.
        """

    def commit(self) -> tuple[int, int]:
        """Publishes the unit; returns its span (start, end)."""

    def abort(self) -> None: ...

class _SharedRing:
    """A shared-memory byte ring in one anonymous file."""

    @staticmethod
    def create(capacity: int) -> _SharedRing: ...

    @staticmethod
    def attach(fd: int) -> _SharedRing:
        """Maps the ring of `fd` (duplicated; the caller keeps fd)."""

    @property
    def fd(self) -> int: ...

    @property
    def capacity(self) -> int: ...

    @property
    def is_shutdown(self) -> bool: ...

    def used(self) -> int: ...

    def begin_unit(self) -> _RingUnit: ...

    def read(self, offset: int, dtype: str, shape: Sequence[int]) -> io.Buffer:
        """A private copy of the elements at `offset`."""

    def read_bytes(self, offset: int, n: int) -> bytes: ...

    def release(self, end: int) -> None: ...

    def shutdown(self) -> None: ...

_extension_api: object

__version__: str
