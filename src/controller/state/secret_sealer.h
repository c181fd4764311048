// SecretSealer: job environments at rest. A job's `env` values may be its owner's API
// keys; the store keeps each one sealed with AES-256-GCM under the controller's secrets key (a
// file of its own, mode 0600, never in the store), so a copy of the database or of a backup gives
// no one the values. The controller seals a spec once, when it is first interned, and unseals when
// it restores; tasks, the agent channel (mutual TLS) and the API's owner/admin view get the plain
// values.
//
// A sealed value is the string "hangar-sealed:v1:KEYID:BASE64", where KEYID is the first 8 hex
// digits of SHA-256 of the key (so a wrong key is named, not a garbled value) and BASE64 is the
// 12-byte nonce, the ciphertext and the 16-byte tag; the variable's name is the authenticated
// data (a value cannot be moved to another name). Values not in that form are plain (stores
// from before sealing) and read as they are.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace hangar::controller {

class SecretSealer {
 public:
  // The key in `path` (64 hex digits); when the file does not exist and `create` is set, a new
  // random key written there with mode 0600.
  static StatusOr<std::shared_ptr<const SecretSealer>> FromKeyFile(const std::string& path,
                                                                   bool create);
  // A key given as 32 raw bytes (tests).
  static std::shared_ptr<const SecretSealer> FromKey(const std::string& key32,
                                                     std::string path = "");

  // `spec_json` (a job spec as JSON) with every tasks[].env value sealed; the same text when it
  // has no environment.
  std::string Seal(const std::string& spec_json) const;
  // The plain spec of a stored one: sealed values opened. An error naming the key a value was
  // sealed with when it is not this one, or when a value was altered.
  StatusOr<std::string> Unseal(const std::string& stored_json) const;

  const std::string& key_id() const { return key_id_; }
  const std::string& path() const { return path_; }

 private:
  SecretSealer(std::string key, std::string path);
  std::string key_, key_id_, path_;
};

// True when `stored_json` holds any sealed value (a store that needs a secrets key to restore).
bool HasSealedValues(const std::string& stored_json);

// Opens a stored spec with `sealer`, or, with no sealer, returns it as it is unless it holds
// sealed values (then an error saying to give the controller --secrets-key).
StatusOr<std::string> UnsealSpec(const SecretSealer* sealer, const std::string& stored_json);

}  // namespace hangar::controller
