// Well-formed UTF-8: where a text stops being it.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace hangar {

// The offset of the first byte that does not begin or continue a well-formed UTF-8 character
// (overlong forms, surrogates and code points past U+10FFFF included), or nullopt.
std::optional<size_t> FirstInvalidUtf8(std::string_view text);

}  // namespace hangar
