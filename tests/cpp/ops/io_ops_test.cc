// SPDX-License-Identifier: Apache-2.0
//
// The file, image, array and archive ops of feedline::ops on real data:
// JPEG/PNG encoded with libjpeg-turbo/libpng, tar and zip archives made with
// the CLI tools, NPY and WAV bytes written here.

#include "feedline/ops/io_ops.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "feedline/pipeline/builder.h"
#include "ops/ops_testing.h"

namespace feedline::ops {
namespace {

using testing::call;
using testing::encode_jpeg;
using testing::encode_png;
using testing::encoded;
using testing::error_of;
using testing::pull;
using testing::TempDir;
namespace fs = std::filesystem;

media::ImageOptions sized(int w, int h) {
  media::ImageOptions o;
  o.resize_width = w;
  o.resize_height = h;
  return o;
}

// An NPY v1.0 file of float32 values, C order.
std::vector<uint8_t> npy_f32(const std::vector<float>& values, int rows,
                             int cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) +
                       "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const auto* p = reinterpret_cast<const uint8_t*>(values.data());
  out.insert(out.end(), p, p + values.size() * sizeof(float));
  return out;
}

void put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}
void put16(std::vector<uint8_t>& v, uint16_t x) {
  v.push_back(static_cast<uint8_t>(x));
  v.push_back(static_cast<uint8_t>(x >> 8));
}

// A 16-bit PCM WAV file of `frames` frames x 2 channels: sample (i, c) is
// i * 10 + c.
std::vector<uint8_t> wav_s16(int frames) {
  std::vector<uint8_t> v = {'R', 'I', 'F', 'F'};
  put32(v, 36 + frames * 4);
  for (char c : std::string("WAVEfmt ")) v.push_back(c);
  put32(v, 16);
  put16(v, 1);      // PCM
  put16(v, 2);      // channels
  put32(v, 8000);   // sample rate
  put32(v, 32000);  // byte rate
  put16(v, 4);      // block align
  put16(v, 16);     // bits per sample
  for (char c : std::string("data")) v.push_back(c);
  put32(v, frames * 4);
  for (int i = 0; i < frames; ++i) {
    put16(v, static_cast<uint16_t>(i * 10));
    put16(v, static_cast<uint16_t>(i * 10 + 1));
  }
  return v;
}

TEST(IoOpsTest, EveryOpDeclaresItsTypes) {
  struct Case {
    OpPtr op;
    const std::type_info& in;
    const std::type_info& out;
  };
  const Case cases[] = {
      {read_file(), typeid(std::string), typeid(EncodedFile)},
      {decode_image({}), typeid(EncodedFile), typeid(Buffer)},
      {decode_batch(sized(8, 8)), typeid(ItemBatch), typeid(Buffer)},
      {stack(), typeid(ItemBatch), typeid(Buffer)},
      {load_npy(), typeid(EncodedFile), typeid(Buffer)},
      {load_wav(), typeid(EncodedFile), typeid(Buffer)},
      {tar_members(), typeid(EncodedFile), typeid(EncodedFile)},
      {zip_members(), typeid(EncodedFile), typeid(EncodedFile)},
      {read_tar_members(), typeid(std::string), typeid(EncodedFile)},
      {read_zip_members(), typeid(std::string), typeid(EncodedFile)},
  };
  for (const Case& c : cases) {
    ASSERT_NE(c.op->input_type(), nullptr);
    ASSERT_NE(c.op->output_type(), nullptr);
    EXPECT_EQ(*c.op->input_type(), c.in) << type_name(c.in);
    EXPECT_EQ(*c.op->output_type(), c.out) << type_name(c.out);
    EXPECT_FALSE(c.op->stateful());
  }
  // The batch ops also take the typed builder's batches.
  EXPECT_TRUE(
      decode_batch(sized(8, 8))->accepts(typeid(std::vector<EncodedFile>)));
  EXPECT_TRUE(stack()->accepts(typeid(std::vector<Buffer>)));
  EXPECT_FALSE(stack()->accepts(typeid(std::vector<EncodedFile>)));
  EXPECT_EQ(tar_members()->kind(), OpKind::kGenerator);
}

TEST(IoOpsTest, UnnamedBytesAreNamedBySize) {
  EncodedFile f = EncodedFile::unnamed(Buffer::allocate(DType::kUint8, {42}));
  EXPECT_EQ(f.name, "<42 bytes>");
  EXPECT_EQ(f.span().size(), 42u);
}

