// SPDX-License-Identifier: Apache-2.0
//
// usable_cpus(): how many CPUs this process may run on.
//
// Thread safety: safe from any thread.

#pragma once

namespace feedline {

// The CPUs of this process's affinity mask (sched_getaffinity), which a
// container or `taskset` may set below the machine's count; the machine's
// count when the mask cannot be read. At least 1.
int usable_cpus();

}  // namespace feedline
