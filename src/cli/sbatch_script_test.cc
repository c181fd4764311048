// Reading #SBATCH lines and their values as sbatch does, and every refusal with its line.
#include "cli/sbatch_script.h"

#include <gtest/gtest.h>

#include <csignal>

#include "job/batch_spec.h"

namespace hangar::cli::sbatch {
namespace {

// The options of `script`, or the error's message in `error`.
SbatchOptions Read(const std::string& script, std::string* error = nullptr) {
  SbatchOptions o;
  auto lines = ReadDirectives(script, "job.sbatch");
  if (!lines.ok()) {
    if (error) *error = lines.status().message();
    return o;
  }
  for (const auto& d : *lines) {
    Status s = ApplyDirective(d, "job.sbatch", &o);
    if (!s.ok()) {
      if (error) *error = s.message();
      return o;
    }
  }
  return o;
}

std::string ErrorOf(const std::string& script) {
  std::string error;
  Read(script, &error);
  return error;
}

TEST(SlurmTimeTest, EveryFormatSbatchAccepts) {
  const std::pair<const char*, Duration> cases[] = {
      {"90", 90 * kMinute},                                 // minutes
      {"5:30", 5 * kMinute + 30 * kSecond},                 // MM:SS
      {"02:03:04", 2 * kHour + 3 * kMinute + 4 * kSecond},  // HH:MM:SS
      {"2-12", 2 * kDay + 12 * kHour},                      // D-HH
      {"1-02:30", kDay + 2 * kHour + 30 * kMinute},         // D-HH:MM
      {"3-00:00:10", 3 * kDay + 10 * kSecond},              // D-HH:MM:SS
      {"0", 0},                                             // no limit
      {"UNLIMITED", 0},
      {"INFINITE", 0},
  };
  for (auto [text, want] : cases) {
    auto d = ParseSlurmTime(text);
    ASSERT_TRUE(d.ok()) << text << ": " << d.status().message();
    EXPECT_EQ(*d, want) << text;
  }
  for (const char* bad : {"", "1h", "1:2:3:4", "-5", "1-", "a-01", "1-1:2:3:4", "10:", ":10"}) {
    auto d = ParseSlurmTime(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(
        d.status().message(),
        "'" + std::string(bad) +
            "' is not a Slurm time; write minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS");
  }
}

TEST(SlurmMemoryTest, MegabytesByDefaultAndBinarySuffixes) {
  EXPECT_EQ(*ParseSlurmMemoryMiB("4000"), 4000);
  EXPECT_EQ(*ParseSlurmMemoryMiB("4000M"), 4000);
  EXPECT_EQ(*ParseSlurmMemoryMiB("64G"), 64 * 1024);
  EXPECT_EQ(*ParseSlurmMemoryMiB("64g"), 64 * 1024);
  EXPECT_EQ(*ParseSlurmMemoryMiB("1T"), 1024 * 1024);
  EXPECT_EQ(*ParseSlurmMemoryMiB("2048K"), 2);
  EXPECT_EQ(*ParseSlurmMemoryMiB("1K"), 1);  // rounded up
  // A B after the unit, as sbatch reads it (str_to_mbytes) and submitit writes it.
  EXPECT_EQ(*ParseSlurmMemoryMiB("64GB"), 64 * 1024);
  EXPECT_EQ(*ParseSlurmMemoryMiB("2gb"), 2048);
  for (const char* bad : {"", "1.5G", "64B", "-1", "G", "12X", "GB", "4GBB"})
    EXPECT_FALSE(ParseSlurmMemoryMiB(bad).ok()) << bad;
}

TEST(SlurmDependencyTest, AfterOkAnyNotOkWithSeveralIds) {
  auto d = ParseDependency("afterok:12:13,afterany:14,afternotok:15,afterok:13");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->ok, (std::vector<uint64_t>{12, 13}));
  EXPECT_EQ(d->any, (std::vector<uint64_t>{14}));
  EXPECT_EQ(d->notok, (std::vector<uint64_t>{15}));
}

TEST(SlurmDependencyTest, WhatHasNoHangarMeaningIsRefusedWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"after:12",
       "'after' (once the job has started) has no Hangar equivalent; use afterok or afterany"},
      {"singleton", "'singleton' (one job of this name at a time) has no Hangar equivalent"},
      {"aftercorr:12",
       "'aftercorr' (element by element) is not supported; afterok:ID waits for the whole array"},
      {"afterok:12?afterany:13",
       "'?' (any one of the dependencies) is not supported; Hangar waits for all of them: join "
       "them with ','"},
      {"afterok:12_3",
       "'12_3': a dependency on one array element is not supported; depend on the whole array (its "
       "job id)"},
      {"afterok", "'afterok' names no job; write e.g. afterok:12:13"},
      {"afterok:x", "'x' is not a job id (a number: see `hangar jobs`)"},
      {"afterburstbuffer:3",
       "'afterburstbuffer' is not a dependency type hangar sbatch reads: afterok, afterany, "
       "afternotok"},
  };
  for (auto [text, why] : cases) {
    auto d = ParseDependency(text);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.status().message(), why) << text;
  }
}

