// The gang preflight (docs/goodput.md, "Gang preflight"): before a large gang starts, each of its
// tasks runs `hangar preflight` on its node. The ranks meet at a rendezvous that rank 0 hosts
// (a small key-value store over TCP, RendezvousStore), publish their nodes' check results (the
// validation benchmarks the agent ran: hangar-validate on GPUs, the fake backend's figures in
// `hangar dev`), judge them all the same way, and -- when every node passed -- run an all-reduce
// across the whole gang with Gloo over TCP, checking its sum and timing it.
//
// Every rank that reached the rendezvous reads the same results, so all agree on which ranks
// failed: a node's own check failed (an error, a lost GPU, a GPU below slow_fraction of the gang's
// median), or the rank never joined within the budget. A rank that could not reach the
// rendezvous names no one (rank 0's own report names it). Nothing here is thread-safe beyond
// what each class says.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "agent/preflight/rendezvous.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::agent::preflight {

struct PreflightOptions {
  uint32_t rank = 0;
  uint32_t world = 1;
  std::string store_host;  // rank 0's node
  int store_port = 0;
  std::string host;  // this node's address: the all-reduce listens there
  Duration budget = 60 * kSecond;
  uint64_t allreduce_bytes = 64ull << 20;
  double slow_fraction = 0.85;
  // This rank's node check: the validation JSON (hangar-validate's form), or null when another
  // task of the node checks it.
  nlohmann::json node_check;
  // On GPU nodes: hangar-validate, which runs the all-reduce with NCCL across every GPU of the
  // gang, and this task's GPUs (CUDA_VISIBLE_DEVICES' form); empty: Gloo over TCP, one rank per
  // task, on the CPU.
  std::string nccl_program;
  std::string gpus;
  std::string scratch_dir = "/tmp";  // where hangar-validate's files go
};

struct PreflightResult {
  bool ok = false;
  std::vector<uint32_t> failed_ranks;
  std::string summary;
  double allreduce_busbw_gbs = 0;
  double seconds = 0;
  nlohmann::json ToJson() const;
};

// Runs this rank's part. Never throws; every failure is in the result.
PreflightResult RunPreflight(const PreflightOptions& o);

// Why a node's check result fails it, judged against the gang's medians ("" when it passes).
// `checks` holds one entry per rank (null: the rank checked no node).
std::vector<std::string> JudgeNodeChecks(const std::vector<nlohmann::json>& checks,
                                         double slow_fraction);

}  // namespace hangar::agent::preflight
