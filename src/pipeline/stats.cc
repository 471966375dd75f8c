// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "feedline/base/error.h"
#include "pipeline/json_writer.h"

namespace feedline {
namespace {

using detail::append_list;
using detail::JsonObject;

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

void append_queue(std::string* out, const QueueStats& q) {
  JsonObject o(out);
  o.add("capacity", static_cast<uint64_t>(q.capacity));
  o.add("depth", static_cast<uint64_t>(q.depth));
  o.add("max_depth", static_cast<uint64_t>(q.max_depth));
  o.add("items_put", q.items_put);
  o.add("items_got", q.items_got);
  o.add("occupancy", q.occupancy());
  o.add_seconds("time_empty_s", q.time_empty);
  o.add_seconds("time_full_s", q.time_full);
  o.add_seconds("elapsed_s", q.elapsed);
  o.add_seconds("put_wait_s", q.put_wait);
  o.add_seconds("get_wait_s", q.get_wait);
}

void append_stage(std::string* out, const StageStats& s) {
  JsonObject o(out);
  o.add("name", s.name);
  o.add("kind", s.kind);
  o.add("concurrency", static_cast<uint64_t>(s.concurrency));
  o.add("items_in", s.items_in);
  o.add("items_out", s.items_out);
  o.add("items_skipped", s.items_skipped);
  o.add("calls", s.calls);
  o.add("failures", s.failures);
  o.add("epochs", s.epochs);
  o.add_seconds("op_time_total_s", s.op_time.sum());
  o.add_seconds("op_time_mean_s", s.op_time.mean());
  o.add_seconds("op_time_p50_s", s.op_time.quantile(0.5));
  o.add_seconds("op_time_p90_s", s.op_time.quantile(0.9));
  o.add_seconds("op_time_p99_s", s.op_time.quantile(0.99));
  o.add_seconds("op_time_max_s", s.op_time.max());
  // The histogram itself, so that stats_from_json() restores it exactly.
  o.add("op_time_sum_ns", static_cast<uint64_t>(s.op_time.sum().count()));
  o.add("op_time_max_ns", static_cast<uint64_t>(s.op_time.max().count()));
  std::string* buckets = o.key("op_time_buckets");
  buckets->push_back('[');
  bool first = true;
  for (int b = 0; b < LatencyHistogram::kNumBuckets; ++b) {
    uint64_t n = s.op_time.bucket_count(b);
    if (n == 0) continue;
    if (!first) buckets->push_back(',');
    first = false;
    *buckets += "[" + std::to_string(b) + "," + std::to_string(n) + "]";
  }
  buckets->push_back(']');
  o.add_seconds("wait_input_s", s.wait_input);
  o.add_seconds("wait_output_s", s.wait_output);
  o.add("gil_acquisitions", s.gil_acquisitions);
  o.add_seconds("gil_wait_s", s.gil_wait);
  o.add_seconds("gil_held_s", s.gil_held);
  o.add("finished", s.finished);
  o.add("failed", s.failed);
  append_queue(o.key("input_queue"), s.input_queue);
}

std::string format_duration(std::chrono::nanoseconds d) {
  char buf[32];
  double ns = static_cast<double>(d.count());
  if (ns < 1e3) {
    std::snprintf(buf, sizeof(buf), "%.0fns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof(buf), "%.1fus", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof(buf), "%.1fms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2fs", ns / 1e9);
  }
  return buf;
}

// The binary record of encode_stage_stats: a magic and version, the stage
// count, then each stage's fields in declaration order. Integers and
// durations are 8 bytes in the machine's byte order, strings a 4-byte length
// and the bytes, histograms their sum, max, non-empty bucket count and
// (bucket, count) pairs.
constexpr char kStatsMagic[4] = {'F', 'L', 'S', '2'};
constexpr uint32_t kMaxStages = 1u << 16;
constexpr uint32_t kMaxName = 1u << 12;

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out_->append(buf, sizeof(T));
  }
  void put(std::chrono::nanoseconds d) { put<int64_t>(d.count()); }
  void put(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_->append(s);
  }

