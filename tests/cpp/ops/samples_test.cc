// SPDX-License-Identifier: Apache-2.0
//
// Samples through native ops: on_field() runs an op on a sample's payload
// and carries its record untouched; batch ops keep each row's record, and
// drop the record of a row they leave out, so rows and records stay aligned
// (also through a running pipeline).

#include "feedline/ops/samples.h"

#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/ops/io_ops.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/spec.h"
#include "ops/ops_testing.h"

namespace feedline::ops {
namespace {

using testing::call;
using testing::encoded;
using testing::error_of;
using testing::pull;
using testing::TempDir;

// A sample whose record is the string `label`.
Item sample(Item payload, Field field, const std::string& label) {
  return Item(Sample{std::move(payload), std::move(field),
                     std::make_shared<Item>(label)});
}
std::string label_of(const Record& record) { return record->as<std::string>(); }

// A w x h PNG of one grey level, `level`.
std::vector<uint8_t> solid_png(int w, int h, uint8_t level) {
  return feedline::testing::encode_png(
      std::vector<uint8_t>(static_cast<std::size_t>(w * h * 3), level), w, h);
}

media::ImageOptions sized(int w, int h) {
  media::ImageOptions o;
  o.resize_width = w;
  o.resize_height = h;
  return o;
}

// The grey level of row `row` of an (N, H, W, 3) uint8 batch.
int level_of(const Buffer& batch, int64_t row) {
  const auto per_row = static_cast<int64_t>(batch.nbytes()) / batch.shape()[0];
  return batch.data_as<const uint8_t>()[row * per_row];
}

TEST(SamplesTest, MapOpRunsOnThePayloadAndKeepsTheRecord) {
  OpPtr op = on_field(make_map_op<int64_t>([](int64_t x) { return x * 2; }),
                      Field{int64_t{1}});
  EXPECT_EQ(*op->input_type(), typeid(int64_t));
  EXPECT_EQ(*op->output_type(), typeid(int64_t));
  EXPECT_TRUE(op->accepts(typeid(Sample)));
  EXPECT_TRUE(op->accepts(typeid(int64_t)));
  EXPECT_FALSE(op->accepts(typeid(std::string)));
  ASSERT_NE(op_field(*op), nullptr);
  EXPECT_EQ(*op_field(*op), Field{int64_t{1}});
  EXPECT_EQ(op_field(*read_file()), nullptr);

  Item in = sample(Item(int64_t{21}), Field{int64_t{1}}, "cat");
  const Item* record = in.as<Sample>().record.get();
  Sample out = call(op, std::move(in)).take_as<Sample>();
  EXPECT_EQ(out.payload.as<int64_t>(), 42);
  EXPECT_EQ(out.field, Field{int64_t{1}});
  EXPECT_EQ(out.record.get(), record);  // carried, not copied
  EXPECT_EQ(label_of(out.record), "cat");
  // Anything else goes to the op as it is.
  EXPECT_EQ(call(op, Item(int64_t{5})).as<int64_t>(), 10);
}

TEST(SamplesTest, ASampleOfAnotherFieldFailsNamingBoth) {
  OpPtr op = on_field(read_file(), Field{std::string("path")});
  std::string what = error_of([&] {
    call(op, sample(Item(std::string("/x")), Field{int64_t{0}}, "l"));
  });
  EXPECT_NE(what.find("field 0"), std::string::npos) << what;
  EXPECT_NE(what.find("field 'path'"), std::string::npos) << what;
}

TEST(SamplesTest, AnOpErrorNamesThePayload) {
  OpPtr op = on_field(read_file(), Field{int64_t{0}});
  std::string what = error_of([&] {
    call(op, sample(Item(std::string("/no/such/file.jpg")), Field{int64_t{0}},
                    "l"));
  });
  EXPECT_NE(what.find("/no/such/file.jpg"), std::string::npos) << what;
}

TEST(SamplesTest, ASkippedResultSkipsTheSample) {
  OpPtr op = on_field(
      make_map_op<int64_t>([](int64_t x) { return x > 0 ? Item(x) : Item(); }),
      Field{int64_t{0}});
  EXPECT_FALSE(
      call(op, sample(Item(int64_t{-1}), int64_t{0}, "l")).has_value());
  EXPECT_TRUE(call(op, sample(Item(int64_t{1}), int64_t{0}, "l")).has_value());
}

TEST(SamplesTest, GeneratorOutputsShareTheRecord) {
  TempDir dir("samples_tar");
  testing::write_file(dir / "a.txt", {'a'});
  testing::write_file(dir / "b.txt", {'b', 'b'});
  testing::run("cd " + dir.path().string() + " && tar -cf t.tar a.txt b.txt");
  OpPtr op = on_field(tar_members(), Field{std::string("tar")});
  EXPECT_EQ(op->kind(), OpKind::kGenerator);
  Item in = sample(Item(encoded("t.tar", testing::read_all(dir / "t.tar"))),
                   Field{std::string("tar")}, "shard7");
  const Item* record = in.as<Sample>().record.get();
  std::vector<Item> out = pull(op, std::move(in));
  ASSERT_EQ(out.size(), 2u);
  for (Item& item : out) {
    Sample& s = item.as<Sample>();
    EXPECT_EQ(s.record.get(), record);
    EXPECT_EQ(s.field, Field{std::string("tar")});
    EXPECT_TRUE(s.payload.holds<EncodedFile>());
  }
  EXPECT_EQ(out[1].as<Sample>().payload.as<EncodedFile>().name, "t.tar:b.txt");
}

class SkipAsync final : public AsyncOp {
 public:
  void start(Item /*input*/, Completion&& done) override { done.skip(); }
};

TEST(SamplesTest, AsyncOpsDoNotTakeSamples) {
  EXPECT_THROW(on_field(std::make_shared<SkipAsync>(), Field{int64_t{0}}),
               InvalidArgument);
  EXPECT_THROW(on_field(nullptr, Field{int64_t{0}}), InvalidArgument);
}

// decode_batch on samples with a corrupt image in the middle: the batch
// holds the images that decoded and the records of exactly those rows.
TEST(SamplesTest, DecodeBatchDropsTheRecordOfAFailedImage) {
  OpPtr op = decode_batch(sized(8, 6));
  ItemBatch batch;
  const std::vector<int> levels = {10, 20, -1, 40, 50};  // -1: corrupt
  for (int level : levels) {
    EncodedFile f =
        level < 0
            ? encoded("bad.png", {1, 2, 3, 4})
            : encoded("ok.png", solid_png(12, 9, static_cast<uint8_t>(level)));
    batch.push_back(sample(Item(std::move(f)), Field{std::string("image")},
                           std::to_string(level)));
  }
  SampleBatch out = call(op, Item(std::move(batch))).take_as<SampleBatch>();
  const Buffer& images = out.batch.as<Buffer>();
  ASSERT_EQ(images.shape(), (std::vector<int64_t>{4, 6, 8, 3}));
  ASSERT_EQ(out.records.size(), 4u);
  EXPECT_EQ(out.field, Field{std::string("image")});
  for (int64_t row = 0; row < 4; ++row) {
    EXPECT_EQ(std::to_string(level_of(images, row)), label_of(out.records[row]))
        << "row " << row;
  }
}

TEST(SamplesTest, StackKeepsRecordsInRowOrder) {
  OpPtr op = stack();
  ItemBatch batch;
  for (int i = 0; i < 3; ++i) {
    Buffer b = Buffer::allocate(DType::kUint8, {2});
    b.data_as<uint8_t>()[0] = static_cast<uint8_t>(i);
    batch.push_back(sample(Item(std::move(b)), int64_t{0}, std::to_string(i)));
  }
  SampleBatch out = call(op, Item(std::move(batch))).take_as<SampleBatch>();
  ASSERT_EQ(out.records.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out.batch.as<Buffer>()
                  .data_as<uint8_t>()[2 * static_cast<std::size_t>(i)],
              i);
    EXPECT_EQ(label_of(out.records[i]), std::to_string(i));
  }
  // A batch that mixes samples and plain items is refused, naming the row.
  ItemBatch mixed;
  mixed.push_back(
      sample(Item(Buffer::allocate(DType::kUint8, {2})), int64_t{0}, "a"));
  mixed.emplace_back(Buffer::allocate(DType::kUint8, {2}));
  std::string what = error_of([&] { call(op, Item(std::move(mixed))); });
  EXPECT_NE(what.find("element 1 is not a sample"), std::string::npos) << what;
}

// One pass over `items`.
class VectorSource final : public ItemSource {
 public:
  explicit VectorSource(std::vector<Item> items) : items_(std::move(items)) {}
  bool next(Item* out) override {
    if (next_ == items_.size()) return false;
    *out = std::move(items_[next_++]);
    return true;
  }

