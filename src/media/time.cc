// SPDX-License-Identifier: Apache-2.0
//
// Times and windows in seconds from their text (media/av.h).

#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "feedline/base/error.h"
#include "feedline/media/av.h"

namespace feedline::media {
namespace {

__extension__ typedef __int128 Int;    // NOLINT(modernize-use-using)
constexpr Int kLimit = Int{1} << 120;  // parts beyond this are rejected

struct Exact {
  Int num = 0;  // sign here
  Int den = 1;  // > 0
};

bool fits(Int v) { return v <= std::numeric_limits<int32_t>::max(); }

// The closest fraction to x with a denominator <= max_den (continued
// fractions, as Python's Fraction.limit_denominator()); x.num >= 0.
Exact limit_denominator(Exact x, Int max_den) {
  if (x.den <= max_den) return x;
  Int p0 = 0, q0 = 1, p1 = 1, q1 = 0, n = x.num, d = x.den;
  for (;;) {
    const Int a = n / d;
    const Int q2 = q0 + a * q1;
    if (q2 > max_den) break;
    const Int p2 = p0 + a * p1;
    p0 = p1;
    q0 = q1;
    p1 = p2;
    q1 = q2;
    const Int r = n - a * d;
    n = d;
    d = r;
  }
  const Int k = (max_den - q0) / q1;
  if (2 * d * (q0 + k * q1) <= x.den) return {p1, q1};
  return {p0 + k * p1, q0 + k * q1};
}

// Reads the digits at text[*i...] into *v (times 10 each); false on overflow.
bool digits(std::string_view text, std::size_t* i, Int* v, int* count) {
  for (; *i < text.size() && std::isdigit(static_cast<unsigned char>(text[*i]));
       ++*i) {
    if (*v > kLimit) return false;
    *v = *v * 10 + (text[*i] - '0');
    ++*count;
  }
  return true;
}

std::optional<Exact> parse_exact(std::string_view t) {
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front())))
    t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())))
    t.remove_suffix(1);
  std::size_t i = 0;
  const bool negative = i < t.size() && t[i] == '-';
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
  Exact x;
  int whole = 0, frac = 0, den_digits = 0;
  if (!digits(t, &i, &x.num, &whole)) return std::nullopt;
  if (i < t.size() && t[i] == '/') {
    ++i;
    x.den = 0;
    if (whole == 0 || !digits(t, &i, &x.den, &den_digits) || den_digits == 0 ||
        x.den == 0)
      return std::nullopt;
  } else {
    if (i < t.size() && t[i] == '.') {
      ++i;
      const std::size_t start = i;
      if (!digits(t, &i, &x.num, &frac)) return std::nullopt;
      for (std::size_t k = start; k < i; ++k) x.den *= 10;
    }
    if (whole + frac == 0) return std::nullopt;
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      ++i;
      const bool down = i < t.size() && t[i] == '-';
      if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
      Int e = 0;
      int e_digits = 0;
      if (!digits(t, &i, &e, &e_digits) || e_digits == 0 || e > 36)
        return std::nullopt;
      for (Int k = 0; k < e; ++k) {
        Int& part = down ? x.den : x.num;
        if (part > kLimit) return std::nullopt;
        part *= 10;
      }
    }
  }
  if (i != t.size()) return std::nullopt;
  Int g = x.num, b = x.den;  // gcd
  while (b != 0) {
    const Int r = g % b;
    g = b;
    b = r;
  }
  x.num /= g;
  x.den /= g;
  if (negative) x.num = -x.num;
  return x;
}

}  // namespace

Rational parse_time(std::string_view text) {
  std::optional<Exact> x = parse_exact(text);
  if (!x)
    throw InvalidArgument("a time must be a number of seconds, got '" +
                          std::string(text) + "'");
  const bool negative = x->num < 0;
  if (negative) x->num = -x->num;
  if (!fits(x->num) || !fits(x->den)) *x = limit_denominator(*x, Int{1} << 20);
  if (!fits(x->num) || !fits(x->den))
    throw InvalidArgument("a time must be below 2^31 s, got " +
                          std::string(text));
  const int num = static_cast<int>(x->num);
  return Rational{negative ? -num : num, static_cast<int>(x->den)};
}

Window parse_window(std::string_view start,
                    std::optional<std::string_view> end) {
  auto shown = [&] {
    return ": (" + std::string(start) + ", " +
           (end ? std::string(*end) : std::string("None")) + ")";
  };
  Window w{parse_time(start), std::nullopt};
  if (w.start.num < 0)
    throw InvalidArgument("the window starts before 0" + shown());
  if (end && *end != "inf") {  // inf: to the end, as no end
    w.end = parse_time(*end);
    if (int64_t{w.end->num} * w.start.den < int64_t{w.start.num} * w.end->den)
      throw InvalidArgument("the window ends before it starts" + shown());
  }
  return w;
}

}  // namespace feedline::media
