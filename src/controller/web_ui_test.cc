// The dashboard's compact reads (web_ui.h): map cells by state, and the queue's positions and
// estimated starts as the last cycle left them.
#include "controller/web_ui.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "controller/live_feed.h"
#include "controller/state_owner.h"

namespace hangar::controller {
namespace {

TEST(GpuCodeTest, NodeStateThenHealthThenAllocation) {
  EXPECT_EQ(web::GpuCode("healthy", "ready", false, 0), 'f');
  EXPECT_EQ(web::GpuCode("healthy", "ready", true, 90), 'a');
  EXPECT_EQ(web::GpuCode("healthy", "ready", true, 2), 'i');
  EXPECT_EQ(web::GpuCode("suspect", "ready", true, 90), 's');
  EXPECT_EQ(web::GpuCode("degraded", "ready", false, 0), 's');
  EXPECT_EQ(web::GpuCode("pending_validation", "ready", false, 0), 'v');
  EXPECT_EQ(web::GpuCode("healthy", "draining", true, 90), 'd');
  EXPECT_EQ(web::GpuCode("quarantined", "draining", false, 0), 'q');
  EXPECT_EQ(web::GpuCode("failed", "ready", false, 0), 'q');
  EXPECT_EQ(web::GpuCode("healthy", "lost", true, 90), 'o');
  EXPECT_EQ(web::GpuCode("healthy", "drained", false, 0), 'o');
}

std::unique_ptr<ClusterState> StateWith(const std::string& yaml,
                                        const std::vector<std::string>& nodes) {
  auto f = cluster::ParseClusterYaml(yaml, "c.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return nullptr;
  ControllerOptions o;
  o.require_validation = false;
  auto st = std::make_unique<ClusterState>(f->topology, o, sched::Scheduler::Create({}).value());
  for (const std::string& n : nodes) {
    pb::Register r;
    r.mutable_inventory()->set_node(n);
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    Effects fx;
    EXPECT_TRUE(st->OnRegister(r, 0, &fx).ok());
  }
  return st;
}

constexpr const char* kTwoNodes =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: a}, {name: b}]\n";

std::string Gunzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(in.size() * 40 + 1024, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

class DashboardViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = StateWith(kTwoNodes, {"a", "b"});
    ASSERT_TRUE(state_);
  }
  uint64_t Submit(const std::string& yaml, Time now) {
    auto spec = job::ParseJobSpec(yaml, "job.yaml");
    EXPECT_TRUE(spec.ok());
    Effects fx;
    auto id = state_->Submit(*spec, now, &fx);
    EXPECT_TRUE(id.ok());
    return id.ok() ? *id : 0;
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(DashboardViewsTest, MapHasOneLetterPerGpuInFabricOrder) {
  Submit("name: one\ntasks:\n  - {gpus: 8, command: [train]}\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  const nlohmann::json m = web::MapJson(*state_);
  ASSERT_EQ(m["nodes"].size(), 2u);
  const std::string a = m["nodes"][0][4], b = m["nodes"][1][4];
  EXPECT_EQ(m["nodes"][0][0], "a");
  // One node is wholly held (idle: no utilisation reported yet), the other free.
  EXPECT_TRUE((a == "iiiiiiii" && b == "ffffffff") || (a == "ffffffff" && b == "iiiiiiii"))
      << m.dump();
  EXPECT_EQ(m["nodes"][0][5].size(), 8u);
  ASSERT_EQ(m["nodes"][0].size(), 9u);
  // The busy node names its job; whole GPUs are no shares.
  const auto& busy = a == "iiiiiiii" ? m["nodes"][0] : m["nodes"][1];
  EXPECT_EQ(busy[7], nlohmann::json::array({1}));
  EXPECT_TRUE(busy[8].empty()) << busy.dump();
}

TEST_F(DashboardViewsTest, MapRowsShowFractionsOfAGpu) {
  const uint64_t half = Submit(
      "name: half\ntasks:\n  - {gpu_fraction: 0.5, gpu_memory: 20Gi, command: [train]}\n", 1);
  const uint64_t quarter =
      Submit("name: q\ntasks:\n  - {gpu_fraction: 0.25, gpu_memory: 10Gi, command: [train]}\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  const nlohmann::json m = web::MapJson(*state_);
  nlohmann::json shares = nlohmann::json::array();
  for (const auto& row : m["nodes"]) {
    for (const auto& s : row[8]) shares.push_back(s);
  }
  // [gpu, job, milli, mig_start (-1: a fraction), mig_slices]
  ASSERT_EQ(shares.size(), 2u) << m.dump();
  std::map<uint64_t, int> milli;
  for (const auto& s : shares) {
    EXPECT_EQ(s[3], -1);
    EXPECT_EQ(s[4], 0);
    milli[s[1].get<uint64_t>()] = s[2];
  }
  EXPECT_EQ(milli[half], 500);
  EXPECT_EQ(milli[quarter], 250);
}

TEST(DashboardMapTest, MigInstancesAreSlicesOfTheirGpu) {
  auto st = StateWith(
      "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: "
      "512Gi}\n"
      "nodes: [{name: m, mig: true}]\n",
      {"m"});
  ASSERT_TRUE(st);
  auto spec = job::ParseJobSpec(
      "name: mig\ntasks:\n  - {replicas: 2, mig: 3g.40gb, command: [train]}\n", "j");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Effects fx;
  auto id = st->Submit(*spec, 1, &fx);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  st->Schedule(2, &fx);
  const nlohmann::json m = web::MapJson(*st);
  const auto& shares = m["nodes"][0][8];
  ASSERT_EQ(shares.size(), 2u) << m.dump();
  // 3g.40gb takes 4 of the 8 memory slices; two of them fill one GPU, at starts 0 and 4, or
  // two GPUs.
  for (const auto& s : shares) {
    EXPECT_EQ(s[1], *id);
    EXPECT_EQ(s[4], 4) << s.dump();
    EXPECT_TRUE(s[3] == 0 || s[3] == 4) << s.dump();
  }
}

TEST(DashboardMapTest, BodyIsValidJsonAndGzipRoundTrips) {
  web::MapData d;
  d.cluster = "c\"1";
  d.spines = {"s"};
  d.leaves = {"l"};
  d.nodes = {{"n\\x", "ready", 0, 0, 0, 2}};
  d.codes = "fa";
  d.util = {0, 97};
  d.temp = {30, 71};
  d.holders = {{1, 42}};
  const auto rows = web::MapRows(d);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], R"(["n\\x","s","l","ready","fa",[0,97],[30,71],[42],[]])");
  const std::string body = web::MapBody(d.cluster, rows, 7);
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["cluster"], "c\"1");
  EXPECT_EQ(j["snapshot"], 7);
  EXPECT_EQ(Gunzip(web::Gzip(body)), body);
}

// The map snapshot: built off the state thread once a second while read, served from the cache
// in between, and the feed sends only the rows that changed.
TEST(LiveFeedTest, SharesOneSnapshotAndSendsOnlyChangedRows) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hangar-feed-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto store = OpenSqliteStore((dir / "state.db").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  StateOwner owner(StateWith(kTwoNodes, {"a", "b"}), std::move(*store), SystemClock::Default());
  owner.Start();
  {
    LiveFeed feed(&owner);
    const auto first = feed.Map();
    ASSERT_TRUE(first);
    EXPECT_EQ(feed.Map(), first) << "a second read within a second builds again";
    EXPECT_EQ(nlohmann::json::parse(first->body)["nodes"].size(), 2u);
    EXPECT_EQ(Gunzip(first->gzip), first->body);
    LiveFeed::Sent sent;
    std::string all = feed.NextEvents(&sent);
    EXPECT_NE(all.find("event: gpus\ndata: {\"nodes\":[[0,\"a\""), std::string::npos) << all;
    EXPECT_NE(all.find("[1,\"b\""), std::string::npos) << all;
    EXPECT_EQ(feed.NextEvents(&sent), "") << "nothing changed";
    owner.Call<int>([](ClusterState& st, Effects* fx) {
      auto spec = job::ParseJobSpec("name: one\ntasks:\n  - {gpus: 8, command: [train]}\n", "j");
      EXPECT_TRUE(st.Submit(*spec, 1, fx).ok());
      st.Schedule(2, fx);
      return 0;
    });
    std::string next;
    for (int i = 0; i < 40 && next.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      next = feed.NextEvents(&sent);
    }
    // One node took the job: only its row, and the jobs' generation moved.
    EXPECT_NE(next.find("\"iiiiiiii\""), std::string::npos) << next;
    EXPECT_EQ(next.find("\"ffffffff\""), std::string::npos) << next;
    EXPECT_NE(next.find("event: jobs"), std::string::npos) << next;
    EXPECT_EQ(feed.Recent(sent.last->seq), sent.last);
    EXPECT_GT(sent.last->seq, first->seq);
    feed.Stop();
  }
  owner.Stop();
  std::filesystem::remove_all(dir);
}

TEST_F(DashboardViewsTest, QueueGivesPositionsAndTheReservationsEstimatedStart) {
  Submit("name: running\ntime_limit: 1h\ntasks:\n  - {gpus: 8, command: [train]}\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  const uint64_t big =
      Submit("name: big\nuser: alice\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n", 3);
  const uint64_t next =
      Submit("name: next\nuser: bob\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n", 4);
  Principal admin;
  nlohmann::json q = web::QueueJson(*state_, admin, 0, 10);
  // Before a cycle has seen them: in submission order, no estimate.
  ASSERT_EQ(q["total"], 2);
  EXPECT_EQ(q["jobs"][0]["id"], big);
  EXPECT_TRUE(q["jobs"][0]["estimated_start_ms"].is_null());
  state_->Schedule(5, &fx);
  q = web::QueueJson(*state_, admin, 0, 10);
  ASSERT_EQ(q["jobs"].size(), 2u) << q.dump(2);
  EXPECT_EQ(q["jobs"][0]["id"], big);
  EXPECT_EQ(q["jobs"][0]["position"], 1);
  EXPECT_EQ(q["jobs"][1]["id"], next);
  EXPECT_EQ(q["jobs"][1]["position"], 2);
  EXPECT_NE(q["jobs"][0]["reason"].get<std::string>().find("16"), std::string::npos) << q.dump(2);
  // The first blocked job holds the reservation: it starts when the running job's hour is up
  // (counted from this cycle, as its tasks have not reported running).
  ASSERT_FALSE(q["jobs"][0]["estimated_start_ms"].is_null()) << q.dump(2);
  EXPECT_EQ(q["jobs"][0]["estimated_start_ms"], 5 + kHour);
  // bob sees only his job, still second in line.
  Principal bob{.user = "bob", .role = Role::kUser};
  q = web::QueueJson(*state_, bob, 0, 10);
  EXPECT_EQ(q["total"], 1);
  ASSERT_EQ(q["jobs"].size(), 1u);
  EXPECT_EQ(q["jobs"][0]["position"], 2);
  // Paging: offset 1 of the admin's view is the second job.
  q = web::QueueJson(*state_, admin, 1, 10);
  ASSERT_EQ(q["jobs"].size(), 1u);
  EXPECT_EQ(q["jobs"][0]["id"], next);
  // A job submitted since the cycle comes after those the cycle ordered.
  const uint64_t late = Submit("name: late\ntasks:\n  - {gpus: 1, command: [train]}\n", 6);
  q = web::QueueJson(*state_, admin, 0, 10);
  ASSERT_EQ(q["jobs"].size(), 3u) << q.dump(2);
  EXPECT_EQ(q["jobs"][0]["id"], big);
  EXPECT_EQ(q["jobs"][1]["id"], next);
  EXPECT_EQ(q["jobs"][2]["id"], late);
  EXPECT_EQ(q["jobs"][2]["position"], 3);
}

}  // namespace
}  // namespace hangar::controller
