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

}  // namespace feedline
