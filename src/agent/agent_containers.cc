// The agent's container tasks and image staging (docs/containers.md): a task whose
// Launch names a container runs as a foreground `podman run`; a Stage pulls images ahead of a
// gang's start and says how it went; the node's image cache is reported to the controller.
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <set>

#include "agent/agent.h"
#include "agent/container/mount_source.h"
#include "agent/container/podman_env.h"

namespace hangar::agent {
namespace fs = std::filesystem;
namespace {

constexpr char kToolInContainer[] = "/.hangar/bin/hangar";
constexpr char kContainerPath[] =
    "/.hangar/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// podman container names: [a-zA-Z0-9][a-zA-Z0-9_.-]*.
std::string ContainerName(const std::string& node, const std::string& task_id) {
  std::string n = "hangar-" + node + "-" + task_id;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  }
  return n;
}

std::vector<std::string> RdmaDevices() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/infiniband", ec))
    out.push_back(e.path().string());
  return out;
}

std::string ExitMeaning(int code) {
  switch (code) {
    case 125:
      return "podman could not create the container";
    case 126:
      return "the container runtime could not start the command";
    case 127:
      return "the command was not found in the image";
    case 137:
      return "killed by SIGKILL (out of memory, or a stop past its grace)";
    case 143:
      return "ended by SIGTERM";
    default:
      return "";
  }
}

// Where a task's pinned mount sources live (mount_source.h): a folder only the agent may enter.
std::string PinsDir(const std::string& state_dir, const std::string& task_id) {
  return state_dir + "/mounts/" + task_id;
}

// The job's mount sources, each opened as the task's user, checked against the cluster's
// containers.mounts_allowed and pinned, then given to podman by their pins.
Status PinJobMounts(const pb::Launch& l, const TaskLaunch& launch, const std::string& state_dir,
                    ContainerRun* run) {
  const pb::Container& c = l.container();
  if (c.mounts_size() == 0) return Status::Ok();
  if (l.task_id().empty() || l.task_id().find('/') != std::string::npos ||
      l.task_id().front() == '.') {
    return Status::InvalidArgument("task id '" + l.task_id() + "' cannot name a folder");
  }
  std::vector<ContainerMount> mounts;
  for (const pb::Mount& m : c.mounts()) mounts.push_back({m.host(), m.path(), m.read_only()});
  HANGAR_ASSIGN_OR_RETURN(
      std::vector<ContainerMount> pinned,
      PinMounts(mounts, launch.run_as, {c.mounts_allowed().begin(), c.mounts_allowed().end()},
                PinsDir(state_dir, l.task_id())));
  run->mounts.insert(run->mounts.end(), pinned.begin(), pinned.end());
  return Status::Ok();
}

}  // namespace

void Agent::InitContainers() {
  if (!containers_.Open(options_.containers, options_.state_dir)) {
    if (options_.containers.enabled)
      spdlog::warn("agent {}: container tasks cannot run here: {}", options_.node,
                   containers_.why_not());
    return;
  }
  if (Status s = containers_.images()->Refresh(clock_->Now()); !s.ok())
    spdlog::warn("agent {}: image cache: {}", options_.node, s.message());
  SweepContainers();
  spdlog::info("agent {}: container tasks run with podman (storage {}, GPUs by {})", options_.node,
               containers_.podman()->options().root, containers_.podman()->options().gpu_devices);
}

void Agent::SweepContainers() {
  const Podman* podman = containers_.podman();
  auto found = podman->Containers("hangar.node=" + options_.node);
  if (!found.ok()) {
    spdlog::warn("agent {}: cannot list its containers: {}", options_.node,
                 found.status().message());
    return;
  }
  std::set<std::string> owned;
  {
    MutexLock l(tasks_.mu());
    for (const auto& [id, r] : tasks_.records()) {
      if (!r.ended && !r.container.empty() && runner_.IsRunning(id)) owned.insert(r.container);
    }
  }
  // Pins of tasks that no longer run (mount_source.h).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.state_dir + "/mounts", ec)) {
    if (!owned.count(ContainerName(options_.node, e.path().filename().string())))
      UnpinMounts(e.path().string());
  }
  for (const auto& c : *found) {
    if (owned.count(c.name)) continue;
    spdlog::warn("agent {}: removing container {} ({}): no running task of this agent owns it",
                 options_.node, c.name, c.state);
    if (Status s = podman->RemoveContainer(c.name); !s.ok())
      spdlog::warn("agent {}: {}", options_.node, s.message());
  }
}

