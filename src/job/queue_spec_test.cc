#include "job/queue_spec.h"

#include <gtest/gtest.h>

namespace hangar::job {
namespace {

TEST(QueueSpecTest, ParsesATree) {
  auto q = ParseQueues(R"(
queues:
  - name: acme
    children:
      - name: research
        weight: 2
        admins: [carol]
        children:
          - name: vision
            quota: {gpus: 16, cpu: 256, memory: 2Ti}
            borrowing_limit: {gpus: 32}
            lending_limit: {gpus: 8}
            users: [alice, bob]
            idle: {gpu_util_below: 5, for: 30m, action: checkpoint-requeue}
          - name: nlp
            quota: {gpus: {H100-SXM-80GB: 8}}
)",
                       "queues.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(q->size(), 1u);
  const auto& research = (*q)[0].children[0];
  EXPECT_EQ(research.weight, 2);
  EXPECT_EQ(research.admins, std::vector<std::string>{"carol"});
  const auto& vision = research.children[0];
  EXPECT_TRUE(vision.leaf());
  EXPECT_EQ(*vision.quota.gpus_milli, 16000);
  EXPECT_EQ(*vision.quota.milli_cpu, 256000);
  EXPECT_EQ(*vision.borrowing_limit.gpus_milli, 32000);
  EXPECT_EQ(vision.idle.gpu_util_below, 5);
  EXPECT_EQ(vision.idle.for_duration, 30 * kMinute);
  EXPECT_EQ(vision.idle.action, IdlePolicy::Action::kCheckpointRequeue);
  EXPECT_EQ(research.children[1].quota.gpus_milli_by_model.at("H100-SXM-80GB"), 8000);
  // Round trip through JSON.
  auto back = ParseQueues(QueuesToJson(*q).dump(), "json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(QueuesToJson(*back), QueuesToJson(*q));
}

TEST(QueueSpecTest, JsonSpeaksPeoplesUnitsAndReadsTheOldForm) {
  const char* file = R"(
queues:
  - name: vision
    quota: {gpus: 16, cpu: 256, memory: 2Ti}
    borrowing_limit: {gpus: 0.5}
    idle: {gpu_util_below: 5, for: 30m, action: checkpoint-requeue}
  - name: nlp
    quota: {gpus: {H100-SXM-80GB: 8}, cpu: 1.5, memory: 512Gi}
)";
  auto q = ParseQueues(file, "queues.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const nlohmann::json j = QueuesToJson(*q);
  EXPECT_EQ(j["queues"][0]["quota"].dump(), R"({"cpu":256,"gpus":16,"memory":"2Ti"})");
  EXPECT_EQ(j["queues"][0]["borrowing_limit"].dump(), R"({"gpus":0.5})");
  EXPECT_EQ(j["queues"][0]["idle"]["for"], "30m");
  EXPECT_EQ(j["queues"][1]["quota"].dump(),
            R"({"cpu":1.5,"gpus":{"H100-SXM-80GB":8},"memory":"512Gi"})");
  // Stores written before kept milli-units, MiB and milliseconds: they still read the same.
  auto old = ParseQueues(
      R"({"queues":[{"name":"vision","quota":{"gpus":"16000m","cpu":"256000m","memory":"2097152Mi"},
      "borrowing_limit":{"gpus":"500m"},"idle":{"gpu_util_below":5,"for":"1800000ms","action":"checkpoint-requeue"}},
      {"name":"nlp","quota":{"gpus":{"H100-SXM-80GB":"8000m"},"cpu":"1500m","memory":"524288Mi"}}]})",
      "store");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(QueuesToJson(*old), j);
}

TEST(QueueSpecTest, ErrorsPointAtTheLine) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"queues:\n  - name: a\n  - name: a\n", "q.yaml:3: queue 'a' is declared twice"},
      {"queues:\n  - name: a\n    quota: {gpus: lots}\n", "q.yaml:3: quota.gpus:"},
      {"queues:\n  - name: a\n    weight: 0\n", "q.yaml:3: 'weight' must be between 1 and 1000"},
      {"queues:\n  - name: a\n    idle: {gpu_util_below: 5, for: 30m, action: explode}\n",
       "idle.action must be"},
      {"queues:\n  - name: a\n    quota: {gpu: 1}\n", "unknown field 'gpu' in quota"},
      {"queue: []\n", "a queues file is a map with 'queues'"},
  };
  for (const auto& c : cases) {
    auto r = ParseQueues(c.text, "q.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

// Issue 16: a queue may let its jobs run as root; the nearest setting on the path wins.
TEST(QueueSpecTest, AllowRootIsInheritedAndOverridden) {
  auto q = ParseQueues(
      "queues:\n"
      "  - name: ops\n    allow_root: true\n    children:\n"
      "      - name: maintenance\n"
      "      - name: interns\n        allow_root: false\n"
      "  - name: default\n",
      "q.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(AllowsRoot(*q, "maintenance"));
  EXPECT_FALSE(AllowsRoot(*q, "interns"));
  EXPECT_FALSE(AllowsRoot(*q, "default"));
  EXPECT_FALSE(AllowsRoot(*q, "nope"));
  EXPECT_FALSE(AllowsRoot(DefaultQueues(), "default"));
  // Kept through the stored JSON.
  const nlohmann::json j = QueuesToJson(*q);
  EXPECT_EQ(j["queues"][0]["allow_root"], true);
  EXPECT_FALSE(j["queues"][1].contains("allow_root"));
  auto back = ParseQueues(j.dump(), "store");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(QueuesToJson(*back), j);
  auto bad = ParseQueues("queues:\n  - name: a\n    allow_root: sometimes\n", "q.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("q.yaml:3: 'allow_root' must be true or false"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace hangar::job
