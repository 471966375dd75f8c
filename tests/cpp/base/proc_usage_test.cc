// SPDX-License-Identifier: Apache-2.0
//
// The /proc parsers on real and hostile text, and ProcessGroupMonitor on a
// made-up /proc tree and on this process's own group.

#include "feedline/base/proc_usage.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "feedline/base/error.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

std::string stat_line(int pid, const std::string& comm, int pgrp,
                      uint64_t utime, uint64_t stime, int64_t rss) {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue
  // starttime vsize rss rsslim ...
  return std::to_string(pid) + " (" + comm + ") S 1 " + std::to_string(pgrp) +
         " 1 0 -1 4194304 99 0 0 0 " + std::to_string(utime) + " " +
         std::to_string(stime) + " 0 0 20 0 1 0 6390818 3133440 " +
         std::to_string(rss) +
         " 18446744073709551615 9484962 9484962 140726 0 0 0 0 0 0 0 0 0 17 1 "
         "0 0 0 0 0\n";
}

TEST(ProcStatTest, ReadsTheFieldsEvenWithSpacesAndParenthesesInTheName) {
  ProcStat s = parse_proc_stat(stat_line(42, "a b) (c", 7, 120, 30, 418));
  EXPECT_EQ(s.pid, 42);
  EXPECT_EQ(s.comm, "a b) (c");
  EXPECT_EQ(s.state, 'S');
  EXPECT_EQ(s.ppid, 1);
  EXPECT_EQ(s.pgrp, 7);
  EXPECT_EQ(s.utime_ticks, 120u);
  EXPECT_EQ(s.stime_ticks, 30u);
  EXPECT_EQ(s.rss_pages, 418u);
  EXPECT_EQ(parse_proc_stat(stat_line(1, "x", 1, 0, 0, -1)).rss_pages, 0u);
}

