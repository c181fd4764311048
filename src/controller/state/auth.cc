#include "controller/state/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <regex>

#include "job/spec_text.h"

namespace hangar::controller {

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kQueueAdmin:
      return "queue-admin";
    case Role::kUser:
      return "user";
    case Role::kViewer:
      return "viewer";
    case Role::kNode:
      return "node";
  }
  return "?";
}

std::optional<Role> ParseRole(std::string_view s) {
  for (Role r : {Role::kAdmin, Role::kQueueAdmin, Role::kUser, Role::kViewer, Role::kNode}) {
    if (RoleName(r) == s) return r;
  }
  return std::nullopt;
}

std::string_view PermissionName(Permission p) {
  switch (p) {
    case Permission::kClusterRead:
      return "cluster:read";
    case Permission::kEventsRead:
      return "events:read";
    case Permission::kMetricsRead:
      return "metrics:read";
    case Permission::kJobsSubmit:
      return "jobs:submit";
    case Permission::kJobsRead:
      return "jobs:read";
    case Permission::kJobsCancel:
      return "jobs:cancel";
    case Permission::kNodesDrain:
      return "nodes:drain";
    case Permission::kQueuesApply:
      return "queues:apply";
    case Permission::kUsageRead:
      return "usage:read";
    case Permission::kTokensManage:
      return "tokens:manage";
    case Permission::kAgentConnect:
      return "agent:connect";
    case Permission::kAuditRead:
      return "audit:read";
  }
  return "?";
}

std::optional<bool> MaySeeByRole(const Principal& p, const std::string& owner) {
  if (p.role == Role::kAdmin || p.role == Role::kViewer) return true;
  if (p.role == Role::kNode) return false;
  if (p.role == Role::kQueueAdmin && owner != p.user) return std::nullopt;
  return owner == p.user;
}

Status JobAccessRefused(const Principal& p, Permission perm, uint64_t id, const std::string& owner,
                        const std::string& queue) {
  const bool cancel = perm == Permission::kJobsCancel;
  return Status::PermissionDenied(
      "permission " + std::string(PermissionName(perm)) + " on job " + std::to_string(id) +
      " is missing: " + p.Describe() + " may " + (cancel ? "cancel" : "see") +
      " only their own jobs" +
      (p.role == Role::kQueueAdmin ? " and those of the queues they administer" : "") +
      "; it belongs to " + owner + " in queue " + queue);
}

Status Allow(const Principal& p, Permission perm) {
  bool ok = false;
  switch (p.role) {
    case Role::kAdmin:
      ok = perm != Permission::kAgentConnect || p.open;
      break;
    case Role::kViewer:
      ok = perm == Permission::kClusterRead || perm == Permission::kEventsRead ||
           perm == Permission::kMetricsRead || perm == Permission::kJobsRead ||
           perm == Permission::kUsageRead;
      break;
    case Role::kQueueAdmin:
      ok = perm == Permission::kClusterRead || perm == Permission::kEventsRead ||
           perm == Permission::kJobsSubmit || perm == Permission::kJobsRead ||
           perm == Permission::kJobsCancel || perm == Permission::kUsageRead;
      break;
    case Role::kUser:
      ok = perm == Permission::kClusterRead || perm == Permission::kJobsSubmit ||
           perm == Permission::kJobsRead || perm == Permission::kJobsCancel ||
           perm == Permission::kUsageRead;
      break;
    case Role::kNode:
      ok = perm == Permission::kAgentConnect;
      break;
  }
  if (ok) return Status::Ok();
  return Status::PermissionDenied(
      "permission " + std::string(PermissionName(perm)) + " is missing: " + p.Describe() +
      " may not do this; ask an admin for a token with a role that may");
}

Status CheckUserName(const std::string& user) {
  // Said without the name itself: it may hold what a terminal must not be sent.
  if (Status plain = job::CheckPlainText("the user name", user); !plain.ok()) return plain;
  static const std::regex name_re(R"(^[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63}$)");
  if (std::regex_match(user, name_re)) return Status::Ok();
  return Status::InvalidArgument(
      "user '" + user.substr(0, 64) + (user.size() > 64 ? "..." : "") +
      "' is not a user name: 1-64 letters, digits, '.', '_', '-', '@' or '+', starting "
      "with a letter, digit or '_'");
}

job::RunAs TaskAccount(const Principal& p) {
  if (p.open) return {};
  if (!p.run_as.empty()) return p.run_as;
  job::RunAs named;
  named.account = p.user;
  return named;
}

namespace {

std::string Hex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> b(bytes);
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1)
    std::abort();  // no entropy: nothing safe to do
  return Hex(b.data(), b.size());
}

}  // namespace

std::string NewDataToken() { return RandomHex(32); }

namespace {

std::string Sha256Hex(const std::string& salt, std::string_view secret) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, salt.data(), salt.size());
  EVP_DigestUpdate(ctx, secret.data(), secret.size());
  EVP_DigestFinal_ex(ctx, md.data(), &len);
  EVP_MD_CTX_free(ctx);
  return Hex(md.data(), len);
}

}  // namespace

