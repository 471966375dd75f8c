// SPDX-License-Identifier: Apache-2.0
//
// Autotune: the controller's decisions on statistics from a model of a
// pipeline whose optimum is known (stages of known cost that sleep or use the
// CPU, a pool of threads, a machine of C CPUs, a consumer of some rate), and
// the engine changing concurrency and pool threads while items flow.

#include "pipeline/autotune.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <latch>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/concurrency/thread_pool.h"
#include "feedline/pipeline/builder.h"
#include "testing/pipeline_testing.h"
#include "testing/test_ops.h"

namespace feedline {
namespace {

using detail::AutotuneController;
using detail::TunableStage;
using std::chrono::duration;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

nanoseconds ns(double seconds) {
  return std::chrono::duration_cast<nanoseconds>(duration<double>(seconds));
}

// A pipeline in steady state: source -> stages -> sink. Each stage's calls
// take `cost` seconds, on the CPU or asleep. The output rate is the least of
// what each stage's concurrency allows, what the pool's threads allow, what
// the machine's CPUs allow and what the consumer takes. Calls of CPU stages
// stretch when more threads want the CPU than there are CPUs.
struct Model {
  struct Stage {
    std::string name;
    double cost;  // seconds per call
    bool cpu;     // uses the CPU (else sleeps)
    int concurrency = 1;
  };
  std::vector<Stage> stages;  // stages[0] is the source
  int threads = 1;
  double cpus = 2;
  double consumer = 1e12;  // items/s the consumer takes at most

  PipelineStats stats;
  nanoseconds cpu_total{0};
  double last_rate = 0;
  double last_cpu = 0;

  Model(std::vector<Stage> s, int t, double c) : stages(std::move(s)) {
    threads = t;
    cpus = c;
    stats.name = "model";
    for (std::size_t i = 0; i < stages.size(); ++i) {
      StageStats st;
      st.name = std::to_string(i) + ":" + stages[i].name;
      st.kind = i == 0 ? "source" : "pipe";
      st.concurrency = stages[i].concurrency;
      stats.stages.push_back(st);
    }
    StageStats sink;
    sink.name = std::to_string(stages.size()) + ":sink";
    sink.kind = "sink";
    sink.input_queue.capacity = 16;
    stats.stages.push_back(sink);
  }

  // Advances the model by `dt` seconds with the current settings.
  void run(double dt) {
    double sum_cost = 0;
    double cpu_cost = 0;
    double rate = consumer;
    for (const Stage& s : stages) {
      sum_cost += s.cost;
      if (s.cpu) cpu_cost += s.cost;
      rate = std::min(rate, s.concurrency / s.cost);
    }
    rate = std::min(rate, threads / sum_cost);
    // The machine's CPUs: calls of CPU stages stretch when more threads
    // want the CPU than there are.
    if (cpu_cost > 0 && rate * cpu_cost > cpus) rate = cpus / cpu_cost;
    const bool consumer_bound = rate >= consumer - 1e-9;
    const double items = rate * dt;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      StageStats& st = stats.stages[i];
      const Stage& s = stages[i];
      st.concurrency = s.concurrency;
      const auto n = static_cast<uint64_t>(std::llround(items));
      // The stage's busy time: rate * cost thread-seconds per second. A CPU
      // stage held back by the CPUs stays busy for as many threads as it
      // has calls running (its calls take longer).
      double busy = rate * s.cost;
      if (s.cpu && rate * cpu_cost >= cpus - 1e-9) {
        busy = std::min<double>(s.concurrency, threads);
      }
      const double per_call = n > 0 ? busy * dt / static_cast<double>(n) : 0;
      for (uint64_t k = 0; k < n; ++k) st.op_time.record(ns(per_call));
      st.calls += n;
      st.items_in += n;
      st.items_out += n;
      // Idle slots count as waiting on input (upstream is slower).
      const double idle = std::max(0.0, 1 - busy / s.concurrency);
      st.wait_input += ns(idle * dt);
    }
    StageStats& sink = stats.stages.back();
    const auto n = static_cast<uint64_t>(std::llround(items));
    sink.items_in += n;
    sink.items_out += n;
    sink.wait_input += ns(consumer_bound ? 0 : dt);
    sink.input_queue.elapsed += ns(dt);
    sink.input_queue.depth_integral +=
        (consumer_bound ? 16.0 : 0.0) * static_cast<double>(ns(dt).count());
    stats.items_delivered += n;
    stats.elapsed += ns(dt);
    const double cpu_now = std::min(cpus, rate * cpu_cost);
    cpu_total += ns(cpu_now * dt);
    last_rate = rate;
    last_cpu = cpu_now;
  }

