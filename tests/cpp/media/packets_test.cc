// SPDX-License-Identifier: Apache-2.0
//
// Packets as byte strings (serialize / deserialize, copied and in place) and
// bit-stream filters. Clips come from the ffmpeg CLI; a round trip must
// decode to the CLI's frames.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/media/av.h"
#include "feedline/media/encode.h"

namespace feedline::media {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Buffer copy_of(std::span<const uint8_t> bytes) {
  Buffer b =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(bytes.size())});
  if (!bytes.empty())
    std::memcpy(b.data_as<uint8_t>(), bytes.data(), bytes.size());
  return b;
}

class PacketsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("feedline_packets_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    const std::string d = dir_->string();
    run("ffmpeg -v error -y -f lavfi -i testsrc=size=96x64:rate=25:duration=2 "
        "-c:v libx264 -pix_fmt yuv420p -g 25 " +
        d + "/clip.mp4");
    run("ffmpeg -v error -y -i " + d + "/clip.mp4 -f rawvideo -pix_fmt rgb24 " +
        d + "/clip.rgb");
    // AAC carries the encoder delay as skip-samples side data.
    run("ffmpeg -v error -y -f lavfi "
        "-i sine=frequency=440:sample_rate=16000:duration=1 -c:a aac " +
        d + "/tone.m4a");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static void run(const std::string& cmd) {
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static Source file(const char* name) {
    return Source{(*dir_ / name).string(), {}, nullptr};
  }
  static std::unique_ptr<Packets> video(std::optional<Window> w = {}) {
    Demuxer d(file("clip.mp4"), DemuxConfig{});
    return d.demux(Media::kVideo, w);
  }
  static Buffer rgb(std::unique_ptr<Packets> packets) {
    auto frames =
        decode_packets(std::move(*packets),
                       std::string("format=pix_fmts=rgb24"), DecodeConfig{});
    return convert_frames(std::move(*frames));
  }
  static std::vector<uint8_t> cli_rgb() { return read_all(*dir_ / "clip.rgb"); }

  static fs::path* dir_;
};

fs::path* PacketsTest::dir_ = nullptr;

TEST_F(PacketsTest, RoundTripCopiedAndInPlaceDecodesToTheCliFrames) {
  const std::vector<uint8_t> want = cli_rgb();
  for (bool view : {false, true}) {
    auto packets = video();
    Buffer blob = serialize_packets(*packets);
    EXPECT_EQ(blob.nbytes(), serialized_size(*packets));
    auto back = deserialize_packets(blob, view);
    EXPECT_EQ(back->media(), Media::kVideo);
    EXPECT_EQ(back->src(), packets->src());
    EXPECT_EQ(back->num_packets(), packets->num_packets());
    EXPECT_EQ(back->timestamps(true).size(), packets->timestamps(true).size());
    EXPECT_EQ(back->codec()->to_string(), packets->codec()->to_string());
    EXPECT_EQ(back->stream_end(), packets->stream_end());
    const uint8_t* start = blob.bytes().data();
    for (std::size_t i = 0; i < back->num_packets(); ++i) {
      const auto a = packets->packet(i);
      const auto b = back->packet(i);
      EXPECT_EQ(a.pts, b.pts);
      EXPECT_EQ(a.dts, b.dts);
      EXPECT_EQ(a.duration, b.duration);
      EXPECT_EQ(a.flags, b.flags);
      ASSERT_EQ(a.data.size(), b.data.size());
      EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size()), 0);
      const uint8_t* at = b.data.data();
      EXPECT_EQ(at >= start && at < start + blob.nbytes(), view);
      // In place, each payload sits at a multiple of 64 from the start.
      if (view) {
        EXPECT_EQ((at - start) % 64, 0);
      }
    }
    blob = Buffer();  // the views keep the storage alive
    Buffer frames = rgb(std::move(back));
    ASSERT_EQ(frames.nbytes(), want.size()) << "view=" << view;
    EXPECT_EQ(std::memcmp(frames.data(), want.data(), want.size()), 0);
  }
}

