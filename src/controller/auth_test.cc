#include "controller/auth.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(AuthTest, MintedTokensAuthenticateAndStoreNoSecret) {
  TokenBook book;
  auto [record, text] = TokenBook::Mint("alice", Role::kUser, "", 5);
  book.Put(record);
  auto p = book.Authenticate("Bearer " + text);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->user, "alice");
  EXPECT_EQ(p->role, Role::kUser);
  const std::string stored = record.ToJson(true).dump();
  EXPECT_EQ(stored.find(text.substr(text.rfind('_') + 1)), std::string::npos);
  // Round trip through the store's JSON.
  TokenBook again;
  again.Load({{"token", record.id, stored, false}});
  EXPECT_TRUE(again.Authenticate(text).ok());
  // Salted: the same secret would hash differently under another salt.
  auto [other, other_text] = TokenBook::Mint("alice", Role::kUser, "", 5);
  EXPECT_NE(other.salt, record.salt);
}

TEST(AuthTest, BadTokensSayWhatToDo) {
  TokenBook book;
  auto [record, text] = TokenBook::Mint("alice", Role::kUser, "", 5);
  book.Put(record);
  for (const std::string& bad : {std::string(""), std::string("Bearer xyz"), "hgr_" + record.id + "_wrong", std::string("hgr_nounderscore")}) {
    auto p = book.Authenticate(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(p.status().message().find("hangar token create"), std::string::npos);
  }
  EXPECT_TRUE(book.Erase(record.id));
  EXPECT_FALSE(book.Authenticate(text).ok());
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
            "permission nodes:drain is missing: bob (user) may not do this; ask an admin for a token with a role that may");
}

}  // namespace
}  // namespace hangar::controller
