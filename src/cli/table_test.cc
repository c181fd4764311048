#include "cli/table.h"

#include <gtest/gtest.h>

namespace hangar::cli {
namespace {

TEST(TableTest, PadsColumns) {
  Table t({"ID", "NAME"});
  t.Add({"1", "a-long-name"});
  t.Add({"100", "b"});
  EXPECT_EQ(t.Render(), "ID   NAME\n1    a-long-name\n100  b\n");
}

TEST(TableTest, Ago) {
  EXPECT_EQ(Ago(0, 5000), "-");
  EXPECT_EQ(Ago(1000, 61000), "1m ago");
  EXPECT_EQ(Ago(1000, 92000), "1m31s ago");
}

}  // namespace
}  // namespace hangar::cli
