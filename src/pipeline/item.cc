// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/item.h"

#include <cstdlib>
#include <memory>
#include <string>

#include <cxxabi.h>

#include "feedline/base/error.h"

namespace feedline {

std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? std::string(demangled.get())
                                  : std::string(type.name());
}

namespace detail {

void throw_item_type_mismatch(const std::type_info* held,
                              const std::type_info& wanted) {
  throw InvalidArgument("item type mismatch: expected " + type_name(wanted) +
                        ", got " +
                        (held != nullptr ? type_name(*held) : "an empty item"));
}

}  // namespace detail
}  // namespace feedline
