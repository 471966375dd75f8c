// SPDX-License-Identifier: Apache-2.0
//
// pipeline_demo: a data-loading job in miniature on the native C++ API, with
// no media library:
//
//   source(ids) -> read[4] -> decode[2] -> aggregate(32) -> collate -> sink(4)
//
// "read" stands in for fetching a file: it makes 64 KiB of deterministic
// pseudo-random bytes per sample id. "decode" stands in for decoding: real CPU
// work (box-filter passes over the bytes, then a 16:1 reduction to 4,096
// floats). "collate" turns a batch of samples into one contiguous buffer, the
// shape a training step consumes. The consumer shows progress in place, then
// prints throughput, CPU cost, peak memory and the engine's per-stage stats.
//
// Usage: pipeline_demo [--items N] [--threads N]
// Exits with 1 if any item is missing from the output, 2 on bad arguments.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <ranges>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/stats.h"

namespace {

constexpr std::size_t kSampleBytes = 64 * 1024;
constexpr std::size_t kSampleFloats = 4096;
constexpr std::size_t kReduction = kSampleBytes / kSampleFloats;
constexpr std::size_t kBatchSize = 32;
constexpr int kFilterPasses = 12;

// Returns the "file contents" of sample `id`: xorshift64 bytes seeded by the
// id, so every run and every thread count produce the same data.
std::vector<uint8_t> read_sample(int id) {
  uint64_t x = (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ULL) | 1;
  std::vector<uint8_t> bytes(kSampleBytes);
  for (std::size_t i = 0; i < kSampleBytes; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(bytes.data() + i, &x, 8);
  }
  return bytes;
}

// Returns 4,096 floats in [0, 1]: a few passes of a 3-tap box filter over the
// bytes, then the mean of each run of 16 values.
std::vector<float> decode_sample(const std::vector<uint8_t>& bytes) {
  std::vector<float> signal(bytes.begin(), bytes.end());
  for (int pass = 0; pass < kFilterPasses; ++pass) {
    float previous = signal[0];
    for (std::size_t i = 1; i + 1 < signal.size(); ++i) {
      const float current = signal[i];
      signal[i] = (previous + current + signal[i + 1]) * (1.0f / 3.0f);
      previous = current;
    }
  }
  std::vector<float> out(kSampleFloats);
  for (std::size_t j = 0; j < kSampleFloats; ++j) {
    float sum = 0;
    for (std::size_t k = 0; k < kReduction; ++k)
      sum += signal[j * kReduction + k];
    out[j] = sum / (255.0f * static_cast<float>(kReduction));
  }
  return out;
}

// Returns the batch's samples back to back, one contiguous buffer.
std::vector<float> collate(std::vector<std::vector<float>> batch) {
  std::vector<float> out;
  out.reserve(batch.size() * kSampleFloats);
  for (const auto& sample : batch)
    out.insert(out.end(), sample.begin(), sample.end());
  return out;
}

double seconds_of(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) +
         static_cast<double>(tv.tv_usec) * 1e-6;
}

// Parses a positive integer flag value; returns 0 when it is not one.
int parse_positive(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 100'000'000) return 0;
  return static_cast<int>(value);
}

int run(int num_items, int num_threads) {
  auto pipeline =
      feedline::PipelineBuilder()
          .add_source(std::views::iota(0, num_items), {.name = "ids"})
          .pipe(read_sample, {.name = "read", .concurrency = 4})
          .pipe([](std::vector<uint8_t> bytes) { return decode_sample(bytes); },
                {.name = "decode", .concurrency = 2})
          .aggregate(kBatchSize)
          .pipe(collate, {.name = "collate"})
          .add_sink(4)
          .build(num_threads);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_report = start;
  long long items = 0;
  int batches = 0;
  for (std::vector<float>& batch : pipeline) {
    items += static_cast<long long>(batch.size() / kSampleFloats);
    ++batches;
    // A clock read per batch is cheap; no sleeping or extra thread needed.
    const auto now = Clock::now();
    if (now >= next_report) {
      const double elapsed = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "\rbatches %5d  items %7lld  %8.0f items/s", batches,
                   items,
                   elapsed > 0 ? static_cast<double>(items) / elapsed : 0.0);
      next_report = now + std::chrono::milliseconds(250);
    }
  }
  const double wall =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "\rbatches %5d  items %7lld  done%20s\n", batches, items,
               "");

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
  const double n = static_cast<double>(std::max(items, 1LL));
  std::printf("items:        %lld of %d (threads %d)\n", items, num_items,
              num_threads);
  std::printf("wall time:    %.3f s\n", wall);
  std::printf("throughput:   %.0f items/s\n",
              static_cast<double>(items) / wall);
  std::printf("CPU time:     %.3f s (%.1f us per item)\n", cpu, cpu / n * 1e6);
  // ru_maxrss is in KiB on Linux.
  std::printf("peak RSS:     %.1f MiB\n",
              static_cast<double>(usage.ru_maxrss) / 1024.0);
  const feedline::PipelineStats stats = pipeline.stats();
  std::printf("\n%s\n", feedline::format_table(stats).c_str());
  std::printf("stats-json: %s\n", feedline::to_json(stats).c_str());

  if (items != num_items) {
    std::fprintf(stderr, "error: expected %d items, got %lld\n", num_items,
                 items);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int num_items = 2000;
  int num_threads =
      static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    int* target = nullptr;
    if (std::strcmp(argv[i], "--items") == 0) target = &num_items;
    if (std::strcmp(argv[i], "--threads") == 0) target = &num_threads;
    if (target == nullptr || !has_value ||
        (*target = parse_positive(argv[++i])) == 0) {
      std::fprintf(stderr, "usage: %s [--items N] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  try {
    return run(num_items, num_threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
    return 1;
  }
}