Status Agent::ToContainer(const pb::Launch& l, const std::string& dir, TaskLaunch* launch,
                          TaskRecord* r) const {
  HANGAR_RETURN_IF_ERROR(containers_.Usable(options_.node));
  const Podman* podman = containers_.podman();
  const pb::Container& c = l.container();
  ContainerRun run;
  run.name = ContainerName(options_.node, l.task_id());
  launch->cleanup_argv = podman->RemoveCommand(run.name);
  run.image = c.image();
  run.argv = launch->argv;
  run.env_set = {{"PATH", l.env().count("PATH") ? l.env().at("PATH") : kContainerPath},
                 {"HANGAR_BIN", kToolInContainer}};
  for (const auto& [k, v] : launch->env) {
    if (k == "PATH" || k == "HANGAR_BIN" || k == "CUDA_VISIBLE_DEVICES") continue;
    // What podman itself would act on goes on its command line, not in its environment.
    if (PodmanMustNotInherit(k))
      run.env_set.emplace_back(k, v);
    else
      run.env_names.push_back(k);
  }
  std::string uuids;
  for (uint32_t g : l.gpu_indices()) {
    const std::string uuid = facts_.UuidAt(g);
    run.gpus.push_back({g, uuid});
    uuids += (uuids.empty() ? "" : ",") + uuid;
  }
  // A MIG task sees its MIG devices (ClaimMigInstances put their UUIDs in the launch).
  for (const auto& [k, v] : launch->env)
    if (k == "CUDA_VISIBLE_DEVICES" && l.mig_instances_size() > 0) uuids = v;
  run.mig_devices = r->mig_devices;
  if (!run.gpus.empty()) run.env_set.emplace_back("CUDA_VISIBLE_DEVICES", uuids);
  run.workdir = l.workdir();
  HANGAR_RETURN_IF_ERROR(PinJobMounts(l, *launch, options_.state_dir, &run));
  for (const auto& a : l.artifacts())
    run.mounts.push_back({data_.objects().PathOf(a.digest()), a.path(), true});
  run.mounts.push_back({dir, dir, false});  // the fake GPU load file, and nothing the task lacks
  if (socket_) run.mounts.push_back({socket_->path(), socket_->path(), false});
  const std::string tool =
      !options_.containers.in_container_tool.empty() ? options_.containers.in_container_tool
      : options_.hangar_binary.empty()
          ? ""
          : (fs::path(options_.hangar_binary).parent_path() / "hangar-in-container").string();
  if (!tool.empty() && fs::exists(tool)) run.mounts.push_back({tool, kToolInContainer, true});
  // The launch's (node-local scratch, with --scratch-dir), not the controller's.
  for (const auto& [k, v] : launch->env) {
    if (k == "HANGAR_CHECKPOINT_DIR" && !v.empty()) run.mounts.push_back({v, v, false});
  }
  run.devices = RdmaDevices();
  run.milli_cpu = l.milli_cpu();
  run.memory_mib = l.memory_mib();
  run.shm_size_mib = c.shm_size_mib();
  if (launch->run_as) run.user = std::make_pair(launch->run_as->uid, launch->run_as->gid);
  run.labels = {{"hangar.node", options_.node},
                {"hangar.task", l.task_id()},
                {"hangar.job", std::to_string(l.job_id())}};
  launch->argv = podman->RunArgv(run);
  // podman runs as the agent: with the agent's PATH and HOME, none of what it would act on from
  // the task's environment (podman_env.h), and its own configuration.
  std::erase_if(launch->env, [](const auto& kv) { return PodmanMustNotInherit(kv.first); });
  for (const char* name : {"PATH", "HOME"}) {
    if (const char* value = std::getenv(name)) launch->env.emplace_back(name, value);
  }
  for (auto& kv : podman->Environment()) launch->env.push_back(kv);
  launch->signal_proxy = true;  // podman forwards the stop's signals to the container
  launch->run_as.reset();       // podman runs as the agent; --user switches inside the container
  launch->milli_cpu = launch->memory_mib = 0;  // the container has the limits, not podman
  r->container = run.name;
  r->image = run.image;
  containers_.Touch(run.image, clock_->Now());
  return Status::Ok();
}

void Agent::ReleaseContainer(TaskRecord* r) {
  if (const Podman* podman = containers_.podman()) {
    // podman itself died of SIGTERM: it could not forward it (podman 4.3 then kills itself with
    // the signal), so the container may be running without having had it. It gets it now, and
    // the stop's usual grace to act on it, rather than SIGKILL at once.
    const Duration grace = r->signal == SIGTERM ? 10 * kSecond : 0;
    if (grace > 0) {
      spdlog::warn(
          "agent {}: task {}: podman ended by SIGTERM without its container; stopping the "
          "container "
          "with SIGTERM and up to {} s before SIGKILL",
          options_.node, r->task_id, grace / kSecond);
    }
    if (Status s = podman->RemoveContainer(r->container, grace); !s.ok()) {
      spdlog::warn("agent {}: task {}: {}", options_.node, r->task_id, s.message());
    }
  }
  UnpinMounts(PinsDir(options_.state_dir, r->task_id));  // the container, their only user, is gone
  if (r->signal == 0 && r->message.empty()) {
    const std::string meaning = ExitMeaning(r->exit_code);
    if (!meaning.empty())
      r->message = "container exited " + std::to_string(r->exit_code) + ": " + meaning;
  }
  containers_.Touch(r->image, clock_->Now());
}

