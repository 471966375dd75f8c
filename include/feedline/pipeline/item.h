// SPDX-License-Identifier: Apache-2.0
//
// Item: the type-erased, move-only value that flows between pipeline stages.
//
// An Item holds one value of any nothrow-movable type: a native value (an
// int, a byte buffer, a decoded image, a batch) or, from the Python layer, a
// wrapped Python object. Values of up to 32 bytes live inline; larger ones on
// the heap, so moving an Item never moves the value itself.
//
// Access is checked: as<T>() throws InvalidArgument naming both types when
// the Item holds something else. This is how a native op reports a pipeline
// whose stages do not fit together.
//
// Thread safety: none; an Item is owned by one stage at a time.

#pragma once

#include <cstddef>
#include <new>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace feedline {

class Item;

// A batch made by an untyped aggregate stage, read by a disaggregate stage.
using ItemBatch = std::vector<Item>;

namespace detail {

// Internal; not part of the public API.
inline constexpr std::size_t kItemInlineSize = 32;

template <typename T>
inline constexpr bool kItemStoresInline =
    sizeof(T) <= kItemInlineSize && alignof(T) <= alignof(std::max_align_t) &&
    std::is_nothrow_move_constructible_v<T>;

struct ItemVTable {
  const std::type_info* type;
  void (*destroy)(void* storage) noexcept;
  // Move-constructs into `to` from `from` and destroys `from`.
  void (*relocate)(void* from, void* to) noexcept;
  void* (*get)(void* storage) noexcept;
};

template <typename T>
struct ItemOps {
  static T* ptr(void* s) noexcept {
    if constexpr (kItemStoresInline<T>) {
      return std::launder(static_cast<T*>(s));
    } else {
      return *static_cast<T**>(s);
    }
  }
  static void destroy(void* s) noexcept {
    if constexpr (kItemStoresInline<T>) {
      ptr(s)->~T();
    } else {
      delete ptr(s);
    }
  }
  static void relocate(void* from, void* to) noexcept {
    if constexpr (kItemStoresInline<T>) {
      T* src = ptr(from);
      ::new (to) T(std::move(*src));
      src->~T();
    } else {
      *static_cast<T**>(to) = *static_cast<T**>(from);
    }
  }
  static void* get(void* s) noexcept { return ptr(s); }
  static constexpr ItemVTable kVTable{&typeid(T), &destroy, &relocate, &get};
};

[[noreturn]] void throw_item_type_mismatch(const std::type_info* held,
                                           const std::type_info& wanted);

}  // namespace detail

class Item {
 public:
  // An empty Item (holds nothing).
  Item() noexcept = default;

  // Holds `value`, moved in.
  template <typename T, typename V = std::decay_t<T>,
            typename = std::enable_if_t<!std::is_same_v<V, Item>>>
  Item(T&& value) {  // NOLINT(google-explicit-constructor): Items wrap values.
    static_assert(std::is_nothrow_move_constructible_v<V> ||
                      !detail::kItemStoresInline<V>,
                  "inline Item values must be nothrow-movable");
    if constexpr (detail::kItemStoresInline<V>) {
      ::new (static_cast<void*>(storage_)) V(std::forward<T>(value));
    } else {
      ::new (static_cast<void*>(storage_)) V*(new V(std::forward<T>(value)));
    }
    vtable_ = &detail::ItemOps<V>::kVTable;
  }

  Item(Item&& other) noexcept { take(other); }
  Item& operator=(Item&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  Item(const Item&) = delete;
  Item& operator=(const Item&) = delete;
  ~Item() { reset(); }

  bool has_value() const noexcept { return vtable_ != nullptr; }
  explicit operator bool() const noexcept { return has_value(); }

  // The held type; typeid(void) when empty.
  const std::type_info& type() const noexcept {
    return vtable_ ? *vtable_->type : typeid(void);
  }

  template <typename T>
  bool holds() const noexcept {
    return vtable_ == &detail::ItemOps<T>::kVTable ||
           (vtable_ != nullptr && *vtable_->type == typeid(T));
  }

  // Returns the held value. Throws: InvalidArgument if it is not a T.
  template <typename T>
  T& as() {
    if (!holds<T>()) {
      detail::throw_item_type_mismatch(vtable_ ? vtable_->type : nullptr,
                                       typeid(T));
    }
    return *static_cast<T*>(vtable_->get(storage_));
  }

  // Returns a pointer to the held value, or nullptr if it is not a T.
  template <typename T>
  T* get_if() noexcept {
    return holds<T>() ? static_cast<T*>(vtable_->get(storage_)) : nullptr;
  }

  // Moves the held T out, leaving this Item empty.
  // Throws: InvalidArgument if it is not a T.
  template <typename T>
  T take_as() {
    T value = std::move(as<T>());
    reset();
    return value;
  }

  // Destroys the held value, if any.
  void reset() noexcept {
    if (vtable_ != nullptr) {
      vtable_->destroy(storage_);
      vtable_ = nullptr;
    }
  }

 private:
  void take(Item& other) noexcept {
    if (other.vtable_ != nullptr) {
      other.vtable_->relocate(other.storage_, storage_);
      vtable_ = other.vtable_;
      other.vtable_ = nullptr;
    }
  }

  alignas(std::max_align_t) unsigned char storage_[detail::kItemInlineSize];
  const detail::ItemVTable* vtable_ = nullptr;
};

static_assert(std::is_nothrow_move_constructible_v<Item>,
              "Item must be nothrow-movable to live in queues");

// Returns a readable name for `type`: the display name registered for it,
// else its demangled C++ name ("int", "std::vector<int>").
std::string type_name(const std::type_info& type);

// Sets the display name type_name() gives `type`, as in messages that name
// item types (stages that do not fit, items of the wrong type). Language
// bindings register the names their users know ("str" for std::string).
// Thread safety: may be called from any thread; register names before
// building the pipelines whose messages should use them.
void register_type_name(const std::type_info& type, std::string name);

}  // namespace feedline
