// SPDX-License-Identifier: Apache-2.0
//
// spin_wait(): a short busy wait before a thread goes to sleep.
//
// Handing an item from one thread to another through a condition variable
// costs a futex wake and two context switches, a few microseconds, which is
// far more than a cheap pipeline stage spends on an item. A thread that is
// about to sleep for want of work first polls for it for a few microseconds:
// when the work arrives within that time (the common case in a busy
// pipeline) no thread sleeps and nobody has to be woken. The budget is kept
// short, and the poll yields the processor now and then, so that a spinning
// thread never holds back threads that have real work on a machine with few
// cores.
//
// Thread safety: stateless; `ready` is called from the calling thread only.

#pragma once

#include <chrono>
#include <thread>

#include "feedline/base/mutex.h"

namespace feedline {

// How long a thread polls for work before it sleeps.
inline constexpr std::chrono::microseconds kSpinBeforeSleep{50};

// Polls `ready` until it returns true or `budget` has passed. Returns the
// last result of `ready`.
template <typename Ready>
bool spin_wait(Ready&& ready,
               std::chrono::nanoseconds budget = kSpinBeforeSleep) {
  if (ready()) return true;
  const auto end = std::chrono::steady_clock::now() + budget;
  for (int i = 1;; ++i) {
    if ((i & 15) == 0) {
      // Lets another runnable thread on this core go first.
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() >= end) return ready();
    } else {
      cpu_pause();
    }
    if (ready()) return true;
  }
}

}  // namespace feedline
