#include "agent/data/data_plane.h"

#include <spdlog/spdlog.h>

#include "agent/data/task_view.h"

namespace hangar::agent::data {

DataPlane::DataPlane(Clock* clock, std::string node) : clock_(clock), node_(std::move(node)) {}

Status DataPlane::Init(const std::string& cache_dir, int64_t budget_bytes,
                       const std::string& address, const std::set<std::string>& running) {
  auto objects = std::make_unique<ObjectCache>(cache_dir, budget_bytes);
  HANGAR_RETURN_IF_ERROR(objects->Init(clock_->Now()));
  for (const auto& task : TaskViews(objects->views_dir())) {
    if (!running.count(task)) RemoveTaskView(objects->views_dir(), task);
  }
  objects_ = std::move(objects);
  stager_ = std::make_unique<Stager>(
      objects_.get(),
      [this] {
        MutexLock l(mu_);
        return token_;
      },
      clock_);
  if (address.empty()) return Status::Ok();
  server_ = std::make_unique<DataServer>(objects_.get());
  if (Status s = server_->Start(address); !s.ok()) {
    server_.reset();
    return Status(s.code(), "node " + node_ + ": --data-address: " + s.message());
  }
  spdlog::info("agent {}: serves its artifact cache ({}) to peers at {}", node_, objects_->dir(),
               server_->url());
  return Status::Ok();
}

void DataPlane::SetToken(const std::string& token) {
  {
    MutexLock l(mu_);
    token_ = token;
  }
  if (server_) server_->SetToken(token);
}

}  // namespace hangar::agent::data
