// The history sampler (history.h): what one sample counts on a cluster with a busy job, an idle
// job and a queue; the sampler committing through the state owner with the upkeep that bounds it;
// the buckets GET /v1/history answers; and the flags.
#include "controller/history.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "controller/state_owner.h"
#include "controller/web_ui.h"

namespace hangar::controller {
namespace {

constexpr const char* kTwoNodes =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: a}, {name: b}]\n";

std::unique_ptr<ClusterState> TwoNodes() {
  auto f = cluster::ParseClusterYaml(kTwoNodes, "c.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  ControllerOptions o;
  o.require_validation = false;
  auto st = std::make_unique<ClusterState>(f->topology, o, sched::Scheduler::Create({}).value());
  for (const char* n : {"a", "b"}) {
    pb::Register r;
    r.mutable_inventory()->set_node(n);
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    Effects fx;
    EXPECT_TRUE(st->OnRegister(r, 0, &fx).ok());
  }
  return st;
}

void Submit(ClusterState& st, const std::string& yaml) {
  auto spec = job::ParseJobSpec(yaml, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Effects fx;
  ASSERT_TRUE(st.Submit(*spec, 1, &fx).ok());
}

// Node `node`'s GPUs report `util` percent.
void Utilisation(ClusterState& st, const std::string& node, uint32_t util) {
  pb::Heartbeat hb;
  for (int i = 0; i < 8; ++i) {
    auto* g = hb.add_gpus();
    g->set_index(i);
    g->set_util_pct(util);
  }
  st.OnHeartbeat(node, hb, 3);
}

TEST(HistorySampleTest, CountsHeldGpusAsBusyOrIdleAndTheQueue) {
  auto st = TwoNodes();
  Submit(*st, "name: one\ntasks:\n  - {gpus: 8, command: [train]}\n");
  Submit(*st, "name: half\ntasks:\n  - {gpus: 4, command: [train]}\n");
  Submit(*st, "name: big\ntasks:\n  - {gpus: 8, command: [train]}\n");  // waits: 4 GPUs left
  Effects fx;
  st->Schedule(2, &fx);
  // Whichever node holds the 8-GPU job is busy; the other (4 held) reports nothing: idle.
  const std::string full = web::MapJson(*st)["nodes"][0][4] == "iiiiiiii" ? "a" : "b";
  Utilisation(*st, full, 90);
  const HistoryRow r = SampleCluster(*st, 5000, kMinute);
  EXPECT_EQ(r.time, 5000);
  EXPECT_EQ(r.step, kMinute);
  EXPECT_DOUBLE_EQ(r.gpus, 16);
  EXPECT_DOUBLE_EQ(r.allocated, 12);
  EXPECT_DOUBLE_EQ(r.busy, 8);
  EXPECT_DOUBLE_EQ(r.idle, 4) << "held but below the idle threshold: the waste";
  EXPECT_DOUBLE_EQ(r.pending, 1);
  EXPECT_DOUBLE_EQ(r.running, 0) << "placed, not yet started by an agent";
}

TEST(HistorySampleTest, AGpuSharedByFractionsCountsItsHeldShare) {
  auto st = TwoNodes();
  Submit(*st, "name: half\ntasks:\n  - {gpu_fraction: 0.5, gpu_memory: 20Gi, command: [train]}\n");
  Submit(*st, "name: q\ntasks:\n  - {gpu_fraction: 0.25, gpu_memory: 10Gi, command: [train]}\n");
  Effects fx;
  st->Schedule(2, &fx);
  const HistoryRow r = SampleCluster(*st, 5000, kMinute);
  EXPECT_DOUBLE_EQ(r.allocated, 0.75);
  EXPECT_DOUBLE_EQ(r.busy + r.idle, 0.75) << "not a whole GPU for each GPU partly held";
}

TEST(HistorySamplerTest, SamplesGoToTheStoreWithTheUpkeepOncePerHour) {
  ManualClock clock(10 * kHistoryHour + 5 * kMinute);
  StateOwner owner(TwoNodes(), NewMemoryStore(), &clock);
  owner.Start();
  HistoryOptions o;
  o.interval = kMinute;
  o.keep_samples = 2 * kHistoryHour;
  HistorySampler sampler(&owner, o);
  // An old sample, before the retention: the first upkeep drops it and rolls its hour up.
  owner.Call<int>([](ClusterState&, Effects* fx) {
    fx->batch.history.push_back({7 * kHistoryHour + kMinute, kMinute, 16, 8, 4, 4, 2, 1});
    return 0;
  });
  sampler.SampleNow();
  clock.Advance(kMinute);
  sampler.SampleNow();
  (void)owner.Call<int>([](ClusterState&, Effects*) { return 0; });  // after the samples' commit
  auto samples = owner.History(false, 0);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 2u) << "the old sample is past --history-samples";
  EXPECT_EQ((*samples)[0].time, 10 * kHistoryHour + 5 * kMinute);
  EXPECT_DOUBLE_EQ((*samples)[0].gpus, 16);
  auto hours = owner.History(true, 0);
  ASSERT_TRUE(hours.ok());
  ASSERT_EQ(hours->size(), 1u);
  EXPECT_EQ((*hours)[0].time, 7 * kHistoryHour);
  EXPECT_DOUBLE_EQ((*hours)[0].allocated, 8);
  owner.Stop();
}

TEST(HistoryBucketTest, AveragesIntoStepsAndUsesHoursOnlyBeforeTheFirstSample) {
  const std::vector<HistoryRow> hourly = {{0, kHistoryHour, 16, 2, 1, 1, 0, 1},
                                          {kHistoryHour, kHistoryHour, 16, 4, 2, 2, 1, 1},
                                          {2 * kHistoryHour, kHistoryHour, 16, 99, 0, 0, 0, 0}};
  const std::vector<HistoryRow> samples = {
      {2 * kHistoryHour + kMinute, kMinute, 16, 6, 3, 3, 2, 2},
      {2 * kHistoryHour + 2 * kMinute, kMinute, 16, 10, 5, 5, 4, 2},
      {2 * kHistoryHour + 11 * kMinute, kMinute, 16, 8, 8, 0, 0, 2}};
  const auto out = Bucket(hourly, samples, kHistoryHour, 10 * kMinute);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].time, kHistoryHour) << "hour 0 is before `since`";
  EXPECT_EQ(out[0].step, kHistoryHour) << "a roll-up spans its hour";
  EXPECT_DOUBLE_EQ(out[0].allocated, 4);
  EXPECT_EQ(out[1].time, 2 * kHistoryHour) << "the samples' hour is not taken from its roll-up";
  EXPECT_EQ(out[1].step, 10 * kMinute);
  EXPECT_DOUBLE_EQ(out[1].allocated, 8);
  EXPECT_DOUBLE_EQ(out[1].pending, 3);
  EXPECT_EQ(out[2].time, 2 * kHistoryHour + 10 * kMinute);
  EXPECT_DOUBLE_EQ(out[2].busy, 8);
}

TEST(HistoryOptionsTest, FlagsAreDurationsThatFitTogether) {
  auto o = HistoryOptions::Parse("10s", "48h", "30d");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->interval, 10 * kSecond);
  EXPECT_EQ(o->keep_samples, 48 * kHour);
  EXPECT_EQ(o->keep_hourly, 30 * kDay);
  EXPECT_EQ(HistoryOptions::Parse("often", "48h", "30d").status().message(),
            "--history-interval often is not a positive duration; write it as 60s, 48h or 30d");
  EXPECT_FALSE(HistoryOptions::Parse("2h", "48h", "30d").ok());
  EXPECT_FALSE(HistoryOptions::Parse("60s", "30s", "30d").ok());
  EXPECT_EQ(DefaultStep(*o, 6 * kHour), 60 * kSecond) << "6h in at most 360 steps, whole intervals";
  EXPECT_EQ(DefaultStep(*o, kHour), 10 * kSecond);
}

}  // namespace
}  // namespace hangar::controller
