// SPDX-License-Identifier: Apache-2.0
//
// The item types that the ops of feedline::ops pass between stages.
//
//   EncodedFile   a file's bytes and its name (a path, an archive member)
//   ClipRequest   a video to load and the window of it to keep
//   PacketsItem   demuxed packets of one stream (media::Packets)
//   FramesItem    decoded frames (media::Frames)
//
// Decoded arrays travel as Buffers (base/buffer.h); batches made by an
// untyped aggregate stage as ItemBatch (pipeline/item.h).

#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "feedline/base/buffer.h"
#include "feedline/media/av.h"
#include "feedline/media/image.h"

namespace feedline::ops {

// Encoded bytes and the name that errors give for them.
struct EncodedFile {
  std::string name;
  Buffer bytes;  // 1-D uint8
  // False: `name` only describes the bytes ("<1234 bytes>"), so it cannot
  // key a seeded augmentation (sample_key()).
  bool named = true;

  std::span<const uint8_t> span() const { return bytes.bytes(); }
  // `bytes` (1-D uint8) named by their size, "<1234 bytes>": data that has
  // no path.
  static EncodedFile unnamed(Buffer bytes);
  // The index that keys the file's seeded augmentation under `seed`: none
  // for a named file (the decoder hashes its name, media::sample_index_of);
  // for unnamed bytes a hash of them, computed only when seeded.
  std::optional<uint64_t> sample_key(const media::AugmentSeed& seed) const;
};

// One clip for load_video_clips(): a file (a path, read into memory when
// loaded, or bytes in memory) and the window to keep (none: all of it).
struct ClipRequest {
  std::string name;
  media::Source source;
  std::optional<media::Window> window;

  static ClipRequest from_path(std::string path,
                               std::optional<media::Window> window);
  static ClipRequest from_bytes(EncodedFile file,
                                std::optional<media::Window> window);
};

using PacketsItem = std::unique_ptr<media::Packets>;
using FramesItem = std::unique_ptr<media::Frames>;

// The bytes of `bytes` as a media::Source that keeps them alive.
media::Source memory_source(const Buffer& bytes);

}  // namespace feedline::ops
