#include "job/artifact_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cluster/cluster_yaml.h"
#include "job/job_spec.h"

namespace hangar::job {
namespace {

using ::testing::HasSubstr;

const std::string kHex = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";
const std::string kDigest =
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

std::string Job(const std::string& artifacts, const std::string& group_extra = "") {
  return "name: a\ntasks:\n  - replicas: 2\n    gpus: 1\n    command: [\"true\"]\n" + group_extra +
         artifacts;
}

TEST(ArtifactSpecTest, ReadsAnArtifactAndNormalisesItsDigest) {
  auto spec = ParseJobSpec(
      Job("    artifacts:\n      - {source: \"https://models.example/w.bin\", sha256: " + kHex +
          ", size: 64Mi, path: /models/w.bin}\n"),
      "t");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->tasks[0].artifacts.size(), 1u);
  const ArtifactSpec& a = spec->tasks[0].artifacts[0];
  EXPECT_EQ(a.path, "/models/w.bin");
  ASSERT_EQ(a.objects.size(), 1u);
  EXPECT_EQ(a.objects[0].digest, kDigest);
  EXPECT_EQ(a.objects[0].bytes, 64ll << 20);
  // It survives the stored form.
  auto back = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tasks[0].artifacts, spec->tasks[0].artifacts);
}

TEST(ArtifactSpecTest, JobLevelArtifactsGoToEveryGroupFirst) {
  auto spec = ParseJobSpec("name: a\nartifacts:\n  - {source: \"file:///w\", sha256: " + kHex +
                               ", size: 10, path: w}\ntasks:\n  - {name: x, replicas: 1, gpus: 1, "
                               "command: [\"true\"], artifacts: "
                               "[{source: \"file:///v\", sha256: " +
                               kHex +
                               ", size: 11, path: v}]}\n"
                               "  - {name: y, replicas: 1, gpus: 1, command: [\"true\"]}\n",
                           "t");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->tasks[0].artifacts.size(), 2u);
  EXPECT_EQ(spec->tasks[0].artifacts[0].path, "w");
  EXPECT_EQ(spec->tasks[0].artifacts[1].path, "v");
  ASSERT_EQ(spec->tasks[1].artifacts.size(), 1u);
}

TEST(ArtifactSpecTest, RefusesAMissingDigestSayingHowToGetOne) {
  auto spec = ParseJobSpec(
      Job("    artifacts:\n      - {source: \"https://m.example/w.bin\", size: 10, path: /w}\n"),
      "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("has no sha256"));
  EXPECT_THAT(spec.status().message(), HasSubstr("sha256sum"));
  EXPECT_THAT(spec.status().message(), HasSubstr("job.yaml:"));
}

TEST(ArtifactSpecTest, RefusesBadDigestsSizesSourcesAndPaths) {
  auto bad = [](const std::string& a, const std::string& extra = "") {
    auto spec = ParseJobSpec(Job("    artifacts:\n      - " + a + "\n", extra), "t");
    return spec.ok() ? std::string("accepted") : spec.status().message();
  };
  EXPECT_THAT(bad("{source: \"file:///w\", sha256: abc, size: 1, path: w}"),
              HasSubstr("64 hex digits"));
  EXPECT_THAT(bad("{source: \"file:///w\", sha256: " + kHex + ", size: 1.5G, path: w}"),
              HasSubstr("exact byte count"));
  EXPECT_THAT(bad("{source: \"file:///w\", sha256: " + kHex + ", path: w}"),
              HasSubstr("has no size"));
  EXPECT_THAT(bad("{source: \"s3://b/w\", sha256: " + kHex + ", size: 1, path: w}"),
              HasSubstr("https://, http://"));
  EXPECT_THAT(bad("{source: \"file://w\", sha256: " + kHex + ", size: 1, path: w}"),
              HasSubstr("absolute path"));
  EXPECT_THAT(bad("{source: \"http://host\", sha256: " + kHex + ", size: 1, path: w}"),
              HasSubstr("names no file"));
  EXPECT_THAT(bad("{source: \"file:///w\", sha256: " + kHex + ", size: 1}"),
              HasSubstr("needs path"));
  EXPECT_THAT(bad("{source: \"file:///w\", sha256: " + kHex + ", size: 1, path: ../w}"),
              HasSubstr("'..'"));
  EXPECT_THAT(bad("{source: \"file:///w\", sha256: " + kHex + ", size: 1, path: w}",
                  "    image: busybox\n"),
              HasSubstr("must be absolute"));
  EXPECT_THAT(
      bad("{source: \"file:///w\", sha256: " + kHex + ", size: 1, path: w, shard_by: node}"),
      HasSubstr("only be 'rank'"));
  EXPECT_THAT(bad("{source: \"file:///w\", sha256: " + kHex + ", size: 1, path: w, sha: 1}"),
              HasSubstr("'sha'"));
  EXPECT_THAT(bad("{path: w, shards: [{source: \"file:///a\", sha256: " + kHex + ", size: 1}]}"),
              HasSubstr("add shard_by: rank"));
}

TEST(ArtifactSpecTest, FileSourcesOnlyUnderTheClustersFileRoots) {
  auto source = [](const std::string& url) {
    return ArtifactSpec{"/w", {{url, kDigest, 10}}, false};
  };
  EXPECT_TRUE(CheckFileSources(source("file:///lustre/a/w.bin"), {"/data", "/lustre"}).ok());
  EXPECT_TRUE(CheckFileSources(source("https://models.example/w.bin"), {}).ok())
      << "only file:// sources";
  const Status shadow = CheckFileSources(source("file:///etc/shadow"), {"/data", "/lustre"});
  EXPECT_EQ(shadow.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(shadow.message(),
              HasSubstr("file:///etc/shadow is not under a folder this cluster lets jobs read "
                        "(data.file_roots: /data, /lustre)"));
  EXPECT_THAT(shadow.message(), HasSubstr("add its folder to data.file_roots in cluster.yaml"));
  // Spelled inside, but leading out; and a neighbour that merely shares the prefix.
  EXPECT_FALSE(CheckFileSources(source("file:///data/../etc/shadow"), {"/data"}).ok());
  EXPECT_FALSE(CheckFileSources(source("file:///database/x"), {"/data"}).ok());
  EXPECT_THAT(CheckFileSources(source("file:///data/x"), {}).message(),
              HasSubstr("none: cluster.yaml sets no data.file_roots"));
}

TEST(ArtifactSpecTest, ShardsGoToRanksRoundRobin) {
  auto spec = ParseJobSpec(
      Job("    artifacts:\n      - path: /data/\n        shard_by: rank\n        shards:\n"
          "          - {source: \"file:///d/p0.tar\", sha256: " +
          kHex +
          ", size: 1}\n"
          "          - {source: \"file:///d/p1.tar\", sha256: " +
          kHex +
          ", size: 2}\n"
          "          - {source: \"http://h/d/p2.tar?x=1\", sha256: " +
          kHex + ", size: 3}\n"),
      "t");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const ArtifactSpec& a = spec->tasks[0].artifacts[0];
  auto r0 = ArtifactViews(a, 0, 2);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].path, "/data/p0.tar");
  EXPECT_EQ(r0[1].path, "/data/p2.tar");
  auto r1 = ArtifactViews(a, 1, 2);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].object->bytes, 2);
  auto back = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tasks[0].artifacts, spec->tasks[0].artifacts);
}

