#include "agent/agent_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "agent/agent.h"
#include "agent/checkpoint_socket.h"
#include "agent/fence/fence_keeper.h"
#include "agent/gpu/fake_backend.h"
#include "agent/gpu/gpu_check.h"
#include "agent/gpu/mps.h"
#include "agent/gpu/mps_check.h"
#include "agent/gpu/nvml_backend.h"
#include "agent/runner/process_spawn.h"
#include "cluster/cluster_yaml.h"
#include "common/tls_files.h"
#include "common/units.h"

namespace hangar::agent {
namespace {

struct Flags {
  std::string controller = "127.0.0.1:8081";
  std::string node;
  std::string address;
  std::string state_dir;
  std::string cluster;
  std::string gpu_backend;  // "", "fake" or "nvml"
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string kernel_log = "/dev/kmsg";
  std::string ib_root = "/sys/class/infiniband";
  int fake_gpus = -1;
  std::string fake_model;
  std::string fake_memory;
  std::string faults;
  bool no_cgroups = false;
  bool stop_tasks_on_exit = false;
  bool forget_store = false;
  bool allow_maintenance_commands = false;
  bool validate = false;  // gpu-check
  std::string token_file;
  std::string tls_dir;
  TlsFiles tls;
  bool insecure = false;
  // Containers (docs/containers.md).
  std::string containers = "on";
  std::string podman = "podman";
  std::string podman_root;
  std::string container_gpus;  // "": cdi with NVML, node:/dev/null with fake GPUs
  std::string image_cache_budget = "0";
  std::string image_cache_min_free = "1Gi";
  std::string registries_conf;
  // Artifacts (docs/data.md).
  std::string cache_dir;
  std::string cache_budget = "0";
  std::string data_address;
  std::string scratch_dir;
  // Fractional tasks under CUDA MPS.
  std::string mps = "auto";
  std::string mps_control;
  std::string mig_layout;  // --mig-layout "0:3g.40gb,3g.40gb;1:7g.80gb"
  // Topology discovery (docs/topology-discovery.md).
  std::string sysfs_root;     // "": /sys, with --ib-root for the RDMA devices
  std::string ibnetdiscover;  // a dump naming this node's HCAs
  std::string fake_nvlink = "switch";
  std::string fake_fabric;  // UUID/CLIQUE
};

std::atomic<bool> g_stop{false};

// The fake GPUs' shape from cluster.yaml's entry for the node, then the --fake-* flags.
Status ApplyClusterFile(const Flags& f, FakeGpuOptions& fake, AgentOptions& opt) {
  HANGAR_ASSIGN_OR_RETURN(auto file, cluster::LoadClusterFile(f.cluster));
  auto n = file.topology->FindNode(f.node);
  if (!n) return Status::NotFound("node '" + f.node + "' is not in " + f.cluster);
  const auto& info = file.topology->nodes()[*n];
  fake.count = info.num_gpus;
  if (info.num_gpus) fake.model = file.topology->models()[info.model];
  fake.memory_mib = info.gpu_memory_mib;
  fake.mig = info.num_gpus > 0 && file.topology->gpus()[info.first_gpu].mig;
  int numa = 0;
  for (uint32_t g = info.first_gpu; g < info.first_gpu + info.num_gpus; ++g) {
    numa = std::max<int>(numa, file.topology->gpus()[g].numa + 1);
  }
  fake.numa_nodes = numa;
  opt.milli_cpu = info.milli_cpu;
  opt.memory_mib = info.memory_mib;
  // cluster.yaml's mig.fixed_layouts for this node: every MIG GPU gets them (docs/mig.md);
  // --mig-layout, when given, wins.
  if (auto fixed = file.mig_fixed_layouts.find(*n);
      fixed != file.mig_fixed_layouts.end() && f.mig_layout.empty()) {
    std::string layout = "*:";
    for (size_t i = 0; i < fixed->second.profiles.size(); ++i)
      layout += (i ? "," : "") + fixed->second.profiles[i];
    HANGAR_ASSIGN_OR_RETURN(opt.mig_layout, ParseStaticMigLayout(layout));
  }
  return Status::Ok();
}

// --fake-nvlink and --fake-fabric UUID/CLIQUE.
Status FakeTopologyFlags(const Flags& f, FakeGpuOptions& fake) {
  fake.nvlink = f.fake_nvlink;
  if (f.fake_fabric.empty()) return Status::Ok();
  const size_t slash = f.fake_fabric.rfind('/');
  char* end = nullptr;
  const unsigned long clique =
      slash == std::string::npos ? 0 : std::strtoul(f.fake_fabric.c_str() + slash + 1, &end, 10);
  if (slash == std::string::npos || slash == 0 || !end || *end ||
      end == f.fake_fabric.c_str() + slash + 1) {
    return Status::InvalidArgument("--fake-fabric '" + f.fake_fabric +
                                   "': give the NVLink fabric's cluster UUID and clique as "
                                   "UUID/CLIQUE, e.g. 6f1c0e2a-0000-4000-8000-000000000001/1");
  }
  fake.fabric_cluster_uuid = f.fake_fabric.substr(0, slash);
  fake.fabric_clique_id = static_cast<uint32_t>(clique);
  return Status::Ok();
}

// Fake GPUs when asked for, or when the command line describes them (--fake-gpus, --cluster,
// --faults: a local cluster); otherwise NVML.
StatusOr<std::string> ChooseBackend(const Flags& f) {
  const bool describes_fake = f.fake_gpus >= 0 || !f.cluster.empty() || !f.faults.empty() ||
                              !f.fake_model.empty() || !f.fake_memory.empty();
  if (f.gpu_backend.empty()) return std::string(describes_fake ? "fake" : "nvml");
  if (f.gpu_backend != "fake" && f.gpu_backend != "nvml") {
    return Status::InvalidArgument("--gpu-backend must be fake or nvml, not '" + f.gpu_backend +
                                   "'");
  }
  if (f.gpu_backend == "nvml" && !f.faults.empty()) {
    return Status::InvalidArgument(
        "--faults breaks simulated GPUs only; use it with --gpu-backend fake");
  }
  return f.gpu_backend;
}

StatusOr<std::unique_ptr<GpuBackend>> MakeBackend(const Flags& f, const FakeGpuOptions& fake,
                                                  const std::string& state_dir) {
  HANGAR_ASSIGN_OR_RETURN(std::string kind, ChooseBackend(f));
  if (kind == "fake")
    return MakeFakeBackend(fake, f.node.empty() ? "local" : f.node, SystemClock::Default());
  NvmlOptions nvml;
  nvml.library = f.nvml_library;
  nvml.kernel_log = f.kernel_log;
  nvml.scratch_dir = state_dir + "/validate";
  auto backend = MakeNvmlBackend(nvml);
  if (!backend.ok() && f.gpu_backend.empty()) {
    return Status(backend.status().code(),
                  "NVIDIA GPUs are not supported here: " + backend.status().message() +
                      ". To run with simulated GPUs pass --fake-gpus N (or --gpu-backend fake); "
                      "on a node without GPUs pass --fake-gpus 0");
  }
  return backend;
}

// The node token: --token-file, else $HANGAR_NODE_TOKEN, else none (a controller with --auth none).
StatusOr<std::string> ReadNodeToken(const std::string& file) {
  std::string token;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      return Status::NotFound(
          "cannot read the node token file " + file +
          "; an admin makes one with `hangar token create --role node --node NAME`");
    }
    std::getline(in, token);
  } else if (const char* env = std::getenv("HANGAR_NODE_TOKEN")) {
    token = env;
  }
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front())))
    token.erase(0, 1);
  if (!token.empty() && token.rfind("hgr_", 0) != 0) {
    return Status::InvalidArgument(std::string("the node token ") +
                                   (file.empty() ? "in $HANGAR_NODE_TOKEN" : "in " + file) +
                                   " is not a Hangar token (they start with hgr_)");
  }
  return token;
}

