#include "sim/windows/window_file.h"

#include <gtest/gtest.h>

#include "sim/replay/replay.h"

namespace hangar::sim {
namespace {

TEST(SimReservationsTest, ReadsTheControllersFields) {
  auto topo = UniformCluster("", 8);
  auto r = ParseSimReservations(R"(reservations:
  - name: maint1
    nodes: node-[2-3]
    start: 2017-10-11T10:00:00Z
    duration: 4h
    maintenance: true
  - name: demo
    nodes: [node-5]
    start: 2017-10-11T12:00:00Z
    end: 2017-10-11T13:00:00Z
    users: [alice]
)",
                                "windows.yaml", *topo);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "maint1");
  EXPECT_EQ((*r)[0].nodes, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ((*r)[0].start, *ParseUtcTimestamp("2017-10-11 10:00:00"));
  EXPECT_EQ((*r)[0].end - (*r)[0].start, 4 * kHour);
  EXPECT_TRUE((*r)[0].maintenance);
  EXPECT_FALSE((*r)[1].maintenance);
  EXPECT_EQ((*r)[1].users, (std::vector<std::string>{"alice"}));
}

TEST(SimReservationsTest, RefusesWhatTheControllerRefuses) {
  auto topo = UniformCluster("", 8);
  auto bad = [&](const std::string& text) {
    auto r = ParseSimReservations(text, "windows.yaml", *topo);
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  const std::string a =
      "reservations:\n  - {name: a, nodes: node-1, start: 2017-10-11T10:00:00Z, duration: 4h, "
      "maintenance: true}\n";
  EXPECT_NE(bad(a + "  - {name: b, nodes: 'node-[0-1]', start: 2017-10-11T12:00:00Z, duration: "
                    "1h, maintenance: true}\n")
                .find("windows.yaml:3: reservation 'b' overlaps reservation 'a'"),
            std::string::npos);
  EXPECT_NE(bad("reservations:\n  - {name: c, nodes: node-1, start: 2017-10-11T10:00:00Z, "
                "duration: 4h}\n")
                .find("say who may run in the reservation"),
            std::string::npos);
  EXPECT_NE(bad("reservations:\n  - {name: c, nodes: node-99, start: 2017-10-11T10:00:00Z, "
                "duration: 4h, maintenance: true}\n")
                .find("node-99"),
            std::string::npos);
  EXPECT_NE(bad("reservations:\n  - {name: c, node: node-1, start: 2017-10-11T10:00:00Z, "
                "duration: 4h, maintenance: true}\n")
                .find("did you mean 'nodes'"),
            std::string::npos);
  EXPECT_NE(bad("windows: []\n").find("list under reservations"), std::string::npos);
}

// The window docs/sim-windows.md and docs/benchmarks.md run.
TEST(SimReservationsTest, TheDocumentedFileReads) {
  auto topo = UniformCluster("", 128);
  auto r = LoadSimReservations(std::string(HANGAR_SOURCE_DIR) + "/tests/data/sim/maintenance.yaml",
                               *topo);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 1u);
  EXPECT_TRUE((*r)[0].maintenance);
}

}  // namespace
}  // namespace hangar::sim
