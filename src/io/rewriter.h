// SPDX-License-Identifier: Apache-2.0
//
// What the tar and ZIP rewriters share: the order members must come in, the
// checks on each replace(), the count of bytes written, and the functions
// that replace a list of members into a vector.

#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/io/formats.h"
#include "io/reader.h"

namespace feedline::io {

class RewriterBase : public ArchiveRewriter {
 public:
  const std::vector<std::size_t>& order() const override { return order_; }

 protected:
  // `order`: the member indices in the order their data lies.
  RewriterBase(std::string_view name, ByteSink sink,
               std::vector<std::size_t> order);

  // Places in order(): the members from `from` up to `rank` are copied as
  // they are, then the one at `rank` is written.
  struct Step {
    std::size_t from = 0;
    std::size_t rank = 0;
  };
  // Checks that member `index` may be replaced now (in range, after the
  // last one written, before finish()) and moves past it.
  Step take(std::size_t index);
  // Marks the rewriter finished (throws if it was already): the members
  // from the returned place on are copied as they are.
  std::size_t close();

  void emit(std::span<const uint8_t> bytes);
  // Copies the input's bytes [begin, end).
  void emit(const Reader& input, uint64_t begin, uint64_t end) {
    input.copy(begin, end,
               [this](std::span<const uint8_t> piece) { emit(piece); });
  }
  uint64_t written() const { return written_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  ByteSink sink_;
  std::vector<std::size_t> order_;
  std::vector<std::size_t> rank_;  // each member's place in order_
  std::size_t next_ = 0;
  std::size_t last_ = SIZE_MAX;  // the member replaced last
  bool finished_ = false;
  uint64_t written_ = 0;
};

// What the rewriter `make(sink)` writes of an archive of `input_size`
// bytes, with `replacements` given in any order, collected into a vector.
template <typename Make>
std::vector<uint8_t> rewrite_to_vector(
    Make make, uint64_t input_size,
    std::vector<ArchiveReplacement> replacements) {
  uint64_t size_hint = input_size;
  for (const ArchiveReplacement& r : replacements) size_hint += r.data.size();
  std::vector<uint8_t> out;
  out.reserve(size_hint);
  std::unique_ptr<ArchiveRewriter> w =
      make([&out](std::span<const uint8_t> bytes) {
        out.insert(out.end(), bytes.begin(), bytes.end());
      });
  // Out-of-range indices keep their place at the end, so that the
  // rewriter names them.
  const std::vector<std::size_t>& order = w->order();
  std::vector<std::size_t> rank(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) rank[order[k]] = k;
  auto rank_of = [&](const ArchiveReplacement& r) {
    return r.index < rank.size() ? rank[r.index] : r.index;
  };
  std::stable_sort(
      replacements.begin(), replacements.end(),
      [&](const ArchiveReplacement& a, const ArchiveReplacement& b) {
        return rank_of(a) < rank_of(b);
      });
  for (const ArchiveReplacement& r : replacements) w->replace(r.index, r.data);
  w->finish();
  return out;
}

}  // namespace feedline::io
