// SPDX-License-Identifier: Apache-2.0
//
// SharedCompletion: the Completion of one async call (pipeline/op.h), to be
// finished once from any thread. An async op that hands its calls to another
// runtime (a callback API, an event loop, Python) keeps one per call: any
// thread may ask whether the call is still pending or the pipeline stopping,
// and the first take() gets the Completion to finish.
//
// Thread safety: every member may be called from any thread.

#pragma once

#include <optional>

#include "feedline/base/mutex.h"
#include "feedline/pipeline/op.h"

namespace feedline::ops {

class SharedCompletion {
 public:
  explicit SharedCompletion(Completion&& done) : done_(std::move(done)) {}
  SharedCompletion(const SharedCompletion&) = delete;
  SharedCompletion& operator=(const SharedCompletion&) = delete;

  // True until take().
  bool pending() const EXCLUDES(mu_);
  // True while pending once the pipeline is stopping.
  bool stop_requested() const EXCLUDES(mu_);
  // The Completion, to finish. Destroying this object before take() drops
  // it, which fails the call.
  // Throws: InvalidArgument if it was already taken.
  Completion take() EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::optional<Completion> done_ GUARDED_BY(mu_);
};

}  // namespace feedline::ops