 private:
  std::vector<Item> items_;
  std::size_t next_ = 0;
};

// read_file -> aggregate -> decode_batch on (path, label) samples in a
// running pipeline, with a missing file and a corrupt image: every batch row
// matches its label, and both bad items are counted failures.
TEST(SamplesTest, PipelineKeepsLabelsAlignedWithRows) {
  TempDir dir("samples_pipeline");
  constexpr int kItems = 23;
  std::vector<std::string> paths;
  for (int i = 0; i < kItems; ++i) {
    std::string p = dir / ("img" + std::to_string(i) + ".png");
    if (i == 9) {
      testing::write_file(p, {'n', 'o', 't', ' ', 'p', 'n', 'g'});
    } else if (i != 14) {  // 14 is missing
      testing::write_file(p, solid_png(10, 7, static_cast<uint8_t>(i * 10)));
    }
    paths.push_back(p);
  }
  PipelineSpec spec;
  spec.source = [paths] {
    std::vector<Item> items;
    for (std::size_t i = 0; i < paths.size(); ++i)
      items.push_back(
          sample(Item(paths[i]), Field{int64_t{0}}, std::to_string(i * 10)));
    return std::make_unique<VectorSource>(std::move(items));
  };
  spec.stages.push_back({StageKind::kPipe,
                         on_field(read_file(), Field{int64_t{0}}),
                         {.name = "read", .concurrency = 3}});
  spec.stages.push_back(
      {StageKind::kAggregate, make_aggregate_op(4, false), {.name = "batch"}});
  spec.stages.push_back({StageKind::kPipe,
                         decode_batch(sized(5, 5)),
                         {.name = "decode", .concurrency = 2}});
  spec.sink_capacity = 2;
  BuildOptions options;
  options.num_threads = 3;
  Pipeline pipeline = build_pipeline(std::move(spec), options);
  int rows = 0;
  Item item;
  while (pipeline.next(&item) == NextStatus::kItem) {
    SampleBatch& b = item.as<SampleBatch>();
    const Buffer& images = b.batch.as<Buffer>();
    ASSERT_EQ(static_cast<std::size_t>(images.shape()[0]), b.records.size());
    for (std::size_t r = 0; r < b.records.size(); ++r) {
      EXPECT_EQ(std::to_string(level_of(images, static_cast<int64_t>(r))),
                label_of(b.records[r]));
    }
    rows += static_cast<int>(b.records.size());
  }
  EXPECT_EQ(rows, kItems - 2);
  PipelineStats stats = pipeline.stats();
  EXPECT_EQ(stats.stages[1].failures, 1u);  // the missing file
  EXPECT_EQ(stats.stages[3].failures, 1u);  // the corrupt image
  EXPECT_EQ(pipeline.failure(), nullptr);
}

}  // namespace
}  // namespace feedline::ops
