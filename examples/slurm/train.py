#!/usr/bin/env python3
"""A stand-in for a training script, so that the examples here run as they are on `hangar dev`
(no PyTorch and no real GPUs needed). It "trains" for a few short steps, saying who it is (rank,
world size, node, GPUs), resumes from --resume, writes a checkpoint to --save-to when it ends or
when SIGUSR1 or SIGTERM asks it to stop early, and writes --out/metrics.json. Replace it with your
own train.py; the batch scripts do not change.
"""
import argparse
import json
import os
import signal
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", help="read by a real trainer; named in the output here")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--out", help="a folder for metrics.json")
    p.add_argument("--save-to", help="a folder for latest.pt (here: JSON)")
    p.add_argument("--resume", help="a checkpoint written by --save-to")
    p.add_argument("--steps", type=int, default=int(os.environ.get("TRAIN_STEPS", "5")))
    args, _ = p.parse_known_args()

    env = os.environ
    rank = int(env.get("RANK", env.get("SLURM_PROCID", "0")))
    world = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1")))
    node = env.get("SLURM_NODEID", env.get("NODE_RANK", "0"))
    gpus = env.get("CUDA_VISIBLE_DEVICES", "none")

    stop = []
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.append(signum))

    step = 0
    if args.resume and os.path.exists(args.resume):
        with open(args.resume) as f:
            step = json.load(f).get("step", 0)
    print(f"train.py: rank {rank} of {world} on node {node}, GPUs {gpus}, config {args.config}, "
          f"lr {args.lr:g}, from step {step}", flush=True)
    while step < args.steps and not stop:
        time.sleep(0.2)
        step += 1
    if args.save_to:
        os.makedirs(args.save_to, exist_ok=True)
        with open(os.path.join(args.save_to, "latest.pt"), "w") as f:
            json.dump({"step": step, "lr": args.lr}, f)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "metrics.json"), "w") as f:
            json.dump({"lr": args.lr, "steps": step, "loss": 1.0 / (1 + step * args.lr)}, f)
    why = " (stopped early by a signal)" if stop else ""
    print(f"train.py: rank {rank} done at step {step}{why}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
