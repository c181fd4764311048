#include "sched/queue/quota.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace hangar::sched::queue {
namespace {

using namespace sched::testing;
using Kind = QuotaLedger::Kind;

std::shared_ptr<const QueueTree> Tree(const cluster::Topology& t, const std::string& yaml) {
  auto specs = job::ParseQueues(yaml, "queues.yaml");
  EXPECT_TRUE(specs.ok()) << specs.status().ToString();
  auto tree = QueueTree::Build(*specs, t);
  EXPECT_TRUE(tree.ok()) << tree.status().ToString();
  return tree.ok() ? *tree : nullptr;
}

std::vector<int64_t> Gpus(const QueueTree& tree, int gpus) {
  std::vector<int64_t> c(tree.dims(), 0);
  c[kGpu] = gpus * 1000;
  return c;
}

// 2 nodes x 8 H100s = 16 GPUs.
TEST(QuotaTest, WithinThenBorrowThenDenied) {
  auto t = Leaves(1, 2);
  auto tree =
      Tree(*t, "queues:\n  - name: a\n    quota: {gpus: 8}\n  - name: b\n    quota: {gpus: 4}\n");
  const int a = tree->FindLeaf("a"), b = tree->FindLeaf("b");
  QuotaLedger l(tree.get());
  EXPECT_EQ(l.Check(a, Gpus(*tree, 8), true).kind, Kind::kWithin);
  EXPECT_EQ(l.Check(a, Gpus(*tree, 8), false).kind, Kind::kBorrow);  // opportunistic always borrows
  l.Add(a, Gpus(*tree, 8));
  // 4 are b's, 4 guaranteed to no one: a may borrow all 8 while b is idle.
  EXPECT_EQ(l.Check(a, Gpus(*tree, 8), true).kind, Kind::kBorrow);
  l.Add(a, Gpus(*tree, 6));
  EXPECT_EQ(l.Borrowed(a, kGpu), 6000);
  EXPECT_EQ(l.Lent(b, kGpu), 2000);  // 2 idle GPUs left in the cluster; 2 of b's 4 are lent
  // b's guarantee is still honoured (the scheduler preempts the borrower to make room).
  EXPECT_EQ(l.Check(b, Gpus(*tree, 4), true).kind, Kind::kWithin);
  auto v = l.Check(a, Gpus(*tree, 4), true);
  EXPECT_EQ(v.kind, Kind::kDenied);
  EXPECT_EQ(v.have, 2000);
  EXPECT_EQ(l.Explain(v, a),
            "queue a may start 2 GPUs more now and the job needs 4 GPUs (the rest is in use, or "
            "guaranteed to "
            "queues that do not lend it)");
  l.Remove(a, Gpus(*tree, 6));
  EXPECT_EQ(l.usage(a, kGpu), 8000);
}

TEST(QuotaTest, LendingAndBorrowingLimits) {
  auto t = Leaves(1, 2);
  auto tree = Tree(*t,
                   "queues:\n"
                   "  - name: a\n    quota: {gpus: 8}\n    borrowing_limit: {gpus: 2}\n"
                   "  - name: b\n    quota: {gpus: 8}\n    lending_limit: {gpus: 3}\n");
  const int a = tree->FindLeaf("a"), b = tree->FindLeaf("b");
  QuotaLedger l(tree.get());
  l.Add(a, Gpus(*tree, 8));
  auto v = l.Check(a, Gpus(*tree, 3), true);
  ASSERT_EQ(v.kind, Kind::kDenied);
  EXPECT_EQ(v.limit_node, a);
  EXPECT_EQ(v.have, 2000);
  EXPECT_EQ(l.Explain(v, a),
            "queue a may start 2 GPUs more now and the job needs 3 GPUs: queue a holds 8 GPUs of "
            "its guarantee "
            "8 GPUs + borrowing limit 2 GPUs");
  EXPECT_EQ(l.Check(a, Gpus(*tree, 2), true).kind, Kind::kBorrow);
  // b lends at most 3: b's usage frees nothing more for a; with b holding 6, a may take 2 more.
  l.Add(b, Gpus(*tree, 6));
  EXPECT_EQ(l.Check(a, Gpus(*tree, 2), true).kind, Kind::kBorrow);
  l.Add(a, Gpus(*tree, 2));
  v = l.Check(b, Gpus(*tree, 2), true);
  EXPECT_EQ(v.kind, Kind::kWithin);
}

TEST(QuotaTest, UnlendableGuaranteeIsKeptFree) {
  auto t = Leaves(1, 2);
  auto tree = Tree(*t,
                   "queues:\n"
                   "  - name: a\n    quota: {gpus: 4}\n"
                   "  - name: b\n    quota: {gpus: 8}\n    lending_limit: {gpus: 2}\n");
  const int a = tree->FindLeaf("a");
  QuotaLedger l(tree.get());
  // 16 GPUs: b keeps 6 of its 8 to itself, so a can reach 10 at most.
  EXPECT_EQ(l.Check(a, Gpus(*tree, 10), true).kind, Kind::kBorrow);
  auto v = l.Check(a, Gpus(*tree, 11), true);
  EXPECT_EQ(v.kind, Kind::kDenied);
  EXPECT_EQ(v.have, 10000);
}

TEST(QuotaTest, HierarchyBorrowsWithinTheOrganisationFirst) {
  auto t = Leaves(1, 4);  // 32 GPUs
  auto tree = Tree(*t,
                   "queues:\n"
                   "  - name: research\n    borrowing_limit: {gpus: 0}\n    children:\n"
                   "      - name: vision\n        quota: {gpus: 8}\n"
                   "      - name: nlp\n        quota: {gpus: 8}\n"
                   "  - name: prod\n    quota: {gpus: 16}\n");
  const int vision = tree->FindLeaf("vision"), research = tree->Find("research");
  EXPECT_EQ(tree->FindLeaf("research"), -1);
  EXPECT_EQ(tree->nodes()[research].nominal[kGpu], 16000);  // the sum of its children
  QuotaLedger l(tree.get());
  // Vision may borrow nlp's idle 8 but the organisation may not borrow prod's.
  EXPECT_EQ(l.Check(vision, Gpus(*tree, 16), true).kind, Kind::kBorrow);
  auto v = l.Check(vision, Gpus(*tree, 17), true);
  EXPECT_EQ(v.kind, Kind::kDenied);
  EXPECT_EQ(v.limit_node, research);
  EXPECT_EQ(l.usage(research, kGpu), 0);
  l.Add(vision, Gpus(*tree, 5));
  EXPECT_EQ(l.usage(research, kGpu), 5000);
}

TEST(QuotaTest, UndeclaredDimensionsDoNotBlockTheGuarantee) {
  auto t = Leaves(1, 2);
  auto tree = Tree(*t, "queues:\n  - name: a\n    quota: {gpus: 8}\n  - name: b\n");
  std::vector<int64_t> c = Gpus(*tree, 8);
  c[kCpu] = 64000;
  c[kMemory] = 1024;
  QuotaLedger l(tree.get());
  EXPECT_EQ(l.Check(tree->FindLeaf("a"), c, true).kind, Kind::kWithin);
  EXPECT_EQ(l.Check(tree->FindLeaf("b"), c, true).kind, Kind::kBorrow);
}

TEST(QuotaTest, ModelQuotasChargeTheModelPlacedOrRequested) {
  auto t = Cluster(
      "nodes:\n"
      "  - {name: h, gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "  - {name: a, gpus: 8, gpu_model: A100, gpu_memory: 40Gi, cpu: 64, memory: 512Gi}\n");
  auto tree = Tree(*t, "queues:\n  - name: q\n    quota: {gpus: {H100: 4}}\n");
  const int q = tree->FindLeaf("q");
  const int h100 =
      kFirstModel + static_cast<int>(std::find(t->models().begin(), t->models().end(), "H100") -
                                     t->models().begin());
  auto req = Whole(*t, 1, 4, "", "H100");
  auto charge = tree->Charge(req, nullptr, *t);
  EXPECT_EQ(charge[h100], 4000);
  EXPECT_EQ(charge[kGpu], 4000);
  QuotaLedger l(tree.get());
  EXPECT_EQ(l.Check(q, charge, true).kind, Kind::kWithin);
  auto any = tree->Charge(Whole(*t, 1, 4), nullptr, *t);
  EXPECT_EQ(any[h100], 0);
  EXPECT_EQ(l.Check(q, any, true).kind, Kind::kBorrow);  // its guarantee is H100s only
}

// A guarantee of 8 H100s is a guarantee of 8 GPUs: the group above counts it (docs/queues.md's
// research: vision's 16 GPUs and nlp's 8 H100s, 24 in all), and nlp's job on its H100s runs
// within it, not as a borrower.
TEST(QuotaTest, ModelGuaranteesCountAsGpusOfTheirGroup) {
  auto t = Cluster(
      "nodes:\n"
      "  - {name: h, gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "  - {name: a1, gpus: 8, gpu_model: A100, gpu_memory: 40Gi, cpu: 64, memory: 512Gi}\n"
      "  - {name: a2, gpus: 8, gpu_model: A100, gpu_memory: 40Gi, cpu: 64, memory: 512Gi}\n");
  auto tree = Tree(*t,
                   "queues:\n  - name: research\n    borrowing_limit: {gpus: 0}\n    children:\n"
                   "      - name: vision\n        quota: {gpus: 16}\n"
                   "      - name: nlp\n        quota: {gpus: {H100: 8}}\n");
  const int research = tree->Find("research"), nlp = tree->FindLeaf("nlp"),
            vision = tree->FindLeaf("vision");
  EXPECT_EQ(tree->nodes()[research].nominal[kGpu], 24000);
  EXPECT_EQ(tree->nodes()[nlp].nominal[kGpu], 8000);
  QuotaLedger l(tree.get());
  auto on_h100 = tree->Charge(Whole(*t, 1, 8, "", "H100"), nullptr, *t);
  EXPECT_EQ(l.Check(nlp, on_h100, true).kind, Kind::kWithin);
  l.Add(nlp, on_h100);
  // With nlp's 8 H100s busy, vision still gets its 16.
  EXPECT_EQ(l.Check(vision, Gpus(*tree, 16), true).kind, Kind::kWithin);
}

TEST(QuotaTest, BuildRejectsWhatCannotBeHonoured) {
  auto t = Leaves(1, 1);
  auto specs = job::ParseQueues(
      "queues:\n  - name: a\n    quota: {gpus: 6}\n  - name: b\n    quota: {gpus: 6}\n", "q.yaml");
  ASSERT_TRUE(specs.ok());
  auto tree = QueueTree::Build(*specs, *t);
  ASSERT_FALSE(tree.ok());
  EXPECT_EQ(
      tree.status().message(),
      "the queues guarantee GPUs (milli) 12000 but the cluster has 8000; lower the quotas so every "
      "guarantee can be honoured at once");
  specs = job::ParseQueues("queues:\n  - name: a\n    quota: {gpus: {B200: 1}}\n", "q.yaml");
  tree = QueueTree::Build(*specs, *t);
  ASSERT_FALSE(tree.ok());
  EXPECT_EQ(tree.status().message(), "queue 'a': GPU model 'B200' is not in this cluster");
}

TEST(QuotaTest, AmountsReadAsResources) {
  auto t = Leaves(1, 1);
  auto tree = Tree(*t, "queues:\n  - name: a\n");
  EXPECT_EQ(tree->Amount(kGpu, 1000), "1 GPU");
  EXPECT_EQ(tree->Amount(kGpu, 2500), "2.5 GPUs");
  EXPECT_EQ(tree->Amount(kFirstModel, 250), "0.25 H100 GPUs");
  EXPECT_EQ(tree->Amount(kCpu, 64000), "64 CPU cores");
  EXPECT_EQ(tree->Amount(kMemory, 1536), "1.5 GiB of memory");
  EXPECT_EQ(tree->Amount(kGpu, kUnlimited), "unlimited");
}

TEST(QuotaTest, DominantShareOverWeight) {
  auto t = Leaves(1, 2);
  auto tree = Tree(*t, "queues:\n  - name: a\n    weight: 2\n  - name: b\n");
  const int a = tree->FindLeaf("a"), b = tree->FindLeaf("b");
  QuotaLedger l(tree.get());
  l.Add(a, Gpus(*tree, 8));
  l.Add(b, Gpus(*tree, 4));
  EXPECT_DOUBLE_EQ(l.Share(a), 0.25);  // 8/16 over weight 2
  EXPECT_DOUBLE_EQ(l.Share(b), 0.25);
  std::vector<double> history(tree->dims(), 0);
  history[kGpu] = 8000;
  EXPECT_DOUBLE_EQ(l.Share(b, &history), 0.5);
}

}  // namespace
}  // namespace hangar::sched::queue
