// Batch scripts written after the directives and idioms of public ML repositories and university
// cluster guides (tests/data/slurm-corpus/README.md), each through `hangar sbatch --dry-run`'s
// converter as a fresh install has it (no site facts): nearly all are accepted, and a refused one
// names the line of every problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli/sbatch.h"

namespace hangar::cli::sbatch {
namespace {

namespace fs = std::filesystem;

TEST(SbatchCorpusTest, NearlyEveryScriptIsAcceptedAndEachRefusalNamesItsLines) {
  const fs::path dir = fs::path(HANGAR_SOURCE_DIR) / "tests/data/slurm-corpus";
  std::vector<fs::path> scripts;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".sbatch") scripts.push_back(e.path());
  std::sort(scripts.begin(), scripts.end());
  ASSERT_GE(scripts.size(), 30u);
  size_t accepted = 0, warned = 0;
  std::vector<std::string> refused;
  for (const auto& path : scripts) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string name = "slurm-corpus/" + path.filename().string();
    auto job = ConvertBatchScript({text.str(), name, {}, "/home/ada/proj"});
    if (job.ok()) {
      ++accepted;
      warned += !job->warnings.empty();
      for (const auto& w : job->warnings) {
        EXPECT_TRUE(w.rfind(name + ":", 0) == 0) << w;  // a warning names its line too
      }
      continue;
    }
    refused.push_back(path.filename().string());
    std::printf("refused: %s\n", job.status().message().c_str());
    const std::regex line_re("^" + std::regex_replace(name, std::regex(R"([.\-/])"), R"(\$&)") +
                             ":[0-9]+: .+");
    std::istringstream lines(job.status().message());
    for (std::string line; std::getline(lines, line);)
      EXPECT_TRUE(std::regex_match(line, line_re)) << "a refusal without its line: " << line;
  }
  std::printf("slurm corpus: %zu of %zu scripts accepted (%.1f%%), %zu of them with warnings\n",
              accepted, scripts.size(), 100.0 * accepted / scripts.size(), warned);
  EXPECT_GE(accepted * 100, scripts.size() * 95);
  // Every script of the corpus is accepted (hetjobs and --begin were the last refused).
  EXPECT_TRUE(refused.empty()) << refused[0];
}

}  // namespace
}  // namespace hangar::cli::sbatch
