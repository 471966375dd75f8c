// SPDX-License-Identifier: Apache-2.0
//
// video_limit: the machine's limit for decoding whole clips with FFmpeg.
//
// T threads take the clips of a list in turn, as a thread pool does (the
// next free thread takes the next clip), and each decodes its clip in a
// plain loop straight on libavformat + libavcodec (one decoder thread per
// clip, no feedline, no pipeline, no Python). What happens to each frame:
//   --mode decode  nothing: the frame is dropped (decoding alone);
//   --mode rgb     one sws_scale call to rgb24 at the clip's size;
//   --mode resize  one sws_scale call to 224x224 rgb24, bicubic, stretched;
// rgb and resize write frame i into slot i of a (frames, H, W, 3) array,
// the output bench/python/video.py's loaders deliver, except that each
// thread reuses one array, on huge pages, for all its clips (no page is
// faulted in or zeroed twice). So no loader that decodes one clip per thread
// with FFmpeg's decoder can beat "decode" on the same list, nor, converting
// with libswscale, the other two: video.py reports the loaders against them.
//
// Usage:
//   video_limit THREADS [--repeat R] [--mode decode|rgb|resize] --list FILE
// FILE holds one path per line, in the order the clips are taken. One
// untimed warm-up pass, then R timed passes (default 1). Prints one JSON
// object on stdout:
//   {"threads": T, "clips": N, "mode": M, "warmup": RUN, "runs": [RUN, ...],
//    "peak_rss_kib": K}
// with RUN = {"wall_s", "cpu_s", "busy_s", "frames", "failed", "counts":
// [per clip]}; cpu_s is user+sys of the whole process from getrusage,
// busy_s the sum of the clips' decode times (busy_s / T: the pass without
// the end where the last clips leave threads idle). Exits 1 if a clip
// failed.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libswscale/swscale.h>
}

namespace {

enum class Mode { kDecode, kRgb, kResize };
constexpr int kResize = 224;
// libswscale's x86 converters may write a little past a row's end.
constexpr size_t kSlack = 64;

struct Run {
  double wall_s = 0;
  double cpu_s = 0;
  double busy_s = 0;  // the clips' decode times, summed
  int64_t frames = 0;
  int64_t failed = 0;
  std::vector<int64_t> counts;
};

struct Args {
  int threads = 0;
  int repeat = 1;
  Mode mode = Mode::kDecode;
  const char* mode_name = "decode";
  std::vector<std::string> paths;
};

void check(int ret, const std::string& path, const char* what) {
  if (ret >= 0) return;
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(ret, text, sizeof(text));
  throw std::runtime_error(path + ": " + what + ": " + text);
}

struct FormatCloser {
  void operator()(AVFormatContext* c) const { avformat_close_input(&c); }
};
struct CodecCloser {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct PacketFreer {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FrameFreer {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct SwsFreer {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

struct Freer {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Memory on 2 MiB transparent huge pages where the kernel allows, as
// feedline's large buffers are: fewer TLB misses and page faults.
uint8_t* huge_alloc(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t length = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, length);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, length, MADV_HUGEPAGE);  // advisory
  return static_cast<uint8_t*>(p);
}

// A thread's (frames, H, W, 3) array: frame i of a clip goes to slot i.
class Output {
 public:
  explicit Output(Mode mode) : mode_(mode) {}

  void start_clip() { count_ = 0; }

  void add(const AVFrame* frame, const std::string& path) {
    if (mode_ == Mode::kDecode) return;
    const int width = mode_ == Mode::kResize ? kResize : frame->width;
    const int height = mode_ == Mode::kResize ? kResize : frame->height;
    const size_t frame_bytes = static_cast<size_t>(width) * height * 3;
    const size_t need = (static_cast<size_t>(count_) + 1) * frame_bytes;
    if (need > bytes_) {  // grows to the longest clip, then stays
      const size_t bytes = std::max(need, 2 * bytes_);
      std::unique_ptr<uint8_t, Freer> bigger(huge_alloc(bytes + kSlack));
      if (bytes_ > 0) std::memcpy(bigger.get(), data_.get(), bytes_);
      data_ = std::move(bigger);
      bytes_ = bytes;
    }
    sws_.reset(sws_getCachedContext(sws_.release(), frame->width, frame->height,
                                    static_cast<AVPixelFormat>(frame->format),
                                    width, height, AV_PIX_FMT_RGB24,
                                    SWS_BICUBIC, nullptr, nullptr, nullptr));
    if (!sws_) throw std::runtime_error(path + ": no swscale context");
    uint8_t* dst[4] = {data_.get() + count_ * frame_bytes, nullptr, nullptr,
                       nullptr};
    const int dst_stride[4] = {width * 3, 0, 0, 0};
    sws_scale(sws_.get(), frame->data, frame->linesize, 0, frame->height, dst,
              dst_stride);
    ++count_;
  }

