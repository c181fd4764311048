#include "controller/reservation/reservation_book.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::controller::reservation {
namespace {

class ReservationBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
        "nodes: [{name: node-1}, {name: node-2}, {name: node-3}]\n",
        "c.yaml");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    topo_ = f->topology;
  }
  StatusOr<Reservation> Parse(const std::string& json) {
    return ParseRequest(nlohmann::json::parse(json), *topo_);
  }
  std::shared_ptr<const cluster::Topology> topo_;
};

constexpr Time kJan4 = 1799056800000;  // 2027-01-04T10:00:00Z

TEST_F(ReservationBookTest, ARequestNamesNodesAWindowAndWhoMayUseIt) {
  auto r = Parse(R"({"name": "maint1", "nodes": "node-[1-2]", "start": "2027-01-04T10:00:00Z",
                     "duration": "1h", "maintenance": true})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->nodes, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(r->start, kJan4);
  EXPECT_EQ(r->end, kJan4 + kHour);
  EXPECT_TRUE(r->maintenance);
  auto e = Parse(
      R"({"name": "r", "nodes": ["node-3"], "start": "2027-01-04T10:00", "end": "2027-01-05T10:00:00Z",
                     "users": ["alice"]})");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->end, kJan4 + kDay);
  EXPECT_EQ(e->users, std::vector<std::string>{"alice"});
}

TEST_F(ReservationBookTest, BadRequestsSayWhatToWrite) {
  auto unknown =
      Parse(R"({"name": "r", "nodes": "node-9", "start": "2027-01-04T10:00:00Z", "duration": "1h",
                           "users": ["a"]})");
  EXPECT_EQ(unknown.status().message(),
            "node 'node-9' is not in this cluster; `hangar nodes` lists them");
  auto both =
      Parse(R"({"name": "r", "nodes": "node-1", "start": "2027-01-04T10:00:00Z", "duration": "1h",
                        "end": "2027-01-04T12:00:00Z", "users": ["a"]})");
  EXPECT_NE(both.status().message().find("give the window's end or its duration"),
            std::string::npos);
  auto when = Parse(
      R"({"name": "r", "nodes": "node-1", "start": "tomorrow", "duration": "1h", "users": ["a"]})");
  EXPECT_EQ(when.status().message(),
            "start 'tomorrow' is not a time: write it in UTC, like 2027-01-04T10:00:00Z");
  auto nobody = Parse(
      R"({"name": "r", "nodes": "node-1", "start": "2027-01-04T10:00:00Z", "duration": "1h"})");
  EXPECT_NE(nobody.status().message().find("say who may run in the reservation"),
            std::string::npos);
  auto maint_users =
      Parse(R"({"name": "r", "nodes": "node-1", "start": "2027-01-04T10:00:00Z", "duration": "1h",
                               "maintenance": true, "users": ["a"]})");
  EXPECT_NE(maint_users.status().message().find("admits no jobs"), std::string::npos);
}

