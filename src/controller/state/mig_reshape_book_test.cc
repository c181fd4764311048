#include "controller/state/mig_reshape_book.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(MigReshapeBookTest, AnswersAreCountedOnceAndAGpusReshapesCanBeForgotten) {
  MigReshapeBook book;
  const uint64_t a = book.Begin(3, 10, 1000);
  const uint64_t b = book.Begin(4, 11, 1000);
  const uint64_t c = book.Begin(3, 12, 2000);
  EXPECT_NE(a, b);
  EXPECT_EQ(book.stats().in_flight, 3);
  ASSERT_NE(book.Find(b), nullptr);
  EXPECT_EQ(book.Find(b)->gpu, 4u);
  EXPECT_EQ(book.Find(b)->for_job, 11u);
  book.Finish(b, true, 3000);  // 2 s
  book.Finish(b, true, 9000);  // a second answer is not counted again
  EXPECT_EQ(book.Find(b), nullptr);
  book.ForgetGpu(3);  // the node registered again: a and c are forgotten, uncounted
  EXPECT_EQ(book.Find(a), nullptr);
  EXPECT_EQ(book.Find(c), nullptr);
  const uint64_t d = book.Begin(5, 13, 10000);
  book.Finish(d, false, 10500);
  const MigReshapeBook::Stats s = book.stats();
  EXPECT_EQ(s.done, 1);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_DOUBLE_EQ(s.seconds_sum, 2.5);
  EXPECT_EQ(book.Find(999), nullptr);
}

}  // namespace
}  // namespace hangar::controller