  void apply(const std::vector<AutotuneDecision>& decisions) {
    for (const AutotuneDecision& d : decisions) {
      if (d.stage < 0) {
        threads = d.to;
      } else {
        stages[static_cast<std::size_t>(d.stage)].concurrency = d.to;
      }
    }
  }
};

struct TuneRun {
  double max_cpu = 0;  // the most CPU any interval used
  int decisions = 0;
};

// Steps the controller over the model for `steps` intervals of 0.2 s.
TuneRun tune(Model* m, AutotuneController* c, int steps) {
  TuneRun r;
  for (int i = 0; i < steps; ++i) {
    m->run(0.2);
    r.max_cpu = std::max(r.max_cpu, m->last_cpu);
    auto decisions = c->step(m->stats, m->cpu_total);
    r.decisions += static_cast<int>(decisions.size());
    for (const AutotuneDecision& d : decisions) {
      EXPECT_NE(d.from, d.to);
      EXPECT_FALSE(d.reason.empty());
    }
    m->apply(decisions);
  }
  return r;
}

std::vector<TunableStage> tunables(const Model& m, int max) {
  std::vector<TunableStage> out;
  for (std::size_t i = 1; i < m.stages.size(); ++i) {
    out.push_back({static_cast<int>(i), m.stages[i].concurrency, max});
  }
  return out;
}

AutotuneOptions options(double budget) {
  AutotuneOptions o;
  o.enabled = true;
  o.cpu_budget = budget;
  return o;
}

TEST(AutotuneControllerTest, SleepingStageGetsTheConcurrencyItNeeds) {
  // 10 ms asleep per call behind a cheap source: the rate grows with the
  // stage's concurrency up to its bound of 16 (1,600 items/s).
  Model m({{"src", 20e-6, true}, {"io", 10e-3, false}}, 1, 2);
  AutotuneController c(options(0.5), tunables(m, 16), 1, 32, 2);
  TuneRun r = tune(&m, &c, 50);  // 10 s
  EXPECT_EQ(m.stages[1].concurrency, 16);
  EXPECT_GE(m.threads, 16);
  EXPECT_GE(m.last_rate, 0.99 * 1600);  // 16 threads for 16 calls + the source
  EXPECT_LE(r.max_cpu, c.budget());
}

TEST(AutotuneControllerTest, CpuStageStopsAtTheBudget) {
  // 1 ms of CPU per call on 4 CPUs with half of them for the pool: two
  // calls at a time use the budget; more would exceed it.
  Model m({{"src", 1e-6, true}, {"work", 1e-3, true}}, 1, 4);
  AutotuneController c(options(0.5), tunables(m, 32), 1, 32, 4);
  TuneRun r = tune(&m, &c, 50);
  EXPECT_EQ(m.stages[1].concurrency, 2);
  EXPECT_NEAR(m.last_rate, 2000, 5);
  EXPECT_LE(r.max_cpu, c.budget() * AutotuneController::kOverBudget);
}

TEST(AutotuneControllerTest, MixedPipelineReachesTheBestRateWithinBudget) {
  // read (5 ms asleep) -> decode (2 ms CPU) -> resize (0.5 ms CPU) on 4
  // CPUs, budget 2 CPUs: decode + resize cost 2.5 ms of CPU per item, so the
  // best rate within budget is 800 items/s, which needs read at 4, decode
  // at 2 and resize at 1 (0.4 busy).
  Model m({{"src", 1e-6, true},
           {"read", 5e-3, false},
           {"decode", 2e-3, true},
           {"resize", 0.5e-3, true}},
          1, 4);
  AutotuneController c(options(0.5), tunables(m, 32), 1, 32, 4);
  TuneRun r = tune(&m, &c, 50);
  EXPECT_GE(m.last_rate, 0.95 * 800);
  EXPECT_LE(r.max_cpu, c.budget() * AutotuneController::kOverBudget);
}

TEST(AutotuneControllerTest, TwoCpuStagesFillTheBudgetWithoutMoreThreads) {
  // 1 ms then 0.5 ms of CPU on 2 CPUs, all of them in the budget: the best
  // rate (1,333/s) needs the first stage at 2 on 2 threads; a third thread
  // would not fit the budget, and is not needed for the second call to run.
  Model m({{"src", 1e-6, true}, {"a", 1e-3, true}, {"b", 0.5e-3, true}}, 1, 2);
  AutotuneController c(options(1.0), tunables(m, 32), 1, 32, 2);
  TuneRun r = tune(&m, &c, 50);
  EXPECT_GE(m.last_rate, 0.95 * 1333);
  EXPECT_LE(r.max_cpu, c.budget() * AutotuneController::kOverBudget);
}

TEST(AutotuneControllerTest, TheSecondBusiestStageGetsItsTurn) {
  // 5 ms asleep then 0.2 ms of CPU: once the first stage is wide, the second
  // one limits the rate too, and both must grow (up to 32 threads in all:
  // 32 / 5.2 ms = 6,150/s).
  Model m({{"src", 1e-6, true}, {"io", 5e-3, false}, {"cpu", 0.2e-3, true}}, 1,
          2);
  AutotuneController c(options(1.0), tunables(m, 32), 1, 32, 2);
  TuneRun r = tune(&m, &c, 50);
  EXPECT_GE(m.last_rate, 0.95 * 6150);
  EXPECT_GE(m.stages[2].concurrency, 2);
  EXPECT_LE(r.max_cpu, c.budget() * AutotuneController::kOverBudget);
}

TEST(AutotuneControllerTest, ConsumerBoundPipelineIsLeftAlone) {
  Model m({{"src", 1e-6, true}, {"work", 1e-3, false}}, 2, 4);
  m.stages[1].concurrency = 2;
  m.consumer = 500;  // the stage could do 2,000/s
  AutotuneController c(options(0.5), tunables(m, 32), 2, 32, 4);
  TuneRun r = tune(&m, &c, 25);
  EXPECT_EQ(r.decisions, 0);
  EXPECT_EQ(m.stages[1].concurrency, 2);
}

TEST(AutotuneControllerTest, AChangeThatDoesNotRaiseTheRateIsUndone) {
  // 1 ms asleep per call, and a pool that may not grow past its one thread:
  // more concurrency cannot help, so each trial is undone and the stage is
  // then left alone for longer each time.
  Model m({{"src", 1e-6, true}, {"work", 1e-3, false}}, 1, 4);
  AutotuneController c(options(0.5), tunables(m, 32), 1, 1, 4);
  std::vector<AutotuneDecision> all;
  for (int i = 0; i < 25; ++i) {
    m.run(0.2);
    auto d = c.step(m.stats, m.cpu_total);
    m.apply(d);
    all.insert(all.end(), d.begin(), d.end());
  }
  EXPECT_NEAR(m.last_rate, 1000, 2);
  ASSERT_GE(all.size(), 2u);
  // Every raise is followed by its undo, with the reason.
  for (std::size_t i = 0; i + 1 < all.size(); i += 2) {
    EXPECT_LT(all[i].from, all[i].to);
    EXPECT_EQ(all[i + 1].from, all[i].to);
    EXPECT_EQ(all[i + 1].to, all[i].from);
    EXPECT_NE(all[i + 1].reason.find("undone"), std::string::npos)
        << all[i + 1].reason;
  }
  // Held off after each failure: far fewer trials than steps.
  EXPECT_LE(all.size(), 8u);
}

TEST(AutotuneControllerTest, OverBudgetLowersThePoolThreads) {
  // Started with 8 threads and 8 calls of CPU work on 8 CPUs; the budget is
  // a quarter of them.
  Model m({{"src", 1e-6, true}, {"work", 1e-3, true}}, 8, 8);
  m.stages[1].concurrency = 8;
  AutotuneController c(options(0.25), tunables(m, 32), 8, 32, 8);
  m.run(0.2);
  (void)c.step(m.stats, m.cpu_total);  // the first step only takes a baseline
  m.run(0.2);
  auto d = c.step(m.stats, m.cpu_total);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].stage, -1);
  EXPECT_EQ(d[0].target, "threads");
  EXPECT_EQ(d[0].from, 8);
  EXPECT_EQ(d[0].to, 2);
  EXPECT_NE(d[0].reason.find("over its budget"), std::string::npos);
  m.apply(d);
  TuneRun r = tune(&m, &c, 20);
  EXPECT_LE(m.last_cpu, c.budget() * AutotuneController::kOverBudget);
  (void)r;
}

