#include "cli/sbatch_shape.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace hangar::cli::sbatch {

namespace {

std::string N(int64_t v) { return std::to_string(v); }

// A size the job parser reads back exactly (FormatMemoryMiB rounds 3000 MiB to 2.9Gi).
std::string ExactMemory(int64_t mib) {
  if (mib >= 1024 && mib % 1024 == 0) return N(mib / 1024) + "Gi";
  return N(mib) + "Mi";
}

// --gres=gpu:N and --gpus-per-node=N set the same thing.
std::string GpusPerNodeOption(const SbatchOptions& o) {
  return o.where.count("gpus-per-node") || !o.where.count("gres") ? "gpus-per-node" : "gres";
}

// Nodes: as asked, or as many as the tasks (--ntasks over --ntasks-per-node) or the GPUs (--gpus
// over a whole node's) need, as Slurm derives them.
int ResolveNodes(const SbatchOptions& o, const SiteFacts& site, Diagnostics* d) {
  if (o.nodes) return *o.nodes;
  if (o.ntasks && o.ntasks_per_node) {
    if (*o.ntasks % *o.ntasks_per_node != 0) {
      d->errors.push_back(WhereSet(o, "ntasks") + ": --ntasks=" + N(*o.ntasks) + " at " +
                          N(*o.ntasks_per_node) + " per node (" + WhereSet(o, "ntasks-per-node") +
                          ") leaves the last node fewer tasks; Hangar runs the same tasks on every "
                          "node: give a multiple of --ntasks-per-node");
      return 1;
    }
    return *o.ntasks / *o.ntasks_per_node;
  }
  if (o.gpus_total && site.node_gpus && *o.gpus_total > site.node_gpus)
    return (*o.gpus_total + site.node_gpus - 1) / site.node_gpus;
  return 1;
}

int ResolveTasksPerNode(const SbatchOptions& o, int nodes, Diagnostics* d) {
  if (o.ntasks_per_node) {
    if (o.ntasks && o.nodes && *o.ntasks != nodes * *o.ntasks_per_node) {
      d->errors.push_back(WhereSet(o, "ntasks") + ": --ntasks=" + N(*o.ntasks) +
                          " is not --nodes (" + N(nodes) + ") x --ntasks-per-node (" +
                          N(*o.ntasks_per_node) + ", " + WhereSet(o, "ntasks-per-node") +
                          "); give two of the three");
    }
    return *o.ntasks_per_node;
  }
  if (!o.ntasks) return 1;
  if (*o.ntasks % nodes != 0) {
    d->errors.push_back(WhereSet(o, "ntasks") + ": --ntasks=" + N(*o.ntasks) +
                        " does not divide evenly among " + N(nodes) +
                        " nodes; Hangar runs the same tasks on every node: give --ntasks-per-node");
    return 1;
  }
  return *o.ntasks / nodes;
}

// GPUs per node from --gpus-per-task, --gpus-per-node (--gres) and --gpus: all that are given
// must agree.
int ResolveGpus(const SbatchOptions& o, const Shape& s, Diagnostics* d) {
  std::vector<std::pair<int, std::string>> forms;  // per node, and the sentence naming it
  if (o.gpus_per_task)
    forms.emplace_back(*o.gpus_per_task * s.tasks_per_node, "--gpus-per-task x tasks per node");
  if (o.gpus_per_node) forms.emplace_back(*o.gpus_per_node, "the GPUs per node");
  if (o.gpus_total) {
    if (*o.gpus_total % s.nodes != 0) {
      d->errors.push_back(WhereSet(o, "gpus") + ": --gpus=" + N(*o.gpus_total) +
                          " does not divide evenly among " + N(s.nodes) +
                          " nodes; Hangar gives every node the same GPUs: give --gpus-per-node");
    } else {
      forms.emplace_back(*o.gpus_total / s.nodes, "--gpus over " + N(s.nodes) + " node(s)");
    }
  }
  if (forms.empty()) return 0;
  const char* options[] = {"gpus-per-task", "gpus-per-node", "gpus"};
  auto where = [&](const std::string& what) {
    if (what.rfind("--gpus-per-task", 0) == 0) return WhereSet(o, options[0]);
    if (what.rfind("--gpus ", 0) == 0) return WhereSet(o, options[2]);
    return WhereSet(o, GpusPerNodeOption(o));
  };
  for (size_t i = 1; i < forms.size(); ++i) {
    if (forms[i].first != forms[0].first) {
      d->errors.push_back(where(forms[0].second) + ": " + forms[0].second + " (" +
                          N(forms[0].first) + ") disagrees with " + forms[i].second + " (" +
                          N(forms[i].first) + ", " + where(forms[i].second) +
                          "); give one of them");
    }
  }
  return forms[0].first;
}

}  // namespace

