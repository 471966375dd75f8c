// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/item.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <utility>

#include <cxxabi.h>

#include "feedline/base/error.h"
#include "feedline/base/mutex.h"

namespace feedline {
namespace {

struct TypeNames {
  Mutex mu;
  std::unordered_map<std::type_index, std::string> names GUARDED_BY(mu);
};

TypeNames& type_names() {
  static auto* names = new TypeNames();  // leaked: used until process exit
  return *names;
}

}  // namespace

void register_type_name(const std::type_info& type, std::string name) {
  TypeNames& r = type_names();
  MutexLock lock(r.mu);
  r.names[std::type_index(type)] = std::move(name);
}

std::string type_name(const std::type_info& type) {
  {
    TypeNames& r = type_names();
    MutexLock lock(r.mu);
    auto it = r.names.find(std::type_index(type));
    if (it != r.names.end()) return it->second;
  }
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
