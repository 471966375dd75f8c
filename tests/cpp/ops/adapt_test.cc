// SPDX-License-Identifier: Apache-2.0
//
// ops::adapt(): every op kind sees prepared inputs, and the wrapper declares
// the types it was given.

#include "feedline/ops/adapt.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/detail/typed_ops.h"
#include "feedline/ops/samples.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/spec.h"
#include "ops/ops_testing.h"

namespace feedline::ops {
namespace {

using testing::call;
using testing::pull;

// Parses a decimal string input into an int64_t.
void parse_int(Item& in) {
  in = Item(static_cast<int64_t>(std::stoll(in.take_as<std::string>())));
}

TEST(AdaptTest, MapOpSeesPreparedInputsAndDeclaresGivenTypes) {
  OpPtr op = adapt(make_map_op<int64_t>([](int64_t x) { return x * 2; }),
                   {.input = &typeid(std::string),
                    .output = &typeid(int64_t),
                    .prepare = &parse_int});
  EXPECT_EQ(op->kind(), OpKind::kMap);
  EXPECT_EQ(*op->input_type(), typeid(std::string));
  EXPECT_EQ(*op->output_type(), typeid(int64_t));
  EXPECT_TRUE(op->accepts(typeid(std::string)));
  EXPECT_FALSE(op->accepts(typeid(int64_t)));
  EXPECT_EQ(call(op, Item(std::string("21"))).as<int64_t>(), 42);
}

TEST(AdaptTest, TypesAndAcceptsAreTakenAsGiven) {
  OpPtr inner = make_map_op<int64_t>([](int64_t x) { return x; });
  OpPtr any = adapt(inner, {});
  EXPECT_EQ(any->input_type(), nullptr);
  EXPECT_EQ(any->output_type(), nullptr);
  EXPECT_TRUE(any->accepts(typeid(double)));
  EXPECT_EQ(call(any, Item(int64_t{7})).as<int64_t>(), 7);  // unchanged

  OpPtr wide =
      adapt(inner,
            {.input = &typeid(int64_t), .accepts = [](const std::type_info& t) {
               return t == typeid(int64_t) || t == typeid(std::string);
             }});
  EXPECT_TRUE(wide->accepts(typeid(std::string)));
  EXPECT_FALSE(wide->accepts(typeid(double)));
}

TEST(AdaptTest, WhatPrepareThrowsFailsTheCall) {
  OpPtr op = adapt(make_map_op<int64_t>([](int64_t x) { return x; }),
                   {.prepare = [](Item&) { throw InvalidArgument("bad"); }});
  EXPECT_THROW(call(op, Item(int64_t{1})), InvalidArgument);
  EXPECT_THROW(adapt(nullptr, {}), InvalidArgument);
}

TEST(AdaptTest, GeneratorOpSeesPreparedInputs) {
  // n -> a batch of n items, which the disaggregate op splits.
  OpPtr op = adapt(make_disaggregate_op(), {.prepare = [](Item& in) {
                     ItemBatch batch(in.as<int64_t>());
                     in = Item(std::move(batch));
                   }});
  EXPECT_EQ(op->kind(), OpKind::kGenerator);
  EXPECT_EQ(pull(op, Item(int64_t{3})).size(), 3u);
}

TEST(AdaptTest, StatefulOpIsFlushedThroughTheAdapter) {
  OpPtr op = adapt(make_aggregate_op(2, /*drop_last=*/false), {});
  EXPECT_TRUE(op->stateful());
  EXPECT_FALSE(call(op, Item(int64_t{1})).has_value());
  Item rest = op->flush(FlushReason::kEndOfStream);
  ASSERT_TRUE(rest.holds<ItemBatch>());
  EXPECT_EQ(rest.as<ItemBatch>().size(), 1u);
}

TEST(AdaptTest, AsyncOpSeesPreparedInputsInAPipeline) {
  auto plus_one = [](int64_t x, Completion&& done) { done.emit(Item(x + 1)); };
  OpPtr async =
      std::make_shared<detail::TypedAsyncOp<int64_t, decltype(plus_one)>>(
          plus_one);
  OpPtr op = adapt(
      async, {.input = &typeid(int64_t),
              .output = &typeid(int64_t),
              .prepare = [](Item& in) { in = Item(in.as<int64_t>() * 10); }});
  EXPECT_EQ(op->kind(), OpKind::kAsync);
  auto pipeline = PipelineBuilder()
                      .add_source(std::vector<int64_t>{1, 2})
                      .pipe<int64_t>(op)
                      .add_sink()
                      .build(2);
  std::vector<int64_t> got;
  for (int64_t v : pipeline) got.push_back(v);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{11, 21}));
}

TEST(ConvertEachTest, LeavesOutWhatFailsAndFailsWhenNothingConverts) {
  ItemBatch batch;
  for (const char* text : {"1", "x", "3"})
    batch.emplace_back(std::string(text));
  convert_each(batch, &parse_int, "parse");
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].as<int64_t>(), 1);
  EXPECT_EQ(batch[1].as<int64_t>(), 3);

  ItemBatch bad;
  bad.emplace_back(std::string("x"));
  try {
    convert_each(bad, &parse_int, "parse");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("parse: no element of the batch of 1"),
              std::string::npos);
  }
  ItemBatch empty;
  convert_each(empty, &parse_int, "parse");
  EXPECT_TRUE(empty.empty());
}