TEST(SlurmSignalTest, SignalAndSecondsWithOrWithoutB) {
  auto s = ParseSignalRequest("USR1@120");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->signal, SIGUSR1);
  EXPECT_EQ(s->before_end, 120 * kSecond);
  EXPECT_FALSE(s->batch_only);
  s = ParseSignalRequest("B:SIGUSR2@30");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->signal, SIGUSR2);
  EXPECT_EQ(s->before_end, 30 * kSecond);
  EXPECT_TRUE(s->batch_only);
  s = ParseSignalRequest("10");  // a number, and Slurm's default of 60 s
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->signal, 10);
  EXPECT_EQ(s->before_end, 60 * kSecond);
  EXPECT_EQ(ParseSignalRequest("R:USR1@60").status().message(),
            "R: (a reservation's end) has no meaning in Hangar; write [B:]SIG@SECONDS");
  EXPECT_EQ(ParseSignalRequest("KILL@60").status().message(),
            "the warning signal cannot be KILL or STOP (they cannot be caught)");
  EXPECT_EQ(ParseSignalRequest("USR3@60").status().message(),
            "'USR3' is not a signal; write e.g. USR1@120");
  EXPECT_EQ(ParseSignalRequest("USR1@soon").status().message(),
            "'soon' is not a number of seconds (0 to 65535)");
}

TEST(SlurmArrayTest, RangesStepsListsAndCap) {
  auto a = ParseArraySpec("0-49%8");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices.size(), 50u);
  EXPECT_EQ(a->max_running, 8);
  a = ParseArraySpec("0-9:3");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices, (std::vector<uint32_t>{0, 3, 6, 9}));
  a = ParseArraySpec("1,3,5-7");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices, (std::vector<uint32_t>{1, 3, 5, 6, 7}));
  EXPECT_EQ(a->max_running, 0);
  for (const char* bad :
       {"", "5-1", "0-9:0", "0-9%0", "a-b", "1-2-3", "0-9:2:3", "0-9%", "0-200000"}) {
    EXPECT_FALSE(ParseArraySpec(bad).ok()) << bad;
  }
  EXPECT_EQ(ParseArraySpec("5-1").status().message(),
            "'5-1' is not an array spec ('5-1' runs backwards or past 4000000); write e.g. 0-49, "
            "0-49:2, 0-49%8 or "
            "1,3,5-7");
}

// Found by fuzz/sbatch_fuzz.cc: `--array=0:4` was taken, and the job file it made (array: 0:4)
// was then refused by the controller's parser. A step needs a range, in both.
TEST(ArraySpecTest, AStepWithoutARangeIsRefusedAsTheJobFileRefusesIt) {
  auto a = ParseArraySpec("0:4");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("a step needs a range, e.g. 0-48:2"), std::string::npos)
      << a.status().message();
  EXPECT_FALSE(job::ParseArraySpec("0:4").ok());
  EXPECT_TRUE(ParseArraySpec("0-4:2").ok());
}

