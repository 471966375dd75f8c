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
// than one memcpy.
//
// A copy of at least half the last-level cache uses streaming
// (non-temporal) stores, which write whole lines to memory without first
// reading them into the cache: the copied bytes could not stay in that
// cache for their reader anyway. Smaller copies stay ordinary stores, so
// that a reader that reads every byte next finds them in the cache. On a
// 2-core VM with a 32 MiB L3, streaming stores lost at 4 MiB for a reader
// of every byte (the item was still cached) and tied at 16 MiB; on one
// with an 8 MiB L3 they carry 4 and 16 MiB items 1.25x and 1.45x faster
// through the arena, and 1.1-1.2x faster for a reader of every byte
// (bench/README.md).
// Where the cache size cannot be read, copies stay ordinary stores.
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
#include <string>

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

// Whether a copy of n bytes uses streaming stores with a last-level cache
// of `cache_bytes` (0: unknown, never): from half the cache up, on x86-64.
bool parallel_copy_streams(std::size_t n, std::size_t cache_bytes);

// The size of the largest CPU cache of CPU 0, from sysfs (else sysconf), or
// 0 where neither says; read once.
std::size_t last_level_cache_bytes();

namespace detail {

// Points the tests hook into: each helper calls before_helper() before it
// claims a chunk, and the caller calls after_caller() once it finds no
// chunk left (before it joins the helpers).
struct ParallelCopyHooks {
  std::function<void()> before_helper;
  std::function<void()> after_caller;
};

// parallel_copy() on `threads` threads (the caller's included), with
// `hooks` (may be null), with streaming stores or not. Returns the bytes
// the caller copied.
std::size_t parallel_copy_on(void* dst, const void* src, std::size_t n,
                             std::size_t threads,
                             const ParallelCopyHooks* hooks,
                             bool streaming = false);

// One thread's copy of n bytes, with streaming stores or not. Streaming
// stores are fenced before it returns, so that a store after it (the
// arena's release of the segment) is seen after them.
void copy_part(void* dst, const void* src, std::size_t n, bool streaming);

// A sysfs cache size ("8192K", "32M", "1024") in bytes; 0 if it has no
// leading number.
std::size_t parse_cache_size(const std::string& text);

}  // namespace detail
}  // namespace feedline
