// SPDX-License-Identifier: Apache-2.0

#include "feedline/ops/samples.h"

#include <memory>
#include <string>
#include <typeinfo>
#include <utility>

#include "feedline/base/error.h"

namespace feedline::ops {
namespace {

// What every on_field() wrapper shares: the wrapped op's declarations and
// the unwrapping of a sample's payload. `Base` is MapOp or GeneratorOp.
template <typename Base>
class FieldOp : public Base {
 public:
  FieldOp(OpPtr op, Field field)
      : op_(std::move(op)),
        inner_(static_cast<Base&>(*op_)),
        field_(std::move(field)) {}
  bool stateful() const override { return op_->stateful(); }
  Item flush(FlushReason reason) override { return op_->flush(reason); }
  const std::type_info* input_type() const override {
    return op_->input_type();
  }
  const std::type_info* output_type() const override {
    return op_->output_type();
  }
  bool accepts(const std::type_info& type) const override {
    return type == typeid(Sample) || op_->accepts(type);
  }
  const Field& field() const { return field_; }

 protected:
  // The sample `input` holds, checked against this op's field; null when
  // `input` is not a sample.
  Sample* sample_of(Item& input) const {
    Sample* s = input.get_if<Sample>();
    if (s != nullptr && s->field != field_) {
      throw InvalidArgument("a sample whose payload is field " +
                            field_name(s->field) + " reached an op on field " +
                            field_name(field_));
    }
    return s;
  }
  Base& inner() { return inner_; }

 private:
  OpPtr op_;
  Base& inner_;
  const Field field_;
};

class FieldMapOp final : public FieldOp<MapOp> {
 public:
  using FieldOp::FieldOp;
  Item call(Item input) override {
    Sample* s = sample_of(input);
    if (s == nullptr) return inner().call(std::move(input));
    Item result = inner().call(std::move(s->payload));
    if (!result.has_value()) return Item();  // skipped
    s->payload = std::move(result);
    return input;
  }
};

// Each output of the wrapped generator as a sample of `record`.
class SampleGenerator final : public ItemGenerator {
 public:
  SampleGenerator(std::unique_ptr<ItemGenerator> inner, Field field,
                  Record record)
      : inner_(std::move(inner)),
        field_(std::move(field)),
        record_(std::move(record)) {}
  bool next(Item* out) override {
    Item result;
    if (!inner_->next(&result)) return false;
    if (result.has_value())
      *out = Item(Sample{std::move(result), field_, record_});
    return true;
  }

 private:
  std::unique_ptr<ItemGenerator> inner_;
  const Field field_;
  const Record record_;
};

class FieldGeneratorOp final : public FieldOp<GeneratorOp> {
 public:
  using FieldOp::FieldOp;
  std::unique_ptr<ItemGenerator> start(Item input) override {
    Sample* s = sample_of(input);
    if (s == nullptr) return inner().start(std::move(input));
    return std::make_unique<SampleGenerator>(
        inner().start(std::move(s->payload)), s->field, std::move(s->record));
  }
};

}  // namespace

std::string field_name(const Field& field) {
  if (const auto* index = std::get_if<int64_t>(&field))
    return std::to_string(*index);
  return "'" + std::get<std::string>(field) + "'";
}

OpPtr on_field(OpPtr op, Field field) {
  if (op == nullptr) throw InvalidArgument("ops::on_field: null op");
  switch (op->kind()) {
    case OpKind::kMap:
      return std::make_shared<FieldMapOp>(std::move(op), std::move(field));
    case OpKind::kGenerator:
      return std::make_shared<FieldGeneratorOp>(std::move(op),
                                                std::move(field));
    case OpKind::kAsync:
      break;
  }
  throw InvalidArgument("ops::on_field: an async op does not take samples");
}

const Field* op_field(const Op& op) {
  if (const auto* map = dynamic_cast<const FieldOp<MapOp>*>(&op))
    return &map->field();
  if (const auto* gen = dynamic_cast<const FieldOp<GeneratorOp>*>(&op))
    return &gen->field();
  return nullptr;
}

}  // namespace feedline::ops
