// SPDX-License-Identifier: Apache-2.0

#include "io/rewriter.h"

#include <utility>

#include "feedline/base/error.h"

namespace feedline::io {

RewriterBase::RewriterBase(std::string_view name, ByteSink sink,
                           std::vector<std::size_t> order)
    : name_(name), sink_(std::move(sink)), order_(std::move(order)) {
  rank_.resize(order_.size());
  for (std::size_t k = 0; k < order_.size(); ++k) rank_[order_[k]] = k;
}

RewriterBase::Step RewriterBase::take(std::size_t index) {
  if (finished_) {
    throw InvalidArgument(name_ + ": member " + std::to_string(index) +
                          " given after the archive was finished");
  }
  if (index >= order_.size()) {
    throw InvalidArgument(name_ + ": no member " + std::to_string(index) +
                          " to replace (the archive has " +
                          std::to_string(order_.size()) + ")");
  }
  if (index == last_) {
    throw InvalidArgument(name_ + ": member " + std::to_string(index) +
                          " replaced twice");
  }
  const std::size_t k = rank_[index];
  if (k < next_) {
    throw InvalidArgument(
        name_ + ": member " + std::to_string(index) +
        " comes before the last one replaced: members are replaced in the "
        "order their data lies in the archive");
  }
  const Step step{next_, k};
  last_ = index;
  next_ = k + 1;
  return step;
}

std::size_t RewriterBase::close() {
  if (finished_) throw InvalidArgument(name_ + ": finished twice");
  finished_ = true;
  return next_;
}

void RewriterBase::emit(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  sink_(bytes);
  written_ += bytes.size();
}

}  // namespace feedline::io
