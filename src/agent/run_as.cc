#include "agent/run_as.h"

#include <unistd.h>

#include <vector>

namespace hangar::agent {

StatusOr<std::optional<TaskCredentials>> ResolveRunAs(const v1::RunAs* a, const std::string& node) {
  if (a == nullptr) return std::optional<TaskCredentials>();
  TaskCredentials who;
  if (a->has_uid()) {
    who = CredentialsFromIds(a->uid(), a->gid(),
                             std::vector<gid_t>(a->groups().begin(), a->groups().end()));
  } else if (!a->account().empty()) {
    auto found = ResolveAccount(a->account());
    if (!found.ok())
      return Status(found.status().code(), "node " + node + ": " + found.status().message());
    who = std::move(*found);
  } else {
    return Status::InvalidArgument(
        "the launch names neither an account nor a uid to run the task as");
  }
  if (who.uid == 0 && !a->allow_root()) {
    return Status::PermissionDenied("the task would run as root (" + who.Describe() + ") on node " +
                                    node + " and its queue does not allow root tasks (allow_root)");
  }
  // An agent that is not root runs tasks only as itself (and then switches nothing).
  auto switched = SwitchFrom(geteuid(), getegid(), std::move(who));
  if (!switched.ok())
    return Status(switched.status().code(), "node " + node + ": " + switched.status().message());
  return *switched;
}

}  // namespace hangar::agent
