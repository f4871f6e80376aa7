#include "services/common/task_guard.h"

#include <stdexcept>
#include <string>

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(TaskGuardTest, ATaskThatReturnsIsNotCounted) {
  const int64_t before = EscapedExceptions();
  bool ran = false;
  EXPECT_TRUE(RunGuarded("test", [&] { ran = true; }));
  EXPECT_TRUE(ran);
  EXPECT_EQ(EscapedExceptions(), before);
}

TEST(TaskGuardTest, WhatATaskThrowsIsCaughtAndCounted) {
  const int64_t before = EscapedExceptions();
  std::string error;
  EXPECT_FALSE(RunGuarded("test", [] { throw std::runtime_error("secret 4111 1111"); }, &error));
  EXPECT_FALSE(RunGuarded("test", [] { throw 42; }));
  EXPECT_EQ(EscapedExceptions(), before + 2);
  // The description names the type, never the message.
  EXPECT_EQ(error.find("4111"), std::string::npos);
  EXPECT_NE(error.find("exception"), std::string::npos);
}

}  // namespace
}  // namespace convstate
