// Who a task runs as: a Unix uid, primary gid and supplementary groups, switched to in the task's
// process before exec (process_spawn.h). Resolved here from what the controller sent: an account
// name, looked up in this node's passwd and group databases, or numbers, used as they are (an
// account on the node is not needed for those).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::agent {

struct TaskCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;     // supplementary; empty: none
  std::string name;              // the account's name, when this node's passwd knows the uid
  std::string home;              // its home directory, likewise; empty: none
  std::string Describe() const;  // "uid 61001 gid 61002 groups 61010,61011"
};

// The account `name` on this node, with the groups the group database gives it. NotFound, saying
// so, when there is none.
StatusOr<TaskCredentials> ResolveAccount(const std::string& name);

// The numbers as given; name and home from passwd when it has an entry for `uid`.
TaskCredentials CredentialsFromIds(uid_t uid, gid_t gid, std::vector<gid_t> groups);

// What a process running as `euid`/`egid` must do to start a task as `wanted`: root switches to
// it (the credentials back); any other user only runs tasks as itself, so for its own uid and
// gid nothing (nullopt) and for anyone else FailedPrecondition, saying so. nullopt in: nullopt.
StatusOr<std::optional<TaskCredentials>> SwitchFrom(uid_t euid, gid_t egid,
                                                    std::optional<TaskCredentials> wanted);

}  // namespace hangar::agent
