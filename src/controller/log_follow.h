// `hangar logs -f` (GET /v1/jobs/ID/logs?follow=1) without a thread each: the follow's connection
// is the stream pump's (http_server.h), and one driver thread asks each task's agent for the next
// bytes (AgentHub::RequestLog, answered on the agent's stream), writes them to the follow's
// sink, and asks again at once while bytes come, every 300 ms while the task is quiet, until the
// task ends, the agent does not answer within 5 s, or the client leaves. A follow whose client
// reads slowly is asked for more only once what it was sent has mostly been written.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "controller/stream_pump.h"
#include "proto/agent.pb.h"

namespace hangar::controller {

namespace pb = ::hangar::agent::v1;
class AgentHub;

class LogFollows {
 public:
  explicit LogFollows(AgentHub* hub) : hub_(hub), inbox_(std::make_shared<Inbox>()) {}
  ~LogFollows() { Stop(); }
  LogFollows(const LogFollows&) = delete;
  LogFollows& operator=(const LogFollows&) = delete;

  // Streams the log of `task_id` on `node` (stdout, or stderr) from its start to `sink`.
  void Open(std::shared_ptr<StreamSink> sink, std::string node, std::string task_id,
            bool stderr_stream);
  // Ends every follow (their clients see the end of the body) and the driver.
  void Stop();

  static constexpr Duration kQuietPoll = 300;       // ms between asks while the task is quiet
  static constexpr Duration kAnswerTimeout = 5000;  // ms an agent has to answer
  static constexpr size_t kHighWater = 1u << 20;    // bytes queued for the client: ask no more

 private:
  struct Follow {
    std::shared_ptr<StreamSink> sink;
    std::string node, task_id;
    bool stderr_stream = false;
    uint64_t offset = 0;
    uint64_t asked = 0;  // the request under way (0: none)
    int64_t asked_at = 0, next_at = 0;
  };
  // Answers from the agents' threads; shared, so that a late one finds it even after Stop.
  struct Inbox {
    Mutex mu;
    std::condition_variable cv;
    bool stopped HANGAR_GUARDED_BY(mu) = false;
    std::vector<Follow> opened HANGAR_GUARDED_BY(mu);
    std::deque<std::pair<uint64_t, pb::LogChunk>> answers HANGAR_GUARDED_BY(mu);
  };
  void Drive();  // the driver thread's loop
  // Applies an answer; false when the follow has ended.
  bool Answered(Follow& f, const pb::LogChunk& chunk, int64_t now);
  // Asks for more, or ends a follow that waited too long or lost its client; false when it ended.
  bool Poll(Follow& f, int64_t now);
  void End(Follow& f, const std::string& why);

  AgentHub* const hub_;
  const std::shared_ptr<Inbox> inbox_;
  Mutex mu_;
  std::thread driver_;  // started by the first follow, under mu_
};

}  // namespace hangar::controller
