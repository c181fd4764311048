// IdempotencyBook: the answers to submissions that carried an Idempotency-Key. A client that did
// not hear the answer to a POST sends it again with the same key and gets the first answer, not a
// second job. Keys belong to their user and are kept for a day (kWindow); the same key with another
// request is refused. Durable as "idempotency" key-value rows, which Remember writes and Restore
// reads back.
//
// Not thread-safe: the state thread owns it (ClusterState holds it).
#pragma once

#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "controller/state/submission_digest.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

class IdempotencyBook {
 public:
  static constexpr Duration kWindow = kDay;
  static constexpr const char* kTable = "idempotency";

  // The first answer for (user, key), if any within the window; FailedPrecondition when the key
  // was used for another request.
  StatusOr<std::optional<nlohmann::json>> Recall(const std::string& user, const std::string& key,
                                                 const SubmissionDigest& request, Time now) const;
  // Keeps `answer` for (user, key) and forgets what has passed the window, adding to `rows` the
  // key-value rows that make both durable.
  void Remember(const std::string& user, const std::string& key, const SubmissionDigest& request,
                const nlohmann::json& answer, Time now, std::vector<KeyValueRow>* rows);
  // One stored row (table kTable), as Remember wrote it.
  void Restore(const KeyValueRow& row);
  size_t size() const { return by_key_.size(); }

 private:
  struct Remembered {
    std::string request_digest;
    nlohmann::json answer;
    Time at = 0;
  };
  std::map<std::string, Remembered> by_key_;          // by user "\n" key
  std::deque<std::pair<Time, std::string>> by_time_;  // for pruning, oldest first
  bool sorted_ = true;  // false after Restore (rows come back in key order)
};

}  // namespace hangar::controller
