// SPDX-License-Identifier: Apache-2.0
//
// Registration functions of the extension module feedline._feedline_ext.
//
// Each binding area has one bind_<area>() in bind_<area>.cc; module.cc calls
// them in dependency order (a class must be bound before a function that
// returns it).

#pragma once

#include <nanobind/nanobind.h>

namespace feedline::bindings {

// Adds feedline.Error and its subclasses, and the test hook _raise_for_test.
void bind_errors(nanobind::module_& m);

}  // namespace feedline::bindings
