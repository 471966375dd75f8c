// SPDX-License-Identifier: Apache-2.0
//
// Wrapping an op of any kind so that each input is prepared (converted,
// checked) before the op sees it, and the wrapper declares its own types.
// The Python bindings use it to let native ops take Python values.
//
//   OpPtr op = ops::adapt(ops::decode_image(options),
//                         {.input = &typeid(ops::EncodedFile),
//                          .prepare = [](Item& in) { ... }});

#pragma once

#include <functional>
#include <string>
#include <typeinfo>

#include "feedline/pipeline/item.h"
#include "feedline/pipeline/op.h"

namespace feedline::ops {

struct Adaptation {
  // What the wrapper declares as input_type() and output_type(), as given
  // (null: any item, not known).
  const std::type_info* input = nullptr;
  const std::type_info* output = nullptr;
  // The wrapper's accepts(); null: Op's rule for `input`.
  std::function<bool(const std::type_info&)> accepts;
  // Runs on each input before the wrapped op is called or started; what it
  // throws fails that call. Null: inputs pass unchanged.
  std::function<void(Item&)> prepare;
};

// Converts each element of `batch` in place with `convert`. An element for
// which it throws is left out of the batch and reported with
// report_element_failure() (a failure of the stage running the call; outside
// a stage, a warning), naming `name`, its index and the reason.
// Throws: InvalidArgument when no element of a non-empty batch converts.
void convert_each(ItemBatch& batch, const std::function<void(Item&)>& convert,
                  const std::string& name);

// The wrapper of `op` (a map, generator or async op) described by `how`.
// stateful() and flush() are the wrapped op's.
// Throws: InvalidArgument if `op` is null.
OpPtr adapt(OpPtr op, Adaptation how);

}  // namespace feedline::ops
