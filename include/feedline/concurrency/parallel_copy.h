// SPDX-License-Identifier: Apache-2.0
//
// parallel_copy(): memcpy of a large buffer on several cores.
//
// One core copying a buffer much larger than its caches is held back by
// how many cache misses it can keep in flight, not by the memory's
// bandwidth: on a 2-core VM, one thread copies 16 MiB at 13-15 GB/s and two
// threads, each taking half, at 29-30 GB/s (thread start included). The
// shared arena's writes copy this way: the parent only views what the
// worker copied. The ring does not: its reader copies too, and on few
// cores the reader's and the writer's helper threads would contend (its
// 4 MiB hand-off lost 10% with them).
//
// The threads share the work in 512 KiB chunks, each claiming the next one
// until none is left: a helper that the scheduler starts late (the other
// core busy with the reader) leaves its chunks to the caller instead of
// holding the call up with a fixed half, so the call is never much slower
// than one memcpy. Copies stay ordinary stores (not streaming ones, which
// skip the cache): a reader that reads every byte next finds them in the
// cache, and handed 4 MiB items on at 9.4-11.0 GB/s after them against
// 8.1-9.3 after streaming stores.
//
// The helper threads live for one call, so nothing outlives it and a fork
// between two calls finds no thread to lose. Small copies (below
// kParallelCopyMin) are one memcpy: starting a thread costs tens of
// microseconds.
//
// Thread safety: like memcpy: `dst` must not be read or written by others
// during the call. Returns after every byte is copied; if a helper thread
// cannot start, the caller copies its part.

#pragma once

#include <cstddef>
#include <functional>

namespace feedline {

// Below this many bytes a copy runs on the calling thread alone.
inline constexpr std::size_t kParallelCopyMin = std::size_t{4} << 20;

// Copies n bytes from src to dst (which must not overlap) on
// parallel_copy_parts(n, usable_cpus()) threads, the caller's included.
void parallel_copy(void* dst, const void* src, std::size_t n);

// How many threads copy n bytes on `cpus` CPUs: 1 below kParallelCopyMin,
// else at most 4 (about what saturates one socket's memory), at most one
// per CPU, and at least 2 MiB each.
std::size_t parallel_copy_parts(std::size_t n, int cpus);

namespace detail {

// Points the tests hook into: each helper calls before_helper() before it
// claims a chunk, and the caller calls after_caller() once it finds no
// chunk left (before it joins the helpers).
struct ParallelCopyHooks {
  std::function<void()> before_helper;
  std::function<void()> after_caller;
};

// parallel_copy() on `threads` threads (the caller's included), with
// `hooks` (may be null). Returns the bytes the caller copied.
std::size_t parallel_copy_on(void* dst, const void* src, std::size_t n,
                             std::size_t threads,
                             const ParallelCopyHooks* hooks);

}  // namespace detail
}  // namespace feedline
