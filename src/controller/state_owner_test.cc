// The state owner's promise on stop: what was posted before Stop() is committed, lazy rows (the
// audit log) included.
#include "controller/state_owner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "cluster/cluster_yaml.h"
#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

TEST(StateOwnerTest, StopCommitsWhatWasPostedBeforeIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("hangar-owner-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "state.db").string();
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: [{name: a}]\n", "c.yaml");
  ASSERT_TRUE(f.ok());
  {
    auto store = OpenSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ControllerOptions o;
    StateOwner owner(std::make_unique<ClusterState>(f->topology, o, sched::Scheduler::Create({}).value()),
                     std::move(*store), SystemClock::Default());
    owner.Start();
    for (int i = 0; i < 3; ++i) {
      AuditRow row;
      row.time = 1000 + i;
      row.user = "alice";
      row.method = "POST";
      row.path = "/v1/jobs";
      row.status = 201;
      owner.RecordAudit(row);  // lazy: it waits for the owner's next commit
    }
    owner.Stop();  // at once, before the next tick
  }
  auto reopened = OpenSqliteStore(db);
  ASSERT_TRUE(reopened.ok());
  auto rows = (*reopened)->Audit("alice", 10);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 3u) << "a controller stopped with SIGTERM keeps the audit rows of the calls it answered";
  reopened->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hangar::controller