nlohmann::json TokenRecord::ToJson(bool with_hash) const {
  nlohmann::json j = {
      {"id", id}, {"user", user}, {"role", std::string(RoleName(role))}, {"created_ms", created}};
  if (!node.empty()) j["node"] = node;
  if (expires) j["expires_ms"] = expires;
  if (revoked) j["revoked_ms"] = revoked;
  if (!replaced_by.empty()) j["replaced_by"] = replaced_by;
  if (!run_as.empty()) j["run_as"] = run_as.ToJson();
  if (with_hash) {
    j["salt"] = salt;
    j["sha256"] = hash;
  }
  return j;
}

std::optional<TokenRecord> TokenRecord::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  TokenRecord r;
  r.id = j.value("id", "");
  r.user = j.value("user", "");
  r.node = j.value("node", "");
  r.salt = j.value("salt", "");
  r.hash = j.value("sha256", "");
  r.created = j.value("created_ms", Time{0});
  r.expires = j.value("expires_ms", Time{0});
  r.revoked = j.value("revoked_ms", Time{0});
  r.replaced_by = j.value("replaced_by", "");
  if (j.contains("run_as")) {
    auto run_as = job::RunAs::FromJson(j["run_as"]);
    if (!run_as.ok()) return std::nullopt;
    r.run_as = std::move(*run_as);
  }
  auto role = ParseRole(j.value("role", ""));
  if (!role || r.id.empty() || r.hash.empty()) return std::nullopt;
  r.role = *role;
  return r;
}

void TokenBook::Load(const std::vector<KeyValueRow>& values) {
  MutexLock l(mu_);
  for (const auto& v : values) {
    if (v.table != "token") continue;
    auto r = TokenRecord::FromJson(nlohmann::json::parse(v.value, nullptr, false));
    if (r) by_id_[r->id] = *r;
  }
}

std::pair<TokenRecord, std::string> TokenBook::Mint(const std::string& user, Role role,
                                                    const std::string& node, Time now,
                                                    Duration ttl) {
  TokenRecord r;
  r.id = RandomHex(6);
  r.user = user;
  r.role = role;
  r.node = node;
  r.created = now;
  r.expires = ttl > 0 ? now + ttl : 0;
  r.salt = RandomHex(16);
  const std::string secret = RandomHex(24);
  r.hash = Sha256Hex(r.salt, secret);
  return {r, "hgr_" + r.id + "_" + secret};
}

void TokenBook::Put(const TokenRecord& r) {
  MutexLock l(mu_);
  by_id_[r.id] = r;
}

bool TokenBook::Erase(const std::string& id) {
  MutexLock l(mu_);
  return by_id_.erase(id) > 0;
}

std::optional<TokenRecord> TokenBook::Revoke(const std::string& id, Time now,
                                             const std::string& replaced_by) {
  MutexLock l(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second.revoked) return std::nullopt;
  it->second.revoked = std::max<Time>(now, 1);
  it->second.replaced_by = replaced_by;
  return it->second;
}

std::optional<TokenRecord> TokenBook::Find(const std::string& id) const {
  MutexLock l(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

StatusOr<Principal> TokenBook::Authenticate(std::string_view header, Time now) const {
  const auto need = [](const std::string& what) {
    return Status::Unauthenticated(
        what +
        "; pass `Authorization: Bearer <token>` (the CLI reads $HANGAR_TOKEN); an "
        "admin makes tokens with `hangar token create`");
  };
  std::string_view token = header;
  if (token.substr(0, 7) == "Bearer " || token.substr(0, 7) == "bearer ") token.remove_prefix(7);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (token.empty()) return need("this API needs a token");
  if (token.substr(0, 4) != "hgr_")
    return need("that is not a Hangar token (they start with hgr_)");
  token.remove_prefix(4);
  const size_t sep = token.find('_');
  if (sep == std::string_view::npos) return need("that token is malformed");
  const std::string id(token.substr(0, sep));
  const std::string_view secret = token.substr(sep + 1);
  MutexLock l(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return need("that token is unknown");
  const std::string got = Sha256Hex(it->second.salt, secret);
  if (got.size() != it->second.hash.size() ||
      CRYPTO_memcmp(got.data(), it->second.hash.data(), got.size()) != 0) {
    return need("that token is unknown");
  }
  // Said only to whoever holds the secret: the token was real, and this is what became of it.
  const TokenRecord& r = it->second;
  if (r.revoked) {
    return Status::Unauthenticated(
        "token " + id + " was revoked at " + FormatUtcTimestamp(r.revoked) +
        (r.replaced_by.empty() ? std::string()
                               : " (rotated: token " + r.replaced_by + " replaces it)") +
        "; ask an admin for a new one");
  }
  if (r.expires && now >= r.expires) {
    return Status::Unauthenticated("token " + id + " expired at " + FormatUtcTimestamp(r.expires) +
                                   "; ask an admin to rotate it (`hangar token rotate " + id +
                                   "`)");
  }
  Principal p;
  p.user = it->second.role == Role::kNode ? it->second.node : it->second.user;
  p.role = it->second.role;
  p.token_id = id;
  p.run_as = it->second.run_as;
  return p;
}

std::vector<TokenRecord> TokenBook::List() const {
  MutexLock l(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [id, r] : by_id_) out.push_back(r);
  return out;
}

size_t TokenBook::size() const {
  MutexLock l(mu_);
  return by_id_.size();
}

}  // namespace hangar::controller
