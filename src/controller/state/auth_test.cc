#include "controller/state/auth.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(AuthTest, MintedTokensAuthenticateAndStoreNoSecret) {
  TokenBook book;
  auto [record, text] = TokenBook::Mint("alice", Role::kUser, "", 5);
  book.Put(record);
  auto p = book.Authenticate("Bearer " + text, 10);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->user, "alice");
  EXPECT_EQ(p->role, Role::kUser);
  const std::string stored = record.ToJson(true).dump();
  EXPECT_EQ(stored.find(text.substr(text.rfind('_') + 1)), std::string::npos);
  // Round trip through the store's JSON.
  TokenBook again;
  again.Load({{"token", record.id, stored, false}});
  EXPECT_TRUE(again.Authenticate(text, 10).ok());
  // Salted: the same secret would hash differently under another salt.
  auto [other, other_text] = TokenBook::Mint("alice", Role::kUser, "", 5);
  EXPECT_NE(other.salt, record.salt);
}

TEST(AuthTest, BadTokensSayWhatToDo) {
  TokenBook book;
  auto [record, text] = TokenBook::Mint("alice", Role::kUser, "", 5);
  book.Put(record);
  for (const std::string& bad : {std::string(""), std::string("Bearer xyz"),
                                 "hgr_" + record.id + "_wrong", std::string("hgr_nounderscore")}) {
    auto p = book.Authenticate(bad, 10);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(p.status().message().find("hangar token create"), std::string::npos);
  }
  EXPECT_TRUE(book.Erase(record.id));
  EXPECT_FALSE(book.Authenticate(text, 10).ok());
}

// Issue 16: tokens expire, and a revoked or expired token is refused with a message that says
// which -- to its holder only (a wrong secret is just "unknown").
TEST(AuthTest, ExpiredAndRevokedTokensSayWhich) {
  TokenBook book;
  auto [record, text] = TokenBook::Mint("alice", Role::kUser, "", 1000, 60 * kSecond);
  book.Put(record);
  EXPECT_EQ(record.expires, 61000);
  EXPECT_TRUE(book.Authenticate(text, 60999).ok());
  auto late = book.Authenticate(text, 61000);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(
      late.status().message(),
      "token " + record.id +
          " expired at 1970-01-01T00:01:01Z; ask an admin to rotate it (`hangar token rotate " +
          record.id + "`)");
  auto revoked = book.Revoke(record.id, 2000, "abcdef012345");
  ASSERT_TRUE(revoked.has_value());
  EXPECT_FALSE(book.Revoke(record.id, 3000).has_value()) << "once";
  auto after = book.Authenticate(text, 2500);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().message(), "token " + record.id +
                                          " was revoked at 1970-01-01T00:00:02Z (rotated: token "
                                          "abcdef012345 replaces it); ask an admin for a new one");
  EXPECT_EQ(book.Authenticate("hgr_" + record.id + "_wrong", 2500)
                .status()
                .message()
                .rfind("that token is unknown", 0),
            0u);
  // The revocation survives a restart (it is in the stored record).
  TokenBook again;
  again.Load({{"token", record.id, revoked->ToJson(true).dump(), false}});
  EXPECT_NE(again.Authenticate(text, 2500).status().message().find("was revoked"),
            std::string::npos);
  auto [forever, forever_text] = TokenBook::Mint("bob", Role::kUser, "", 1000);
  book.Put(forever);
  EXPECT_TRUE(book.Authenticate(forever_text, int64_t{1} << 50).ok());
}

TEST(AuthTest, RolesGrantWhatTheDocsSay) {
  auto may = [](Role r, Permission p) { return Allow(Principal{"x", r, "", false}, p).ok(); };
  EXPECT_TRUE(may(Role::kAdmin, Permission::kTokensManage));
  EXPECT_FALSE(may(Role::kAdmin, Permission::kAgentConnect));  // agents use node tokens
  EXPECT_TRUE(may(Role::kViewer, Permission::kEventsRead));
  EXPECT_FALSE(may(Role::kViewer, Permission::kJobsSubmit));
  EXPECT_TRUE(may(Role::kQueueAdmin, Permission::kJobsCancel));
  EXPECT_FALSE(may(Role::kQueueAdmin, Permission::kQueuesApply));
  EXPECT_TRUE(may(Role::kUser, Permission::kJobsSubmit));
  EXPECT_FALSE(may(Role::kUser, Permission::kEventsRead));
  EXPECT_TRUE(may(Role::kNode, Permission::kAgentConnect));
  EXPECT_FALSE(may(Role::kNode, Permission::kClusterRead));
  EXPECT_EQ(Allow(Principal{"bob", Role::kUser, "", false}, Permission::kNodesDrain).message(),
            "permission nodes:drain is missing: bob (user) may not do this; ask an admin for a "
            "token with a role that may");
}

// Issue 16: a token maps to the Unix account its jobs' tasks run as, kept with its record.
TEST(AuthTest, ATokenCarriesTheAccountItsTasksRunAs) {
  TokenBook book;
  auto [record, text] = TokenBook::Mint("alice", Role::kUser, "", 5);
  record.run_as = job::RunAs{"", 61001u, 61001, {61010, 61011}};
  TokenBook stored;
  stored.Load({{"token", record.id, record.ToJson(true).dump(), false}});
  auto p = stored.Authenticate(text, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(TaskAccount(*p).Describe(), "uid 61001 gid 61001 groups 61010,61011");
  EXPECT_EQ(record.ToJson(false)["run_as"].dump(),
            R"({"gid":61001,"groups":[61010,61011],"uid":61001})");
  // A token that names none runs its tasks as the account named like its user; an open API
  // (--auth none) as the agents' own user.
  auto [bob, bob_text] = TokenBook::Mint("bob", Role::kUser, "", 5);
  book.Put(bob);
  auto b = book.Authenticate(bob_text, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(TaskAccount(*b).Describe(), "account bob");
  EXPECT_FALSE(bob.ToJson(false).contains("run_as"));
  Principal open;
  open.open = true;
  open.user = "anonymous";
  EXPECT_TRUE(TaskAccount(open).empty());
}

}  // namespace
}  // namespace hangar::controller

namespace hangar::controller {
namespace {

// A token made for "mallory\n1  alice  admin" forged rows wherever users are listed.
TEST(AuthTest, UserNamesArePlainNames) {
  for (const char* ok : {"alice", "svc_ci", "a.b-c", "grafana@example.org", "_x"}) {
    EXPECT_TRUE(CheckUserName(ok).ok()) << ok;
  }
  EXPECT_EQ(CheckUserName("mallory\n1  alice").message(),
            "the user name holds a control character, newline (0x0a); it is plain text: remove it");
  EXPECT_NE(CheckUserName("a\x1b]0;x").message().find("ESC (0x1b)"), std::string::npos);
  EXPECT_NE(CheckUserName(std::string(65, 'a')).message().find("1-64 letters"), std::string::npos);
  EXPECT_NE(CheckUserName("../x").message().find("is not a user name"), std::string::npos);
  EXPECT_FALSE(CheckUserName("").ok());
  EXPECT_FALSE(CheckUserName("a b").ok());
}

}  // namespace
}  // namespace hangar::controller
