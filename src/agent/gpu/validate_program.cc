#include "agent/gpu/validate_program.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "agent/runner/os_error.h"
#include "agent/runner/process_spawn.h"

extern char** environ;

namespace hangar::agent {
namespace fs = std::filesystem;
namespace {

constexpr char kProgram[] = "hangar-validate";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Why a run that exited non-zero failed, in one sentence.
std::string FailureText(const std::string& out, const std::string& err, int status) {
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) {
    return j["error"].get<std::string>();
  }
  std::string tail = err.size() > 400 ? err.substr(err.size() - 400) : err;
  while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) tail.pop_back();
  std::string how = WIFSIGNALED(status)
                        ? "was killed by signal " + std::to_string(WTERMSIG(status))
                        : "exited with status " + std::to_string(WEXITSTATUS(status));
  return std::string(kProgram) + " " + how + (tail.empty() ? "" : ": " + tail);
}

// Waits for `pid`, killing its process group on timeout or cancel. Returns the wait status.
StatusOr<int> WaitBounded(pid_t pid, Duration timeout, const std::atomic<bool>* cancel) {
  const int64_t deadline = MonotonicNanos() + timeout * 1'000'000;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR)
      return ErrnoStatus(errno, "cannot wait for " + std::string(kProgram));
    const bool cancelled = cancel && cancel->load();
    if (cancelled || MonotonicNanos() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (cancelled)
        return Status::Aborted(std::string(kProgram) + " was stopped: the agent is shutting down");
      return Status::Unavailable(std::string(kProgram) + " did not finish within " +
                                 FormatDuration(timeout) + " and was killed; a GPU may be hung");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

StatusOr<std::string> FindValidateProgram() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = self.parent_path() / kProgram;
    if (access(beside.c_str(), X_OK) == 0) return beside.string();
    // In a build tree hangar is build/src/hangar and the tool build/tools/validate/hangar-validate.
    const fs::path built = self.parent_path().parent_path() / "tools" / "validate" / kProgram;
    if (access(built.c_str(), X_OK) == 0) return built.string();
  }
  const char* path = std::getenv("PATH");
  auto found = ResolveProgram(kProgram, path ? path : kDefaultTaskPath);
  if (found.ok()) return found;
  return Status::NotFound(
      std::string(kProgram) +
      " is neither next to the hangar binary nor on PATH; build Hangar where "
      "CMake finds nvcc (scripts/gpu-check.sh does) and install it beside hangar");
}

StatusOr<std::string> RunValidateProgram(const ValidateRun& run, const std::atomic<bool>* cancel) {
  SpawnRequest req;
  req.argv = run.argv;
  for (char** e = environ; e && *e; ++e) {
    const std::string var = *e;
    const std::string name = var.substr(0, var.find('='));
    bool replaced = false;
    for (const auto& [k, v] : run.env) replaced = replaced || k == name;
    if (!replaced) req.env.push_back(var);
  }
  for (const auto& [k, v] : run.env) req.env.push_back(k + "=" + v);
  req.stdout_path = run.scratch_dir + "/validate.stdout";
  req.stderr_path = run.scratch_dir + "/validate.stderr";
  HANGAR_ASSIGN_OR_RETURN(SpawnedProcess p, SpawnProcess(req));
  HANGAR_ASSIGN_OR_RETURN(int status, WaitBounded(p.pid, run.timeout, cancel));
  std::string out = ReadFile(req.stdout_path);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
  return Status::Unavailable(FailureText(out, ReadFile(req.stderr_path), status));
}

}  // namespace hangar::agent
