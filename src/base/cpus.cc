// SPDX-License-Identifier: Apache-2.0

#include "feedline/base/cpus.h"

#include <algorithm>
#include <thread>

#include <sched.h>

namespace feedline {

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(CPU_COUNT(&set), 1);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace feedline
