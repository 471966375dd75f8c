// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/stats.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace feedline {
namespace {

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

void append_escaped(std::string* out, const std::string& s) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

class JsonObject {
 public:
  explicit JsonObject(std::string* out) : out_(out) { out_->push_back('{'); }
  ~JsonObject() { out_->push_back('}'); }
  JsonObject(const JsonObject&) = delete;
  JsonObject& operator=(const JsonObject&) = delete;

  std::string* key(const char* k) {
    if (!first_) out_->push_back(',');
    first_ = false;
    append_escaped(out_, k);
    out_->push_back(':');
    return out_;
  }
  void add(const char* k, const std::string& v) { append_escaped(key(k), v); }
  void add(const char* k, uint64_t v) { *key(k) += std::to_string(v); }
  void add(const char* k, bool v) { *key(k) += v ? "true" : "false"; }
  void add(const char* k, double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    *key(k) += buf;
  }
  void add_seconds(const char* k, std::chrono::nanoseconds d) {
    add(k, seconds(d));
  }

 private:
  std::string* out_;
  bool first_ = true;
};

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
  o.add_seconds("wait_input_s", s.wait_input);
  o.add_seconds("wait_output_s", s.wait_output);
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

}  // namespace

double QueueStats::occupancy() const {
  if (capacity == 0 || elapsed.count() <= 0) return 0;
  return depth_integral /
         (static_cast<double>(capacity) * static_cast<double>(elapsed.count()));
}

std::string to_json(const PipelineStats& stats) {
  std::string out;
  JsonObject o(&out);
  o.add("name", stats.name);
  o.add_seconds("elapsed_s", stats.elapsed);
  o.add("items_delivered", stats.items_delivered);
  std::string* list = o.key("stages");
  list->push_back('[');
  for (std::size_t i = 0; i < stats.stages.size(); ++i) {
    if (i > 0) list->push_back(',');
    append_stage(list, stats.stages[i]);
  }
  list->push_back(']');
  return out;
}

std::string format_table(const PipelineStats& stats) {
  std::string out;
  char line[256];
  double elapsed = seconds(stats.elapsed);
  std::snprintf(
      line, sizeof(line),
      "pipeline '%s': %llu items delivered in %.2fs (%.0f items/s)\n",
      stats.name.c_str(),
      static_cast<unsigned long long>(stats.items_delivered), elapsed,
      elapsed > 0 ? static_cast<double>(stats.items_delivered) / elapsed : 0.0);
  out += line;
  // The stage column fits the longest name (at least 22 characters).
  int width = 22;
  for (const StageStats& s : stats.stages) {
    width = std::max(
        width, static_cast<int>(std::min<std::size_t>(s.name.size(), 120)));
  }
  std::snprintf(line, sizeof(line),
                "%-*s %9s %9s %6s %9s %9s %9s %9s %8s %8s %6s\n", width,
                "stage", "in", "out", "fail", "mean", "p50", "p90", "p99",
                "wait_in", "wait_out", "occ%");
  out += line;
  for (const StageStats& s : stats.stages) {
    std::snprintf(
        line, sizeof(line),
        "%-*.*s %9llu %9llu %6llu %9s %9s %9s %9s %7.1f%% %7.1f%% %5.0f%%\n",
        width, width, s.name.c_str(),
        static_cast<unsigned long long>(s.items_in),
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
  }
  return out;
}

}  // namespace feedline