TEST(ArtifactSpecTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("123"), 123);
  EXPECT_EQ(*ParseByteSize("4Ki"), 4096);
  EXPECT_EQ(*ParseByteSize("2Gi"), 2ll << 30);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("Gi").ok());
  EXPECT_FALSE(ParseByteSize("99999999999Ti").ok());
}

}  // namespace
}  // namespace hangar::job

namespace hangar::job {
namespace {

// The ```yaml blocks of a doc, in order.
std::vector<std::string> YamlBlocks(const std::string& doc) {
  std::ifstream in(std::string(HANGAR_SOURCE_DIR) + "/" + doc);
  std::string text((std::istreambuf_iterator<char>(in)), {}), out;
  std::vector<std::string> blocks;
  for (size_t at = text.find("```yaml\n"); at != std::string::npos;
       at = text.find("```yaml\n", at)) {
    at += 8;
    const size_t end = text.find("```", at);
    blocks.push_back(text.substr(at, end - at));
    at = end + 3;
  }
  return blocks;
}

TEST(ArtifactDocsTest, TheExamplesInDataMdAndJobFormatMdLoad) {
  auto blocks = YamlBlocks("docs/data.md");
  ASSERT_EQ(blocks.size(), 2u);
  auto job = ParseJobSpec(blocks[0], "docs/data.md");
  ASSERT_TRUE(job.ok()) << job.status().message();
  ASSERT_EQ(job->tasks[0].artifacts.size(), 2u);
  EXPECT_TRUE(job->tasks[0].artifacts[1].shard_by_rank);
  auto cluster = cluster::ParseClusterYaml(
      "nodes: [{name: a, gpus: 1, gpu_model: H100, gpu_memory: 80Gi, cpu: 8, memory: 64Gi}]\n" +
          blocks[1],
      "docs/data.md");
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  EXPECT_EQ(cluster->data.network, "10.20.0.0/16");
  bool found = false;
  for (const auto& b : YamlBlocks("docs/job-format.md")) {
    if (b.rfind("artifacts:", 0) != 0) continue;
    found = true;
    auto spec = ParseJobSpec("name: x\n" + b + "tasks:\n  - gpus: 1\n    command: [\"true\"]\n",
                             "docs/job-format.md");
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    EXPECT_EQ(spec->tasks[0].artifacts[0].objects[0].bytes, 64ll << 20);
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace hangar::job
