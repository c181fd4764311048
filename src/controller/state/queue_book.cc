#include "controller/state/queue_book.h"

#include <algorithm>
#include <functional>
#include <map>

#include "sched/owner/share_history.h"

namespace hangar::controller {

namespace q = sched::queue;

namespace {

// Every queue of a tree by name, flattened (children without their own children), for comparing
// two versions of the tree.
void Flatten(const std::vector<job::QueueSpec>& specs, const std::string& parent,
             std::map<std::string, std::string>* out) {
  for (const auto& s : specs) {
    job::QueueSpec own = s;
    own.children.clear();
    nlohmann::json j = job::QueuesToJson({own})["queues"][0];
    j["parent"] = parent;
    (*out)[s.name] = j.dump();
    Flatten(s.children, s.name, out);
  }
}

}  // namespace

void QueueBook::Use(std::vector<job::QueueSpec> specs, std::shared_ptr<const q::QueueTree> tree) {
  // Carry each queue's history over by name.
  std::vector<std::vector<double>> history(tree->nodes().size(),
                                           std::vector<double>(tree->dims(), 0.0));
  if (tree_) {
    for (size_t i = 0; i < tree->nodes().size(); ++i) {
      const int old = tree_->Find(tree->nodes()[i].name);
      if (old >= 0 && static_cast<size_t>(old) < history_.size() && tree->dims() == tree_->dims())
        history[i] = history_[old];
    }
  }
  history_ = std::move(history);
  specs_ = std::move(specs);
  tree_ = std::move(tree);
  trivial_ = tree_->nodes().size() == 1;
  for (const auto& n : tree_->nodes()) {
    for (size_t d = 0; d < tree_->dims(); ++d) {
      trivial_ = trivial_ && n.nominal[d] == 0 && n.borrow_limit[d] >= q::kUnlimited &&
                 n.lend_limit[d] >= q::kUnlimited;
    }
  }
  access_.assign(tree_->nodes().size(), {});
  std::function<void(const std::vector<job::QueueSpec>&)> index =
      [&](const std::vector<job::QueueSpec>& level) {
        for (const auto& s : level) {
          if (const int x = tree_->Find(s.name); x >= 0) access_[x] = {s.idle, s.users, s.admins};
          index(s.children);
        }
      };
  index(specs_);
}

nlohmann::json QueueBook::Diff(const std::vector<job::QueueSpec>& specs) const {
  std::map<std::string, std::string> before, after;
  Flatten(specs_, "", &before);
  Flatten(specs, "", &after);
  nlohmann::json created = nlohmann::json::array(), changed = nlohmann::json::array(),
                 unchanged = nlohmann::json::array(), removed = nlohmann::json::array();
  for (const auto& [name, text] : after) {
    auto it = before.find(name);
    (it == before.end() ? created : it->second == text ? unchanged : changed).push_back(name);
  }
  for (const auto& [name, text] : before) {
    if (!after.count(name)) removed.push_back(name);
  }
  return {
      {"created", created}, {"changed", changed}, {"unchanged", unchanged}, {"removed", removed}};
}

Duration QueueBook::IdleCheckStep(Time now) {
  const Duration dt = idle_checked_at_ ? std::max<Duration>(0, now - idle_checked_at_) : 0;
  idle_checked_at_ = now;
  return dt;
}

Duration QueueBook::HistoryStep(Time now) {
  if (trivial_ || history_at_ == 0 || now <= history_at_) {
    history_at_ = std::max(history_at_, now);
    return 0;
  }
  const Duration dt = now - history_at_;
  history_at_ = now;
  return dt;
}

void QueueBook::DecayHistory(const std::vector<std::vector<int64_t>>& usage, Duration dt,
                             Duration half_life) {
  sched::owner::DecayShareHistory(history_, usage, dt, half_life);
}

bool QueueBook::NamedOnPath(int node, const std::string& user, Listed list) const {
  for (int x = node; x >= 0; x = tree_->nodes()[x].parent) {
    const auto& names = list == Listed::kAdmins ? access_[x].admins : access_[x].users;
    if (std::find(names.begin(), names.end(), user) != names.end()) return true;
  }
  return false;
}

bool QueueBook::AdministeredBy(const Principal& p, const std::string& queue) const {
  if (p.role == Role::kAdmin) return true;
  if (p.role != Role::kQueueAdmin) return false;
  const int x = tree_->Find(queue);
  return x >= 0 && NamedOnPath(x, p.user, Listed::kAdmins);
}

Status QueueBook::OpenTo(const Principal& p, const std::string& queue) const {
  if (p.role == Role::kAdmin || AdministeredBy(p, queue)) return Status::Ok();
  const int leaf = tree_->FindLeaf(queue);
  if (leaf < 0) return Status::Ok();  // the submission says the queue does not exist
  bool any_users = false;
  for (int x = leaf; x >= 0; x = tree_->nodes()[x].parent) any_users |= !access_[x].users.empty();
  if (!any_users || NamedOnPath(leaf, p.user, Listed::kUsers)) return Status::Ok();
  std::string granted;
  for (const auto& name : tree_->LeafNames()) {
    const int l = tree_->FindLeaf(name);
    bool open = true;
    for (int x = l; x >= 0; x = tree_->nodes()[x].parent) open &= access_[x].users.empty();
    if (open || NamedOnPath(l, p.user, Listed::kUsers))
      granted += (granted.empty() ? "" : ", ") + name;
  }
  return Status::PermissionDenied("permission jobs:submit on queue '" + queue +
                                  "' is missing: " + p.Describe() + " may submit to " +
                                  (granted.empty() ? std::string("no queue") : granted) +
                                  "; ask an admin to add " + p.user + " to the queue's users");
}

}  // namespace hangar::controller
