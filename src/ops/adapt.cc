// SPDX-License-Identifier: Apache-2.0

#include "feedline/ops/adapt.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/base/log.h"

namespace feedline::ops {
namespace {

// The declarations and the input hook of every adapter kind; `Base` is the
// op interface (MapOp, GeneratorOp, AsyncOp) the adapter implements.
template <typename Base>
class Adapter : public Base {
 public:
  Adapter(OpPtr op, Adaptation how)
      : op_(std::move(op)),
        inner_(static_cast<Base&>(*op_)),
        how_(std::move(how)) {}
  bool stateful() const override { return op_->stateful(); }
  Item flush(FlushReason reason) override { return op_->flush(reason); }
  const std::type_info* input_type() const override { return how_.input; }
  const std::type_info* output_type() const override { return how_.output; }
  bool accepts(const std::type_info& type) const override {
    if (how_.accepts) return how_.accepts(type);
    return how_.input == nullptr || *how_.input == type;
  }

 protected:
  Base& prepared(Item& input) {
    if (how_.prepare) how_.prepare(input);
    return inner_;
  }

 private:
  OpPtr op_;
  Base& inner_;
  const Adaptation how_;
};

class MapAdapter final : public Adapter<MapOp> {
 public:
  using Adapter::Adapter;
  Item call(Item input) override {
    return prepared(input).call(std::move(input));
  }
};

class GeneratorAdapter final : public Adapter<GeneratorOp> {
 public:
  using Adapter::Adapter;
  std::unique_ptr<ItemGenerator> start(Item input) override {
    return prepared(input).start(std::move(input));
  }
};

class AsyncAdapter final : public Adapter<AsyncOp> {
 public:
  using Adapter::Adapter;
  void start(Item input, Completion&& done) override {
    prepared(input).start(std::move(input), std::move(done));
  }
};

}  // namespace

void convert_each(ItemBatch& batch, const std::function<void(Item&)>& convert,
                  const std::string& name) {
  std::vector<std::string> errors;
  ItemBatch kept;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      convert(batch[i]);
      kept.push_back(std::move(batch[i]));
    } catch (const std::exception& e) {
      errors.push_back("element " + std::to_string(i) + ": " + e.what());
    }
  }
  // Each element left out is a failure of the stage; when none is left the
  // call fails, which counts the first one.
  const bool none_kept = kept.empty() && !errors.empty();
  for (std::size_t i = none_kept ? 1 : 0; i < errors.size(); ++i) {
    std::string what = std::string(name).append(": ").append(errors[i]);
    if (!report_element_failure(std::make_exception_ptr(InvalidArgument(what))))
      log(LogLevel::kWarning, what);
  }
  if (none_kept) {
    std::string what = name;
    what += ": no element of the batch of " + std::to_string(batch.size());
    what += " converts; first: " + errors.front();
    throw InvalidArgument(what);
  }
  batch = std::move(kept);
}

OpPtr take_foreign(OpPtr op, const Foreign& foreign,
                   const std::type_info* element, const std::string& name) {
  const std::type_info* input = op->input_type();
  const std::type_info* output = op->output_type();
  if (input == nullptr && output == nullptr) return op;
  if (input != nullptr && *input == *foreign.type) input = nullptr;  // any
  if (input == nullptr) return adapt(std::move(op), {nullptr, output});
  const Op* raw = op.get();
  const Field* field = op_field(*op);  // owned by `op`, as the wrapper is
  auto accepts = [raw, input, foreign](const std::type_info& t) {
    return raw->accepts(t) ||
           (t == *foreign.type && foreign.converts_to(*input));
  };
  auto prepare = [input, element, field, foreign, name](Item& item) {
    const std::type_info& type = *foreign.type;
    const Sample* s = field != nullptr ? item.get_if<Sample>() : nullptr;
    if (item.type() == type || (s != nullptr && s->field != *field)) {
      foreign.enter([&] { foreign.convert(item, *input, field); });
      return;
    }
    ItemBatch* batch = element != nullptr ? item.get_if<ItemBatch>() : nullptr;
    // Python elements, and samples of another field than the op's (a
    // record whose field `a` an earlier op read, given to an op on field
    // `b`): both are taken from the record again, as a single item is.
    auto needs_converting = [&type, field](Item& e) {
      if (e.type() == type) return true;
      const Sample* es = field != nullptr ? e.get_if<Sample>() : nullptr;
      return es != nullptr && es->field != *field;
    };
    if (batch == nullptr ||
        std::none_of(batch->begin(), batch->end(), needs_converting))
      return;
    foreign.enter([&] {
      convert_each(
          *batch,
          [&](Item& e) {
            if (needs_converting(e)) foreign.convert(e, *element, field);
          },
          name);
    });
  };
  return adapt(std::move(op), {input, output, accepts, prepare});
}

OpPtr adapt(OpPtr op, Adaptation how) {
  if (op == nullptr) throw InvalidArgument("ops::adapt: null op");
  switch (op->kind()) {
    case OpKind::kMap:
      return std::make_shared<MapAdapter>(std::move(op), std::move(how));
    case OpKind::kGenerator:
      return std::make_shared<GeneratorAdapter>(std::move(op), std::move(how));
    case OpKind::kAsync:
      return std::make_shared<AsyncAdapter>(std::move(op), std::move(how));
  }
  throw Internal("ops::adapt: unknown op kind");
}

}  // namespace feedline::ops
