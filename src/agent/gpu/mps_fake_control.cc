// `hangar fake-mps-control`: what stands in for nvidia-cuda-mps-control on nodes with fake GPUs.
// A real background process with the real daemon's files -- a `control` FIFO and
// nvidia-cuda-mps-control.pid in CUDA_MPS_PIPE_DIRECTORY, control.log in CUDA_MPS_LOG_DIRECTORY --
// so that what starts and stops it can be watched; it serves no CUDA clients (there are none).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "agent/gpu/mps.h"

namespace hangar::agent {
namespace {

volatile sig_atomic_t g_term = 0;

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string PipeDir() { return EnvOr("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"); }
std::string LogDir() { return EnvOr("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"); }

void Log(const std::string& line) {
  std::ofstream out(LogDir() + "/control.log", std::ios::app);
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::gmtime(&now));
  out << "[" << when << "] " << line << "\n";
}

// One command line; false when it was quit.
bool Handle(const std::string& line, int* percentage) {
  if (line == "quit") {
    Log("CMD: quit");
    return false;
  }
  const std::string set = "set_default_active_thread_percentage ";
  if (line.rfind(set, 0) == 0) {
    const int p = std::atoi(line.c_str() + set.size());
    if (p >= 1 && p <= 100) {
      *percentage = p;
      Log("CMD: " + line);
    } else {
      Log("CMD: " + line + " (refused: a percentage is 1 to 100)");
    }
  } else if (line == "get_default_active_thread_percentage") {
    Log("CMD: " + line + " -> " + std::to_string(*percentage));
  } else if (!line.empty()) {
    Log("CMD: " + line + " (not known to the stand-in)");
  }
  return true;
}

// The daemon's loop, in the background child: until quit or SIGTERM.
void Serve(const std::string& control, const std::string& pid_file) {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_term = 1; };
  sigaction(SIGTERM, &sa, nullptr);  // no SA_RESTART: a blocked read returns
  sigaction(SIGINT, &sa, nullptr);
  Log("Control daemon started (hangar fake-mps-control, pid " + std::to_string(getpid()) +
      ", GPU " + EnvOr("CUDA_VISIBLE_DEVICES", "all") + ")");
  const int fd = open(control.c_str(), O_RDWR | O_CLOEXEC);  // RDWR: never sees EOF
  int percentage = 100;
  std::string pending;
  char buf[512];
  bool running = fd >= 0;
  while (running && !g_term) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t eol; running && (eol = pending.find('\n')) != std::string::npos;) {
      running = Handle(pending.substr(0, eol), &percentage);
      pending.erase(0, eol + 1);
    }
  }
  Log(g_term ? "Control daemon ended by a signal" : "Control daemon exiting");
  unlink(control.c_str());
  unlink(pid_file.c_str());
}

int StartDaemon() {
  const std::string pipe = PipeDir(), log = LogDir();
  std::error_code ec;
  std::filesystem::create_directories(pipe, ec);
  std::filesystem::create_directories(log, ec);
  const std::string control = pipe + "/control", pid_file = pipe + "/" + kMpsPidFile;
  if (pid_t pid = LiveDaemonPid(pipe)) {
    std::cerr << "An instance of this daemon is already running (pid " << pid << ") in " << pipe
              << "\n";
    return 1;
  }
  unlink(control.c_str());
  if (mkfifo(control.c_str(), 0600) != 0) {
    std::cerr << "cannot create " << control << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return 1;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child > 0) {  // as the real -d: returns once the daemon runs
    close(ready[1]);
    char c = 0;
    const bool ok = read(ready[0], &c, 1) == 1;
    return ok ? 0 : 1;
  }
  close(ready[0]);
  setsid();
  const int null = open("/dev/null", O_RDWR);
  dup2(null, 0), dup2(null, 1), dup2(null, 2);
  {
    std::ofstream out(pid_file + ".tmp");
    out << getpid() << "\n";
  }
  std::rename((pid_file + ".tmp").c_str(), pid_file.c_str());
  (void)!write(ready[1], "1", 1);
  close(ready[1]);
  Serve(control, pid_file);
  _exit(0);
}

// Client mode: stdin's commands to the running daemon; after quit, waits for it to be gone.
int SendCommands() {
  const std::string pipe = PipeDir();
  const int fd = open((pipe + "/control").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  const pid_t pid = LiveDaemonPid(pipe);
  if (fd < 0 || !pid) {
    std::cerr << "Cannot find MPS control daemon process in " << pipe << "\n";
    if (fd >= 0) close(fd);
    return 1;
  }
  bool quit = false;
  for (std::string line; std::getline(std::cin, line);) {
    line += "\n";
    if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      std::cerr << "cannot send '" << line.substr(0, line.size() - 1)
                << "': " << std::strerror(errno) << "\n";
      close(fd);
      return 1;
    }
    quit |= line == "quit\n";
  }
  close(fd);
  for (int i = 0; quit && i < 500 && ProcessAlive(pid); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 0;
}

}  // namespace

int RunFakeMpsControl(bool daemon) { return daemon ? StartDaemon() : SendCommands(); }

}  // namespace hangar::agent
