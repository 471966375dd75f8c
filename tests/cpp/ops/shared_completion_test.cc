// SPDX-License-Identifier: Apache-2.0
//
// ops::SharedCompletion: finished once, from any thread; dropped, it fails
// the call.

#include "feedline/ops/shared_completion.h"

#include <cstdint>
#include <exception>
#include <stop_token>
#include <thread>

#include <gtest/gtest.h>

#include "feedline/base/error.h"

namespace feedline::ops {
namespace {

// Records how the call it stands for was finished.
struct Recorder final : detail::CompletionTarget {
  void complete(uint64_t /*token*/, Item result,
                std::exception_ptr error) noexcept override {
    ++calls;
    failure = error;
    if (result.holds<int64_t>()) value = result.as<int64_t>();
  }
  int calls = 0;
  int64_t value = -1;
  std::exception_ptr failure;
};

TEST(SharedCompletionTest, IsTakenOnceFromAnyThread) {
  Recorder rec;
  SharedCompletion shared(Completion(&rec, 1, {}));
  EXPECT_TRUE(shared.pending());
  std::thread other([&] { shared.take().emit(Item(int64_t{5})); });
  other.join();
  EXPECT_FALSE(shared.pending());
  EXPECT_THROW(shared.take(), InvalidArgument);
  EXPECT_EQ(rec.calls, 1);
  EXPECT_EQ(rec.value, 5);
  EXPECT_FALSE(rec.failure);
}

TEST(SharedCompletionTest, DroppedBeforeTakeFailsTheCall) {
  Recorder rec;
  { SharedCompletion shared(Completion(&rec, 1, {})); }
  EXPECT_EQ(rec.calls, 1);
  EXPECT_TRUE(rec.failure);
}

TEST(SharedCompletionTest, StopRequestedWhilePending) {
  Recorder rec;
  std::stop_source stop;
  SharedCompletion shared(Completion(&rec, 1, stop.get_token()));
  EXPECT_FALSE(shared.stop_requested());
  stop.request_stop();
  EXPECT_TRUE(shared.stop_requested());
  shared.take().skip();
  EXPECT_FALSE(shared.stop_requested());
  EXPECT_EQ(rec.calls, 1);
}

}  // namespace
}  // namespace feedline::ops