TEST(IoOpsTest, ReadFileNamesTheFileByItsPath) {
  TempDir dir("ops_read");
  const std::vector<uint8_t> bytes = {1, 2, 3, 250};
  testing::write_file(dir / "a.bin", bytes);
  EncodedFile f = call(read_file(), Item(dir / "a.bin")).take_as<EncodedFile>();
  EXPECT_EQ(f.name, dir / "a.bin");
  EXPECT_EQ(testing::bytes_of(f.bytes), bytes);

  const std::string missing = dir / "missing.jpg";
  EXPECT_THROW(call(read_file(), Item(missing)), IoError);
  EXPECT_NE(error_of([&] { call(read_file(), Item(missing)); }).find(missing),
            std::string::npos);
}

TEST(IoOpsTest, DecodeImageReadsJpegAndPng) {
  OpPtr op = decode_image({});
  Buffer jpeg =
      call(op, Item(encoded("a.jpg", encode_jpeg(12, 10)))).take_as<Buffer>();
  EXPECT_EQ(jpeg.shape(), (std::vector<int64_t>{10, 12, 3}));
  Buffer png =
      call(op, Item(encoded("b.png", encode_png(7, 5)))).take_as<Buffer>();
  EXPECT_EQ(png.shape(), (std::vector<int64_t>{5, 7, 3}));
  // PNG is lossless: the pixels are the pattern.
  EXPECT_EQ(testing::bytes_of(png), testing::pattern(7, 5));
}

TEST(IoOpsTest, DecodeImageRejectsOtherFormatsAsUnsupported) {
  OpPtr op = decode_image({});
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 0, 0, 0, 0};
  EXPECT_THROW(call(op, Item(encoded("x.gif", gif))), UnsupportedFormat);
  EXPECT_NE(
      error_of([&] { call(op, Item(encoded("x.gif", gif))); }).find("x.gif"),
      std::string::npos);
  // A damaged JPEG is a DecodeError, not an unsupported format.
  std::vector<uint8_t> cut = encode_jpeg(16, 16);
  cut.resize(cut.size() / 3);
  try {
    call(op, Item(encoded("cut.jpg", cut)));
    FAIL() << "no error";
  } catch (const UnsupportedFormat&) {
    FAIL() << "a damaged JPEG is not an unsupported format";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.jpg"), std::string::npos);
  }
  // An item of another type is a typed error naming both types.
  EXPECT_THROW(call(op, Item(int64_t{3})), InvalidArgument);
}

TEST(IoOpsTest, DecodeBatchLeavesOutWhatFails) {
  OpPtr op = decode_batch(sized(16, 8));
  ItemBatch batch;
  batch.emplace_back(encoded("a.jpg", encode_jpeg(40, 30)));
  batch.emplace_back(encoded("bad.jpg", {1, 2, 3}));
  batch.emplace_back(int64_t{7});  // not an encoded file
  batch.emplace_back(encoded("b.png", encode_png(20, 20)));
  Buffer out = call(op, Item(std::move(batch))).take_as<Buffer>();
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 8, 16, 3}));

  std::vector<EncodedFile> typed;
  typed.push_back(encoded("c.png", encode_png(9, 9)));
  out = call(op, Item(std::move(typed))).take_as<Buffer>();
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{1, 8, 16, 3}));
}

TEST(IoOpsTest, DecodeBatchFailsWhenNoImageDecodes) {
  OpPtr op = decode_batch(sized(16, 8));
  ItemBatch batch;
  batch.emplace_back(encoded("first.jpg", {1, 2, 3}));
  batch.emplace_back(encoded("second.png", {4, 5}));
  std::string what;
  try {
    call(op, Item(std::move(batch)));
  } catch (const DecodeError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("all 2 images failed"), std::string::npos) << what;
  EXPECT_NE(what.find("first.jpg"), std::string::npos) << what;
  // Without one output size the op cannot be made.
  EXPECT_THROW(decode_batch({}), InvalidArgument);
}

TEST(IoOpsTest, LoadImageBatchReportsFailuresByIndex) {
  TempDir dir("ops_batch");
  testing::write_file(dir / "a.jpg", encode_jpeg(30, 20));
  std::vector<ImageSource> sources = {dir / "a.jpg", dir / "missing.jpg",
                                      encoded("b.png", encode_png(8, 8)),
                                      encoded("junk", {9, 9, 9})};
  std::vector<media::ImageFailure> failures;
  Buffer out = load_image_batch(std::move(sources), sized(10, 10), &failures);
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 10, 10, 3}));
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0].index, 1u);
  EXPECT_NE(failures[0].message.find("missing.jpg"), std::string::npos);
  EXPECT_EQ(failures[1].index, 3u);
  EXPECT_NE(failures[1].message.find("junk"), std::string::npos);
}

