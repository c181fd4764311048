// SHA-256 of bytes in memory, as lower-case hex. For digests that outlive a process (stored,
// compared after an upgrade): std::hash may change between builds, SHA-256 does not.
#pragma once

#include <string>
#include <string_view>

namespace hangar {

// 64 lower-case hex digits.
std::string Sha256Hex(std::string_view bytes);

}  // namespace hangar
