#include "controller/state/spec_interner.h"

#include <gtest/gtest.h>

#include "controller/state/state_test_util.h"
#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

job::JobSpec Parse(const std::string& yaml) {
  auto s = job::ParseJobSpec(yaml, "job.yaml");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(SpecInternerTest, OneEntryPerTextWhileAJobHoldsIt) {
  SpecInterner interned;
  const job::JobSpec spec = Parse("name: a\ntasks: [{gpus: 1, command: [true]}]\n");
  const std::string json = job::JobSpecToJson(spec).dump();
  auto a = interned.Spec(json, spec, nullptr);
  auto b = interned.Spec(json, spec, nullptr);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(*a->stored, json);  // no sealer: stored as it is
  EXPECT_EQ(a->key, SpecKey(json));
  EXPECT_FALSE(a->unpinned);
  const void* first = a.get();
  a.reset();
  b.reset();
  auto c = interned.Spec(json, spec, nullptr);  // the last holder went: a new entry
  EXPECT_EQ(c->json, json);
  (void)first;
  const job::JobSpec tagged =
      Parse("name: b\ntasks: [{gpus: 1, image: busybox:latest, command: [true]}]\n");
  EXPECT_TRUE(interned.Spec(job::JobSpecToJson(tagged).dump(), tagged, nullptr)->unpinned);
}

TEST(SpecInternerTest, RequestsThatShareAFingerprintAreComparedWhole) {
  SpecInterner interned;
  sched::TaskShape one;
  one.kind = job::GpuKind::kWhole;
  one.gpus = 1;
  one.milli = 1000;
  sched::GangRequest r1 = sched::MakeSingleTaskRequest(one, 2);
  sched::GangRequest r2 = sched::MakeSingleTaskRequest(one, 3);
  r2.fingerprint = r1.fingerprint;  // a collision
  auto a = interned.Request(r1);
  auto b = interned.Request(r2);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(b->total_replicas, 3);
  EXPECT_EQ(interned.Request(r1).get(), a.get());
}

TEST(SpecInternerTest, StoredSpecsAreWarmedOnceAndTheirErrorsNameTheJob) {
  const auto topology = testing::OneNodeTopology();
  ASSERT_TRUE(topology);
  SpecInterner interned;
  const job::JobSpec spec = Parse("name: c\ntasks: [{replicas: 2, gpus: 4, command: [true]}]\n");
  auto text = std::make_shared<const std::string>(job::JobSpecToJson(spec).dump());
  auto w = interned.Warm(text, 7, nullptr, *topology);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ((*w)->request->total_replicas, 2);
  EXPECT_EQ(interned.Warm(text, 8, nullptr, *topology).value(), *w);
  EXPECT_EQ(interned.warm_count(), 1u);
  auto bad = interned.Warm(std::make_shared<const std::string>("{not json"), 9, nullptr, *topology);
  EXPECT_EQ(bad.status().message(), "job 9: its stored spec is not JSON");
  auto none = interned.Warm(nullptr, 10, nullptr, *topology);
  EXPECT_EQ(none.status().message(),
            "job 10: the store holds no spec for it; the store is damaged");
  auto held = (*w)->spec;
  interned.DropWarm();
  EXPECT_EQ(interned.warm_count(), 0u);
  // What a job holds is still found by its text.
  EXPECT_EQ(interned.Spec(held->json, held->spec, nullptr).get(), held.get());
}

}  // namespace
}  // namespace hangar::controller
