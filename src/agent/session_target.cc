#include "agent/session_target.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hangar::agent {
namespace {

// The second number of a "Uid:" / "Gid:" line of /proc/PID/status: the effective id.
bool EffectiveId(const std::string& line, const std::string& key, uint32_t* out) {
  if (!line.starts_with(key)) return false;
  std::istringstream in(line.substr(key.size()));
  uint32_t real = 0, effective = 0;
  if (!(in >> real >> effective)) return false;
  *out = effective;
  return true;
}

}  // namespace

void SetEnv(std::vector<std::string>* env, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  std::erase_if(*env, [&](const std::string& e) { return e.starts_with(prefix); });
  env->push_back(prefix + value);
}

StatusOr<TaskSurroundings> ReadTaskSurroundings(pid_t pid, const std::string& proc,
                                                const std::string& cgroup_root) {
  const std::string dir = proc + "/" + std::to_string(pid);
  std::ifstream status(dir + "/status");
  if (!status) return Status::NotFound("the task's process " + std::to_string(pid) + " is gone");
  uint32_t uid = 0, gid = 0;
  bool have_uid = false, have_gid = false;
  std::vector<gid_t> groups;
  for (std::string line; std::getline(status, line);) {
    have_uid = have_uid || EffectiveId(line, "Uid:", &uid);
    have_gid = have_gid || EffectiveId(line, "Gid:", &gid);
    if (line.starts_with("Groups:")) {
      std::istringstream in(line.substr(7));
      for (uint32_t g; in >> g;) groups.push_back(g);
    }
  }
  if (!have_uid || !have_gid) {
    return Status::FailedPrecondition("cannot read who the task's process " + std::to_string(pid) +
                                      " runs as");
  }
  TaskSurroundings out;
  out.credentials = CredentialsFromIds(uid, gid, std::move(groups));

  std::ifstream environ(dir + "/environ", std::ios::binary);
  if (!environ) {
    return Status::FailedPrecondition("cannot read the environment of the task's process " +
                                      std::to_string(pid));
  }
  for (std::string entry; std::getline(environ, entry, '\0');) {
    if (entry.find('=') != std::string::npos) out.env.push_back(entry);
  }
  // cgroup v2: the one line "0::/path".
  std::ifstream cgroup(dir + "/cgroup");
  for (std::string line; std::getline(cgroup, line);) {
    if (!line.starts_with("0::")) continue;
    const std::string candidate = cgroup_root + line.substr(3);
    if (line.size() > 4 && std::filesystem::exists(candidate + "/cgroup.procs"))
      out.cgroup_dir = candidate;
  }
  std::error_code ec;
  out.workdir = std::filesystem::read_symlink(dir + "/cwd", ec).string();
  if (ec) out.workdir.clear();
  return out;
}

}  // namespace hangar::agent
