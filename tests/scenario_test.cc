// Runs every golden scenario under tests/scenarios/ and compares its event log with expected.txt.
// HANGAR_UPDATE_GOLDEN=1 rewrites expected.txt (then read the diff before committing it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenario_runner.h"

namespace hangar::testing {
namespace {

std::vector<std::string> ScenarioNames() {
  std::vector<std::string> names;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(HANGAR_SOURCE_DIR) + "/tests/scenarios")) {
    if (e.is_directory()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, MatchesExpected) {
  const std::string dir = std::string(HANGAR_SOURCE_DIR) + "/tests/scenarios/" + GetParam();
  auto got = RunScenario(dir, Owner::kSimulator);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::string expected_path = dir + "/expected.txt";
  if (std::getenv("HANGAR_UPDATE_GOLDEN")) {
    std::ofstream(expected_path) << *got;
    return;
  }
  std::ifstream in(expected_path);
  ASSERT_TRUE(in) << "missing " << expected_path;
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(*got, want.str()) << "scenario " << GetParam();
}

// The controller's own state machine, as `hangar controller` runs it, decides the same: every
// placement, preemption and reason of expected.txt.
TEST_P(ScenarioTest, TheControllerDecidesTheSame) {
  const std::string dir = std::string(HANGAR_SOURCE_DIR) + "/tests/scenarios/" + GetParam();
  auto got = RunScenario(dir, Owner::kController);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::ifstream in(dir + "/expected.txt");
  ASSERT_TRUE(in) << "missing " << dir << "/expected.txt";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(*got, want.str()) << "scenario " << GetParam() << " through the controller";
}

INSTANTIATE_TEST_SUITE_P(Golden, ScenarioTest, ::testing::ValuesIn(ScenarioNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(ScenarioRunnerTest, RunTwiceSameLog) {
  const std::string dir = std::string(HANGAR_SOURCE_DIR) + "/tests/scenarios/backfill_reservation";
  EXPECT_EQ(*RunScenario(dir), *RunScenario(dir));
}

}  // namespace
}  // namespace hangar::testing
