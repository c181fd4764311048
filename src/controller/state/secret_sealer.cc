#include "controller/state/secret_sealer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hangar::controller {
namespace {

constexpr const char* kPrefix = "hangar-sealed:v1:";
constexpr size_t kNonce = 12, kTag = 16, kKey = 32;

std::string Hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += {d[p[i] >> 4], d[p[i] & 15]};
  return out;
}

bool FromHex(const std::string& hex, std::string* out) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

std::string Base64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  out.resize(n);
  return out;
}

bool FromBase64(const std::string& text, std::string* out) {
  if (text.empty() || text.size() % 4) return false;
  out->assign(3 * text.size() / 4 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return false;
  size_t pad = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) ++pad;
  out->resize(static_cast<size_t>(n) - pad);
  return true;
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

// nonce || ciphertext || tag of `plain`, with `aad` authenticated.
std::string Encrypt(const std::string& key, const std::string& aad, const std::string& plain) {
  unsigned char nonce[kNonce];
  RAND_bytes(nonce, sizeof nonce);
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                     reinterpret_cast<const unsigned char*>(key.data()), nonce);
  int n = 0;
  EVP_EncryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(aad.data()),
                    static_cast<int>(aad.size()));
  std::string out(reinterpret_cast<const char*>(nonce), kNonce);
  out.resize(kNonce + plain.size() + kTag);
  auto* ct = reinterpret_cast<unsigned char*>(out.data()) + kNonce;
  EVP_EncryptUpdate(ctx.get(), ct, &n, reinterpret_cast<const unsigned char*>(plain.data()),
                    static_cast<int>(plain.size()));
  int tail = 0;
  EVP_EncryptFinal_ex(ctx.get(), ct + n, &tail);
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTag, ct + plain.size());
  return out;
}

bool Decrypt(const std::string& key, const std::string& aad, const std::string& sealed,
             std::string* plain) {
  if (sealed.size() < kNonce + kTag) return false;
  const size_t len = sealed.size() - kNonce - kTag;
  const auto* p = reinterpret_cast<const unsigned char*>(sealed.data());
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                     reinterpret_cast<const unsigned char*>(key.data()), p);
  int n = 0;
  EVP_DecryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(aad.data()),
                    static_cast<int>(aad.size()));
  plain->assign(len, '\0');
  EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain->data()), &n, p + kNonce,
                    static_cast<int>(len));
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTag,
                      const_cast<unsigned char*>(p + kNonce + len));
  int tail = 0;
  return EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain->data()) + n,
                             &tail) == 1;
}

bool IsSealed(const nlohmann::json& v) {
  return v.is_string() && v.get_ref<const std::string&>().rfind(kPrefix, 0) == 0;
}

// Applies `f(name, value)` to every tasks[].env value of a parsed spec.
template <typename F>
Status ForEachEnvValue(nlohmann::json& spec, F f) {
  if (!spec.is_object() || !spec.contains("tasks") || !spec["tasks"].is_array())
    return Status::Ok();
  for (auto& group : spec["tasks"]) {
    if (!group.is_object() || !group.contains("env") || !group["env"].is_object()) continue;
    for (auto& [name, value] : group["env"].items()) HANGAR_RETURN_IF_ERROR(f(name, value));
  }
  return Status::Ok();
}

}  // namespace

SecretSealer::SecretSealer(std::string key, std::string path)
    : key_(std::move(key)), path_(std::move(path)) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key_.data()), key_.size(), digest);
  key_id_ = Hex(digest, 4);
}

std::shared_ptr<const SecretSealer> SecretSealer::FromKey(const std::string& key32,
                                                          std::string path) {
  return std::shared_ptr<const SecretSealer>(new SecretSealer(key32, std::move(path)));
}

