// SPDX-License-Identifier: Apache-2.0

#include "feedline/base/proc_usage.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "feedline/base/error.h"

namespace feedline {
namespace {

// Files larger than this are not /proc files of the kinds read here.
constexpr std::size_t kMaxFile = 1 << 20;

[[noreturn]] void bad(const char* file, const std::string& what) {
  throw FormatError(std::string(file) + ": " + what);
}

// The whole of `field` as a T, else FormatError "<file>: <name> is not
// <kind> (...)".
template <typename T>
T to_number(std::string_view field, const char* file, const char* name,
            const char* kind) {
  T v{};
  auto r = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || r.ec != std::errc() ||
      r.ptr != field.data() + field.size()) {
    bad(file, std::string(name) + " is not " + kind + " (\"" +
                  std::string(field.substr(0, 32)) + "\")");
  }
  return v;
}

uint64_t to_u64(std::string_view field, const char* file, const char* name) {
  return to_number<uint64_t>(field, file, name, "a whole number of 0 or more");
}

int to_int(std::string_view field, const char* file, const char* name) {
  return to_number<int>(field, file, name, "an integer");
}

// Splits on runs of spaces (and tabs).
std::vector<std::string_view> fields(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Calls `fn(key, rest)` for each "key: rest" line.
template <typename Fn>
void for_each_line(std::string_view text, Fn fn) {
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view()
                                         : text.substr(end + 1);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    fn(line.substr(0, colon), line.substr(colon + 1));
  }
}

// "   123 kB" -> 123 * 1024.
uint64_t kilobytes(std::string_view rest, const char* file, const char* name) {
  std::vector<std::string_view> f = fields(rest);
  if (f.size() != 2 || f[1] != "kB") {
    bad(file, std::string(name) + " is not \"<n> kB\"");
  }
  uint64_t kb = to_u64(f[0], file, name);
  if (kb > (UINT64_MAX >> 10)) bad(file, std::string(name) + " is too large");
  return kb << 10;
}

// Reads a whole (small) file. Returns false, with errno set, if it cannot be
// opened or read.
bool read_file(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[4096];
  bool ok = true;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      ok = false;
      break;
    }
    if (n == 0) break;
    out->append(buf, static_cast<std::size_t>(n));
    if (out->size() > kMaxFile) {
      errno = EFBIG;
      ok = false;
      break;
    }
  }
  int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

}  // namespace

ProcStat parse_proc_stat(std::string_view text) {
  constexpr const char* kFile = "stat";
  // "pid (comm) state ppid pgrp ...": comm may hold anything, so it ends at
  // the last ')'.
  std::size_t open = text.find(" (");
  std::size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos ||
      close < open + 2) {
    bad(kFile, "no \"pid (name)\" at the start");
  }
  ProcStat s;
  s.pid = to_int(text.substr(0, open), kFile, "pid");
  s.comm = std::string(text.substr(open + 2, close - open - 2));
  std::string_view rest = text.substr(close + 1);
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  std::vector<std::string_view> f = fields(rest);
  // After the name: state(3) ppid(4) pgrp(5) ... utime(14) stime(15) ...
  // rss(24), counting fields from 1 as proc(5) does.
  constexpr std::size_t kRss = 24 - 3;
  if (f.size() <= kRss) {
    bad(kFile, "has " + std::to_string(f.size() + 2) +
                   " fields; at least 24 expected");
  }
  if (f[0].size() != 1) bad(kFile, "state is not one letter");
  s.state = f[0][0];
  s.ppid = to_int(f[1], kFile, "ppid");
  s.pgrp = to_int(f[2], kFile, "pgrp");
  s.utime_ticks = to_u64(f[14 - 3], kFile, "utime");
  s.stime_ticks = to_u64(f[15 - 3], kFile, "stime");
  // rss is signed in the kernel's format; a negative one means none.
  std::string_view rss = f[kRss];
  if (!rss.empty() && rss[0] == '-') {
    (void)to_int(rss, kFile, "rss");
    s.rss_pages = 0;
  } else {
    s.rss_pages = to_u64(rss, kFile, "rss");
  }
  return s;
}

