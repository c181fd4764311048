#include "agent/container/podman.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "job/container_spec.h"

namespace hangar::agent {
namespace fs = std::filesystem;
namespace {

uint64_t HardLimit(int resource, uint64_t fallback) {
  rlimit r{};
  if (getrlimit(resource, &r) != 0 || r.rlim_max == RLIM_INFINITY) return fallback;
  return r.rlim_max;
}

uint64_t PidMax() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  uint64_t v = 0;
  return (in >> v) ? v : 32768;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::Unavailable("cannot write " + path);
  return Status::Ok();
}

}  // namespace

std::string ContainersConf(uint64_t nofile, uint64_t nproc, const std::string& init_path) {
  std::string s =
      "# Written by the Hangar agent; podman reads it through CONTAINERS_CONF.\n[containers]\n";
  s += "default_ulimits = [\"nofile=" + std::to_string(nofile) + ":" + std::to_string(nofile) +
       "\", \"nproc=" + std::to_string(nproc) + ":" + std::to_string(nproc) + "\"]\n";
  if (!init_path.empty()) s += "init_path = \"" + init_path + "\"\n";
  s += "[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n";
  return s;
}

StatusOr<std::string> ShortRunDir(const std::string& dir) {
  std::string base = "/tmp";
  if (geteuid() == 0 && ::access("/run", W_OK) == 0) {
    base = "/run";
  } else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR");
             xdg != nullptr && *xdg == '/' && std::strlen(xdg) <= 20) {
    base = xdg;
  }
  const std::string path = base + "/hangar-podman-" +
                           Sha256Hex(fs::absolute(dir).lexically_normal().string()).substr(0, 12);
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable("cannot create podman's run folder " + path + ": " +
                               std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(
        "podman's run folder " + path +
        " is not a private folder of this account (a link, another owner, or open to "
        "others); remove it and start the agent again");
  }
  return path;
}

StatusOr<Podman> Podman::Open(PodmanOptions o) {
  if (o.dir.empty())
    return Status::InvalidArgument("podman needs a directory for its configuration");
  if (o.root.empty()) o.root = o.dir + "/storage";
  if (o.runroot.empty() || o.tmpdir.empty()) {
    HANGAR_ASSIGN_OR_RETURN(const std::string run, ShortRunDir(o.dir));
    if (o.runroot.empty()) o.runroot = run + "/run";
    if (o.tmpdir.empty()) o.tmpdir = run + "/tmp";
  }
  if (o.gpu_devices != "cdi" && o.gpu_devices.rfind("node:", 0) != 0) {
    return Status::InvalidArgument(
        "--container-gpus '" + o.gpu_devices +
        "': use cdi (production) or node:<device path> (fake GPUs in tests)");
  }
  std::error_code ec;
  for (const auto& d : {o.dir, o.root, o.runroot, o.tmpdir}) fs::create_directories(d, ec);
  if (ec)
    return Status::Unavailable("cannot create podman's directories under " + o.dir + ": " +
                               ec.message());
  Podman p(o);
  p.containers_conf_ = o.dir + "/containers.conf";
  const std::string init = fs::exists("/usr/bin/catatonit") ? "/usr/bin/catatonit" : "";
  HANGAR_RETURN_IF_ERROR(
      WriteFile(p.containers_conf_,
                ContainersConf(HardLimit(RLIMIT_NOFILE, 1048576),
                               std::min(HardLimit(RLIMIT_NPROC, 4194304), PidMax()), init)));
  p.registries_conf_ = o.registries_conf;
  if (p.registries_conf_.empty()) {
    p.registries_conf_ = o.dir + "/registries.conf";
    std::string reg =
        "# Written by the Hangar agent. Loopback registries are pulled without TLS.\n";
    for (const char* host : {"127.0.0.1", "localhost"}) {
      reg += "[[registry]]\nlocation = \"" + std::string(host) + "\"\ninsecure = true\n";
    }
    HANGAR_RETURN_IF_ERROR(WriteFile(p.registries_conf_, reg));
  }
  auto v = RunCommand({o.binary, "--version"});
  if (!v.ok() || !v->ok()) {
    return Status::FailedPrecondition(
        "podman does not run (" + (v.ok() ? v->Describe() : v.status().message()) +
        "); install it: apt-get install podman runc (scripts/install-deps.sh)");
  }
  return p;
}

std::vector<std::pair<std::string, std::string>> Podman::Environment() const {
  return {{"CONTAINERS_CONF", containers_conf_}, {"CONTAINERS_REGISTRIES_CONF", registries_conf_}};
}