// Values of a "foreign runtime" for take_foreign(): decimal text (here a
// struct, so that it is no type an op takes), converted to int64_t. It
// records each entry into the runtime and each field it was asked for.
struct Text {
  std::string digits;
};

struct Runtime {
  int entered = 0;
  std::vector<std::string> fields;  // field_name() per convert, "-" for none
  Foreign foreign() {
    return {
        &typeid(Text),
        [](const std::type_info& t) { return t == typeid(int64_t); },
        [this](const std::function<void()>& f) {
          ++entered;
          f();
        },
        [this](Item& item, const std::type_info& wanted, const Field* field) {
          EXPECT_EQ(wanted, typeid(int64_t));
          fields.push_back(field ? field_name(*field) : "-");
          if (auto* s = item.get_if<Sample>()) {  // re-split at `field`
            item = Item(Sample{Item(int64_t{100}), *field, s->record});
            return;
          }
          parse_int_text(item);
        }};
  }
  static void parse_int_text(Item& item) {
    item = Item(static_cast<int64_t>(std::stoll(item.as<Text>().digits)));
  }
};

TEST(TakeForeignTest, ConvertsForeignValuesAndWidensAccepts) {
  Runtime rt;
  OpPtr op = take_foreign(make_map_op<int64_t>([](int64_t x) { return x * 2; }),
                          rt.foreign(), nullptr, "double");
  EXPECT_EQ(*op->input_type(), typeid(int64_t));
  EXPECT_TRUE(op->accepts(typeid(int64_t)));
  EXPECT_TRUE(op->accepts(typeid(Text)));
  EXPECT_FALSE(op->accepts(typeid(std::string)));
  EXPECT_EQ(call(op, Item(Text{"21"})).as<int64_t>(), 42);
  EXPECT_EQ(call(op, Item(int64_t{7})).as<int64_t>(), 14);  // native: as is
  EXPECT_EQ(rt.entered, 1);
  EXPECT_EQ(rt.fields, (std::vector<std::string>{"-"}));
  EXPECT_THROW(call(op, Item(Text{"x"})), std::invalid_argument);

  // An op that takes any item, or the foreign type, converts nothing.
  OpPtr any =
      take_foreign(adapt(make_map_op<int64_t>([](int64_t x) { return x; }),
                         {.output = &typeid(int64_t)}),
                   rt.foreign(), nullptr, "any");
  EXPECT_EQ(any->input_type(), nullptr);
  EXPECT_TRUE(any->accepts(typeid(Text)));
}

TEST(TakeForeignTest, ConvertsTheForeignElementsOfABatchInOneEntry) {
  Runtime rt;
  OpPtr sum = make_map_op<ItemBatch>([](ItemBatch b) {
    int64_t total = 0;
    for (Item& i : b) total += i.as<int64_t>();
    return total;
  });
  OpPtr op = take_foreign(sum, rt.foreign(), &typeid(int64_t), "sum");
  ItemBatch batch;
  batch.emplace_back(Text{"1"});
  batch.emplace_back(int64_t{2});
  batch.emplace_back(Text{"not a number"});  // left out, logged
  batch.emplace_back(Text{"4"});
  EXPECT_EQ(call(op, Item(std::move(batch))).as<int64_t>(), 7);
  EXPECT_EQ(rt.entered, 1);
  ItemBatch native;
  native.emplace_back(int64_t{5});
  EXPECT_EQ(call(op, Item(std::move(native))).as<int64_t>(), 5);
  EXPECT_EQ(rt.entered, 1);  // nothing foreign: no entry
}

TEST(TakeForeignTest, SamplesOfAnotherFieldGoBackToTheRuntime) {
  Runtime rt;
  OpPtr op = take_foreign(
      on_field(make_map_op<int64_t>([](int64_t x) { return x + 1; }),
               Field{std::string("n")}),
      rt.foreign(), nullptr, "inc");
  EXPECT_TRUE(op->accepts(typeid(Sample)));
  auto record = std::make_shared<Item>(std::string("the record"));
  // A sample of this op's field runs as it is, without the runtime.
  Sample same =
      call(op, Item(Sample{Item(int64_t{1}), std::string("n"), record}))
          .take_as<Sample>();
  EXPECT_EQ(same.payload.as<int64_t>(), 2);
  EXPECT_EQ(rt.entered, 0);
  // One of another field is handed back to be split at "n".
  Sample other = call(op, Item(Sample{Item(int64_t{1}), int64_t{0}, record}))
                     .take_as<Sample>();
  EXPECT_EQ(other.payload.as<int64_t>(), 101);
  EXPECT_EQ(other.record, record);
  EXPECT_EQ(rt.entered, 1);
  EXPECT_EQ(rt.fields, (std::vector<std::string>{"'n'"}));
}

}  // namespace
}  // namespace feedline::ops
