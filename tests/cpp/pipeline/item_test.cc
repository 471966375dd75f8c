// SPDX-License-Identifier: Apache-2.0

#include "feedline/pipeline/item.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/base/error.h"

namespace feedline {
namespace {

struct Counted {
  static inline int alive = 0;
  std::array<char, 48> payload{};  // too big to live inline
  Counted() { ++alive; }
  Counted(Counted&&) noexcept { ++alive; }
  ~Counted() { --alive; }
};

TEST(ItemTest, HoldsInlineAndHeapValuesAndMovesThem) {
  Item a(42);
  EXPECT_TRUE(a.holds<int>());
  Item b(std::move(a));
  EXPECT_FALSE(a.has_value());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.as<int>(), 42);
  Item s(std::string(100, 'x'));
  EXPECT_EQ(s.take_as<std::string>(), std::string(100, 'x'));
  EXPECT_FALSE(s.has_value());
  {
    Item c{Counted()};
    EXPECT_EQ(Counted::alive, 1);
    Item d = std::move(c);
    EXPECT_EQ(Counted::alive, 1);
    d = Item(7);
    EXPECT_EQ(Counted::alive, 0);
  }
  EXPECT_EQ(Counted::alive, 0);
}

TEST(ItemTest, WrongTypeThrowsNamingBothTypes) {
  Item a(1.5);
  EXPECT_EQ(a.get_if<int>(), nullptr);
  try {
    a.as<int>();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "item type mismatch: expected int, got double");
  }
  EXPECT_THROW(Item().as<int>(), InvalidArgument);
}

TEST(ItemTest, MoveOnlyValues) {
  Item a(std::make_unique<int>(5));
  auto p = a.take_as<std::unique_ptr<int>>();
  EXPECT_EQ(*p, 5);
}

}  // namespace
}  // namespace feedline
