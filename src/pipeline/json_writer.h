// SPDX-License-Identifier: Apache-2.0
//
// Writing JSON: what to_json() (stats) and to_trace_json() (traces) share.
// Objects are written as they are built; keys and strings are escaped.

#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace feedline::detail {

inline void append_escaped(std::string* out, const std::string& s) {
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
    // JSON has no infinity or NaN (sums of counters from elsewhere may
    // overflow): the largest number, or 0, instead.
    if (!std::isfinite(v)) v = v > 0 ? std::numeric_limits<double>::max() : 0;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    *key(k) += buf;
  }
  void add_seconds(const char* k, std::chrono::nanoseconds d) {
    add(k, std::chrono::duration<double>(d).count());
  }
  // Microseconds with three decimals, exact to the nanosecond however long
  // the run (9 significant digits would round a day's 8.64e10 us to 100 us).
  void add_micros(const char* k, std::chrono::nanoseconds d) {
    const int64_t ns = std::max<int64_t>(d.count(), 0);
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%lld.%03lld",
                  static_cast<long long>(ns / 1000),
                  static_cast<long long>(ns % 1000));
    *key(k) += buf;
  }

 private:
  std::string* out_;
  bool first_ = true;
};

// A JSON array of `items`, each written by `append`.
template <typename T, typename F>
void append_list(std::string* out, const std::vector<T>& items, F append) {
  out->push_back('[');
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out->push_back(',');
    append(out, items[i]);
  }
  out->push_back(']');
}

}  // namespace feedline::detail
