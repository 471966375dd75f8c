// SPDX-License-Identifier: Apache-2.0
//
// feedline::media against hostile input: playlists and scripts that name
// other files, text that FFmpeg would decode as video, URLs of other
// protocols, image2 patterns, headers claiming huge images, windows past
// the end of a clip, and one Demuxer used from two threads. The media are
// made with the ffmpeg CLI.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/resource.h>
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

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// A BMP header (no pixels) claiming width x height at 24 bits.
std::vector<uint8_t> bmp_header(uint32_t width, uint32_t height) {
  std::vector<uint8_t> b(54 + 64, 0);
  auto put32 = [&](std::size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  b[0] = 'B';
  b[1] = 'M';
  put32(2, 54 + width * height * 3);
  put32(10, 54);
  put32(14, 40);
  put32(18, width);
  put32(22, height);
  b[26] = 1;   // planes
  b[28] = 24;  // bits per pixel
  put32(34, width * height * 3);
  return b;
}

// The peak resident set of this process, in bytes.
int64_t peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t{u.ru_maxrss} * 1024;
}

// Counts the opens of one file (inotify), to show a file was never read.
class OpenWatch {
 public:
  explicit OpenWatch(const fs::path& p) : fd_(inotify_init1(IN_NONBLOCK)) {
    inotify_add_watch(fd_, p.c_str(), IN_OPEN);
  }
  ~OpenWatch() { close(fd_); }
  // Opens seen since the last call.
  int opens() {
    int n = 0;
    alignas(inotify_event) char buf[4096];
    for (;;) {
      const ssize_t got = read(fd_, buf, sizeof(buf));
      if (got <= 0) return n;
      for (ssize_t at = 0; at < got;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
        if ((e->mask & IN_OPEN) != 0) ++n;
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
  }

 private:
  int fd_;
};

class HostileMediaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("feedline_hostile_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    const std::string d = dir_->string();
    // 2 s at 25 fps.
    run("ffmpeg -v error -y -f lavfi -i testsrc=size=64x48:rate=25:duration=2 "
        "-c:v libx264 -pix_fmt yuv420p -g 25 " +
        d + "/clip.mp4");
    run("ffmpeg -v error -y -i " + d + "/clip.mp4 -c copy -f mpegts " + d +
        "/segment.ts");
    run("ffmpeg -v error -y -f lavfi -i testsrc=size=16x16:rate=1:duration=2 "
        "-start_number 1 " +
        d + "/seq%03d.bmp");
    write_text(*dir_ / "playlist.m3u8",
               "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
               "#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:2.0,\nsegment.ts\n"
               "#EXT-X-ENDLIST\n");
    write_text(*dir_ / "list.ffconcat",
               "ffconcat version 1.0\nfile segment.ts\n");
    std::string text;
    for (int i = 0; i < 60; ++i)
      text += "line " + std::to_string(i) + " of a plain text file\n";
    write_text(*dir_ / "notes.txt", text);
    // 5 uncompressed 640x480 frames, 4.6 MB.
    run("ffmpeg -v error -y -f lavfi -i testsrc=size=640x480:rate=25 "
        "-frames:v 5 -c:v rawvideo -pix_fmt rgb24 -f nut " +
        d + "/raw.nut");
    const std::vector<uint8_t> big = bmp_header(16000, 16000);
    std::ofstream(*dir_ / "big.bmp", std::ios::binary)
        .write(reinterpret_cast<const char*>(big.data()),
               static_cast<std::streamsize>(big.size()));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static void run(const std::string& cmd) {
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static std::string path(const char* name) { return (*dir_ / name).string(); }
  static Source file(const char* name) {
    return Source{path(name), {}, nullptr};
  }
  static Source bytes(const char* name) {
    auto data = std::make_shared<std::vector<uint8_t>>(read_all(*dir_ / name));
    return Source{"", {data->data(), data->size()}, data};
  }
  template <typename F>
  static std::string error_of(F f) {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

  static fs::path* dir_;
};

fs::path* HostileMediaTest::dir_ = nullptr;

TEST_F(HostileMediaTest, HlsPlaylistIsRefusedAndNeverOpensItsSegments) {
  OpenWatch watch(*dir_ / "segment.ts");
  const std::string playlist = path("playlist.m3u8");
  EXPECT_THROW(Demuxer(file("playlist.m3u8"), {}), UnsupportedFormat);
  const std::string e =
      error_of([&] { load_video(file("playlist.m3u8"), {}); });
  EXPECT_NE(e.find(playlist), std::string::npos) << e;
  EXPECT_NE(e.find("hls"), std::string::npos) << e;
  EXPECT_EQ(watch.opens(), 0);
  // Opting in reads the segment: the watch sees it, the frames come out.
  VideoOptions o;
  o.demux.allow_unsafe_formats = true;
  EXPECT_EQ(load_video(file("playlist.m3u8"), o).shape()[0], 50);
  EXPECT_GT(watch.opens(), 0);
  VideoOptions named;
  named.demux.format = "hls";
  EXPECT_EQ(load_video(file("playlist.m3u8"), named).shape()[0], 50);
}

TEST_F(HostileMediaTest, ConcatScriptIsRefusedFromPathAndMemory) {
  OpenWatch watch(*dir_ / "segment.ts");
  EXPECT_THROW(Demuxer(file("list.ffconcat"), {}), UnsupportedFormat);
  EXPECT_THROW(load_video(bytes("list.ffconcat"), {}), UnsupportedFormat);
  EXPECT_NE(error_of([&] {
              Demuxer(bytes("list.ffconcat"), {}, "<script>");
            }).find("<script>: the concat format"),
            std::string::npos);
  EXPECT_EQ(watch.opens(), 0);
  VideoOptions o;
  o.demux.allow_unsafe_formats = true;
  EXPECT_EQ(load_video(file("list.ffconcat"), o).shape()[0], 50);
  EXPECT_GT(watch.opens(), 0);
}

TEST_F(HostileMediaTest, PlainTextIsNotVideo) {
  const std::string e = error_of([&] { load_video(file("notes.txt"), {}); });
  EXPECT_NE(e.find(path("notes.txt") + ": the tty format"), std::string::npos)
      << e;
  EXPECT_THROW(load_image_ffmpeg(file("notes.txt"), {}), UnsupportedFormat);
  EXPECT_THROW(load_video(bytes("notes.txt"), {}, "<notes>"), DecodeError);
  // Named, the format is read as FFmpeg reads it.
  VideoOptions o;
  o.demux.format = "tty";
  EXPECT_GT(load_video(file("notes.txt"), o).shape()[0], 0);
}

TEST_F(HostileMediaTest, OtherProtocolsAreRefusedBeforeAnyConnection) {
  for (const char* url :
       {"http://127.0.0.1:9/clip.mp4", "tcp://127.0.0.1:9", "pipe:0",
        "concat:/etc/hostname|/etc/hostname", "data:text/plain,hello"}) {
    const std::string e = error_of([&] {
      Demuxer(Source{url, {}, nullptr}, {});
    });
    EXPECT_NE(e.find("protocol is not read by default"), std::string::npos)
        << url << ": " << e;
  }
  // A NUL would cut the path: FFmpeg would open another file.
  const std::string cut = path("clip.mp4") + std::string(1, '\0') + ".txt";
  EXPECT_THROW(Demuxer(Source{cut, {}, nullptr}, {}), InvalidArgument);
  // The protocol still takes its own options; the demuxer checks the rest.
  DemuxConfig block;
  block.format_options["blocksize"] = "4096";
  EXPECT_EQ(Demuxer(file("clip.mp4"), block).num_streams(), 1);
  block.format_options["no_such_option"] = "1";
  EXPECT_THROW(Demuxer(file("clip.mp4"), block), InvalidArgument);
  // Listed by the caller, a protocol is used (here: file, spelled out).
  DemuxConfig c;
  c.format_options["protocol_whitelist"] = "file";
  EXPECT_EQ(
      Demuxer(Source{"file:" + path("clip.mp4"), {}, nullptr}, c).num_streams(),
      1);
}

TEST_F(HostileMediaTest, Image2ReadsTheNamedFileNotAPattern) {
  // seq001.bmp and seq002.bmp exist; "seq%03d.bmp" itself does not.
  EXPECT_THROW(Demuxer(file("seq%03d.bmp"), {}), IoError);
  DemuxConfig pattern;
  pattern.format = "image2";
  Demuxer d(file("seq%03d.bmp"), pattern);
  EXPECT_EQ(d.demux(Media::kVideo, std::nullopt)->num_packets(), 2u);
  // One image by its own name still loads.
  EXPECT_EQ(load_image_ffmpeg(file("seq001.bmp"), {}).shape(),
            (std::vector<int64_t>{16, 16, 3}));
}

TEST_F(HostileMediaTest, HugeImageHeaderIsRefusedBeforeAllocating) {
  const int64_t before = peak_rss();
  for (const Source& s : {file("big.bmp"), bytes("big.bmp")}) {
    EXPECT_THROW(load_image_ffmpeg(s, {}, "big.bmp"), DecodeError);
    EXPECT_THROW(load_video(s, {}, "big.bmp"), DecodeError);
  }
  // 16000 x 16000 x 3 bytes would be 768 MB.
  EXPECT_LT(peak_rss() - before, int64_t{200} << 20);
  // The error says why, in FFmpeg's words.
  const std::string why =
      error_of([&] { load_image_ffmpeg(file("big.bmp"), {}); });
  EXPECT_NE(why.find(path("big.bmp") + ": no frame decoded"), std::string::npos)
      << why;
  EXPECT_NE(why.find("16000x16000 exceeds"), std::string::npos) << why;
  // The decoder's max_pixels is the limit, checked from the header.
  VideoOptions small;
  small.decode.decoder_options["max_pixels"] = "100";
  const std::string e =
      error_of([&] { load_image_ffmpeg(file("seq001.bmp"), small); });
  EXPECT_NE(e.find("16 x 16 pixels exceeds the limit of 100"),
            std::string::npos)
      << e;
  small.decode.decoder_options["max_pixels"] = "lots";
  EXPECT_THROW(load_image_ffmpeg(file("seq001.bmp"), small), InvalidArgument);
}

TEST_F(HostileMediaTest, WholeWindowRefusesAWindowPastTheEnd) {
  VideoOptions o;
  o.window = Window{Rational{3, 2}, Rational{5, 2}};
  EXPECT_EQ(load_video(file("clip.mp4"), o).shape()[0], 12);  // short
  o.whole_window = true;
  const std::string e = error_of([&] { load_video(file("clip.mp4"), o); });
  EXPECT_NE(e.find(path("clip.mp4") +
                   ": the window [1.500000, 2.500000) s extends past the end"),
            std::string::npos)
      << e;
  o.window = Window{Rational{1, 1}, Rational{2, 1}};  // ends where it ends
  EXPECT_EQ(load_video(file("clip.mp4"), o).shape()[0], 25);
  o.window = Window{Rational{1, 2}, Rational{3, 2}};
  EXPECT_EQ(load_video(bytes("clip.mp4"), o).shape()[0], 25);
  o.window = Window{Rational{3, 2}, std::nullopt};  // to the end: not short
  EXPECT_EQ(load_video(file("clip.mp4"), o).shape()[0], 12);
}

// FFmpeg does not take a second avformat_write_header() on a context whose
// first failed: after a failed open() the Muxer is closed, and says so.
TEST_F(HostileMediaTest, AMuxerWhoseHeaderFailedIsClosed) {
  Demuxer in(file("raw.nut"), DemuxConfig{});
  auto m = Muxer::in_memory("ipod");  // takes no raw video
  m->add_remux_stream(in.codec(Media::kVideo));
  EXPECT_THROW(m->open(), InvalidArgument);
  EXPECT_TRUE(m->closed());
  const std::string e = error_of([&] { m->open(); });
  EXPECT_NE(e.find("the Muxer is closed"), std::string::npos) << e;
}

// Thread A blocks inside write() on a full pipe; thread B's calls throw
// ObjectInUse instead of writing the same AVFormatContext at once. A is
// known to be inside write() once 64 KiB came out of the pipe: open()
// writes a header of a few hundred bytes, and write() 4.6 MB.
TEST_F(HostileMediaTest, MuxerUsedFromTwoThreadsThrowsInsteadOfRacing) {
  Demuxer in(file("raw.nut"), DemuxConfig{});
  const std::unique_ptr<Packets> packets =
      in.demux(Media::kVideo, std::nullopt);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_GT(fcntl(fds[1], F_SETPIPE_SZ, 4096), 0);
  const std::string dst = "/dev/fd/" + std::to_string(fds[1]);
  Muxer m(dst, "nut");
  m.add_remux_stream(in.codec(Media::kVideo));
  m.open();
  close(fds[1]);  // the Muxer has its own descriptor of the pipe
  std::string a_error;
  std::thread a([&] {
    try {
      m.write(0, *packets);
    } catch (const std::exception& e) {
      a_error = e.what();
    }
  });
  std::vector<uint8_t> buf(64 * 1024);
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = read(fds[0], buf.data() + got, buf.size() - got);
    ASSERT_GT(n, 0);
    got += static_cast<std::size_t>(n);
  }
  EXPECT_THROW(m.flush(), ObjectInUse);
  EXPECT_THROW(m.close(), ObjectInUse);
  const std::string e = error_of([&] { m.write(0, *packets); });
  EXPECT_NE(e.find(dst + ": the Muxer is in use by another thread"),
            std::string::npos)
      << e;
  std::thread drain([&] {
    while (read(fds[0], buf.data(), buf.size()) > 0) {
    }
  });
  a.join();
  EXPECT_EQ(a_error, "");
  m.close();  // free again; the end of the pipe for the drain
  drain.join();
  close(fds[0]);
}

// Thread A blocks inside demux() reading a pipe; thread B's calls throw
// ObjectInUse instead of racing it. A's demux is known to be in progress
// once B's write into the (one page) pipe returns: only A reads it.
TEST_F(HostileMediaTest, DemuxerUsedFromTwoThreadsThrowsInsteadOfRacing) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_GT(fcntl(fds[1], F_SETPIPE_SZ, 4096), 0);
  const std::vector<uint8_t> frame(16 * 16, 7);  // one gray frame
  ASSERT_EQ(write(fds[1], frame.data(), frame.size()),
            static_cast<ssize_t>(frame.size()));
  DemuxConfig c;
  c.format = "rawvideo";
  c.format_options = {{"video_size", "16x16"}, {"pixel_format", "gray"}};
  c.find_stream_info = false;
  Demuxer d(Source{"/dev/fd/" + std::to_string(fds[0]), {}, nullptr}, c,
            "pipe");
  close(fds[0]);
  std::unique_ptr<Packets> got;
  std::string a_error;
  std::thread a([&] {
    try {
      got = d.demux(Media::kVideo, std::nullopt);
    } catch (const std::exception& e) {
      a_error = e.what();
    }
  });
  constexpr int kMore = 255;  // 64 KiB more: A must have read 60 KiB of it
  std::vector<uint8_t> more(frame.size() * kMore, 9);
  std::size_t sent = 0;
  while (sent < more.size()) {
    const ssize_t n = write(fds[1], more.data() + sent, more.size() - sent);
    ASSERT_GT(n, 0);
    sent += static_cast<std::size_t>(n);
  }
  EXPECT_THROW(d.num_streams(), ObjectInUse);
  EXPECT_THROW(d.codec(Media::kVideo), ObjectInUse);
  EXPECT_THROW(d.rewind(), ObjectInUse);
  const std::string e = error_of([&] { d.demux(Media::kVideo, std::nullopt); });
  EXPECT_NE(e.find("pipe: the Demuxer is in use by another thread"),
            std::string::npos)
      << e;
  close(fds[1]);  // the end of the input: A's demux returns
  a.join();
  EXPECT_EQ(a_error, "");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->num_packets(), 1u + kMore);
  EXPECT_EQ(d.num_streams(), 1);  // free again
}

}  // namespace
}  // namespace feedline::media
