// SPDX-License-Identifier: Apache-2.0
//
// media::parse_time() and parse_window(): exact times from their text.

#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/media/av.h"

namespace feedline::media {
namespace {

Rational r(int num, int den) { return Rational{num, den}; }

TEST(TimeTest, ParsesIntegersDecimalsAndFractionsExactly) {
  EXPECT_EQ(parse_time("5"), r(5, 1));
  EXPECT_EQ(parse_time(" -2 "), r(-2, 1));
  EXPECT_EQ(parse_time("1.5"), r(3, 2));
  EXPECT_EQ(parse_time(".25"), r(1, 4));
  EXPECT_EQ(parse_time("1."), r(1, 1));
  EXPECT_EQ(parse_time("2/6"), r(1, 3));
  EXPECT_EQ(parse_time("1E+2"), r(100, 1));
  EXPECT_EQ(parse_time("2.5e-3"), r(1, 400));
  EXPECT_EQ(parse_time("0.1"), r(1, 10));
  EXPECT_EQ(parse_time("-0"), r(0, 1));
}

TEST(TimeTest, RoundsPartsBeyond32BitsToADenominatorOf2To20) {
  // 1/3 as a float: too many digits for 32 bits; the nearest with a small
  // denominator is 1/3 itself.
  EXPECT_EQ(parse_time("0.3333333333333333"), r(1, 3));
  EXPECT_EQ(parse_time("0.1234567890123"), r(10, 81));
  EXPECT_EQ(parse_time("1e-30"), r(0, 1));
}

TEST(TimeTest, RejectsWhatIsNotATime) {
  for (const char* bad : {"", "abc", "1/0", "1/", "/2", ".", "1e", "inf", "nan",
                          "1.5/2", "1 / 2", "2e40", "3000000000"}) {
    EXPECT_THROW(parse_time(bad), InvalidArgument) << bad;
  }
}

// What went wrong, with the text as given.
std::string error_of(std::string_view text) {
  try {
    parse_time(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TimeTest, HostileTimesAreInvalidArgumentsNamingTheText) {
  EXPECT_EQ(error_of("nan"),
            "a time must be a finite number of seconds, got 'nan'");
  EXPECT_EQ(error_of("-Infinity"),
            "a time must be a finite number of seconds, got '-Infinity'");
  EXPECT_EQ(error_of("sNaN"),
            "a time must be a finite number of seconds, got 'sNaN'");
  EXPECT_EQ(error_of("1/0"), "a time's denominator must not be 0, got '1/0'");
  EXPECT_EQ(error_of("1e+300"), "a time must be below 2^31 s, got '1e+300'");
  EXPECT_EQ(error_of("1E+999999999"),
            "a time must be below 2^31 s, got '1E+999999999'");
  EXPECT_EQ(error_of(std::string(400, '9')),
            "a time must be below 2^31 s, got '" + std::string(400, '9') + "'");
  EXPECT_EQ(error_of("x"),
            "a time must be a number of seconds (an integer, a decimal or a "
            "fraction), got 'x'");
  // Tiny and very precise times round; zero is zero at any exponent.
  EXPECT_EQ(parse_time("1e-300"), r(0, 1));
  EXPECT_EQ(parse_time("2.5e-99999999999"), r(0, 1));
  EXPECT_EQ(parse_time("0e999"), r(0, 1));
  EXPECT_EQ(parse_time("0." + std::string(60, '0') + "1"), r(0, 1));
  EXPECT_EQ(parse_time("0.5" + std::string(60, '0') + "1"), r(1, 2));
  EXPECT_EQ(parse_time("1" + std::string(30, '0') + "e-30"), r(1, 1));
  EXPECT_EQ(parse_time("2147483647"), r(2147483647, 1));
}

TEST(TimeTest, WindowsAreCheckedAndNamed) {
  Window w = parse_window("1/3", "2/3");
  EXPECT_EQ(w.start, r(1, 3));
  EXPECT_EQ(w.end, r(2, 3));
  EXPECT_FALSE(parse_window("1", std::nullopt).end.has_value());
  EXPECT_FALSE(parse_window("1", "inf").end.has_value());  // to the end
  EXPECT_THROW(parse_window("inf", std::nullopt), InvalidArgument);
  try {
    parse_window("1", "0.5");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "the window ends before it starts: (1, 0.5)");
  }
  EXPECT_THROW(parse_window("-1", std::nullopt), InvalidArgument);
}

}  // namespace
}  // namespace feedline::media