TEST(ProcStatTest, ThisProcessParses) {
  std::ifstream f("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(f)), {});
  ProcStat s = parse_proc_stat(text);
  EXPECT_EQ(s.pid, static_cast<int>(::getpid()));
  EXPECT_EQ(s.pgrp, static_cast<int>(::getpgrp()));
  EXPECT_GT(s.rss_pages, 0u);
}

TEST(ProcStatTest, MalformedTextIsAFormatErrorThatSaysWhat) {
  auto message = [](const std::string& text) {
    try {
      parse_proc_stat(text);
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(""), "stat: no \"pid (name)\" at the start");
  EXPECT_EQ(message("12 (x) S 1 2"),
            "stat: has 5 fields; at least 24 expected");
  std::string bad_utime = stat_line(1, "x", 1, 5, 5, 5);
  bad_utime.replace(bad_utime.find(" 5 5 "), 5, " 5 z ");
  EXPECT_NE(message(bad_utime).find("stime is not a whole number"),
            std::string::npos)
      << message(bad_utime);
  EXPECT_NE(message("x (y) S" + std::string(100, ' ')).find("pid"),
            std::string::npos);
}

TEST(SmapsRollupTest, PssAndPrivateBytes) {
  SmapsRollup r = parse_smaps_rollup(
      "55facd85c000-7ffeced25000 ---p 00000000 00:00 0   [rollup]\n"
      "Rss:                1760 kB\n"
      "Pss:                 300 kB\n"
      "Shared_Clean:       1604 kB\n"
      "Private_Clean:        40 kB\n"
      "Private_Dirty:       116 kB\n");
  EXPECT_EQ(r.pss_bytes, 300u * 1024);
  EXPECT_EQ(r.private_bytes, 156u * 1024);
  EXPECT_THROW(parse_smaps_rollup("Pss: 300 kB\n"), FormatError);
  EXPECT_THROW(parse_smaps_rollup("Pss: 3x kB\nPrivate_Clean: 1 kB\n"
                                  "Private_Dirty: 1 kB\n"),
               FormatError);
  EXPECT_THROW(parse_smaps_rollup("Pss: 99999999999999999999 kB\n"
                                  "Private_Clean: 1 kB\nPrivate_Dirty: 1 kB\n"),
               FormatError);
}

TEST(ProcIoTest, ReadAndWriteBytes) {
  ProcIo io = parse_proc_io(
      "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\n"
      "write_bytes: 8192\ncancelled_write_bytes: 0\n");
  EXPECT_EQ(io.read_bytes, 4096u);
  EXPECT_EQ(io.write_bytes, 8192u);
  EXPECT_THROW(parse_proc_io("read_bytes: 1\n"), FormatError);
  EXPECT_THROW(parse_proc_io("read_bytes: -1\nwrite_bytes: 1\n"), FormatError);
}

constexpr const char* kNetDev =
    "Inter-|   Receive                                                |  "
    "Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes  "
    "  packets errs drop fifo colls carrier compressed\n"
    "    lo:  189860     633    0    0    0     0          0         0   "
    "189860     633    0    0    0     0       0          0\n"
    "  eth0: 7982074745  199557    0    0    0     0          0         0 "
    "10373362  113654    0    0    0     0       0          0\n"
    "  eth1:1000 1 0 0 0 0 0 0 24 1 0 0 0 0 0 0\n";

TEST(NetDevTest, SumsEveryInterfaceButLoopback) {
  NetBytes n = parse_net_dev(kNetDev);
  EXPECT_EQ(n.rx_bytes, 7982074745u + 1000);
  EXPECT_EQ(n.tx_bytes, 10373362u + 24);
  EXPECT_THROW(parse_net_dev("only one line"), FormatError);
  EXPECT_THROW(parse_net_dev(std::string(kNetDev) + "  eth2: 1 2 3\n"),
               FormatError);
}

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("feedline_proc_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "net");
    write("net/dev", kNetDev);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories((root_ / path).parent_path());
    std::ofstream(root_ / path) << text;
  }
  fs::path root_;
};

TEST_F(FakeProc, SumsTheGroupAndLeavesOthersOut) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  write("10/stat", stat_line(10, "trainer", 10, 100, 50, 1000));
  write("10/smaps_rollup",
        "Pss: 400 kB\nPrivate_Clean: 10 kB\n"
        "Private_Dirty: 20 kB\n");
  write("10/io", "read_bytes: 100\nwrite_bytes: 200\n");
  write("11/stat", stat_line(11, "loader worker", 10, 10, 10, 500));
  // No smaps_rollup or io for 11 (as for another user's process).
  write("12/stat", stat_line(12, "other", 99, 1000, 1000, 7000));
  write("self/stat", "not a pid directory");
  ProcessGroupMonitor m(10, root_.string());
  ProcessGroupUsage u = m.sample();
  EXPECT_EQ(u.pgid, 10);
  EXPECT_EQ(u.num_procs, 2);
  EXPECT_EQ(u.rss_bytes, 1500 * page);
  EXPECT_EQ(u.pss_bytes, 400u * 1024);
  EXPECT_EQ(u.private_bytes, 30u * 1024);
  EXPECT_EQ(u.disk_read_bytes, 100u);
  EXPECT_EQ(u.disk_write_bytes, 200u);
  EXPECT_FALSE(u.cpu_percent.has_value());  // first sample
  EXPECT_FALSE(u.net_rx_bytes.has_value());
  EXPECT_TRUE(u.problems.empty());
  // The second sample has rates and deltas.
  write("10/stat", stat_line(10, "trainer", 10, 200, 50, 1000));
  write("net/dev", std::string(kNetDev) +
                       "  eth3: 5 0 0 0 0 0 0 0 7 0 0 0 0 "
                       "0 0 0\n");
  ProcessGroupUsage v = m.sample();
  ASSERT_TRUE(v.cpu_percent.has_value());
  EXPECT_GT(*v.cpu_percent, 0.0);
  EXPECT_EQ(v.net_rx_bytes, 5u);
  EXPECT_EQ(v.net_tx_bytes, 7u);
}

TEST_F(FakeProc, AMalformedFileIsReportedOncePerKindAndSkipped) {
  write("10/stat", stat_line(10, "ok", 10, 1, 1, 1));
  write("20/stat", "20 (broken");
  write("21/stat", "21 (broken too");
  write("10/io", "read_bytes: x\nwrite_bytes: 1\n");
  ProcessGroupMonitor m(10, root_.string());
  ProcessGroupUsage u = m.sample();
  EXPECT_EQ(u.num_procs, 1);
  ASSERT_EQ(u.problems.size(), 2u);  // one stat, one io
  EXPECT_FALSE(u.disk_read_bytes.has_value());
  EXPECT_TRUE(m.sample().problems.empty());  // not again
}

TEST_F(FakeProc, AMissingRootIsAnIoError) {
  ProcessGroupMonitor m(10, (root_ / "nowhere").string());
  EXPECT_THROW(m.sample(), IoError);
}

TEST(ProcessGroupMonitorTest, ThisProcessIsInItsOwnGroup) {
  ProcessGroupMonitor m;
  ProcessGroupUsage u = m.sample();
  EXPECT_EQ(u.pgid, static_cast<int>(::getpgrp()));
  EXPECT_EQ(u.pid, static_cast<int>(::getpid()));
  EXPECT_GE(u.num_procs, 1);
  EXPECT_GT(u.rss_bytes, 0u);
  EXPECT_TRUE(u.problems.empty());
}

}  // namespace
}  // namespace feedline
