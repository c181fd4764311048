#include "agent/container/step_container.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string_view>

#include "agent/container/mount_source.h"
#include "agent/container/podman_env.h"

namespace hangar::agent {
namespace fs = std::filesystem;

namespace {

// The podman container's name: [a-zA-Z0-9][a-zA-Z0-9_.-]*, unique per session on the node.
std::string StepContainerName(const std::string& node, const std::string& task_id,
                              uint64_t session) {
  std::string n = "hangar-" + node + "-" + task_id + "-step-" + std::to_string(session);
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  }
  return n;
}

bool Absolute(const std::string& p) { return !p.empty() && p.front() == '/'; }

}  // namespace

StatusOr<std::vector<ContainerMount>> ParseStepMounts(const std::vector<std::string>& entries) {
  std::vector<ContainerMount> out;
  for (const std::string& e : entries) {
    std::vector<std::string> parts;
    for (size_t at = 0;;) {
      const size_t colon = e.find(':', at);
      parts.push_back(e.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
      if (colon == std::string::npos) break;
      at = colon + 1;
    }
    ContainerMount m;
    m.read_only = false;  // pyxis mounts read-write unless told
    if (parts.size() == 1) parts.push_back(parts[0]);
    if (parts.size() == 3) {
      if (parts[2] == "ro" || parts[2] == "rw") {
        m.read_only = parts[2] == "ro";
      } else {
        return Status::InvalidArgument("--container-mounts entry '" + e + "': flag '" + parts[2] +
                                       "' is not ro or rw");
      }
    }
    if (parts.size() > 3 || !Absolute(parts[0]) || !Absolute(parts[1])) {
      return Status::InvalidArgument(
          "--container-mounts entry '" + e +
          "' is not SRC:DST[:ro|rw] with absolute paths (e.g. /data:/data:ro)");
    }
    if (fs::path(parts[1]).lexically_normal() == "/") {
      return Status::InvalidArgument("--container-mounts entry '" + e +
                                     "' would cover the container's whole file system");
    }
    m.host = parts[0];
    m.path = parts[1];
    out.push_back(std::move(m));
  }
  return out;
}

std::string StepPinsDir(const std::string& state_dir, const std::string& task_id,
                        uint64_t session) {
  return state_dir + "/mounts/" + task_id + ".step-" + std::to_string(session);
}

std::vector<uint32_t> StepGpus(const std::vector<std::string>& env,
                               const std::vector<uint32_t>& task_gpus) {
  constexpr std::string_view kKey = "CUDA_VISIBLE_DEVICES=";
  auto it = std::find_if(env.begin(), env.end(),
                         [&](const std::string& kv) { return kv.rfind(kKey, 0) == 0; });
  if (it == env.end()) return task_gpus;
  std::vector<uint32_t> gpus;
  std::stringstream list(it->substr(kKey.size()));
  for (std::string one; std::getline(list, one, ',');) {
    char* end = nullptr;
    const unsigned long g = std::strtoul(one.c_str(), &end, 10);
    if (!one.empty() && *end == '\0') gpus.push_back(static_cast<uint32_t>(g));
  }
  return gpus;
}

StatusOr<ContainerRun> StepContainerRun(const StepContainerAsk& ask, const StepContainerPlace& at,
                                        const std::vector<std::string>& argv,
                                        std::vector<std::pair<std::string, std::string>>* values) {
  if (ask.image.empty()) return Status::InvalidArgument("--container-image names no image");
  if (at.task_id.empty() || at.task_id.find('/') != std::string::npos ||
      at.task_id.front() == '.') {
    return Status::InvalidArgument("task id '" + at.task_id + "' cannot name a folder");
  }
  if (!ask.workdir.empty() && !Absolute(ask.workdir))
    return Status::InvalidArgument("--container-workdir=" + ask.workdir + " is not absolute");
  HANGAR_ASSIGN_OR_RETURN(std::vector<ContainerMount> mounts, ParseStepMounts(ask.mounts));
  ContainerRun run;
  run.name = StepContainerName(at.node, at.task_id, at.session);
  run.image = ask.image;
  run.argv = argv;
  run.workdir = ask.workdir;
  run.gpus = at.gpus;
  if (at.user) run.user = std::make_pair(at.user->uid, at.user->gid);
  run.labels = {{"hangar.node", at.node},
                {"hangar.task", at.task_id},
                {"hangar.job", std::to_string(at.job_id)},
                {"hangar.step-session", std::to_string(at.session)}};
  static const std::set<std::string> kImageOwn = {"PATH", "HOME", "LD_LIBRARY_PATH",
                                                  "CUDA_VISIBLE_DEVICES"};
  std::set<std::string> seen;
  for (const std::string& kv : ask.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (kImageOwn.count(name) || !seen.insert(name).second) continue;
    if (PodmanMustNotInherit(name)) {  // never in podman's own environment (podman_env.h)
      run.env_set.emplace_back(name, kv.substr(eq + 1));
      continue;
    }
    values->emplace_back(name, kv.substr(eq + 1));
    run.env_names.push_back(std::move(name));
  }
  // The step task's GPUs inside the container: podman gives it those devices only, named by UUID.
  std::string uuids;
  for (const auto& g : at.gpus) uuids += (uuids.empty() ? "" : ",") + g.uuid;
  if (!at.gpus.empty()) run.env_set.emplace_back("CUDA_VISIBLE_DEVICES", uuids);
  HANGAR_ASSIGN_OR_RETURN(run.mounts, PinMounts(mounts, at.user, ask.mounts_allowed,
                                                StepPinsDir(at.state_dir, at.task_id, at.session)));
  return run;
}

void ReleaseStepContainers(const Podman* podman, const std::string& node,
                           const std::string& state_dir, const std::string& task_id) {
  if (podman != nullptr) {
    auto found = podman->Containers("hangar.task=" + task_id);
    if (found.ok()) {
      for (const auto& c : *found) {
        bool step = false;
        for (const auto& [k, v] : c.labels) step = step || k == "hangar.step-session";
        if (!step) continue;
        if (Status s = podman->RemoveContainer(c.name); !s.ok())
          spdlog::warn("agent {}: task {}: {}", node, task_id, s.message());
      }
    }
  }
  const std::string prefix = task_id + ".step-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir + "/mounts", ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) UnpinMounts(e.path().string());
  }
}

}  // namespace hangar::agent
