// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/pipeline.h"

#include <string>
#include <utility>

#include "feedline/base/error.h"
#include "pipeline/pipeline_impl.h"

namespace feedline {

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
  return impl_->wait_next(out, deadline);
}

NextStatus Pipeline::wait_next(Item* out, std::optional<Deadline> deadline,
                               const std::function<bool()>& interrupt,
                               std::chrono::nanoseconds interval) {
  for (;;) {
    Deadline slice = detail::deadline_after(interval);
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
  std::optional<Deadline> deadline;
  if (timeout) deadline = detail::deadline_after(*timeout);
  NextStatus status = impl_->wait_next(out, deadline);
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

std::exception_ptr Pipeline::failure() const { return impl_->failure(); }

}  // namespace feedline
