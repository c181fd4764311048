// The training job the maintenance tests run (maintenance_test.cc, maintenance_failover_test.cc):
// a shell script that never ends by itself and checkpoints on SIGUSR1.
#pragma once

#include <string>

namespace hangar::testing {

// A training job that never ends by itself: each run appends "start R NODE" to $OUT/runs and
// resumes from the step in its checkpoint (recorded in $OUT/resumed.R); SIGUSR1 writes the
// checkpoint and reports it with `hangar checkpoint-done`, and the agent then stops the task.
inline std::string TrainScript(const std::string& out) {
  return R"SH(#!/bin/sh
OUT=')SH" +
         out + R"SH('
R="$HANGAR_RESTART_COUNT"
CK="$HANGAR_CHECKPOINT_DIR/ckpt"
echo "start $R $HANGAR_NODE" >> "$OUT/runs"
step=0
if [ -f "$CK" ]; then
  step=$(cat "$CK")
  echo "$step" > "$OUT/resumed.$R"
fi
checkpoint() {
  mkdir -p "$HANGAR_CHECKPOINT_DIR"
  echo "$step" > "$CK.tmp" && mv "$CK.tmp" "$CK"
  echo "checkpoint $R $step" >> "$OUT/checkpoints"
  hangar checkpoint-done --path "$CK" --step "$step" > /dev/null 2>&1
  checkpointed=1
}
trap checkpoint USR1
trap 'exit 143' TERM
checkpointed=0
while :; do
  if [ "$checkpointed" = 0 ]; then step=$((step + 1)); fi
  echo "$step" > "$OUT/step"
  sleep 0.2 & wait $!
done
)SH";
}

}  // namespace hangar::testing
