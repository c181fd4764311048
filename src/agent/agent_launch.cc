// The agent's launches: a Launch from the controller becomes a TaskRunner launch (a process, or
// a container through agent_containers.cc), run as the task's user, with its checkpoint
// directory ready and its record kept across agent restarts.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "agent/agent.h"
#include "agent/gpu/mig_profiles.h"
#include "agent/run_as.h"
#include "agent/runner/process_spawn.h"

namespace hangar::agent {

namespace fs = std::filesystem;

namespace {

// `path` (a PATH value) with `dir` appended, unless it is there already.
std::string WithDirectory(const std::string& path, const std::string& dir) {
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, dir) == 0 && end - start == dir.size()) return path;
    start = end + 1;
  }
  return path.empty() ? dir : path + ":" + dir;
}

// Makes `path` a file or directory (`dir`) that belongs to `who`, mode 0600 or 0700: created if
// missing, never through a link. One that exists already must be theirs.
Status GiveTo(const std::string& path, bool dir, const TaskCredentials& who) {
  const std::string what = (dir ? "directory " : "file ") + path;
  if (dir && mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FailedPrecondition("cannot create the " + what + ": " + std::strerror(errno));
  }
  const int fd =
      dir ? open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
          : open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::FailedPrecondition("cannot open the " + what + ": " + std::strerror(errno));
  struct stat st {};
  Status s = Status::Ok();
  if (fstat(fd, &st) != 0) {
    s = Status::FailedPrecondition("cannot stat the " + what + ": " + std::strerror(errno));
  } else if (st.st_uid != who.uid && st.st_uid != geteuid()) {
    // Someone else's (an earlier job's under a reused id, say): never handed over.
    s = Status::FailedPrecondition("the " + what + " belongs to uid " + std::to_string(st.st_uid) +
                                   ", not to " + who.Describe() +
                                   " that the task runs as; remove it or give it to them");
  } else if (st.st_uid != who.uid &&
             (fchown(fd, who.uid, who.gid) != 0 || fchmod(fd, dir ? 0700 : 0600) != 0)) {
    s = Status::FailedPrecondition("cannot give the " + what + " to " + who.Describe() + ": " +
                                   std::strerror(errno));
  }
  close(fd);
  return s;
}

// A launch's MIG instances, claimed (MigInstances::ClaimFor): their MIG UUIDs are the task's
// CUDA_VISIBLE_DEVICES, and its record keeps them (released when it ends).
Status UseMigInstances(StatusOr<MigInstances::Claim> claim, TaskLaunch* launch, TaskRecord* r) {
  if (!claim.ok()) return claim.status();
  if (claim->slots.empty()) return Status::Ok();
  auto it = std::find_if(launch->env.begin(), launch->env.end(),
                         [](const auto& kv) { return kv.first == "CUDA_VISIBLE_DEVICES"; });
  if (it != launch->env.end())
    it->second = claim->devices;
  else
    launch->env.emplace_back("CUDA_VISIBLE_DEVICES", claim->devices);
  r->mig = std::move(claim->slots);
  r->mig_devices = std::move(claim->uuids);
  return Status::Ok();
}

// A process task's workdir, when the job names one, must be there (shared storage, or the same
// checkout on every node).
Status CheckWorkdir(const pb::Launch& l, const std::string& node) {
  if (l.workdir().empty() || fs::is_directory(l.workdir())) return Status::Ok();
  return Status::NotFound("workdir " + l.workdir() + " is not a directory on node " + node +
                          "; put the job's files on storage every node mounts at that path");
}

// The task's folder stays the agent's (so no one can put a link where it reads logs from); what
// the task writes in it is the user's: its output (the runner), its fresh workdir (the runner)
// and its fake GPU load.
Status GiveTaskFolder(const std::string& dir, const TaskCredentials& who) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ec ? Status::FailedPrecondition("cannot create " + dir + ": " + ec.message())
            : GiveTo(dir + "/gpu_util", /*dir=*/false, who);
}

}  // namespace