SmapsRollup parse_smaps_rollup(std::string_view text) {
  constexpr const char* kFile = "smaps_rollup";
  SmapsRollup r;
  bool pss = false;
  bool clean = false;
  bool dirty = false;
  uint64_t private_clean = 0;
  uint64_t private_dirty = 0;
  for_each_line(text, [&](std::string_view key, std::string_view rest) {
    if (key == "Pss") {
      r.pss_bytes = kilobytes(rest, kFile, "Pss");
      pss = true;
    } else if (key == "Private_Clean") {
      private_clean = kilobytes(rest, kFile, "Private_Clean");
      clean = true;
    } else if (key == "Private_Dirty") {
      private_dirty = kilobytes(rest, kFile, "Private_Dirty");
      dirty = true;
    }
  });
  if (!pss || !clean || !dirty) {
    bad(kFile, "lacks Pss, Private_Clean or Private_Dirty");
  }
  r.private_bytes = private_clean + private_dirty;
  if (r.private_bytes < private_clean) bad(kFile, "private bytes overflow");
  return r;
}

ProcIo parse_proc_io(std::string_view text) {
  constexpr const char* kFile = "io";
  ProcIo io;
  bool read = false;
  bool write = false;
  for_each_line(text, [&](std::string_view key, std::string_view rest) {
    std::vector<std::string_view> f = fields(rest);
    if (key == "read_bytes" || key == "write_bytes") {
      if (f.size() != 1) bad(kFile, std::string(key) + " is not one number");
      uint64_t v = to_u64(f[0], kFile,
                          key == "read_bytes" ? "read_bytes" : "write_bytes");
      (key == "read_bytes" ? io.read_bytes : io.write_bytes) = v;
      (key == "read_bytes" ? read : write) = true;
    }
  });
  if (!read || !write) bad(kFile, "lacks read_bytes or write_bytes");
  return io;
}

NetBytes parse_net_dev(std::string_view text) {
  constexpr const char* kFile = "net/dev";
  NetBytes n;
  int lines = 0;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view()
                                         : text.substr(end + 1);
    if (++lines <= 2) continue;  // the two header lines
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      if (fields(line).empty()) continue;
      bad(kFile, "line " + std::to_string(lines) + " has no \"name:\"");
    }
    std::vector<std::string_view> name = fields(line.substr(0, colon));
    std::vector<std::string_view> f = fields(line.substr(colon + 1));
    if (name.size() != 1 || f.size() < 9) {
      bad(kFile, "line " + std::to_string(lines) +
                     " is not an interface and 16 counters");
    }
    if (name[0] == "lo") continue;
    uint64_t rx = to_u64(f[0], kFile, "receive bytes");
    uint64_t tx = to_u64(f[8], kFile, "transmit bytes");
    // Wraps rather than fails: counters of many interfaces may add past 2^64.
    n.rx_bytes += rx;
    n.tx_bytes += tx;
  }
  if (lines < 2) bad(kFile, "lacks its two header lines");
  return n;
}

ProcessGroupMonitor::ProcessGroupMonitor(int pgid, std::string proc_root)
    : pgid_(pgid > 0 ? pgid : static_cast<int>(::getpgrp())),
      root_(std::move(proc_root)),
      ticks_per_second_(std::max(::sysconf(_SC_CLK_TCK), 1L)) {}

void ProcessGroupMonitor::note_problem(const std::string& kind,
                                       const std::string& what,
                                       ProcessGroupUsage* usage) {
  if (reported_.insert(kind).second) usage->problems.push_back(what);
}