Status ContainerFlags(const Flags& f, AgentOptions& opt) {
  if (f.containers != "on" && f.containers != "off") {
    return Status::InvalidArgument("--containers '" + f.containers + "': use on or off");
  }
  ContainerOptions& c = opt.containers;
  c.enabled = f.containers == "on";
  c.podman.binary = f.podman;
  if (!f.podman_root.empty()) c.podman.root = f.podman_root;
  const bool nvml =
      f.gpu_backend == "nvml" || (f.gpu_backend.empty() && f.fake_gpus < 0 && f.cluster.empty());
  c.podman.gpu_devices = !f.container_gpus.empty() ? f.container_gpus
                         : nvml                    ? "cdi"
                                                   : "node:/dev/null";
  c.podman.registries_conf = f.registries_conf;
  auto budget = ParseMemoryMiB(f.image_cache_budget);
  if (!budget.ok())
    return Status::InvalidArgument("--image-cache-budget: " + budget.status().message());
  c.image_cache_budget_bytes = *budget * 1024 * 1024;
  auto floor = ParseMemoryMiB(f.image_cache_min_free);
  if (!floor.ok())
    return Status::InvalidArgument("--image-cache-min-free: " + floor.status().message());
  c.image_cache_min_free_bytes = *floor * 1024 * 1024;
  auto cache = ParseMemoryMiB(f.cache_budget);
  if (!cache.ok()) return Status::InvalidArgument("--cache-budget: " + cache.status().message());
  opt.data.cache_budget_bytes = *cache * 1024 * 1024;
  opt.data.cache_dir =
      f.cache_dir.empty() ? "" : std::filesystem::absolute(f.cache_dir).lexically_normal().string();
  opt.data.address = f.data_address;
  return Status::Ok();
}

