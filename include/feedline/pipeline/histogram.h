// SPDX-License-Identifier: Apache-2.0
//
// LatencyHistogram: a fixed-size, mergeable histogram of durations.
//
// Buckets are log-linear: 8 sub-buckets per power of two, so any recorded
// value is reported within 12.5% of its true value, from 1 ns to ~584 years,
// in 4 KiB and without allocation. Two histograms merge by adding buckets,
// which is how per-stage latencies are combined across workers and ranks.
//
// Thread safety: none; the engine records under the stage's lock and
// snapshots copy it.

#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

namespace feedline {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 3;
  static constexpr int kNumBuckets = (64 - kSubBucketBits + 1)
                                     << kSubBucketBits;

  void record(std::chrono::nanoseconds value);
  // Adds `other`'s buckets, count and sum (saturating: counters from other
  // processes are not trusted to be small).
  void merge(const LatencyHistogram& other);
  // Returns what was recorded after `earlier`, a snapshot of this same
  // histogram taken before (interval statistics from two totals). max() of
  // the result is the overall maximum, which cannot be un-merged.
  // Requires: every bucket of `earlier` <= the same bucket here.
  LatencyHistogram since(const LatencyHistogram& earlier) const;

  uint64_t count() const { return count_; }
  std::chrono::nanoseconds sum() const {
    return std::chrono::nanoseconds(sum_);
  }
  std::chrono::nanoseconds max() const {
    return std::chrono::nanoseconds(max_);
  }
  std::chrono::nanoseconds mean() const;

  // Returns the value at quantile `q` in [0, 1] (0 when empty): the midpoint
  // of the bucket holding the ceil(q * count)-th smallest value, clamped to
  // the observed maximum.
  std::chrono::nanoseconds quantile(double q) const;

  // The recorded count of one bucket.
  uint64_t bucket_count(int bucket) const {
    return buckets_[static_cast<std::size_t>(bucket)];
  }
  // A histogram holding `counts` (bucket, count) and the given sum and
  // maximum; count() is the sum of the counts (saturating, as merge()).
  // Returns false, leaving `*out` alone, when a bucket is out of range or
  // given a zero count, or `max` does not fall in the highest non-empty
  // bucket.
  static bool restore(const std::vector<std::pair<int, uint64_t>>& counts,
                      uint64_t sum, uint64_t max, LatencyHistogram* out);

  // The bucket a value falls into, and the smallest value of a bucket.
  static int bucket_of(uint64_t value_ns);
  static uint64_t bucket_lower_bound(int bucket);

 private:
  std::array<uint64_t, kNumBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
};

}  // namespace feedline
