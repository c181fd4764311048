#include "agent/gpu/mps_check.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>

#include "agent/runner/process_spawn.h"

extern char** environ;

namespace hangar::agent {

namespace {

// The command with this process's environment plus `extra` (which wins); waits for it.
StatusOr<int> RunWith(const std::vector<std::string>& command,
                      const std::vector<std::pair<std::string, std::string>>& extra,
                      const std::string& output) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (auto eq = kv.find('='); eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) env[k] = v;
  SpawnRequest r;
  r.argv = command;
  for (const auto& [k, v] : env) r.env.push_back(k + "=" + v);
  r.stdout_path = output;
  r.stderr_path = output;
  HANGAR_ASSIGN_OR_RETURN(SpawnedProcess p, SpawnProcess(r));
  int status = 0;
  while (waitpid(p.pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::Internal("cannot wait for the command");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

Status RunMpsCheck(GpuBackend& backend, const MpsOptions& mps, const MpsCheckOptions& o,
                   std::ostream& out, int* exit_code) {
  if (!mps.enabled)
    return Status::FailedPrecondition("MPS cannot run here (see above); nothing to check");
  if (o.command.empty())
    return Status::InvalidArgument("give the command to run after --, e.g. -- nvidia-smi");
  HANGAR_ASSIGN_OR_RETURN(GpuSystemInfo info, backend.Discover());
  const pb::GpuInfo* gpu = nullptr;
  for (const auto& g : info.gpus) {
    if (g.index() == o.gpu) gpu = &g;
  }
  if (!gpu)
    return Status::NotFound("there is no GPU " + std::to_string(o.gpu) + " (" +
                            std::to_string(info.gpus.size()) + " found)");
  std::map<std::string, std::string> launch_env = {{"HANGAR_GPU_FRACTION", o.fraction}};
  if (o.gpu_memory_mib > 0) launch_env["HANGAR_GPU_MEMORY_MIB"] = std::to_string(o.gpu_memory_mib);
  HANGAR_ASSIGN_OR_RETURN(
      auto share, FractionalShare(launch_env, 1, false, static_cast<int64_t>(gpu->memory_mib())));
  if (!share)
    return Status::InvalidArgument("--fraction " + o.fraction +
                                   " is not a share of one GPU (write 0.5 or 500m)");
  MpsDaemons daemons(mps);
  HANGAR_ASSIGN_OR_RETURN(MpsDaemon d, daemons.Acquire("mps-check", o.gpu, gpu->uuid(), -1));
  out << "mps-check: control daemon for GPU " << o.gpu << " (" << gpu->uuid() << ", "
      << gpu->memory_mib() << " MiB) started, pid " << LiveDaemonPid(d.pipe_dir) << "\n";
  const auto env = MpsClientEnv(*share, d);
  for (const auto& [k, v] : env) out << "mps-check:   " << k << "=" << v << "\n";
  out.flush();
  const std::string output = mps.root + "/mps-check.out";
  StatusOr<int> rc = RunWith(o.command, env, output);
  daemons.Release("mps-check");
  std::ifstream printed(output);
  for (std::string line; std::getline(printed, line);) out << line << "\n";
  out << "mps-check: command "
      << (rc.ok() ? "exited " + std::to_string(*rc) : rc.status().message()) << "; control daemon "
      << (LiveDaemonPid(d.pipe_dir) ? "still running" : "stopped") << "\n";
  if (!rc.ok()) return rc.status();
  *exit_code = *rc;
  return Status::Ok();
}

}  // namespace hangar::agent
