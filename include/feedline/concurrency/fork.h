// SPDX-License-Identifier: Apache-2.0
//
// Fork safety.
//
// After fork() the child holds a copy of every engine object of the parent,
// but only the thread that forked: the workers of the parent's pools are
// gone, and a mutex or condition variable that one of them held or waited on
// stays held or waited on forever. The engine therefore never touches an
// inherited object in the child. A pthread_atfork handler counts forks; an
// object records the count when it is made, and one made in an earlier
// generation is "inherited":
//   - its threads are never joined and its locks never taken; when it is
//     destroyed its memory is leaked on purpose (destroying a condition
//     variable that a vanished thread waits on blocks forever);
//   - a pipeline refuses to start or be read (feedline::Error), reports
//     itself stopped, and has no failure;
//   - objects made in the child work normally, so a child may build and run
//     its own pipelines (as a DataLoader worker does).

#pragma once

#include <cstdint>

namespace feedline {

// The number of fork()s between the process's first engine object and this
// process: 0 in the original process, 1 in its child, and so on. Installs the
// pthread_atfork handler on first use; every ThreadPool and pipeline calls it
// when it is made, so the handler exists before any of them can be inherited.
uint64_t fork_generation();

// True when an object made in `generation` came from a parent process.
inline bool inherited_from_parent(uint64_t generation) {
  return generation != fork_generation();
}

}  // namespace feedline
