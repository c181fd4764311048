#include "agent/runner/task_credentials.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include "agent/runner/os_error.h"

namespace hangar::agent {
namespace {

// getpwnam_r / getpwuid_r with a buffer that grows as they ask (the agent is multi-threaded, so
// not the static getpwnam). nullopt: no entry; a Status for a lookup that failed.
template <typename Lookup>
StatusOr<std::optional<TaskCredentials>> LookUp(Lookup lookup, const std::string& what) {
  std::vector<char> buf(4096);
  for (;;) {
    passwd entry{};
    passwd* found = nullptr;
    const int err = lookup(&entry, buf.data(), buf.size(), &found);
    if (err == ERANGE && buf.size() < (1u << 20)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    // Some libcs answer "no such entry" with ENOENT or ESRCH rather than 0 and no result.
    if (err != 0 && err != ENOENT && err != ESRCH && err != EBADF && err != EPERM) {
      return ErrnoStatus(err, "cannot look up " + what + " in this node's passwd database");
    }
    if (found == nullptr) return std::optional<TaskCredentials>();
    TaskCredentials c;
    c.uid = entry.pw_uid;
    c.gid = entry.pw_gid;
    c.name = entry.pw_name ? entry.pw_name : "";
    c.home = entry.pw_dir ? entry.pw_dir : "";
    return std::optional<TaskCredentials>(std::move(c));
  }
}

}  // namespace

std::string TaskCredentials::Describe() const {
  std::string out = "uid " + std::to_string(uid) + " gid " + std::to_string(gid);
  for (size_t i = 0; i < groups.size(); ++i)
    out += (i ? "," : " groups ") + std::to_string(groups[i]);
  if (!name.empty()) out += " (" + name + ")";
  return out;
}

StatusOr<TaskCredentials> ResolveAccount(const std::string& name) {
  HANGAR_ASSIGN_OR_RETURN(auto found,
                          LookUp([&](passwd* e, char* b, size_t n,
                                     passwd** r) { return getpwnam_r(name.c_str(), e, b, n, r); },
                                 "account '" + name + "'"));
  if (!found) {
    return Status::NotFound(
        "this node has no Unix account '" + name +
        "' (getpwnam); create it on every node, or map the token to numbers (hangar token "
        "create --uid N --gid N)");
  }
  TaskCredentials c = std::move(*found);
  // Its supplementary groups, as login would give them (the primary group among them).
  std::vector<gid_t> groups(64);
  for (;;) {
    int n = static_cast<int>(groups.size());
    if (getgrouplist(c.name.c_str(), c.gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      break;
    }
    if (groups.size() >= 65536)
      return Status::ResourceExhausted("account '" + name + "' is in too many groups");
    groups.resize(std::max<size_t>(static_cast<size_t>(n), groups.size() * 2));
  }
  std::erase(groups, c.gid);  // the primary group is the gid itself
  c.groups = std::move(groups);
  return c;
}

TaskCredentials CredentialsFromIds(uid_t uid, gid_t gid, std::vector<gid_t> groups) {
  TaskCredentials c;
  auto found =
      LookUp([&](passwd* e, char* b, size_t n, passwd** r) { return getpwuid_r(uid, e, b, n, r); },
             "uid " + std::to_string(uid));
  if (found.ok() && *found) {
    c.name = (*found)->name;
    c.home = (*found)->home;
  }
  c.uid = uid;
  c.gid = gid;
  c.groups = std::move(groups);
  return c;
}

StatusOr<std::optional<TaskCredentials>> SwitchFrom(uid_t euid, gid_t egid,
                                                    std::optional<TaskCredentials> wanted) {
  if (!wanted || euid == 0) return wanted;
  if (wanted->uid == euid && wanted->gid == egid) return std::optional<TaskCredentials>();
  return Status::FailedPrecondition(
      "the task should run as " + wanted->Describe() + ", but the agent runs as uid " +
      std::to_string(euid) + " gid " + std::to_string(egid) +
      ", not root, so it starts tasks only as itself; run the agent as root");
}

}  // namespace hangar::agent