void Agent::HandleStage(const pb::Stage& s) { stage_queue_.Push(s); }

std::set<std::string> Agent::ImagesInUse() {
  std::set<std::string> out;
  MutexLock l(tasks_.mu());
  for (const auto& [id, r] : tasks_.records()) {
    if (!r.ended && !r.image.empty()) out.insert(r.image);
  }
  return out;
}

void Agent::StageLoop(const std::atomic<bool>* stop) {
  std::list<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> artifact_threads;
  while (!*stop) {
    std::optional<pb::Stage> next = stage_queue_.PopFor(std::chrono::milliseconds(200), stop);
    if (!next) continue;
    const pb::Stage s = std::move(*next);
    containers_.SetWanted(std::set<std::string>(s.keep().begin(), s.keep().end()));
    data_.objects().SetWanted(std::set<std::string>(s.keep().begin(), s.keep().end()));
    // Artifacts stage side by side (each reads its own origin or peers); images one by one.
    for (const auto& a : s.artifacts()) {
      auto done = std::make_shared<std::atomic<bool>>(false);
      artifact_threads.emplace_back(std::thread([this, s, a, stop, done] {
                                      StageArtifact(s, a, stop);
                                      *done = true;
                                    }),
                                    done);
    }
    for (const auto& image : s.images()) StageImage(s, image, stop);
    for (auto it = artifact_threads.begin(); it != artifact_threads.end();) {
      if (*it->second) {
        it->first.join();
        it = artifact_threads.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [t, done] : artifact_threads) t.join();
}

void Agent::StageImage(const pb::Stage& s, const std::string& image,
                       const std::atomic<bool>* stop) {
  pb::AgentMessage m;
  pb::StageResult* res = m.mutable_stage_result();
  res->set_job_id(s.job_id());
  res->set_attempt(s.attempt());
  res->set_image(image);
  if (Status usable = containers_.Usable(options_.node); !usable.ok()) {
    res->set_message(usable.message());
    Write(m);
    return;
  }
  ImageCache* images = containers_.images();
  if (images->Holds(image)) {
    res->set_ok(true);
    res->set_bytes(images->BytesOf(image));
    Write(m);
    return;
  }
  // Room first, where the budget or the disk floor needs it: a pull onto a full disk fails.
  for (const auto& gone : images->Evict(ImagesInUse(), clock_->Now())) {
    spdlog::info("agent {}: evicted image {} to make room for {}", options_.node, gone, image);
  }
  // A registry that is down: say so, and try again with backoff (1 s doubling to 30 s) until the
  // pull works or fails for good, or the agent stops.
  for (Duration backoff = kSecond; !*stop;
       backoff = std::min<Duration>(backoff * 2, 30 * kSecond)) {
    PullOutcome p = containers_.podman()->Pull(image, 30 * kMinute);
    res->set_duration_ms(p.took);
    if (p.failure != PullFailure::kUnreachable) {
      res->set_ok(p.failure == PullFailure::kNone);
      res->set_retrying(false);
      res->set_message(p.message);
      break;
    }
    res->set_retrying(true);
    res->set_message("staging: " + p.message + ", retrying");
    Write(m);
    for (Duration waited = 0; waited < backoff && !*stop; waited += 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (*stop) return;
  (void)images->Refresh(clock_->Now());
  images->Touch(image, clock_->Now());
  res->set_bytes(std::max<int64_t>(0, images->BytesOf(image)));
  spdlog::info("agent {}: staged {} for job {}: {}", options_.node, image, s.job_id(),
               res->ok() ? "ok in " + std::to_string(res->duration_ms()) + " ms" : res->message());
  Write(m);
  for (const auto& gone : images->Evict(ImagesInUse(), clock_->Now())) {
    spdlog::info("agent {}: evicted image {} (cache budget or disk floor)", options_.node, gone);
  }
  SendImages();
}

void Agent::SendImages() {
  pb::AgentMessage m;
  pb::ImageInventory* inv = m.mutable_images();
  *inv = containers_.Inventory();
  if (data_.ready()) data_.objects().FillInventory(inv);
  inv->set_data_url(data_.url());
  Write(m);
}

}  // namespace hangar::agent
