#include "controller/state/idempotency_book.h"

#include <algorithm>

namespace hangar::controller {

StatusOr<std::optional<nlohmann::json>> IdempotencyBook::Recall(const std::string& user,
                                                                const std::string& key,
                                                                const SubmissionDigest& request,
                                                                Time now) const {
  auto it = by_key_.find(user + "\n" + key);
  if (it == by_key_.end() || now - it->second.at > kWindow) return std::optional<nlohmann::json>();
  if (!request.Matches(it->second.request_digest)) {
    return Status::FailedPrecondition(
        "Idempotency-Key '" + key + "' was used for another request " +
        FormatDuration(now - it->second.at) + " ago; use a new key for a new request");
  }
  return std::optional<nlohmann::json>(it->second.answer);
}

void IdempotencyBook::Remember(const std::string& user, const std::string& key,
                               const SubmissionDigest& request, const nlohmann::json& answer,
                               Time now, std::vector<KeyValueRow>* rows) {
  const std::string& request_digest = request.sha256;
  const std::string id = user + "\n" + key;
  if (!sorted_) {
    std::sort(by_time_.begin(), by_time_.end());
    sorted_ = true;
  }
  by_key_[id] = {request_digest, answer, now};
  by_time_.emplace_back(now, id);
  rows->push_back(
      {kTable, id,
       nlohmann::json{{"digest", request_digest}, {"answer", answer}, {"at", now}}.dump(), false});
  // Forget what is past the window, oldest first.
  while (!by_time_.empty() && now - by_time_.front().first > kWindow) {
    auto it = by_key_.find(by_time_.front().second);
    if (it != by_key_.end() && it->second.at == by_time_.front().first) {
      rows->push_back({kTable, it->first, "", true});
      by_key_.erase(it);
    }
    by_time_.pop_front();
  }
}

void IdempotencyBook::Restore(const KeyValueRow& row) {
  auto j = nlohmann::json::parse(row.value, nullptr, false);
  if (!j.is_object()) return;
  const Time at = j.value("at", Time{0});
  by_key_[row.key] = {j.value("digest", ""), j.value("answer", nlohmann::json::object()), at};
  by_time_.emplace_back(at, row.key);
  sorted_ = false;
}

}  // namespace hangar::controller