TEST_F(PacketsTest, WindowAndSideDataTravel) {
  auto packets = video(Window{Rational{1, 2}, Rational{1, 1}});
  auto back = deserialize_packets(serialize_packets(*packets), false);
  ASSERT_TRUE(back->window().has_value());
  EXPECT_EQ(back->window()->start, (Rational{1, 2}));
  EXPECT_EQ(back->window()->end, (Rational{1, 1}));
  EXPECT_EQ(back->size(), packets->size());

  Demuxer d(file("tone.m4a"), DemuxConfig{});
  auto audio = d.demux(Media::kAudio, std::nullopt);
  auto copy = deserialize_packets(serialize_packets(*audio), true);
  ASSERT_EQ(copy->num_packets(), audio->num_packets());
  std::size_t sides = 0;
  for (std::size_t i = 0; i < copy->num_packets(); ++i) {
    const auto a = audio->packet(i);
    const auto b = copy->packet(i);
    ASSERT_EQ(a.side_data.size(), b.side_data.size());
    for (std::size_t s = 0; s < a.side_data.size(); ++s) {
      EXPECT_EQ(a.side_data[s].first, b.side_data[s].first);
      ASSERT_EQ(a.side_data[s].second.size(), b.side_data[s].second.size());
      EXPECT_EQ(std::memcmp(a.side_data[s].second.data(),
                            b.side_data[s].second.data(),
                            a.side_data[s].second.size()),
                0);
    }
    sides += b.side_data.size();
  }
  // AAC's encoder delay travels as side data of the first packet.
  EXPECT_GT(sides, 0u);
  EXPECT_EQ(copy->codec()->channel_layout(), audio->codec()->channel_layout());
  auto a = decode_packets(std::move(*audio), std::nullopt, DecodeConfig{});
  auto b = decode_packets(std::move(*copy), std::nullopt, DecodeConfig{});
  EXPECT_EQ(a->num_frames(), b->num_frames());
  Buffer ab = convert_frames(std::move(*a));
  Buffer bb = convert_frames(std::move(*b));
  ASSERT_EQ(ab.nbytes(), bb.nbytes());
  EXPECT_EQ(std::memcmp(ab.data(), bb.data(), ab.nbytes()), 0);
}

TEST_F(PacketsTest, EveryTruncationIsAFormatError) {
  auto packets = video(Window{Rational{0, 1}, Rational{1, 5}});
  Buffer blob = serialize_packets(*packets);
  const auto bytes = blob.bytes();
  for (std::size_t n = 0; n < bytes.size(); n += (n < 2000 ? 1 : 97)) {
    Buffer part = copy_of(bytes.first(n));
    EXPECT_THROW(deserialize_packets(part, true, "part"), FormatError) << n;
  }
  // Bytes past the end are ignored (a string inside a larger segment).
  std::vector<uint8_t> longer(bytes.begin(), bytes.end());
  longer.resize(longer.size() + 100, 0xAB);
  EXPECT_EQ(deserialize_packets(copy_of(longer), false)->num_packets(),
            packets->num_packets());
}