TEST(DirectivesTest, OnlyTheLeadingCommentBlockAndEveryForm) {
  const std::string script =
      "#!/bin/bash\n"
      "\n"
      "# a comment\n"
      "#SBATCH --job-name=train\n"
      "#SBATCH --nodes 2\n"
      "#SBATCH -t 10 -p gpu   # two on one line, then a comment\n"
      "#SBATCH -n4\n"
      "#SBATCH --output=\"out dir/%j.log\"\n"
      "## SBATCH --exclusive (disabled, as people do)\n"
      "# SBATCH --exclusive\n"
      "  #SBATCH --exclusive (indented: sbatch ignores it)\n"
      "echo start\n";
  std::string error;
  SbatchOptions o = Read(script, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(o.job_name, "train");
  EXPECT_EQ(o.nodes, 2);
  EXPECT_EQ(o.time, 10 * kMinute);
  EXPECT_EQ(o.partition, "gpu");
  EXPECT_EQ(o.ntasks, 4);
  EXPECT_EQ(o.output, "out dir/%j.log");
  EXPECT_EQ(o.where["job-name"], "job.sbatch:4");
  EXPECT_EQ(o.where["partition"], "job.sbatch:6");
}

TEST(DirectivesTest, EveryDirectiveItReads) {
  SbatchOptions o = Read(
      "#!/bin/sh\n"
      "#SBATCH -J a -N 1-1 --ntasks-per-node=2 --ntasks=2 --gres=gpu:h100:2 --cpus-per-gpu=6 "
      "--mem-per-gpu=40G\n"
      "#SBATCH --cpus-per-task=3 --mem=100G --time=1:00:00 --partition=p --qos=high --array=1-3 -d "
      "afterok:7\n"
      "#SBATCH --signal=B:USR2@90 -o o.txt -e e.txt -D /scratch --open-mode=append "
      "--export=A=1,B=x=y --nice=5\n"
      "#SBATCH --requeue --gpus-per-task=1\n"
      "true\n");
  EXPECT_EQ(o.job_name, "a");
  EXPECT_EQ(o.nodes, 1);
  EXPECT_EQ(o.ntasks_per_node, 2);
  EXPECT_EQ(o.ntasks, 2);
  EXPECT_EQ(o.gpus_per_node, 2);
  EXPECT_EQ(o.gpu_type, "h100");
  EXPECT_EQ(o.cpus_per_gpu, 6);
  EXPECT_EQ(o.mem_per_gpu_mib, 40 * 1024);
  EXPECT_EQ(o.cpus_per_task, 3);
  EXPECT_EQ(o.mem_mib, 100 * 1024);
  EXPECT_EQ(o.time, kHour);
  EXPECT_EQ(o.partition, "p");
  EXPECT_EQ(o.qos, "high");
  EXPECT_EQ(o.array, "1-3");
  ASSERT_TRUE(o.dependency);
  EXPECT_EQ(o.dependency->ok, (std::vector<uint64_t>{7}));
  ASSERT_TRUE(o.signal);
  EXPECT_EQ(o.signal->signal, SIGUSR2);
  EXPECT_EQ(o.output, "o.txt");
  EXPECT_EQ(o.error, "e.txt");
  EXPECT_EQ(o.chdir, "/scratch");
  EXPECT_EQ(o.open_mode, "append");
  EXPECT_EQ(o.export_env,
            (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "x=y"}}));
  EXPECT_EQ(o.nice, 5);
  EXPECT_EQ(o.gpus_per_task, 1);
  EXPECT_EQ(Read("#!/bin/sh\n#SBATCH --gpus-per-node=a100:4\n").gpu_type, "a100");
  EXPECT_EQ(Read("#!/bin/sh\n#SBATCH --gres=gpu\n").gpus_per_node, 1);
  EXPECT_EQ(Read("#!/bin/sh\n#SBATCH --nice\n").nice, 100);
}

