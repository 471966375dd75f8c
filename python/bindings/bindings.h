// SPDX-License-Identifier: Apache-2.0
//
// Registration functions of the extension module feedline._feedline_ext.
//
// Each binding area has one bind_<area>() in bind_<area>.cc; module.cc calls
// them in dependency order (a class must be bound before a function that
// returns it).

#pragma once

#include <nanobind/nanobind.h>

#include "feedline/pipeline/pipeline.h"

namespace feedline::bindings {

// Adds feedline.Error and its subclasses and the translation of
// PipelineFailure to feedline.PipelineFailure (an ExceptionGroup).
void bind_errors(nanobind::module_& m);

// Adds the capsule `_extension_api` through which other extension modules
// hand native ops and sources to feedline (extension_api.h).
void bind_extension_api(nanobind::module_& m);

// Adds the statistics snapshot classes (PipelineStats, StageStats, ...).
void bind_stats(nanobind::module_& m);

// Adds NativeOp and NativeSource (native_op.h).
void bind_native_op(nanobind::module_& m);

// Adds the consumer's end of a pipeline (_NativePipeline), FailureBudget and
// the log hooks.
void bind_pipeline(nanobind::module_& m);

// Returns `pipeline` as a Python _NativePipeline.
nanobind::object wrap_pipeline(Pipeline pipeline);

// Adds _PipelineSpec, which builds pipelines from feedline.pipeline's stages.
void bind_spec(nanobind::module_& m);

// Adds the submodule `io`: Buffer, image decoding and the native image ops.
void bind_io(nanobind::module_& m);

}  // namespace feedline::bindings
