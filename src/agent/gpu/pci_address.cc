#include "agent/gpu/pci_address.h"

#include <charconv>
#include <cstdio>

namespace hangar::agent {
namespace {

std::optional<uint32_t> Hex(std::string_view s, size_t max_digits) {
  if (s.empty() || s.size() > max_digits) return std::nullopt;
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<PciAddress> ParsePciAddress(std::string_view text) {
  PciAddress a;
  const size_t dot = text.rfind('.');
  if (dot != std::string_view::npos) {
    auto f = Hex(text.substr(dot + 1), 1);
    if (!f || *f > 7) return std::nullopt;
    a.function = *f;
    text = text.substr(0, dot);
  }
  const size_t last = text.rfind(':');
  if (last == std::string_view::npos) return std::nullopt;
  auto dev = Hex(text.substr(last + 1), 2);
  std::string_view rest = text.substr(0, last);
  const size_t first = rest.rfind(':');
  auto bus = Hex(first == std::string_view::npos ? rest : rest.substr(first + 1), 2);
  std::optional<uint32_t> domain = 0u;
  if (first != std::string_view::npos) domain = Hex(rest.substr(0, first), 8);
  if (!dev || !bus || !domain || *dev > 0x1f) return std::nullopt;
  a.domain = *domain;
  a.bus = *bus;
  a.device = *dev;
  return a;
}

std::string SysfsPciName(const PciAddress& a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", a.domain, a.bus, a.device, a.function);
  return buf;
}

}  // namespace hangar::agent