TEST(IoOpsTest, StackAddsABatchDimension) {
  OpPtr op = stack();
  ItemBatch batch;
  for (int i = 0; i < 3; ++i) {
    Buffer b = Buffer::allocate(DType::kFloat32, {2, 2});
    for (int k = 0; k < 4; ++k) b.data_as<float>()[k] = float(i * 10 + k);
    batch.emplace_back(std::move(b));
  }
  Buffer out = call(op, Item(std::move(batch))).take_as<Buffer>();
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(out.data_as<float>()[9], 21.0f);

  ItemBatch mixed;
  mixed.emplace_back(Buffer::allocate(DType::kUint8, {2}));
  mixed.emplace_back(Buffer::allocate(DType::kUint8, {3}));
  EXPECT_THROW(call(op, Item(std::move(mixed))), InvalidArgument);
  ItemBatch wrong;
  wrong.emplace_back(std::string("not a buffer"));
  EXPECT_THROW(call(op, Item(std::move(wrong))), InvalidArgument);
}

TEST(IoOpsTest, LoadNpyViewsTheArray) {
  const std::vector<float> values = {0, 1.5f, 2, 3, 4, -5};
  Buffer out = call(load_npy(), Item(encoded("x.npy", npy_f32(values, 2, 3))))
                   .take_as<Buffer>();
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(out.dtype(), DType::kFloat32);
  EXPECT_EQ(std::memcmp(out.data(), values.data(), 24), 0);

  std::vector<uint8_t> bad = npy_f32(values, 2, 3);
  bad[1] = 'X';
  EXPECT_THROW(call(load_npy(), Item(encoded("bad.npy", bad))), FormatError);
  EXPECT_NE(error_of([&] {
              call(load_npy(), Item(encoded("bad.npy", bad)));
            }).find("bad.npy"),
            std::string::npos);
}

TEST(IoOpsTest, LoadWavGivesFramesByChannels) {
  Buffer out =
      call(load_wav(), Item(encoded("a.wav", wav_s16(5)))).take_as<Buffer>();
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{5, 2}));
  ASSERT_EQ(out.dtype(), DType::kInt16);
  EXPECT_EQ(out.data_as<int16_t>()[7], 31);  // frame 3, channel 1

  std::vector<uint8_t> bad = wav_s16(5);
  bad[8] = 'X';  // not WAVE
  EXPECT_THROW(call(load_wav(), Item(encoded("bad.wav", bad))), FormatError);
  EXPECT_NE(error_of([&] {
              call(load_wav(), Item(encoded("bad.wav", bad)));
            }).find("bad.wav"),
            std::string::npos);
}

class ArchiveTest : public ::testing::Test {
 protected:
  ArchiveTest() : dir_("ops_archive") {
    fs::create_directories(dir_.path() / "src" / "sub");
    testing::write_file(dir_.path() / "src" / "a.txt", {'h', 'i'});
    // Compressible, so that zip deflates it.
    testing::write_file(dir_.path() / "src" / "sub" / "b.bin",
                        std::vector<uint8_t>(3000, 'z'));
  }
  EncodedFile archive(const std::string& name) {
    return encoded(name, testing::read_all(dir_ / name));
  }
  // Members are named "<archive>:<member>".
  void expect_members(const std::vector<Item>& items,
                      const std::string& archive) {
    ASSERT_EQ(items.size(), 2u);
    const auto& a = const_cast<Item&>(items[0]).as<EncodedFile>();
    const auto& b = const_cast<Item&>(items[1]).as<EncodedFile>();
    EXPECT_EQ(a.name, archive + ":a.txt");
    EXPECT_EQ(testing::bytes_of(a.bytes), (std::vector<uint8_t>{'h', 'i'}));
    EXPECT_EQ(b.name, archive + ":sub/b.bin");
    EXPECT_EQ(testing::bytes_of(b.bytes), std::vector<uint8_t>(3000, 'z'));
  }
  TempDir dir_;
};

TEST_F(ArchiveTest, TarMembersYieldsEachRegularFile) {
  testing::run("cd " + dir_ / "src" + " && tar -cf ../a.tar a.txt sub");
  expect_members(pull(tar_members(), Item(archive("a.tar"))), "a.tar");

  std::vector<uint8_t> bad = testing::read_all(dir_ / "a.tar");
  bad[148] ^= 0x55;  // the header checksum
  EXPECT_THROW(pull(tar_members(), Item(encoded("bad.tar", bad))), FormatError);
  EXPECT_NE(error_of([&] {
              pull(tar_members(), Item(encoded("bad.tar", bad)));
            }).find("bad.tar"),
            std::string::npos);
}

