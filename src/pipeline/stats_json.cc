// SPDX-License-Identifier: Apache-2.0
//
// stats_from_json(): reads one object of to_json() back into PipelineStats.
//
// A small JSON reader for what to_json() writes (objects, arrays, strings,
// numbers, true/false/null), then a mapping of its fields. Exports are files
// a user hands over, so every length, depth, type and value is checked and
// every problem is a FormatError naming the field.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/pipeline/stats.h"

namespace feedline {
namespace {

constexpr int kMaxDepth = 32;
constexpr std::size_t kMaxInput = std::size_t{64} << 20;

struct JsonMember;

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  bool integral = false;  // a number written without fraction or exponent
  uint64_t uint = 0;      // its value, when integral and not negative
  std::string string;
  std::vector<Json> array;
  std::vector<JsonMember> object;

  const Json* find(std::string_view key) const;
};

struct JsonMember {
  std::string key;
  Json value;
};

const Json* Json::find(std::string_view key) const {
  for (const JsonMember& m : object) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

[[noreturn]] void fail(const std::string& what) {
  throw FormatError("stats JSON: " + what);
}

class Parser {
 public:
  explicit Parser(std::string_view in) : in_(in) {}

  Json document() {
    Json v = value(0);
    space();
    if (pos_ != in_.size()) error("has text after the object");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& problem) const {
    fail(problem + " (at byte " + std::to_string(pos_) + ")");
  }
  void space() {
    while (pos_ < in_.size() && (in_[pos_] == ' ' || in_[pos_] == '\n' ||
                                 in_[pos_] == '\r' || in_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    space();
    if (pos_ < in_.size() && in_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view word) {
    if (in_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) error("nests deeper than 32 levels");
    space();
    if (pos_ >= in_.size()) error("ends early");
    Json v;
    char c = in_[pos_];
    if (c == '{') {
      ++pos_;
      v.type = Json::Type::kObject;
      if (eat('}')) return v;
      do {
        space();
        std::string key = string();
        expect(':');
        v.object.push_back(JsonMember{std::move(key), value(depth + 1)});
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.type = Json::Type::kArray;
      if (eat(']')) return v;
      do {
        v.array.push_back(value(depth + 1));
      } while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.type = Json::Type::kString;
      v.string = string();
    } else if (literal("true")) {
      v.type = Json::Type::kBool;
      v.boolean = true;
    } else if (literal("false")) {
      v.type = Json::Type::kBool;
    } else if (literal("null")) {
      v.type = Json::Type::kNull;
    } else {
      number(&v);
    }
    return v;
  }

  std::string string() {
    if (pos_ >= in_.size() || in_[pos_] != '"') error("expected a string");
    ++pos_;
    std::string out;
    for (;;) {
      if (pos_ >= in_.size()) error("has an unterminated string");
      char c = in_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("has a control byte");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= in_.size()) error("has an unterminated string");
      char e = in_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u':
          unicode(&out);
          break;
        default:
          error("has an unknown escape");
      }
    }
  }

  uint32_t hex4() {
    if (in_.size() - pos_ < 4) error("has a cut-off \\u escape");
    uint32_t v = 0;
    auto r = std::from_chars(in_.data() + pos_, in_.data() + pos_ + 4, v, 16);
    if (r.ptr != in_.data() + pos_ + 4) error("has a bad \\u escape");
    pos_ += 4;
    return v;
  }

  // A \uXXXX escape (and its low surrogate) as UTF-8.
  void unicode(std::string* out) {
    uint32_t cp = hex4();
    if (cp >= 0xD800 && cp < 0xDC00) {
      if (!literal("\\u")) error("has a lone surrogate");
      uint32_t low = hex4();
      if (low < 0xDC00 || low >= 0xE000) error("has a lone surrogate");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      error("has a lone surrogate");
    }
    auto put = [out](uint32_t b) { out->push_back(static_cast<char>(b)); };
    if (cp < 0x80) {
      put(cp);
    } else if (cp < 0x800) {
      put(0xC0 | (cp >> 6));
      put(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      put(0xE0 | (cp >> 12));
      put(0x80 | ((cp >> 6) & 0x3F));
      put(0x80 | (cp & 0x3F));
    } else {
      put(0xF0 | (cp >> 18));
      put(0x80 | ((cp >> 12) & 0x3F));
      put(0x80 | ((cp >> 6) & 0x3F));
      put(0x80 | (cp & 0x3F));
    }
  }

  void number(Json* v) {
    std::size_t start = pos_;
    if (pos_ < in_.size() && in_[pos_] == '-') ++pos_;
    bool integral = true;
    while (pos_ < in_.size()) {
      char c = in_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' ||
                 (c == '-' && pos_ > start)) {
        integral = false;
        ++pos_;
      } else {
        break;
      }
    }
    std::string_view text = in_.substr(start, pos_ - start);
    if (text.empty() || text == "-") error("expected a value");
    v->type = Json::Type::kNumber;
    // from_chars for double needs a null-free range; `text` is one.
    auto r = std::from_chars(text.data(), text.data() + text.size(), v->number);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() ||
        !std::isfinite(v->number)) {
      error("has a bad number");
    }
    if (integral && text[0] != '-') {
      auto u = std::from_chars(text.data(), text.data() + text.size(), v->uint);
      v->integral = u.ec == std::errc() && u.ptr == text.data() + text.size();
    }
  }

  std::string_view in_;
  std::size_t pos_ = 0;
};

// Field access with the path in every error.
class Fields {
 public:
  Fields(const Json& object, std::string path)
      : object_(object), path_(std::move(path)) {
    if (object.type != Json::Type::kObject) fail(path_ + " is not an object");
  }

  const Json& get(const char* key) const {
    const Json* v = object_.find(key);
    if (v == nullptr) fail(path_ + " has no \"" + key + "\"");
    return *v;
  }
  std::string where(const char* key) const { return path_ + "." + key; }
  std::string str(const char* key) const {
    const Json& v = get(key);
    if (v.type != Json::Type::kString) fail(where(key) + " is not a string");
    return v.string;
  }
  uint64_t count(const char* key) const {
    const Json& v = get(key);
    if (v.type != Json::Type::kNumber || !v.integral) {
      fail(where(key) + " is not a whole number of 0 or more");
    }
    return v.uint;
  }
  int small(const char* key) const {
    uint64_t v = count(key);
    if (v > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      fail(where(key) + " is too large");
    }
    return static_cast<int>(v);
  }
  double real(const char* key) const {
    const Json& v = get(key);
    if (v.type != Json::Type::kNumber || v.number < 0) {
      fail(where(key) + " is not a number of 0 or more");
    }
    return v.number;
  }
  std::chrono::nanoseconds seconds(const char* key) const {
    double s = real(key);
    // Durations are int64 nanoseconds (up to about 9.22e9 s); to_json()'s
    // 9 digits may round the largest just above, which saturates.
    if (s > 9.3e9) fail(where(key) + " is too large");
    double ns = s * 1e9;
    if (ns >= 9.2233720368547748e18) return std::chrono::nanoseconds::max();
    return std::chrono::nanoseconds(std::llround(ns));
  }
  bool flag(const char* key) const {
    const Json& v = get(key);
    if (v.type != Json::Type::kBool) fail(where(key) + " is not true/false");
    return v.boolean;
  }
  const std::vector<Json>& list(const char* key) const {
    const Json& v = get(key);
    if (v.type != Json::Type::kArray) fail(where(key) + " is not an array");
    return v.array;
  }

 private:
  const Json& object_;
  std::string path_;
};

LatencyHistogram read_histogram(const Fields& f) {
  std::vector<std::pair<int, uint64_t>> counts;
  for (const Json& pair : f.list("op_time_buckets")) {
    if (pair.type != Json::Type::kArray || pair.array.size() != 2 ||
        !pair.array[0].integral || !pair.array[1].integral ||
        pair.array[0].uint >= LatencyHistogram::kNumBuckets) {
      fail(f.where("op_time_buckets") +
           " holds something other than [bucket, count] pairs");
    }
    counts.emplace_back(static_cast<int>(pair.array[0].uint),
                        pair.array[1].uint);
  }
  LatencyHistogram h;
  if (!LatencyHistogram::restore(counts, f.count("op_time_sum_ns"),
                                 f.count("op_time_max_ns"), &h)) {
    fail(f.where("op_time_buckets") + " is not a consistent histogram");
  }
  return h;
}

StageStats read_stage(const Json& json, const std::string& path) {
  Fields f(json, path);
  StageStats s;
  s.name = f.str("name");
  s.kind = f.str("kind");
  s.concurrency = f.small("concurrency");
  s.items_in = f.count("items_in");
  s.items_out = f.count("items_out");
  s.items_skipped = f.count("items_skipped");
  s.calls = f.count("calls");
  s.failures = f.count("failures");
  s.epochs = f.count("epochs");
  s.op_time = read_histogram(f);
  s.wait_input = f.seconds("wait_input_s");
  s.wait_output = f.seconds("wait_output_s");
  s.gil_acquisitions = f.count("gil_acquisitions");
  s.gil_wait = f.seconds("gil_wait_s");
  s.gil_held = f.seconds("gil_held_s");
  s.finished = f.flag("finished");
  s.failed = f.flag("failed");
  Fields q(f.get("input_queue"), f.where("input_queue"));
  QueueStats& out = s.input_queue;
  out.capacity = q.count("capacity");
  out.depth = q.count("depth");
  out.max_depth = q.count("max_depth");
  out.items_put = q.count("items_put");
  out.items_got = q.count("items_got");
  out.time_empty = q.seconds("time_empty_s");
  out.time_full = q.seconds("time_full_s");
  out.elapsed = q.seconds("elapsed_s");
  out.put_wait = q.seconds("put_wait_s");
  out.get_wait = q.seconds("get_wait_s");
  // to_json() writes the mean occupancy; the integral follows from it.
  out.depth_integral = q.real("occupancy") * static_cast<double>(out.capacity) *
                       static_cast<double>(out.elapsed.count());
  return s;
}

}  // namespace

PipelineStats stats_from_json(std::string_view json) {
  if (json.size() > kMaxInput) fail("the record is over 64 MiB");
  Json doc = Parser(json).document();
  Fields f(doc, "the record");
  PipelineStats stats;
  stats.name = f.str("name");
  stats.num_threads = f.small("num_threads");
  stats.elapsed = f.seconds("elapsed_s");
  stats.items_delivered = f.count("items_delivered");
  const auto& stages = f.list("stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    stats.stages.push_back(
        read_stage(stages[i], "stages[" + std::to_string(i) + "]"));
  }
  const auto& regions = f.list("regions");
  for (std::size_t i = 0; i < regions.size(); ++i) {
    std::string path = "regions[" + std::to_string(i) + "]";
    Fields r(regions[i], path);
    RegionStats region;
    region.name = r.str("name");
    region.host_stage = r.small("host_stage");
    if (static_cast<std::size_t>(region.host_stage) >= stats.stages.size()) {
      fail(r.where("host_stage") + " is not a stage");
    }
    region.workers = r.small("workers");
    region.reporting = r.small("reporting");
    const auto& list = r.list("stages");
    for (std::size_t k = 0; k < list.size(); ++k) {
      region.stages.push_back(
          read_stage(list[k], path + ".stages[" + std::to_string(k) + "]"));
    }
    stats.regions.push_back(std::move(region));
  }
  if (const Json* autotune = doc.find("autotune"); autotune != nullptr) {
    Fields a(*autotune, "autotune");
    AutotuneStats& out = stats.autotune;
    out.enabled = true;
    out.cpu_budget = a.real("cpu_budget");
    out.cpu_used = a.real("cpu_used");
    out.decisions_total = a.count("decisions_total");
    const auto& list = a.list("decisions");
    if (list.size() > AutotuneStats::kMaxDecisions) {
      fail(a.where("decisions") + " holds more than " +
           std::to_string(AutotuneStats::kMaxDecisions) + " entries");
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      Fields d(list[i], "autotune.decisions[" + std::to_string(i) + "]");
      AutotuneDecision decision;
      decision.at = d.seconds("at_s");
      decision.stage = d.flag("pool") ? -1 : d.small("stage");
      decision.target = d.str("target");
      decision.from = d.small("from");
      decision.to = d.small("to");
      decision.reason = d.str("reason");
      out.decisions.push_back(std::move(decision));
    }
  }
  return stats;
}

}  // namespace feedline
