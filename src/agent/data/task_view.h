// What a process task sees of the artifact cache: a folder of its own, <cache>/views/<task id>,
// holding hard links to the cached objects it uses at the paths its job names. The folder belongs
// to the task's user and admits no one else; the cache's objects/ folder admits only the agent.
// So an object is readable by the tasks that use it and by no other local account, without ACLs,
// copies or mounts; the link keeps the object's inode (mode 0444, the agent's) and so its bytes.
// Container tasks get their objects bind-mounted read-only instead (agent_containers.cc).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hangar::agent::data {

struct ViewEntry {
  std::string object;  // the cached object's file
  std::string path;    // where the task sees it, relative to the view ("models/x"; no "..")
};

// Makes (or remakes) the view of `task_id` under `views_dir`, owned by `owner` (uid, gid; nullopt:
// the agent's user) with mode 0500, and returns its folder. Built while the agent alone may enter
// it, and handed to the user only once complete.
StatusOr<std::string> MakeTaskView(const std::string& views_dir, const std::string& task_id,
                                   const std::vector<ViewEntry>& entries,
                                   std::optional<std::pair<uid_t, gid_t>> owner);

// Removes a task's view. The folder is taken back from its user first, so that nothing they do
// meanwhile can steer the removal.
void RemoveTaskView(const std::string& views_dir, const std::string& task_id);

// The task ids that have a view.
std::vector<std::string> TaskViews(const std::string& views_dir);

}  // namespace hangar::agent::data
