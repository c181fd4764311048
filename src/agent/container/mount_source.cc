#include "agent/container/mount_source.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "agent/open_as_user.h"

namespace hangar::agent {

StatusOr<std::string> PinMountSource(const std::string& host,
                                     const std::optional<TaskCredentials>& who,
                                     const std::vector<std::string>& allowed, const std::string& at,
                                     const std::string& what) {
  HANGAR_ASSIGN_OR_RETURN(OpenedPath source, OpenAsUser(host, who, allowed, OpenFor::kMounting,
                                                        "containers.mounts_allowed", what));
  struct stat st {};
  if (fstat(source.fd(), &st) != 0) return Status::Internal(what + ": " + std::strerror(errno));
  // A bind mount needs a target of the same kind: a folder for a folder, a file for anything else.
  if (S_ISDIR(st.st_mode)) {
    if (mkdir(at.c_str(), 0700) != 0)
      return Status::Internal("cannot create " + at + ": " + std::strerror(errno));
  } else {
    const int fd = open(at.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Internal("cannot create " + at + ": " + std::strerror(errno));
    close(fd);
  }
  // The kernel follows the descriptor's magic link to the very object that was opened and checked.
  char proc[64];
  std::snprintf(proc, sizeof proc, "/proc/self/fd/%d", source.fd());
  if (mount(proc, at.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    const std::string why = std::strerror(errno);
    std::error_code ec;
    std::filesystem::remove(at, ec);
    return Status::FailedPrecondition(what + ": cannot bind " + source.resolved() +
                                      " for the container (" + why +
                                      "); the agent needs to run as root");
  }
  return at;
}

void UnpinMounts(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(dir, ec))) return;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    // Detached, not merely unmounted: a container that still holds it keeps its own copy.
    umount2(e.path().c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    std::error_code rm;
    std::filesystem::remove(e.path(),
                            rm);  // an empty folder or file once unmounted; never followed
  }
  std::filesystem::remove(dir, ec);
}

StatusOr<std::vector<ContainerMount>> PinMounts(const std::vector<ContainerMount>& mounts,
                                                const std::optional<TaskCredentials>& who,
                                                const std::vector<std::string>& allowed,
                                                const std::string& pins) {
  std::vector<ContainerMount> pinned;
  if (mounts.empty()) return pinned;
  UnpinMounts(pins);
  std::error_code ec;
  std::filesystem::create_directories(pins, ec);
  std::filesystem::permissions(std::filesystem::path(pins).parent_path(),
                               std::filesystem::perms::owner_all, ec);
  std::filesystem::permissions(pins, std::filesystem::perms::owner_all, ec);
  if (ec) return Status::Internal("cannot create " + pins + ": " + ec.message());
  for (size_t i = 0; i < mounts.size(); ++i) {
    const ContainerMount& m = mounts[i];
    auto at = PinMountSource(m.host, who, allowed, pins + "/" + std::to_string(i),
                             "mount " + m.host + ":" + m.path);
    if (!at.ok()) {
      UnpinMounts(pins);
      return at.status();
    }
    pinned.push_back({*at, m.path, m.read_only});
  }
  return pinned;
}

}  // namespace hangar::agent