 private:
  Mode mode_;
  int64_t count_ = 0;
  size_t bytes_ = 0;
  std::unique_ptr<uint8_t, Freer> data_;
  std::unique_ptr<SwsContext, SwsFreer> sws_;
};

// Decodes every frame of the clip's best video stream; returns the count.
int64_t decode_clip(const std::string& path, Output& output) {
  AVFormatContext* raw = nullptr;
  check(avformat_open_input(&raw, path.c_str(), nullptr, nullptr), path,
        "open");
  const std::unique_ptr<AVFormatContext, FormatCloser> format(raw);
  const AVCodec* codec = nullptr;
  const int index =
      av_find_best_stream(format.get(), AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  check(index, path, "no video stream");
  const AVStream* stream = format->streams[index];
  const std::unique_ptr<AVCodecContext, CodecCloser> decoder(
      avcodec_alloc_context3(codec));
  check(avcodec_parameters_to_context(decoder.get(), stream->codecpar), path,
        "codec parameters");
  decoder->thread_count = 1;
  check(avcodec_open2(decoder.get(), codec, nullptr), path, "open decoder");
  const std::unique_ptr<AVPacket, PacketFreer> packet(av_packet_alloc());
  const std::unique_ptr<AVFrame, FrameFreer> frame(av_frame_alloc());
  output.start_clip();
  int64_t frames = 0;
  auto drain = [&] {
    for (;;) {
      const int ret = avcodec_receive_frame(decoder.get(), frame.get());
      if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return;
      check(ret, path, "decode");
      output.add(frame.get(), path);
      ++frames;
      av_frame_unref(frame.get());
    }
  };
  for (;;) {
    const int ret = av_read_frame(format.get(), packet.get());
    if (ret == AVERROR_EOF) break;
    check(ret, path, "read");
    if (packet->stream_index == index) {
      check(avcodec_send_packet(decoder.get(), packet.get()), path, "send");
      drain();
    }
    av_packet_unref(packet.get());
  }
  check(avcodec_send_packet(decoder.get(), nullptr), path, "flush");
  drain();
  return frames;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}

Run run_once(const Args& args, std::vector<Output>& outputs) {
  Run run;
  run.counts.assign(args.paths.size(), -1);
  std::vector<double> seconds(args.paths.size(), 0.0);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> failed{0};
  std::mutex report;
  const double cpu0 = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(args.threads));
  for (int t = 0; t < args.threads; ++t) {
    threads.emplace_back([&, t] {
      Output& output = outputs[static_cast<size_t>(t)];
      for (size_t i = next.fetch_add(1); i < args.paths.size();
           i = next.fetch_add(1)) {
        const auto clip_start = std::chrono::steady_clock::now();
        try {
          run.counts[i] = decode_clip(args.paths[i], output);
          seconds[i] = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - clip_start)
                           .count();
        } catch (const std::exception& e) {
          failed.fetch_add(1);
          const std::lock_guard<std::mutex> lock(report);
          std::fprintf(stderr, "video_limit: %s\n", e.what());
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  run.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  run.cpu_s = cpu_seconds() - cpu0;
  run.failed = failed.load();
  for (const int64_t n : run.counts) run.frames += n > 0 ? n : 0;
  for (const double t : seconds) run.busy_s += t;
  return run;
}

void print_run(const Run& run) {
  std::printf(
      R"({"wall_s": %.6f, "cpu_s": %.6f, "busy_s": %.6f, "frames": %lld, "failed": %lld, "counts": [)",
      run.wall_s, run.cpu_s, run.busy_s, static_cast<long long>(run.frames),
      static_cast<long long>(run.failed));
  for (size_t i = 0; i < run.counts.size(); ++i) {
    std::printf("%s%lld", i > 0 ? ", " : "",
                static_cast<long long>(run.counts[i]));
  }
  std::printf("]}");
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: video_limit THREADS [--repeat R] "
               "[--mode decode|rgb|resize] --list FILE\n");
  std::exit(2);
}

Args parse(int argc, char** argv) {
  if (argc < 2) usage();
  Args args;
  args.threads = std::atoi(argv[1]);
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) {
      args.repeat = std::atoi(argv[++i]);
    } else if (arg == "--mode" && i + 1 < argc) {
      const std::string mode = argv[++i];
      if (mode == "decode") {
        args.mode = Mode::kDecode;
      } else if (mode == "rgb") {
        args.mode = Mode::kRgb;
      } else if (mode == "resize") {
        args.mode = Mode::kResize;
      } else {
        usage();
      }
      args.mode_name = argv[i];
    } else if (arg == "--list" && i + 1 < argc) {
      std::ifstream list(argv[++i]);
      for (std::string line; std::getline(list, line);) {
        if (!line.empty()) args.paths.push_back(line);
      }
    } else {
      usage();
    }
  }
  if (args.threads < 1 || args.repeat < 1 || args.paths.empty()) usage();
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  av_log_set_level(AV_LOG_ERROR);
  const Args args = parse(argc, argv);
  // One output per thread for the whole program: the warm-up pass grows
  // each to the longest clip it sees.
  std::vector<Output> outputs;
  outputs.reserve(static_cast<size_t>(args.threads));
  for (int t = 0; t < args.threads; ++t) outputs.emplace_back(args.mode);
  const Run warmup = run_once(args, outputs);
  std::vector<Run> runs;
  for (int r = 0; r < args.repeat; ++r) runs.push_back(run_once(args, outputs));
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf(R"({"threads": %d, "clips": %zu, "mode": "%s", "warmup": )",
              args.threads, args.paths.size(), args.mode_name);
  print_run(warmup);
  std::printf(R"(, "runs": [)");
  int64_t failed = warmup.failed;
  for (size_t r = 0; r < runs.size(); ++r) {
    if (r > 0) std::printf(", ");
    print_run(runs[r]);
    failed += runs[r].failed;
  }
  std::printf(R"(], "peak_rss_kib": %ld})"
              "\n",
              usage.ru_maxrss);
  return failed > 0 ? 1 : 0;
}
