// SPDX-License-Identifier: Apache-2.0

#include "io/reader.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace feedline::io {

std::span<const uint8_t> Reader::window(uint64_t offset, uint64_t n,
                                        bool pin) const {
  // The window starting last at or before `offset`, then the pinned ones
  // (a few), which a later small window may start inside.
  auto holds = [&](const auto& w) {
    return offset - w.first + n <= w.second.bytes.size();
  };
  auto it = windows_.upper_bound(offset);
  if (it != windows_.begin() && holds(*std::prev(it))) {
    auto& w = *std::prev(it);
    w.second.pinned |= pin;
    return std::span(w.second.bytes).subspan(offset - w.first, n);
  }
  for (auto& w : windows_) {
    if (w.first > offset) break;
    if (w.second.pinned && holds(w)) {
      return std::span(w.second.bytes).subspan(offset - w.first, n);
    }
  }
  const uint64_t len = std::min(std::max(n, kWindow), size_ - offset);
  Window w{std::vector<uint8_t>(len), pin};
  file_->read(offset, w.bytes);
  auto [at, fresh] = windows_.try_emplace(offset);
  if (!fresh) {
    // A shorter window starts here: its spans stay valid as long as it
    // would have.
    w.pinned |= at->second.pinned;
    retired_.push_back(std::move(at->second));
  }
  at->second = std::move(w);
  return std::span(at->second.bytes).subspan(0, n);
}

void Reader::forget() const {
  std::erase_if(windows_, [](const auto& w) { return !w.second.pinned; });
  std::erase_if(retired_, [](const Window& w) { return !w.pinned; });
}

void Reader::copy(
    uint64_t begin, uint64_t end,
    const std::function<void(std::span<const uint8_t>)>& out) const {
  if (end <= begin) return;
  if (file_ == nullptr) {
    out(bytes(begin, end - begin));
    return;
  }
  if (!has(begin, end - begin)) (void)bytes(begin, end - begin);  // throws
  constexpr uint64_t kPiece = uint64_t{1} << 20;
  std::vector<uint8_t> piece(std::min(kPiece, end - begin));
  for (uint64_t at = begin; at < end; at += kPiece) {
    const std::span<uint8_t> part =
        std::span(piece).subspan(0, std::min(kPiece, end - at));
    file_->read(at, part);
    out(part);
  }
}

}  // namespace feedline::io
