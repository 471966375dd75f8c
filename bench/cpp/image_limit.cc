// SPDX-License-Identifier: Apache-2.0
//
// image_limit: the machine's limit for ImageNet-style image loading.
//
// Each of T threads takes every T-th path and, in a plain loop with no
// pipeline, queue or Python, does read_file() + decode_image() with the
// options every contender of bench/python/images.py uses: shorter side 256
// (antialiased bilinear), centre crop 224, CHW float32 normalised with the
// ImageNet mean/std, libjpeg-turbo's DCT scaling on. With T = the number of
// cores this is "bare decode + resize on each core, summed": no loader can
// beat it with the same decoder, so loaders are reported as a fraction of it.
//
// Usage:
//   image_limit THREADS [--repeat R] [--rrc] (--list FILE | PATH...)
// --rrc: the training transform of images.py's RRC contenders instead:
// RandomResizedCrop(224) + horizontal flip with probability 0.5, seeded
// (seed 0, each image keyed by its index in the list), into the same CHW
// float32 output.
// FILE holds one path per line. One untimed warm-up pass (page cache, the
// allocator's arenas, libjpeg-turbo's tables), then R timed passes
// (default 1). Prints one JSON object on stdout:
//   {"threads": T, "images": N, "warmup": RUN, "runs": [RUN, ...],
//    "peak_rss_kib": K}
// with RUN = {"wall_s", "cpu_s", "count", "failed"}; cpu_s is user+sys of
// the whole process (all threads) from getrusage. Exits 1 if an image failed.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "feedline/io/file.h"
#include "feedline/media/image.h"

namespace {

struct Run {
  double wall_s = 0;
  double cpu_s = 0;
  int64_t count = 0;
  int64_t failed = 0;
};

struct Args {
  int threads = 0;
  int repeat = 1;
  bool rrc = false;
  std::vector<std::string> paths;
};

// The output every contender of images.py produces: CHW float32,
// normalised with the ImageNet mean and std.
feedline::media::ImageOptions normalised_chw() {
  feedline::media::ImageOptions options;
  options.layout = feedline::media::Layout::kCHW;
  options.dtype = feedline::DType::kFloat32;
  options.mean = {0.485f, 0.456f, 0.406f};
  options.std = {0.229f, 0.224f, 0.225f};
  return options;
}

// The same work as feedline.io.ops.decode_image(resize_shorter=256, crop=224,
// layout="CHW", dtype="float32", mean=MEAN, std=STD) in images.py.
feedline::media::ImageOptions imagenet_options() {
  feedline::media::ImageOptions options = normalised_chw();
  options.resize_shorter = 256;
  options.crop_width = 224;
  options.crop_height = 224;
  return options;
}

// The same work as images.py's feedline_rrc_options(): random resized crop
// to 224x224 and a flip with probability 0.5, normalised CHW float32.
feedline::media::ImageOptions rrc_options() {
  feedline::media::ImageOptions options = normalised_chw();
  options.random_resized_crop.width = 224;
  options.random_resized_crop.height = 224;
  options.flip_probability = 0.5;
  options.seed.seeded = true;
  return options;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) +
           static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

// Decodes paths[first], paths[first + step], ...; returns how many failed.
// The first failure's message goes to stderr, once for the whole program.
int64_t decode_stride(const std::vector<std::string>& paths, std::size_t first,
                      std::size_t step,
                      const feedline::media::ImageOptions& options,
                      std::atomic<int64_t>& done) {
  static std::once_flag reported;
  int64_t failed = 0;
  for (std::size_t i = first; i < paths.size(); i += step) {
    try {
      feedline::Buffer bytes = feedline::read_file(paths[i]);
      std::span<const uint8_t> data(bytes.data_as<const uint8_t>(),
                                    bytes.nbytes());
      feedline::Buffer image =
          feedline::media::decode_image(data, options, paths[i], i);
      // Touch the result so that no compiler can call the work unused.
      if (image.numel() != 3 * 224 * 224)
        throw std::runtime_error("wrong output shape");
      done.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::exception& e) {
      ++failed;
      std::call_once(reported, [&] {
        std::fprintf(stderr, "image_limit: %s\n", e.what());
      });
    }
  }
  return failed;
}

Run run_once(const Args& args, const feedline::media::ImageOptions& options) {
  std::atomic<int64_t> done{0};
  std::vector<int64_t> failed(static_cast<std::size_t>(args.threads), 0);
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  {
    // Thread start-up is inside the timing: it is part of what a pass costs,
    // and at ~50 us per thread it is noise against ~1 s of decoding.
    std::vector<std::jthread> workers;
    for (int t = 0; t < args.threads; ++t) {
      workers.emplace_back([&, t] {
        failed[static_cast<std::size_t>(t)] = decode_stride(
            args.paths, static_cast<std::size_t>(t),
            static_cast<std::size_t>(args.threads), options, done);
      });
    }
  }  // jthreads join here
  Run run;
  run.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  run.cpu_s = cpu_seconds() - cpu0;
  run.count = done.load();
  for (int64_t f : failed) run.failed += f;
  return run;
}

void print_run(const Run& run) {
  std::printf(
      R"({"wall_s": %.6f, "cpu_s": %.6f, "count": %lld, "failed": %lld})",
      run.wall_s, run.cpu_s, static_cast<long long>(run.count),
      static_cast<long long>(run.failed));
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "image_limit: %s\n"
               "usage: image_limit THREADS [--repeat R] [--rrc] (--list FILE | "
               "PATH...)\n",
               why);
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  if (argc < 3) usage("too few arguments");
  Args args;
  args.threads = std::atoi(argv[1]);
  if (args.threads < 1) usage("THREADS must be a positive integer");
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rrc") {
      args.rrc = true;
    } else if (arg == "--repeat" || arg == "--list") {
      if (i + 1 >= argc) usage("option needs a value");
      const std::string value = argv[++i];
      if (arg == "--repeat") {
        args.repeat = std::atoi(value.c_str());
        if (args.repeat < 1) usage("--repeat must be a positive integer");
      } else {
        std::ifstream list(value);
        if (!list) usage("cannot open the --list file");
        for (std::string line; std::getline(list, line);) {
          if (!line.empty()) args.paths.push_back(line);
        }
      }
    } else {
      args.paths.push_back(arg);
    }
  }
  if (args.paths.empty()) usage("no images");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  const feedline::media::ImageOptions options =
      args.rrc ? rrc_options() : imagenet_options();
  feedline::media::check_image_options(options);

  const Run warmup = run_once(args, options);
  std::vector<Run> runs;
  for (int r = 0; r < args.repeat; ++r) runs.push_back(run_once(args, options));

  std::printf(R"({"threads": %d, "images": %zu, "warmup": )", args.threads,
              args.paths.size());
  print_run(warmup);
  std::printf(R"(, "runs": [)");
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (r > 0) std::printf(", ");
    print_run(runs[r]);
  }
  std::printf(R"(], "peak_rss_kib": %ld})"
              "\n",
              peak_rss_kib());
  const bool ok = warmup.failed == 0 &&
                  std::all_of(runs.begin(), runs.end(),
                              [](const Run& r) { return r.failed == 0; });
  return ok ? 0 : 1;
}