// --mps and --mps-control; needs opt.state_dir and opt.hangar_binary.
Status MpsFlags(const Flags& f, AgentOptions& opt) {
  HANGAR_ASSIGN_OR_RETURN(MpsMode mode, ParseMpsMode(f.mps));
  HANGAR_ASSIGN_OR_RETURN(std::string backend, ChooseBackend(f));
  const char* path = std::getenv("PATH");
  std::string note;
  HANGAR_ASSIGN_OR_RETURN(opt.mps,
                          ChooseMps(mode, backend == "fake", opt.hangar_binary, f.mps_control,
                                    path ? path : kDefaultTaskPath, opt.state_dir, &note));
  spdlog::info("agent {}: {}", f.node, note);
  return Status::Ok();
}

Status BuildOptions(const Flags& f, FakeGpuOptions& fake, AgentOptions& opt) {
  opt.controller = f.controller;
  opt.node = f.node;
  // Absolute: tasks get paths under it (HANGAR_AGENT_STATE_DIR, HANGAR_FAKE_GPU_UTIL_FILE) and
  // run in a working directory of their own.
  std::error_code ec;
  const std::string dir = f.state_dir.empty() ? "./hangar-agent-" + f.node : f.state_dir;
  opt.state_dir = std::filesystem::absolute(dir, ec).lexically_normal().string();
  if (ec) return Status::InvalidArgument("--state-dir " + dir + ": " + ec.message());
  opt.use_cgroups = !f.no_cgroups;
  opt.stop_tasks_on_exit = f.stop_tasks_on_exit;
  opt.forget_store = f.forget_store;
  opt.allow_maintenance_commands = f.allow_maintenance_commands;
  opt.ib_root = f.ib_root;
  if (!f.sysfs_root.empty()) {
    opt.ib_root = f.sysfs_root + "/class/infiniband";
    opt.pci_root = f.sysfs_root + "/bus/pci/devices";
  }
  opt.ibnetdiscover = f.ibnetdiscover;
  HANGAR_RETURN_IF_ERROR(FakeTopologyFlags(f, fake));
  if (!f.scratch_dir.empty()) {
    opt.scratch_dir = std::filesystem::absolute(f.scratch_dir, ec).lexically_normal().string();
    if (ec) return Status::InvalidArgument("--scratch-dir " + f.scratch_dir + ": " + ec.message());
    std::filesystem::create_directories(opt.scratch_dir + "/checkpoints", ec);
    if (ec) {
      return Status::InvalidArgument("--scratch-dir " + opt.scratch_dir + ": cannot create " +
                                     opt.scratch_dir + "/checkpoints (" + ec.message() +
                                     "); give a folder on this node's local disk "
                                     "that the agent can write");
    }
  }
  opt.hangar_binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (!f.cluster.empty()) HANGAR_RETURN_IF_ERROR(ApplyClusterFile(f, fake, opt));
  HANGAR_RETURN_IF_ERROR(ContainerFlags(f, opt));
  HANGAR_RETURN_IF_ERROR(MpsFlags(f, opt));
  HANGAR_ASSIGN_OR_RETURN(opt.token, ReadNodeToken(f.token_file));
  // Mutual TLS with the controller: this node's certificate from the cluster CA, or --insecure.
  HANGAR_ASSIGN_OR_RETURN(TlsFiles tls, ResolveTls(f.tls_dir, "node-" + f.node, f.tls));
  if (!tls.empty() && f.insecure)
    return Status::InvalidArgument("--insecure and TLS files together: choose one");
  if (tls.empty() && !f.insecure) {
    return Status::InvalidArgument(
        "the agent talks to the controller over mutual TLS: give it --tls-dir DIR with "
        "ca.crt and node-" +
        f.node + ".crt/.key (`hangar certs issue --node " + f.node +
        "`), or --insecure for a controller that runs with --insecure");
  }
  if (!tls.empty()) {
    HANGAR_ASSIGN_OR_RETURN(opt.tls_ca_pem, ReadPem(tls.ca));
    HANGAR_ASSIGN_OR_RETURN(opt.tls_cert_pem, ReadPem(tls.cert));
    HANGAR_ASSIGN_OR_RETURN(opt.tls_key_pem, ReadPem(tls.key));
  }
  if (f.fake_gpus >= 0) fake.count = f.fake_gpus;
  if (!f.fake_model.empty()) fake.model = f.fake_model;
  if (!f.fake_memory.empty()) {
    HANGAR_ASSIGN_OR_RETURN(fake.memory_mib, ParseMemoryMiB(f.fake_memory));
  }
  fake.faults_file = f.faults;
  fake.mig_state_file = opt.state_dir + "/fake-mig-layout.json";
  if (!f.mig_layout.empty()) {
    HANGAR_ASSIGN_OR_RETURN(opt.mig_layout, ParseStaticMigLayout(f.mig_layout));
  }
  if (!f.address.empty()) {
    opt.address = f.address;
  } else {
    const bool loopback = f.controller.rfind("127.", 0) == 0 ||
                          f.controller.rfind("localhost", 0) == 0 ||
                          f.controller.rfind("[::1]", 0) == 0;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    opt.address = loopback ? "127.0.0.1" : host;
  }
  return Status::Ok();
}

