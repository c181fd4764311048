// Checks on what a client sends before anything is built from it: bodies that are not
// UTF-8, nesting deep enough to make a parser allocate hundreds of MB, fields of the wrong type or
// out of range, and numbers in query strings. Each failure is an InvalidArgument sentence that
// says what was wrong and what to send instead, so the API answers 400, never 500.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hangar::api {

// Brackets and braces deeper than this are refused before parsing; no Hangar document nests
// more than a handful of levels.
inline constexpr int kMaxNesting = 32;

// Ok when `text` is well-formed UTF-8; else says where it is not.
Status CheckUtf8(std::string_view text, std::string_view what);
// Ok when no [ or { (outside quoted strings) nests deeper than `max_depth`.
Status CheckNesting(std::string_view text, std::string_view what, int max_depth = kMaxNesting);
// A JSON object from a request body ("" is {}), after both checks above. `example` is shown in
// the error, e.g. {"reason": "bad fan"}.
StatusOr<nlohmann::json> ParseObject(std::string_view body, std::string_view example);
// Field `key` of `obj`: nullopt when absent; an error naming the field when it has another type
// (or, for integers, is outside [min, max]).
StatusOr<std::optional<std::string>> OptString(const nlohmann::json& obj, const std::string& key);
StatusOr<std::optional<int64_t>> OptInt(const nlohmann::json& obj, const std::string& key,
                                        int64_t min, int64_t max);
// A query parameter that must be a whole number in [min, max] (its text as given).
StatusOr<int64_t> ParseCount(std::string_view text, std::string_view name, int64_t min,
                             int64_t max);
// json.dump() that never throws: invalid UTF-8 inside strings is replaced, not an exception.
std::string SafeDump(const nlohmann::json& j);

}  // namespace hangar::api
