// SPDX-License-Identifier: Apache-2.0

#include "feedline/ops/shared_completion.h"

#include <utility>

#include "feedline/base/error.h"

namespace feedline::ops {

bool SharedCompletion::pending() const {
  MutexLock lock(mu_);
  return done_.has_value();
}

bool SharedCompletion::stop_requested() const {
  MutexLock lock(mu_);
  return done_.has_value() && done_->stop_token().stop_requested();
}

Completion SharedCompletion::take() {
  MutexLock lock(mu_);
  if (!done_) throw InvalidArgument("this completion was already finished");
  Completion done = std::move(*done_);
  done_.reset();
  return done;
}

}  // namespace feedline::ops
