// Batch work in the controller's state machine: arrays and their cap, dependencies, holds, bulk
// operations, pages, accounting, and all of it surviving a restart.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

std::shared_ptr<const cluster::Topology> OneNode() { return testing::OneNodeTopology(); }

job::JobSpec Spec(const std::string& yaml, const std::string& user = "alice") {
  auto s = job::ParseJobSpec(yaml, "job.yaml");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  s->user = user;
  return *s;
}

Principal Admin() { return Principal{"root", Role::kAdmin}; }
Principal User(const std::string& name) { return Principal{name, Role::kUser}; }

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = Make();
    pb::Register r;
    r.mutable_inventory()->set_node("a");
    r.mutable_inventory()->set_address("127.0.0.1");
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
  }
  std::unique_ptr<ClusterState> Make() {
    ControllerOptions o;
    o.require_validation = false;
    return std::make_unique<ClusterState>(OneNode(), o, sched::Scheduler::Create({}).value());
  }
  // One cycle; the tasks it launched.
  std::vector<pb::Launch> Cycle(Time now) {
    Effects fx;
    state_->Schedule(now, &fx);
    Keep(fx);
    std::vector<pb::Launch> out;
    for (const auto& m : fx.messages) {
      if (m.message.has_launch()) out.push_back(m.message.launch());
    }
    return out;
  }
  void Exit(const pb::Launch& l, int code, Time now, Time running_since = -1) {
    pb::TaskStatus s;
    s.set_task_id(l.task_id());
    s.set_state(pb::TaskStatus::RUNNING);
    Effects fx;
    ASSERT_TRUE(state_->OnTaskStatus("a", s, running_since >= 0 ? running_since : now, &fx).ok());
    s.set_state(pb::TaskStatus::EXITED);
    s.set_exit_code(code);
    ASSERT_TRUE(state_->OnTaskStatus("a", s, now, &fx).ok());
    Keep(fx);
  }
  sched::JobId Submit(const std::string& yaml, Time now = 0, const std::string& user = "alice") {
    Effects fx;
    auto id = state_->Submit(Spec(yaml, user), now, &fx);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    Keep(fx);
    return id.ok() ? *id : 0;
  }
  nlohmann::json Bulk(const Principal& p, const JobFilter& f, BulkAction a, Time now = 1) {
    Effects fx;
    auto r = state_->Bulk(p, f, a, now, &fx);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    Keep(fx);
    return r.ok() ? *r : nlohmann::json();
  }
  // What the store would hold: the newest row per job and every value.
  void Keep(const Effects& fx) {
    for (const auto& j : fx.batch.jobs) rows_[j.id] = j;
    for (const auto& v : fx.batch.values) values_.push_back(v);
  }
  std::string Reason(sched::JobId id) { return state_->GetJob(id)->reason; }
  std::string State(sched::JobId id) { return state_->GetJob(id)->state; }

  std::unique_ptr<ClusterState> state_;
  std::map<uint64_t, JobRow> rows_;
  std::vector<KeyValueRow> values_;
};

constexpr const char* kOneGpu = "name: one\ntasks: [{gpus: 1, command: [/bin/true]}]\n";

TEST_F(BatchTest, AnArrayRunsAtMostItsCapAndEachElementKnowsItsIndex) {
  const sched::JobId first =
      Submit("name: sweep\narray: \"10-15%2\"\ntasks: [{gpus: 1, command: [train]}]\n");
  auto launched = Cycle(1);
  ASSERT_EQ(launched.size(), 2u) << "the cap (%2), though 8 GPUs are free";
  EXPECT_EQ(launched[0].env().at("HANGAR_ARRAY_JOB_ID"), std::to_string(first));
  EXPECT_EQ(launched[0].env().at("HANGAR_ARRAY_INDEX"), "10");
  EXPECT_EQ(launched[1].env().at("HANGAR_ARRAY_INDEX"), "11");
  EXPECT_EQ(Reason(first + 2),
            "array " + std::to_string(first) + " has 2 elements running, its cap (%2)");
  EXPECT_EQ(state_->GetJob(first + 5)->array_index, 15);
  Exit(launched[0], 0, 2);
  auto next = Cycle(3);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].env().at("HANGAR_ARRAY_INDEX"), "12");
}

