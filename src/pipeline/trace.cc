// SPDX-License-Identifier: Apache-2.0
//
// TraceBuffer and to_trace_json().

#include "feedline/pipeline/trace.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "pipeline/json_writer.h"
#include "pipeline/trace_buffer.h"

namespace feedline {
namespace detail {
namespace {

// A small number per thread that runs a sampled call: 1, 2, ... in the
// order they first do (the trace's thread ids).
std::atomic<int> g_trace_threads{0};
thread_local int t_trace_thread = 0;

int trace_thread() {
  if (t_trace_thread == 0) {
    t_trace_thread =
        g_trace_threads.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  return t_trace_thread;
}

}  // namespace

void TraceBuffer::record(int stage, Clock::time_point t0, Clock::time_point t1,
                         bool failed, bool async) {
  TraceEvent e;
  e.stage = stage;
  e.thread = async ? 0 : trace_thread();
  e.async = async;
  e.failed = failed;
  const auto origin = Clock::time_point(
      Clock::duration(origin_ns_.load(std::memory_order_acquire)));
  e.start = std::max(t0 - origin, Clock::duration(0));
  e.duration = std::max(t1 - t0, Clock::duration(0));
  MutexLock lock(mu_);
  ++recorded_;
  if (ring_.size() < capacity_) {
    ring_.push_back(e);
  } else {
    ring_[next_] = e;
  }
  next_ = (next_ + 1) % capacity_;
}

Trace TraceBuffer::snapshot() const {
  Trace t;
  t.every = every_;
  MutexLock lock(mu_);
  t.recorded = recorded_;
  t.dropped = recorded_ - ring_.size();
  t.events.reserve(ring_.size());
  // Oldest first: a full ring's oldest event is where the next one goes.
  std::size_t first = ring_.size() < capacity_ ? 0 : next_;
  for (std::size_t i = 0; i < ring_.size(); ++i) {
    t.events.push_back(ring_[(first + i) % ring_.size()]);
  }
  return t;
}

}  // namespace detail

std::string to_trace_json(const Trace& trace, const PipelineStats& stats) {
  using detail::JsonObject;
  std::string out;
  // The objects close (write their '}') when they go out of scope: before
  // `out` is returned.
  {
    JsonObject doc(&out);
    std::string* list = doc.key("traceEvents");
    list->push_back('[');
    bool first = true;
    auto event = [&]() -> std::string* {
      if (!first) list->push_back(',');
      first = false;
      return list;
    };
    {
      JsonObject m(event());
      m.add("name", std::string("process_name"));
      m.add("ph", std::string("M"));
      m.add("pid", uint64_t{1});
      m.add("tid", uint64_t{0});
      JsonObject args(m.key("args"));
      args.add("name", "feedline pipeline '" + stats.name + "'");
    }
    std::set<int> threads;
    for (const TraceEvent& e : trace.events) threads.insert(e.thread);
    for (int t : threads) {
      JsonObject m(event());
      m.add("name", std::string("thread_name"));
      m.add("ph", std::string("M"));
      m.add("pid", uint64_t{1});
      m.add("tid", static_cast<uint64_t>(t));
      JsonObject args(m.key("args"));
      args.add("name", t == 0 ? std::string("async calls")
                              : "worker " + std::to_string(t));
    }
    auto stage_name = [&stats](const TraceEvent& e) {
      return e.stage >= 0 &&
                     static_cast<std::size_t>(e.stage) < stats.stages.size()
                 ? stats.stages[static_cast<std::size_t>(e.stage)].name
                 : "stage " + std::to_string(e.stage);
    };
    auto stage_kind = [&stats](const TraceEvent& e) {
      return e.stage >= 0 &&
                     static_cast<std::size_t>(e.stage) < stats.stages.size()
                 ? stats.stages[static_cast<std::size_t>(e.stage)].kind
                 : std::string("stage");
    };
    uint64_t async_id = 0;
    for (const TraceEvent& e : trace.events) {
      if (!e.async) {
        JsonObject x(event());
        x.add("name", stage_name(e));
        x.add("cat", stage_kind(e));
        x.add("ph", std::string("X"));
        x.add("pid", uint64_t{1});
        x.add("tid", static_cast<uint64_t>(e.thread));
        x.add_micros("ts", e.start);
        x.add_micros("dur", e.duration);
        JsonObject args(x.key("args"));
        args.add("failed", e.failed);
        continue;
      }
      ++async_id;
      for (const char* ph : {"b", "e"}) {
        JsonObject a(event());
        a.add("name", stage_name(e));
        a.add("cat", std::string("async"));
        a.add("ph", std::string(ph));
        a.add("id", async_id);
        a.add("pid", uint64_t{1});
        a.add("tid", uint64_t{0});
        a.add_micros("ts", ph[0] == 'b' ? e.start : e.start + e.duration);
        if (ph[0] == 'e') {
          JsonObject args(a.key("args"));
          args.add("failed", e.failed);
        }
      }
    }
    list->push_back(']');
    doc.add("displayTimeUnit", std::string("ms"));
    JsonObject other(doc.key("otherData"));
    other.add("feedline_trace_every",
              static_cast<uint64_t>(std::max(trace.every, 0)));
    other.add("recorded", trace.recorded);
    other.add("dropped", trace.dropped);
  }
  return out;
}

}  // namespace feedline
