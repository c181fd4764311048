// bench/gang_start (issue 17): placed -> all tasks running for an 8-task gang on 8 real agents on
// loopback, each with its own podman store, pulling from a loopback docker-registry:
//   bare      the gang as plain processes
//   warm      in containers, the image already on every node
//   cold      in containers, the image (S MB) on no node
//   prestaged the image cold when the gang is reserved behind a blocker (EASY backfill): its
//             nodes pull while it waits; timed from the blocker's GPUs freed to all running
// Prints warm_overhead_ms (median over runs of warm minus bare), cold_s, prestaged_s and the
// GPU-seconds held while staging in each case.
//   gang_start [--json] [--image-mb S] [--runs N] [--nodes N]
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "local_cluster.h"
#include "loopback_registry.h"

using hangar::Duration;
using hangar::kSecond;
using hangar::testing::LocalCluster;
using hangar::testing::LoopbackRegistry;
namespace fs = std::filesystem;

namespace {

struct Args {
  bool json = false;
  int image_mb = 512;
  int runs = 3;
  int nodes = 8;
};

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Run {
  double placed_to_running_ms = 0;
  double staging_gpu_s = 0;
  bool ok = false;
};

// When the job was placed, from its events; 0 if not found.
double PlacedAt(LocalCluster& c, uint64_t id) {
  const std::string subject = "job/" + std::to_string(id);
  for (const auto& e : c.Get("/v1/events?limit=500").value("events", nlohmann::json::array())) {
    if (e.value("subject", "") == subject && e.value("message", "").rfind("placed", 0) == 0) {
      return e.value("time_ms", 0.0);
    }
  }
  return 0;
}

// Each task touches <out>/<name>.<rank> when its command starts (in the container, not when podman
// is spawned): the gang runs when all have.
std::string g_out;  // the host folder, mounted at /out in containers

std::string GangSpec(const std::string& name, const std::string& image, int n,
                     const std::string& extra = "") {
  const std::string dir = image.empty() ? g_out : "/out";
  const std::string mounts = image.empty() ? "" : ", mounts: ['" + g_out + ":/out:rw']";
  return "name: " + name + "\n" + (image.empty() ? "" : "image: " + image + "\n") + extra +
         "tasks: [{replicas: " + std::to_string(n) + ", gpus: 1" + mounts +
         ", command: ['/bin/sh', '-c', 'touch " + dir + "/" + name +
         ".$HANGAR_JOB_ID.$RANK; exec sleep 600']}]\n";
}

// The latest modification time of <g_out>/<prefix><r> for r in [0, n), in ms since the epoch; 0
// unless all exist.
double LatestMtime(const std::string& prefix, int n) {
  double last = 0;
  for (int r = 0; r < n; ++r) {
    struct stat st {};
    if (stat((g_out + "/" + prefix + std::to_string(r)).c_str(), &st) != 0) return 0;
    last = std::max(last, st.st_mtim.tv_sec * 1000.0 + st.st_mtim.tv_nsec / 1e6);
  }
  return last;
}

// When the last task of job `id` started its command; 0 if not all did.
double AllStartedAt(const std::string& name, uint64_t id, int n) {
  return LatestMtime(name + "." + std::to_string(id) + ".", n);
}

double WaitAllStarted(const std::string& name, uint64_t id, int n) {
  double at = 0;
  LocalCluster::WaitFor([&] { return (at = AllStartedAt(name, id, n)) > 0; }, 120 * kSecond);
  return at;
}

uint64_t Submit(LocalCluster& c, const std::string& spec) {
  int status = 0;
  auto r = c.Post("/v1/jobs", spec, &status);
  if (status != 201) std::fprintf(stderr, "submit: %s\n", r.dump().c_str());
  return r.value("id", uint64_t{0});
}

void CancelAndWait(LocalCluster& c, uint64_t id, int nodes) {
  int status = 0;
  c.Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  LocalCluster::WaitFor(
      [&] {
        double free = 0;
        for (const auto& n : c.Get("/v1/nodes").value("nodes", nlohmann::json::array()))
          free += n.value("gpus_free", 0.0);
        return free >= nodes;
      },
      60 * kSecond);
}

Run TimeGang(LocalCluster& c, const std::string& image, int nodes) {
  Run r;
  const uint64_t id = Submit(c, GangSpec("gang", image, nodes));
  if (!id || !c.WaitForJobState(id, "running", 600 * kSecond)) {
    std::fprintf(stderr, "gang %lu did not run: %s\n", static_cast<unsigned long>(id),
                 c.Job(id).dump().c_str());
    return r;
  }
  const double started = WaitAllStarted("gang", id, nodes);
  auto job = c.Job(id);
  const double placed = PlacedAt(c, id);
  r.placed_to_running_ms = started - placed;
  r.staging_gpu_s = job.value("staging_gpu_ms", 0.0) / 1000.0;
  r.ok = placed > 0 && started > 0;
  CancelAndWait(c, id, nodes);
  return r;
}

// The gang is reserved behind a blocker that holds every GPU; its image is cold. Once its nodes
// hold the image, the blocker is cancelled: freed -> all running.
Run TimePrestaged(LocalCluster& c, const std::string& image, int nodes) {
  Run r;
  const uint64_t blocker = Submit(c, GangSpec("blocker", "", nodes, "time_limit: 10m\n"));
  if (!c.WaitForJobState(blocker, "running", 60 * kSecond)) return r;
  const uint64_t id = Submit(c, GangSpec("reserved", image, nodes));
  const std::string digest = image.substr(image.find('@') + 1);
  // Wait until every node reports the image (the pre-stage pulls), then free the GPUs.
  const bool warm = LocalCluster::WaitFor(
      [&] {
        int holding = 0;
        for (int i = 1; i <= nodes; ++i) {
          const std::string dir = c.dir() + "/agents/node-" + std::to_string(i) + "/images.json";
          holding += hangar::testing::ReadFile(dir).find(digest) != std::string::npos;
        }
        return holding == nodes;
      },
      600 * kSecond);
  if (!warm) std::fprintf(stderr, "the reserved gang's image was not pre-staged on every node\n");
  int status = 0;
  const double freed = NowMs();
  c.Post("/v1/jobs/" + std::to_string(blocker) + "/cancel", "", &status);
  if (!c.WaitForJobState(id, "running", 120 * kSecond)) return r;
  const double started = WaitAllStarted("reserved", id, nodes);
  auto job = c.Job(id);
  r.placed_to_running_ms = started - freed;
  r.staging_gpu_s = job.value("staging_gpu_ms", 0.0) / 1000.0;
  r.ok = warm && started > 0;
  CancelAndWait(c, id, nodes);
  return r;
}

// The reference pinned to its digest (what the job runs; staging is recorded by digest).
std::string Pinned(const std::string& ref) {
  auto r = hangar::RunCommand(
      {"skopeo", "inspect", "--tls-verify=false", "--format", "{{.Digest}}", "docker://" + ref});
  if (!r.ok() || !r->ok()) return ref;
  std::string d = r->out;
  while (!d.empty() && d.back() == '\n') d.pop_back();
  return ref.substr(0, ref.rfind(':')) + "@" + d;
}

// The floor: `podman run`s of the same image started together, one in each node's store (as the
// agents run them), timed to the last container's command starting. What the agent adds is
// warm_ms minus this.
double PodmanFloorMs(LocalCluster& c, const std::string& image, int nodes) {
  const double start = NowMs();
  std::vector<std::thread> runs;
  for (int i = 1; i <= nodes; ++i) {
    runs.emplace_back([&, i] {
      const std::string d = c.dir() + "/agents/node-" + std::to_string(i) + "/podman";
      hangar::CommandOptions o;
      o.env = {{"CONTAINERS_CONF", d + "/containers.conf"}};
      (void)hangar::RunCommand({"podman",
                                "--root",
                                d + "/storage",
                                "--runroot",
                                d + "/run",
                                "--tmpdir",
                                d + "/tmp",
                                "run",
                                "--rm",
                                "--pull=never",
                                "--network",
                                "host",
                                "--log-driver",
                                "none",
                                "--init",
                                "-v",
                                g_out + ":/out:rw",
                                image,
                                "touch",
                                "/out/floor." + std::to_string(i - 1)},
                               o);
    });
  }
  for (auto& t : runs) t.join();
  const double last = LatestMtime("floor.", nodes);
  for (int r = 0; r < nodes; ++r) fs::remove(g_out + "/floor." + std::to_string(r));
  return last > 0 ? last - start : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--json")
      a.json = true;
    else if (s == "--image-mb" && i + 1 < argc)
      a.image_mb = std::atoi(argv[++i]);
    else if (s == "--runs" && i + 1 < argc)
      a.runs = std::atoi(argv[++i]);
    else if (s == "--nodes" && i + 1 < argc)
      a.nodes = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: gang_start [--json] [--image-mb S] [--runs N] [--nodes N]\n");
      return 2;
    }
  }
  const std::string scratch =
      fs::temp_directory_path() / ("hangar-gang-start-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  int rc = 0;
  {
    LoopbackRegistry reg(scratch);
    if (!reg.ok()) return 1;
    std::string yaml =
        "node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: "
        "32Gi}\nnodes: [";
    for (int i = 1; i <= a.nodes; ++i)
      yaml += std::string(i > 1 ? ", " : "") + "{name: node-" + std::to_string(i) + "}";
    g_out = scratch + "/out";
    fs::create_directories(g_out);
    LocalCluster c(yaml + "]\ncontainers: {mounts_allowed: [" + scratch + "]}\n");
    c.StartController();
    for (int i = 1; i <= a.nodes; ++i) c.StartAgent("node-" + std::to_string(i));
    c.WaitForAgents(a.nodes, 60 * kSecond);
    LocalCluster::WaitFor(
        [&] {
          int ready = 0;
          for (const auto& n : c.Get("/v1/nodes").value("nodes", nlohmann::json::array()))
            ready += n.value("state", "") == "ready";
          return ready == a.nodes;
        },
        60 * kSecond);
    std::vector<double> bare, warm, overhead, cold, cold_gpu, pre, pre_gpu, warm_gpu, floor;
    for (int run = 0; run < a.runs; ++run) {
      const std::string tag = std::to_string(run);
      const std::string image = Pinned(reg.Push("bench/train", "cold" + tag, {}, a.image_mb));
      const std::string later = Pinned(reg.Push("bench/train", "pre" + tag, {}, a.image_mb));
      Run k = TimeGang(c, image, a.nodes);  // cold on every node
      Run w = TimeGang(c, image, a.nodes);  // now warm on every node
      Run b = TimeGang(c, "", a.nodes);
      Run p = TimePrestaged(c, later, a.nodes);
      floor.push_back(PodmanFloorMs(c, image, a.nodes));
      if (!(k.ok && w.ok && b.ok && p.ok)) rc = 1;
      cold.push_back(k.placed_to_running_ms / 1000);
      cold_gpu.push_back(k.staging_gpu_s);
      warm.push_back(w.placed_to_running_ms);
      warm_gpu.push_back(w.staging_gpu_s);
      bare.push_back(b.placed_to_running_ms);
      overhead.push_back(w.placed_to_running_ms - b.placed_to_running_ms);
      pre.push_back(p.placed_to_running_ms / 1000);
      pre_gpu.push_back(p.staging_gpu_s);
      std::fprintf(stderr,
                   "run %d: bare %.0f ms, warm %.0f ms, cold %.1f s, prestaged %.2f s, %d podman "
                   "runs %.0f ms\n",
                   run, b.placed_to_running_ms, w.placed_to_running_ms,
                   k.placed_to_running_ms / 1000, p.placed_to_running_ms / 1000, a.nodes,
                   floor.back());
    }
    const double wo = Median(overhead), cs = Median(cold), ps = Median(pre);
    if (a.json) {
      std::printf(
          "{\"nodes\": %d, \"image_mb\": %d, \"runs\": %d, \"bare_ms\": %.0f, \"warm_ms\": %.0f, "
          "\"warm_overhead_ms\": %.0f, \"podman_runs_together_ms\": %.0f, \"cold_s\": %.2f, "
          "\"prestaged_s\": %.2f, \"gpu_s_held_staging\": "
          "{\"cold\": %.2f, \"warm\": %.2f, \"prestaged\": %.2f}}\n",
          a.nodes, a.image_mb, a.runs, Median(bare), Median(warm), wo, Median(floor), cs, ps,
          Median(cold_gpu), Median(warm_gpu), Median(pre_gpu));
    } else {
      std::printf(
          "gang of %d, image %d MB, %d runs (medians)\n  bare %.0f ms, warm %.0f ms: "
          "warm_overhead_ms %.0f (podman runs together: %.0f ms)\n"
          "  cold_s %.2f (GPU-s held staging %.2f)\n  prestaged_s %.2f (GPU-s held staging %.2f)\n",
          a.nodes, a.image_mb, a.runs, Median(bare), Median(warm), wo, Median(floor), cs,
          Median(cold_gpu), ps, Median(pre_gpu));
    }
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return rc;
}
