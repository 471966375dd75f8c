// SPDX-License-Identifier: Apache-2.0
//
// Untyped ops for engine tests: int maps that fail or skip on chosen items,
// async ops that complete inline or from a separate thread, a generator op,
// and a source that can be held at a chosen item.

#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "feedline/pipeline/op.h"
#include "feedline/pipeline/spec.h"

namespace feedline::testing {

// Calls `fn(int)`; an empty optional skips. Throws std::runtime_error for
// items where `fail(x)` is true.
class IntMapOp final : public MapOp {
 public:
  explicit IntMapOp(std::function<std::optional<int>(int)> fn)
      : fn_(std::move(fn)) {}
  Item call(Item input) override {
    std::optional<int> r = fn_(input.take_as<int>());
    return r ? Item(*r) : Item();
  }

 private:
  std::function<std::optional<int>(int)> fn_;
};

inline OpPtr identity_op() {
  return std::make_shared<IntMapOp>(
      [](int x) { return std::optional<int>(x); });
}

inline OpPtr failing_op(int every) {
  return std::make_shared<IntMapOp>([every](int x) -> std::optional<int> {
    if (x % every == 0)
      throw std::runtime_error("bad item " + std::to_string(x));
    return x;
  });
}

// Runs completions on its own thread, in FIFO order.
class Completer {
 public:
  Completer() : thread_([this](std::stop_token stop) { run(stop); }) {}
  ~Completer() {
    thread_.request_stop();
    cv_.notify_all();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void run(std::stop_token stop) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !work_.empty() || stop.stop_requested(); });
      if (work_.empty()) return;
      auto fn = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  std::jthread thread_;  // last: joined before the queue is destroyed
};

// Emits x (or fails when x % fail_every == 0) inline, or through `completer`.
class IntAsyncOp final : public AsyncOp {
 public:
  IntAsyncOp(std::shared_ptr<Completer> completer, int fail_every = 0)
      : completer_(std::move(completer)), fail_every_(fail_every) {}
  void start(Item input, Completion&& done) override {
    int x = input.take_as<int>();
    auto finish = [x, fail = fail_every_](Completion& c) {
      if (fail > 0 && x % fail == 0) {
        c.fail(std::make_exception_ptr(std::runtime_error("async bad item")));
      } else {
        c.emit(Item(x));
      }
    };
    if (!completer_) {
      finish(done);
      return;
    }
    auto shared = std::make_shared<Completion>(std::move(done));
    completer_->post([shared, finish] { finish(*shared); });
  }

 private:
  std::shared_ptr<Completer> completer_;
  int fail_every_;
};

// x -> x copies of x (so 0 yields nothing).
class RepeatOp final : public GeneratorOp {
 public:
  class Gen final : public ItemGenerator {
   public:
    explicit Gen(int x) : x_(x) {}
    bool next(Item* out) override {
      if (emitted_ == x_) return false;
      ++emitted_;
      *out = Item(x_);
      return true;
    }

   private:
    int x_;
    int emitted_ = 0;
  };
  std::unique_ptr<ItemGenerator> start(Item input) override {
    return std::make_unique<Gen>(input.take_as<int>());
  }
};

// A source of 0..n-1 ints.
inline SourceFactory int_source(int n) {
  struct Src final : ItemSource {
    int i = 0;
    int n = 0;
    bool next(Item* out) override {
      if (i == n) return false;
      *out = Item(i++);
      return true;
    }
  };
  return [n]() -> std::unique_ptr<ItemSource> {
    auto s = std::make_unique<Src>();
    s->n = n;
    return s;
  };
}

// A one-shot gate: wait() blocks until open() (no timeouts, no sleeping).
class Gate {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

}  // namespace feedline::testing
