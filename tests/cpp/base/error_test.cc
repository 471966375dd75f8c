// SPDX-License-Identifier: Apache-2.0
//
// error_class(): the most derived class of base/error.h an exception is;
// for_each_cause(): the errors a pipeline failure is made of.

#include "feedline/base/error.h"

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

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

TEST(ForEachCauseTest, VisitsTheLeavesOfAFailureInOrder) {
  auto cause = [](const char* what) {
    return std::make_exception_ptr(std::runtime_error(what));
  };
  std::vector<StageError> stages;
  stages.push_back({"1:a", cause("a"), "a"});
  stages.push_back(
      {"2:b", std::make_exception_ptr(TooManyFailures("too many", cause("b"))),
       "too many"});
  stages.push_back({"3:c", nullptr, ""});
  std::vector<std::string> seen;
  auto record = [&](const std::exception_ptr& e) {
    seen.push_back(describe(e));
  };
  for_each_cause(std::make_exception_ptr(PipelineFailure(stages)), record);
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  seen.clear();
  for_each_cause(cause("alone"), record);
  for_each_cause(nullptr, record);
  EXPECT_EQ(seen, (std::vector<std::string>{"alone"}));
}

}  // namespace
}  // namespace feedline
