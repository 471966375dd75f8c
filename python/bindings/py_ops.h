// SPDX-License-Identifier: Apache-2.0
//
// Engine ops, sources and callbacks that call Python, and the adapter that
// lets a native op take Python values. Python ops declare PyObj as their
// output type.
//
// Each Python adapter takes the GIL (GilScope) only around the Python call and
// the conversions next to it; the engine calls them on pool threads with no
// lock held. A Python exception becomes a PythonError, so the engine counts it
// as a failed call and the consumer can re-raise the original object.

#pragma once

#include <nanobind/nanobind.h>

#include "bindings.h"
#include "feedline/base/log.h"
#include "feedline/pipeline/op.h"
#include "feedline/pipeline/spec.h"
#include "feedline/pipeline/stage_options.h"

namespace feedline::bindings {

// fn(item) -> result; None skips the item.
OpPtr make_python_map_op(nanobind::object fn);

// fn(item) -> iterable of results (a generator function); each None skips.
OpPtr make_python_generator_op(nanobind::object fn);

// submit(item, completion) starts the work and returns; the work later calls
// completion.emit(result) or completion.fail(exception) from any thread.
// This is how coroutine functions and ops on a user executor run.
OpPtr make_python_async_op(nanobind::object submit);

// An aggregator object with accumulate(item) -> batch | None and
// flush() -> batch | None. flush() runs at each epoch end and at the end of
// the stream; its result is dropped when `drop_last`.
OpPtr make_python_aggregator_op(nanobind::object aggregator, bool drop_last);

// Splits a batch into its items: a native ItemBatch without the GIL, or any
// Python iterable.
OpPtr make_disaggregate_any_op();

// Wraps native `op` so that the Python values reaching it (for a batch op,
// in its batches) are converted to what it takes, and it accepts them at
// build time where a converter exists: ops::take_foreign() with the GIL and
// value_from_python().
OpPtr adapt_native_op(const NativeOp& op);

// A source that iterates `iterable` (iter() once per pass) under the GIL.
SourceFactory make_python_source(nanobind::object iterable);

// A stats hook that calls `callback(stats)` (a PipelineStats) on the engine's
// thread. A failing callback is logged as a warning, never raised.
StatsHook make_python_stats_hook(nanobind::object callback);

// A log sink that calls `handler(level: int, message: str)`; it drops
// messages once the interpreter shuts down and never fails the caller.
LogSink make_python_log_sink(nanobind::object handler);

// Binds the Completion handed to async submit functions.
void bind_completion(nanobind::module_& m);

}  // namespace feedline::bindings
