#include "agent/agent_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>

#include "agent/agent.h"
#include "cluster/cluster_yaml.h"
#include "common/units.h"

namespace hangar::agent {
namespace {

struct Flags {
  std::string controller = "127.0.0.1:8081";
  std::string node;
  std::string address;
  std::string state_dir;
  std::string cluster;
  int fake_gpus = -1;
  std::string fake_model;
  std::string fake_memory;
  std::string faults;
  bool no_cgroups = false;
};

std::atomic<bool> g_stop{false};

Status Run(const Flags& f) {
  if (f.node.empty()) return Status::InvalidArgument("--node NAME is required (the node's name in cluster.yaml)");
  FakeGpuOptions fake;
  AgentOptions opt;
  opt.controller = f.controller;
  opt.node = f.node;
  opt.state_dir = f.state_dir.empty() ? "./hangar-agent-" + f.node : f.state_dir;
  opt.use_cgroups = !f.no_cgroups;
  if (!f.cluster.empty()) {
    // The node's GPUs, CPU, memory and NUMA layout as cluster.yaml declares them.
    HANGAR_ASSIGN_OR_RETURN(auto file, cluster::LoadClusterFile(f.cluster));
    auto n = file.topology->FindNode(f.node);
    if (!n) return Status::NotFound("node '" + f.node + "' is not in " + f.cluster);
    const auto& info = file.topology->nodes()[*n];
    fake.count = info.num_gpus;
    if (info.num_gpus) fake.model = file.topology->models()[info.model];
    fake.memory_mib = info.gpu_memory_mib;
    int numa = 0;
    for (uint32_t g = info.first_gpu; g < info.first_gpu + info.num_gpus; ++g) numa = std::max<int>(numa, file.topology->gpus()[g].numa + 1);
    fake.numa_nodes = numa;
    opt.milli_cpu = info.milli_cpu;
    opt.memory_mib = info.memory_mib;
  }
  if (f.fake_gpus >= 0) fake.count = f.fake_gpus;
  if (!f.fake_model.empty()) fake.model = f.fake_model;
  if (!f.fake_memory.empty()) {
    HANGAR_ASSIGN_OR_RETURN(fake.memory_mib, ParseMemoryMiB(f.fake_memory));
  }
  fake.faults_file = f.faults;
  if (!f.address.empty()) {
    opt.address = f.address;
  } else {
    const bool loopback = f.controller.rfind("127.", 0) == 0 || f.controller.rfind("localhost", 0) == 0 ||
                          f.controller.rfind("[::1]", 0) == 0;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    opt.address = loopback ? "127.0.0.1" : host;
  }
  HANGAR_ASSIGN_OR_RETURN(auto backend, MakeFakeBackend(fake, f.node));
  Agent agent(opt, std::move(backend), SystemClock::Default());
  HANGAR_RETURN_IF_ERROR(agent.Init());
  spdlog::info("agent {}: {} fake {} GPUs, controller {}, state in {}; {}", f.node, fake.count, fake.model,
               f.controller, opt.state_dir, agent.cgroup_status());
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  signal(SIGPIPE, SIG_IGN);
  agent.Run(&g_stop);
  spdlog::info("agent {}: stopped (its tasks keep running)", f.node);
  return Status::Ok();
}

}  // namespace

void RegisterAgentCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand("agent", "Run a node agent: report GPUs, run tasks");
  c->add_option("--controller", f->controller, "The controller's agent address (host:port)")->capture_default_str();
  c->add_option("--node", f->node, "This node's name in cluster.yaml")->required();
  c->add_option("--address", f->address, "Where this node's tasks are reachable (MASTER_ADDR)");
  c->add_option("--state-dir", f->state_dir, "Task records, logs and working directories");
  c->add_option("--cluster", f->cluster, "cluster.yaml: take this node's GPUs, CPU, memory and NUMA from it");
  c->add_option("--fake-gpus", f->fake_gpus, "Simulated GPUs (the fake backend)");
  c->add_option("--fake-model", f->fake_model, "Model name of the simulated GPUs");
  c->add_option("--fake-gpu-memory", f->fake_memory, "Memory of each simulated GPU, e.g. 80Gi");
  c->add_option("--faults", f->faults, "YAML script of GPU faults for the fake backend");
  c->add_flag("--no-cgroups", f->no_cgroups, "Run tasks without cgroups");
  c->callback([f, rc] {
    Status s = Run(*f);
    if (!s.ok()) {
      spdlog::error("hangar agent: {}", s.message());
      *rc = 2;
    }
  });
}

}  // namespace hangar::agent