TaskLaunch Agent::BaseLaunch(const pb::Launch& l, const std::string& dir) const {
  TaskLaunch launch;
  launch.task_id = l.task_id();
  launch.argv.assign(l.argv().begin(), l.argv().end());
  for (const auto& [k, v] : l.env()) launch.env.emplace_back(k, v);
  launch.env.emplace_back("HANGAR_FAKE_GPU_UTIL_FILE", dir + "/gpu_util");
  launch.env.emplace_back("HANGAR_AGENT_STATE_DIR", options_.state_dir);
  // For `hangar checkpoint-done`: who the task is, where its agent listens, and the binary.
  if (!l.env().count("HANGAR_TASK_ID")) launch.env.emplace_back("HANGAR_TASK_ID", l.task_id());
  if (socket_) launch.env.emplace_back("HANGAR_AGENT_SOCKET", socket_->path());
  if (!options_.hangar_binary.empty()) {
    launch.env.emplace_back("HANGAR_BIN", options_.hangar_binary);
    const char* agent_path = std::getenv("PATH");
    const std::string path = l.env().count("PATH") ? l.env().at("PATH")
                             : agent_path          ? agent_path
                                                   : kDefaultTaskPath;
    launch.env.emplace_back(
        "PATH", WithDirectory(path, fs::path(options_.hangar_binary).parent_path().string()));
  }
  // The job's workdir when it names one (it must be there: shared storage or the same checkout
  // on every node), else a private folder per task.
  launch.workdir = l.workdir().empty() ? dir + "/work" : l.workdir();
  launch.stdout_path = dir + "/stdout.log";
  launch.stderr_path = dir + "/stderr.log";
  launch.milli_cpu = l.milli_cpu();
  launch.memory_mib = l.memory_mib();
  return launch;
}

void Agent::HandleLaunch(const pb::Launch& l) {
  std::optional<TaskRecord> known;
  {
    MutexLock lock(tasks_.mu());
    if (const TaskRecord* it = tasks_.Find(l.task_id())) known = *it;
  }
  if (known) {  // launched before: say how it is, never start it twice
    SendStatus(*known);
    return;
  }
  if (!SafeTaskId(l.task_id())) {
    spdlog::error(
        "agent {}: refused a launch with task id '{}': task ids are JOB.ATTEMPT.INDEX, a name for "
        "a "
        "folder of the state dir",
        options_.node, l.task_id());
    return;
  }
  if (l.has_preflight()) {  // the gang preflight first (agent_preflight.cc); it launches after
    // A launch sent again while its preflight runs (the controller relaunches what a heartbeat
    // does not list) is answered when the preflight ends.
    preflights_.Start(l.task_id(),
                      [this, l](const std::atomic<bool>& cancel) { RunPreflight(l, cancel); });
    return;
  }
  const std::string dir = TaskDir(l.task_id());
  TaskLaunch launch = BaseLaunch(l, dir);
  TaskRecord r;
  r.preflight = preflights_.TakePassed(l.task_id());
  r.task_id = l.task_id();
  r.job_id = l.job_id();
  r.attempt = l.attempt();
  r.index = l.task_index();
  r.gpus.assign(l.gpu_indices().begin(), l.gpu_indices().end());
  const Status ready = PrepareLaunch(l, dir, &launch, &r);
  StatusOr<pid_t> pid = ready.ok() ? runner_.Launch(launch) : StatusOr<pid_t>(ready);
  if (l.tty() || l.stdin_pipe()) AfterTerminalLaunch(launch, pid.ok());
  AfterSpawn(pid, launch, dir, &r);
  RecordLaunch(r);
}

