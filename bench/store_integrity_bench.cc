// store_integrity_bench: what the store's integrity checks cost. Builds a SQLite store of
// --jobs jobs (1.5 KB specs, placements, three events each) through the store itself, then times
// PRAGMA integrity_check (at open) and quick_check (the scheduled one), three times each, and a
// whole Load for comparison. Prints figures; asserts nothing.
//   store_integrity_bench [--jobs 100000] [--dir /tmp]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "controller/store/state_store.h"
#include "controller/store/store_integrity.h"

using namespace hangar::controller;
using hangar::Status;

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 100000;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--jobs")) jobs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  const std::string path =
      dir + "/store-integrity-bench-" + std::to_string(::getpid()) + "/state.db";
  {
    auto store = OpenStore("sqlite://" + path);
    if (!store.ok()) return std::fprintf(stderr, "%s\n", store.status().ToString().c_str()), 1;
    const std::string spec =
        "{\"name\":\"train\",\"tasks\":[{\"replicas\":4,\"gpus\":8,\"command\":[\"torchrun\","
        "\"train.py\"],\"env\":{\"A\":\"" +
        std::string(1400, 'a') + "\"}}]}";
    for (int base = 0; base < jobs; base += 10000) {
      StoreBatch b;
      for (int i = base + 1; i <= std::min(jobs, base + 10000); ++i) {
        JobRow j;
        j.id = static_cast<uint64_t>(i);
        j.name = "job-" + std::to_string(i);
        j.queue = "default";
        j.user = "user" + std::to_string(i % 50);
        j.state = i % 10 ? "succeeded" : "running";
        j.SetSpec(spec);
        j.placement_json = R"({"tasks":[{"node":"gpu-001","gpus":[0,1,2,3,4,5,6,7]}]})";
        b.jobs.push_back(std::move(j));
        for (const char* what : {"submitted", "started on gpu-001", "succeeded"}) {
          b.events.push_back({0, i, "job", "job/" + std::to_string(i), what});
        }
      }
      if (Status s = (*store)->Commit(b); !s.ok())
        return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    }
  }
  std::printf("store of %d jobs: %.1f MB\n", jobs, std::filesystem::file_size(path) / 1e6);
  for (bool thorough : {true, false}) {
    for (int run = 0; run < 3; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      Status s = CheckSqliteFile(path, thorough);
      std::printf("%-16s %7.1f ms  %s\n", thorough ? "integrity_check" : "quick_check", MsSince(t0),
                  s.ok() ? "ok" : s.message().c_str());
    }
  }
  {
    auto store = OpenStore("sqlite://" + path);
    const auto t0 = std::chrono::steady_clock::now();
    auto c = (*store)->Load();
    std::printf("%-16s %7.1f ms  (%zu jobs; for comparison)\n", "Load", MsSince(t0),
                c.ok() ? c->jobs.size() : 0);
  }
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  return 0;
}
