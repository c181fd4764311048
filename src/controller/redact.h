// Credentials never reach the audit log or the controller's log: a token a caller put in a URL
// (`?token=`, `?access_token=`, a Hangar token anywhere in it) is masked before a request's
// target is recorded. Authorization headers are never recorded at all.
#pragma once

#include <string>
#include <string_view>

namespace hangar::controller {

// `target` (path and query, as received) with credentials masked: the value of every query
// parameter whose name says it holds one (token, access_token, secret, password, key, ...) and
// the secret of every Hangar token (hgr_<id>_<secret> -> hgr_<id>_REDACTED) become REDACTED.
std::string RedactCredentials(std::string_view target);

}  // namespace hangar::controller