Status Agent::PrepareLaunch(const pb::Launch& l, const std::string& dir, TaskLaunch* launch,
                            TaskRecord* r) {
  StatusOr<std::optional<TaskCredentials>> run_as = RunAsOf(l);
  Status ready = run_as.status();
  if (ready.ok()) {
    launch->run_as = *run_as;
    r->uid = *run_as ? (*run_as)->uid : geteuid();
    ready = options_.scratch_dir.empty() ? PrepareCheckpointDir(l, *run_as)
                                         : PrepareScratchCheckpoint(l, *run_as, launch, r);
  }
  if (ready.ok()) ready = UseMigInstances(mig_.ClaimFor(l), launch, r);
  if (ready.ok()) ready = PrepareArtifacts(l, dir, launch, r);
  if (ready.ok() && l.has_container()) ready = ToContainer(l, dir, launch, r);
  if (ready.ok() && !l.has_container()) ready = CheckWorkdir(l, options_.node);
  if (ready.ok() && *run_as) ready = GiveTaskFolder(dir, **run_as);
  if (ready.ok() && l.tty()) ready = PrepareTerminal(l, dir, launch);
  if (ready.ok() && l.stdin_pipe() && !l.tty()) ready = PrepareStdinPipe(l, launch);
  if (ready.ok())
    ready = PrepareMps(l, launch, r);  // last: only the launch itself may fail after it
  return ready;
}

void Agent::AfterSpawn(const StatusOr<pid_t>& pid, const TaskLaunch& launch, const std::string& dir,
                       TaskRecord* r) {
  if (pid.ok()) {
    r->pid = *pid;
    for (uint32_t g : r->gpus) backend_->SetBusy(g, dir + "/gpu_util");
    std::string devices;
    for (const auto& [k, v] : launch.env)
      if (k == "CUDA_VISIBLE_DEVICES") devices = v;
    spdlog::info("agent {}: started task {} (pid {}) on GPUs [{}]", options_.node, r->task_id,
                 r->pid, devices);
  } else {
    ReleaseMps(*r);
    r->ended = true;
    r->failed_to_start = true;
    r->exit_code = 127;
    r->message = pid.status().message();
    r->ended_at = clock_->Now();
    mig_.Release(r->task_id);
    spdlog::warn("agent {}: task {} failed to start: {}", options_.node, r->task_id, r->message);
  }
}

void Agent::RecordLaunch(const TaskRecord& r) {
  std::optional<TaskExit> early;
  {
    MutexLock lock(tasks_.mu());
    tasks_.Put(r);
    early = tasks_.TakeEarlyExit(r.task_id);
  }
  SendStatus(r);
  // It ended before it was recorded (the reaper left its exit here): its end goes out now.
  if (early) {
    if (auto ended = RecordExit(*early)) AfterExit(*ended);
  }
}

StatusOr<std::optional<TaskCredentials>> Agent::RunAsOf(const pb::Launch& l) const {
  return ResolveRunAs(l.has_run_as() ? &l.run_as() : nullptr, options_.node);
}

Status Agent::PrepareCheckpointDir(const pb::Launch& l,
                                   const std::optional<TaskCredentials>& run_as) const {
  auto it = l.env().find("HANGAR_CHECKPOINT_DIR");
  if (it == l.env().end() || it->second.empty()) return Status::Ok();
  // A store that agents with scratch dirs drained is a link to its newest generation
  // (checkpoint_drain.h).
  const fs::path dir = ResolveStoreLink(it->second);
  // A relative path would name a folder inside the task's own working directory, which a
  // restarted attempt on another node never sees.
  if (dir.is_relative()) {
    return Status::FailedPrecondition(
        "HANGAR_CHECKPOINT_DIR '" + dir.string() +
        "' is a relative path; give the controller an absolute --checkpoint-root");
  }
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (!ec && created) fs::permissions(dir, fs::perms::owner_all, ec);
  if (ec || !fs::is_directory(dir)) {
    return Status::FailedPrecondition(
        "cannot create the job's checkpoint directory " + dir.string() + " (" +
        (ec ? ec.message() : "not a directory") + "); on node " + options_.node +
        " the controller's --checkpoint-root must be writable (shared storage on a "
        "real cluster)");
  }
  if (run_as) {
    Status mine = GiveTo(dir.string(), /*dir=*/true, *run_as);
    if (!mine.ok())
      return Status(mine.code(), "the job's checkpoint directory on node " + options_.node + ": " +
                                     mine.message());
  }
  return Status::Ok();
}

}  // namespace hangar::agent