TEST_F(ArchiveTest, ZipMembersSkipsDirectoriesAndInflates) {
  // Directory entries (sub/) are in the archive; zip_members leaves them out.
  testing::run("cd " + dir_ / "src" + " && zip -q -r ../a.zip a.txt sub");
  expect_members(pull(zip_members(), Item(archive("a.zip"))), "a.zip");
  testing::run("cd " + dir_ / "src" +
               " && zip -q -0 -r ../stored.zip a.txt sub");
  expect_members(pull(zip_members(), Item(archive("stored.zip"))),
                 "stored.zip");

  const std::vector<uint8_t> junk(100, 7);
  EXPECT_THROW(pull(zip_members(), Item(encoded("junk.zip", junk))),
               FormatError);
  EXPECT_NE(error_of([&] {
              pull(zip_members(), Item(encoded("junk.zip", junk)));
            }).find("junk.zip"),
            std::string::npos);
}

// From a path: the same members, named by the path, read from the file a
// member at a time; a member that is damaged costs itself, a path that
// cannot be opened is an IoError naming it.
TEST_F(ArchiveTest, ReadMembersTakesAPathAndReadsAMemberAtATime) {
  testing::run("cd " + dir_ / "src" + " && tar -cf ../a.tar a.txt sub");
  testing::run("cd " + dir_ / "src" + " && zip -q -r ../a.zip a.txt sub");
  expect_members(pull(read_tar_members(), Item(dir_ / "a.tar")),
                 dir_ / "a.tar");
  expect_members(pull(read_zip_members(), Item(dir_ / "a.zip")),
                 dir_ / "a.zip");
  for (OpPtr op : {read_tar_members(), read_zip_members()}) {
    EXPECT_NE(error_of([&] { pull(op, Item(dir_ / "nope")); }).find("nope"),
              std::string::npos);
  }
  // A shard cut after its headers were read: the member that lies past the
  // cut is the generator's failure, not a crash.
  OpPtr op = read_tar_members();
  std::unique_ptr<ItemGenerator> g =
      static_cast<GeneratorOp&>(*op).start(Item(dir_ / "a.tar"));
  ASSERT_EQ(::truncate((dir_ / "a.tar").c_str(), 1024), 0);
  Item first;
  ASSERT_TRUE(g->next(&first));  // a.txt lies before the cut
  EXPECT_EQ(testing::bytes_of(first.as<EncodedFile>().bytes),
            (std::vector<uint8_t>{'h', 'i'}));
  Item second;
  EXPECT_NE(error_of([&] { g->next(&second); }).find("the file ends at byte"),
            std::string::npos);
}

TEST(IoOpsTest, ReadAggregateDecodeBatchPipeline) {
  TempDir dir("ops_pipeline");
  std::vector<std::string> paths;
  for (int i = 0; i < 10; ++i) {
    std::string p =
        dir / ("img" + std::to_string(i) + (i % 2 ? ".png" : ".jpg"));
    testing::write_file(
        p, i % 2 ? encode_png(20 + i, 15) : encode_jpeg(30, 20 + i));
    paths.push_back(p);
  }
  paths.push_back(dir / "missing.jpg");  // a failed read, counted by the stage
  BuildOptions options;
  options.num_threads = 2;
  auto pipeline = PipelineBuilder()
                      .add_source(paths)
                      .pipe<EncodedFile>(read_file(), {.concurrency = 2})
                      .aggregate(4)
                      .pipe<Buffer>(decode_batch(sized(12, 8)))
                      .add_sink(2)
                      .build(options);
  std::vector<int64_t> sizes;
  for (Buffer& batch : pipeline) {
    ASSERT_EQ(batch.ndim(), 4);
    EXPECT_EQ(batch.shape()[1], 8);
    EXPECT_EQ(batch.shape()[2], 12);
    sizes.push_back(batch.shape()[0]);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(pipeline.stats().stages[1].failures, 1u);
}

TEST(IoOpsTest, TypedPipeRefusesAnOpOfOtherTypes) {
  EXPECT_THROW(PipelineBuilder()
                   .add_source(std::vector<int64_t>{1, 2})
                   .pipe<EncodedFile>(read_file()),
               InvalidArgument);
  EXPECT_THROW(PipelineBuilder()
                   .add_source(std::vector<std::string>{"a"})
                   .pipe<Buffer>(read_file()),
               InvalidArgument);
}

}  // namespace
}  // namespace feedline::ops
