#include "job/node_list_spec.h"

#include <gtest/gtest.h>

#include "job/job_spec.h"

namespace hangar::job {
namespace {

using Names = std::vector<std::string>;

TEST(NodeListSpecTest, ReadsHostListsAndListsOfThem) {
  auto a = ParseNodeNames("gpu-[01-03,05]", "exclude_nodes");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (Names{"gpu-01", "gpu-02", "gpu-03", "gpu-05"}));
  a = ParseNodeNames(nlohmann::json::array({"b-2", "a-[1-2]", "b-2"}), "include_nodes");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (Names{"a-1", "a-2", "b-2"}));
  EXPECT_EQ(NodeNamesText(*a), "a-[1-2],b-2");
}

TEST(NodeListSpecTest, RefusesWhatIsNotAHostListSayingTheForm) {
  for (const nlohmann::json& bad :
       {nlohmann::json("gpu-[3-1]"), nlohmann::json("gpu-[1-2"), nlohmann::json(7),
        nlohmann::json::array({1}), nlohmann::json(""), nlohmann::json("n[0-999999]")}) {
    auto a = ParseNodeNames(bad, "exclude_nodes");
    ASSERT_FALSE(a.ok()) << bad.dump();
    EXPECT_EQ(a.status().message().rfind("exclude_nodes", 0), 0u) << a.status().message();
  }
}

TEST(NodeListSpecTest, AJobFileCarriesTheRulesAndTheAccountThroughItsJson) {
  auto spec = ParseJobSpec(
      "name: pinned\ninclude_nodes: gpu-[1-2]\nexclude_nodes: [gpu-7]\naccount: physics\n"
      "tasks: [{replicas: 2, gpus: 1, command: [x]}]\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->nodes.include, (Names{"gpu-1", "gpu-2"}));
  EXPECT_EQ(spec->nodes.exclude, (Names{"gpu-7"}));
  EXPECT_EQ(spec->account, "physics");
  const nlohmann::json j = JobSpecToJson(*spec);
  EXPECT_EQ(j["include_nodes"], "gpu-[1-2]");
  auto back = ParseJobSpec(j.dump(), "stored");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->nodes.include, spec->nodes.include);
  EXPECT_EQ(back->nodes.exclude, spec->nodes.exclude);
  EXPECT_EQ(back->account, "physics");
}

TEST(NodeListSpecTest, ANodeBothIncludedAndExcludedIsRefusedWithItsName) {
  auto spec = ParseJobSpec(
      "name: x\ninclude_nodes: gpu-[1-3]\nexclude_nodes: gpu-[3-4]\ntasks: [{replicas: 3, command: "
      "[x]}]\n",
      "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("both name gpu-3"), std::string::npos)
      << spec.status().message();
  spec = ParseJobSpec("name: x\naccount: 'a b'\ntasks: [{command: [x]}]\n", "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("account 'a b'"), std::string::npos)
      << spec.status().message();
}

}  // namespace
}  // namespace hangar::job
