// SPDX-License-Identifier: Apache-2.0

#include "pipeline/autotune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "feedline/base/error.h"

namespace feedline::detail {
namespace {

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}

// The next concurrency to try: doubling while small, +50% after.
int next_value(int value) {
  return value < 4 ? value * 2 : value + (value + 1) / 2;
}

}  // namespace

AutotuneController::AutotuneController(const AutotuneOptions& options,
                                       const std::vector<TunableStage>& stages,
                                       int threads, int max_threads, int cpus)
    : budget_(options.cpu_budget * std::max(cpus, 1)) {
  if (!(options.cpu_budget > 0 && options.cpu_budget <= 1)) {
    throw InvalidArgument("autotune cpu_budget must be in (0, 1] (got " +
                          fmt("%g", options.cpu_budget) + ")");
  }
  for (const TunableStage& s : stages) {
    Knob k;
    k.stage = s.index;
    k.value = std::max(s.concurrency, 1);
    k.max = std::max(s.max, k.value);
    stages_.push_back(k);
  }
  threads_knob_.value = std::max(threads, 1);
  threads_knob_.max = std::max(max_threads, threads_knob_.value);
}

int AutotuneController::concurrency(int index) const {
  for (const Knob& k : stages_) {
    if (k.stage == index) return k.value;
  }
  return 0;
}

AutotuneController::Knob* AutotuneController::stage_knob(int index) {
  for (Knob& k : stages_) {
    if (k.stage == index) return &k;
  }
  return nullptr;
}

std::string AutotuneController::name_of(const Knob& knob) const {
  if (knob.stage < 0) return "threads";
  auto i = static_cast<std::size_t>(knob.stage);
  return i < names_.size() ? names_[i] : std::to_string(knob.stage);
}

AutotuneDecision AutotuneController::decide(const Knob& knob, int from, int to,
                                            std::string reason) const {
  AutotuneDecision d;
  d.at = now_;
  d.stage = knob.stage;
  d.target = name_of(knob);
  d.from = from;
  d.to = to;
  d.reason = std::move(reason);
  return d;
}

