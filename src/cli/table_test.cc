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

// A job or group name holding ESC retitled the terminal of whoever ran `hangar jobs`, and one
// holding a newline forged rows of the table.
TEST(TableTest, ControlCharactersAreShownEscaped) {
  Table t({"ID", "NAME"});
  t.Add({"1",
         "a\x1b]0;owned\x07"
         "b"});
  t.Add({"2", "x\n3    forged"});
  t.Add({"3", std::string("nul\0tab\tdel\x7f\xc2\x9b\xc3\xa9", 16)});
  EXPECT_EQ(t.Render(),
            "ID  NAME\n"
            "1   a\\x1b]0;owned\\x07b\n"
            "2   x\\n3    forged\n"
            "3   nul\\x00tab\\tdel\\x7f\\u009b\xc3\xa9\n");
  EXPECT_EQ(EscapeControl("plain caf\xc3\xa9"), "plain caf\xc3\xa9");
}

TEST(TableTest, Ago) {
  EXPECT_EQ(Ago(0, 5000), "-");
  EXPECT_EQ(Ago(1000, 61000), "1m ago");
  EXPECT_EQ(Ago(1000, 92000), "1m31s ago");
}

}  // namespace
}  // namespace hangar::cli
