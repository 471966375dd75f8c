// SPDX-License-Identifier: Apache-2.0

#include "concurrency/shared_file.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>
#include <system_error>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "feedline/base/error.h"

namespace feedline::detail {
namespace {

std::string sys_error(const char* who, const char* what) {
  // std::generic_category().message(): strerror's text, thread-safe.
  return std::string(who) + ": " + what +
         " failed: " + std::generic_category().message(errno);
}

// A futex call on a word of the shared mapping: no FUTEX_PRIVATE_FLAG, so
// the kernel keys it by the file and offset and a wake reaches every process.
long futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                 timeout, nullptr, 0);
}

}  // namespace

std::size_t page_size() {
  static const auto kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return kPage;
}

SharedFile create_shared_file(const char* who, const char* name,
                              std::size_t bytes) {
  const int fd = static_cast<int>(memfd_create(name, MFD_CLOEXEC));
  if (fd < 0) throw IoError(sys_error(who, "memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string message = sys_error(who, "ftruncate");
    close(fd);
    throw IoError(message + " (" + std::to_string(bytes) + " bytes)");
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const std::string message = sys_error(who, "mmap");
    close(fd);
    throw IoError(message + " (" + std::to_string(bytes) + " bytes)");
  }
  return {fd, base, bytes};
}

SharedFile map_shared_file(const char* who, const char* what, int fd,
                           std::size_t min_bytes) {
  const std::string name = std::string(who) + ": fd " + std::to_string(fd);
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0)
    throw IoError(sys_error(who, "dup") + " (fd " + std::to_string(fd) + ")");
  struct stat st {};
  if (fstat(own, &st) != 0 ||
      static_cast<std::size_t>(st.st_size) < min_bytes) {
    close(own);
    throw InvalidArgument(name + " is not " + what + " (too small)");
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  if (base == MAP_FAILED) {
    const std::string message = sys_error(who, "mmap");
    close(own);
    throw IoError(message + " (" + name + ")");
  }
  return {own, base, bytes};
}

void unmap_shared_file(const SharedFile& file) {
  munmap(file.base, file.bytes);
  close(file.fd);
}

void notify_shared(std::atomic<uint32_t>& wake,
                   const std::atomic<uint32_t>& waiters) {
  wake.fetch_add(1, std::memory_order_seq_cst);
  if (waiters.load(std::memory_order_seq_cst) > 0)
    futex(&wake, FUTEX_WAKE, INT_MAX, nullptr);
}

void futex_wait_until(std::atomic<uint32_t>& wake, uint32_t seen,
                      std::chrono::steady_clock::time_point deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return;
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000),
                    static_cast<long>(ns % 1'000'000'000)};
  futex(&wake, FUTEX_WAIT, seen, &ts);
}

}  // namespace feedline::detail
