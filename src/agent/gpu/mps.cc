#include "agent/gpu/mps.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "agent/runner/process_spawn.h"
#include "common/units.h"

namespace hangar::agent {

namespace fs = std::filesystem;

StatusOr<MpsMode> ParseMpsMode(std::string_view text) {
  if (text == "off") return MpsMode::kOff;
  if (text == "auto") return MpsMode::kAuto;
  if (text == "on") return MpsMode::kOn;
  return Status::InvalidArgument(
      "--mps '" + std::string(text) +
      "': use auto (MPS for fractional tasks where it can run), on (required) or off");
}

StatusOr<MpsOptions> ChooseMps(MpsMode mode, bool fake_backend, const std::string& hangar_binary,
                               const std::string& control_override, const std::string& path,
                               const std::string& state_dir, std::string* note) {
  MpsOptions o;
  o.root = state_dir + "/mps";
  if (mode == MpsMode::kOff) {
    *note = "MPS off (--mps off): fractional tasks share their GPU unenforced";
    return o;
  }
  if (!control_override.empty()) {
    auto found = ResolveProgram(control_override, path);
    if (!found.ok()) return Status::NotFound("--mps-control: " + found.status().message());
    o.control = {*found};
  } else if (fake_backend) {
    if (hangar_binary.empty())
      return Status::FailedPrecondition("the MPS stand-in needs the hangar binary's path");
    o.control = {hangar_binary, "fake-mps-control"};
    o.fake = true;
  } else {
    auto found = ResolveProgram(kMpsControlProgram, path);
    if (!found.ok()) {
      const std::string why =
          std::string(kMpsControlProgram) + " is not installed (" + found.status().message() + ")";
      if (mode == MpsMode::kOn) {
        return Status::NotFound("--mps on: " + why +
                                "; install the NVIDIA driver's compute utilities, or run with "
                                "--mps auto or off");
      }
      *note = "MPS off: " + why + "; fractional tasks share their GPU unenforced";
      return o;
    }
    o.control = {*found};
  }
  o.enabled = true;
  *note = "MPS on for fractional tasks: " + o.control[0] +
          (o.fake ? " fake-mps-control (the fake GPUs' stand-in)" : "");
  return o;
}

StatusOr<std::optional<MpsShare>> FractionalShare(const std::map<std::string, std::string>& env,
                                                  size_t gpus, bool mig, int64_t gpu_memory_mib) {
  auto fraction = env.find("HANGAR_GPU_FRACTION");
  if (fraction == env.end() || mig || gpus != 1) return std::optional<MpsShare>();
  auto milli = ParseMilliGpu(fraction->second);
  if (!milli.ok())
    return Status::InvalidArgument("HANGAR_GPU_FRACTION: " + milli.status().message());
  if (*milli <= 0 || *milli >= 1000)
    return std::optional<MpsShare>();  // a whole GPU: nothing to share
  MpsShare s;
  s.milli = *milli;
  s.memory_mib = gpu_memory_mib * s.milli / 1000;
  if (auto mem = env.find("HANGAR_GPU_MEMORY_MIB"); mem != env.end()) {
    char* end = nullptr;
    const long long v = std::strtoll(mem->second.c_str(), &end, 10);
    if (mem->second.empty() || *end != '\0' || v <= 0) {
      return Status::InvalidArgument("HANGAR_GPU_MEMORY_MIB '" + mem->second +
                                     "' is not a positive number of MiB");
    }
    s.memory_mib = v;
  }
  if (gpu_memory_mib > 0) s.memory_mib = std::min(s.memory_mib, gpu_memory_mib);
  if (s.memory_mib <= 0) {
    return Status::FailedPrecondition(
        "the GPU's memory is unknown, so a share of it cannot be enforced");
  }
  return std::optional<MpsShare>(s);
}

int ActiveThreadPercentage(int64_t milli) {
  return static_cast<int>(std::clamp<int64_t>((milli + 9) / 10, 1, 100));
}

std::vector<std::pair<std::string, std::string>> MpsClientEnv(const MpsShare& share,
                                                              const MpsDaemon& d) {
  return {
      {"CUDA_MPS_PIPE_DIRECTORY", d.pipe_dir},
      {"CUDA_MPS_LOG_DIRECTORY", d.log_dir},
      // Device 0: the only one the daemon's server shows.
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + std::to_string(share.memory_mib) + "M"},
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(ActiveThreadPercentage(share.milli))},
      {"CUDA_VISIBLE_DEVICES", d.uuid}};
}

bool ProcessAlive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' &&
         stat[close + 2] != 'X';
}

pid_t LiveDaemonPid(const std::string& pipe_dir) {
  std::ifstream in(pipe_dir + "/" + kMpsPidFile);
  long pid = 0;
  if (!(in >> pid) || pid <= 1) return 0;
  return ProcessAlive(static_cast<pid_t>(pid)) ? static_cast<pid_t>(pid) : 0;
}