TEST_F(BatchTest, ADependencyChainRunsInOrderAndAnUnmeetableOneEndsSayingWhy) {
  const sched::JobId a = Submit(kOneGpu);
  Effects fx;
  job::JobSpec b_spec = Spec(kOneGpu), c_spec = Spec(kOneGpu);
  b_spec.after.ok = {a};
  c_spec.after.notok = {a};
  const sched::JobId b = *state_->Submit(b_spec, 0, &fx);
  const sched::JobId c = *state_->Submit(c_spec, 0, &fx);
  Keep(fx);
  auto launched = Cycle(1);
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].job_id(), a);
  EXPECT_EQ(Reason(b), "waiting for job " + std::to_string(a) + " to succeed (after.ok)");
  EXPECT_EQ(Reason(c), "waiting for job " + std::to_string(a) + " to fail (after.notok)");
  Exit(launched[0], 0, 2);
  launched = Cycle(3);
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].job_id(), b);
  EXPECT_EQ(State(c), "cancelled");
  EXPECT_EQ(state_->GetJob(c)->message, "dependency can never be met: job " + std::to_string(a) +
                                            " succeeded, so after.notok can never be met");
}

TEST_F(BatchTest, AnArraysIdStandsForAllItsElements) {
  const sched::JobId arr = Submit("name: prep\narray: 0-1\ntasks: [{gpus: 1, command: [prep]}]\n");
  job::JobSpec after = Spec(kOneGpu);
  after.after.any = {arr};
  Effects fx;
  const sched::JobId then = *state_->Submit(after, 0, &fx);
  Keep(fx);
  auto launched = Cycle(1);
  ASSERT_EQ(launched.size(), 2u);
  Exit(launched[0], 1, 2);
  EXPECT_TRUE(Cycle(3).empty());
  EXPECT_EQ(Reason(then), "waiting for job " + std::to_string(arr + 1) + " (of array " +
                              std::to_string(arr) + ") to end (after.any)");
  Exit(launched[1], 0, 4);
  launched = Cycle(5);
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].job_id(), then);
}

TEST_F(BatchTest, SubmissionRefusesDependenciesThatCannotBeMet) {
  job::JobSpec s = Spec(kOneGpu);
  s.after.ok = {99};
  Effects fx;
  auto r = state_->Submit(s, 0, &fx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "after.ok: job 99 does not exist; `hangar jobs` lists them");
  const sched::JobId a = Submit(kOneGpu);
  ASSERT_TRUE(state_->Cancel(a, 1, &fx).ok());
  s.after.ok = {a};
  r = state_->Submit(s, 2, &fx);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cancelled, so after.ok can never be met"), std::string::npos)
      << r.status().message();
}

TEST_F(BatchTest, AHeldJobWaitsUntilReleasedAndHoldIsIdempotent) {
  const sched::JobId id = Submit(kOneGpu);
  JobFilter f;
  f.ids = {id};
  auto r = Bulk(Admin(), f, BulkAction::kHold);
  EXPECT_EQ(r["changed"], 1);
  EXPECT_EQ(Bulk(Admin(), f, BulkAction::kHold)["unchanged"], 1);
  EXPECT_TRUE(Cycle(1).empty());
  EXPECT_EQ(Reason(id), "held by root: `hangar release " + std::to_string(id) + "` lets it start");
  EXPECT_TRUE(state_->GetJob(id)->held);
  EXPECT_EQ(Bulk(Admin(), f, BulkAction::kRelease)["changed"], 1);
  EXPECT_EQ(Cycle(2).size(), 1u);
  EXPECT_EQ(Bulk(Admin(), f, BulkAction::kHold)["skipped"][0]["why"],
            "job " + std::to_string(id) +
                " is starting; only pending jobs can be held (requeue it to hold it)");
}

