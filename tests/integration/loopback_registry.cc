#include "loopback_registry.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "common/net.h"
#include "common/sha256.h"
#include "common/subprocess.h"

namespace hangar::testing {
namespace fs = std::filesystem;

std::string WritePodmanConf(const std::string& dir) {
  rlimit nofile{}, nproc{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  getrlimit(RLIMIT_NPROC, &nproc);
  uint64_t pid_max = 32768;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  const uint64_t np =
      std::min<uint64_t>(nproc.rlim_max == RLIM_INFINITY ? pid_max : nproc.rlim_max, pid_max);
  const uint64_t nf = nofile.rlim_max == RLIM_INFINITY ? 1048576 : nofile.rlim_max;
  const std::string path = dir + "/containers.conf";
  std::ofstream(path) << "[containers]\ndefault_ulimits = [\"nofile=" << nf << ":" << nf
                      << "\", \"nproc=" << np << ":" << np
                      << "\"]\n[engine]\nruntime = \"runc\"\ncgroup_manager = "
                         "\"cgroupfs\"\nevents_logger = \"file\"\n";
  return path;
}

LoopbackRegistry::LoopbackRegistry(const std::string& dir) : dir_(dir + "/registry") {
  fs::create_directories(dir_ + "/storage");
  fs::create_directories(dir_ + "/build");
  WritePodmanConf(dir_);
  port_ = PickFreePort("127.0.0.1");
  conf_ = dir_ + "/config.yml";
  std::ofstream(conf_)
      << "version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem:\n    rootdirectory: " << dir_
      << "/storage\n  delete: {enabled: true}\nhttp:\n  addr: 127.0.0.1:" << port_ << "\n";
  Start();
}

LoopbackRegistry::~LoopbackRegistry() {
  Stop();
  CommandOptions o;
  o.env = {{"CONTAINERS_CONF", dir_ + "/containers.conf"}};
  (void)RunCommand({"podman", "--root", dir_ + "/build/storage", "--runroot", dir_ + "/build/run",
                    "--tmpdir", dir_ + "/build/tmp", "system", "reset", "--force"},
                   o);
  UnmountUnder(dir_);
}

void LoopbackRegistry::Start() {
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open((dir_ + "/registry.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    execlp("docker-registry", "docker-registry", "serve", conf_.c_str(), nullptr);
    _exit(127);
  }
  httplib::Client c("127.0.0.1", port_);
  for (int i = 0; i < 100; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // it did not bind (the port was taken)
      std::cerr << "docker-registry exited; see " << dir_ << "/registry.log\n";
      pid_ = 0;
      return;
    }
    if (auto r = c.Get("/v2/"); r && r->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void LoopbackRegistry::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

std::string LoopbackRegistry::Push(const std::string& repository, const std::string& tag,
                                   const std::vector<std::pair<std::string, std::string>>& files,
                                   int pad_mb) {
  const std::string root =
      dir_ + "/build/rootfs-" + repository.substr(repository.rfind('/') + 1) + "-" + tag;
  fs::remove_all(root);
  fs::create_directories(root + "/bin");
  fs::copy_file("/bin/busybox", root + "/bin/busybox");
  auto list = RunCommand({"/bin/busybox", "--list"});
  if (!list.ok()) return "";
  for (const auto& applet : std::vector<std::string>{
           "sh",     "echo", "cat", "ls",   "sleep", "env",   "test", "touch",
           "mkdir",  "grep", "wc",  "kill", "true",  "false", "id",   "trap",
           "printf", "stat", "dd",  "head", "tr",    "rm",    "date", "nproc"}) {
    std::error_code ec;
    fs::create_symlink("busybox", root + "/bin/" + applet, ec);
  }
  for (const auto& [path, content] : files) {
    fs::create_directories(fs::path(root + path).parent_path());
    std::ofstream(root + path) << content;
    fs::permissions(root + path,
                    fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  }
  if (pad_mb > 0) {
    std::ofstream pad(root + "/pad.bin", std::ios::binary);
    std::mt19937_64 rng(
        std::hash<std::string>()(repository + ":" + tag));  // distinct layers per image
    std::vector<uint64_t> block(1 << 17);                   // 1 MiB
    for (int i = 0; i < pad_mb; ++i) {
      for (auto& w : block) w = rng();
      pad.write(reinterpret_cast<const char*>(block.data()),
                static_cast<std::streamsize>(block.size() * 8));
    }
  }
  const std::string ref = host() + "/" + repository + ":" + tag;
  const std::string tar = root + ".tar";
  CommandOptions o;
  o.env = {{"CONTAINERS_CONF", dir_ + "/containers.conf"}};
  o.timeout = 5 * kMinute;
  // Its own tmpdir too: podman's default (/run/libpod) is shared with every other podman on the
  // machine, and a parallel test's `system reset` removes what this one is using.
  const std::vector<std::string> p = {
      "podman",   "--root",           dir_ + "/build/storage", "--runroot", dir_ + "/build/run",
      "--tmpdir", dir_ + "/build/tmp"};
  for (const auto& step :
       std::vector<std::vector<std::string>>{{"tar", "-C", root, "-cf", tar, "."},
                                             {"import", tar, ref},
                                             {"push", "--tls-verify=false", ref}}) {
    std::vector<std::string> argv = step.front() == "tar" ? step : p;
    if (step.front() != "tar") argv.insert(argv.end(), step.begin(), step.end());
    auto r = RunCommand(argv, o);
    if (!r.ok() || !r->ok()) {
      std::cerr << "building " << ref << ": " << argv[0] << " " << step.front() << ": "
                << (r.ok() ? r->Describe() : r.status().message()) << "\n";
      return "";
    }
  }
  fs::remove_all(root);
  fs::remove(tar);
  return ref;
}

void UnmountUnder(const std::string& root) {
  std::ifstream in("/proc/self/mounts");
  std::vector<std::string> points;
  for (std::string dev, point, rest; in >> dev >> point && std::getline(in, rest);) {
    if (point.rfind(root, 0) == 0) points.push_back(point);
  }
  std::sort(points.rbegin(), points.rend());  // deepest first
  for (const auto& p : points) umount2(p.c_str(), MNT_DETACH);
}

// The short folder an agent keeps podman's runroot and tmpdir in for its podman folder `d`, as
// agent::ShortRunDir names it (/run as root, else /tmp; a test runs as root): the containers of
// that store are known only under it.
static std::string AgentRunDir(const std::string& d) {
  const std::string base = geteuid() == 0 && ::access("/run", W_OK) == 0 ? "/run" : "/tmp";
  return base + "/hangar-podman-" +
         Sha256Hex(fs::absolute(d).lexically_normal().string()).substr(0, 12);
}

void RemoveContainersUnder(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string d = (e.path() / "podman").string();
    // Only a store that ever held an image or a container (most agents of tests never do); the
    // agent made its run folder all the same.
    if (!fs::exists(d + "/storage/overlay-images", ec) &&
        !fs::exists(d + "/storage/overlay-containers", ec)) {
      fs::remove_all(AgentRunDir(d), ec);
      continue;
    }
    CommandOptions o;
    o.env = {{"CONTAINERS_CONF", d + "/containers.conf"}};
    // podman --runroot under the state folder knew none of the agent's containers: every
    // container test left its running containers behind.
    const std::string run = AgentRunDir(d);
    const std::vector<std::string> p = {"podman",     "--root",   d + "/storage", "--runroot",
                                        run + "/run", "--tmpdir", run + "/tmp"};
    for (const auto& tail : std::vector<std::vector<std::string>>{
             {"rm", "--all", "--force", "--time", "0"}, {"system", "reset", "--force"}}) {
      std::vector<std::string> argv = p;
      argv.insert(argv.end(), tail.begin(), tail.end());
      (void)RunCommand(argv, o);
    }
    UnmountUnder(d);  // podman leaves its storage's own overlay mount behind
    UnmountUnder(run);
    fs::remove_all(run, ec);
  }
}

}  // namespace hangar::testing
