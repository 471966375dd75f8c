// SPDX-License-Identifier: Apache-2.0
//
// build_pipeline() checks that each stage can take what the stage before it
// produces, where both types are declared.

#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/spec.h"
#include "testing/pipeline_testing.h"

namespace feedline {
namespace {

using testing::drain;

struct Pixels {
  int n = 0;
};
struct Text {
  std::string s;
};

// Display names, as a binding would register them.
const bool kNamesRegistered = [] {
  register_type_name(typeid(Pixels), "Pixels");
  register_type_name(typeid(Text), "Text");
  return true;
}();

class UntypedSource final : public ItemSource {
 public:
  explicit UntypedSource(int n) : left_(n) {}
  bool next(Item* out) override {
    if (left_ == 0) return false;
    *out = Item(--left_);
    return true;
  }

 private:
  int left_;
};

// A head over `n` ints whose type is `declared` (null: not declared).
PipelineSpec source_spec(const std::type_info* declared, int n = 3,
                         std::string name = "nums") {
  PipelineSpec spec;
  spec.source = [n] { return std::make_unique<UntypedSource>(n); };
  spec.source_type = declared;
  spec.source_options.name = std::move(name);
  return spec;
}

void add(PipelineSpec& spec, std::string name, OpPtr op) {
  StageSpec stage;
  stage.op = std::move(op);
  stage.options.name = std::move(name);
  spec.stages.push_back(std::move(stage));
}

OpPtr int_to_pixels() {
  return make_map_op<int>([](int x) { return Pixels{x}; });
}
OpPtr pixels_to_int() {
  return make_map_op<Pixels>([](Pixels p) { return p.n; });
}
OpPtr text_to_int() {
  return make_map_op<Text>([](Text t) { return static_cast<int>(t.s.size()); });
}

// An untyped op: takes any item, produces what it was given.
class PassOp final : public MapOp {
 public:
  Item call(Item input) override { return input; }
};

// Declares Pixels but also accepts ints (converting them), as an adapter
// between value representations would.
class WideningOp final : public MapOp {
 public:
  const std::type_info* input_type() const override { return &typeid(Pixels); }
  const std::type_info* output_type() const override { return &typeid(int); }
  bool accepts(const std::type_info& type) const override {
    return type == typeid(Pixels) || type == typeid(int);
  }
  Item call(Item input) override {
    if (input.holds<int>()) return input;
    return Item(input.as<Pixels>().n);
  }
};

std::string build_error(PipelineSpec spec) {
  spec.sink_capacity = 3;
  try {
    build_pipeline(std::move(spec), BuildOptions{.num_threads = 1});
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(FitTest, RegisteredNamesAreUsedByTypeName) {
  ASSERT_TRUE(kNamesRegistered);
  EXPECT_EQ(type_name(typeid(Pixels)), "Pixels");
  EXPECT_EQ(type_name(typeid(double)), "double");  // demangled
  Item item(Text{"x"});
  try {
    item.as<Pixels>();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "item type mismatch: expected Pixels, got Text");
  }
}

TEST(FitTest, FittingTypedChainBuildsAndRuns) {
  auto p = PipelineBuilder()
               .add_source(std::vector<int>{1, 2, 3})
               .pipe([](int x) { return Pixels{x}; })
               .pipe([](Pixels px) { return px.n * 10; })
               .add_sink()
               .build(1);
  EXPECT_EQ(testing::sorted(drain(p)), (std::vector<int>{10, 20, 30}));
}

TEST(FitTest, TypedBuilderDeclaresItsSourceType) {
  auto spec = PipelineBuilder().add_source(std::vector<int>{1}).spec();
  ASSERT_NE(spec.source_type, nullptr);
  EXPECT_EQ(*spec.source_type, typeid(int));
}

TEST(FitTest, StageThatCannotTakeTheSourceTypeFailsNamingBoth) {
  PipelineSpec spec = source_spec(&typeid(int));
  add(spec, "decode", pixels_to_int());
  EXPECT_EQ(build_error(std::move(spec)),
            "pipeline.stage[0]: stage 'decode' (takes Pixels) cannot follow "
            "stage 'nums' (produces int)");
}

TEST(FitTest, StageThatCannotTakeThePreviousStageFailsNamingBoth) {
  PipelineSpec spec = source_spec(&typeid(int));
  add(spec, "to_pixels", int_to_pixels());
  add(spec, "to_int", pixels_to_int());
  add(spec, "length", text_to_int());
  EXPECT_EQ(build_error(std::move(spec)),
            "pipeline.stage[2]: stage 'length' (takes Text) cannot follow "
            "stage 'to_int' (produces int)");
}

TEST(FitTest, FittingDeclaredChainBuilds) {
  PipelineSpec spec = source_spec(&typeid(int));
  add(spec, "to_pixels", int_to_pixels());
  add(spec, "to_int", pixels_to_int());
  spec.sink_capacity = 3;
  Pipeline p = build_pipeline(std::move(spec), BuildOptions{.num_threads = 1});
  EXPECT_EQ(testing::sorted(drain<int>(p)), (std::vector<int>{0, 1, 2}));
}

TEST(FitTest, UnknownTypesPass) {
  // An undeclared source: the first stage is not checked.
  PipelineSpec a = source_spec(nullptr);
  add(a, "decode", pixels_to_int());
  EXPECT_EQ(build_error(std::move(a)), "");
  // An untyped op takes anything, and what it produces is not known.
  PipelineSpec b = source_spec(&typeid(int));
  add(b, "pass", std::make_shared<PassOp>());
  add(b, "length", text_to_int());
  EXPECT_EQ(build_error(std::move(b)), "");
}

TEST(FitTest, AcceptsDecidesOverTheDeclaredInputType) {
  PipelineSpec spec = source_spec(&typeid(int));
  add(spec, "widen", std::make_shared<WideningOp>());
  add(spec, "to_pixels", int_to_pixels());
  spec.sink_capacity = 3;
  Pipeline p = build_pipeline(std::move(spec), BuildOptions{.num_threads = 1});
  EXPECT_EQ(drain<Pixels>(p).size(), 3u);

  PipelineSpec bad = source_spec(&typeid(Text), 3, "texts");
  add(bad, "widen", std::make_shared<WideningOp>());
  EXPECT_EQ(build_error(std::move(bad)),
            "pipeline.stage[0]: stage 'widen' (takes Pixels) cannot follow "
            "stage 'texts' (produces Text)");
}

TEST(FitTest, AggregateProducesBatches) {
  PipelineSpec spec = source_spec(&typeid(int));
  StageSpec aggregate{StageKind::kAggregate, make_aggregate_op(2, false), {}};
  spec.stages.push_back(std::move(aggregate));
  add(spec, "to_pixels", int_to_pixels());
  EXPECT_EQ(build_error(std::move(spec)),
            "pipeline.stage[1]: stage 'to_pixels' (takes int) cannot follow "
            "stage 'aggregate' (produces " +
                type_name(typeid(ItemBatch)) + ")");
}

TEST(FitTest, MergeProducesTheCommonTypeOfItsInputs) {
  auto merged = [](const std::type_info* first, const std::type_info* second) {
    PipelineSpec spec;
    spec.merge_name = "both";
    spec.merge_inputs.push_back(source_spec(first, 2, "a"));
    spec.merge_inputs.push_back(source_spec(second, 2, "b"));
    return spec;
  };
  PipelineSpec same = merged(&typeid(int), &typeid(int));
  add(same, "length", text_to_int());
  EXPECT_EQ(build_error(std::move(same)),
            "pipeline.stage[0]: stage 'length' (takes Text) cannot follow "
            "stage 'both' (produces int)");

  PipelineSpec fits = merged(&typeid(int), &typeid(int));
  add(fits, "to_pixels", int_to_pixels());
  fits.sink_capacity = 3;
  Pipeline p = build_pipeline(std::move(fits), BuildOptions{.num_threads = 1});
  EXPECT_EQ(drain<Pixels>(p).size(), 4u);

  // Inputs that differ, or one not known: the merge's type is not known.
  using Types = std::pair<const std::type_info*, const std::type_info*>;
  for (Types t :
       {Types{&typeid(int), &typeid(Text)}, Types{&typeid(int), nullptr}}) {
    PipelineSpec spec = merged(t.first, t.second);
    add(spec, "length", text_to_int());
    EXPECT_EQ(build_error(std::move(spec)), "");
  }
}

TEST(FitTest, StagesInsideAMergedPipelineAreChecked) {
  PipelineSpec sub = source_spec(&typeid(int), 2, "a");
  add(sub, "length", text_to_int());
  PipelineSpec spec;
  spec.merge_inputs.push_back(std::move(sub));
  EXPECT_EQ(build_error(std::move(spec)),
            "pipeline.merge[0].stage[0]: stage 'length' (takes Text) cannot "
            "follow stage 'a' (produces int)");
}

}  // namespace
}  // namespace feedline