TEST(DirectivesTest, ACommandLineOptionOverridesTheScript) {
  auto script = ReadDirectives("#!/bin/sh\n#SBATCH --array=0-9\n#SBATCH -J a\n", "s.sh");
  auto cli = ReadCommandLine({"--array=0-3", "-J", "b"});
  ASSERT_TRUE(script.ok() && cli.ok());
  SbatchOptions o;
  for (const auto& d : *script) ASSERT_TRUE(ApplyDirective(d, "s.sh", &o).ok());
  for (const auto& d : *cli) ASSERT_TRUE(ApplyDirective(d, "s.sh", &o).ok());
  EXPECT_EQ(o.array, "0-3");
  EXPECT_EQ(o.job_name, "b");
  EXPECT_EQ(o.where["array"], "command line");
  EXPECT_EQ(ReadCommandLine({"--frobnicate", "3", "-t"}).status().message(),
            "command line: --frobnicate 3 is not an sbatch option hangar sbatch knows; "
            "docs/slurm.md lists the directives it reads\n"
            "command line: -t needs a value, e.g. --time=VALUE");
}

// The options of `script` and the warnings they gave.
std::vector<std::string> WarningsOf(const std::string& script) {
  std::string error;
  SbatchOptions o = Read(script, &error);
  EXPECT_EQ(error, "") << script;
  return o.warnings;
}

// What has no effect here, or what Hangar does anyway, is accepted with a warning naming it;
// refusing it made three of four real scripts fail.
TEST(DirectivesTest, WhatHasNoEffectHereIsAcceptedWithAWarningNamingIt) {
  EXPECT_EQ(WarningsOf("#!/bin/bash\n#SBATCH --mail-type=END,FAIL\n#SBATCH --hint=nomultithread\n"),
            (std::vector<std::string>{
                "job.sbatch:2: #SBATCH --mail-type=END,FAIL is set aside: Hangar sends no mail; "
                "follow the job with `hangar events job/ID` or `hangar jobs`",
                "job.sbatch:3: #SBATCH --hint=nomultithread is set aside: Hangar does not bind a "
                "task's threads to cores or sockets; the task sees the CPUs it asked"}));
  for (const char* line : {"--mail-user=a@b.c",
                           "--distribution=cyclic",
                           "-m block:block",
                           "--switches=1@10",
                           "--licenses=matlab",
                           "--comment=x",
                           "--threads-per-core=1",
                           "--ntasks-per-core=1",
                           "--gpu-bind=closest",
                           "--no-requeue",
                           "--oversubscribe",
                           "--propagate=STACK",
                           "--wait",
                           "--get-user-env",
                           "--deadline=now+1hour",
                           "--priority=5",
                           "--profile=task",
                           "--overcommit",
                           "--tmp=100G",
                           "--kill-on-invalid-dep=yes",
                           "--spread-job",
                           "-v"}) {
    const auto w = WarningsOf("#!/bin/bash\n#SBATCH " + std::string(line) + "\ntrue\n");
    ASSERT_EQ(w.size(), 1u) << line;
    EXPECT_EQ(w[0].rfind("job.sbatch:2: #SBATCH " + std::string(line) + " is set aside: ", 0), 0u)
        << w[0];
  }
  // Honoured as it is: the account is the job's accounting label, the node lists placement rules.
  EXPECT_TRUE(WarningsOf("#!/bin/bash\n#SBATCH -A proj -w node[1-2] -x n3\n").empty());
  // Honoured, with a warning saying how far.
  EXPECT_EQ(WarningsOf("#!/bin/bash\n#SBATCH --export=ALL,NCCL_DEBUG=INFO\n"),
            (std::vector<std::string>{
                "job.sbatch:2: #SBATCH --export=ALL,NCCL_DEBUG=INFO: the submitter's whole "
                "environment does not travel to a Hangar task; name what it needs (--export=NAME "
                "or NAME=value), or set it in the script"}));
  EXPECT_EQ(WarningsOf("#!/bin/bash\n#SBATCH -p gpu,gpu-long\n"),
            (std::vector<std::string>{"job.sbatch:2: #SBATCH -p gpu,gpu-long: a Hangar job waits "
                                      "in one queue: it goes to 'gpu', the first of the list"}));
  EXPECT_EQ(WarningsOf("#!/bin/bash\n#SBATCH --gres=gpu:2,nvme:1\n").size(), 1u);
  EXPECT_EQ(WarningsOf("#!/bin/bash\n#SBATCH --dependency=singleton\n").size(), 1u);
  EXPECT_EQ(WarningsOf("#!/bin/bash\n#SBATCH --mem=0\n").size(), 1u);
  EXPECT_EQ(WarningsOf("#!/bin/bash\n#SBATCH -N 2-4\n"),
            std::vector<std::string>{"job.sbatch:2: #SBATCH -N 2-4: a Hangar gang has a fixed "
                                     "size: the job asks 2 nodes, the least of the range "
                                     "(SLURM_NNODES says so)"});
  EXPECT_EQ(Read("#!/bin/bash\n#SBATCH -N 2-4\n").nodes, 2);
  SbatchOptions o = Read(
      "#!/bin/bash\n#SBATCH --exclusive --tasks-per-node=4 -G a100:8 --ntasks-per-gpu=2 -C "
      "'volta32gb&ib' --mem-per-cpu=4G --export=HOME,A=1\n");
  EXPECT_TRUE(o.exclusive);
  EXPECT_EQ(o.ntasks_per_node, 4);
  EXPECT_EQ(o.where["ntasks-per-node"], "job.sbatch:2");
  EXPECT_EQ(o.gpus_total, 8);
  EXPECT_EQ(o.gpu_type, "a100");
  EXPECT_EQ(o.ntasks_per_gpu, 2);
  EXPECT_EQ(o.constraint, "volta32gb&ib");
  EXPECT_EQ(o.mem_per_cpu_mib, 4096);
  EXPECT_EQ(o.export_names, std::vector<std::string>{"HOME"});
}

