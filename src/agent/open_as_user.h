// Opening a path a user named (an artifact's file:// source, a container's mount source) with that
// user's rights, not the agent's. A short-lived child process drops to the user's credentials
// (supplementary groups, gid, uid), opens the path -- so the kernel checks every folder on the
// way and follows every link as that user -- and hands the open descriptor back over a unix
// socket (SCM_RIGHTS). The agent then reads, or bind-mounts, only that descriptor. Per-thread
// credentials (setfsuid) are not used: glibc's set*id calls change every thread of the agent,
// and the raw calls would leave one thread of a multi-threaded daemon running as a user.
//
// Errors never tell the user more than they could learn themselves: a path the user cannot open
// gets one sentence, the same whether it exists or not.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/runner/task_credentials.h"
#include "common/status.h"

namespace hangar::agent {

// An open descriptor, closed when this goes.
class OpenedPath {
 public:
  OpenedPath() = default;
  OpenedPath(int fd, std::string resolved) : fd_(fd), resolved_(std::move(resolved)) {}
  OpenedPath(OpenedPath&& o) noexcept;
  OpenedPath& operator=(OpenedPath&& o) noexcept;
  OpenedPath(const OpenedPath&) = delete;
  OpenedPath& operator=(const OpenedPath&) = delete;
  ~OpenedPath();
  int fd() const { return fd_; }
  // Where the descriptor points, every link resolved (the kernel's answer for this very file).
  const std::string& resolved() const { return resolved_; }

 private:
  int fd_ = -1;
  std::string resolved_;
};

// How the path is opened: a regular file to read, or any file or folder to mount (O_PATH).
enum class OpenFor { kReading, kMounting };

// Opens `path` as `who` (nullopt: as the agent itself, switching nothing) and checks that what it
// opened lies under one of `roots` (folders; each resolved first; a path is under itself).
// `setting` names the cluster.yaml setting that lists the roots, for the errors; `what` is how
// the errors name the path ("file:///data/x", "mount /data/x:/x"). Errors:
//  - PermissionDenied: `path` is not spelled under a root, or resolves outside them (said only
//    for a path the user could open);
//  - NotFound, one sentence for "cannot open as the user" and "does not exist" alike;
//  - FailedPrecondition: a reading open that is not a regular file.
StatusOr<OpenedPath> OpenAsUser(const std::string& path, const std::optional<TaskCredentials>& who,
                                const std::vector<std::string>& roots, OpenFor purpose,
                                const std::string& setting, const std::string& what);

// Whether `path` is `root` or lies below it, by spelling ("/data" holds "/data/x", not
// "/database").
bool PathUnder(const std::string& path, const std::string& root);

// "user alice", "uid 61001", or "the agent's user": how errors name who tried.
std::string WhoOpens(const std::optional<TaskCredentials>& who);

}  // namespace hangar::agent
