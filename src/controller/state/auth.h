// RBAC: who is calling, and what their role lets them do (docs/rbac.md).
//
// Tokens look like "hgr_<id>_<secret>". The controller stores only the id, a random salt and
// SHA-256(salt || secret), so a copy of the store gives no one a usable token; the secret is
// shown once, when the token is made. Roles:
//   admin        everything
//   queue-admin  the jobs of the queue subtrees that name them in `admins`: submit, see, cancel
//   user         submit to the queues granted to them (a queue's `users`, inherited; a queue
//                whose path names no users is open to every user); see and cancel their own jobs
//   viewer       read everything, change nothing
//   node         an agent's token: the agent channel for its own node, nothing else
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "controller/store/state_store.h"
#include "job/job_spec.h"

namespace hangar::controller {

enum class Role : uint8_t { kAdmin, kQueueAdmin, kUser, kViewer, kNode };
std::string_view RoleName(Role r);
std::optional<Role> ParseRole(std::string_view s);

// Permissions that depend on the role alone. Queue- and job-level checks (which queue, whose
// job) are made by ClusterState with the queue tree.
enum class Permission : uint8_t {
  kClusterRead,  // nodes, queues, share
  kEventsRead,
  kMetricsRead,
  kJobsSubmit,  // and then: to which queue
  kJobsRead,    // and then: which jobs
  kJobsCancel,  // and then: which jobs
  kNodesDrain,
  kQueuesApply,
  kUsageRead,  // and then: which rows
  kTokensManage,
  kAgentConnect,
  kAuditRead,  // the audit log: admins only
};
std::string_view PermissionName(Permission p);

struct Principal {
  std::string user;  // for node tokens, the node
  Role role = Role::kAdmin;
  std::string token_id;
  bool open = false;  // the API runs without authentication (`--auth none`)
  job::RunAs run_as;  // the token's Unix account, as made (empty: none named)
  std::string Describe() const { return user + " (" + std::string(RoleName(role)) + ")"; }
};

// The Unix account the tasks of `p`'s jobs run as: with `--auth none` none (the agent's own
// user); else the token's account, or, when it names none, the account named like its user.
job::RunAs TaskAccount(const Principal& p);

// Whether `user` may name a token's user: 1-64 letters, digits, '.', '_', '-', '@' or '+',
// starting with a letter, digit or '_'. It is shown in tables and logs, names the Unix account
// its tasks run as unless the token names another, and keys the per-user limits.
Status CheckUserName(const std::string& user);

// PermissionDenied naming the missing permission, or Ok.
Status Allow(const Principal& p, Permission perm);

// Whether `p` may see a job of `owner` by its role alone: admins and viewers see every job, nodes
// none, users their own. Nullopt for a queue admin, who also sees the jobs of the queues they
// administer (ClusterState::MaySeeJob asks the queue tree).
std::optional<bool> MaySeeByRole(const Principal& p, const std::string& owner);

// PermissionDenied for `p`, who may not `perm` (jobs:read or jobs:cancel) job `id` of `owner` in
// `queue`: what is missing, what they may do instead, and whose job it is.
Status JobAccessRefused(const Principal& p, Permission perm, uint64_t id, const std::string& owner,
                        const std::string& queue);

struct TokenRecord {
  std::string id, user, node, salt, hash;
  Role role = Role::kUser;
  Time created = 0;
  Time expires = 0;  // 0: never
  Time revoked = 0;  // 0: live. A revoked token is kept, so that its holder is told it was revoked
  std::string replaced_by;  // the token `hangar token rotate` made in its place
  job::RunAs run_as;        // who its jobs' tasks run as (TaskAccount); empty: its user's name
  bool live(Time now) const { return revoked == 0 && (expires == 0 || now < expires); }
  nlohmann::json ToJson(bool with_hash) const;
  static std::optional<TokenRecord> FromJson(const nlohmann::json& j);
};

// The tokens the controller accepts. Thread-safe: API threads authenticate while the state
// owner adds and revokes.
class TokenBook {
 public:
  // Rows of table "token".
  void Load(const std::vector<KeyValueRow>& values) HANGAR_EXCLUDES(mu_);
  // A new token: the record to store and the text to hand out (once).
  // `ttl` 0: it never expires.
  static std::pair<TokenRecord, std::string> Mint(const std::string& user, Role role,
                                                  const std::string& node, Time now,
                                                  Duration ttl = 0);
  void Put(const TokenRecord& r) HANGAR_EXCLUDES(mu_);
  // Forgets it entirely (Revoke keeps it, marked).
  bool Erase(const std::string& id) HANGAR_EXCLUDES(mu_);
  // Marks the token revoked as of `now`; the record to store, or nullopt when there is no live
  // token `id`.
  std::optional<TokenRecord> Revoke(const std::string& id, Time now,
                                    const std::string& replaced_by = "") HANGAR_EXCLUDES(mu_);
  std::optional<TokenRecord> Find(const std::string& id) const HANGAR_EXCLUDES(mu_);
  // From "Bearer hgr_..." or the bare token, as of `now` (Unix ms). Unauthenticated with what to
  // do when it fails: a wrong, unknown, revoked or expired token each says which it is.
  StatusOr<Principal> Authenticate(std::string_view header, Time now) const HANGAR_EXCLUDES(mu_);
  std::vector<TokenRecord> List() const HANGAR_EXCLUDES(mu_);
  size_t size() const HANGAR_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<std::string, TokenRecord> by_id_ HANGAR_GUARDED_BY(mu_);
};

// A fresh random secret (64 hex digits): what agents show each other on their data ports.
std::string NewDataToken();

}  // namespace hangar::controller
