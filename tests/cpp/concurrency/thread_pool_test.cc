// SPDX-License-Identifier: Apache-2.0

#include "feedline/concurrency/thread_pool.h"

#include <atomic>
#include <future>
#include <latch>
#include <utility>

#include <gtest/gtest.h>

#include "feedline/base/error.h"

namespace feedline {
namespace {

TEST(ThreadPoolTest, RunsEveryTask) {
  std::atomic<int> ran{0};
  std::latch done(1000);
  ThreadPool pool(3);
  for (int i = 0; i < 1000; ++i) {
    pool.submit([&] {
      ++ran;
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(ran.load(), 1000);
}

TEST(ThreadPoolTest, ShutdownRunsTasksSubmittedWhileDraining) {
  std::atomic<int> ran{0};
  {
    std::function<void(int)> chain;  // declared first: outlives the pool
    ThreadPool pool(2);
    chain = [&](int left) {
      ++ran;
      if (left > 0) pool.submit([&, left] { chain(left - 1); });
    };
    pool.submit([&] { chain(100); });
  }  // destructor: drains the whole chain, then joins
  EXPECT_EQ(ran.load(), 101);
}

TEST(ThreadPoolTest, SubmitAfterShutdownRunsInline) {
  ThreadPool pool(1);
  pool.shutdown();
  bool ran = false;
  pool.submit([&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_FALSE(pool.in_pool_thread());
}

TEST(ThreadPoolTest, KnowsWhetherTheCallerIsAnyPoolsThread) {
  ThreadPool a(1), b(1);
  EXPECT_FALSE(ThreadPool::in_any_pool_thread());
  std::promise<std::pair<bool, bool>> seen;
  b.submit([&] {
    seen.set_value({ThreadPool::in_any_pool_thread(), a.in_pool_thread()});
  });
  auto [any, in_a] = seen.get_future().get();
  EXPECT_TRUE(any);
  EXPECT_FALSE(in_a);
}

TEST(ThreadPoolTest, RejectsZeroThreads) {
  EXPECT_THROW(ThreadPool(0), InvalidArgument);
}

}  // namespace
}  // namespace feedline
