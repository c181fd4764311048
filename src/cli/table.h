// Plain text tables for people: columns padded to their widest cell. A cell's control characters
// are shown escaped, never sent to the terminal: a name holding ESC could retitle or repaint it,
// one holding a newline could forge rows.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hangar::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) { Add(std::move(header)); }
  void Add(std::vector<std::string> row);
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// `text` with control characters (C0, DEL, C1) written as escapes a person can read: "\n", "\t",
// "\x1b", "\u009b".
std::string EscapeControl(std::string_view text);

// "3m ago", "2h ago" from a time in ms, relative to now.
std::string Ago(long long then_ms, long long now_ms);

}  // namespace hangar::cli
