// Job specs stored once (state_store.h): their key, and rows built from a text.
#include <openssl/evp.h>

#include <array>

#include "controller/store/state_store.h"

namespace hangar::controller {

std::string SpecKey(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), md.data(), &len, EVP_sha256(), nullptr);
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kDigits[md[i] >> 4]);
    out.push_back(kDigits[md[i] & 15]);
  }
  return out;
}

void JobRow::SetSpec(std::string text) {
  spec_key = SpecKey(text);
  spec = std::make_shared<const std::string>(std::move(text));
}

const std::string& JobRow::spec_text() const {
  static const std::string kNone;
  return spec ? *spec : kNone;
}

}  // namespace hangar::controller