 private:
  std::string* out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  T get(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::chrono::nanoseconds duration(const char* what) {
    int64_t ns = get<int64_t>(what);
    if (ns < 0) fail(what, "is negative");
    return std::chrono::nanoseconds(ns);
  }
  std::string string(const char* what) {
    uint32_t n = get<uint32_t>(what);
    if (n > kMaxName) fail(what, "is longer than 4096 bytes");
    need(n, what);
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool flag(const char* what) {
    uint8_t b = get<uint8_t>(what);
    if (b > 1) fail(what, "is neither 0 nor 1");
    return b == 1;
  }
  void need(std::size_t n, const char* what) const {
    if (in_.size() - pos_ < n) fail(what, "is cut off");
  }
  [[noreturn]] void fail(const char* what, const char* problem) const {
    throw FormatError("stage statistics record: " + std::string(what) + " " +
                      problem + " (at byte " + std::to_string(pos_) + " of " +
                      std::to_string(in_.size()) + ")");
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

void put_histogram(Writer* w, const LatencyHistogram& h) {
  std::vector<std::pair<uint16_t, uint64_t>> nonzero;
  for (int b = 0; b < LatencyHistogram::kNumBuckets; ++b) {
    if (uint64_t n = h.bucket_count(b); n > 0) {
      nonzero.emplace_back(static_cast<uint16_t>(b), n);
    }
  }
  w->put<uint64_t>(static_cast<uint64_t>(h.sum().count()));
  w->put<uint64_t>(static_cast<uint64_t>(h.max().count()));
  w->put<uint32_t>(static_cast<uint32_t>(nonzero.size()));
  for (const auto& [b, n] : nonzero) {
    w->put<uint16_t>(b);
    w->put<uint64_t>(n);
  }
}

LatencyHistogram get_histogram(Reader* r) {
  uint64_t sum = r->get<uint64_t>("op_time sum");
  uint64_t max = r->get<uint64_t>("op_time max");
  uint32_t n = r->get<uint32_t>("op_time bucket count");
  if (n > LatencyHistogram::kNumBuckets) r->fail("op_time buckets", "overflow");
  std::vector<std::pair<int, uint64_t>> counts;
  counts.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    int b = r->get<uint16_t>("op_time bucket");
    counts.emplace_back(b, r->get<uint64_t>("op_time bucket count"));
  }
  LatencyHistogram h;
  if (!LatencyHistogram::restore(counts, sum, max, &h)) {
    r->fail("op_time", "is not a consistent histogram");
  }
  return h;
}

void put_stage(Writer* w, const StageStats& s) {
  w->put(s.name);
  w->put(s.kind);
  w->put<int32_t>(s.concurrency);
  for (uint64_t v : {s.items_in, s.items_out, s.items_skipped, s.calls,
                     s.failures, s.epochs}) {
    w->put<uint64_t>(v);
  }
  put_histogram(w, s.op_time);
  w->put(s.wait_input);
  w->put(s.wait_output);
  w->put<uint64_t>(s.gil_acquisitions);
  w->put(s.gil_wait);
  w->put(s.gil_held);
  w->put<uint8_t>(s.finished ? 1 : 0);
  w->put<uint8_t>(s.failed ? 1 : 0);
  const QueueStats& q = s.input_queue;
  for (uint64_t v : {uint64_t{q.capacity}, uint64_t{q.depth},
                     uint64_t{q.max_depth}, q.items_put, q.items_got}) {
    w->put<uint64_t>(v);
  }
  w->put<double>(q.depth_integral);
  for (auto d :
       {q.time_empty, q.time_full, q.elapsed, q.put_wait, q.get_wait}) {
    w->put(d);
  }
}

StageStats get_stage(Reader* r) {
  StageStats s;
  s.name = r->string("stage name");
  s.kind = r->string("stage kind");
  s.concurrency = r->get<int32_t>("concurrency");
  if (s.concurrency < 0) r->fail("concurrency", "is negative");
  s.items_in = r->get<uint64_t>("items_in");
  s.items_out = r->get<uint64_t>("items_out");
  s.items_skipped = r->get<uint64_t>("items_skipped");
  s.calls = r->get<uint64_t>("calls");
  s.failures = r->get<uint64_t>("failures");
  s.epochs = r->get<uint64_t>("epochs");
  s.op_time = get_histogram(r);
  s.wait_input = r->duration("wait_input");
  s.wait_output = r->duration("wait_output");
  s.gil_acquisitions = r->get<uint64_t>("gil_acquisitions");
  s.gil_wait = r->duration("gil_wait");
  s.gil_held = r->duration("gil_held");
  s.finished = r->flag("finished");
  s.failed = r->flag("failed");
  QueueStats& q = s.input_queue;
  q.capacity = r->get<uint64_t>("queue capacity");
  q.depth = r->get<uint64_t>("queue depth");
  q.max_depth = r->get<uint64_t>("queue max_depth");
  q.items_put = r->get<uint64_t>("queue items_put");
  q.items_got = r->get<uint64_t>("queue items_got");
  q.depth_integral = r->get<double>("queue depth_integral");
  if (!(q.depth_integral >= 0) || !std::isfinite(q.depth_integral)) {
    r->fail("queue depth_integral", "is invalid");
  }
  q.time_empty = r->duration("queue time_empty");
  q.time_full = r->duration("queue time_full");
  q.elapsed = r->duration("queue elapsed");
  q.put_wait = r->duration("queue put_wait");
  q.get_wait = r->duration("queue get_wait");
  return s;
}

}  // namespace

double QueueStats::occupancy() const {
  if (capacity == 0 || elapsed.count() <= 0) return 0;
  return depth_integral /
         (static_cast<double>(capacity) * static_cast<double>(elapsed.count()));
}

// Sums saturate: counters from another process are not trusted to be small.
template <typename T>
void add_to(T* into, T from) {
  *into = from > std::numeric_limits<T>::max() - *into
              ? std::numeric_limits<T>::max()
              : *into + from;
}

void add_to(std::chrono::nanoseconds* into, std::chrono::nanoseconds from) {
  using Rep = std::chrono::nanoseconds::rep;
  Rep a = std::max<Rep>(into->count(), 0);
  Rep b = std::max<Rep>(from.count(), 0);
  add_to(&a, b);
  *into = std::chrono::nanoseconds(a);
}

void accumulate(StageStats* into, const StageStats& from) {
  add_to(&into->concurrency, std::max(from.concurrency, 0));
  add_to(&into->items_in, from.items_in);
  add_to(&into->items_out, from.items_out);
  add_to(&into->items_skipped, from.items_skipped);
  add_to(&into->calls, from.calls);
  add_to(&into->failures, from.failures);
  add_to(&into->epochs, from.epochs);
  into->op_time.merge(from.op_time);
  add_to(&into->wait_input, from.wait_input);
  add_to(&into->wait_output, from.wait_output);
  add_to(&into->gil_acquisitions, from.gil_acquisitions);
  add_to(&into->gil_wait, from.gil_wait);
  add_to(&into->gil_held, from.gil_held);
  into->finished = into->finished && from.finished;
  into->failed = into->failed || from.failed;
  QueueStats& q = into->input_queue;
  const QueueStats& f = from.input_queue;
  add_to(&q.capacity, f.capacity);
  add_to(&q.depth, f.depth);
  add_to(&q.max_depth, f.max_depth);
  add_to(&q.items_put, f.items_put);
  add_to(&q.items_got, f.items_got);
  // Mean occupancy of the summed queues: integrals over the longer span.
  q.depth_integral += f.depth_integral;
  add_to(&q.time_empty, f.time_empty);
  add_to(&q.time_full, f.time_full);
  q.elapsed = std::max(q.elapsed, f.elapsed);
  add_to(&q.put_wait, f.put_wait);
  add_to(&q.get_wait, f.get_wait);
}

namespace {

template <typename T>
T minus(T now, T earlier) {
  return now > earlier ? now - earlier : T{};
}

StageStats stage_since(const StageStats& now, const StageStats& earlier) {
  StageStats d = now;  // names, kind, concurrency, flags: now's
  d.items_in = minus(now.items_in, earlier.items_in);
  d.items_out = minus(now.items_out, earlier.items_out);
  d.items_skipped = minus(now.items_skipped, earlier.items_skipped);
  d.calls = minus(now.calls, earlier.calls);
  d.failures = minus(now.failures, earlier.failures);
  d.epochs = minus(now.epochs, earlier.epochs);
  d.op_time = now.op_time.since(earlier.op_time);
  d.wait_input = minus(now.wait_input, earlier.wait_input);
  d.wait_output = minus(now.wait_output, earlier.wait_output);
  d.gil_acquisitions = minus(now.gil_acquisitions, earlier.gil_acquisitions);
  d.gil_wait = minus(now.gil_wait, earlier.gil_wait);
  d.gil_held = minus(now.gil_held, earlier.gil_held);
  QueueStats& q = d.input_queue;
  const QueueStats& e = earlier.input_queue;
  q.items_put = minus(q.items_put, e.items_put);
  q.items_got = minus(q.items_got, e.items_got);
  q.depth_integral = minus(q.depth_integral, e.depth_integral);
  q.time_empty = minus(q.time_empty, e.time_empty);
  q.time_full = minus(q.time_full, e.time_full);
  q.elapsed = minus(q.elapsed, e.elapsed);
  q.put_wait = minus(q.put_wait, e.put_wait);
  q.get_wait = minus(q.get_wait, e.get_wait);
  return d;
}

}  // namespace

PipelineStats stats_since(const PipelineStats& now,
                          const PipelineStats& earlier) {
  PipelineStats d = now;
  d.elapsed = minus(now.elapsed, earlier.elapsed);
  d.items_delivered = minus(now.items_delivered, earlier.items_delivered);
  for (std::size_t i = 0; i < d.stages.size() && i < earlier.stages.size();
       ++i) {
    if (earlier.stages[i].name != now.stages[i].name) continue;
    d.stages[i] = stage_since(now.stages[i], earlier.stages[i]);
  }
  return d;
}

std::string encode_stage_stats(const std::vector<StageStats>& stages) {
  std::string out(kStatsMagic, sizeof(kStatsMagic));
  Writer w(&out);
  w.put<uint32_t>(static_cast<uint32_t>(stages.size()));
  for (const StageStats& s : stages) put_stage(&w, s);
  return out;
}

std::vector<StageStats> decode_stage_stats(std::string_view record) {
  Reader r(record);
  r.need(sizeof(kStatsMagic), "header");
  if (record.substr(0, sizeof(kStatsMagic)) !=
      std::string_view(kStatsMagic, sizeof(kStatsMagic))) {
    r.fail("header", "is not FLS2");
  }
  (void)r.get<uint32_t>("header");
  uint32_t n = r.get<uint32_t>("stage count");
  if (n > kMaxStages) r.fail("stage count", "is over 65536");
  std::vector<StageStats> stages;
  for (uint32_t i = 0; i < n; ++i) stages.push_back(get_stage(&r));
  if (!r.done()) r.fail("the record", "has bytes after its last stage");
  return stages;
}

namespace {

std::string printf_string(const char* format, ...)
    __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

// The mean wait to take the GIL, per acquisition.
std::chrono::nanoseconds mean_wait(const StageStats& s) {
  return std::chrono::nanoseconds(static_cast<int64_t>(
      static_cast<double>(s.gil_wait.count()) /
      static_cast<double>(std::max<uint64_t>(s.gil_acquisitions, 1))));
}

// Thresholds of find_bottleneck(), as fractions of the elapsed time.
constexpr double kConsumerStarvedBelow = 0.05;  // the consumer barely waited
constexpr double kSinkFullAbove = 0.5;          // and the sink queue was full
constexpr double kConsumerGilWaitAbove = 0.2;   // unless the GIL held it back
constexpr double kGilHeldAbove = 0.5;           // the GIL was busy
constexpr double kGilWaitAbove = 0.25;          // and calls queued for it
constexpr double kSaturatedAbove = 0.85;        // busy threads / available

}  // namespace

Bottleneck find_bottleneck(const PipelineStats& stats) {
  Bottleneck b;
  const double elapsed = seconds(stats.elapsed);
  const StageStats* sink =
      !stats.stages.empty() && stats.stages.back().kind == "sink"
          ? &stats.stages.back()
          : nullptr;
  const std::size_t n_work = stats.stages.size() - (sink != nullptr ? 1 : 0);
  bool ran = false;
  for (std::size_t i = 0; i < n_work; ++i) ran |= stats.stages[i].calls > 0;
  if (elapsed <= 0 || !ran) {
    b.reason = "no stage has run a call yet";
    return b;
  }
  auto share = [elapsed](std::chrono::nanoseconds d) {
    return seconds(d) / elapsed;
  };
  auto pick = [&](std::size_t i) {
    b.stage = static_cast<int>(i);
    b.stage_name = stats.stages[i].name;
  };

  if (sink != nullptr && sink->items_in > 0) {
    const double starved = share(sink->wait_input);
    const double full = sink->input_queue.occupancy();
    // A Python consumer that waited long to retake the GIL with its items
    // was paced by whoever held the GIL: the check below decides.
    const double held_back = share(sink->gil_wait);
    if (starved < kConsumerStarvedBelow && full > kSinkFullAbove &&
        held_back < kConsumerGilWaitAbove) {
      b.kind = "consumer";
      b.reason = printf_string(
          "the consumer waited for data %.0f%% of the time and the sink "
          "queue was %.0f%% full on average",
          100 * starved, 100 * full);
      b.advice =
          "the pipeline keeps up with its consumer: speeding it up will not "
          "help; the consumer (the training step) sets the pace";
      return b;
    }
  }

  // Python: the share of time the GIL was held, the thread-seconds per
  // second calls queued for it, and the stage that held it longest.
  double gil_held = 0;
  double gil_wait = 0;
  double python_busy = 0;
  std::size_t gil_stage = 0;
  for (std::size_t i = 0; i < n_work; ++i) {
    const StageStats& s = stats.stages[i];
    if (s.gil_acquisitions == 0) continue;
    gil_held += share(s.gil_held);
    gil_wait += share(s.gil_wait);
    python_busy += share(s.op_time.sum());
    if (s.gil_held > stats.stages[gil_stage].gil_held) gil_stage = i;
  }
  if (gil_held >= kGilHeldAbove && gil_wait >= kGilWaitAbove &&
      gil_wait >= 0.2 * python_busy) {
    b.kind = "gil";
    pick(gil_stage);
    const StageStats& s = stats.stages[gil_stage];
    b.reason = printf_string(
        "Python held the GIL %.0f%% of the time and calls waited %.2f "
        "thread-seconds per second to take it (%s: %s per call); busy "
        "threads wait on the GIL, not on work",
        100 * std::min(gil_held, 1.0), gil_wait, s.name.c_str(),
        format_duration(mean_wait(s)).c_str());
    b.advice =
        "more threads or concurrency will not help: run the Python stages in "
        "worker processes (PipelineBuilder.to(ProcessPoolExecutorConfig(...))) "
        "or replace them with native ops";
    return b;
  }

  // Busy threads per stage: the saturated stage, or the saturated pool.
  std::size_t best = 0;
  std::size_t costliest = 0;
  double best_util = -1;
  double total_busy = 0;
  std::vector<double> busy(n_work);
  for (std::size_t i = 0; i < n_work; ++i) {
    const StageStats& s = stats.stages[i];
    busy[i] = share(s.op_time.sum());
    total_busy += busy[i];
    const double util = busy[i] / std::max(s.concurrency, 1);
    const double waits = share(s.wait_input) + share(s.wait_output);
    const double best_waits = share(stats.stages[best].wait_input) +
                              share(stats.stages[best].wait_output);
    if (util > best_util + 1e-9 ||
        (util > best_util - 1e-9 && waits < best_waits)) {
      best = i;
      best_util = util;
    }
    if (busy[i] > busy[costliest]) costliest = i;
  }
  if (stats.num_threads > 0 && best_util < kSaturatedAbove &&
      total_busy >= kSaturatedAbove * stats.num_threads) {
    b.kind = "threads";
    pick(costliest);
    b.reason = printf_string(
        "the pool's %d threads were %.0f%% busy while no stage was at its "
        "concurrency; %s took %.2f of them",
        stats.num_threads, 100 * total_busy / stats.num_threads,
        stats.stages[costliest].name.c_str(), busy[costliest]);
    b.advice =
        "raise num_threads if the machine has idle cores, else make the "
        "costliest stage cheaper";
    return b;
  }
  const StageStats& s = stats.stages[best];
  b.kind = "stage";
  pick(best);
  b.reason = printf_string(
      "busy %.2f of %d threads (%.0f%%), waiting on input %.0f%% and on "
      "output %.0f%% of the time; mean call %s",
      busy[best], s.concurrency, 100 * best_util, 100 * share(s.wait_input),
      100 * share(s.wait_output), format_duration(s.op_time.mean()).c_str());
  const double python_share =
      s.op_time.sum().count() > 0
          ? seconds(s.gil_held) / seconds(s.op_time.sum())
          : 0;
  if (s.kind == "source") {
    b.advice =
        "a source yields one item at a time: move work out of it into a "
        "pipe stage with concurrency";
  } else if (best_util >= kSaturatedAbove) {
    b.advice = printf_string(
        "raise its concurrency (%d) or make its op cheaper", s.concurrency);
  } else {
    b.advice =
        "no stage is saturated; this one is the slowest: raise its "
        "concurrency, or num_threads";
  }
  if (python_share >= 0.5) {
    b.advice += printf_string(
        " (its calls hold the GIL %.0f%% of their time: one process runs "
        "Python on one core at a time; a process region or a native op "
        "scales further)",
        100 * python_share);
  }
  return b;
}

std::string to_json(const PipelineStats& stats) {
  std::string out;
  {  // the objects write their '}' as they close, before `out` is returned
    JsonObject o(&out);
    o.add("name", stats.name);
    o.add("num_threads", static_cast<uint64_t>(std::max(stats.num_threads, 0)));
    o.add_seconds("elapsed_s", stats.elapsed);
    o.add("items_delivered", stats.items_delivered);
    append_list(o.key("stages"), stats.stages, append_stage);
    append_list(o.key("regions"), stats.regions,
                [](std::string* into, const RegionStats& region) {
                  JsonObject r(into);
                  r.add("name", region.name);
                  r.add("host_stage",
                        static_cast<uint64_t>(std::max(region.host_stage, 0)));
                  r.add("workers", static_cast<uint64_t>(region.workers));
                  r.add("reporting", static_cast<uint64_t>(region.reporting));
                  append_list(r.key("stages"), region.stages, append_stage);
                });
    if (stats.autotune.enabled) {
      const AutotuneStats& a = stats.autotune;
      JsonObject ao(o.key("autotune"));
      ao.add("cpu_budget", a.cpu_budget);
      ao.add("cpu_used", a.cpu_used);
      ao.add("decisions_total", a.decisions_total);
      append_list(ao.key("decisions"), a.decisions,
                  [](std::string* into, const AutotuneDecision& d) {
                    JsonObject dj(into);
                    dj.add_seconds("at_s", d.at);
                    dj.add("pool", d.stage < 0);
                    dj.add("stage",
                           static_cast<uint64_t>(std::max(d.stage, 0)));
                    dj.add("target", d.target);
                    dj.add("from", static_cast<uint64_t>(std::max(d.from, 0)));
                    dj.add("to", static_cast<uint64_t>(std::max(d.to, 0)));
                    dj.add("reason", d.reason);
                  });
    }
    Bottleneck b = find_bottleneck(stats);
    JsonObject bo(o.key("bottleneck"));
    bo.add("kind", b.kind);
    bo.add("stage", b.stage_name);
    bo.add("reason", b.reason);
    bo.add("advice", b.advice);
  }
  return out;
}

std::string format_table(const PipelineStats& stats) {
  std::string out;
  char line[256];
  double elapsed = seconds(stats.elapsed);
  // The name goes in as a string: a long one must not cut the line short.
  std::snprintf(
      line, sizeof(line), "': %llu items delivered in %.2fs (%.0f items/s)\n",
      static_cast<unsigned long long>(stats.items_delivered), elapsed,
      elapsed > 0 ? static_cast<double>(stats.items_delivered) / elapsed : 0.0);
  out += "pipeline '" + stats.name + line;
  // A region's stages follow its host stage, as "  <region>/<stage>".
  auto region_name = [](const RegionStats& r, const StageStats& s) {
    return "  " + r.name + "/" + s.name;
  };
  // The stage column fits the longest name (at least 22 characters).
  int width = 22;
  auto fit = [&width](const std::string& name) {
    width = std::max(width,
                     static_cast<int>(std::min<std::size_t>(name.size(), 120)));
  };
  for (const StageStats& s : stats.stages) fit(s.name);
  for (const RegionStats& r : stats.regions) {
    for (const StageStats& s : r.stages) fit(region_name(r, s));
  }
  // The GIL columns appear when a stage ran Python.
  bool python = false;
  for (const StageStats& s : stats.stages) python |= s.gil_acquisitions > 0;
  for (const RegionStats& r : stats.regions) {
    for (const StageStats& s : r.stages) python |= s.gil_acquisitions > 0;
  }
  std::snprintf(line, sizeof(line),
                "%-*s %9s %9s %6s %9s %9s %9s %9s %8s %8s %6s", width, "stage",
                "in", "out", "fail", "mean", "p50", "p90", "p99", "wait_in",
                "wait_out", "occ%");
  out += line;
  out += python ? "  gil_wait   gil%\n" : "\n";
  auto row = [&](const std::string& name, const StageStats& s) {
    std::snprintf(
        line, sizeof(line),
        "%-*.*s %9llu %9llu %6llu %9s %9s %9s %9s %7.1f%% %7.1f%% %5.0f%%",
        width, width, name.c_str(), static_cast<unsigned long long>(s.items_in),
        static_cast<unsigned long long>(s.items_out),
        static_cast<unsigned long long>(s.failures),
        format_duration(s.op_time.mean()).c_str(),
        format_duration(s.op_time.quantile(0.5)).c_str(),
        format_duration(s.op_time.quantile(0.9)).c_str(),
        format_duration(s.op_time.quantile(0.99)).c_str(),
        elapsed > 0 ? 100.0 * seconds(s.wait_input) / elapsed : 0.0,
        elapsed > 0 ? 100.0 * seconds(s.wait_output) / elapsed : 0.0,
        100.0 * s.input_queue.occupancy());
    out += line;
    if (python && s.gil_acquisitions > 0) {
      // The mean wait to take the GIL per call, and the share of the
      // elapsed time this stage held it.
      std::snprintf(line, sizeof(line), " %9s %5.0f%%",
                    format_duration(mean_wait(s)).c_str(),
                    elapsed > 0 ? 100.0 * seconds(s.gil_held) / elapsed : 0.0);
      out += line;
    } else if (python) {
      out += "         -      -";
    }
    out += "\n";
  };
  for (std::size_t i = 0; i < stats.stages.size(); ++i) {
    row(stats.stages[i].name, stats.stages[i]);
    for (const RegionStats& r : stats.regions) {
      if (r.host_stage != static_cast<int>(i)) continue;
      for (const StageStats& s : r.stages) row(region_name(r, s), s);
    }
  }
  if (stats.autotune.enabled) {
    // The settings now, then the latest changes.
    const AutotuneStats& a = stats.autotune;
    std::string now;
    for (const StageStats& s : stats.stages) {
      if (s.kind == "pipe" && s.concurrency > 0) {
        now += " " + s.name + "=" + std::to_string(s.concurrency);
      }
    }
    std::snprintf(line, sizeof(line), "; CPU %.2f of %.2f; %llu changes\n",
                  a.cpu_used, a.cpu_budget,
                  static_cast<unsigned long long>(a.decisions_total));
    out +=
        "autotune: threads=" + std::to_string(stats.num_threads) + now + line;
    const std::size_t shown = std::min<std::size_t>(a.decisions.size(), 5);
    for (std::size_t i = a.decisions.size() - shown; i < a.decisions.size();
         ++i) {
      const AutotuneDecision& d = a.decisions[i];
      out += "  " + format_duration(d.at) + " " + d.target + " " +
             std::to_string(d.from) + " -> " + std::to_string(d.to) + ": " +
             d.reason + "\n";
    }
  }
  Bottleneck b = find_bottleneck(stats);
  if (b.kind != "none") {
    out += "bottleneck: " + (b.stage_name.empty() ? "-" : b.stage_name) + " (" +
           b.kind + "): " + b.reason + "\n  advice: " + b.advice + "\n";
  }
  return out;
}

}  // namespace feedline
