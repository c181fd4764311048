// Enforced GPU fractions: CUDA MPS control daemons that the agent starts and stops,
// one per GPU and task user, and the environment that puts a fractional task under one.
//
// A daemon's folders are <root>/gpu<index>-uid<uid>/pipe (CUDA_MPS_PIPE_DIRECTORY) and .../log
// (CUDA_MPS_LOG_DIRECTORY); it is started as `<control> -d` with CUDA_VISIBLE_DEVICES set to its
// GPU's UUID when the first fractional task of that user lands on the GPU, and stopped with
// `echo quit | <control>` when the last one ends. One daemon per user, not per GPU alone: an MPS
// control daemon serves one user's server at a time and makes a second user's clients wait for
// the first user's to finish (docs/sharing.md). The control program is nvidia-cuda-mps-control
// on GPUs, or `hangar fake-mps-control` -- a real process with the same folder lifecycle (a
// `control` FIFO and nvidia-cuda-mps-control.pid in the pipe folder, control.log in the log
// folder) -- with the fake GPU backend.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::agent {

enum class MpsMode { kOff, kAuto, kOn };
// "off", "auto" or "on"; anything else is refused with what to write.
StatusOr<MpsMode> ParseMpsMode(std::string_view text);

inline constexpr char kMpsPidFile[] = "nvidia-cuda-mps-control.pid";
inline constexpr char kMpsControlProgram[] = "nvidia-cuda-mps-control";

struct MpsOptions {
  bool enabled = false;
  std::string root;                  // the daemons' folders (<state dir>/mps)
  std::vector<std::string> control;  // the control program and any leading arguments
  bool fake = false;                 // the stand-in: memory is enforced from the tasks' reports
  Duration timeout = 10 * kSecond;   // for a daemon to start, or to quit
};

// What --mps asks for on this node: `control_override` (--mps-control) when given, else
// nvidia-cuda-mps-control from `path` with NVML, or `hangar fake-mps-control` with the fake backend
// (fake GPUs' UUIDs mean nothing to the real daemon). `auto` without a control program is off,
// and *note says why; `on` without one is an error.
StatusOr<MpsOptions> ChooseMps(MpsMode mode, bool fake_backend, const std::string& hangar_binary,
                               const std::string& control_override, const std::string& path,
                               const std::string& state_dir, std::string* note);

// A fractional task's share of its one GPU.
struct MpsShare {
  int64_t milli = 0;       // of 1000
  int64_t memory_mib = 0;  // its pinned device memory limit
};

// The share of a launch from the environment the controller gave it: HANGAR_GPU_FRACTION
// ("0.5"), and HANGAR_GPU_MEMORY_MIB when the controller sends the granted memory (else the same
// fraction of the GPU's memory); at most the GPU's memory. nullopt for a task that is not
// fractional (no fraction, MIG, or not exactly one GPU).
StatusOr<std::optional<MpsShare>> FractionalShare(const std::map<std::string, std::string>& env,
                                                  size_t gpus, bool mig, int64_t gpu_memory_mib);
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of a share: milli / 10 rounded up, 1 to 100.
int ActiveThreadPercentage(int64_t milli);

struct MpsDaemon {
  std::string key;  // gpu<index>-uid<uid>
  uint32_t gpu = 0;
  std::string uuid;
  std::string pipe_dir, log_dir;
};

// The variables a client of `d` gets: the two folders, its limits, and CUDA_VISIBLE_DEVICES as
// the GPU's UUID (the server sees only that GPU, so an index would name the wrong device).
std::vector<std::pair<std::string, std::string>> MpsClientEnv(const MpsShare& share,
                                                              const MpsDaemon& d);

// Whether `pid` runs (a zombie does not).
bool ProcessAlive(pid_t pid);
// The control daemon's pid from the pipe folder's pid file, when that process is alive; else 0.
pid_t LiveDaemonPid(const std::string& pipe_dir);

// The daemons, reference-counted by task. Thread-safe.
class MpsDaemons {
 public:
  explicit MpsDaemons(MpsOptions options) : o_(std::move(options)) {}
  const MpsOptions& options() const { return o_; }
  // The daemon of (gpu, uid), started for this task if it is the first; a daemon already
  // running there (from before an agent restart) is taken over. `uid` < 0: the agent's own user.
  StatusOr<MpsDaemon> Acquire(const std::string& task_id, uint32_t gpu, const std::string& uuid,
                              int64_t uid) HANGAR_EXCLUDES(mu_);
  // The task is gone; its daemon quits with its last task.
  void Release(const std::string& task_id) HANGAR_EXCLUDES(mu_);
  // Quits every daemon no task holds, also those under root that no one holds any more (an agent
  // that crashed).
  void StopUnused() HANGAR_EXCLUDES(mu_);
  std::vector<std::string> Running() const HANGAR_EXCLUDES(mu_);  // keys of the daemons held now

 private:
  // Run with mu_ held, so that a daemon's start and its stop never overlap.
  Status Start(const MpsDaemon& d, int64_t uid) HANGAR_REQUIRES(mu_);
  void Stop(const MpsDaemon& d) HANGAR_REQUIRES(mu_);
  std::vector<std::string> Env(const MpsDaemon& d) const;

  const MpsOptions o_;
  mutable Mutex mu_;
  std::map<std::string, MpsDaemon> daemons_ HANGAR_GUARDED_BY(mu_);  // by key
  // Key -> tasks that hold it.
  std::map<std::string, std::set<std::string>> tasks_ HANGAR_GUARDED_BY(mu_);
};

// `hangar fake-mps-control [-d]`: with -d, the stand-in control daemon in the background (files
// as above; commands quit and set_default_active_thread_percentage, each logged to control.log);
// without, sends the commands on stdin to the running one. Returns the exit status.
int RunFakeMpsControl(bool daemon);

}  // namespace hangar::agent
