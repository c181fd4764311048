#include "agent/gpu/fault_script.h"

#include <gtest/gtest.h>

namespace hangar::agent {
namespace {

std::string ErrorOf(const std::string& text, int gpus = 8) {
  auto r = ParseFaultScript(text, "faults.yaml", gpus);
  return r.ok() ? "parsed" : r.status().message();
}

TEST(FaultScript, ParsesEveryKind) {
  auto r = ParseFaultScript(R"(faults:
  - {at: 30s, gpu: 3, kind: xid, code: 79}
  - {at: 1m, node: true, kind: thermal_throttle, duration: 60s}
  - {at: 2m, gpu: 0, kind: pcie_downgrade, gen: 3, width: 4}
  - {gpu: 1, kind: ecc_sbe, count: 5}
  - {gpu: 1, kind: ecc_dbe}
  - {at: 10, gpu: 2, kind: nvlink_down}
  - {at: 1h, gpu: 7, kind: fall_off_bus}
  - {at: 5m, gpu: 2, kind: slow, factor: 0.7, duration: 10m}
)",
                            "faults.yaml", 8);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 8u);
  const auto& f = *r;
  EXPECT_EQ(f[0].kind, FaultKind::kXid);
  EXPECT_EQ(f[0].at, 30 * kSecond);
  EXPECT_EQ(f[0].gpu, 3);
  EXPECT_EQ(f[0].code, 79u);
  EXPECT_EQ(f[0].where, "faults.yaml:2");
  EXPECT_EQ(f[1].gpu, -1);
  EXPECT_EQ(f[1].duration, kMinute);
  EXPECT_EQ(f[2].gen, 3u);
  EXPECT_EQ(f[2].width, 4u);
  EXPECT_EQ(f[3].count, 5u);
  EXPECT_EQ(f[3].at, 0);
  EXPECT_EQ(f[4].count, 1u);  // one error unless told otherwise
  EXPECT_EQ(f[5].at, 10 * kSecond);
  EXPECT_EQ(f[6].kind, FaultKind::kFallOffBus);
  EXPECT_DOUBLE_EQ(f[7].factor, 0.7);
  EXPECT_EQ(FaultKindName(f[7].kind), "slow");
}

TEST(FaultScript, AcceptsABareListAndNothing) {
  auto r = ParseFaultScript("- {gpu: 0, kind: xid, code: 48}\n", "f.yaml", 1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 1u);
  EXPECT_TRUE(ParseFaultScript("", "f.yaml", 1)->empty());
  EXPECT_TRUE(ParseFaultScript("faults:\n", "f.yaml", 1)->empty());
}

TEST(FaultScript, ErrorsNameTheLineAndTheFix) {
  EXPECT_EQ(ErrorOf("faults:\n  - {gpu: 0, kind: melt}\n"),
            "faults.yaml:2: unknown fault kind 'melt'; the kinds are: xid, thermal_throttle, "
            "pcie_downgrade, ecc_sbe, ecc_dbe, nvlink_down, fall_off_bus, slow");
  EXPECT_EQ(ErrorOf("- {gpu: 8, kind: fall_off_bus}\n"),
            "faults.yaml:1: gpu 8 does not exist: this node has 8 GPUs (0-7)");
  EXPECT_EQ(ErrorOf("- {gpu: 0, kind: fall_off_bus}\n", 0),
            "faults.yaml:1: gpu 0 does not exist: this node has 0 GPUs");
  EXPECT_EQ(ErrorOf("- {gpu: 1, kind: xid}\n"), "faults.yaml:1: 'code' is required");
  EXPECT_EQ(ErrorOf("- {gpu: 1, kind: ecc_sbe, code: 3}\n"),
            "faults.yaml:1: 'code' does not apply to a fault of kind ecc_sbe");
  EXPECT_EQ(ErrorOf("- {gpu: 1, kind: xid, code: 79, duration: 5s}\n"),
            "faults.yaml:1: 'duration' does not apply to a fault of kind xid");
  EXPECT_EQ(
      ErrorOf("- {gpu: 1, node: true, kind: nvlink_down}\n"),
      "faults.yaml:1: a fault needs exactly one of 'gpu: N' (one GPU) or 'node: true' (every GPU)");
  EXPECT_EQ(
      ErrorOf("- {kind: nvlink_down}\n"),
      "faults.yaml:1: a fault needs exactly one of 'gpu: N' (one GPU) or 'node: true' (every GPU)");
  EXPECT_EQ(
      ErrorOf("- {at: soon, gpu: 1, kind: nvlink_down}\n"),
      "faults.yaml:1: 'at': 'soon' is not a duration; write it like 90s, 15m, 2h, 1d or 1h30m");
  EXPECT_EQ(ErrorOf("- {gpu: 1, kind: slow, factor: 1.5}\n"),
            "faults.yaml:1: 'factor' must be a number above 0 and at most 1, not '1.5'");
  EXPECT_EQ(ErrorOf("- {gpu: 1, kind: slow}\n"),
            "faults.yaml:1: a slow fault needs 'factor', e.g. factor: 0.7 (70% of normal speed)");
  EXPECT_EQ(
      ErrorOf("- {gpu: 1, kind: pcie_downgrade}\n"),
      "faults.yaml:1: a pcie_downgrade fault needs 'gen' and/or 'width', e.g. gen: 3, width: 4");
  EXPECT_EQ(ErrorOf("- {gpu: 1, kind: pcie_downgrade, gen: 9}\n"),
            "faults.yaml:1: 'gen' must be between 1 and 6, not 9");
  EXPECT_EQ(
      ErrorOf("- {gpu: 1, kind: xid, code: 79, colour: red}\n"),
      "faults.yaml:1: unknown field 'colour' in a fault; the fields are: at, gpu, node, kind, "
      "code, count, gen, width, factor, duration");
  EXPECT_EQ(ErrorOf("faults: {gpu: 1}\n"),
            "faults.yaml:1: a fault script is a list of faults (or 'faults:' holding one), e.g. - "
            "{at: 30s, gpu: 3, kind: xid, code: 79}");
  EXPECT_EQ(ErrorOf("- {gpu: 1, kind: xid, code: [\n").rfind("faults.yaml:2:", 0), 0u)
      << ErrorOf("- {gpu: 1, kind: xid, code: [\n");
}

TEST(FaultScript, MissingFileSaysSo) {
  auto r = LoadFaultScript("/nonexistent/faults.yaml", 8);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "/nonexistent/faults.yaml: cannot open the fault script; check the path");
}

}  // namespace
}  // namespace hangar::agent
