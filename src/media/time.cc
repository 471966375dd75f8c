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

enum class Status { kOk, kNotANumber, kNotFinite, kZeroDenominator, kTooLarge };

struct Parsed {
  Status status = Status::kOk;
  Exact value;
};

// Reads the digits at text[*i...] into *v (times 10 each); false once *v
// would pass kLimit (the remaining digits are still skipped).
bool digits(std::string_view text, std::size_t* i, Int* v, int* count) {
  bool fits_limit = true;
  for (; *i < text.size() && std::isdigit(static_cast<unsigned char>(text[*i]));
       ++*i) {
    ++*count;
    if (!fits_limit || *v > kLimit) {
      fits_limit = false;
      continue;
    }
    *v = *v * 10 + (text[*i] - '0');
  }
  return fits_limit;
}

bool is_word(std::string_view t, std::string_view word) {
  if (t.size() != word.size()) return false;
  for (std::size_t k = 0; k < t.size(); ++k) {
    if (std::tolower(static_cast<unsigned char>(t[k])) != word[k]) return false;
  }
  return true;
}

Parsed parse_exact(std::string_view t) {
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front())))
    t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())))
    t.remove_suffix(1);
  std::size_t i = 0;
  const bool negative = i < t.size() && t[i] == '-';
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
  for (std::string_view word : {"inf", "infinity", "nan", "snan"}) {
    if (is_word(t.substr(i), word)) return {Status::kNotFinite, {}};
  }
  Exact x;
  int whole = 0, frac = 0, den_digits = 0;
  bool too_large = !digits(t, &i, &x.num, &whole);
  if (i < t.size() && t[i] == '/') {
    ++i;
    x.den = 0;
    if (whole == 0) return {Status::kNotANumber, {}};
    too_large |= !digits(t, &i, &x.den, &den_digits);
    if (den_digits == 0 || i != t.size()) return {Status::kNotANumber, {}};
    if (x.den == 0) return {Status::kZeroDenominator, {}};
  } else {
    if (i < t.size() && t[i] == '.') {
      ++i;
      // Fraction digits beyond 10^-36 cannot change the result (rounded to
      // a denominator <= 2^20): they are skipped.
      for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]));
           ++i, ++frac) {
        if (too_large || x.den > kLimit || x.num > kLimit) continue;
        x.num = x.num * 10 + (t[i] - '0');
        x.den *= 10;
      }
    }
    if (whole + frac == 0) return {Status::kNotANumber, {}};
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      ++i;
      const bool down = i < t.size() && t[i] == '-';
      if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
      Int e = 0;
      int e_digits = 0;
      const bool e_fits = digits(t, &i, &e, &e_digits);
      if (e_digits == 0 || i != t.size()) return {Status::kNotANumber, {}};
      if (!down && x.num != 0 && (!e_fits || e > 40))
        return {Status::kTooLarge, {}};
      if (down && (!e_fits || e > 400)) {
        x.num = 0;  // below 10^-360: 0 at any denominator <= 2^20
      } else {
        for (Int k = 0; k < e && x.num != 0; ++k) {
          if (!down) {
            if (x.num > kLimit) return {Status::kTooLarge, {}};
            x.num *= 10;
          } else if (x.den > kLimit) {
            x.num /= 10;  // precision far below the result's
          } else {
            x.den *= 10;
          }
        }
      }
    }
  }
  if (i != t.size()) return {Status::kNotANumber, {}};
  if (too_large) return {Status::kTooLarge, {}};
  if (x.num == 0) x.den = 1;
  Int g = x.num, b = x.den;  // gcd
  while (b != 0) {
    const Int r = g % b;
    g = b;
    b = r;
  }
  x.num /= g;
  x.den /= g;
  if (negative) x.num = -x.num;
  return {Status::kOk, x};
}

}  // namespace

Rational parse_time(std::string_view text) {
  const std::string shown = "'" + std::string(text) + "'";
  Parsed parsed = parse_exact(text);
  switch (parsed.status) {
    case Status::kOk:
      break;
    case Status::kNotANumber:
      throw InvalidArgument(
          "a time must be a number of seconds (an integer, a decimal or a "
          "fraction), got " +
          shown);
    case Status::kNotFinite:
      throw InvalidArgument("a time must be a finite number of seconds, got " +
                            shown);
    case Status::kZeroDenominator:
      throw InvalidArgument("a time's denominator must not be 0, got " + shown);
    case Status::kTooLarge:
      throw InvalidArgument("a time must be below 2^31 s, got " + shown);
  }
  Exact* x = &parsed.value;
  const bool negative = x->num < 0;
  if (negative) x->num = -x->num;
  if (!fits(x->num) || !fits(x->den)) *x = limit_denominator(*x, Int{1} << 20);
  if (!fits(x->num) || !fits(x->den))
    throw InvalidArgument("a time must be below 2^31 s, got " + shown);
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
