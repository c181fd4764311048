#include "common/sha256.h"

#include <gtest/gtest.h>

namespace hangar {
namespace {

// FIPS 180-2's test vectors: the digest is the same in every build, unlike std::hash.
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace hangar
