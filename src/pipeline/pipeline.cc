// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/pipeline.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "feedline/base/error.h"
#include "pipeline/pipeline_impl.h"

namespace feedline {
namespace {

// A consumer's turn: taken for one wait, counted while held.
class ConsumerTurn {
 public:
  explicit ConsumerTurn(detail::PipelineImpl& impl) : impl_(impl) {}
  ~ConsumerTurn() {
    if (!held_) return;
    --impl_.consumers_waiting;
    {
      MutexLock lock(impl_.consumer_mu);
      impl_.consumer_busy = false;
    }
    impl_.consumer_cv.notify_one();
  }
  ConsumerTurn(const ConsumerTurn&) = delete;
  ConsumerTurn& operator=(const ConsumerTurn&) = delete;

  // Takes the turn, waiting for another consumer's to end at most until
  // `deadline` (none: as long as it takes); false when it passed first.
  bool take(std::optional<Pipeline::Deadline> deadline) {
    MutexLock lock(impl_.consumer_mu);
    auto free = [this]()
                    NO_THREAD_SAFETY_ANALYSIS { return !impl_.consumer_busy; };
    if (deadline) {
      if (!impl_.consumer_cv.wait_until(lock.native(), *deadline, free))
        return false;
    } else {
      impl_.consumer_cv.wait(lock.native(), free);
    }
    impl_.consumer_busy = true;
    held_ = true;
    ++impl_.consumers_waiting;
    return true;
  }

 private:
  detail::PipelineImpl& impl_;
  bool held_ = false;
};

}  // namespace

Pipeline::Pipeline(std::unique_ptr<detail::PipelineImpl> impl)
    : impl_(std::move(impl)) {}
Pipeline::Pipeline(Pipeline&&) noexcept = default;
Pipeline& Pipeline::operator=(Pipeline&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->stop_unless_stopping();
    detail::PipelineImpl::leak_if_inherited(&impl_);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Pipeline::~Pipeline() {
  if (impl_) impl_->stop_unless_stopping();
  detail::PipelineImpl::leak_if_inherited(&impl_);
}

void Pipeline::start() { impl_->start(); }
bool Pipeline::started() const { return impl_->started(); }

NextStatus Pipeline::wait_next(Item* out, std::optional<Deadline> deadline) {
  // A pipeline inherited through fork is refused before its consumer lock
  // (which a consumer of the parent may have held at the fork) is taken.
  impl_->check_not_inherited();
  ConsumerTurn turn(*impl_);
  if (!turn.take(deadline)) return NextStatus::kTimeout;
  return impl_->wait_next(out, deadline);
}

NextStatus Pipeline::wait_next(Item* out, std::optional<Deadline> deadline,
                               const std::function<bool()>& interrupt,
                               std::chrono::nanoseconds interval) {
  // A pipeline inherited through fork is refused before its consumer lock
  // (which a consumer of the parent may have held at the fork) is taken.
  impl_->check_not_inherited();
  ConsumerTurn turn(*impl_);
  for (;;) {  // another consumer's turn is waited for in slices too
    Deadline slice = deadline_after(interval);
    if (deadline && *deadline < slice) slice = *deadline;
    if (turn.take(slice)) break;
    if (interrupt()) return NextStatus::kInterrupted;
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      return NextStatus::kTimeout;
    }
  }
  for (;;) {
    Deadline slice = deadline_after(interval);
    if (deadline && *deadline < slice) slice = *deadline;
    NextStatus status = impl_->wait_next(out, slice);
    if (status != NextStatus::kTimeout) return status;
    if (interrupt()) return NextStatus::kInterrupted;
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      return NextStatus::kTimeout;
    }
  }
}

NextStatus Pipeline::next(Item* out,
                          std::optional<std::chrono::nanoseconds> timeout) {
  return next(
      out, timeout, [] { return false; }, std::chrono::hours(1));
}

NextStatus Pipeline::next(Item* out,
                          std::optional<std::chrono::nanoseconds> timeout,
                          const std::function<bool()>& interrupt,
                          std::chrono::nanoseconds interval) {
  std::optional<Deadline> deadline;
  if (timeout) deadline = deadline_after(*timeout);
  NextStatus status = wait_next(out, deadline, interrupt, interval);
  if (status == NextStatus::kTimeout) {
    throw Timeout(
        "the next item is not available after " +
        std::to_string(std::chrono::duration<double>(*timeout).count()) + " s");
  }
  return status;
}

void Pipeline::stop() noexcept {
  if (impl_) impl_->stop(std::nullopt);
}

bool Pipeline::stop(std::chrono::nanoseconds timeout) noexcept {
  return !impl_ || impl_->stop(timeout);
}

bool Pipeline::stopping() const { return impl_->stopping(); }

bool Pipeline::on_worker_thread() const { return impl_->on_worker_thread(); }

PipelineStats Pipeline::stats() const { return impl_->stats(); }

Trace Pipeline::trace() const { return impl_->trace(); }

void Pipeline::report_region(const std::string& region, int host_stage,
                             int worker, int workers,
                             std::vector<StageStats> stages) {
  impl_->report_region(region, host_stage, worker, workers, std::move(stages));
}

void Pipeline::report_consumer_gil_wait(
    std::chrono::nanoseconds wait) noexcept {
  impl_->report_consumer_gil_wait(wait);
}

std::exception_ptr Pipeline::failure() const { return impl_->failure(); }

std::exception_ptr Pipeline::take_failure() {
  if (!impl_->stopping() || !stop(std::chrono::nanoseconds(0))) return nullptr;
  if (impl_->failure_taken.exchange(true)) return nullptr;
  return impl_->failure();
}

int Pipeline::consumers_waiting() const {
  return impl_->consumers_waiting.load();
}

}  // namespace feedline
