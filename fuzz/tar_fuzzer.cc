// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: list_tar() on arbitrary bytes; every member it reports
// must lie inside the input. Where it lists members, replace_tar_members()
// gives every other one (those a pax size record does not size) new data
// of another length: the result must list the same names, with the new
// data where it was replaced and the old data elsewhere. Both, read from a
// file (FileReader), must give the same members, bytes or error; so must
// a TarStream over the input, read a few bytes at a time.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "feedline/io/formats.h"
#include "io/rewriter.h"
#include "io_fuzzers.h"

namespace {

std::span<const uint8_t> data_of(std::span<const uint8_t> archive,
                                 const feedline::TarMember& m) {
  return archive.subspan(m.offset, m.size);
}

bool same(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// The members of `bytes` read as a TarStream named `name`, at most `piece`
// bytes per read; the data of each must be the input's at its offset.
std::vector<feedline::TarMember> stream_members(std::span<const uint8_t> bytes,
                                                const std::string& name,
                                                std::size_t piece) {
  std::size_t at = 0;
  feedline::TarStream stream(
      [&](uint8_t* dst, std::size_t n) {
        const std::size_t k = std::min({n, piece, bytes.size() - at});
        if (k > 0) std::memcpy(dst, bytes.data() + at, k);
        at += k;
        return k;
      },
      name);
  std::vector<feedline::TarMember> members;
  std::vector<uint8_t> data;
  while (std::optional<feedline::TarMember> m = stream.next()) {
    data.resize(m->size);
    stream.read_data(data);
    if (!same(data, data_of(bytes, *m))) std::abort();
    members.push_back(std::move(*m));
  }
  return members;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  feedline::fuzz::run(data, size, [size](const feedline::Buffer& b) {
    std::span<const uint8_t> bytes(b.data_as<const uint8_t>(), b.nbytes());
    // Read from a file, the archive lists and rewrites the same.
    const feedline::fuzz::InputFile file(bytes);
    auto in_memory = [&](const std::string& name) {
      return feedline::list_tar(bytes, name);
    };
    // As a stream, the same members or error; a damaged input is checked
    // in every form before its error ends the run.
    auto as_stream = [&] {
      const std::size_t piece = 1 + (size > 0 ? bytes[size - 1] : 0) * 7u;
      file.same(in_memory,
                [&] { return stream_members(bytes, file.name(), piece); });
    };
    std::vector<feedline::TarMember> members;
    try {
      members = file.same(in_memory,
                          [&] { return feedline::list_tar(file.reader()); });
    } catch (const feedline::FormatError&) {
      as_stream();
      throw;
    }
    as_stream();
    for (const feedline::TarMember& m : members) {
      if (m.offset > size || m.size > size - m.offset) std::abort();
    }
    std::vector<feedline::ArchiveReplacement> replace;
    for (std::size_t i = 0; i < members.size(); i += 2) {
      if (members[i].pax_size) continue;
      // Some of the input's own bytes, as many as half the member and 511.
      const std::size_t n =
          std::min<std::size_t>(size, members[i].size / 2 + 511);
      replace.push_back({i, bytes.first(n)});
    }
    const std::vector<uint8_t> out = file.same(
        [&](const std::string& name) {
          return feedline::replace_tar_members(bytes, name, replace);
        },
        [&] {
          return feedline::io::rewrite_to_vector(
              [&](feedline::ByteSink sink) {
                return feedline::rewrite_tar(file.reader(), std::move(sink));
              },
              file.reader().size(), replace);
        });
    const std::vector<feedline::TarMember> after =
        feedline::list_tar(out, "fuzz");
    if (after.size() != members.size()) std::abort();
    std::size_t next = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const bool replaced = next < replace.size() && replace[next].index == i;
      if (after[i].name != members[i].name) std::abort();
      if (!same(data_of(out, after[i]),
                replaced ? replace[next].data : data_of(bytes, members[i]))) {
        std::abort();
      }
      if (replaced) ++next;
    }
  });
  return 0;
}