ProcessGroupUsage ProcessGroupMonitor::sample() {
  ProcessGroupUsage u;
  u.pid = static_cast<int>(::getpid());
  u.pgid = pgid_;
  const auto now = std::chrono::steady_clock::now();
  std::error_code error;
  std::filesystem::directory_iterator dir(root_, error);
  if (error) {
    throw IoError("cannot list " + root_ + ": " + error.message());
  }
  const uint64_t page =
      static_cast<uint64_t>(std::max(::sysconf(_SC_PAGESIZE), 1L));
  uint64_t cpu_ticks = 0;
  uint64_t pss = 0;
  uint64_t priv = 0;
  uint64_t disk_read = 0;
  uint64_t disk_write = 0;
  bool have_smaps = false;
  bool have_io = false;
  std::string text;
  // Entries of processes that end while this runs may vanish: an error of
  // the iteration ends it with what was listed so far.
  for (; !error && dir != std::filesystem::directory_iterator();
       dir.increment(error)) {
    const std::string name = dir->path().filename().string();
    if (name.empty() || name[0] < '1' || name[0] > '9' ||
        name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const std::string base = root_ + "/" + name + "/";
    // A process may end at any point here: whatever it no longer has is
    // skipped.
    if (!read_file(base + "stat", &text)) continue;
    ProcStat stat;
    try {
      stat = parse_proc_stat(text);
    } catch (const FormatError& err) {
      note_problem("stat", std::string("/proc/") + name + "/" + err.what(), &u);
      continue;
    }
    if (stat.pgrp != pgid_) continue;
    ++u.num_procs;
    cpu_ticks += stat.utime_ticks + stat.stime_ticks;
    u.rss_bytes += stat.rss_pages * page;
    if (read_file(base + "smaps_rollup", &text)) {
      try {
        SmapsRollup r = parse_smaps_rollup(text);
        pss += r.pss_bytes;
        priv += r.private_bytes;
        have_smaps = true;
      } catch (const FormatError& err) {
        note_problem("smaps_rollup",
                     std::string("/proc/") + name + "/" + err.what(), &u);
      }
    }
    if (read_file(base + "io", &text)) {
      try {
        ProcIo io = parse_proc_io(text);
        disk_read += io.read_bytes;
        disk_write += io.write_bytes;
        have_io = true;
      } catch (const FormatError& err) {
        note_problem("io", std::string("/proc/") + name + "/" + err.what(), &u);
      }
    }
  }
  if (have_smaps) {
    u.pss_bytes = pss;
    u.private_bytes = priv;
  }
  if (have_io) {
    u.disk_read_bytes = disk_read;
    u.disk_write_bytes = disk_write;
  }
  if (last_cpu_ticks_) {
    const double wall = std::chrono::duration<double>(now - last_time_).count();
    if (wall > 0) {
      // Ended processes take their ticks with them: never below zero.
      const double ticks =
          cpu_ticks >= *last_cpu_ticks_
              ? static_cast<double>(cpu_ticks - *last_cpu_ticks_)
              : 0.0;
      u.cpu_percent =
          100.0 * ticks / static_cast<double>(ticks_per_second_) / wall;
    }
  }
  std::optional<NetBytes> net;
  if (read_file(root_ + "/net/dev", &text)) {
    try {
      net = parse_net_dev(text);
    } catch (const FormatError& err) {
      note_problem("net/dev", std::string("/proc/") + err.what(), &u);
    }
  }
  if (net && last_net_) {
    // Counters wrap (and interfaces come and go): a drop reads as zero.
    u.net_rx_bytes = net->rx_bytes >= last_net_->rx_bytes
                         ? net->rx_bytes - last_net_->rx_bytes
                         : 0;
    u.net_tx_bytes = net->tx_bytes >= last_net_->tx_bytes
                         ? net->tx_bytes - last_net_->tx_bytes
                         : 0;
  }
  last_cpu_ticks_ = cpu_ticks;
  last_net_ = net;
  last_time_ = now;
  return u;
}

}  // namespace feedline