TEST(AutotuneControllerTest, GilBoundPipelineIsLeftAlone) {
  // Python stages whose calls wait for the GIL as long as they hold it.
  Model m({{"src", 1e-6, true}, {"py", 1e-3, true}}, 4, 8);
  m.stages[1].concurrency = 4;
  AutotuneController c(options(0.5), tunables(m, 32), 4, 32, 8);
  int decisions = 0;
  for (int i = 0; i < 20; ++i) {
    m.run(0.2);
    StageStats& py = m.stats.stages[1];
    py.gil_acquisitions += 200;
    py.gil_held += ns(0.19);
    py.gil_wait += ns(0.6);
    decisions += static_cast<int>(c.step(m.stats, m.cpu_total).size());
  }
  EXPECT_EQ(decisions, 0);
}

TEST(AutotuneControllerTest, RejectsABudgetOutsideZeroToOne) {
  EXPECT_THROW(AutotuneController(options(0), {}, 1, 1, 2), InvalidArgument);
  EXPECT_THROW(AutotuneController(options(1.5), {}, 1, 1, 2), InvalidArgument);
}

TEST(StatsSinceTest, DifferencesOfCountersAndHistograms) {
  PipelineStats a;
  a.elapsed = milliseconds(100);
  a.items_delivered = 10;
  StageStats s;
  s.name = "1:x";
  s.kind = "pipe";
  s.calls = 10;
  s.op_time.record(milliseconds(1));
  s.wait_input = milliseconds(5);
  a.stages.push_back(s);
  PipelineStats b = a;
  b.elapsed = milliseconds(300);
  b.items_delivered = 25;
  b.stages[0].calls = 25;
  b.stages[0].concurrency = 4;
  b.stages[0].op_time.record(milliseconds(3));
  b.stages[0].wait_input = milliseconds(7);
  PipelineStats d = stats_since(b, a);
  EXPECT_EQ(d.elapsed, milliseconds(200));
  EXPECT_EQ(d.items_delivered, 15u);
  EXPECT_EQ(d.stages[0].calls, 15u);
  EXPECT_EQ(d.stages[0].concurrency, 4);
  EXPECT_EQ(d.stages[0].op_time.count(), 1u);
  EXPECT_EQ(d.stages[0].op_time.sum(), milliseconds(3));
  EXPECT_EQ(d.stages[0].wait_input, milliseconds(2));
}

