// SPDX-License-Identifier: Apache-2.0
//
// Element failures reported by batch ops, stages whose every call fails,
// stop() from inside an op, and pipelines and pools inherited through fork().

#include <atomic>
#include <fstream>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "feedline/base/error.h"
#include "feedline/concurrency/fork.h"
#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/builder.h"
#include "testing/pipeline_testing.h"
#include "testing/test_ops.h"

namespace feedline {
namespace {

using testing::drain;
using testing::iota;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define FEEDLINE_TEST_GCC_SANITIZER 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define FEEDLINE_TEST_CLANG_SANITIZER 1
#endif
#endif
#if defined(FEEDLINE_TEST_GCC_SANITIZER) || \
    defined(FEEDLINE_TEST_CLANG_SANITIZER)
constexpr bool kAnySanitizer = true;
#else
constexpr bool kAnySanitizer = false;
#endif

// Keeps the even items of each input "batch" (a count), reporting each odd
// one as an element failure: the shape of a batch decoder dropping bad images.
int keep_even_report_odd(int n) {
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      ++kept;
    } else {
      report_element_failure(std::make_exception_ptr(
          DecodeError("element " + std::to_string(i) + " is bad")));
    }
  }
  return kept;
}

TEST(ElementFailureTest, EachReportedElementIsACountedLoggedFailure) {
  testing::LogCapture logs;
  // Batches of 4, 5, 6: 2 + 2 + 3 elements left out.
  std::vector<int> sizes = {4, 5, 6};
  auto p = PipelineBuilder()
               .add_source(sizes)
               .pipe(keep_even_report_odd, {.name = "decode"})
               .add_sink()
               .build(BuildOptions{.num_threads = 2});
  std::vector<int> kept = drain(p);
  EXPECT_EQ(kept, (std::vector<int>{2, 3, 3}));
  StageStats s = p.stats().stages[1];
  EXPECT_EQ(s.calls, 3u);
  EXPECT_EQ(s.failures, 7u);
  EXPECT_FALSE(s.failed);
  std::vector<std::string> lines = logs.lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("element 1 is bad"), std::string::npos) << lines[0];
}

TEST(ElementFailureTest, ElementFailuresAreHeldAgainstTheBudget) {
  std::vector<int> sizes(10, 4);  // 2 failures per call
  auto p =
      PipelineBuilder()
          .add_source(sizes)
          .pipe(keep_even_report_odd,
                {.name = "decode", .max_failures = FailureBudget::max_count(3)})
          .add_sink()
          .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
  try {
    drain(p);
    FAIL() << "the budget of 3 failures was never applied";
  } catch (const PipelineFailure& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_NE(e.errors()[0].message.find("element 1 is bad"), std::string::npos)
        << e.errors()[0].message;
  }
  EXPECT_LE(p.stats().stages[1].calls, 2u);
}

TEST(ElementFailureTest, OutsideAStageNothingCollectsTheReport) {
  EXPECT_FALSE(report_element_failure(
      std::make_exception_ptr(std::runtime_error("nobody listens"))));
}

int always_fails(int x) {
  throw std::runtime_error("bad " + std::to_string(x));
}

TEST(AllCallsFailedTest, FailsThePipelineEvenWithAnUnlimitedBudget) {
  auto p = PipelineBuilder()
               .add_source(iota(5))
               .pipe(always_fails, {.name = "broken"})
               .add_sink()
               .build(BuildOptions{.num_threads = 1, .failure_log_burst = 0});
  try {
    drain(p);
    FAIL() << "a stage whose every call failed ended normally";
  } catch (const PipelineFailure& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0].stage, "1:broken");
    EXPECT_NE(e.errors()[0].message.find("all 5 calls failed"),
              std::string::npos)
        << e.errors()[0].message;
    EXPECT_NE(e.errors()[0].message.find("bad 4"), std::string::npos);
    // The last failure itself is the error's cause, as for a budget.
    try {
      std::rethrow_exception(e.errors()[0].error);
    } catch (const TooManyFailures& tmf) {
      ASSERT_TRUE(tmf.last_error());
      try {
        std::rethrow_exception(tmf.last_error());
      } catch (const std::runtime_error& last) {
        EXPECT_STREQ(last.what(), "bad 4");
      }
    }
  }
  EXPECT_EQ(p.stats().stages[1].failures, 5u);
}

TEST(AllCallsFailedTest, OneSuccessOrNoCallAtAllEndsNormally) {
  auto some = PipelineBuilder()
                  .add_source(iota(5))
                  .pipe([](int x) { return x == 3 ? x : always_fails(x); })
                  .add_sink()
                  .build(1);
  EXPECT_EQ(drain(some), std::vector<int>{3});
  auto none = PipelineBuilder()
                  .add_source(iota(0))
                  .pipe(always_fails)
                  .add_sink()
                  .build(1);
  EXPECT_TRUE(drain(none).empty());
}