TEST_F(ReservationBookTest, OverlappingWindowsOnASharedNodeAreRefused) {
  ReservationBook book(*topo_);
  Reservation a;
  a.name = "a";
  a.nodes = {0, 1};
  a.start = 1000;
  a.end = 2000;
  a.users = {"alice"};
  ASSERT_TRUE(book.Add(a, 0).ok());
  Reservation b = a;
  b.name = "b";
  b.nodes = {1, 2};
  b.start = 1500;
  Status s = book.Add(b, 0);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("overlaps reservation 'a'"), std::string::npos) << s.message();
  b.start = 2000;  // back to back is fine
  b.end = 3000;
  EXPECT_TRUE(book.Add(b, 0).ok());
  Reservation c = a;
  c.nodes = {2};
  c.start = 5000;
  c.end = 6000;
  EXPECT_EQ(book.Add(c, 0).code(), StatusCode::kAlreadyExists);
  c.name = "past";
  c.end = 10;
  c.start = 5;
  EXPECT_EQ(book.Add(c, 100).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(book.windows().size(), 2u);
  EXPECT_EQ(book.WindowOf("b"), 1);
  EXPECT_EQ(book.windows()[1].nodes, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(book.Ended(2000), std::vector<std::string>{"a"});
  ASSERT_TRUE(book.Remove("a").ok());
  EXPECT_EQ(book.WindowOf("b"), 0);
  EXPECT_EQ(book.Remove("a").code(), StatusCode::kNotFound);
}

TEST_F(ReservationBookTest, OnlyItsUsersAndQueuesMayRunInside) {
  ReservationBook book(*topo_);
  Reservation r;
  r.name = "deadline";
  r.nodes = {0};
  r.start = 1000;
  r.end = 2000;
  r.users = {"alice"};
  r.queues = {"research"};
  r.created_by = "ops";
  ASSERT_TRUE(book.Add(r, 0).ok());
  EXPECT_TRUE(book.MayUse("deadline", "alice", "default").ok());
  EXPECT_TRUE(book.MayUse("deadline", "bob", "research").ok());
  Status bob = book.MayUse("deadline", "bob", "default");
  EXPECT_EQ(bob.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(bob.message(),
            "user 'bob' (queue 'default') may not run in reservation 'deadline'; it admits users "
            "[\"alice\"] and "
            "queues [\"research\"]: ask its owner (ops) to add you");
  EXPECT_EQ(book.MayUse("nope", "alice", "default").code(), StatusCode::kNotFound);
}

TEST_F(ReservationBookTest, TheStoredFormReadsBackAsItWas) {
  Reservation r;
  r.name = "m";
  r.nodes = {0, 2};
  r.start = kJan4;
  r.end = kJan4 + kHour;
  r.maintenance = true;
  r.opened = true;
  r.drained = {2};
  r.created_by = "ops";
  auto back = FromStored(ToJson(r, *topo_), *topo_);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->nodes, r.nodes);
  EXPECT_EQ(back->drained, r.drained);
  EXPECT_EQ(back->end, r.end);
  EXPECT_TRUE(back->opened);
  EXPECT_TRUE(back->maintenance);
  EXPECT_EQ(ToJson(r, *topo_)["start"], "2027-01-04T10:00:00Z");
}

// `--selector DOMAIN --count N`: N nodes under one leaf switch, none held by an overlapping window.
TEST(ReservationPickTest, PicksCountNodesUnderOneLeafFreeOverTheWindow) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "fabric:\n"
      "  spines:\n"
      "    - name: spine-0\n"
      "      leaves:\n"
      "        - {name: leaf-0, nodes: [{name: \"n-[1-3]\"}]}\n"
      "        - {name: leaf-1, nodes: [{name: \"n-[4-6]\"}]}\n",
      "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const cluster::Topology& t = *f->topology;
  ReservationBook book(t);
  auto held = ParseRequest(nlohmann::json::parse(R"({"name": "a", "nodes": "n-[1-2]",
      "start": "2027-01-04T10:00:00Z", "duration": "2h", "users": ["x"]})"),
                           t);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(book.Add(*held, 0).ok());
  auto pick = [&](const std::string& extra) {
    return ParseRequest(nlohmann::json::parse(R"({"name": "b", "start": "2027-01-04T11:00:00Z",
        "duration": "1h", "users": ["y"], )" + extra +
                                              "}"),
                        t, &book);
  };
  // leaf-0 has one node free over the window: two come from leaf-1.
  auto two = pick(R"("count": 2)");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->nodes, (std::vector<uint32_t>{3, 4}));
  auto in_leaf0 = pick(R"("count": 2, "selector": "leaf-0")");
  EXPECT_EQ(in_leaf0.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(in_leaf0.status().message(),
            "no leaf switch under leaf-0 has 2 nodes free of other reservations from "
            "2027-01-04T11:00:00Z to 2027-01-04T12:00:00Z (the most any has is 1); ask for fewer, "
            "another window, or name the nodes");
  EXPECT_EQ(pick(R"("count": 4, "selector": "spine-0")").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(pick(R"("count": 1, "selector": "leaf-9")").status().code(), StatusCode::kNotFound);
  // After the window, leaf-0 is whole again.
  auto later = ParseRequest(nlohmann::json::parse(R"({"name": "c", "start": "2027-01-04T12:00:00Z",
      "duration": "1h", "users": ["y"], "count": 3, "selector": "leaf-0"})"),
                            t, &book);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(later->nodes, (std::vector<uint32_t>{0, 1, 2}));
  // Nodes and a count together are refused.
  EXPECT_EQ(pick(R"("count": 1, "nodes": "n-1")").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hangar::controller::reservation
