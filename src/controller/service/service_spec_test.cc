#include "controller/service/service_spec.h"

#include <gtest/gtest.h>

namespace hangar::controller::service {
namespace {

constexpr const char* kFile = R"(name: echo
service:
  replicas: 3
  restart: {backoff: 500ms, max_backoff: 8s}
  readiness: {http: /healthz, interval: 200ms, timeout: 1s, failure_threshold: 2}
  update: {max_surge: 2, max_unavailable: 1, progress_deadline: 15s}
  drain_grace: 3s
tasks:
  - name: server
    cpu: 1
    command: [python3, model.py]
)";

TEST(ServiceSpecTest, ReadsTheServiceBlockAndTheReplicaTemplate) {
  auto s = ParseServiceSpec(kFile, "echo.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "echo");
  EXPECT_EQ(s->options.replicas, 3);
  EXPECT_EQ(s->options.restart.backoff, 500);
  EXPECT_EQ(s->options.restart.max_backoff, 8000);
  EXPECT_EQ(s->options.readiness.kind, ProbeSpec::Kind::kHttp);
  EXPECT_EQ(s->options.readiness.path, "/healthz");
  EXPECT_EQ(s->options.readiness.interval, 200);
  EXPECT_EQ(s->options.readiness.failure_threshold, 2);
  EXPECT_EQ(s->options.update.max_surge, 2);
  EXPECT_EQ(s->options.update.max_unavailable, 1);
  EXPECT_EQ(s->options.update.progress_deadline, 15000);
  EXPECT_EQ(s->options.drain_grace, 3000);
  ASSERT_EQ(s->replica.tasks.size(), 1u);
  EXPECT_EQ(s->replica.tasks[0].command[0], "python3");
}

TEST(ServiceSpecTest, UpdateDefaultsToOneSurgeAndNoneUnavailable) {
  auto s = ParseServiceSpec(
      "name: a\nservice: {replicas: 2, readiness: {tcp: HANGAR_PORT}}\ntasks: [{cpu: 1, command: "
      "[x]}]\n",
      "a.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->options.update.max_surge, 1);
  EXPECT_EQ(s->options.update.max_unavailable, 0);
  EXPECT_EQ(s->options.readiness.kind, ProbeSpec::Kind::kTcp);
  EXPECT_EQ(s->options.readiness.port, 0);
}

TEST(ServiceSpecTest, JobErrorsKeepTheFilesLineNumbers) {
  // The service block spans lines 2-4; the typo is on line 7.
  auto s = ParseServiceSpec(
      "name: a\nservice:\n  replicas: 2\n  drain_grace: 1s\ntasks:\n  - name: x\n    comand: [x]\n",
      "a.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("a.yaml:7"), std::string::npos) << s.status().message();
}

TEST(ServiceSpecTest, AutoscaleTakesMinAndMaxInsteadOfReplicas) {
  auto s = ParseServiceSpec(
      "name: a\nservice: {autoscale: {min: 2, max: 5, in_flight_per_replica: 8, scale_down_after: "
      "1m}}\n"
      "tasks: [{cpu: 1, command: [x]}]\n",
      "a.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->options.autoscale.on);
  EXPECT_EQ(s->options.replicas, 2);
  EXPECT_EQ(s->options.autoscale.max, 5);
  EXPECT_EQ(s->options.autoscale.in_flight_per_replica, 8);
  EXPECT_EQ(s->options.autoscale.scale_down_after, 60000);
  auto back = ServiceOptionsFromJson(ServiceOptionsToJson(s->options));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ServiceOptionsToJson(*back), ServiceOptionsToJson(s->options));
  for (const char* bad : {"{replicas: 2, autoscale: {min: 1, max: 2}}",
                          "{autoscale: {min: 3, max: 2}}", "{autoscale: {max: 2}}"}) {
    EXPECT_FALSE(ParseServiceSpec(std::string("name: a\nservice: ") + bad +
                                      "\ntasks: [{cpu: 1, command: [x]}]\n",
                                  "a.yaml")
                     .ok())
        << bad;
  }
}

TEST(ServiceSpecTest, JsonFilesWork) {
  auto s = ParseServiceSpec(
      R"({"name": "j", "service": {"replicas": 1}, "tasks": [{"cpu": 1, "command": ["x"]}]})",
      "body");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "j");
}

TEST(ServiceSpecTest, RefusesWhatAServiceCannotBe) {
  const char* bad[] = {
      "name: a\ntasks: [{cpu: 1, command: [x]}]\n",  // no block
      "name: a\nservice: {replicas: 1}\ntasks: [{command: [x]}, {name: b, command: "
      "[y]}]\n",                                                                  // two groups
      "name: a\nservice: {replicas: 1}\ntasks: [{replicas: 2, command: [x]}]\n",  // replicas
                                                                                  // in
                                                                                  // the
                                                                                  // group
      "name: a\nservice: {replicas: 1, readiness: {exec: [x]}}\ntasks: [{cpu: 1, "
      "command: [x]}]\n",  // unknown probe
      "name: a\nservice: {replicas: 1, update: {max_surge: 0, max_unavailable: "
      "0}}\ntasks: [{cpu: 1, command: [x]}]\n",
      "name: A_b\nservice: {replicas: 1}\ntasks: [{cpu: 1, command: [x]}]\n",  // not a
                                                                               // service
                                                                               // name
      "name: a\nservice: {replicas: 1, readiness: {http: healthz}}\ntasks: [{cpu: 1, "
      "command: [x]}]\n",
  };
  for (const char* text : bad) EXPECT_FALSE(ParseServiceSpec(text, "f").ok()) << text;
}

TEST(ServiceSpecTest, OptionsRoundTripThroughJson) {
  auto s = ParseServiceSpec(kFile, "echo.yaml");
  ASSERT_TRUE(s.ok());
  auto back = ServiceOptionsFromJson(ServiceOptionsToJson(s->options));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ServiceOptionsToJson(*back), ServiceOptionsToJson(s->options));
}

TEST(ServiceSpecTest, ReadsCommandProbesAndALivenessProbe) {
  auto s = ParseServiceSpec(
      "name: a\nservice:\n  replicas: 2\n"
      "  readiness: {command: [sh, -c, 'test -e loaded'], interval: 500ms}\n"
      "  liveness: {http: /live, port: 8081, interval: 2s, timeout: 500ms, failure_threshold: 4, "
      "initial_delay: 30s}\n"
      "tasks: [{cpu: 1, command: [x]}]\n",
      "a.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->options.readiness.kind, ProbeSpec::Kind::kCommand);
  EXPECT_EQ(s->options.readiness.command, (std::vector<std::string>{"sh", "-c", "test -e loaded"}));
  ASSERT_TRUE(s->options.liveness.has_value());
  EXPECT_EQ(s->options.liveness->kind, ProbeSpec::Kind::kHttp);
  EXPECT_EQ(s->options.liveness->path, "/live");
  EXPECT_EQ(s->options.liveness->port, 8081);
  EXPECT_EQ(s->options.liveness->failure_threshold, 4);
  EXPECT_EQ(s->options.liveness->initial_delay, 30'000);
  auto back = ServiceOptionsFromJson(ServiceOptionsToJson(s->options));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ServiceOptionsToJson(*back), ServiceOptionsToJson(s->options));
  EXPECT_EQ(back->liveness->initial_delay, 30'000);
  // Without one, there is none (a replica is restarted only when its process ends).
  auto plain = ParseServiceSpec(kFile, "echo.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->options.liveness.has_value());
}

TEST(ServiceSpecTest, RefusesProbesThatAreNotOneThing) {
  const char* bad[] = {
      "{http: /a, command: [x]}",         // two kinds
      "{command: []}",                    // nothing to run
      "{command: x}",                     // not a list
      "{command: [[x]]}",                 // not strings
      "{tcp: 80, success_threshold: 2}",  // liveness has no success threshold
      "{interval: 1s}",                   // no kind
  };
  for (const char* p : bad) {
    auto s = ParseServiceSpec(std::string("name: a\nservice: {replicas: 1, liveness: ") + p +
                                  "}\ntasks: [{cpu: 1, command: [x]}]\n",
                              "a.yaml");
    EXPECT_FALSE(s.ok()) << p;
  }
  auto s = ParseServiceSpec(
      "name: a\nservice: {replicas: 1, readiness: {tcp: 80, initial_delay: 1s}}\ntasks: [{cpu: 1, "
      "command: [x]}]\n",
      "a.yaml");
  EXPECT_FALSE(s.ok()) << "readiness has no initial delay";
}

TEST(ServiceSpecTest, AutoscaleOnRequestsPerSecondAloneOrBesideInFlight) {
  auto only = ParseServiceSpec(
      "name: a\nservice: {autoscale: {min: 1, max: 5, rps_per_replica: 40}}\n"
      "tasks: [{cpu: 1, command: [x]}]\n",
      "a.yaml");
  ASSERT_TRUE(only.ok()) << only.status().message();
  EXPECT_EQ(only->options.autoscale.rps_per_replica, 40);
  EXPECT_EQ(only->options.autoscale.in_flight_per_replica, 0) << "the rate alone is the target";
  auto back = ServiceOptionsFromJson(ServiceOptionsToJson(only->options));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->autoscale.in_flight_per_replica, 0);
  EXPECT_EQ(back->autoscale.rps_per_replica, 40);
  auto both = ParseServiceSpec(
      "name: a\nservice: {autoscale: {min: 1, max: 5, rps_per_replica: 40, "
      "in_flight_per_replica: 3}}\ntasks: [{cpu: 1, command: [x]}]\n",
      "a.yaml");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->options.autoscale.in_flight_per_replica, 3);
  EXPECT_FALSE(ParseServiceSpec("name: a\nservice: {autoscale: {min: 1, max: 5, rps_per_replica: "
                                "0}}\ntasks: [{cpu: 1, command: [x]}]\n",
                                "a.yaml")
                   .ok());
}

}  // namespace
}  // namespace hangar::controller::service
