#include "controller/state/job_read_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hangar::controller {
namespace {

PublishedJob Job(sched::JobId id, std::string user = "alice",
                 job::JobState state = job::JobState::kPending, bool held = false) {
  auto spec = std::make_shared<SpecEntry>();
  spec->spec.user = std::move(user);
  spec->spec.queue = "default";
  spec->spec.name = "job-" + std::to_string(id);
  spec->json = R"({"name":"job-)" + std::to_string(id) + "\"}";
  PublishedJob j;
  j.spec = std::move(spec);
  j.id = id;
  j.state = state;
  j.held = held;
  j.submitted = static_cast<Time>(id);
  j.reason = std::make_shared<const std::string>("waiting for the next scheduling cycle");
  return j;
}

std::vector<sched::JobId> Ids(const JobPage& p) {
  std::vector<sched::JobId> ids;
  for (const auto& j : p.jobs) ids.push_back(j.id);
  return ids;
}

auto kAll = [](const PublishedJob&) { return true; };

TEST(JobReadModelTest, ASnapshotNeverChangesOnceBuilt) {
  JobReadModel m;
  for (sched::JobId id = 1; id <= 3; ++id) m.Put(Job(id));
  m.Put(Job(1000));  // in a chunk of its own
  auto first = m.Build();
  m.Put(Job(2, "alice", job::JobState::kRunning));
  m.Erase(3);
  m.Put(Job(4));
  auto second = m.Build();
  ASSERT_EQ(first->size(), 4u);
  EXPECT_EQ(first->Find(2)->state, job::JobState::kPending);
  ASSERT_NE(first->Find(3), nullptr);
  EXPECT_EQ(first->Find(4), nullptr);
  EXPECT_EQ(second->size(), 4u);
  EXPECT_EQ(second->Find(2)->state, job::JobState::kRunning);
  EXPECT_EQ(second->Find(3), nullptr);
  EXPECT_EQ(second->Find(1000), first->Find(1000)) << "a chunk no change fell in is shared";
  EXPECT_NE(second->Find(1), first->Find(1)) << "a chunk a change fell in is copied";
  EXPECT_EQ(second->Find(1)->spec, first->Find(1)->spec) << "its jobs' specs are shared";
  EXPECT_EQ(m.Build(), second) << "no change: the same snapshot";
}

TEST(JobReadModelTest, TheLastChangeOfAJobInABatchCounts) {
  JobReadModel m;
  m.Put(Job(5));
  m.Erase(5);
  m.Put(Job(5, "alice", job::JobState::kRunning));
  m.Put(Job(9));
  m.Erase(9);
  auto s = m.Build();
  EXPECT_EQ(s->size(), 1u);
  ASSERT_NE(s->Find(5), nullptr);
  EXPECT_EQ(s->Find(5)->state, job::JobState::kRunning);
  EXPECT_EQ(s->Find(9), nullptr);
}

TEST(JobReadModelTest, PublishedIsWhatWasPublishedNotWhatWasBuilt) {
  JobReadModel m;
  EXPECT_EQ(m.Current()->size(), 0u);
  m.Put(Job(1));
  auto built = m.Build();
  EXPECT_EQ(m.Current()->size(), 0u) << "built, not yet committed";
  m.Publish(built);
  EXPECT_EQ(m.Current()->size(), 1u);
}

