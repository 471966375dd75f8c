// SPDX-License-Identifier: Apache-2.0
//
// ops::adapt(): every op kind sees prepared inputs, and the wrapper declares
// the types it was given.

#include "feedline/ops/adapt.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/detail/typed_ops.h"
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

}  // namespace
}  // namespace feedline::ops
