// Running tasks in OCI containers through podman's CLI (docs/containers.md). Always an
// argument list, never a shell. The agent gives podman its own storage (--root, --runroot,
// --tmpdir under the agent's state directory unless told otherwise) and a containers.conf and
// registries.conf it writes there: runc as the runtime, rlimits this host allows, the file
// events logger, and loopback registries pulled without TLS. Nothing under /etc is touched.
//
// A container task is a foreground `podman run --rm` that the TaskRunner starts like any task:
// its exit code is the container's, signals sent to it reach the container's main process
// (podman proxies them), and its output goes where the task's output goes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "common/time.h"

namespace hangar::agent {

struct PodmanOptions {
  std::string binary = "podman";
  std::string root;  // image and container storage; empty: <dir>/storage
  // empty: a short folder of its own (ShortRunDir), since podman refuses a runroot longer than
  // 50 characters and <dir> sits under the agent's state folder, as long as the checkout path.
  std::string runroot;
  std::string tmpdir;  // empty: beside the runroot
  std::string dir;     // where the config files (and default storage) live
  // How a task gets its GPUs: "cdi" (--device nvidia.com/gpu=<uuid>, from the spec
  // `nvidia-ctk cdi generate` writes) or "node:<path>" (the device node <path> appears as
  // /dev/nvidia<index> for each GPU: fake nodes in tests, e.g. node:/dev/null).
  std::string gpu_devices = "cdi";
  std::string registries_conf;   // a site's own (mirrors, auth); empty: Hangar writes one
  std::string network = "host";  // multi-node gangs reach each other on the node's addresses
};

// A folder of at most 42 characters for podman's runroot and tmpdir, one per `dir` (a digest of
// its path): under /run for root, else $XDG_RUNTIME_DIR, else /tmp. Made 0700 and checked to be
// this account's own (not a link, nobody else's), since /tmp is shared and the name predictable.
StatusOr<std::string> ShortRunDir(const std::string& dir);

struct ContainerMount {
  std::string host, path;
  bool read_only = true;
};

struct ContainerGpu {
  uint32_t index = 0;
  std::string uuid;
};

struct ContainerRun {
  std::string name;               // unique on the node
  std::string image;              // pinned reference
  std::vector<std::string> argv;  // empty: the image's entrypoint and command
  // Names passed with `-e NAME`: podman copies their values from its own environment, so no
  // value (a token, say) is on a command line.
  std::vector<std::string> env_names;
  std::vector<std::pair<std::string, std::string>> env_set;  // set with -e NAME=VALUE
  std::string workdir;                                       // in the container; empty: the image's
  std::vector<ContainerMount> mounts;
  std::vector<ContainerGpu> gpus;
  // The MIG devices (their "MIG-..." UUIDs) of a task on MIG instances. With CDI they replace the
  // whole GPUs: each is --device nvidia.com/gpu=<MIG uuid>, as nvidia-ctk's uuid names have it.
  // With node:<path> (fake GPUs) the GPUs' device nodes stand in for them.
  std::vector<std::string> mig_devices;
  std::vector<std::string> devices;  // more host devices (RDMA: /dev/infiniband/*)
  int64_t milli_cpu = 0, memory_mib = 0, shm_size_mib = 0;
  std::optional<std::pair<uid_t, gid_t>> user;  // nullopt: the image's user
  std::vector<std::pair<std::string, std::string>> labels;
};

struct LocalImage {
  std::string id;
  std::vector<std::string> digests;  // repo digests' sha256 parts, "sha256:..."
  std::vector<std::string> names;
  int64_t bytes = 0;
};

struct LocalContainer {
  std::string name;
  std::string state;  // "running", "exited", ...
  std::vector<std::pair<std::string, std::string>> labels;
};

// Why a pull failed, as far as podman's words tell.
enum class PullFailure { kNone, kNotFound, kUnreachable, kOther };

struct PullOutcome {
  PullFailure failure = PullFailure::kNone;
  std::string message;  // names the image and the registry
  Duration took = 0;
};

class Podman {
 public:
  // Writes the config files and checks that podman runs. The error says what to install.
  static StatusOr<Podman> Open(PodmanOptions options);

  // The environment podman itself needs (CONTAINERS_CONF, CONTAINERS_REGISTRIES_CONF).
  std::vector<std::pair<std::string, std::string>> Environment() const;
  // `podman <global flags> run ...` for the task; pure.
  std::vector<std::string> RunArgv(const ContainerRun& run) const;
  // `podman <global flags> exec -i [-t] [-e NAME=VALUE...] NAME argv...`: a program in a running
  // container, as the container's user (`hangar exec`); pure.
  std::vector<std::string> ExecArgv(
      const std::string& name, const std::vector<std::string>& argv, bool tty,
      const std::vector<std::pair<std::string, std::string>>& env) const;

  StatusOr<bool> ImageExists(const std::string& ref) const;
  PullOutcome Pull(const std::string& ref, Duration timeout) const;
  StatusOr<std::vector<LocalImage>> Images() const;
  Status RemoveImage(const std::string& id) const;
  // The node's pid of a running container's first process (a port forward enters its network).
  StatusOr<pid_t> ContainerPid(const std::string& name) const;
  // Containers carrying label key=value.
  StatusOr<std::vector<LocalContainer>> Containers(const std::string& label) const;
  // Removes the container, killing it if it still runs: at once, or after its stop signal and
  // up to `stop_timeout` to act on it (whole seconds).
  Status RemoveContainer(const std::string& name, Duration stop_timeout = 0) const;
  // The command line that removes the container at once, for a process that is not this one (the
  // fence keeper): `env CONTAINERS_CONF=... podman --root ... rm --force --time 0 --ignore NAME`.
  std::vector<std::string> RemoveCommand(const std::string& name) const;

  const PodmanOptions& options() const { return options_; }

 private:
  explicit Podman(PodmanOptions options) : options_(std::move(options)) {}
  std::vector<std::string> Global() const;
  StatusOr<CommandResult> Run(std::vector<std::string> args, Duration timeout) const;
  std::string containers_conf_, registries_conf_;
  PodmanOptions options_;
};

// The rlimits podman may set here: nofile from the hard limit, nproc from min(hard limit,
// pid_max) (../shared/reference/containers.md).
std::string ContainersConf(uint64_t nofile, uint64_t nproc, const std::string& init_path);

}  // namespace hangar::agent