std::vector<std::string> Podman::Global() const {
  return {options_.binary,  "--root",   options_.root,  "--runroot",
          options_.runroot, "--tmpdir", options_.tmpdir};
}

std::vector<std::string> Podman::ExecArgv(
    const std::string& name, const std::vector<std::string>& argv, bool tty,
    const std::vector<std::pair<std::string, std::string>>& env) const {
  std::vector<std::string> a = Global();
  a.insert(a.end(), {"exec", "--interactive"});
  if (tty) a.push_back("--tty");
  for (const auto& [k, v] : env) a.insert(a.end(), {"-e", k + "=" + v});
  a.push_back(name);
  a.insert(a.end(), argv.begin(), argv.end());
  return a;
}

std::vector<std::string> Podman::RunArgv(const ContainerRun& r) const {
  std::vector<std::string> a = Global();
  a.insert(a.end(), {"run", "--rm", "--name", r.name, "--pull=never", "--network", options_.network,
                     "--log-driver", "none", "--sig-proxy=true"});
  if (fs::exists("/usr/bin/catatonit")) a.push_back("--init");  // signals reach the main process
  for (const auto& [k, v] : r.labels) a.insert(a.end(), {"--label", k + "=" + v});
  for (const auto& n : r.env_names) a.insert(a.end(), {"-e", n});
  for (const auto& [k, v] : r.env_set) a.insert(a.end(), {"-e", k + "=" + v});
  if (!r.workdir.empty()) a.insert(a.end(), {"--workdir", r.workdir});
  for (const auto& m : r.mounts) {
    a.insert(a.end(), {"-v", m.host + ":" + m.path + (m.read_only ? ":ro" : ":rw")});
  }
  if (options_.gpu_devices == "cdi") {
    for (const auto& m : r.mig_devices) a.insert(a.end(), {"--device", "nvidia.com/gpu=" + m});
  }
  for (const auto& g : r.gpus) {
    if (options_.gpu_devices == "cdi" && !r.mig_devices.empty())
      break;  // the instances, not the GPUs
    if (options_.gpu_devices == "cdi") {
      a.insert(a.end(), {"--device", "nvidia.com/gpu=" + g.uuid});
    } else {
      a.insert(a.end(), {"--device", options_.gpu_devices.substr(5) + ":/dev/nvidia" +
                                         std::to_string(g.index)});
    }
  }
  for (const auto& d : r.devices) a.insert(a.end(), {"--device", d});
  if (!r.devices.empty()) a.insert(a.end(), {"--cap-add", "IPC_LOCK"});
  if (r.milli_cpu > 0) {
    char cpus[32];
    std::snprintf(cpus, sizeof cpus, "%.3f", static_cast<double>(r.milli_cpu) / 1000.0);
    a.insert(a.end(), {"--cpus", cpus});
  }
  if (r.memory_mib > 0) a.insert(a.end(), {"--memory", std::to_string(r.memory_mib) + "m"});
  if (r.shm_size_mib > 0) a.insert(a.end(), {"--shm-size", std::to_string(r.shm_size_mib) + "m"});
  if (r.user) {
    // The task's user, who gains nothing by a setuid program of the image (a user's image run by
    // a rootful podman on the node's network must not make it root).
    a.insert(a.end(),
             {"--user", std::to_string(r.user->first) + ":" + std::to_string(r.user->second),
              "--security-opt", "no-new-privileges"});
  }
  a.push_back(r.image);
  a.insert(a.end(), r.argv.begin(), r.argv.end());
  return a;
}

StatusOr<CommandResult> Podman::Run(std::vector<std::string> args, Duration timeout) const {
  std::vector<std::string> argv = Global();
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions o;
  o.env = Environment();
  o.timeout = timeout;
  return RunCommand(argv, o);
}

StatusOr<bool> Podman::ImageExists(const std::string& ref) const {
  HANGAR_ASSIGN_OR_RETURN(CommandResult r, Run({"image", "exists", ref}, 30 * kSecond));
  if (r.exit_code == 0) return true;
  if (r.exit_code == 1) return false;
  return Status::Unavailable("podman image exists " + ref + ": " + r.Describe());
}

