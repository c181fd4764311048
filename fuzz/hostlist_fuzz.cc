// Host lists both ways: cluster.yaml's node ranges (gpu-[00-15], expanded) and Slurm's compact
// NODELIST that `hangar jobs -o slurm` prints (compressed). Input: one name or range per line.
// Every expanded name must be in the compressed text (the compression drops nothing).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/squeue.h"
#include "cluster/cluster_yaml.h"
#include "cluster/hostlist.h"
#include "fuzz_util.h"

namespace {

// Whether a range's upper bound has at most 4 digits (10,000 names at most). The parser allows a
// million names per range, as cluster.yaml may; expanding that many for every line of every input
// times the target out, and cluster_yaml's target reads wide ranges through the same parser.
bool Narrow(std::string_view line) {
  const size_t open = line.find('['), dash = line.find('-', open), close = line.find(']', open);
  if (open == std::string_view::npos || dash == std::string_view::npos ||
      close == std::string_view::npos)
    return true;
  return dash > close || close - dash - 1 <= 4;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  const std::string_view text = fuzz::AsText(data, size);
  std::vector<std::string> hosts;
  size_t b = 0;
  while (b <= text.size() && hosts.size() < 64) {
    size_t e = text.find('\n', b);
    if (e == std::string_view::npos) e = text.size();
    const std::string_view line = text.substr(b, e - b);
    auto names = Narrow(line) ? cluster::ExpandNameRange(line)
                              : StatusOr<std::vector<std::string>>(std::vector<std::string>{});
    if (names.ok()) {
      for (size_t i = 0; i < names->size() && hosts.size() < 4096; ++i)
        hosts.push_back((*names)[i]);
    }
    b = e + 1;
  }
  const std::string compact = cli::CompressHostList(hosts);
  const bool named =
      std::any_of(hosts.begin(), hosts.end(), [](const std::string& h) { return !h.empty(); });
  if (named && compact.empty()) fuzz::Fail("a list of host names compresses to nothing");
  // `scontrol show hostnames` reads SLURM_JOB_NODELIST back: names holding the list's own
  // punctuation have no Slurm form; every other list must come back as the same set.
  const bool plain = std::all_of(hosts.begin(), hosts.end(), [](const std::string& h) {
    return !h.empty() && h.find_first_of(",[]") == std::string::npos;
  });
  if (!plain) return 0;
  auto back = cluster::ExpandHostList(compact);
  if (!back.ok())
    fuzz::Fail("Slurm's form of a host list does not expand: " + back.status().message());
  std::vector<std::string> want = hosts, got = *back;
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  std::sort(got.begin(), got.end());
  got.erase(std::unique(got.begin(), got.end()), got.end());
  if (got != want) fuzz::Fail("a host list does not come back from Slurm's form: " + compact);
  return 0;
}
