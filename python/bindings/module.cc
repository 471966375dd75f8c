// SPDX-License-Identifier: Apache-2.0
//
// Entry point of the extension module feedline._feedline_ext. The module is
// private: users import `feedline`, which re-exports what is public.

#include <nanobind/nanobind.h>

#include "bindings.h"
#include "convert.h"

#ifndef FEEDLINE_VERSION
#error "FEEDLINE_VERSION is set by python/bindings/CMakeLists.txt"
#endif

NB_MODULE(_feedline_ext, m) {
  m.doc() = "Native core of feedline (private; import feedline instead).";
  m.attr("__version__") = FEEDLINE_VERSION;

  feedline::bindings::register_basic_converters();
  feedline::bindings::bind_errors(m);
  feedline::bindings::bind_stats(m);
  feedline::bindings::bind_pipeline(m);
  feedline::bindings::bind_spec(m);
  feedline::bindings::bind_io(m);
  feedline::bindings::bind_extension_api(m);
}