// --- The engine ------------------------------------------------------------

TEST(ThreadPoolActiveThreadsTest, OnlyActiveThreadsRunTasks) {
  ThreadPool pool(4);
  pool.set_active_threads(1);
  EXPECT_EQ(pool.active_threads(), 1);
  std::mutex mu;
  std::vector<std::thread::id> ids;
  std::latch done(200);
  for (int i = 0; i < 200; ++i) {
    pool.submit([&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) ==
            ids.end()) {
          ids.push_back(std::this_thread::get_id());
        }
      }
      done.count_down();
    });
  }
  done.wait();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ids.size(), 1u);
}

TEST(ThreadPoolActiveThreadsTest, RaisedThreadsRunTasksSideBySide) {
  ThreadPool pool(3);
  pool.set_active_threads(1);
  pool.set_active_threads(3);
  EXPECT_EQ(pool.active_threads(), 3);
  // Three tasks that each wait until all three have started need three
  // threads at once (with fewer, this test hangs).
  std::latch all_started(3);
  std::latch done(3);
  for (int i = 0; i < 3; ++i) {
    pool.submit([&] {
      all_started.arrive_and_wait();
      done.count_down();
    });
  }
  done.wait();
}

TEST(ThreadPoolActiveThreadsTest, LoweringWhileIdleLosesNoWakeUp) {
  // Idle threads above the new limit may be the ones a submit wakes: the
  // wake-up must reach an active thread.
  for (int round = 0; round < 50; ++round) {
    ThreadPool pool(4);
    pool.set_active_threads(round % 3 + 1);
    std::latch done(20);
    for (int i = 0; i < 20; ++i) pool.submit([&] { done.count_down(); });
    done.wait();
  }
}