Status Run(const Flags& f) {
  if (f.node.empty())
    return Status::InvalidArgument("--node NAME is required (the node's name in cluster.yaml)");
  FakeGpuOptions fake;
  AgentOptions opt;
  HANGAR_RETURN_IF_ERROR(BuildOptions(f, fake, opt));
  HANGAR_ASSIGN_OR_RETURN(auto backend, MakeBackend(f, fake, opt.state_dir));
  const std::string backend_name = backend->name();
  Agent agent(opt, std::move(backend), SystemClock::Default());
  HANGAR_RETURN_IF_ERROR(agent.Init());
  spdlog::info("agent {}: {} GPUs, controller {}, state in {}; {}", f.node,
               backend_name == "fake" ? std::to_string(fake.count) + " fake " + fake.model : "NVML",
               f.controller, opt.state_dir, agent.cgroup_status());
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  signal(SIGPIPE, SIG_IGN);
  agent.Run(&g_stop);
  spdlog::info("agent {}: stopped{}", f.node,
               opt.stop_tasks_on_exit ? " (and its tasks with it)" : " (its tasks keep running)");
  return Status::Ok();
}

Status GpuCheck(Flags f) {
  if (f.gpu_backend.empty() && f.fake_gpus < 0 && f.faults.empty()) f.gpu_backend = "nvml";
  FakeGpuOptions fake;
  if (f.fake_gpus >= 0) fake.count = f.fake_gpus;
  fake.faults_file = f.faults;
  const std::string scratch = f.state_dir.empty() ? "/tmp/hangar-gpu-check" : f.state_dir;
  HANGAR_ASSIGN_OR_RETURN(auto backend, MakeBackend(f, fake, scratch));
  return RunGpuCheck(*backend, f.validate, SystemClock::Default()->Now(), std::cout);
}