// Only what would change what the job does, and cannot be carried, is refused, with its line.
TEST(DirectivesTest, WhatWouldChangeTheResultIsRefusedWithItsLine) {
  EXPECT_EQ(ErrorOf("#!/bin/bash\n#SBATCH -N 1\n\n#SBATCH --begin=whenever\n"),
            "job.sbatch:4: #SBATCH --begin=whenever: 'whenever' is not a time sbatch reads: write "
            "now+30minutes, 22:00, 10:00pm, tomorrow, midnight, 2026-12-24 or "
            "2026-12-24T18:00:00");
  EXPECT_EQ(ErrorOf("#!/bin/bash\n#SBATCH --frobnicate=3\n"),
            "job.sbatch:2: #SBATCH --frobnicate=3 is not an sbatch option hangar sbatch knows; "
            "docs/slurm.md lists the directives it reads");
  for (const char* name :
       {"wrap=hostname", "test-only", "uid=5", "input=in.txt", "container=/b", "x11"}) {
    const std::string want =
        "job.sbatch:3: #SBATCH --" + std::string(name) + " cannot be honoured by hangar sbatch; ";
    const std::string got =
        ErrorOf("#!/bin/bash\n#SBATCH -J ok\n#SBATCH --" + std::string(name) + "\n");
    EXPECT_EQ(got.rfind(want, 0), 0u) << name << ": " << got;
  }
}