TEST(ThreadPoolActiveThreadsTest, ARunningTaskLearnsItsThreadWasMadeInactive) {
  // Two long-running tasks (as a stage's worker loop is) on two threads;
  // lowering the limit to one tells exactly the one on the second thread.
  ThreadPool pool(2);
  std::latch both_running(2);
  std::atomic<bool> stop{false};
  std::atomic<int> told{0};
  std::latch done(2);
  for (int i = 0; i < 2; ++i) {
    pool.submit([&] {
      both_running.arrive_and_wait();
      while (!stop.load()) {
        if (pool.current_thread_inactive()) {
          told.fetch_add(1);
          break;
        }
      }
      done.count_down();
    });
  }
  both_running.wait();
  EXPECT_FALSE(pool.current_thread_inactive());  // not a pool thread
  pool.set_active_threads(1);
  while (told.load() == 0) {
  }
  stop.store(true);
  done.wait();
  EXPECT_EQ(told.load(), 1);
}

TEST(ThreadPoolActiveThreadsTest, ClampsToTheThreadsItHas) {
  ThreadPool pool(2);
  pool.set_active_threads(0);
  EXPECT_EQ(pool.active_threads(), 1);
  pool.set_active_threads(9);
  EXPECT_EQ(pool.active_threads(), 2);
}

