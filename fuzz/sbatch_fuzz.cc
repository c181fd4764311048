// `hangar sbatch`: a batch script's #SBATCH lines into a Hangar job. Input: the script; a first
// line starting with "ARGS " gives sbatch command-line words (space-separated) that override it.
// A script that converts must give a job file the controller's parser accepts.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "cli/sbatch.h"
#include "cli/sbatch_script.h"
#include "fuzz_util.h"
#include "job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  using namespace hangar::cli::sbatch;
  std::string_view text = fuzz::AsText(data, size);
  Submission s;
  if (text.substr(0, 5) == "ARGS ") {
    const size_t nl = text.find('\n');
    std::istringstream words(
        std::string(text.substr(5, nl == std::string_view::npos ? nl : nl - 5)));
    for (std::string w; words >> w;) s.command_line.push_back(w);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  s.script_text = std::string(text);
  s.script_name = "job.sbatch";
  s.submit_dir = "/home/ada/proj";
  (void)ReadCommandLine(s.command_line);
  auto job = ConvertBatchScript(s);
  if (!job.ok()) return 0;
  auto parsed = job::ParseJobSpec(job->yaml, "converted");
  if (!parsed.ok())
    fuzz::Fail("a converted script is not a job file: " + parsed.status().message() + "\n" +
               job->yaml);
  return 0;
}