// `hangar mps-check`: a command as a fractional task of this node, under MPS.
Status MpsCheck(Flags f, const MpsCheckOptions& check, int* rc) {
  if (f.gpu_backend.empty() && f.fake_gpus < 0) f.gpu_backend = "nvml";
  if (f.state_dir.empty()) f.state_dir = "/tmp/hangar-mps-check";
  f.node = "mps-check";
  FakeGpuOptions fake;
  if (f.fake_gpus >= 0) fake.count = f.fake_gpus;
  HANGAR_ASSIGN_OR_RETURN(auto backend, MakeBackend(f, fake, f.state_dir));
  AgentOptions opt;
  opt.state_dir = std::filesystem::absolute(f.state_dir).lexically_normal().string();
  std::error_code ec;
  opt.hangar_binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  f.mps = "on";
  HANGAR_RETURN_IF_ERROR(MpsFlags(f, opt));
  return RunMpsCheck(*backend, opt.mps, check, std::cout, rc);
}

struct CheckpointFlags {
  std::string path;
  uint64_t step = 0;
  std::string task_id;  // default: $HANGAR_TASK_ID
  std::string socket;   // default: $HANGAR_AGENT_SOCKET
  double timeout_s = 30;
};

std::string FromEnv(const std::string& flag, const char* name) {
  if (!flag.empty()) return flag;
  const char* value = std::getenv(name);
  return value ? value : "";
}

// `hangar checkpoint-done`, run by a task: tells its node's agent that a checkpoint is written.
Status CheckpointDone(const CheckpointFlags& f) {
  CheckpointReport report;
  report.task_id = FromEnv(f.task_id, "HANGAR_TASK_ID");
  const std::string socket = FromEnv(f.socket, "HANGAR_AGENT_SOCKET");
  if (report.task_id.empty() || socket.empty()) {
    return Status::FailedPrecondition(
        std::string("not inside a Hangar task: ") +
        (report.task_id.empty() ? "HANGAR_TASK_ID" : "HANGAR_AGENT_SOCKET") +
        " is not set (a task's agent sets it; elsewhere pass --task-id and --socket)");
  }
  if (!f.path.empty()) {
    std::error_code ec;
    // A report of a checkpoint that is not there would let the job resume from nothing.
    if (!std::filesystem::exists(f.path, ec)) {
      return Status::NotFound("--path " + f.path +
                              " does not exist; report a checkpoint only once it is written (in "
                              "$HANGAR_CHECKPOINT_DIR)");
    }
    report.path = std::filesystem::absolute(f.path, ec).lexically_normal().string();
    if (ec) report.path = f.path;
  }
  report.step = f.step;
  // A report that releases the task from its grace is followed by SIGTERM to the task's process
  // group, this process included: it must still finish and say so (SIGKILL at the grace's end
  // still ends it).
  std::signal(SIGTERM, SIG_IGN);
  HANGAR_ASSIGN_OR_RETURN(
      CheckpointReply reply,
      SendCheckpointDone(socket, report, static_cast<Duration>(f.timeout_s * 1000)));
  std::cerr << "hangar checkpoint-done: task " << report.task_id << ": reported"
            << (report.path.empty() ? "" : " " + report.path)
            << (reply.released ? "; the task is released from its stop's grace (SIGTERM follows)"
                               : "")
            << "\n";
  return Status::Ok();
}

