// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: list_zip() and read_zip_entry() (with a 1 MiB member
// limit) on arbitrary bytes, then load_npy() on each member, as load_npz does.
// Where it lists members, replace_zip_members() gives every other one new
// data of another length (or refuses with InvalidArgument: encrypted):
// the result, zip64 fields and end records rewritten in place, must list
// the same names, the new data stored with its CRC-32 where it was
// replaced and the same raw bytes elsewhere. Each, read from a file
// (FileReader), must give the same members, bytes or error.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "feedline/io/formats.h"
#include "io/rewriter.h"
#include "io_fuzzers.h"

namespace {

std::span<const uint8_t> raw_of(std::span<const uint8_t> archive,
                                const feedline::ZipEntry& e) {
  return archive.subspan(e.data_offset, e.compressed_size);
}

bool same(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

void check_result(std::span<const uint8_t> bytes,
                  const std::vector<feedline::ZipEntry>& members,
                  const std::vector<feedline::ArchiveReplacement>& replace,
                  const std::vector<uint8_t>& out) {
  const feedline::Buffer copy =
      feedline::fuzz::exact_copy(out.data(), out.size());
  const std::vector<feedline::ZipEntry> after = feedline::list_zip(out, "fuzz");
  if (after.size() != members.size()) std::abort();
  std::size_t next = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const bool replaced = next < replace.size() && replace[next].index == i;
    if (after[i].name != members[i].name) std::abort();
    if (!replaced) {
      if (!same(raw_of(out, after[i]), raw_of(bytes, members[i]))) std::abort();
      continue;
    }
    const feedline::Buffer data =
        feedline::read_zip_entry(copy, after[i], "fuzz", 1 << 20);
    if (after[i].method != 0 ||
        !same({data.data_as<const uint8_t>(), data.nbytes()},
              replace[next].data)) {
      std::abort();
    }
    ++next;
  }
}

void check_replacing(const feedline::Buffer& b,
                     const std::vector<feedline::ZipEntry>& members,
                     const feedline::fuzz::InputFile& file) {
  std::span<const uint8_t> bytes(b.data_as<const uint8_t>(), b.nbytes());
  std::vector<feedline::ArchiveReplacement> replace;
  for (std::size_t i = 0; i < members.size(); i += 2) {
    // Some of the input's own bytes, as many as half the member and 99.
    const std::size_t n = std::min<std::size_t>(
        bytes.size(), members[i].compressed_size / 2 + 99);
    replace.push_back({i, bytes.first(n)});
  }
  std::vector<uint8_t> out;
  try {
    out = file.same(
        [&](const std::string& name) {
          return feedline::replace_zip_members(bytes, name, replace);
        },
        [&] {
          return feedline::io::rewrite_to_vector(
              [&](feedline::ByteSink sink) {
                return feedline::rewrite_zip(file.reader(), std::move(sink));
              },
              file.reader().size(), replace);
        });
  } catch (const feedline::InvalidArgument&) {
    return;
  }
  // What was replaced must read back: an error here is a finding, not
  // the input's fault.
  try {
    check_result(bytes, members, replace, out);
  } catch (const feedline::FormatError&) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  feedline::fuzz::run(data, size, [](const feedline::Buffer& b) {
    std::span<const uint8_t> bytes(b.data_as<const uint8_t>(), b.nbytes());
    // Read from a file, the archive lists, reads and rewrites the same.
    const feedline::fuzz::InputFile file(bytes);
    const std::vector<feedline::ZipEntry> members = file.same(
        [&](const std::string& name) {
          return feedline::list_zip(bytes, name);
        },
        [&] { return feedline::list_zip(file.reader()); });
    for (const feedline::ZipEntry& e : members) {
      try {
        feedline::Buffer member = file.same(
            [&](const std::string& name) {
              return feedline::read_zip_entry(b, e, name, 1 << 20);
            },
            [&] {
              return feedline::read_zip_entry(file.reader(), e, 1 << 20);
            });
        feedline::load_npy(member, "fuzz member");
      } catch (const feedline::FormatError&) {
      }
    }
    check_replacing(b, members, file);
  });
  return 0;
}
