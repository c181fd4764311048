#include "sim/services/fleet_spec.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

TEST(ServingFleetSpecTest, ReadsEveryField) {
  auto f = ParseServingFleet(R"(name: chat
gpus_per_replica: 2
rps_per_replica: 12.5
min_replicas: 4
max_replicas: 64
warmup: 90s
priority: 10
surge: opportunistic
interval: 30s
scale_down_after: 5m
headroom: 0.2
demand: {shape: sine, trough_rps: 100, peak_rps: 700, peak_at: "15:30"}
)",
                             "fleet.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->name, "chat");
  EXPECT_EQ(f->gpus_per_replica, 2);
  EXPECT_DOUBLE_EQ(f->rps_per_replica, 12.5);
  EXPECT_EQ(f->min_replicas, 4);
  EXPECT_EQ(f->max_replicas, 64);
  EXPECT_EQ(f->max_gpus(), 128);
  EXPECT_EQ(f->warmup, 90 * kSecond);
  EXPECT_EQ(f->priority, 10);
  EXPECT_EQ(f->surge, SurgeTier::kOpportunistic);
  EXPECT_EQ(f->interval, 30 * kSecond);
  EXPECT_EQ(f->scale_down_after, 5 * kMinute);
  EXPECT_DOUBLE_EQ(f->headroom, 0.2);
  EXPECT_DOUBLE_EQ(f->demand.RpsAt(15 * kHour + 30 * kMinute), 700);
}

TEST(ServingFleetSpecTest, ReadsHourlyRates) {
  std::string rates = "[";
  for (int h = 0; h < 24; ++h) rates += std::to_string(h * 10) + (h < 23 ? ", " : "]");
  auto f = ParseServingFleet(
      "gpus_per_replica: 1\nrps_per_replica: 5\nmin_replicas: 0\n"
      "max_replicas: 8\ndemand: {shape: hourly, rps: " +
          rates + "}\n",
      "fleet.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_DOUBLE_EQ(f->demand.RpsAt(7 * kHour + 1), 70);
  EXPECT_EQ(f->surge, SurgeTier::kReclaim);
}

TEST(ServingFleetSpecTest, MistakesAreNamedWithTheirLine) {
  const std::string head = "gpus_per_replica: 1\nrps_per_replica: 5\n";
  auto bad = [&](const std::string& rest) {
    auto f = ParseServingFleet(head + rest, "fleet.yaml");
    EXPECT_FALSE(f.ok()) << rest;
    return f.ok() ? std::string() : f.status().message();
  };
  EXPECT_NE(bad("min_replicas: 9\nmax_replicas: 8\ndemand: {shape: sine, trough_rps: 1, "
                "peak_rps: 2}\n")
                .find("min_replicas must not be above max_replicas"),
            std::string::npos);
  EXPECT_NE(bad("min_replicas: 1\nmax_replicas: 8\ndemand: {shape: sine, trough_rps: 9, "
                "peak_rps: 2}\n")
                .find("fleet.yaml:5: trough_rps must not be above peak_rps"),
            std::string::npos);
  EXPECT_NE(bad("min_replicas: 1\nmax_replicas: 8\ndemand: {shape: hourly, rps: [1, 2]}\n")
                .find("a list of 24 rates"),
            std::string::npos);
  EXPECT_NE(bad("min_replicas: 1\nmax_replicas: 8\nmax_replica: 3\n").find("did you mean"),
            std::string::npos);
  EXPECT_NE(bad("min_replicas: 1\nmax_replicas: 8\n").find("demand"), std::string::npos);
  EXPECT_NE(bad("min_replicas: 1\nmax_replicas: 8\nsurge: maybe\ndemand: {shape: sine, "
                "trough_rps: 1, peak_rps: 2}\n")
                .find("surge must be reclaim or opportunistic"),
            std::string::npos);
  EXPECT_NE(bad("min_replicas: 1\nmax_replicas: 8\ndemand: {shape: sine, trough_rps: 1, "
                "peak_rps: 2, peak_at: \"25:00\"}\n")
                .find("not a time of day"),
            std::string::npos);
}

// The fleet docs/sim-services.md and docs/benchmarks.md run.
TEST(ServingFleetSpecTest, TheDocumentedFleetFileReads) {
  auto f = LoadServingFleet(std::string(HANGAR_SOURCE_DIR) + "/tests/data/sim/serving-fleet.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->max_gpus(), 256);
  EXPECT_DOUBLE_EQ(f->demand.Peak(), 4800);
}

}  // namespace
}  // namespace hangar::sim
