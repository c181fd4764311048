// agent_overhead: how much CPU a node agent costs while it watches the hardware. Runs a real
// `hangar agent` process reporting 8 GPUs (the fake backend, or NVML through the test double of
// libnvidia-ml.so.1) and 8 InfiniBand ports (a fake sysfs tree) once a second to a small
// in-process controller, for --seconds, and prints the agent's CPU time as a percentage of one
// core, from /proc/<pid>/stat (utime + stime).
//
//   agent_overhead [--seconds 20] [--gpus 8] [--backend fake|nvml|both]
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "proto/agent.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
namespace pb = hangar::agent::v1;

// Registers the agent with a 1 s heartbeat and counts what it reports.
class Controller final : public pb::AgentChannel::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<pb::ControllerMessage, pb::AgentMessage>* stream) override {
    pb::AgentMessage m;
    while (stream->Read(&m)) {
      if (m.has_register_()) {
        pb::ControllerMessage r;
        r.mutable_registered()->set_heartbeat_interval_ms(1000);
        stream->Write(r);
        registered = true;
      } else if (m.has_heartbeat()) {
        ++heartbeats;
        gpus = m.heartbeat().gpus_size();
        ports = m.heartbeat().ib_ports_size();
      }
    }
    return grpc::Status::OK;
  }
  std::atomic<bool> registered{false};
  std::atomic<int> heartbeats{0}, gpus{0}, ports{0};
};

// A ConnectX-7-like device: one port, the usual counters/ and hw_counters/ files.
void AddIbDevice(const fs::path& root, int i) {
  const std::string dev = "mlx5_" + std::to_string(i);
  const fs::path pci = root / "devices" / ("0000:" + std::to_string(10 + i) + ":00.0");
  fs::create_directories(pci);
  std::ofstream(pci / "numa_node") << i / 4 << "\n";
  const fs::path dir = root / "infiniband" / dev;
  fs::create_directories(dir);
  fs::create_directory_symlink(pci, dir / "device");
  const fs::path port = dir / "ports/1";
  fs::create_directories(port / "counters");
  fs::create_directories(port / "hw_counters");
  std::ofstream(port / "state") << "4: ACTIVE\n";
  std::ofstream(port / "phys_state") << "5: LinkUp\n";
  std::ofstream(port / "rate") << "400 Gb/sec (4X NDR)\n";
  for (const char* c : {"symbol_error",
                        "link_error_recovery",
                        "link_downed",
                        "port_rcv_errors",
                        "port_rcv_remote_physical_errors",
                        "port_rcv_switch_relay_errors",
                        "port_xmit_discards",
                        "port_xmit_constraint_errors",
                        "port_rcv_constraint_errors",
                        "local_link_integrity_errors",
                        "excessive_buffer_overrun_errors",
                        "VL15_dropped",
                        "port_xmit_data",
                        "port_rcv_data",
                        "port_xmit_packets",
                        "port_rcv_packets",
                        "port_xmit_wait",
                        "unicast_xmit_packets",
                        "unicast_rcv_packets",
                        "multicast_xmit_packets",
                        "multicast_rcv_packets"}) {
    std::ofstream(port / "counters" / c) << 12345 << "\n";
  }
  for (const char* c :
       {"rnr_nak_retry_err", "local_ack_timeout_err", "out_of_buffer", "out_of_sequence",
        "packet_seq_err", "implied_nak_seq_err", "duplicate_request", "rx_write_requests",
        "rx_read_requests", "rx_atomic_requests", "resp_local_length_error", "req_cqe_error",
        "req_remote_access_errors", "resp_cqe_error", "np_cnp_sent", "rp_cnp_handled",
        "np_ecn_marked_roce_packets", "roce_adp_retrans"}) {
    std::ofstream(port / "hw_counters" / c) << 678 << "\n";
  }
}

// utime + stime of `pid`, in clock ticks.
long CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {  // field 3 is the state, 14 utime, 15 stime
    if (i == 14) utime = std::stol(field);
    if (i == 15) {
      stime = std::stol(field);
      break;
    }
  }
  return utime + stime;
}

// Everything the child needs is prepared before fork(): the gRPC server's threads may hold locks.
pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
            const std::string& log) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  for (const auto& e : extra_env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(fd);
  return pid;
}

void Stop(pid_t pid) {
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

int Measure(const std::string& backend, int gpus, int seconds, const fs::path& dir) {
  Controller controller;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&controller);
  auto server = builder.BuildAndStart();
  std::vector<std::string> args = {HANGAR_BINARY,  "agent",
                                   "--controller", "127.0.0.1:" + std::to_string(port),
                                   "--node",       "bench",
                                   "--state-dir",  (dir / ("state-" + backend)).string(),
                                   "--no-cgroups",
                                   "--insecure",  // the bench's controller is plaintext on loopback
                                   "--ib-root",    (dir / "infiniband").string()};
  std::vector<std::string> env;
  if (backend == "fake") {
    args.insert(args.end(), {"--gpu-backend", "fake", "--fake-gpus", std::to_string(gpus)});
  } else {
#ifdef NVML_DOUBLE
    std::ofstream(dir / "nvml.json") << "{\"gpus\": " << gpus << "}\n";
    env.push_back("NVML_DOUBLE_CONFIG=" + (dir / "nvml.json").string());
    args.insert(args.end(),
                {"--gpu-backend", "nvml", "--nvml-library", NVML_DOUBLE, "--kernel-log", ""});
#else
    std::fprintf(stderr,
                 "agent_overhead: built without the NVML double (HANGAR_BUILD_TESTS=OFF)\n");
    return 1;
#endif
  }
  const std::string log = (dir / ("agent-" + backend + ".log")).string();
  const pid_t pid = Spawn(args, env, log);
  for (int i = 0; i < 200 && !controller.registered; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!controller.registered) {
    std::fprintf(stderr, "agent_overhead: the agent did not register; see %s\n", log.c_str());
    Stop(pid);
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // past start-up
  const long ticks0 = CpuTicks(pid);
  const int beats0 = controller.heartbeats;
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const long ticks1 = CpuTicks(pid);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int beats = controller.heartbeats - beats0;
  Stop(pid);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  const double cpu_seconds =
      static_cast<double>(ticks1 - ticks0) / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::printf(
      "agent overhead (%s backend, %d GPUs, %d IB ports, 1 Hz): %.2f%% of one core "
      "(%.2f s CPU in %.1f s; %d heartbeats of %d GPUs and %d ports)\n",
      backend.c_str(), gpus, 8, 100.0 * cpu_seconds / wall, cpu_seconds, wall, beats,
      controller.gpus.load(), controller.ports.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 20, gpus = 8;
  std::string backend = "both";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gpus"))
      gpus = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--backend"))
      backend = argv[i + 1];
  }
  const fs::path dir = fs::temp_directory_path() / ("agent_overhead." + std::to_string(getpid()));
  fs::create_directories(dir);
  for (int i = 0; i < 8; ++i) AddIbDevice(dir, i);
  int rc = 0;
  if (backend == "fake" || backend == "both") rc |= Measure("fake", gpus, seconds, dir);
  if (backend == "nvml" || backend == "both") rc |= Measure("nvml", gpus, seconds, dir);
  fs::remove_all(dir);
  return rc;
}