TEST_F(PacketsTest, DamagedStringsAreFormatErrorsNamingTheInput) {
  auto packets = video(Window{Rational{0, 1}, Rational{1, 5}});
  Buffer blob = serialize_packets(*packets);
  const auto bytes = blob.bytes();
  std::vector<uint8_t> bad(bytes.begin(), bytes.end());
  bad[0] = 'X';
  try {
    deserialize_packets(copy_of(bad), false, "shm:segment 3");
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("shm:segment 3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos);
  }
  bad.assign(bytes.begin(), bytes.end());
  bad[4] = 9;  // version
  EXPECT_THROW(deserialize_packets(copy_of(bad), false), FormatError);
  // A non-zero byte in a payload's padding would let a decoder read garbage.
  auto in_place = deserialize_packets(blob, true);
  const auto first = in_place->packet(0).data;
  bad.assign(bytes.begin(), bytes.end());
  bad[static_cast<std::size_t>(first.data() - bytes.data()) + first.size() +
      10] = 1;
  EXPECT_THROW(deserialize_packets(copy_of(bad), true), FormatError);
  // Every single-byte change either reads back or is a FormatError.
  for (std::size_t i = 0; i < 400 && i < bytes.size(); ++i) {
    bad.assign(bytes.begin(), bytes.end());
    bad[i] ^= 0xFF;
    try {
      deserialize_packets(copy_of(bad), true);
    } catch (const FormatError&) {
    } catch (const InvalidArgument&) {
      ADD_FAILURE() << "byte " << i << ": InvalidArgument, not FormatError";
    }
  }
}

TEST_F(PacketsTest, ConsumedPacketsDoNotSerialize) {
  auto packets = video();
  auto taken = packets->take();
  EXPECT_THROW(serialize_packets(*packets), ObjectConsumed);
  Buffer wrong = Buffer::allocate(DType::kUint8, {10});
  EXPECT_THROW(serialize_packets_into(
                   *taken, std::span<uint8_t>(wrong.data_as<uint8_t>(), 10)),
               InvalidArgument);
}

TEST_F(PacketsTest, FramesRoundTripAndEveryTruncationIsAFormatError) {
  auto frames =
      decode_packets(std::move(*video(Window{Rational{0, 1}, Rational{1, 5}})),
                     std::nullopt, DecodeConfig{});
  const Buffer blob = serialize_frames(*frames);
  auto back = deserialize_frames(blob);
  EXPECT_EQ(back->num_frames(), frames->num_frames());
  EXPECT_EQ(back->format(), "yuv420p");
  EXPECT_EQ(back->pts(), frames->pts());
  // The file's name crosses too: errors in another process still name it.
  ASSERT_FALSE(frames->src().empty());
  EXPECT_EQ(back->src(), frames->src());
  const Buffer again = serialize_frames(*back);
  ASSERT_EQ(again.nbytes(), blob.nbytes());
  EXPECT_EQ(std::memcmp(again.data(), blob.data(), blob.nbytes()), 0);
  const Buffer a = convert_frames(std::move(*frames));
  const Buffer b = convert_frames(std::move(*back));
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  const auto bytes = blob.bytes();
  for (std::size_t n = 0; n < bytes.size(); n += (n < 400 ? 1 : 1009)) {
    EXPECT_THROW(deserialize_frames(copy_of(bytes.first(n))), FormatError) << n;
  }
}

// Frames from a string may carry any timestamps: encode_video derives the
// frame rate from the first two, and a spacing that overflows is an error
// naming them, not a wrapped (and undefined) one.
TEST_F(PacketsTest, FramesWhoseTimestampsGiveNoFrameRateAreRefused) {
  Demuxer d(file("clip.mp4"), DemuxConfig{});
  auto video = d.demux(Media::kVideo, std::nullopt);
  auto frames = decode_packets(std::move(*video), std::nullopt, DecodeConfig{});
  const Buffer blob = serialize_frames(*frames);
  // magic, version, media, time base, src, count; then the first frame's
  // format, width, height, samples, rate, native flag, channels, mask, pts.
  const std::size_t pts_at =
      4 + 4 + 1 + 8 + 4 + frames->src().size() + 8 + 5 * 4 + 1 + 4 + 8;
  std::vector<uint8_t> bad(blob.bytes().begin(), blob.bytes().end());
  const int64_t far_back = INT64_MIN + 1;
  std::memcpy(bad.data() + pts_at, &far_back, sizeof far_back);
  auto hostile = deserialize_frames(copy_of(bad));
  ASSERT_EQ(hostile->pts().front(), far_back);
  try {
    encode_video(std::move(*hostile), "nut", VideoEncodeConfig{}, "ffv1");
    FAIL() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("give no usable frame rate"),
              std::string::npos)
        << e.what();
  }
}

