// Job specs in the controller's state and store: an array's spec is held and stored once, each
// user may store so many bytes of specs, and finished jobs are forgotten after --keep-finished.
#include <gtest/gtest.h>

#include <set>

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

// "0,1,2,...": an array written out index by index, as the attack did.
std::string CommaList(int n) {
  std::string list;
  for (int i = 0; i < n; ++i) list += (i ? "," : "") + std::to_string(i);
  return list;
}

class SpecStorageTest : public ::testing::Test {
 protected:
  std::unique_ptr<ClusterState> Make(ControllerOptions o = {}) {
    o.require_validation = false;
    return std::make_unique<ClusterState>(OneNode(), o, sched::Scheduler::Create({}).value());
  }
};

// Every element of a comma-list array carried its own copy of the spec (which holds the list):
// memory and store grew with the square of its length (10,000 elements: +500 MiB; a 500 KB spec
// with array: "0-199" wrote 200 MB).
TEST_F(SpecStorageTest, AnArraysSpecIsHeldAndStoredOnceForAllItsElements) {
  auto state = Make();
  const std::string yaml =
      "name: sweep\narray: \"" + CommaList(10'000) + "\"\ntasks: [{gpus: 1, command: [x]}]\n";
  Effects fx;
  auto ids = state->SubmitArray(Spec(yaml), 0, &fx);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 10'000u);
  ASSERT_EQ(fx.batch.jobs.size(), 10'000u);
  std::set<const std::string*> texts;
  std::set<std::string> keys;
  for (const auto& row : fx.batch.jobs) {
    texts.insert(row.spec.get());
    keys.insert(row.spec_key);
  }
  EXPECT_EQ(texts.size(), 1u) << "one text for the whole array";
  EXPECT_EQ(keys.size(), 1u);
  const size_t spec_bytes = (*texts.begin())->size();
  EXPECT_GT(spec_bytes, 48'000u);  // the list itself
  EXPECT_EQ(*keys.begin(), SpecKey(**texts.begin()));

  // And so it comes back from the store: one text shared by the restored elements.
  auto store = NewMemoryStore();
  ASSERT_TRUE(store->Commit(fx.batch).ok());
  auto contents = store->Load();
  ASSERT_TRUE(contents.ok());
  auto again = Make();
  ASSERT_TRUE(again->Restore(*contents, 10).ok());
  std::set<const SpecEntry*> entries;
  for (const auto& [id, j] : again->jobs()) entries.insert(j.spec.get());
  EXPECT_EQ(entries.size(), 1u);
  EXPECT_EQ((*entries.begin())->key, *keys.begin()) << "restored under the key it is stored by";
}

TEST_F(SpecStorageTest, EachUserMayStoreSoManyBytesOfSpecs) {
  ControllerOptions o;
  o.max_spec_bytes_per_user = 8 * 1024;
  auto state = Make(o);
  auto big = [](int n) {
    return "name: big\ntasks: [{gpus: 1, command: [x], env: {PAD: \"" + std::string(3000, 'a') +
           std::to_string(n) + "\"}}]\n";
  };
  Effects fx;
  ASSERT_TRUE(state->Submit(Spec(big(1)), 0, &fx).ok());
  ASSERT_TRUE(state->Submit(Spec(big(2)), 0, &fx).ok());
  // The same spec again costs nothing: it is stored once.
  ASSERT_TRUE(state->Submit(Spec(big(2)), 0, &fx).ok());
  auto third = state->Submit(Spec(big(3)), 0, &fx);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = third.status().message();
  EXPECT_NE(m.find("does not fit: alice already stores 6."), std::string::npos) << m;
  EXPECT_NE(m.find(" KiB of job specs and may store at most 8.0 KiB"), std::string::npos) << m;
  EXPECT_NE(m.find("--max-spec-bytes-per-user"), std::string::npos) << m;
  // An array is refused before any of its elements exists.
  const size_t before = state->jobs().size();
  auto array = state->SubmitArray(Spec("name: a\narray: \"0-9\"\n" + big(4).substr(10)), 0, &fx);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(state->jobs().size(), before);
  // Another user has a limit of their own.
  EXPECT_TRUE(state->Submit(Spec(big(3), "bob"), 0, &fx).ok());
}

// A controller that kept every job it ever ran grew without bound, and so did its store.
TEST_F(SpecStorageTest, FinishedJobsAreForgottenAfterKeepFinishedWithTheirSpecs) {
  ControllerOptions o;
  o.keep_finished = kMinute;
  o.max_spec_bytes_per_user = 64 * 1024;
  int trims = 0;
  o.after_large_purge = [&] { ++trims; };
  auto state = Make(o);
  Effects fx;
  auto ids = state->SubmitArray(
      Spec("name: sweep\narray: \"0-11999\"\ntasks: [{gpus: 1, command: [x]}]\n"), 0, &fx);
  ASSERT_TRUE(ids.ok());
  const sched::JobId kept =
      *state->Submit(Spec("name: one\ntasks: [{gpus: 1, command: [x]}]\n"), 0, &fx);
  for (sched::JobId id : *ids) ASSERT_TRUE(state->Cancel(id, 1000, &fx).ok());
  auto store = NewMemoryStore();
  ASSERT_TRUE(store->Commit(fx.batch).ok());

  Effects early;
  state->PurgeFinished(1000 + kMinute - 1, &early);
  EXPECT_TRUE(early.batch.erased_jobs.empty()) << "not before keep_finished has passed";
  size_t erased = 0;
  std::vector<std::string> specs_erased;
  for (Time t = 1000 + kMinute; erased < ids->size(); t += kSecond) {
    Effects tick;
    state->PurgeFinished(t, &tick);
    ASSERT_LE(tick.batch.erased_jobs.size(), ClusterState::kPurgeScan);
    erased += tick.batch.erased_jobs.size();
    specs_erased.insert(specs_erased.end(), tick.batch.erased_specs.begin(),
                        tick.batch.erased_specs.end());
    ASSERT_TRUE(store->Commit(tick.batch).ok());
    ASSERT_LT(t, 1000 + kMinute + 10 * kSecond) << "the purge does not finish";
  }
  Effects rest;
  state->PurgeFinished(1000 + kMinute + 20 * kSecond, &rest);
  EXPECT_TRUE(rest.batch.erased_jobs.empty());
  EXPECT_EQ(trims, 1) << "the heap is handed back once the purge comes to rest";
  EXPECT_EQ(erased, 12'000u);
  EXPECT_EQ(specs_erased.size(), 1u) << "the array's spec, with its last element";
  EXPECT_EQ(state->jobs().size(), 1u);
  EXPECT_NE(state->FindJob(kept), nullptr) << "a pending job is never purged";
  EXPECT_EQ(state->FindJob(ids->front()), nullptr);
  JobFilter mine;
  mine.user = "alice";
  EXPECT_EQ(state->ListJobsPage(Principal{"root", Role::kAdmin}, mine).jobs.size(), 1u);
  JobFilter arr;
  arr.array = ids->front();
  EXPECT_TRUE(state->ListJobsPage(Principal{"root", Role::kAdmin}, arr).jobs.empty());
  auto left = store->Load();
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->jobs.size(), 1u);
  EXPECT_EQ(left->jobs[0].id, kept);
}

// The heap goes back once the purge comes to rest, also when it took every job there was.
TEST_F(SpecStorageTest, TheHeapIsHandedBackWhenThePurgeTookEveryJob) {
  ControllerOptions o;
  o.keep_finished = kSecond;
  int trims = 0;
  o.after_large_purge = [&] { ++trims; };
  auto state = Make(o);
  Effects fx;
  auto ids = state->SubmitArray(
      Spec("name: sweep\narray: \"0-9999\"\ntasks: [{gpus: 1, command: [x]}]\n"), 0, &fx);
  ASSERT_TRUE(ids.ok());
  for (sched::JobId id : *ids) ASSERT_TRUE(state->Cancel(id, 1, &fx).ok());
  for (Time t = 1 + kSecond; t <= 1 + 3 * kSecond; t += kSecond) {
    Effects tick;
    state->PurgeFinished(t, &tick);
  }
  EXPECT_TRUE(state->jobs().empty());
  EXPECT_EQ(trims, 1);
}

}  // namespace
}  // namespace hangar::controller
