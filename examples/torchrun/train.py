# A stand-in for a training script, for `torchrun train.py` on a Hangar gang
# (docs/job-format.md, "torchrun"): every worker joins one process group over Gloo and adds its
# rank + 1; each prints what it got and fails when the sum is wrong.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
expected = world * (world + 1) / 2
print(f"rank {rank} of {world}: all_reduce gave {t.item():g}, expected {expected:g}", flush=True)
dist.destroy_process_group()
raise SystemExit(0 if t.item() == expected else 1)
