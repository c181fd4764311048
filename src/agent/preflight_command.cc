// `hangar preflight`: one rank's part of a gang preflight (agent/preflight/gang_preflight.h). The
// agent runs it before a task of a large gang starts (docs/goodput.md, "Gang preflight"); an
// operator can run it by hand on a set of nodes the same way. It prints one JSON object --
// {"ok", "failed_ranks", "summary", "allreduce_busbw_gbs", "seconds"} -- and exits 0 whatever the
// verdict; 2 on a mistake in its arguments.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "agent/agent_command.h"
#include "agent/preflight/gang_preflight.h"

namespace hangar::agent {

namespace {

struct PreflightFlags {
  uint32_t rank = 0;
  uint32_t world = 0;
  std::string store;
  std::string host;
  std::string budget = "60s";
  uint32_t allreduce_mib = 64;
  double slow_fraction = 0.85;
  std::string node_check;  // a file with the node's validation JSON
  std::string nccl_program;
  std::string gpus;
  std::string scratch = "/tmp";
};

// "host:port" or "[v6]:port".
Status SplitHostPort(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return Status::InvalidArgument("--store '" + text + "' is not HOST:PORT, such as node-0:29500");
  *host = text.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  try {
    size_t used = 0;
    *port = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || *port < 1 || *port > 65535) throw std::out_of_range("");
  } catch (const std::exception&) {
    return Status::InvalidArgument("--store '" + text + "': the port must be 1 to 65535");
  }
  return Status::Ok();
}

StatusOr<preflight::PreflightOptions> OptionsOf(const PreflightFlags& f) {
  preflight::PreflightOptions o;
  o.rank = f.rank;
  o.world = f.world;
  if (f.world == 0 || f.rank >= f.world)
    return Status::InvalidArgument("--rank must be below --world (ranks count from 0)");
  HANGAR_RETURN_IF_ERROR(SplitHostPort(f.store, &o.store_host, &o.store_port));
  o.host = f.host.empty() ? o.store_host : f.host;
  auto budget = ParseDuration(f.budget);
  if (!budget.ok() || *budget < kSecond || *budget > 10 * kMinute)
    return Status::InvalidArgument("--budget must be from 1s to 10m, such as 60s, not '" +
                                   f.budget + "'");
  o.budget = *budget;
  if (f.allreduce_mib < 1 || f.allreduce_mib > 4096)
    return Status::InvalidArgument("--allreduce-mib must be 1 to 4096");
  o.allreduce_bytes = static_cast<uint64_t>(f.allreduce_mib) << 20;
  if (!(f.slow_fraction > 0 && f.slow_fraction < 1))
    return Status::InvalidArgument("--slow-fraction must be between 0 and 1, such as 0.85");
  o.slow_fraction = f.slow_fraction;
  if (!f.nccl_program.empty() && f.gpus.empty())
    return Status::InvalidArgument("--nccl-program needs --gpus, this task's GPUs (0,1,...)");
  o.nccl_program = f.nccl_program;
  o.gpus = f.gpus;
  o.scratch_dir = f.scratch;
  if (!f.node_check.empty()) {
    std::ifstream in(f.node_check);
    if (!in) return Status::NotFound("--node-check " + f.node_check + ": cannot read it");
    std::stringstream text;
    text << in.rdbuf();
    o.node_check = nlohmann::json::parse(text.str(), nullptr, false);
    if (o.node_check.is_discarded())
      o.node_check = {{"error", "the node check printed no JSON: " + text.str().substr(0, 200)}};
  }
  return o;
}

}  // namespace

void RegisterPreflightCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<PreflightFlags>();
  CLI::App* c = app.add_subcommand(
      "preflight",
      "One rank of a gang preflight: share this node's check, then all-reduce across the gang "
      "(the agent runs it before a large gang starts)");
  c->add_option("--rank", f->rank, "This rank (0 serves the rendezvous)")->required();
  c->add_option("--world", f->world, "Ranks in the gang")->required();
  c->add_option("--store", f->store, "HOST:PORT of the rendezvous, on rank 0's node")->required();
  c->add_option("--host", f->host,
                "This node's address for the all-reduce (default: --store's host)");
  c->add_option("--budget", f->budget, "The whole check's time, rendezvous included (60s)");
  c->add_option("--allreduce-mib", f->allreduce_mib, "The all-reduce's buffer in MiB (64)");
  c->add_option("--slow-fraction", f->slow_fraction,
                "A GPU below this share of the gang's median fails its node (0.85)");
  c->add_option("--node-check", f->node_check,
                "A file with this node's validation JSON (hangar-validate's output)");
  c->add_option("--nccl-program", f->nccl_program,
                "hangar-validate: the all-reduce runs with NCCL across the gang's GPUs (default: "
                "Gloo across its tasks, on the CPU)");
  c->add_option("--gpus", f->gpus, "This task's GPUs, as CUDA_VISIBLE_DEVICES lists them");
  c->add_option("--scratch", f->scratch, "Where hangar-validate's files go (/tmp)");
  c->callback([f, rc] {
    auto o = OptionsOf(*f);
    if (!o.ok()) {
      std::cerr << "hangar preflight: " << o.status().message() << "\n";
      *rc = 2;
      return;
    }
    std::cout << preflight::RunPreflight(*o).ToJson().dump() << std::endl;
    *rc = 0;
  });
}

}  // namespace hangar::agent