TEST(DirectivesTest, BadValuesAreRefusedWithTheirLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"--time=soon",
       "job.sbatch:2: #SBATCH --time=soon: 'soon' is not a Slurm time; write minutes, MM:SS, "
       "HH:MM:SS, D-HH, D-HH:MM "
       "or D-HH:MM:SS"},
      {"-t 1h",
       "job.sbatch:2: #SBATCH -t 1h: '1h' is not a Slurm time; write minutes, MM:SS, HH:MM:SS, "
       "D-HH, D-HH:MM "
       "or D-HH:MM:SS"},
      {"--nodes=4-2",
       "job.sbatch:2: #SBATCH --nodes=4-2: the range '4-2' runs backwards; write MIN-MAX"},
      {"--nodes=0",
       "job.sbatch:2: #SBATCH --nodes=0: '0' is not a node count (a whole number from 1 to "
       "100000)"},
      {"--gres=gpu:x",
       "job.sbatch:2: #SBATCH --gres=gpu:x: 'x' is not a GPU count (a whole number from 1 to 64)"},
      {"--gres=gpu:1,gpu:2",
       "job.sbatch:2: #SBATCH --gres=gpu:1,gpu:2: 'gpu:1,gpu:2' asks GPUs twice; give one gpu:N "
       "or gpu:TYPE:N"},
      {"--mem-per-gpu=lots",
       "job.sbatch:2: #SBATCH --mem-per-gpu=lots: 'lots' is not a Slurm size; write a whole number "
       "with K, M (the "
       "default), G or T, e.g. 64G"},
      {"--open-mode=w",
       "job.sbatch:2: #SBATCH --open-mode=w: --open-mode is append or truncate, not 'w'"},
      {"--array=9-1",
       "job.sbatch:2: #SBATCH --array=9-1: '9-1' is not an array spec ('9-1' runs backwards or "
       "past 4000000); write "
       "e.g. 0-49, 0-49:2, 0-49%8 or 1,3,5-7"},
      {"--dependency=after:3",
       "job.sbatch:2: #SBATCH --dependency=after:3: 'after' (once the job has started) has no "
       "Hangar equivalent; use "
       "afterok or afterany"},
      {"--signal=USR1@x",
       "job.sbatch:2: #SBATCH --signal=USR1@x: 'x' is not a number of seconds (0 to 65535)"},
      {"--job-name", "job.sbatch:2: #SBATCH --job-name needs a value, e.g. --job-name=VALUE"},
      {"--requeue=yes", "job.sbatch:2: #SBATCH --requeue=yes takes no value; write --requeue"},
      {"time=10",
       "job.sbatch:2: #SBATCH time=10 is not an sbatch option; write options like --time=10 or -t "
       "10"},
  };
  for (auto [line, want] : cases)
    EXPECT_EQ(ErrorOf("#!/bin/bash\n#SBATCH " + std::string(line) + "\n"), want) << line;
}

// sbatch ignores it; so does hangar sbatch, saying so.
TEST(DirectivesTest, AnSbatchLineAfterTheFirstCommandIsIgnoredWithAWarning) {
  Diagnostics d;
  auto lines = ReadDirectives("#!/bin/bash\n#SBATCH -J a\nmodule load cuda\n#SBATCH --time=10\n",
                              "job.sbatch", &d);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].name, "job-name");
  EXPECT_TRUE(d.errors.empty());
  EXPECT_EQ(d.warnings, std::vector<std::string>{
                            "job.sbatch:4: #SBATCH --time=10 comes after the script's first "
                            "command (line 3), so sbatch ignores it, and so does hangar sbatch; "
                            "move it up to have it read"});
}

// A script's problems come all at once, each with its line, not one per run.
TEST(DirectivesTest, EveryUnreadableLineIsReportedAtOnce) {
  Diagnostics d;
  ReadDirectives("#!/bin/bash\n#SBATCH --frob=1 -t\n#SBATCH nodes=2\n#SBATCH -J ok\n", "job.sbatch",
                 &d);
  EXPECT_EQ(d.errors,
            (std::vector<std::string>{
                "job.sbatch:2: #SBATCH --frob=1 is not an sbatch option hangar sbatch knows; "
                "docs/slurm.md lists the directives it reads",
                "job.sbatch:2: #SBATCH -t needs a value, e.g. --time=VALUE",
                "job.sbatch:3: #SBATCH nodes=2 is not an sbatch option; write options like "
                "--time=10 or -t 10"}));
}

}  // namespace
}  // namespace hangar::cli::sbatch
