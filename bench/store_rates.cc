#include "store_rates.h"

#include "common/time.h"
#include "controller/store/state_store.h"

namespace hangar::bench {
namespace {

controller::JobRow Job(uint64_t id) {
  controller::JobRow j;
  j.id = id;
  j.name = "one";
  j.queue = "default";
  j.user = "bench";
  j.state = "running";
  // About the size of a 1-GPU job's spec and placement in the controller's rows.
  j.SetSpec(
      R"({"name":"one","tasks":[{"gpus":1,"command":["sleep","20"],"replicas":1}],"priority":0})");
  j.placement_json = R"({"tasks":[{"node":"node-0001","gpus":[3],"rank":0}]})";
  j.submitted = j.started = 1'700'000'000'000;
  j.attempt = 1;
  return j;
}

}  // namespace

StatusOr<StoreRates> MeasureStoreRates(const std::string& url) {
  HANGAR_ASSIGN_OR_RETURN(auto store, controller::OpenStore(url));
  StoreRates r;
  uint64_t id = 1;
  int commits = 0;
  const int64_t t0 = MonotonicNanos();
  while (MonotonicNanos() - t0 < 2'000'000'000LL) {
    controller::StoreBatch b;
    b.jobs = {Job(id++)};
    HANGAR_RETURN_IF_ERROR(store->Commit(b));
    ++commits;
  }
  r.one_row_commits_per_s = commits / ((MonotonicNanos() - t0) / 1e9);
  const int batches = 10;
  const int64_t t1 = MonotonicNanos();
  for (int i = 0; i < batches; ++i) {
    controller::StoreBatch b;
    for (int k = 0; k < 1000; ++k) b.jobs.push_back(Job(id++));
    HANGAR_RETURN_IF_ERROR(store->Commit(b));
  }
  r.batch_1000_ms = (MonotonicNanos() - t1) / 1e6 / batches;
  return r;
}

}  // namespace hangar::bench
