// SPDX-License-Identifier: Apache-2.0
//
// error_class(): the most derived class of base/error.h an exception is.

#include "feedline/base/error.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace feedline {
namespace {

std::string class_of(const std::exception& e) {
  const char* name = error_class(e);
  return name != nullptr ? name : "(none)";
}

TEST(ErrorClassTest, NamesTheMostDerivedClass) {
  EXPECT_EQ(class_of(UnsupportedFormat("x")), "UnsupportedFormat");
  EXPECT_EQ(class_of(DecodeError("x")), "DecodeError");
  EXPECT_EQ(class_of(FormatError("x")), "FormatError");
  EXPECT_EQ(class_of(IoError("x")), "IoError");
  EXPECT_EQ(class_of(Timeout("x")), "Timeout");
  EXPECT_EQ(class_of(Cancelled("x")), "Cancelled");
  EXPECT_EQ(class_of(Internal("x")), "Internal");
  EXPECT_EQ(class_of(TooManyFailures("x", nullptr)), "TooManyFailures");
  EXPECT_EQ(class_of(PipelineFailure({})), "PipelineFailure");
  EXPECT_EQ(class_of(Error("x")), "Error");
}

TEST(ErrorClassTest, NoneForArgumentErrorsAndForeignExceptions) {
  EXPECT_EQ(class_of(InvalidArgument("x")), "(none)");
  EXPECT_EQ(class_of(OutOfRange("x")), "(none)");
  EXPECT_EQ(class_of(std::runtime_error("x")), "(none)");
}

}  // namespace
}  // namespace feedline
