// Helpers shared by the simulator and evaluation tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace surge::stream::testutil {

inline ::testing::AssertionResult Contains(std::string_view haystack, std::string_view needle) {
  if (haystack.find(needle) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << haystack << "\" does not contain \"" << needle << "\"";
}

}  // namespace surge::stream::testutil