std::vector<AutotuneDecision> AutotuneController::step(
    const PipelineStats& stats, std::chrono::nanoseconds pool_cpu) {
  std::vector<AutotuneDecision> out;
  now_ = stats.elapsed;
  names_.clear();
  for (const StageStats& s : stats.stages) names_.push_back(s.name);
  if (!has_prev_) {
    has_prev_ = true;
    prev_ = stats;
    prev_cpu_ = pool_cpu;
    return out;
  }
  PipelineStats d = stats_since(stats, prev_);
  const double dt = seconds(d.elapsed);
  if (dt <= 0) return out;
  ++step_;
  cpu_used_ = seconds(pool_cpu - prev_cpu_) / dt;
  prev_ = stats;
  prev_cpu_ = pool_cpu;
  const bool has_sink = !d.stages.empty() && d.stages.back().kind == "sink";
  const double rate = static_cast<double>(has_sink ? d.stages.back().items_in
                                                   : d.items_delivered) /
                      dt;
  double busy = 0;  // threads inside calls, on average
  for (std::size_t i = 0; i + (has_sink ? 1 : 0) < d.stages.size(); ++i) {
    busy += seconds(d.stages[i].op_time.sum()) / dt;
  }
  const bool over_budget = cpu_used_ > budget_ * kOverBudget;

  // 1. The trial in progress.
  if (trial_.active) {
    if (trial_.settle > 0) {
      --trial_.settle;
      return out;
    }
    trial_.active = false;
    const bool gained = rate >= trial_.rate_before * trial_.required_gain;
    if (over_budget || !gained) {
      std::string why =
          over_budget
              ? fmt("the pool used %.2f CPUs, over its budget of %.2f; undone",
                    cpu_used_, budget_)
              : fmt("output %.0f -> %.0f items/s, less than the %+.0f%% "
                    "needed; undone",
                    trial_.rate_before, rate, 100 * (trial_.required_gain - 1));
      // Undone last first.
      for (std::size_t i = trial_.changes.size(); i-- > 0;) {
        const Change& c = trial_.changes[i];
        Knob& k = *c.knob;
        k.value = c.from;
        k.failures = std::min(k.failures + 1, 8);
        k.hold_until =
            step_ + std::min(kHoldSteps << (k.failures - 1), kMaxHoldSteps);
        out.push_back(decide(k, c.to, c.from, why));
      }
      trial_.changes.clear();
      return out;
    }
    for (const Change& c : trial_.changes) c.knob->failures = 0;
    trial_.changes.clear();
  }

  // 2. Over the budget: fewer active threads, in proportion.
  Knob& threads = threads_knob_;
  if (over_budget) {
    if (threads.value <= 1) return out;
    const double busy_threads = std::min(busy, double(threads.value));
    int target = static_cast<int>(
        std::floor(std::max(busy_threads, 1.0) * budget_ / cpu_used_));
    target = std::clamp(target, 1, threads.value - 1);
    out.push_back(decide(threads, threads.value, target,
                         fmt("the pool used %.2f CPUs, over its budget of "
                             "%.2f",
                             cpu_used_, budget_)));
    threads.value = target;
    threads.hold_until = step_ + kHoldSteps;
    return out;
  }
  if (rate <= 0) return out;

  // 3. What limits the rate.
  d.num_threads = threads.value;
  const Bottleneck b = find_bottleneck(d);
  if (b.kind != "stage" && b.kind != "threads") {
    return out;  // the consumer, the GIL, or too little to tell
  }
  // CPU per busy thread: what each more busy thread would cost.
  const double per_thread =
      std::clamp(cpu_used_ / std::max(busy, 1e-3), 0.05, 1.0);
  const double limit = budget_ * kOverBudget;
  // The CPU after `extra` more calls can be busy, on `t` active threads.
  auto predicted = [&](double extra, int t) {
    return per_thread * std::min(busy + extra, static_cast<double>(t));
  };
  const std::string cpu_note =
      fmt("; the pool used %.2f of %.2f CPUs", cpu_used_, budget_);

  // Candidates, most promising first: the stages by how busy their calls
  // keep their concurrency (the bottleneck's first), then the pool. The
  // first one with room is tried; a knob left alone after a failed trial
  // gives the next one its turn (two stages near saturation both get
  // raised, one at a time).
  struct Candidate {
    Knob* knob;
    double util;
    std::string why;
  };
  std::vector<Candidate> candidates;
  const std::size_t n_work = d.stages.size() - (has_sink ? 1 : 0);
  for (std::size_t i = 0; i < n_work; ++i) {
    Knob* k = stage_knob(static_cast<int>(i));
    if (k == nullptr) continue;
    const StageStats& s = d.stages[i];
    const double util = seconds(s.op_time.sum()) / dt / std::max(k->value, 1);
    if (static_cast<int>(i) == b.stage && b.kind == "stage") {
      candidates.push_back({k, 2.0, "bottleneck: " + b.reason});
    } else if (util >= kRaiseAbove) {
      candidates.push_back(
          {k, util,
           fmt("its calls kept %.0f%% of its concurrency busy", 100 * util) +
               " (" + s.name + ")"});
    }
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& c) { return a.util > c.util; });
  if (b.kind == "threads" || busy >= kRaiseAbove * threads.value) {
    candidates.insert(
        b.kind == "threads" ? candidates.begin() : candidates.end(),
        {&threads, 0,
         b.kind == "threads" ? "bottleneck: " + b.reason
                             : fmt("the pool's %.0f threads were %.0f%% busy",
                                   threads.value, 100 * busy / threads.value)});
  }

  Trial trial;
  double ideal_gain = 1;
  for (const Candidate& c : candidates) {
    Knob* k = c.knob;
    if (k->value >= k->max || step_ < k->hold_until) continue;
    int to = std::min(next_value(k->value), k->max);
    if (k == &threads) {
      while (to > k->value && predicted(to - busy, to) > limit) --to;
      if (to <= k->value) continue;
      trial.changes.push_back({k, k->value, to});
      out.push_back(decide(*k, k->value, to, c.why + cpu_note));
    } else {
      // Threads for the new calls, if the pool would have none free; each
      // new call may keep a thread busy: within the budget.
      // (No more than the budget keeps busy: with fewer threads than calls,
      // the new calls still run whenever a thread is free.)
      const int fit = std::max(
          threads.value,
          std::min(threads.max,
                   static_cast<int>(std::floor(limit / per_thread + 1e-6))));
      auto threads_for = [&](int v) {
        const int need = static_cast<int>(std::ceil(busy + (v - k->value)));
        return std::clamp(need, threads.value, fit);
      };
      while (to > k->value &&
             predicted(to - k->value, threads_for(to)) > limit) {
        --to;
      }
      if (to <= k->value) continue;
      trial.changes.push_back({k, k->value, to});
      out.push_back(decide(*k, k->value, to, c.why + cpu_note));
      const int t_to = threads_for(to);
      if (t_to > threads.value) {
        trial.changes.push_back({&threads, threads.value, t_to});
        out.push_back(
            decide(threads, threads.value, t_to,
                   "threads for the new calls of " + name_of(*k) + cpu_note));
      }
    }
    ideal_gain = static_cast<double>(to) / k->value;
    break;
  }
  if (trial.changes.empty()) return out;
  for (const Change& c : trial.changes) c.knob->value = c.to;
  trial.active = true;
  trial.settle = 1;
  trial.rate_before = rate;
  trial.required_gain = std::max(kMinGain, 1 + kGainShare * (ideal_gain - 1));
  trial_ = std::move(trial);
  return out;
}

}  // namespace feedline::detail