StatusOr<std::shared_ptr<const SecretSealer>> SecretSealer::FromKeyFile(const std::string& path,
                                                                        bool create) {
  std::ifstream in(path);
  if (!in) {
    if (!create || errno != ENOENT) {
      return Status::NotFound("cannot read the secrets key " + path + " (" + std::strerror(errno) +
                              "); give --secrets-key the file every controller of this store uses "
                              "(docs/operations.md)");
    }
    unsigned char raw[kKey];
    if (RAND_bytes(raw, sizeof raw) != 1)
      return Status::Internal("no random bytes for a secrets key (OpenSSL)");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
      return Status::Unavailable("cannot create the secrets key " + path + ": " +
                                 std::strerror(errno));
    const std::string line = Hex(raw, sizeof raw) + "\n";
    const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                    ::fsync(fd) == 0;
    ::close(fd);
    if (!ok)
      return Status::Unavailable("cannot write the secrets key " + path + ": " +
                                 std::strerror(errno));
    return FromKey(std::string(reinterpret_cast<const char*>(raw), sizeof raw), path);
  }
  std::string hex, key;
  std::getline(in, hex);
  if (!FromHex(hex, &key) || key.size() != kKey) {
    return Status::InvalidArgument("the secrets key " + path +
                                   " is not 64 hex digits (a 256-bit key); make one with "
                                   "`openssl rand -hex 32 > FILE` and `chmod 600 FILE`");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return Status::FailedPrecondition("the secrets key " + path + " is readable by others (mode " +
                                      std::to_string((st.st_mode >> 6) & 7) +
                                      std::to_string((st.st_mode >> 3) & 7) +
                                      std::to_string(st.st_mode & 7) + "); chmod 600 " + path);
  }
  return FromKey(key, path);
}

std::string SecretSealer::Seal(const std::string& spec_json) const {
  if (spec_json.find("\"env\"") == std::string::npos) return spec_json;
  auto spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (spec.is_discarded()) return spec_json;
  bool any = false;
  (void)ForEachEnvValue(spec, [&](const std::string& name, nlohmann::json& value) {
    if (!value.is_string() || IsSealed(value)) return Status::Ok();
    value = kPrefix + key_id_ + ":" + Base64(Encrypt(key_, name, value.get<std::string>()));
    any = true;
    return Status::Ok();
  });
  return any ? spec.dump() : spec_json;
}

StatusOr<std::string> SecretSealer::Unseal(const std::string& stored_json) const {
  if (!HasSealedValues(stored_json)) return stored_json;
  auto spec = nlohmann::json::parse(stored_json, nullptr, false);
  if (spec.is_discarded()) return stored_json;
  HANGAR_RETURN_IF_ERROR(
      ForEachEnvValue(spec, [&](const std::string& name, nlohmann::json& value) -> Status {
        if (!IsSealed(value)) return Status::Ok();
        const std::string text = value.get<std::string>().substr(std::strlen(kPrefix));
        const size_t colon = text.find(':');
        const std::string id = text.substr(0, colon);
        if (colon == std::string::npos || id != key_id_) {
          return Status::FailedPrecondition(
              "the environment variable " + name + " was sealed with the secrets key " + id +
              ", and this controller's key (" + path_ + ") is " + key_id_ +
              "; give --secrets-key the key this store was written with");
        }
        std::string raw, plain;
        if (!FromBase64(text.substr(colon + 1), &raw) || !Decrypt(key_, name, raw, &plain)) {
          return Status::Internal("the sealed value of the environment variable " + name +
                                  " does not open with the secrets key " + key_id_ +
                                  ": it was altered in the store");
        }
        value = plain;
        return Status::Ok();
      }));
  return spec.dump();
}

bool HasSealedValues(const std::string& stored_json) {
  return stored_json.find(kPrefix) != std::string::npos;
}

StatusOr<std::string> UnsealSpec(const SecretSealer* sealer, const std::string& stored_json) {
  if (sealer) return sealer->Unseal(stored_json);
  if (HasSealedValues(stored_json)) {
    return Status::FailedPrecondition(
        "this store holds job environments sealed with a secrets key, and the controller "
        "has none; give it --secrets-key FILE (for SQLite, STORE.key beside the database)");
  }
  return stored_json;
}

}  // namespace hangar::controller
