#include "job/spec_text.h"

#include <gtest/gtest.h>

#include "job/job_spec.h"
#include "job/queue_spec.h"

namespace hangar::job {
namespace {

// A job file whose first task group is `group` (YAML lines, indented by 4).
std::string Job(const std::string& group, const std::string& top = "") {
  return "name: t\n" + top + "tasks:\n  - replicas: 1\n    gpus: 1\n" + group;
}

void ExpectRefused(const std::string& text, const std::string& field,
                   const std::string& line = "") {
  auto spec = ParseJobSpec(text, "job.yaml");
  ASSERT_FALSE(spec.ok()) << text;
  const std::string& m = spec.status().message();
  EXPECT_NE(m.find(field), std::string::npos) << "no '" << field << "' in: " << m;
  if (!line.empty()) {
    EXPECT_EQ(m.rfind("job.yaml:" + line + ": ", 0), 0u) << m;
  }
  // The refusal never echoes the control character back to the terminal that shows it.
  for (char c : m) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << m;
}

// NUL, ESC and newlines reached `hangar jobs` raw (an ESC retitled the terminal, a newline forged
// rows): every field refuses them, naming itself, but tab and newline where they mean something.
TEST(SpecTextTest, ControlCharactersAreRefusedNamingTheField) {
  const std::string ok_cmd = "    command: [/bin/true]\n";
  ExpectRefused(Job("    name: \"a\\e]0;owned\\a\"\n" + ok_cmd), "tasks[0].name", "5");
  ExpectRefused(Job("    name: \"a\\nb\"\n" + ok_cmd),
                "tasks[0].name holds a control character, newline");
  ExpectRefused(Job("    env: {A: \"x\\0y\"}\n" + ok_cmd),
                "tasks[0].env.A holds a control character, NUL");
  ExpectRefused(Job("    env: {A: \"x\\ey\"}\n" + ok_cmd),
                "tasks[0].env.A holds a control character, ESC");
  ExpectRefused(Job("    env: {\"A\\e\": x}\n" + ok_cmd),
                "a key of tasks[0].env holds a control character");
  ExpectRefused(Job("    command: [/bin/echo, \"\\e[2J\"]\n"),
                "tasks[0].command[1] holds a control character, ESC");
  ExpectRefused(Job("    command: \"echo \\r\"\n"),
                "tasks[0].command holds a control character, CR");
  ExpectRefused(Job("    workdir: \"/tmp/a\\nb\"\n" + ok_cmd),
                "tasks[0].workdir holds a control character, newline");
  ExpectRefused(Job(ok_cmd, "workdir: \"/tmp/\\tx\"\n"), "workdir holds a control character, tab");
  ExpectRefused(Job("    name: \"a\\u009bb\"\n" + ok_cmd),
                "tasks[0].name holds a control character, U+009B");
  // Where they mean something: a shell script, a certificate in the environment.
  auto fine = ParseJobSpec(
      Job("    env: {CERT: \"-----BEGIN-----\\n\\tabc\\n\"}\n    command:\n      - /bin/sh\n"
          "      - -c\n      - |\n        echo a\n        echo\tb\n"),
      "job.yaml");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ(fine->tasks[0].command[2], "echo a\necho\tb\n");
}

TEST(SpecTextTest, GroupNamesAreNamesNotPaths) {
  const std::string ok_cmd = "    command: [/bin/true]\n";
  ExpectRefused(Job("    name: ../../etc\n" + ok_cmd), "task group name '../../etc'", "5");
  ExpectRefused(Job("    name: " + std::string(10'000, 'a') + "\n" + ok_cmd),
                "(10000 bytes) must be 1-63 letters");
  ExpectRefused(Job("    name: \"a b\"\n" + ok_cmd), "task group name 'a b'");
  ExpectRefused(Job("    workdir: /" + std::string(5000, 'd') + "\n" + ok_cmd),
                "a path is at most 4096");
  auto fine = ParseJobSpec(Job("    name: Train_v2.1-a\n" + ok_cmd), "job.yaml");
  EXPECT_TRUE(fine.ok()) << fine.status().message();
}

// yaml-cpp keeps both entries of a repeated key and reads only a stream's first document: the
// second job of a file was dropped without a word.
TEST(SpecTextTest, DuplicateKeysAndASecondDocumentAreRefusedWithTheirLine) {
  ExpectRefused("name: t\npriority: 1\npriority: 9\ntasks: [{gpus: 1, command: [a]}]\n",
                "'priority' is given twice", "3");
  ExpectRefused(Job("    command: [a]\n    env: {A: 1, B: 2, A: 3}\n"), "'A' is given twice", "6");
  ExpectRefused(
      "{\"name\": \"t\", \"name\": \"u\", \"tasks\": [{\"gpus\": 1, \"command\": [\"a\"]}]}",
      "'name' is given twice");
  ExpectRefused(Job("    command: [a]\n") + "---\n" + Job("    command: [b]\n"),
                "a second document begins here", "7");
  // A closing "---" with nothing after it is no second document.
  auto fine = ParseJobSpec(Job("    command: [a]\n") + "---\n", "job.yaml");
  EXPECT_TRUE(fine.ok()) << fine.status().message();
}

// yaml-cpp 0.7's parser stops moving on a stray ',' at the top of a text yet reports one more
// empty document each time it is asked: YAML::LoadAll never returned and grew until the OOM
// killer came (found by the queues fuzz target: fuzz/corpus/queues/stray-comma*).
TEST(SpecTextTest, TextThatBeginsNoValueIsRefusedNotLoadedForever) {
  auto q = ParseQueues(",u- #ecallow_r ", "q.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("q.yaml:1:1: not valid YAML: the text here begins no value"),
            std::string::npos)
      << q.status().message();
  ExpectRefused(",\nname: t\n", "not valid YAML");
  // "---" alone, before or after the job, begins no second job.
  auto fine = ParseJobSpec("---\n" + Job("    command: [a]\n") + "---\n---\n", "job.yaml");
  EXPECT_TRUE(fine.ok()) << fine.status().message();
}

// The bytes went on into the job's JSON, whose dump threw: `hangar submit` ended with "terminate
// called" (the job_spec_yaml fuzz target; its inputs are in
// fuzz/corpus/job_spec_yaml/invalid-utf8-*).
TEST(SpecTextTest, BytesThatAreNotUtf8AreRefusedWithTheirLineAndColumn) {
  auto spec = ParseJobSpec("name: t\ntasks:\n  - gpus: 1\n    command: [ab\xd5]\n", "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "job.yaml:4:17: byte 0xD5 is not UTF-8; save the file as UTF-8 (iconv -t UTF-8)");
  ExpectRefused(Job("    command: [\"\\udc00\"]\n"),
                "job.yaml:5:22: not valid YAML: invalid unicode");
  auto q = ParseQueues("queues:\n  - name: \xff\n", "q.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("q.yaml:2:11: byte 0xFF is not UTF-8"), std::string::npos)
      << q.status().message();
  auto fine = ParseJobSpec(Job("    command: [\"caf\u00e9\", \"\xe2\x9c\x93\"]\n"), "job.yaml");
  EXPECT_TRUE(fine.ok()) << fine.status().message();
}

TEST(SpecTextTest, ATimeLimitMustBePositive) {
  ExpectRefused(Job("    command: [a]\n", "time_limit: 0s\n"), "time_limit must be positive", "2");
  auto fine = ParseJobSpec(Job("    command: [a]\n", "time_limit: 1s\n"), "job.yaml");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ(fine->time_limit, 1000);
}

// What the store holds was accepted under the rules of its day: a stricter rule must not keep a
// controller from restoring it.
TEST(SpecTextTest, AStoredSpecIsReadUnderTheRulesItWasAcceptedBy) {
  nlohmann::json stored = {{"name", "t"},
                           {"time_limit", "0ms"},
                           {"tasks", {{{"name", "a b"}, {"gpus", 1}, {"command", {"a"}}}}}};
  auto spec = JobSpecFromJson(stored);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->tasks[0].name, "a b");
}

TEST(SpecTextTest, QueueAndUserNamesArePlainText) {
  auto q = ParseQueues("queues:\n  - name: \"a\\nb\"\n", "q.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("q.yaml:2: queue name holds a control character, newline"),
            std::string::npos)
      << q.status().message();
  q = ParseQueues("queues:\n  - name: a\n    users: [alice, \"bob\\e[31m\"]\n", "q.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("users entry holds a control character, ESC"),
            std::string::npos)
      << q.status().message();
  q = ParseQueues("queues:\n  - name: " + std::string(200, 'q') + "\n", "q.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("a name is at most 128"), std::string::npos);
  q = ParseQueues("queues:\n  - name: a\n  - name: b\n---\nqueues:\n  - name: c\n", "q.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("q.yaml:5: a second document"), std::string::npos)
      << q.status().message();
  q = ParseQueues("queues:\n  - name: a\n    weight: 1\n    weight: 2\n", "q.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("q.yaml:4: 'weight' is given twice"), std::string::npos);
}

TEST(SpecTextTest, CheckPlainTextNamesTheField) {
  EXPECT_TRUE(CheckPlainText("user", "alice").ok());
  EXPECT_EQ(CheckPlainText("user", std::string("a\0b", 3)).message(),
            "user holds a control character, NUL (0x00); it is plain text: remove it");
  EXPECT_FALSE(CheckPlainText("user", "a\x7f").ok());
  EXPECT_TRUE(CheckPlainText("argv", "a\tb\nc", true).ok());
}

}  // namespace
}  // namespace hangar::job
