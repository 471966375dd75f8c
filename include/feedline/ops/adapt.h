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

#include "feedline/ops/samples.h"
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

// How the values of a foreign runtime (Python objects, in the bindings)
// reach native ops: they travel as items of `type` and are converted to what
// an op takes just before it runs.
struct Foreign {
  const std::type_info* type = nullptr;
  // Whether a foreign value may convert to an item of the given type.
  std::function<bool(const std::type_info&)> converts_to;
  // Runs its argument inside the runtime (holding the GIL): once per call,
  // or once for all the foreign elements of a batch.
  std::function<void(const std::function<void()>&)> enter;
  // Converts `item` (a foreign value, or a Sample whose field is not the
  // op's) to `wanted`; for an op on a `field` (non-null), a foreign record
  // to a Sample. Runs inside enter(); what it throws fails the conversion.
  std::function<void(Item& item, const std::type_info& wanted,
                     const Field* field)>
      convert;
};

// Wraps `op` so that it also takes foreign values, converted to the type it
// takes (its field: op_field()); its accepts() also takes `foreign.type`
// when that converts. For a batch op, `element` (non-null) is the type of
// its ItemBatch's elements: the foreign ones are converted under one
// enter(), and those that do not convert are left out as by convert_each()
// (naming `name`). Returns `op` itself when it declares neither type; an op
// that takes `foreign.type` or any item converts nothing.
OpPtr take_foreign(OpPtr op, const Foreign& foreign,
                   const std::type_info* element, const std::string& name);

}  // namespace feedline::ops
