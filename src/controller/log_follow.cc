#include "controller/log_follow.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "controller/agent_hub.h"

namespace hangar::controller {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void LogFollows::Open(std::shared_ptr<StreamSink> sink, std::string node, std::string task_id,
                      bool stderr_stream) {
  Follow f;
  f.sink = std::move(sink);
  f.node = std::move(node);
  f.task_id = std::move(task_id);
  f.stderr_stream = stderr_stream;
  {
    MutexLock l(inbox_->mu);
    if (inbox_->stopped) return f.sink->Finish();
    inbox_->opened.push_back(std::move(f));
  }
  {
    MutexLock l(mu_);
    if (!driver_.joinable()) driver_ = std::thread([this] { Drive(); });
  }
  inbox_->cv.notify_all();
}

void LogFollows::Stop() {
  {
    MutexLock l(inbox_->mu);
    inbox_->stopped = true;
  }
  inbox_->cv.notify_all();
  std::thread driver;
  {
    MutexLock l(mu_);
    driver.swap(driver_);
  }
  if (driver.joinable()) driver.join();
}

void LogFollows::Drive() {
  std::map<uint64_t, Follow> follows;  // by a number of their own
  std::map<uint64_t, uint64_t> by_request;
  uint64_t next_id = 1;
  std::deque<std::pair<uint64_t, pb::LogChunk>> answers;
  std::vector<Follow> opened;
  while (true) {
    {
      MutexLock l(inbox_->mu);
      l.WaitFor(inbox_->cv, std::chrono::milliseconds(100), [&]() HANGAR_REQUIRES(inbox_->mu) {
        return inbox_->stopped || !inbox_->answers.empty() || !inbox_->opened.empty();
      });
      if (inbox_->stopped) break;
      answers.swap(inbox_->answers);
      opened.swap(inbox_->opened);
    }
    const int64_t now = NowMs();
    for (Follow& f : opened) follows.emplace(next_id++, std::move(f));
    opened.clear();
    for (auto& [request, chunk] : answers) {
      auto r = by_request.find(request);
      if (r == by_request.end()) continue;
      auto it = follows.find(r->second);
      by_request.erase(r);
      if (it != follows.end() && !Answered(it->second, chunk, now)) follows.erase(it);
    }
    answers.clear();
    for (auto it = follows.begin(); it != follows.end();) {
      Follow& f = it->second;
      const uint64_t before = f.asked;
      if (!Poll(f, now)) {
        if (f.asked) by_request.erase(f.asked);
        it = follows.erase(it);
        continue;
      }
      if (f.asked != before && f.asked) by_request[f.asked] = it->first;
      ++it;
    }
  }
  for (auto& [id, f] : follows) {
    if (f.asked) hub_->CancelLogRead(f.asked);
    f.sink->Finish();
  }
}

bool LogFollows::Answered(Follow& f, const pb::LogChunk& chunk, int64_t now) {
  f.asked = 0;
  if (!chunk.error().empty()) {
    End(f, "[hangar: " + chunk.error() + "]\n");
    return false;
  }
  if (!chunk.data().empty()) {
    if (!f.sink->Write(std::string_view(chunk.data()))) return false;
    f.offset += chunk.data().size();
    f.next_at = now;  // more may be there: ask again at once
    return true;
  }
  if (chunk.task_ended()) {
    f.sink->Finish();
    return false;
  }
  f.next_at = now + kQuietPoll;
  return true;
}

bool LogFollows::Poll(Follow& f, int64_t now) {
  if (!f.sink->open()) {
    if (f.asked) hub_->CancelLogRead(f.asked);
    return false;
  }
  if (f.asked) {
    if (now - f.asked_at < kAnswerTimeout) return true;
    hub_->CancelLogRead(f.asked);
    End(f,
        "\n[hangar: node " + f.node + " did not answer for the logs; is its agent connected?]\n");
    return false;
  }
  if (now < f.next_at) return true;
  if (f.sink->buffered() > kHighWater) {  // the client reads slowly: let it catch up first
    f.next_at = now + 100;
    return true;
  }
  std::shared_ptr<Inbox> inbox = inbox_;
  f.asked_at = now;
  f.asked =
      hub_->RequestLog(f.node, f.task_id, f.offset, f.stderr_stream, [inbox](pb::LogChunk chunk) {
        const uint64_t id = chunk.request_id();
        {
          MutexLock l(inbox->mu);
          if (inbox->stopped) return;
          inbox->answers.emplace_back(id, std::move(chunk));
        }
        inbox->cv.notify_all();
      });
  return true;
}

void LogFollows::End(Follow& f, const std::string& why) {
  f.sink->Write(std::string_view(why));
  f.sink->Finish();
}

}  // namespace hangar::controller