void AddBackendFlags(CLI::App* c, Flags* f) {
  c->add_option(
      "--gpu-backend", f->gpu_backend,
      "fake or nvml (default: fake when --fake-gpus, --cluster or --faults is given, else nvml)");
  c->add_option("--nvml-library", f->nvml_library, "The NVML library to load")
      ->capture_default_str();
  c->add_option("--fake-gpus", f->fake_gpus, "Simulated GPUs (the fake backend)");
  c->add_option("--faults", f->faults, "YAML script of GPU faults for the fake backend");
}

}  // namespace

void RegisterAgentCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand("agent", "Run a node agent: report GPUs, run tasks");
  c->add_option("--controller", f->controller,
                "The controller's agent address (host:port), or several controllers' as a "
                "comma-separated list (the leader is found)")
      ->capture_default_str();
  c->add_option("--node", f->node, "This node's name in cluster.yaml")->required();
  c->add_option(
      "--token-file", f->token_file,
      "This node's token, for a controller with --auth tokens (default: $HANGAR_NODE_TOKEN)");
  c->add_option("--tls-dir", f->tls_dir,
                "ca.crt and node-NODE.crt/.key as `hangar certs` writes them");
  c->add_option("--tls-ca", f->tls.ca,
                "The cluster CA (the controller's certificate must be signed by it)");
  c->add_option("--tls-cert", f->tls.cert,
                "This node's certificate (its common name is the node's name)");
  c->add_option("--tls-key", f->tls.key, "This node's private key");
  c->add_flag("--insecure", f->insecure, "Plaintext to a controller that runs with --insecure");
  c->add_option("--address", f->address, "Where this node's tasks are reachable (MASTER_ADDR)");
  c->add_option("--state-dir", f->state_dir, "Task records, logs and working directories");
  c->add_option("--cluster", f->cluster,
                "cluster.yaml: take this node's GPUs, CPU, memory and NUMA from it");
  AddBackendFlags(c, f.get());
  c->add_option("--fake-model", f->fake_model, "Model name of the simulated GPUs");
  c->add_option("--fake-gpu-memory", f->fake_memory, "Memory of each simulated GPU, e.g. 80Gi");
  c->add_option("--kernel-log", f->kernel_log, "Where NVML's backend reads Xids (\"\": nowhere)")
      ->capture_default_str();
  c->add_option("--ib-root", f->ib_root, "InfiniBand/RoCE devices (absent: no ports)")
      ->capture_default_str();
  c->add_option("--sysfs-root", f->sysfs_root,
                "Where sysfs is (default /sys): RDMA devices under class/infiniband and PCI "
                "functions under bus/pci/devices, for topology discovery");
  c->add_option("--ibnetdiscover", f->ibnetdiscover,
                "An ibnetdiscover dump of the fabric: the agent finds its HCAs' switches in it and "
                "tells the controller (hangar topology diff)");
  c->add_option("--fake-nvlink", f->fake_nvlink,
                "NVLink between the simulated GPUs: switch (HGX), pairs or none")
      ->capture_default_str();
  c->add_option("--fake-fabric", f->fake_fabric,
                "The simulated GPUs' multi-node NVLink fabric as UUID/CLIQUE (NVL72-class racks)");
  c->add_flag("--no-cgroups", f->no_cgroups, "Run tasks without cgroups");
  c->add_option(
      "--scratch-dir", f->scratch_dir,
      "Node-local scratch (NVMe) for checkpoints: tasks write HANGAR_CHECKPOINT_DIR there and the "
      "agent "
      "drains each one reported with `hangar checkpoint-done` to the controller's "
      "--checkpoint-root (shared "
      "storage) in the background; default: none (tasks write to --checkpoint-root themselves)");
  c->add_option(
      "--mig-layout", f->mig_layout,
      "MIG GPU instances to create at start on MIG GPUs that have none: GPU:PROFILE[@START],... "
      "per GPU, "
      "';' between GPUs, GPU * for every other MIG GPU, e.g. \"0:3g.40gb,3g.40gb;1:7g.80gb\" or "
      "\"*:1g.10gb@6,2g.20gb,4g.40gb\"");
  c->add_option("--containers", f->containers,
                "Run tasks that name an image: on (needs podman and runc) or off")
      ->capture_default_str();
  c->add_option("--podman", f->podman, "The podman program")->capture_default_str();
  c->add_option("--podman-root", f->podman_root,
                "podman's image and container storage (default: STATE_DIR/podman/storage)");
  c->add_option(
      "--container-gpus", f->container_gpus,
      "How containers get GPUs: cdi (nvidia-ctk's spec; the default with NVML) or node:PATH (PATH "
      "appears as /dev/nvidiaN; node:/dev/null is the default with fake GPUs)");
  c->add_option("--image-cache-budget", f->image_cache_budget,
                "Disk the node's image cache may use, e.g. 200Gi (0: no budget); least recently "
                "used images go first")
      ->capture_default_str();
  c->add_option(
       "--image-cache-min-free", f->image_cache_min_free,
       "Free space the image cache leaves on the disk under podman's storage, e.g. 20Gi (0: none); "
       "below it, least recently used images go as when over budget")
      ->capture_default_str();
  c->add_option("--cache-dir", f->cache_dir,
                "The node's artifact cache, on its local scratch disk (default: STATE_DIR/cache)");
  c->add_option("--cache-budget", f->cache_budget,
                "Disk the artifact cache may use, e.g. 2Ti (0: no budget); least recently used "
                "objects go first, "
                "never one a running, placed, reserved or nominated job here needs")
      ->capture_default_str();
  c->add_option("--data-address", f->data_address,
                "HOST:PORT on the cluster's data network where peers read this node's cache (PORT "
                "0: a free one); "
                "empty: this node serves no peers");
  c->add_option(
      "--registries-conf", f->registries_conf,
      "A registries.conf for podman (mirrors, a site registry); default: one that pulls loopback "
      "registries without TLS");
  c->add_option(
       "--mps", f->mps,
       "Fractional tasks under CUDA MPS (their GPU memory and compute share enforced): auto (where "
       "nvidia-cuda-mps-control is installed, and always with fake GPUs), on (required) or off")
      ->capture_default_str();
  c->add_option(
      "--mps-control", f->mps_control,
      "The MPS control program (default: nvidia-cuda-mps-control from PATH; with fake GPUs the "
      "stand-in, `hangar fake-mps-control`)");
  c->add_flag(
      "--stop-tasks-on-exit", f->stop_tasks_on_exit,
      "Stop every task when the agent exits (SIGTERM, SIGKILL after 2 s); by default tasks keep "
      "running and a restarted agent adopts them (`hangar dev` sets this)");
  c->add_flag("--allow-maintenance-commands", f->allow_maintenance_commands,
              "Run the commands of `hangar maintain` on this node, as the agent's user, once the "
              "controller has emptied it of work (docs/maintenance.md); without it they are "
              "refused");
  c->add_flag(
      "--forget-store", f->forget_store,
      "Stop the tasks this agent runs for the controller store it served and forget them (and that "
      "store), so that it serves a controller on another store; a controller refuses an agent that "
      "served another store (its task ids are that store's)");
  c->callback([f, rc] {
    Status s = Run(*f);
    if (!s.ok()) {
      spdlog::error("hangar agent: {}", s.message());
      *rc = 2;
    }
  });

  auto g = std::make_shared<Flags>();
  g->kernel_log = "";  // a one-off check has no earlier log position to follow from
  CLI::App* check =
      app.add_subcommand("gpu-check", "Show this machine's GPUs as the agent sees them");
  AddBackendFlags(check, g.get());
  check->add_flag("--validate", g->validate,
                  "Also run the validation benchmarks (hangar-validate)");
  check->add_option("--scratch-dir", g->state_dir, "Where validation writes its output files");
  check->callback([g, rc] {
    Status s = GpuCheck(*g);
    if (!s.ok()) {
      std::cerr << "hangar gpu-check: " << s.message() << "\n";
      *rc = 2;
    }
  });

  auto mf = std::make_shared<Flags>();
  auto mc = std::make_shared<MpsCheckOptions>();
  auto mem = std::make_shared<std::string>();
  CLI::App* mps_check = app.add_subcommand(
      "mps-check",
      "Run a command as a fractional task of this node would run: under its GPU's MPS daemon, "
      "with its memory and thread limits (the daemon is started and stopped around it)");
  AddBackendFlags(mps_check, mf.get());
  mps_check->add_option("--gpu", mc->gpu, "The GPU (index)")->capture_default_str();
  mps_check->add_option("--fraction", mc->fraction, "The task's share of it (0.5 or 500m)")
      ->capture_default_str();
  mps_check->add_option("--gpu-memory", *mem,
                        "Its GPU memory, e.g. 20Gi (default: the same share of the GPU's)");
  mps_check->add_option("--mps-control", mf->mps_control,
                        "The MPS control program (default: as the agent's)");
  mps_check->add_option("--state-dir", mf->state_dir,
                        "Where the daemon's folders go (default /tmp/hangar-mps-check)");
  mps_check->add_option("command", mc->command, "The command, after --")->required();
  mps_check->callback([mf, mc, mem, rc] {
    Status s = Status::Ok();
    if (!mem->empty()) {
      auto mib = ParseMemoryMiB(*mem);
      s = mib.ok() ? Status::Ok()
                   : Status::InvalidArgument("--gpu-memory: " + mib.status().message());
      if (mib.ok()) mc->gpu_memory_mib = *mib;
    }
    if (s.ok()) s = MpsCheck(*mf, *mc, rc);
    if (!s.ok()) {
      std::cerr << "hangar mps-check: " << s.message() << "\n";
      *rc = 2;
    }
  });

  auto mps_daemon = std::make_shared<bool>(false);
  CLI::App* fake_mps = app.add_subcommand(
      "fake-mps-control",
      "The stand-in for nvidia-cuda-mps-control that agents with fake GPUs run: -d starts it in "
      "the background; "
      "without -d it sends the commands on stdin (quit) to the one in $CUDA_MPS_PIPE_DIRECTORY");
  fake_mps->add_flag("-d", *mps_daemon, "Start the daemon in the background");
  fake_mps->callback([mps_daemon, rc] { *rc = RunFakeMpsControl(*mps_daemon); });

  // The node's fence keeper (agent/fence/fence_keeper.h): the agent starts it; not for people.
  auto keeper_dir = std::make_shared<std::string>();
  CLI::App* keeper =
      app.add_subcommand("fence-keeper", "The node's fence keeper, started by the agent");
  keeper->group("");  // hidden from --help
  keeper->add_option("--state-dir", *keeper_dir, "The agent's state directory")->required();
  keeper->callback([keeper_dir, rc] { *rc = fence::RunFenceKeeper(*keeper_dir); });

  auto k = std::make_shared<CheckpointFlags>();
  CLI::App* ckpt = app.add_subcommand(
      "checkpoint-done",
      "Run inside a task: tell the node's agent a checkpoint is written (ends a preemption's "
      "grace early)");
  ckpt->add_option("--path", k->path, "What was written (made absolute)");
  ckpt->add_option("--step", k->step, "The training step it covers");
  ckpt->add_option("--task-id", k->task_id, "The task (default: $HANGAR_TASK_ID)");
  ckpt->add_option("--socket", k->socket, "The agent's socket (default: $HANGAR_AGENT_SOCKET)");
  ckpt->add_option("--timeout", k->timeout_s, "Seconds to wait for the agent's answer")
      ->capture_default_str();
  ckpt->callback([k, rc] {
    Status s = CheckpointDone(*k);
    if (!s.ok()) {
      std::cerr << "hangar checkpoint-done: " << s.message() << "\n";
      *rc = 2;
    }
  });
}

}  // namespace hangar::agent