// `begin:` (sbatch --begin): the job waits, saying until when, and the once-a-second tick runs a
// cycle when that time comes; `hold: true` (sbatch --hold) submits it held by its user.
TEST_F(BatchTest, AJobWaitsForItsBeginTimeAndAHoldAtSubmissionHoldsIt) {
  const Time begin = 1'800'000'000'000;  // 2027-01-15T08:00:00Z
  const sched::JobId later =
      Submit("name: later\nbegin: 2027-01-15T08:00:00Z\ntasks: [{gpus: 1, command: [x]}]\n");
  const sched::JobId held = Submit("name: held\nhold: true\ntasks: [{gpus: 1, command: [x]}]\n");
  EXPECT_TRUE(state_->GetJob(held)->held);
  EXPECT_TRUE(Cycle(begin - kMinute).empty());
  EXPECT_EQ(Reason(later), "begins at 2027-01-15T08:00:00Z (its begin: time)");
  EXPECT_EQ(Reason(held),
            "held by alice: `hangar release " + std::to_string(held) + "` lets it start");
  Effects fx;
  state_->Tick(begin - kSecond, &fx);
  EXPECT_FALSE(state_->NeedsCycle()) << "not yet";
  state_->Tick(begin, &fx);
  EXPECT_TRUE(state_->NeedsCycle()) << "its begin has come";
  const auto launched = Cycle(begin);
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].job_id(), later);
  JobFilter f;
  f.ids = {held};
  EXPECT_EQ(Bulk(User("alice"), f, BulkAction::kRelease)["changed"], 1);
  EXPECT_EQ(Cycle(begin + kSecond).size(), 1u);
}

TEST_F(BatchTest, BulkCancelTakesOneUsersPendingJobsAndOnlyThose) {
  for (int i = 0; i < 9; ++i)
    Submit("name: big\ntasks: [{gpus: 8, command: [x]}]\n", 0, i < 4 ? "alice" : "bob");
  Cycle(1);  // alice's first one runs; the rest wait
  JobFilter f;
  f.user = "bob";
  f.state = "pending";
  auto r = Bulk(Admin(), f, BulkAction::kCancel);
  EXPECT_EQ(r["matched"], 5);
  EXPECT_EQ(r["changed"], 5);
  r = Bulk(Admin(), f, BulkAction::kCancel);
  EXPECT_EQ(r["matched"], 0) << "none of bob's is pending any more";
  JobFilter alices;
  alices.user = "alice";
  r = Bulk(User("bob"), alices, BulkAction::kCancel);
  EXPECT_EQ(r["denied"], 4);
  EXPECT_EQ(r["changed"], 0);
  JobFilter none;
  Effects fx;
  EXPECT_FALSE(state_->Bulk(Admin(), none, BulkAction::kCancel, 2, &fx).ok())
      << "an empty selector takes nothing";
}

TEST_F(BatchTest, ListsPageByCursorWithTheCountOfWhatIsLeft) {
  for (int i = 0; i < 25; ++i)
    Submit(i % 2 ? "name: odd\nqueue: default\ntasks: [{gpus: 1, command: [x]}]\n" : kOneGpu);
  JobFilter f;
  f.limit = 10;
  JobPage p = state_->ListJobsPage(Admin(), f);
  ASSERT_EQ(p.jobs.size(), 10u);
  EXPECT_EQ(p.jobs.front().id, 25u);
  EXPECT_EQ(p.more, 15u);
  f.before = p.next;
  p = state_->ListJobsPage(Admin(), f);
  EXPECT_EQ(p.jobs.front().id, 15u);
  f.before = p.next;
  p = state_->ListJobsPage(Admin(), f);
  EXPECT_EQ(p.jobs.size(), 5u);
  EXPECT_EQ(p.more, 0u);
  EXPECT_EQ(p.next, 0u);
  JobFilter named;
  named.name = "od*";
  EXPECT_EQ(state_->ListJobsPage(Admin(), named).jobs.size(), 12u);
}

