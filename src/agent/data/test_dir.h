// A fresh folder under /tmp for one test, removed after it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace hangar::agent::data {

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/hangar-data-test-XXXXXX";
    path_ = ::mkdtemp(t) ? t : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace hangar::agent::data
