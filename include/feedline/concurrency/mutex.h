// SPDX-License-Identifier: Apache-2.0
//
// Mutex and MutexLock live in the base layer (feedline/base/mutex.h), which
// uses them too; this header is the same as including that one.

#pragma once

#include "feedline/base/mutex.h"  // IWYU pragma: export