TEST(ThreadPoolActiveThreadsTest, CpuTimeCountsWhatTheThreadsUsed) {
  ThreadPool pool(2);
  const nanoseconds before = pool.cpu_time();
  std::latch done(1);
  pool.submit([&] {
    // Busy until this thread has used 20 ms of CPU.
    timespec t0{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (;;) {
      timespec t{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      if ((t.tv_sec - t0.tv_sec) * 1'000'000'000L + (t.tv_nsec - t0.tv_nsec) >=
          20'000'000L) {
        break;
      }
    }
    done.count_down();
  });
  done.wait();
  EXPECT_GE(pool.cpu_time() - before, milliseconds(20));
  pool.shutdown();
  const nanoseconds after = pool.cpu_time();  // kept after the join
  EXPECT_GE(after - before, milliseconds(20));
}

// A map op that sleeps `micros` per call (a stand-in for I/O).
OpPtr sleep_op(int micros) {
  return std::make_shared<testing::IntMapOp>([micros](int x) {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
    return std::optional<int>(x);
  });
}

PipelineSpec sleep_pipeline(int n, OutputOrder order) {
  PipelineSpec spec;
  spec.source = testing::int_source(n);
  spec.source_type = &typeid(int);
  StageSpec stage;
  stage.op = sleep_op(1000);
  stage.options.name = "io";
  stage.options.output_order = order;
  spec.stages.push_back(stage);
  spec.sink_capacity = 8;
  return spec;
}

BuildOptions autotuned(int threads) {
  BuildOptions o;
  o.num_threads = threads;
  o.autotune.enabled = true;
  o.autotune.interval = milliseconds(20);
  o.autotune.max_concurrency = 8;
  o.autotune.cpus = 4;  // a budget of 2 CPUs, whatever the machine
  return o;
}

TEST(AutotuneEngineTest, RaisesASleepingStageAndKeepsEveryItemInOrder) {
  // 1 ms asleep per item from concurrency 1 and one thread: the controller
  // raises the stage and the pool while items flow; input order holds and
  // no item is lost or repeated across the changes.
  Pipeline p =
      build_pipeline(sleep_pipeline(600, OutputOrder::kInput), autotuned(1));
  std::vector<int> got = testing::drain<int>(p);
  EXPECT_EQ(got, testing::iota(600));
  const PipelineStats s = p.stats();
  ASSERT_TRUE(s.autotune.enabled);
  EXPECT_DOUBLE_EQ(s.autotune.cpu_budget, 2.0);
  ASSERT_FALSE(s.autotune.decisions.empty());
  EXPECT_EQ(s.autotune.decisions_total, s.autotune.decisions.size());
  bool raised_stage = false;
  for (const AutotuneDecision& d : s.autotune.decisions) {
    raised_stage |= d.stage == 1 && d.to > d.from;
  }
  EXPECT_TRUE(raised_stage);
  EXPECT_GT(s.stages[1].concurrency, 1);
  EXPECT_GT(s.num_threads, 1);
  // The table shows the settings and the changes; JSON round-trips them.
  EXPECT_NE(format_table(s).find("autotune: threads="), std::string::npos);
  PipelineStats back = stats_from_json(to_json(s));
  ASSERT_TRUE(back.autotune.enabled);
  ASSERT_EQ(back.autotune.decisions.size(), s.autotune.decisions.size());
  EXPECT_EQ(back.autotune.decisions[0].target, s.autotune.decisions[0].target);
  EXPECT_EQ(back.autotune.decisions[0].to, s.autotune.decisions[0].to);
  EXPECT_EQ(to_json(back), to_json(s));
}

TEST(AutotuneEngineTest, CompletionOrderLosesNothingAcrossChanges) {
  Pipeline p = build_pipeline(sleep_pipeline(600, OutputOrder::kCompletion),
                              autotuned(1));
  EXPECT_EQ(testing::sorted(testing::drain<int>(p)), testing::iota(600));
}

TEST(AutotuneEngineTest, StopWhileTuningEndsCleanly) {
  Pipeline p = build_pipeline(sleep_pipeline(1 << 20, OutputOrder::kInput),
                              autotuned(2));
  Item item;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(p.next(&item), NextStatus::kItem);
  p.stop();
  EXPECT_EQ(p.next(&item), NextStatus::kEnd);
}

TEST(AutotuneEngineTest, OffByDefaultAndValidatedWhenOn) {
  Pipeline p = build_pipeline(sleep_pipeline(10, OutputOrder::kInput), {});
  testing::drain<int>(p);
  EXPECT_FALSE(p.stats().autotune.enabled);
  EXPECT_EQ(to_json(p.stats()).find("autotune"), std::string::npos);
  BuildOptions bad = autotuned(1);
  bad.autotune.cpu_budget = 0;
  EXPECT_THROW(build_pipeline(sleep_pipeline(10, OutputOrder::kInput), bad),
               InvalidArgument);
  bad = autotuned(1);
  bad.autotune.max_concurrency = 0;
  EXPECT_THROW(build_pipeline(sleep_pipeline(10, OutputOrder::kInput), bad),
               InvalidArgument);
}

}  // namespace
}  // namespace feedline
