#include "controller/service/dev_load_balancer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/net.h"
#include "controller/service/lb_client.h"

namespace hangar::controller::service {
namespace {

namespace fs = std::filesystem;

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(std::string(path ? path : "") + ":/usr/sbin:/sbin");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (d.empty()) continue;
    const std::string p = d + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// `slots` free loopback ports in a row, or 0.
int FreeRun(int slots) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int first = PickFreePort("127.0.0.1");
    if (first <= 0 || first + slots > 65535) continue;
    bool free = true;
    for (int p = first; p < first + slots && free; ++p) free = PortIsFree("127.0.0.1", p);
    if (free) return first;
  }
  return 0;
}

// The runtime API's socket: in the dev folder, or (a folder too deep for a socket's 107 bytes)
// under /tmp, named after this process.
std::string AdminSocket(const std::string& dir) {
  const std::string in_dir = dir + "/lb/admin.sock";
  if (in_dir.size() < 100) return in_dir;
  return "/tmp/hangar-dev-lb-" + std::to_string(getpid()) + ".sock";
}

}  // namespace

StatusOr<DevLoadBalancer> StartDevLoadBalancer(const std::string& dir, int slots) {
  DevLoadBalancer lb;
  const std::string haproxy = FindOnPath("haproxy");
  if (haproxy.empty()) {
    lb.note =
        "services are off: haproxy is not installed (apt-get install haproxy, or "
        "scripts/install-deps.sh)";
    return lb;
  }
  std::error_code ec;
  fs::create_directories(dir + "/lb", ec);
  const std::string socket = AdminSocket(dir);
  fs::remove(socket, ec);
  lb.layout.admin = "unix:" + socket;
  lb.layout.host = "127.0.0.1";
  lb.layout.slots = slots;
  lb.layout.first_port = FreeRun(slots);
  if (!lb.layout.first_port)
    return Status::Unavailable("found no " + std::to_string(slots) +
                               " free loopback ports in a row for the services' endpoints");
  const std::string cfg = dir + "/lb/haproxy.cfg", log = dir + "/logs/haproxy.log";
  std::ofstream(cfg) << HaproxyConfig(lb.layout);
  lb.pid = fork();
  if (lb.pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // it ends with `hangar dev`, however that ends
    execl(haproxy.c_str(), "haproxy", "-db", "-f", cfg.c_str(), nullptr);
    std::fprintf(stderr, "cannot run %s: %s\n", haproxy.c_str(), std::strerror(errno));
    _exit(127);
  }
  const LbClient client(lb.layout.admin);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(lb.pid, nullptr, WNOHANG) == lb.pid) {
      return Status::FailedPrecondition("haproxy did not start; see " + log);
    }
    if (client.Run("show info").ok()) return lb;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(lb.pid, SIGKILL);
  waitpid(lb.pid, nullptr, 0);
  return Status::Unavailable("haproxy did not answer on " + socket + "; see " + log);
}

}  // namespace hangar::controller::service
