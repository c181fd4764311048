#include <gtest/gtest.h>
#include <fstream>
#include <sstream>
#include "cli/sbatch.h"
namespace hangar::cli::sbatch { namespace {
std::string ReadSource(const std::string& rel) {
  std::ifstream in(std::string(HANGAR_SOURCE_DIR) + "/" + rel);
  std::stringstream ss; ss << in.rdbuf(); return ss.str();
}
TEST(Dump, Examples) {
  for (const char* f : {"examples/slurm/torchrun-2node.sbatch", "examples/slurm/sweep-array.sbatch", "examples/slurm/checkpoint-usr1.sbatch"}) {
    auto j = ConvertBatchScript({ReadSource(f), f, {}, "/home/ada/proj"});
    ASSERT_TRUE(j.ok()) << j.status().message();
    std::cout << j->yaml << "\n-----\n";
  }
}
}}