Shape ResolveShape(const SbatchOptions& o, const SiteFacts& site, Diagnostics* d) {
  Shape s;
  s.nodes = ResolveNodes(o, site, d);
  s.tasks_per_node = ResolveTasksPerNode(o, s.nodes, d);
  s.gpus = ResolveGpus(o, s, d);
  if (o.ntasks_per_gpu) {  // tasks from GPUs, or GPUs from tasks
    const int k = *o.ntasks_per_gpu;
    if (s.gpus && !o.ntasks && !o.ntasks_per_node)
      s.tasks_per_node = s.gpus * k;
    else if (!s.gpus)
      s.gpus = (s.tasks_per_node + k - 1) / k;
  }
  if (o.exclusive && !s.gpus) {
    if (site.node_gpus) {
      s.gpus = site.node_gpus;
    } else {
      d->warnings.push_back(
          WhereSet(o, "exclusive") +
          ": --exclusive: the job asks no GPUs, since how many a whole node has is not known "
          "here; give --gpus-per-node=N (or set HANGAR_SBATCH_NODE_GPUS) to have them all");
    }
  }
  if (s.gpus > 64) {
    d->errors.push_back(WhereSet(o, o.gpus_per_task ? "gpus-per-task" : "gpus") + ": " + N(s.gpus) +
                        " GPUs per node is more than any node has; give --nodes to spread them");
  }
  if (!s.gpus && (o.cpus_per_gpu || o.mem_per_gpu_mib)) {
    d->errors.push_back(WhereSet(o, o.cpus_per_gpu ? "cpus-per-gpu" : "mem-per-gpu") +
                        ": --cpus-per-gpu and --mem-per-gpu need GPUs (--gres=gpu:N or "
                        "--gpus-per-node=N); without GPUs give --cpus-per-task and --mem");
  }
  return s;
}

namespace {

// The models the script's GPU type and constraint allow, and the labels the constraint requires.
void AddNodeRequirements(const SbatchOptions& o, const Shape& s, const SiteFacts& site,
                         nlohmann::ordered_json* g, Diagnostics* d) {
  std::vector<std::string> models;
  if (!o.gpu_type.empty()) {
    if (auto m = ModelsOfGpuType(site, o.gpu_type)) {
      models = *m;
    } else {
      // Kept as written: the controller maps it through cluster.yaml's gpu_types.
      models = {o.gpu_type};
      if (!site.controller_maps_types) {
        d->warnings.push_back(WhereSet(o, "gpu-type") + ": the GPU type '" + o.gpu_type +
                              "' is kept as written (gpu_models: [" + o.gpu_type +
                              "]): the controller maps Slurm's GPU types to its models through "
                              "cluster.yaml's gpu_types when the job is submitted, and refuses a "
                              "type it does not know");
      }
    }
  }
  if (o.constraint) {
    const NodeRequirements r = ConstraintToNodes(*o.constraint, site);
    for (const auto& why : r.dropped) {
      d->warnings.push_back(WhereSet(o, "constraint") + ": --constraint=" + *o.constraint + ": " +
                            why + "; it is left out");
    }
    if (models.empty()) models = r.models;
    if (!r.labels.empty()) {
      nlohmann::ordered_json sel = nlohmann::ordered_json::object();
      std::string names;
      for (const auto& [k, v] : r.labels) {
        sel[k] = v;
        names += (names.empty() ? "" : ", ") + k + ": \"" + v + "\"";
      }
      (*g)["node_selector"] = sel;
      // Features are site words: say what a node needs, since a cluster without the labels
      // never places the job.
      d->warnings.push_back(WhereSet(o, "constraint") + ": --constraint=" + *o.constraint +
                            ": the job runs only on nodes labelled " + names +
                            " (labels: in cluster.yaml; `hangar explain ID` says when none has "
                            "them)");
    }
  }
  if (s.gpus && !models.empty()) (*g)["gpu_models"] = models;
}

}  // namespace

void AddResources(const SbatchOptions& o, const Shape& s, const SiteFacts& site,
                  nlohmann::ordered_json* g, Diagnostics* d) {
  if (s.gpus) (*g)["gpus"] = s.gpus;
  if (o.cpus_per_gpu) (*g)["cpu_per_gpu"] = std::to_string(*o.cpus_per_gpu);
  if (o.mem_per_gpu_mib) (*g)["memory_per_gpu"] = ExactMemory(*o.mem_per_gpu_mib);
  int64_t cpus = 0;  // per node, for --mem-per-cpu
  if (o.cpus_per_task) {
    cpus = int64_t{*o.cpus_per_task} * s.tasks_per_node;
    (*g)["cpu"] = std::to_string(cpus);
  } else if (o.cpus_per_gpu) {
    cpus = int64_t{*o.cpus_per_gpu} * s.gpus;
  } else {
    cpus = s.tasks_per_node;  // Slurm's default: one CPU per task
    if (!s.gpus) (*g)["cpu"] = std::to_string(cpus);
  }
  if (o.mem_mib) (*g)["memory"] = ExactMemory(*o.mem_mib);
  if (o.mem_per_cpu_mib) {
    if (o.mem_mib || o.mem_per_gpu_mib) {
      d->errors.push_back(WhereSet(o, "mem-per-cpu") + ": --mem-per-cpu and " +
                          (o.mem_mib ? "--mem (" + WhereSet(o, "mem")
                                     : "--mem-per-gpu (" + WhereSet(o, "mem-per-gpu")) +
                          ") both ask memory, which sbatch refuses too; give one of them");
    } else {
      (*g)["memory"] = ExactMemory(*o.mem_per_cpu_mib * cpus);
    }
  }
  AddNodeRequirements(o, s, site, g, d);
}

}  // namespace hangar::cli::sbatch
