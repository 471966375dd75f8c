// SPDX-License-Identifier: Apache-2.0
//
// Channel: the bounded queue in front of a stage.
//
// A channel has one producer stage and one consumer stage. Its entries are
// guarded by the consumer's mutex (the consumer is the one that pops; the
// producer appends through StageRunner::deliver(), which takes that mutex).
// Capacity is enforced by reservation: before starting a call whose result
// will go into the channel, the producer reserves a slot with the lock-free
// try_reserve(); a reserved slot is later filled (deliver) or given back
// (unreserve). So a delivery never finds the channel full and nobody ever
// blocks on it.
//
// Room wake-ups use a Dekker-style handshake with `producer_waiting`: the
// producer sets the flag and re-checks the free count; the consumer adds to
// the free count and then reads the flag. With both sides sequentially
// consistent, at least one of them sees the other, so no wake-up is lost.
//
// The sink's consumer takes every ready entry in one lock (take_all()) and
// hands them out one by one without it. Taken entries keep their slots until
// handed out (hand_out(), then release()), and count as queued in the stats
// until then, so depth and capacity read as if each entry were popped when
// the consumer receives it.

#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>

#include "feedline/base/clock.h"
#include "feedline/pipeline/item.h"
#include "feedline/pipeline/stats.h"

namespace feedline::detail {

class StageRunner;

struct Entry {
  Item item;
  bool epoch_end = false;
};

class Channel {
 public:
  Channel(std::size_t slots, StageRunner* consumer)
      : slots_(slots),
        wake_threshold_(std::max<long>(1, static_cast<long>(slots) / 2)),
        free_(static_cast<long>(slots)),
        consumer_(consumer) {}

  std::size_t slots() const { return slots_; }
  StageRunner* consumer() const { return consumer_; }
  StageRunner* producer() const { return producer_; }
  void set_producer(StageRunner* producer) { producer_ = producer; }

  // Producer side, lock-free. Returns true if `n` slots were reserved.
  bool try_reserve(long n) {
    long f = free_.load(std::memory_order_relaxed);
    while (f >= n) {
      if (free_.compare_exchange_weak(f, f - n, std::memory_order_seq_cst)) {
        return true;
      }
    }
    return false;
  }
  void unreserve(long n) { free_.fetch_add(n, std::memory_order_seq_cst); }

  // Consumer side: gives `n` popped slots back. Returns true if the producer
  // asked to be told (it then must be sent on_room()). The producer is told
  // only once half the slots are free, so that it refills in one run rather
  // than waking for every slot (a waiting producer has no call in flight, so
  // the channel always drains that far).
  bool release(long n) {
    long f = free_.fetch_add(n, std::memory_order_seq_cst) + n;
    if (f < wake_threshold_) return false;
    return producer_waiting.exchange(false, std::memory_order_seq_cst);
  }

  // True once at least half the slots hold entries: deferred deliveries
  // then wake the consumer anyway.
  bool half_full() const { return entries.size() * 2 >= slots_; }

  // Entries queued, counting those taken but not handed out yet.
  std::size_t depth() const {
    return entries.size() +
           static_cast<std::size_t>(held_.load(std::memory_order_relaxed));
  }

  // Everything below is guarded by the consumer's mutex.
  void push(Entry e, Clock::time_point now) {
    account(now);
    entries.push_back(std::move(e));
    ++stats.items_put;
    stats.max_depth = std::max(stats.max_depth, depth());
  }
  Entry pop(Clock::time_point now) {
    account(now);
    Entry e = std::move(entries.front());
    entries.pop_front();
    ++stats.items_got;
    return e;
  }
  // Moves every entry to the end of `*out`; each stays counted as queued
  // until hand_out() is called for it.
  void take_all(Clock::time_point now, std::deque<Entry>* out) {
    account(now);
    const auto n = static_cast<long>(entries.size());
    held_.fetch_add(n, std::memory_order_relaxed);
    stats.items_got += static_cast<uint64_t>(n);
    std::move(entries.begin(), entries.end(), std::back_inserter(*out));
    entries.clear();
  }
  void start_clock(Clock::time_point now) {
    last_change_ = started_ = now;
    clock_started_ = true;
  }
  QueueStats snapshot(Clock::time_point now) {
    account(now);
    QueueStats s = stats;
    s.capacity = slots_;
    s.depth = depth();
    s.items_got -= s.depth - entries.size();
    s.elapsed = clock_started_ ? now - started_ : Clock::duration::zero();
    return s;
  }

  std::deque<Entry> entries;
  bool closed = false;  // the producer has finished
  QueueStats stats;
  std::atomic<bool> producer_waiting{false};

  // Consumer side, without the mutex: one taken entry was handed out. Call
  // before release() of its slot. account() charges the entries handed out
  // since the last account() for half the interval (the consumer does not
  // read the clock per entry: a hand-out is a few nanoseconds), rather than
  // for none of it, which made the sink's occupancy depend on how often
  // snapshots were taken.
  void hand_out() {
    handed_.fetch_add(1, std::memory_order_relaxed);
    held_.fetch_sub(1, std::memory_order_release);
  }

 private:
  void account(Clock::time_point now) {
    // Before start_clock() there is no interval to charge (the clock's
    // zero is not when the queue began).
    if (!clock_started_) return;
    if (now <= last_change_) {
      // No time passed: entries handed out meanwhile were held for none.
      handed_.store(0, std::memory_order_relaxed);
      return;
    }
    auto dt = now - last_change_;
    const std::size_t d =
        entries.size() +
        static_cast<std::size_t>(held_.load(std::memory_order_acquire));
    // Entries handed out since the last account() were held for part of
    // the interval: half of it each, on average. (One handed out while this
    // runs may be counted here and in the depth: a few nanoseconds' race.)
    const int64_t handed = handed_.exchange(0, std::memory_order_relaxed);
    stats.depth_integral +=
        (static_cast<double>(d) + 0.5 * static_cast<double>(handed)) *
        static_cast<double>(dt.count());
    if (d == 0) stats.time_empty += dt;
    if (d >= slots_) stats.time_full += dt;
    last_change_ = now;
  }

  const std::size_t slots_;
  const long wake_threshold_;
  std::atomic<long> free_;
  std::atomic<long> held_{0};       // taken by the consumer, not handed out
  std::atomic<int64_t> handed_{0};  // handed out since the last account()
  StageRunner* const consumer_;
  StageRunner* producer_ = nullptr;
  Clock::time_point started_{};
  Clock::time_point last_change_{};
  bool clock_started_ = false;
};

}  // namespace feedline::detail