// A list by user walks that user's jobs: two of bob's with more than a count scan of alice's
// between them still count exactly (walking every job, the count gave up inside alice's).
TEST_F(BatchTest, AUsersListCountsOnlyThatUsersJobsAndKeepsItsIndexAcrossARestart) {
  const sched::JobId first = Submit(kOneGpu, 0, "bob");
  for (size_t i = 0; i < JobPage::kCountScan + 1; ++i) Submit(kOneGpu, 0, "alice");
  const sched::JobId last = Submit(kOneGpu, 0, "bob");
  JobFilter f;
  f.user = "bob";
  f.limit = 1;
  JobPage p = state_->ListJobsPage(Admin(), f);
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].id, last);
  EXPECT_EQ(p.more, 1u);
  EXPECT_FALSE(p.more_at_least);
  f.before = p.next;
  p = state_->ListJobsPage(Admin(), f);
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].id, first);
  EXPECT_EQ(p.next, 0u);
  f.user = "carol";
  EXPECT_TRUE(state_->ListJobsPage(Admin(), f).jobs.empty()) << "a user with no jobs lists none";

  StoreContents contents;
  for (const auto& [id, row] : rows_) contents.jobs.push_back(row);
  std::reverse(contents.jobs.begin(), contents.jobs.end());  // a store's rows come in any order
  contents.values = values_;
  state_ = Make();
  ASSERT_TRUE(state_->Restore(contents, 10).ok());
  JobFilter bobs;
  bobs.user = "bob";
  bobs.state = "pending";
  p = state_->ListJobsPage(Admin(), bobs);
  ASSERT_EQ(p.jobs.size(), 2u);
  EXPECT_EQ(p.jobs[0].id, last);
  EXPECT_EQ(p.jobs[1].id, first);
  Bulk(Admin(), bobs, BulkAction::kCancel);
  EXPECT_EQ(State(first), "cancelled");
  EXPECT_EQ(State(first + 1), "pending") << "alice's stay";
}

TEST_F(BatchTest, AccountingGivesEachJobItsGpuHoursAndAttempts) {
  const sched::JobId id = Submit("name: acct\ntasks: [{gpus: 2, command: [x]}]\n");
  auto launched = Cycle(1000);  // time 0 means "not started" to the controller
  ASSERT_EQ(launched.size(), 1u);
  Exit(launched[0], 0, 1000 + 3600 * 1000, /*running_since=*/1000);
  JobFilter f;
  f.ids = {id};
  sched::JobId next = 0;
  size_t more = 0;
  nlohmann::json rows = state_->AccountingJobs(Admin(), f, 1000 + 3600 * 1000, &next, &more);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["state"], "succeeded");
  EXPECT_EQ(rows[0]["attempts"], 1);
  EXPECT_EQ(rows[0]["gpu_model"], "H100");
  EXPECT_NEAR(rows[0]["gpu_hours"].get<double>(), 2.0, 1e-6);
}

TEST_F(BatchTest, AccountingAndTheJobViewCarryTheJobsAccountLabel) {
  const sched::JobId labelled =
      Submit("name: a\naccount: physics\ntasks: [{gpus: 1, command: [x]}]\n");
  const sched::JobId plain = Submit("name: b\ntasks: [{gpus: 1, command: [x]}]\n");
  JobFilter f;
  f.ids = {labelled, plain};
  sched::JobId next = 0;
  size_t more = 0;
  nlohmann::json rows = state_->AccountingJobs(Admin(), f, 1000, &next, &more);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows)
    EXPECT_EQ(r["account"], r["id"] == labelled ? "physics" : "") << r.dump();
  EXPECT_EQ(state_->GetJob(labelled)->account, "physics");
  EXPECT_EQ(api::ToJson(*state_->GetJob(labelled))["account"], "physics");
}

TEST_F(BatchTest, ArraysHoldsAndCapsSurviveARestart) {
  const sched::JobId first =
      Submit("name: sweep\narray: \"0-3%1\"\ntasks: [{gpus: 1, command: [x]}]\n");
  JobFilter f;
  f.ids = {first + 3};
  Bulk(Admin(), f, BulkAction::kHold);
  StoreContents contents;
  for (const auto& [id, row] : rows_) contents.jobs.push_back(row);
  contents.values = values_;
  state_ = Make();
  ASSERT_TRUE(state_->Restore(contents, 10).ok());
  pb::Register r;
  r.mutable_inventory()->set_node("a");
  for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
  Effects fx;
  ASSERT_TRUE(state_->OnRegister(r, 11, &fx).ok());
  auto launched = Cycle(12);
  ASSERT_EQ(launched.size(), 1u) << "the cap %1 after the restart";
  EXPECT_EQ(launched[0].env().at("HANGAR_ARRAY_INDEX"), "0");
  EXPECT_TRUE(state_->GetJob(first + 3)->held);
  JobFilter arr;
  arr.array = first;
  EXPECT_EQ(state_->ListJobsPage(Admin(), arr).jobs.size(), 4u);
}

}  // namespace
}  // namespace hangar::controller