// An audio frame whose string gives it a picture size: FFmpeg would allocate
// a picture for it (and fail on a huge one), so the string is refused as
// damaged rather than reaching the allocator.
TEST_F(PacketsTest, AudioFramesWithAPictureSizeAreFormatErrors) {
  Demuxer d(file("tone.m4a"), DemuxConfig{});
  auto audio = d.demux(Media::kAudio, std::nullopt);
  auto frames = decode_packets(std::move(*audio), std::nullopt, DecodeConfig{});
  const Buffer blob = serialize_frames(*frames);
  ASSERT_EQ(deserialize_frames(blob)->num_frames(), frames->num_frames());
  // magic, version, media, time base, src, count, then the first frame's
  // format; its width and height follow.
  const std::size_t width_at = 4 + 4 + 1 + 8 + 4 + frames->src().size() + 8 + 4;
  for (const auto& [width, height] :
       {std::pair{2560, 1380338758}, std::pair{16, 16}, std::pair{0, 9}}) {
    std::vector<uint8_t> bad(blob.bytes().begin(), blob.bytes().end());
    std::memcpy(bad.data() + width_at, &width, sizeof width);
    std::memcpy(bad.data() + width_at + 4, &height, sizeof height);
    try {
      deserialize_frames(copy_of(bad), "tone frames");
      ADD_FAILURE() << width << "x" << height << ": no error";
    } catch (const FormatError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("tone frames"), std::string::npos) << what;
      EXPECT_NE(what.find("bad audio frame 0"), std::string::npos) << what;
    }
  }
}

TEST_F(PacketsTest, Mp4ToAnnexBGivesStartCodesAndTheSameFrames) {
  auto packets = video();
  const std::size_t n = packets->num_packets();
  auto annexb = apply_bsf(std::move(*packets), "h264_mp4toannexb");
  EXPECT_TRUE(packets->consumed());
  ASSERT_EQ(annexb->num_packets(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto d = annexb->packet(i).data;
    ASSERT_GE(d.size(), 4u);
    const bool start3 = d[0] == 0 && d[1] == 0 && d[2] == 1;
    const bool start4 = d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 1;
    EXPECT_TRUE(start3 || start4) << i;
  }
  // Annex B carries the parameter sets in band: the codec needs no
  // extradata.
  const std::vector<uint8_t> want = cli_rgb();
  Buffer frames = rgb(std::move(annexb));
  ASSERT_EQ(frames.nbytes(), want.size());
  EXPECT_EQ(std::memcmp(frames.data(), want.data(), want.size()), 0);
}

TEST_F(PacketsTest, NullFilterPassesPacketsThroughAndChainsParse) {
  auto packets = video();
  auto copy = packets->clone();
  BitstreamFilter bsf(*packets->codec(), "null");
  auto out = bsf.filter(std::move(*packets), false);
  auto rest = bsf.flush();
  ASSERT_EQ(out->num_packets() + rest->num_packets(), copy->num_packets());
  for (std::size_t i = 0; i < out->num_packets(); ++i) {
    const auto a = copy->packet(i);
    const auto b = out->packet(i);
    EXPECT_EQ(a.pts, b.pts);
    ASSERT_EQ(a.data.size(), b.data.size());
    EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size()), 0);
  }
  BitstreamFilter chain(*copy->codec(), "h264_mp4toannexb,dump_extra");
  EXPECT_EQ(chain.filter(std::move(*copy), true)->num_packets(),
            out->num_packets() + rest->num_packets());
}

TEST_F(PacketsTest, BadFiltersAreInvalidArguments) {
  auto packets = video();
  const Codec codec = *packets->codec();
  EXPECT_THROW(BitstreamFilter(codec, "no_such_filter"), InvalidArgument);
  try {
    BitstreamFilter(codec, "hevc_mp4toannexb");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not take h264"), std::string::npos) << what;
    EXPECT_NE(what.find("hevc"), std::string::npos) << what;
  }
  EXPECT_THROW(BitstreamFilter(codec, "h264_metadata=no_such_option=1"),
               InvalidArgument);
  Demuxer d(file("tone.m4a"), DemuxConfig{});
  auto audio = d.demux(Media::kAudio, std::nullopt);
  BitstreamFilter bsf(codec, "null");
  EXPECT_THROW(bsf.filter(std::move(*audio)), InvalidArgument);
}

}  // namespace
}  // namespace feedline::media
