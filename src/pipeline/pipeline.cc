// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/pipeline.h"

#include <utility>

#include "pipeline/pipeline_impl.h"

namespace feedline {

Pipeline::Pipeline(std::unique_ptr<detail::PipelineImpl> impl)
    : impl_(std::move(impl)) {}
Pipeline::Pipeline(Pipeline&&) noexcept = default;
Pipeline& Pipeline::operator=(Pipeline&&) noexcept = default;
Pipeline::~Pipeline() = default;

void Pipeline::start() { impl_->start(); }
bool Pipeline::started() const { return impl_->started(); }

NextStatus Pipeline::next(Item* out,
                          std::optional<std::chrono::nanoseconds> timeout) {
  return impl_->next(out, timeout);
}

void Pipeline::stop() noexcept {
  if (impl_) impl_->stop();
}

PipelineStats Pipeline::stats() const { return impl_->stats(); }

std::exception_ptr Pipeline::failure() const { return impl_->failure(); }

}  // namespace feedline