namespace {

// Runs `argv` with `env`, its output appended to nothing (the daemon logs to its folder); waits
// for it at most `timeout`. Its exit status, or why it did not finish.
StatusOr<int> RunAndWait(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const std::string& output, Duration timeout) {
  SpawnRequest r;
  r.argv = argv;
  r.env = env;
  r.stdout_path = output;
  r.stderr_path = output;
  HANGAR_ASSIGN_OR_RETURN(SpawnedProcess p, SpawnProcess(r));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(p.pid, &status, WNOHANG);
    if (done == p.pid) break;
    if (done < 0 && errno != EINTR)
      return Status::Internal(std::string("waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
      return Status::Unavailable(argv[0] + " did not finish within " +
                                 std::to_string(timeout / 1000) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool WaitUntil(const std::function<bool()>& pred, Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
  return all.size() > 300 ? all.substr(all.size() - 300) : all;
}

}  // namespace

std::vector<std::string> MpsDaemons::Env(const MpsDaemon& d) const {
  const char* path = std::getenv("PATH");
  return {"CUDA_VISIBLE_DEVICES=" + d.uuid, "CUDA_MPS_PIPE_DIRECTORY=" + d.pipe_dir,
          "CUDA_MPS_LOG_DIRECTORY=" + d.log_dir,
          std::string("PATH=") + (path ? path : kDefaultTaskPath)};
}

StatusOr<MpsDaemon> MpsDaemons::Acquire(const std::string& task_id, uint32_t gpu,
                                        const std::string& uuid, int64_t uid) {
  if (!o_.enabled) return Status::FailedPrecondition("MPS is off on this node");
  const int64_t who = uid >= 0 ? uid : static_cast<int64_t>(geteuid());
  MpsDaemon d;
  d.key = "gpu" + std::to_string(gpu) + "-uid" + std::to_string(who);
  d.gpu = gpu;
  d.uuid = uuid;
  d.pipe_dir = o_.root + "/" + d.key + "/pipe";
  d.log_dir = o_.root + "/" + d.key + "/log";
  MutexLock l(mu_);
  auto& holders = tasks_[d.key];
  if (holders.empty()) {
    Status s = Start(d, who);
    if (!s.ok()) {
      tasks_.erase(d.key);
      return s;
    }
    daemons_[d.key] = d;
  }
  holders.insert(task_id);
  return d;
}

Status MpsDaemons::Start(const MpsDaemon& d, int64_t uid) {
  std::error_code ec;
  fs::create_directories(d.pipe_dir, ec);
  if (!ec) fs::create_directories(d.log_dir, ec);
  if (ec)
    return Status::FailedPrecondition("cannot create the MPS folders under " + o_.root + ": " +
                                      ec.message());
  // The pipes are the task user's to reach: their folder is theirs (the daemon, as root, reaches
  // it).
  chmod(d.pipe_dir.c_str(), 0700);
  if (geteuid() == 0 && uid != 0 &&
      chown(d.pipe_dir.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(-1)) != 0) {
    return Status::FailedPrecondition("cannot give " + d.pipe_dir + " to uid " +
                                      std::to_string(uid) + ": " + std::strerror(errno));
  }
  if (pid_t pid = LiveDaemonPid(d.pipe_dir)) {
    spdlog::info("mps: took over the control daemon of {} (pid {}) from an earlier run", d.key,
                 pid);
    return Status::Ok();
  }
  std::vector<std::string> argv = o_.control;
  argv.push_back("-d");
  const std::string out = d.log_dir + "/start.out";
  HANGAR_ASSIGN_OR_RETURN(int rc, RunAndWait(argv, Env(d), out, o_.timeout));
  if (rc != 0 || !WaitUntil([&] { return LiveDaemonPid(d.pipe_dir) != 0; }, o_.timeout)) {
    return Status::Unavailable("the MPS control daemon for GPU " + std::to_string(d.gpu) +
                               " did not start (" + argv[0] + " -d exited " + std::to_string(rc) +
                               ": " + Tail(out) + "); see " + d.log_dir +
                               "/control.log, or run the agent with --mps off");
  }
  spdlog::info("mps: started the control daemon of {} (pid {}) on {}", d.key,
               LiveDaemonPid(d.pipe_dir), d.uuid);
  return Status::Ok();
}

void MpsDaemons::Stop(const MpsDaemon& d) {
  const pid_t pid = LiveDaemonPid(d.pipe_dir);
  if (!pid) return;
  std::vector<std::string> argv = {"/bin/sh", "-c", "echo quit | exec \"$@\"", "sh"};
  argv.insert(argv.end(), o_.control.begin(), o_.control.end());
  auto rc = RunAndWait(argv, Env(d), d.log_dir + "/quit.out", o_.timeout);
  if (WaitUntil([&] { return !ProcessAlive(pid); }, o_.timeout)) {
    spdlog::info("mps: stopped the control daemon of {} (pid {})", d.key, pid);
    return;
  }
  // It did not obey quit (or quit could not be sent): end it, as the agent started it.
  spdlog::warn("mps: the control daemon of {} (pid {}) did not quit ({}); sending SIGTERM", d.key,
               pid, rc.ok() ? "quit exited " + std::to_string(*rc) : rc.status().message());
  kill(pid, SIGTERM);
  if (!WaitUntil([&] { return !ProcessAlive(pid); }, 2 * kSecond)) kill(pid, SIGKILL);
}

void MpsDaemons::Release(const std::string& task_id) {
  MutexLock l(mu_);
  for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
    if (!it->second.erase(task_id) || !it->second.empty()) continue;
    Stop(daemons_[it->first]);
    daemons_.erase(it->first);
    tasks_.erase(it);
    return;
  }
}

void MpsDaemons::StopUnused() {
  MutexLock l(mu_);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o_.root, ec)) {
    const std::string key = e.path().filename().string();
    if (tasks_.count(key)) continue;
    MpsDaemon d;
    d.key = key;
    d.pipe_dir = (e.path() / "pipe").string();
    d.log_dir = (e.path() / "log").string();
    Stop(d);
  }
}

std::vector<std::string> MpsDaemons::Running() const {
  MutexLock l(mu_);
  std::vector<std::string> out;
  for (const auto& [key, holders] : tasks_) out.push_back(key);
  return out;
}

}  // namespace hangar::agent
