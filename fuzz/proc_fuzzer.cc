// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the /proc parsers of ProcessGroupMonitor
// (feedline/base/proc_usage.h), on arbitrary text. The first byte picks the
// parser; each must return or throw FormatError, nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "feedline/base/error.h"
#include "feedline/base/proc_usage.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feedline;
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        ProcStat s = parse_proc_stat(text);
        volatile uint64_t sum =
            s.utime_ticks + s.stime_ticks + s.rss_pages + s.comm.size();
        (void)sum;
        break;
      }
      case 1:
        (void)parse_smaps_rollup(text);
        break;
      case 2:
        (void)parse_proc_io(text);
        break;
      default:
        (void)parse_net_dev(text);
        break;
    }
  } catch (const FormatError&) {
  }
  return 0;
}
