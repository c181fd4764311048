// Helpers the REST handlers share (http_api.cc, http_api_auth.cc): replies with the API's error
// JSON, path and query parsing, and POST routes whose bodies are read with a bound.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "controller/state/auth.h"

namespace hangar::controller {
class ClusterState;
struct JobRecord;
}  // namespace hangar::controller

namespace hangar::controller::http {

void Reply(httplib::Response& res, const Status& s);
void Reply(httplib::Response& res, int code, const nlohmann::json& body);
StatusOr<uint64_t> IdOf(const httplib::Request& req);
StatusOr<uint32_t> TaskOf(const httplib::Request& req);
// On the state thread: job `id` as `who` may read it -- the permission's refusal, or NotFound with
// the sentence every job route gives.
StatusOr<const JobRecord*> ReadableJob(const ClusterState& st, const Principal& who, uint64_t id);
void BoundedPost(httplib::Server& s, const std::string& pattern, httplib::Server::Handler handler);

}  // namespace hangar::controller::http
