#include "controller/state/queue_book.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

std::shared_ptr<const cluster::Topology> OneNode() { return testing::OneNodeTopology(); }

std::vector<job::QueueSpec> Parse(const std::string& yaml) {
  auto specs = job::ParseQueues(yaml, "queues.yaml");
  EXPECT_TRUE(specs.ok()) << specs.status().message();
  return specs.value();
}

void Use(QueueBook* book, const cluster::Topology& t, std::vector<job::QueueSpec> specs) {
  auto tree = sched::queue::QueueTree::Build(specs, t);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  book->Use(std::move(specs), std::move(tree).value());
}

constexpr const char* kTwoTeams = R"(queues:
  - name: research
    admins: [rita]
    children:
      - {name: vision, users: [vic], quota: {gpus: 4}}
      - {name: speech, quota: {gpus: 4}}
  - name: prod
    users: [paul]
    quota: {gpus: 0}
)";

TEST(QueueBookTest, AdminsOfAnAncestorAdministerAndUsersListsCloseAQueue) {
  auto t = OneNode();
  QueueBook book;
  Use(&book, *t, Parse(kTwoTeams));
  EXPECT_FALSE(book.trivial());
  const Principal rita{"rita", Role::kQueueAdmin};
  const Principal vic{"vic", Role::kUser};
  const Principal eve{"eve", Role::kUser};
  EXPECT_TRUE(book.AdministeredBy(rita, "vision"));
  EXPECT_TRUE(book.AdministeredBy(rita, "research"));
  EXPECT_FALSE(book.AdministeredBy(rita, "prod"));
  EXPECT_FALSE(book.AdministeredBy(vic, "vision"));  // a user, not a queue admin
  EXPECT_TRUE(book.OpenTo(vic, "vision").ok());
  EXPECT_TRUE(book.OpenTo(eve, "speech").ok());  // no users list on its path: open
  const Status closed = book.OpenTo(eve, "vision");
  EXPECT_EQ(closed.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(closed.message(),
            "permission jobs:submit on queue 'vision' is missing: eve (user) may submit to "
            "speech; ask an admin to add eve to the queue's users");
  EXPECT_FALSE(book.OpenTo(rita, "prod").ok());  // rita administers research only
  EXPECT_TRUE(book.OpenTo(rita, "vision").ok());
}

TEST(QueueBookTest, ADiffNamesWhatChangesAndHistoryFollowsQueuesByName) {
  auto t = OneNode();
  QueueBook book;
  Use(&book, *t, Parse(kTwoTeams));
  EXPECT_EQ(book.HistoryStep(1000), 0);  // starts the clock
  const Duration dt = book.HistoryStep(61'000);
  EXPECT_EQ(dt, 60'000);
  std::vector<std::vector<int64_t>> usage(book.tree().nodes().size(),
                                          std::vector<int64_t>(book.tree().dims(), 0));
  const int vision = book.tree().Find("vision");
  ASSERT_GE(vision, 0);
  usage[vision][sched::queue::kGpu] = 4000;
  book.DecayHistory(usage, dt, 3600'000);
  const double before = book.history()[vision][sched::queue::kGpu];
  EXPECT_GT(before, 0);

  auto next = Parse(R"(queues:
  - name: research
    admins: [rita]
    children:
      - {name: vision, users: [vic], quota: {gpus: 6}}
  - name: prod
    users: [paul]
    quota: {gpus: 0}
  - name: batch
)");
  const nlohmann::json diff = book.Diff(next);
  EXPECT_EQ(diff["created"], nlohmann::json({"batch"}));
  EXPECT_EQ(diff["changed"], nlohmann::json({"vision"}));
  EXPECT_EQ(diff["removed"], nlohmann::json({"speech"}));
  EXPECT_EQ(diff["unchanged"], nlohmann::json({"prod", "research"}));
  Use(&book, *t, std::move(next));
  const int moved = book.tree().Find("vision");
  EXPECT_DOUBLE_EQ(book.history()[moved][sched::queue::kGpu], before);
  EXPECT_DOUBLE_EQ(book.history()[book.tree().Find("batch")][sched::queue::kGpu], 0.0);
}

// Accounting keeps every ended attempt in the order it ended; idle reclamation steps its clock.
TEST(QueueBookTest, AccountsAttemptsAndStepsTheIdleClock) {
  QueueBook b;
  AttemptUsage first, second;
  first.job = 4;
  second.job = 2;
  b.Account(first);
  b.Account(second);
  ASSERT_EQ(b.attempts().size(), 2u);
  EXPECT_EQ(b.attempts()[0].job, 4u);
  EXPECT_EQ(b.attempts()[1].job, 2u);
  EXPECT_EQ(b.IdleCheckStep(1'000), 0) << "the first check only starts the clock";
  EXPECT_EQ(b.IdleCheckStep(1'600), 600);
  EXPECT_EQ(b.IdleCheckStep(1'500), 0) << "never negative";
}

}  // namespace
}  // namespace hangar::controller
