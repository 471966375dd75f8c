// SPDX-License-Identifier: Apache-2.0
//
// Reading whole files into Buffers.

#pragma once

#include <string>

#include "feedline/base/buffer.h"

namespace feedline {

// Returns the bytes of the file at `path` as a 1-D uint8 Buffer.
// Throws: IoError naming the path and the reason (missing, a directory,
// unreadable, short read).
Buffer read_file(const std::string& path);

// Returns the file at `path` memory-mapped read-only as a 1-D uint8 Buffer:
// no copy, pages loaded as they are read; the mapping lives as long as any
// view of it. The file must not shrink while mapped (reading a page past its
// new end raises SIGBUS, as with any mapping). An empty file gives an empty
// Buffer. Throws: IoError naming the path.
Buffer map_file(const std::string& path);

}  // namespace feedline
