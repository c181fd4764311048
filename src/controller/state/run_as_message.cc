#include "controller/state/run_as_message.h"

namespace hangar::controller {

void FillRunAs(const job::RunAs& who, bool allow_root, agent::v1::RunAs* out) {
  if (who.empty()) return;
  if (who.uid) {
    out->set_uid(*who.uid);
    out->set_gid(who.gid);
    for (uint32_t g : who.groups) out->add_groups(g);
  } else {
    out->set_account(who.account);
  }
  out->set_allow_root(allow_root);
}

}  // namespace hangar::controller
