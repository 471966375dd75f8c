// SPDX-License-Identifier: Apache-2.0
//
// Resource use of a process group, read from Linux's /proc: CPU, memory
// (RSS, PSS, private), disk I/O and the host's network bytes. What
// ProcessGroupStatsMonitor reports (docs/stats.md#the-process-group).
//
// The parsers take the text of one /proc file and throw FormatError naming
// the file and what is wrong; /proc is data, never trusted to be well formed
// (a process's name, in /proc/<pid>/stat, may hold spaces, parentheses and
// newlines). ProcessGroupMonitor reads the files: processes that end while
// it reads are skipped, files it may not read (another user's /proc/<pid>/io)
// leave that figure out, and a malformed file is reported once per kind in
// ProcessGroupUsage::problems.
//
// Thread safety: the parsers are pure; a ProcessGroupMonitor is used by one
// thread at a time.

#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace feedline {

// The fields of /proc/<pid>/stat that the monitor uses.
struct ProcStat {
  int pid = 0;
  std::string comm;  // the process's name, without the parentheses
  char state = '?';
  int ppid = 0;
  int pgrp = 0;
  uint64_t utime_ticks = 0;  // user CPU time, in clock ticks
  uint64_t stime_ticks = 0;  // system CPU time, in clock ticks
  uint64_t rss_pages = 0;
};
ProcStat parse_proc_stat(std::string_view text);

// /proc/<pid>/smaps_rollup: Pss, and Private_Clean + Private_Dirty.
struct SmapsRollup {
  uint64_t pss_bytes = 0;
  uint64_t private_bytes = 0;
};
SmapsRollup parse_smaps_rollup(std::string_view text);

// /proc/<pid>/io: bytes the process caused to be read from and written to
// storage.
struct ProcIo {
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
};
ProcIo parse_proc_io(std::string_view text);

// /proc/net/dev: bytes received and sent over every interface but "lo".
struct NetBytes {
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
};
NetBytes parse_net_dev(std::string_view text);

// One sample of a process group (field names as SPDL's
// ProcessGroupResourceUsage).
struct ProcessGroupUsage {
  int pid = 0;   // the monitoring process
  int pgid = 0;  // the group
  // CPU time of the group's processes per wall second since the previous
  // sample, in percent of one CPU; none on the first sample. Processes that
  // ended in between take their CPU time with them.
  std::optional<double> cpu_percent;
  uint64_t rss_bytes = 0;
  // Summed over the processes whose smaps_rollup (Linux 4.14+) could be
  // read; none if none could.
  std::optional<uint64_t> pss_bytes;
  std::optional<uint64_t> private_bytes;
  // Summed over the processes whose /proc/<pid>/io could be read.
  std::optional<uint64_t> disk_read_bytes;
  std::optional<uint64_t> disk_write_bytes;
  int num_procs = 0;
  // Host-wide bytes over every interface but "lo" since the previous
  // sample; none on the first sample.
  std::optional<uint64_t> net_rx_bytes;
  std::optional<uint64_t> net_tx_bytes;
  // Malformed files met for the first time ("stat: ..."), one per kind.
  std::vector<std::string> problems;
};

class ProcessGroupMonitor {
 public:
  // Watches process group `pgid` (0: this process's group), reading under
  // `proc_root`.
  explicit ProcessGroupMonitor(int pgid = 0, std::string proc_root = "/proc");

  // Reads every process of the group now. Throws: IoError if `proc_root`
  // cannot be listed.
  ProcessGroupUsage sample();

  int pgid() const { return pgid_; }

 private:
  void note_problem(const std::string& kind, const std::string& what,
                    ProcessGroupUsage* usage);

  int pgid_;
  std::string root_;
  long ticks_per_second_;
  std::set<std::string> reported_;  // kinds of problems already reported
  std::optional<uint64_t> last_cpu_ticks_;
  std::optional<NetBytes> last_net_;
  std::chrono::steady_clock::time_point last_time_;
};

}  // namespace feedline
