// A fresh folder under /tmp for one test, removed after it; and whether another account can open
// a path (for tests of who may read what).
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace hangar::agent::data {

class TempDir {
 public:
  // `mode`: 0700 unless a test needs other accounts to reach what is inside.
  explicit TempDir(mode_t mode = 0700) {
    char t[] = "/tmp/hangar-data-test-XXXXXX";
    path_ = ::mkdtemp(t) ? t : "";
    if (!path_.empty()) ::chmod(path_.c_str(), mode);
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

// Whether uid/gid (no supplementary groups) can open `path` for reading, asked in a child process
// that becomes that account.
inline bool OpensAs(uid_t uid, gid_t gid, const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(2);
    ::_exit(::open(path.c_str(), O_RDONLY) >= 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace hangar::agent::data