PullOutcome Podman::Pull(const std::string& ref, Duration timeout) const {
  PullOutcome out;
  const Time start = SystemClock::Default()->Now();
  auto r = Run({"pull", "--quiet", ref}, timeout);
  out.took = SystemClock::Default()->Now() - start;
  if (r.ok() && r->ok()) return out;
  const std::string why = r.ok() ? r->Describe() : r.status().message();
  const job::RegistryError e =
      r.ok() ? job::ClassifyRegistryError(r->err) : job::RegistryError::kOther;
  out.failure = e == job::RegistryError::kNotFound      ? PullFailure::kNotFound
                : e == job::RegistryError::kUnreachable ? PullFailure::kUnreachable
                                                        : PullFailure::kOther;
  const std::string registry = job::RegistryOf(ref);
  switch (out.failure) {
    case PullFailure::kNotFound:
      out.message = "image " + ref + " does not exist in registry " + registry + " (" + why + ")";
      break;
    case PullFailure::kUnreachable:
      out.message = "registry unreachable: " + registry + " did not answer a pull of " + ref +
                    " (" + why + ")";
      break;
    default:
      out.message = "pulling image " + ref + " from " + registry + " failed: " + why;
      break;
  }
  return out;
}

StatusOr<std::vector<LocalImage>> Podman::Images() const {
  HANGAR_ASSIGN_OR_RETURN(CommandResult r, Run({"images", "--format", "json"}, 30 * kSecond));
  if (!r.ok()) return Status::Unavailable("podman images: " + r.Describe());
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_array())
    return Status::Internal("podman images printed something that is not a JSON list");
  std::vector<LocalImage> out;
  for (const auto& e : j) {
    LocalImage i;
    i.id = e.value("Id", "");
    i.bytes = e.value("Size", int64_t{0});
    for (const auto& n : e.value("Names", nlohmann::json::array()))
      i.names.push_back(n.get<std::string>());
    for (const auto& d : e.value("RepoDigests", nlohmann::json::array())) {
      const std::string s = d.get<std::string>();
      const size_t at = s.find('@');
      if (at != std::string::npos) i.digests.push_back(s.substr(at + 1));
    }
    if (const std::string top = e.value("Digest", "");
        !top.empty() && std::find(i.digests.begin(), i.digests.end(), top) == i.digests.end()) {
      i.digests.push_back(top);
    }
    out.push_back(std::move(i));
  }
  return out;
}

Status Podman::RemoveImage(const std::string& id) const {
  HANGAR_ASSIGN_OR_RETURN(CommandResult r, Run({"rmi", id}, 60 * kSecond));
  if (!r.ok()) return Status::Unavailable("podman rmi " + id + ": " + r.Describe());
  return Status::Ok();
}

StatusOr<pid_t> Podman::ContainerPid(const std::string& name) const {
  HANGAR_ASSIGN_OR_RETURN(CommandResult r,
                          Run({"inspect", "--format", "{{.State.Pid}}", name}, 30 * kSecond));
  const long pid = r.ok() ? std::strtol(r.out.c_str(), nullptr, 10) : 0;
  if (pid <= 0)
    return Status::Unavailable("container " + name + " is not running (" + r.Describe() + ")");
  return static_cast<pid_t>(pid);
}

StatusOr<std::vector<LocalContainer>> Podman::Containers(const std::string& label) const {
  HANGAR_ASSIGN_OR_RETURN(
      CommandResult r,
      Run({"ps", "-a", "--filter", "label=" + label, "--format", "json"}, 30 * kSecond));
  if (!r.ok()) return Status::Unavailable("podman ps: " + r.Describe());
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_array()) return Status::Internal("podman ps printed something that is not a JSON list");
  std::vector<LocalContainer> out;
  for (const auto& e : j) {
    LocalContainer c;
    const auto names = e.value("Names", nlohmann::json::array());
    if (!names.empty()) c.name = names[0].get<std::string>();
    c.state = e.value("State", "");
    const nlohmann::json labels = e.value("Labels", nlohmann::json::object());
    for (const auto& [k, v] : labels.items()) {
      if (v.is_string()) c.labels.emplace_back(k, v.get<std::string>());
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> Podman::RemoveCommand(const std::string& name) const {
  std::vector<std::string> argv = {"env"};
  for (const auto& [k, v] : Environment()) argv.push_back(k + "=" + v);
  for (std::string& a : Global()) argv.push_back(std::move(a));
  argv.insert(argv.end(), {"rm", "--force", "--time", "0", "--ignore", name});
  return argv;
}

Status Podman::RemoveContainer(const std::string& name, Duration stop_timeout) const {
  const std::string seconds = std::to_string(std::max<Duration>(0, stop_timeout) / kSecond);
  HANGAR_ASSIGN_OR_RETURN(
      CommandResult r,
      Run({"rm", "--force", "--time", seconds, "--ignore", name}, 60 * kSecond + stop_timeout));
  if (!r.ok()) return Status::Unavailable("podman rm " + name + ": " + r.Describe());
  return Status::Ok();
}

}  // namespace hangar::agent
