// SPDX-License-Identifier: Apache-2.0
//
// Pipeline ops for files, images, arrays and archives.
//
// Each factory returns an op that declares the item types it takes and
// produces (Op::input_type(), output_type()), so build_pipeline() checks it
// against its neighbours. Every op is stateless and safe to run with any
// concurrency; none takes a lock. A bad input fails that one call
// with a typed error naming it (IoError, FormatError, DecodeError, ...).
//
//   auto pipeline = PipelineBuilder()
//       .add_source(paths)
//       .pipe<ops::EncodedFile>(ops::read_file(), {.concurrency = 4})
//       .aggregate(32)
//       .pipe<Buffer>(ops::decode_batch(options), {.concurrency = 2})
//       .add_sink()
//       .build(4);

#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "feedline/media/image.h"
#include "feedline/ops/items.h"
#include "feedline/pipeline/op.h"

namespace feedline::ops {

// std::string (a path) -> EncodedFile named by the path.
OpPtr read_file();

// EncodedFile (JPEG or PNG) -> Buffer, as media::decode_image().
// Throws: InvalidArgument for bad options.
OpPtr decode_image(const media::ImageOptions& options);

// A batch of EncodedFiles (an ItemBatch from an untyped aggregate, or a
// std::vector<EncodedFile> from the typed builder) -> one Buffer (N, ...),
// each image decoded straight into its slot. An image that fails, or an
// element that is not an EncodedFile, is left out and logged; the call fails
// (DecodeError) only when no image of the batch decodes.
// Throws: InvalidArgument unless the options give one output size (a resize
// to width x height, a crop, or a random resized crop).
OpPtr decode_batch(const media::ImageOptions& options);

// A batch of same-shaped Buffers (ItemBatch or std::vector<Buffer>) -> one
// Buffer with a leading batch dimension. Fails (InvalidArgument naming both
// shapes) when they differ.
OpPtr stack();

// EncodedFile (NPY) -> Buffer viewing its bytes, as load_npy().
OpPtr load_npy();

// EncodedFile (WAV) -> Buffer (frames, channels), as load_wav().
OpPtr load_wav();

// EncodedFile (a tar archive) -> one EncodedFile per regular file, in
// order, named by the member and viewing the archive (a generator op).
OpPtr tar_members();

// EncodedFile (a ZIP archive) -> one EncodedFile per member that is not a
// directory, named by the member: views for stored members, inflated copies
// for deflated ones (a generator op).
OpPtr zip_members();

// A path (std::string) of a tar archive -> its regular files, as
// tar_members(), read from the file a member at a time (a copy each): the
// headers when the op starts on the path, each member's data when it is
// given, so a shard of any size costs the members in flight. Throws
// IoError naming the path when it cannot be opened or shrinks meanwhile.
OpPtr read_tar_members();

// A path of a ZIP archive -> its members, as zip_members(), read from the
// file a member at a time (the directory first). Throws as
// read_tar_members().
OpPtr read_zip_members();

// The work of decode_batch() without a pipeline: decodes `files` into one
// batch Buffer, leaving out (and appending to `*failures`, by index) each
// one that fails. `sample_indices` (one per file, or none: from the names)
// key a seeded augmentation.
Buffer decode_files(const std::vector<EncodedFile>& files,
                    const media::ImageOptions& options,
                    std::vector<media::ImageFailure>* failures,
                    std::span<const uint64_t> sample_indices = {});

// A path to read, or bytes already in memory.
using ImageSource = std::variant<std::string, EncodedFile>;

// Reads (paths) and decodes `sources` into one batch Buffer; a source that
// cannot be read or decoded is left out and appended to `*failures` by its
// index in `sources`. `sample_indices` (one per source, or none: from the
// names) key a seeded augmentation.
Buffer load_image_batch(std::vector<ImageSource> sources,
                        const media::ImageOptions& options,
                        std::vector<media::ImageFailure>* failures,
                        std::span<const uint64_t> sample_indices = {});

}  // namespace feedline::ops
