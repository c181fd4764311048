#include "controller/state/idempotency_book.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(IdempotencyBookTest, AKeyGivesItsFirstAnswerToItsUserAndRefusesAnotherRequest) {
  IdempotencyBook book;
  const auto body = SubmissionDigest::Of("{\"name\":\"a\"}", 1);
  std::vector<KeyValueRow> rows;
  ASSERT_FALSE(book.Recall("alice", "k1", body, 0).value().has_value());
  book.Remember("alice", "k1", body, {{"id", 7}}, 1000, &rows);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].table, "idempotency");
  EXPECT_EQ(rows[0].key, "alice\nk1");
  EXPECT_FALSE(rows[0].erase);
  auto again = book.Recall("alice", "k1", body, 5000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()->at("id"), 7);
  EXPECT_FALSE(book.Recall("bob", "k1", body, 5000).value().has_value());  // keys are per user
  auto other = book.Recall("alice", "k1", SubmissionDigest::Of("{\"name\":\"b\"}", 1), 5000);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "Idempotency-Key 'k1' was used for another request 4s ago; use a new key for a new "
            "request");
}

TEST(IdempotencyBookTest, KeysPastTheWindowAreForgottenAndTheirRowsErased) {
  IdempotencyBook book;
  const auto body = SubmissionDigest::Of("x", 1);
  std::vector<KeyValueRow> rows;
  book.Remember("alice", "old", body, {{"id", 1}}, 0, &rows);
  const Time later = IdempotencyBook::kWindow + 1;
  EXPECT_FALSE(book.Recall("alice", "old", body, later).value().has_value());
  rows.clear();
  book.Remember("alice", "new", body, {{"id", 2}}, later, &rows);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].key, "alice\nold");
  EXPECT_TRUE(rows[1].erase);
  EXPECT_EQ(book.size(), 1u);
}

TEST(IdempotencyBookTest, RestoredRowsAnswerAndArePrunedOldestFirst) {
  IdempotencyBook first;
  std::vector<KeyValueRow> rows;
  const auto body = SubmissionDigest::Of("x", 1);
  first.Remember("u", "b", body, {{"id", 2}}, 2000, &rows);
  first.Remember("u", "a", body, {{"id", 1}}, 1000 + IdempotencyBook::kWindow, &rows);
  IdempotencyBook restored;  // rows come back in key order, not time order
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) restored.Restore(*it);
  EXPECT_EQ(restored.Recall("u", "a", body, 3000).value()->at("id"), 1);
  std::vector<KeyValueRow> out;
  restored.Remember("u", "c", body, {{"id", 3}}, 2001 + IdempotencyBook::kWindow, &out);
  ASSERT_EQ(out.size(), 2u);  // "b" (at 2000) is past the window; "a" is not
  EXPECT_EQ(out[1].key, "u\nb");
  EXPECT_TRUE(out[1].erase);
  restored.Restore({"idempotency", "u\nbad", "not json", false});  // ignored
  EXPECT_EQ(restored.size(), 2u);
}

}  // namespace
}  // namespace hangar::controller