TEST(StopInsideOpTest, RequestsTheStopAndReturnsAtOnce) {
  std::atomic<Pipeline*> self{nullptr};
  std::atomic<int> returned{-1};
  std::atomic<bool> on_worker{false};
  std::latch ready(1);
  auto p = PipelineBuilder()
               .add_source(iota(100000))
               .pipe(
                   [&](int x) {
                     if (x == 3) {
                       ready.wait();
                       on_worker = self.load()->on_worker_thread();
                       returned =
                           self.load()->stop(std::chrono::seconds(60)) ? 1 : 0;
                     }
                     return x;
                   },
                   {.name = "stopper"})
               .add_sink()
               .build(2);
  self = &p.untyped();
  ready.count_down();
  drain(p);  // ends: the stop discards what is left
  // The reads may end before the op's stop() call has returned; the full
  // stop waits for that call.
  EXPECT_TRUE(p.untyped().stop(std::chrono::seconds(60)));
  EXPECT_TRUE(on_worker.load());
  EXPECT_EQ(returned.load(), 0);  // requested, not waited for
  EXPECT_FALSE(p.untyped().on_worker_thread());
}

// Runs `child` in a forked child process and returns its exit status (the
// child exits with 0 when `child` returns true).
template <typename F>
int in_child(F child) {
  pid_t pid = fork();
  if (pid == 0) _exit(child() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(ForkTest, AChildLeavesInheritedPoolsAndPipelinesAloneAndRunsItsOwn) {
  // The sanitizer runtimes' own allocators are not fork-safe: a child of a
  // threaded process can inherit an allocator lock another thread held and
  // hang in malloc (seen under ASan). glibc's malloc is, and the release
  // build runs this test.
  if (kAnySanitizer) {
    GTEST_SKIP() << "sanitizer allocators are not fork-safe in a threaded "
                    "process";
  }
  std::latch entered(1);
  std::latch release(1);
  auto stuck = PipelineBuilder()
                   .add_source(iota(100))
                   .pipe([&](int x) {
                     if (x == 0) {
                       entered.count_down();
                       release.wait();
                     }
                     return x;
                   })
                   .add_sink()
                   .build(2);
  auto busy = PipelineBuilder()
                  .add_source(iota(100000))
                  .pipe([](int x) { return x + 1; }, {.concurrency = 2})
                  .add_sink()
                  .build(2);
  ASSERT_TRUE(busy.next());
  stuck.untyped().start();
  entered.wait();
  // A pool whose threads wait on its condition variable at the fork.
  auto idle_pool = std::make_unique<ThreadPool>(2);
  const uint64_t parent_generation = fork_generation();
  int status = in_child([&] {
    if (fork_generation() != parent_generation + 1) return false;
    // The parent's pipelines refuse to run and stop at once.
    try {
      busy.next();
      return false;
    } catch (const Error&) {
    }
    if (!stuck.untyped().stop(std::chrono::seconds(0))) return false;
    if (!stuck.untyped().stopping()) return false;
    if (stuck.untyped().failure()) return false;
    // A new pool and pipeline of the child's own.
    {
      ThreadPool pool(2);
      std::latch done(4);
      for (int i = 0; i < 4; ++i) pool.submit([&] { done.count_down(); });
      done.wait();
    }
    auto mine = PipelineBuilder()
                    .add_source(iota(50))
                    .pipe([](int x) { return 2 * x; }, {.concurrency = 3})
                    .add_sink()
                    .build(2);
    int sum = 0;
    for (int x : mine) sum += x;
    // Destroying the inherited objects leaks them: no join, no lock.
    idle_pool.reset();
    { auto gone = std::move(busy); }
    { auto gone = std::move(stuck); }
    return sum == 2 * (49 * 50 / 2);
  });
  EXPECT_TRUE(WIFEXITED(status))
      << "child killed by signal "
      << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent carries on with exact counts.
  release.count_down();
  busy.stop();
  EXPECT_EQ(drain(stuck).size(), 100u);
  EXPECT_EQ(stuck.stats().stages[1].items_out, 100u);
}

TEST(RefusedThreadTest, PoolAndPipelineRaiseAndLeaveNothingRunning) {
  if (kAnySanitizer) {
    GTEST_SKIP() << "a sanitizer runtime needs the address space it reserves";
  }
  // A real limit, in a child: an address space with room for a few thread
  // stacks (8 MiB each by default) but not for eight.
  int status = in_child([] {
    auto p = PipelineBuilder()
                 .add_source(iota(100))
                 .pipe([](int x) { return x + 1; }, {.concurrency = 4})
                 .add_sink()
                 .build(BuildOptions{.num_threads = 8, .name = "limited"});
    const int threads_before = ThreadPool::live_threads();
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    rlimit old{};
    getrlimit(RLIMIT_AS, &old);
    rlimit low = old;
    low.rlim_cur =
        static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (20u << 20);
    if (setrlimit(RLIMIT_AS, &low) != 0) return false;
    bool pool_raised = false;
    try {
      ThreadPool pool(8);
    } catch (const Error& e) {
      pool_raised = std::string(e.what()).find(
                        "could not start worker thread") != std::string::npos;
    }
    bool start_raised = false;
    try {
      p.untyped().start();
    } catch (const Error& e) {
      start_raised =
          std::string(e.what()).find("pipeline 'limited' could not start") !=
          std::string::npos;
    }
    bool none_left = ThreadPool::live_threads() == threads_before;
    setrlimit(RLIMIT_AS, &old);
    // With the limit lifted the same pipeline starts and runs.
    int sum = 0;
    for (int x : p) sum += x;
    return pool_raised && start_raised && none_left && sum == 5050;
  });
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace feedline
