#include "health/validation.h"

#include <gtest/gtest.h>

namespace hangar::health {
namespace {

ValidationReport Report(double gemm, int gpus = 8, double nccl = 0) {
  ValidationReport r;
  r.at = 1000;
  for (int i = 0; i < gpus; ++i) {
    r.gpus.push_back({static_cast<uint16_t>(i), gemm, 3000, 50, 50});
  }
  r.nccl_busbw_gbs = nccl;
  return r;
}

const Finding* FindingOf(const std::vector<Finding>& v, const std::string& key) {
  for (const Finding& f : v) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

TEST(FleetResultsTest, MedianPerModelOverLatestResults) {
  FleetResults fleet;
  fleet.Record(0, "H100", Report(700, 2));
  fleet.Record(1, "H100", Report(720, 2));
  fleet.Record(2, "A100", Report(300, 2));
  fleet.Record(1, "H100", Report(710, 2));  // replaces node 1's results
  FleetResults::Median m = fleet.MedianOf("H100", Metric::kGemmTflops);
  EXPECT_EQ(m.nodes, 2);
  EXPECT_DOUBLE_EQ(m.value, 705);
  EXPECT_EQ(fleet.MedianOf("A100", Metric::kNcclBusBwGbs).nodes, 0);
}

TEST(ValidationTest, GpuAtSeventyPercentOfTheFleetMedianIsAnOutlier) {
  FleetResults fleet;
  ValidationPolicy p;
  for (uint32_t n = 0; n < 3; ++n) fleet.Record(n, "H100", Report(700, 8, 400));
  ValidationReport r = Report(700, 8, 400);
  r.gpus[5].gemm_tflops = 490;  // 0.7 x the median
  r.gpus[6].gemm_tflops = 680;  // 2.9% below: band 1, no outlier
  fleet.Record(3, "H100", r);
  ValidationVerdict v = JudgeValidation(r, "H100", true, fleet, p);
  ASSERT_EQ(v.gpus.size(), 8u);
  EXPECT_TRUE(v.fleet_compared);
  const Finding* f = FindingOf(v.gpus[5].findings, "validation_outlier_gemm_tflops");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->condition.effect, Effect::kDegrade);
  EXPECT_EQ(f->clearing, Clearing::kOnValidation);
  EXPECT_EQ(f->condition.reason,
            "GPU 5 gemm_tflops 490.0 TFLOPS is 30.0% below the fleet median for H100 700.0 "
            "(limit 5.0%)");
  EXPECT_EQ(v.gpus[5].band, 2);
  EXPECT_TRUE(v.gpus[6].findings.empty());
  EXPECT_EQ(v.gpus[6].band, 1);
  EXPECT_EQ(v.gpus[0].band, 0);
  EXPECT_EQ(v.band, 2);
  EXPECT_TRUE(v.node_findings.empty());
}

TEST(ValidationTest, FirstNodesOfAModelCompareWithPeersAndFloorsOnly) {
  FleetResults fleet;
  ValidationPolicy p;
  p.references.push_back({"H100", 990, 0, 0, 0});  // floor 742.5 TFLOPS
  ValidationReport r = Report(800, 8);
  r.gpus[1].gemm_tflops = 700;  // below the floor and below its peers
  fleet.Record(0, "H100", r);
  ValidationVerdict v = JudgeValidation(r, "H100", true, fleet, p);
  EXPECT_FALSE(v.fleet_compared);
  EXPECT_EQ(v.band, 0);  // no band without a fleet
  const Finding* floor = FindingOf(v.gpus[1].findings, "validation_below_floor_gemm_tflops");
  ASSERT_NE(floor, nullptr);
  EXPECT_EQ(floor->condition.effect, Effect::kDrain);
  EXPECT_NE(floor->condition.reason.find("below the floor 742.5 (0.75 x the H100 reference 990.0)"),
            std::string::npos)
      << floor->condition.reason;
  const Finding* peer = FindingOf(v.gpus[1].findings, "validation_outlier_gemm_tflops");
  ASSERT_NE(peer, nullptr);
  EXPECT_NE(peer->condition.reason.find("the median of its node's GPUs"), std::string::npos);
  EXPECT_TRUE(v.gpus[0].findings.empty());
}

TEST(ValidationTest, TwoGpusAloneAreNotComparedWithEachOther) {
  FleetResults fleet;
  ValidationPolicy p;
  ValidationReport r = Report(800, 2);
  r.gpus[1].gemm_tflops = 400;
  fleet.Record(0, "L40S", r);
  ValidationVerdict v = JudgeValidation(r, "L40S", false, fleet, p);
  EXPECT_TRUE(v.gpus[1].findings.empty());  // no reference, no peers, no fleet: nothing to say
}

TEST(ValidationTest, NcclFloorsDependOnNvlink) {
  FleetResults fleet;
  ValidationPolicy p;
  ValidationReport r = Report(700, 8, 120);
  fleet.Record(0, "H100", r);
  ValidationVerdict nvlink = JudgeValidation(r, "H100", true, fleet, p);
  ASSERT_NE(FindingOf(nvlink.node_findings, "nccl_below_floor"), nullptr);
  EXPECT_EQ(FindingOf(nvlink.node_findings, "nccl_below_floor")->condition.reason,
            "NCCL all-reduce bus bandwidth 120.0 GB/s is below the NVLink single-node floor "
            "150.0 GB/s");
  ValidationVerdict pcie = JudgeValidation(r, "H100", false, fleet, p);
  EXPECT_TRUE(pcie.node_findings.empty());
}

TEST(ValidationTest, LatencyIsWorseWhenHigher) {
  FleetResults fleet;
  ValidationPolicy p;
  for (uint32_t n = 0; n < 3; ++n) {
    ValidationReport r = Report(700, 1);
    r.nccl_latency_us = 20;
    fleet.Record(n, "H100", r);
  }
  ValidationReport slow = Report(700, 1);
  slow.nccl_latency_us = 22;  // 10% above
  fleet.Record(3, "H100", slow);
  ValidationVerdict v = JudgeValidation(slow, "H100", true, fleet, p);
  const Finding* f = FindingOf(v.node_findings, "validation_outlier_nccl_latency_us");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->condition.reason.find("10.0% above"), std::string::npos) << f->condition.reason;
  EXPECT_EQ(v.node_band, 2);
}

}  // namespace
}  // namespace hangar::health