TEST(JobReadModelTest, PurgedChunksAreDroppedAndTheRestWalksNewestFirst) {
  JobReadModel m;
  for (sched::JobId id = 1; id <= 600; ++id) m.Put(Job(id));
  m.Build();
  for (sched::JobId id = 1; id <= 300; ++id) m.Erase(id);
  auto s = m.Build();
  EXPECT_EQ(s->size(), 300u);
  EXPECT_EQ(s->Find(1), nullptr);
  EXPECT_EQ(s->Find(300), nullptr);
  ASSERT_NE(s->Find(301), nullptr);
  std::vector<sched::JobId> seen;
  s->ForEachNewest(0, {}, [&](const PublishedJob& v) {
    seen.push_back(v.id);
    return true;
  });
  ASSERT_EQ(seen.size(), 300u);
  EXPECT_EQ(seen.front(), 600u);
  EXPECT_EQ(seen.back(), 301u);
  // A job below the lowest chunk kept (a restore, a late write) still finds its place.
  m.Put(Job(5));
  s = m.Build();
  EXPECT_EQ(s->size(), 301u);
  ASSERT_NE(s->Find(5), nullptr);
  EXPECT_EQ(s->Find(600)->id, 600u);
  // Everything gone: an empty snapshot.
  m.Clear();
  EXPECT_EQ(m.Build()->size(), 0u);
}

TEST(JobReadModelTest, APageRunsByCursorWithTheCountOfWhatIsLeft) {
  JobReadModel m;
  for (sched::JobId id = 1; id <= 25; ++id) m.Put(Job(id, id % 2 ? "bob" : "alice"));
  auto s = m.Build();
  JobFilter f;
  f.limit = 10;
  JobPage p = ListPage(*s, f, nullptr, kAll);
  ASSERT_EQ(p.jobs.size(), 10u);
  EXPECT_EQ(p.jobs.front().id, 25u);
  EXPECT_EQ(p.more, 15u);
  f.before = p.next;
  p = ListPage(*s, f, nullptr, kAll);
  EXPECT_EQ(p.jobs.front().id, 15u);
  f.before = p.next;
  p = ListPage(*s, f, nullptr, kAll);
  EXPECT_EQ(p.jobs.size(), 5u);
  EXPECT_EQ(p.more, 0u);
  EXPECT_EQ(p.next, 0u);
  JobFilter bobs;
  bobs.user = "bob";
  bobs.limit = 100;
  EXPECT_EQ(ListPage(*s, bobs, nullptr, kAll).jobs.size(), 13u);
  JobFilter ids;
  ids.ids = {3, 30, 7, 3};
  EXPECT_EQ(Ids(ListPage(*s, ids, nullptr, kAll)), (std::vector<sched::JobId>{7, 3}));
  // Alice, who sees only her own, lists only hers.
  const std::string alice = "alice";
  JobPage hers =
      ListPage(*s, JobFilter{}, &alice, [&](const PublishedJob& j) { return j.user() == alice; });
  EXPECT_EQ(hers.jobs.size(), 12u);
}

TEST(JobReadModelTest, StatesAndHeldFilter) {
  JobReadModel m;
  m.Put(Job(1, "alice", job::JobState::kPending, true));
  m.Put(Job(2, "alice", job::JobState::kPending));
  m.Put(Job(3, "alice", job::JobState::kRunning));
  m.Put(Job(4, "alice", job::JobState::kSucceeded));
  auto s = m.Build();
  JobFilter f;
  f.state = "pending";
  EXPECT_EQ(Ids(ListPage(*s, f, nullptr, kAll)), (std::vector<sched::JobId>{2, 1}));
  f.state = "held";
  EXPECT_EQ(Ids(ListPage(*s, f, nullptr, kAll)), (std::vector<sched::JobId>{1}));
  f.state = "running";
  EXPECT_EQ(Ids(ListPage(*s, f, nullptr, kAll)), (std::vector<sched::JobId>{3}));
  // A job that starts leaves the pending candidates.
  m.Put(Job(2, "alice", job::JobState::kRunning));
  s = m.Build();
  f.state = "pending";
  EXPECT_EQ(Ids(ListPage(*s, f, nullptr, kAll)), (std::vector<sched::JobId>{1}));
}

