// SPDX-License-Identifier: Apache-2.0
//
// display_name(): names that are not UTF-8 become text a message can carry.

#include <string>

#include <gtest/gtest.h>

#include "feedline/base/error.h"
#include "feedline/io/formats.h"
#include "io/io_testing.h"

namespace feedline::io {
namespace {

TEST(NamesTest, KeepsUtf8AndEscapesTheRest) {
  EXPECT_EQ(display_name("plain/a.jpg"), "plain/a.jpg");
  EXPECT_EQ(display_name("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(display_name("caf\xe9.txt"), "caf\\xe9.txt");  // Latin-1
  EXPECT_EQ(display_name(std::string("a\0b\n", 4)), "a\\x00b\\x0a");
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  EXPECT_EQ(display_name("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(display_name("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(display_name("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(display_name("\xe2\x82"), "\\xe2\\x82");  // cut short
}

// Parser errors name the input through display_name(), so a Latin-1 name
// cannot make the message invalid UTF-8.
TEST(NamesTest, ParserErrorsEscapeTheInputName) {
  const std::string message = testing::error_of<FormatError>([] {
    load_npy(testing::buffer_of({1, 2, 3}), "shard:caf\xe9.npy");
  });
  EXPECT_EQ(message.rfind("shard:caf\\xe9.npy: ", 0), 0u) << message;
}

}  // namespace
}  // namespace feedline::io
