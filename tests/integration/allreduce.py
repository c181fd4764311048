# A real distributed client that Hangar did not write: torch.distributed over gloo, rendezvous
# from the environment Hangar gives each task (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK).
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t, op=dist.ReduceOp.SUM)
expected = world * (world + 1) / 2
with open(os.path.join(sys.argv[1], f"allreduce.{rank}"), "w") as f:
    f.write(f"{t.item():g} {expected:g}\n")
dist.destroy_process_group()
sys.exit(0 if t.item() == expected else 1)
