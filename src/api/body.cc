#include "api/body.h"

#include <charconv>

#include "common/utf8.h"

namespace hangar::api {

Status CheckUtf8(std::string_view text, std::string_view what) {
  if (const auto bad = FirstInvalidUtf8(text)) {
    return Status::InvalidArgument(std::string(what) + " is not valid UTF-8 (byte " +
                                   std::to_string(*bad) + "); send text in UTF-8");
  }
  return Status::Ok();
}

Status CheckNesting(std::string_view text, std::string_view what, int max_depth) {
  int depth = 0;
  bool in_string = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\' && quote == '"')
        ++i;
      else if (c == quote)
        in_string = false;
      continue;
    }
    if (c == '"' || c == '\'') {
      in_string = true;
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return Status::InvalidArgument(std::string(what) + " nests deeper than " +
                                       std::to_string(max_depth) +
                                       " levels; no Hangar document needs that many");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Status::Ok();
}

StatusOr<nlohmann::json> ParseObject(std::string_view body, std::string_view example) {
  const std::string usage = "the body must be a JSON object like " + std::string(example);
  if (body.empty()) return nlohmann::json::object();
  HANGAR_RETURN_IF_ERROR(CheckUtf8(body, "the body"));
  HANGAR_RETURN_IF_ERROR(CheckNesting(body, "the body"));
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument(usage + "; this is not JSON");
  if (!j.is_object()) return Status::InvalidArgument(usage);
  return j;
}

StatusOr<std::optional<std::string>> OptString(const nlohmann::json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Status::InvalidArgument("\"" + key + "\" must be a string, not " +
                                   std::string(it->type_name()) + " " + SafeDump(*it));
  }
  return std::optional<std::string>(it->get<std::string>());
}

StatusOr<std::optional<int64_t>> OptInt(const nlohmann::json& obj, const std::string& key,
                                        int64_t min, int64_t max) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<int64_t>();
  const std::string range = " from " + std::to_string(min) + " to " + std::to_string(max);
  if (!it->is_number_integer()) {
    return Status::InvalidArgument("\"" + key + "\" must be a whole number" + range + ", not " +
                                   SafeDump(*it));
  }
  // Unsigned JSON numbers past int64 are out of range too, not wrapped.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Status::InvalidArgument("\"" + key + "\" must be" + range + "; " + SafeDump(*it) +
                                   " is not");
  }
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return Status::InvalidArgument("\"" + key + "\" must be" + range + "; " + std::to_string(v) +
                                   " is not");
  }
  return std::optional<int64_t>(v);
}

StatusOr<int64_t> ParseCount(std::string_view text, std::string_view name, int64_t min,
                             int64_t max) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  if (ec == std::errc::result_out_of_range ||
      (ec == std::errc() && p == text.data() + text.size() && (v < min || v > max))) {
    return Status::InvalidArgument(std::string(name) + " must be " + range + "; " +
                                   std::string(text) + " is not");
  }
  if (ec != std::errc() || p != text.data() + text.size()) {
    return Status::InvalidArgument(std::string(name) + " must be a whole number (" + range +
                                   "), not '" + std::string(text) + "'");
  }
  return v;
}

std::string SafeDump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace hangar::api
