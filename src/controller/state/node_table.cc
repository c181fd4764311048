#include "controller/state/node_table.h"

namespace hangar::controller {

void NodeTable::NoteInReasons(const std::vector<std::string>& unregistered, InReasons in) {
  std::string list;
  for (size_t i = 0; i < unregistered.size() && i < 5; ++i)
    list += (i ? ", " : "") + unregistered[i];
  if (unregistered.size() > 5) list += " and " + std::to_string(unregistered.size() - 5) + " more";
  in.unregistered = std::move(list);
  in_reasons_ = std::move(in);
}

}  // namespace hangar::controller
