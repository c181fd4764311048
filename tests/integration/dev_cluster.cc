#include "dev_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/net.h"
#include "local_cluster.h"

namespace hangar::testing {

namespace fs = std::filesystem;

namespace {

// Runs the hangar binary with `args` in `cwd`, its output to `out`; returns its pid.
pid_t Spawn(const std::vector<std::string>& args, const std::string& out, const std::string& cwd) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> argv{const_cast<char*>(HANGAR_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(HANGAR_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

DevCluster::DevCluster(const std::string& prefix, const std::string& cluster_yaml) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = (fs::temp_directory_path() /
          (prefix + "." + std::to_string(getpid()) + "." + (test ? test->name() : "main")))
             .string();
  fs::remove_all(dir_);
  fs::create_directories(dir_ + "/work");
  std::ofstream(dir_ + "/cluster.yaml") << cluster_yaml;
  for (int i = 0; i < 50 && port_ == 0; ++i) {
    const int p = PickFreePort("127.0.0.1");
    if (p > 0 && p < 65534 && PortIsFree("127.0.0.1", p + 1)) port_ = p;
  }
}

DevCluster::~DevCluster() {
  Stop();
  if (!std::getenv("HANGAR_KEEP_TEST_DIRS")) fs::remove_all(dir_);
}

void DevCluster::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGINT);  // `hangar dev` stops its controller, agents and their tasks
  if (!LocalCluster::WaitFor([&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; },
                             20 * kSecond)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = 0;
}

bool DevCluster::Restart(const std::vector<std::string>& extra_args) {
  Stop();
  fs::rename(dir_ + "/dev.out", dir_ + "/dev.out.before-restart");
  return Start(extra_args);
}

bool DevCluster::Start(const std::vector<std::string>& extra_args) {
  if (port_ == 0) return false;
  std::vector<std::string> args = {"dev",
                                   "--dir",
                                   dir_ + "/dev",
                                   "--port",
                                   std::to_string(port_),
                                   "--cluster",
                                   dir_ + "/cluster.yaml"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = Spawn(args, dir_ + "/dev.out", dir_);
  return LocalCluster::WaitFor([&] { return Contains(log(), "is up"); }, 60 * kSecond);
}

DevCluster::Ran DevCluster::Hangar(std::vector<std::string> args) const {
  setenv("HANGAR_URL", ("http://127.0.0.1:" + std::to_string(port_)).c_str(), 1);
  if (args.empty() || args[0] != "slurm")
    args.insert(args.end(), {"--server", "127.0.0.1:" + std::to_string(port_)});
  const std::string path = dir_ + "/hangar.out";
  const pid_t pid = Spawn(args, path, work());
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(path)};
}

std::string DevCluster::JobState(uint64_t id) const {
  auto j = nlohmann::json::parse(Hangar({"job", std::to_string(id), "-o", "json"}).output, nullptr,
                                 false);
  return j.is_object() ? j.value("state", "") : "";
}

bool DevCluster::WaitForState(uint64_t id, const std::string& want, Duration timeout) const {
  return LocalCluster::WaitFor([&] { return JobState(id) == want; }, timeout);
}

uint64_t DevCluster::LastLineId(const std::string& output) {
  std::string last = output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  const size_t nl = last.rfind('\n');
  last = last.substr(nl == std::string::npos ? 0 : nl + 1);
  char* end = nullptr;
  const unsigned long long id = std::strtoull(last.c_str(), &end, 10);
  return end && *end == '\0' && !last.empty() ? id : 0;
}

std::string DevCluster::Work(const std::string& file) const {
  return ReadFile(work() + "/" + file);
}

std::string DevCluster::log() const { return ReadFile(dir_ + "/dev.out"); }

}  // namespace hangar::testing
