# A real distributed client that Hangar did not write: torch.distributed over gloo, rendezvous
# from the environment Hangar gives each task (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK), and
# the interfaces it names (GLOO_SOCKET_IFNAME). Usage: allreduce.py OUT_DIR [ELEMENTS]: each rank
# adds rank + 1 into a tensor of ELEMENTS floats (default 1) and writes "<sum> <expected>".
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
elements = int(sys.argv[2]) if len(sys.argv) > 2 else 1
t = torch.full((elements,), float(rank + 1))
dist.all_reduce(t, op=dist.ReduceOp.SUM)
expected = world * (world + 1) / 2
ok = bool((t == expected).all())
with open(os.path.join(sys.argv[1], f"allreduce.{rank}"), "w") as f:
    f.write(f"{t[0].item() if ok else t.min().item():g} {expected:g}\n")
dist.destroy_process_group()
sys.exit(0 if ok else 1)
