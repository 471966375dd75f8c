// SPDX-License-Identifier: Apache-2.0
//
// What the shared-memory transports (SharedArena, SharedRing) have in common:
// an anonymous memory file mapped MAP_SHARED, and waits on a futex word of
// that mapping that any process can wake.

#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "feedline/base/clock.h"

namespace feedline::detail {

std::size_t page_size();

inline std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

// A memory file and its mapping. Owns neither: the caller closes and unmaps.
struct SharedFile {
  int fd = -1;
  void* base = nullptr;
  std::size_t bytes = 0;
};

// A new zero-filled anonymous file (memfd, close-on-exec) of `bytes` bytes,
// mapped read-write. `who` starts error messages ("shared arena").
// Throws: IoError if it cannot be made or mapped.
SharedFile create_shared_file(const char* who, const char* name,
                              std::size_t bytes);

// Maps the memory file `fd` (a duplicate is kept, the caller still owns
// `fd`), after checking it holds at least `min_bytes`.
// Throws: IoError if it cannot be duplicated or mapped; InvalidArgument if
// it is smaller than `min_bytes` (`what` names what it should have been).
SharedFile map_shared_file(const char* who, const char* what, int fd,
                           std::size_t min_bytes);

void unmap_shared_file(const SharedFile& file);

// Shared waits: the waiter announces itself in `waiters`, reads `wake`,
// checks its condition once more, then sleeps on `wake` (a process-shared
// futex) until someone calls notify_shared(). A change after the check
// bumps `wake`, so the sleep returns at once instead of missing it.
//
// Calls `ready()` until it returns true (returns true) or `deadline`
// passes or `stop()` returns true (returns false).
template <typename Ready, typename Stop>
bool wait_shared(std::atomic<uint32_t>& wake, std::atomic<uint32_t>& waiters,
                 std::chrono::steady_clock::time_point deadline, Ready ready,
                 Stop stop);

// Bumps `wake` and wakes every process sleeping on it.
void notify_shared(std::atomic<uint32_t>& wake,
                   const std::atomic<uint32_t>& waiters);

// Sleeps on `wake` while it holds `seen`, at most until `deadline`.
void futex_wait_until(std::atomic<uint32_t>& wake, uint32_t seen,
                      std::chrono::steady_clock::time_point deadline);

template <typename Ready, typename Stop>
bool wait_shared(std::atomic<uint32_t>& wake, std::atomic<uint32_t>& waiters,
                 std::chrono::steady_clock::time_point deadline, Ready ready,
                 Stop stop) {
  for (;;) {
    if (stop()) return false;
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = wake.load(std::memory_order_seq_cst);
    bool done = stop();
    bool ok = !done && ready();
    if (!done && !ok) futex_wait_until(wake, seen, deadline);
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (done) return false;
    if (ok) return true;
  }
}

}  // namespace feedline::detail
