// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace feedline {

namespace {
constexpr uint64_t kSub = uint64_t{1} << LatencyHistogram::kSubBucketBits;
}  // namespace

int LatencyHistogram::bucket_of(uint64_t v) {
  if (v < kSub) return static_cast<int>(v);
  int e = 63 - std::countl_zero(v);
  uint64_t sub = (v >> (e - kSubBucketBits)) & (kSub - 1);
  return (e - kSubBucketBits + 1) * static_cast<int>(kSub) +
         static_cast<int>(sub);
}

uint64_t LatencyHistogram::bucket_lower_bound(int bucket) {
  if (bucket < static_cast<int>(kSub)) return static_cast<uint64_t>(bucket);
  int e = bucket / static_cast<int>(kSub) - 1 + kSubBucketBits;
  uint64_t sub = static_cast<uint64_t>(bucket) % kSub;
  return (kSub + sub) << (e - kSubBucketBits);
}

void LatencyHistogram::record(std::chrono::nanoseconds value) {
  uint64_t v = value.count() > 0 ? static_cast<uint64_t>(value.count()) : 0;
  ++buckets_[static_cast<std::size_t>(bucket_of(v))];
  ++count_;
  sum_ += v;
  max_ = std::max(max_, v);
}

namespace {
// a + b, or UINT64_MAX if that overflows.
uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
}  // namespace

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    buckets_[i] = saturating_add(buckets_[i], other.buckets_[i]);
  }
  count_ = saturating_add(count_, other.count_);
  sum_ = saturating_add(sum_, other.sum_);
  max_ = std::max(max_, other.max_);
}

LatencyHistogram LatencyHistogram::since(
    const LatencyHistogram& earlier) const {
  LatencyHistogram d = *this;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    d.buckets_[i] -= std::min(d.buckets_[i], earlier.buckets_[i]);
  }
  d.count_ -= std::min(d.count_, earlier.count_);
  d.sum_ -= std::min(d.sum_, earlier.sum_);
  return d;
}

bool LatencyHistogram::restore(
    const std::vector<std::pair<int, uint64_t>>& counts, uint64_t sum,
    uint64_t max, LatencyHistogram* out) {
  LatencyHistogram h;
  int highest = -1;
  for (const auto& [bucket, n] : counts) {
    if (bucket < 0 || bucket >= kNumBuckets || n == 0) return false;
    uint64_t& slot = h.buckets_[static_cast<std::size_t>(bucket)];
    // Counts saturate, as merge() does with counters from elsewhere.
    slot = saturating_add(slot, n);
    h.count_ = saturating_add(h.count_, n);
    highest = std::max(highest, bucket);
  }
  if (highest < 0 ? max != 0 : bucket_of(max) != highest) return false;
  h.sum_ = sum;
  h.max_ = max;
  *out = h;
  return true;
}

std::chrono::nanoseconds LatencyHistogram::mean() const {
  return std::chrono::nanoseconds(count_ == 0 ? 0 : sum_ / count_);
}

std::chrono::nanoseconds LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return std::chrono::nanoseconds(0);
  if (!(q >= 0)) q = 0;  // NaN too: clamp() passes it on
  q = std::min(q, 1.0);
  uint64_t rank =
      static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (int b = 0; b < kNumBuckets; ++b) {
    seen += buckets_[static_cast<std::size_t>(b)];
    if (seen >= rank) {
      uint64_t lo = bucket_lower_bound(b);
      uint64_t hi = b + 1 < kNumBuckets ? bucket_lower_bound(b + 1) : lo;
      uint64_t mid = hi > lo + 1 ? lo + (hi - 1 - lo) / 2 : lo;
      return std::chrono::nanoseconds(
          static_cast<int64_t>(std::min(mid, max_)));
    }
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(max_));
}

}  // namespace feedline