// A list of one user's jobs counts only that user's jobs past the page: two of bob's with more
// than a count scan of alice's between them still count exactly.
TEST(JobReadModelTest, AUsersListCountsOnlyThatUsersJobs) {
  JobReadModel m;
  sched::JobId id = 1;
  m.Put(Job(id++, "bob"));
  for (size_t i = 0; i < JobPage::kCountScan + 1; ++i) m.Put(Job(id++, "alice"));
  m.Put(Job(id, "bob"));
  auto s = m.Build();
  JobFilter f;
  f.user = "bob";
  f.limit = 1;
  JobPage p = ListPage(*s, f, nullptr, kAll);
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].id, id);
  EXPECT_EQ(p.more, 1u);
  EXPECT_FALSE(p.more_at_least);
  // Everyone's: past the page the count stops after kCountScan and says "at least".
  JobFilter all;
  all.limit = 1;
  p = ListPage(*s, all, nullptr, kAll);
  EXPECT_TRUE(p.more_at_least);
  EXPECT_EQ(p.more, JobPage::kCountScan);
}

TEST(JobReadModelTest, OneJobsBodyCarriesItsSpecAsStored) {
  const PublishedJob j = Job(7);
  auto body = nlohmann::json::parse(JobJsonWithSpec(j));
  EXPECT_EQ(body["id"], 7);
  EXPECT_EQ(body["name"], "job-7");
  EXPECT_EQ(body["state"], "pending");
  EXPECT_EQ(body["reason"], "waiting for the next scheduling cycle");
  EXPECT_EQ(body["spec"]["name"], "job-7");
  auto whole = api::ToJson(j.View());
  whole["spec"] = nlohmann::json::parse(j.spec->json);
  EXPECT_EQ(body, whole) << "the same body as the view with its spec parsed";
}

TEST(JobReadModelTest, JobsThatReadTheSameReasonShareItsText) {
  JobReadModel m;
  m.Put(Job(1));
  m.Put(Job(2));
  PublishedJob other = Job(3);
  other.reason = std::make_shared<const std::string>("needs 16 GPUs under one leaf");
  m.Put(other);
  auto s = m.Build();
  EXPECT_EQ(s->Find(1)->reason, s->Find(2)->reason) << "one text for both";
  EXPECT_EQ(*s->Find(3)->reason, "needs 16 GPUs under one leaf");
}

TEST(JobReadModelTest, WhatFewJobsHaveSitsBehindOnePointer) {
  JobReadModel m;
  PublishedJob waiting = Job(1);
  waiting.rule = sched::Rule::kNotNowDomain;
  PublishedJob ran = Job(2, "alice", job::JobState::kRunning);
  auto details = std::make_shared<PublishedJob::Details>();
  details->message = "preempted for job 4";
  details->staging_ms = 1500;
  details->staging_gpu_ms = 12000;
  api::TaskView task;
  task.node = "n-1";
  task.gpus = {0, 1};
  task.state = "running";
  details->tasks.push_back(task);
  details->progress = {{"step", 10}};
  ran.details = details;
  m.Put(waiting);
  m.Put(ran);
  m.Erase(3);  // never put: nothing to erase
  auto s = m.Build();
  EXPECT_EQ(s->size(), 2u);
  EXPECT_EQ(s->Find(3), nullptr) << "an empty slot of a chunk is no job";
  api::JobView w = s->Find(1)->View();
  EXPECT_EQ(w.reason_rule, "topology-domain");
  EXPECT_TRUE(w.message.empty());
  EXPECT_TRUE(w.task_views.empty());
  EXPECT_TRUE(w.progress.is_null());
  api::JobView r = s->Find(2)->View();
  EXPECT_EQ(r.reason_rule, "") << "only a waiting job names a rule";
  EXPECT_EQ(r.message, "preempted for job 4");
  EXPECT_EQ(r.staging_ms, 1500);
  EXPECT_EQ(r.staging_gpu_ms, 12000);
  ASSERT_EQ(r.task_views.size(), 1u);
  EXPECT_EQ(r.task_views[0].node, "n-1");
  EXPECT_EQ(r.progress["step"], 10);
  m.Erase(2);
  auto after = m.Build();
  EXPECT_EQ(after->Find(2), nullptr);
  EXPECT_NE(s->Find(2), nullptr) << "the snapshot before the erase still holds it";
}

}  // namespace
}  // namespace hangar::controller
