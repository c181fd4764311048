docs/cluster-format.md: its gpu_models block on a cluster of those three models, the refusal it
describes for a job that asks more CPU per GPU than one of them allows, and each error the
document lists, from cluster files that have those mistakes at those lines.

  $ . "$TESTDIR/journey.sh"
  $ cat > models.yaml <<'YAML'
  > name: models
  > node_defaults: {cpu: 192, memory: 2Ti, gpus: 8, gpu_memory: 80Gi}
  > nodes:
  >   - {name: h-1, gpu_model: H100-SXM-80GB}
  >   - {name: a-1, gpu_model: A100-SXM-80GB, cpu: 128}
  >   - {name: l-1, gpu_model: L40S, gpu_memory: 48Gi}
  > YAML
  $ doc_block docs/cluster-format.md 1 >> models.yaml
  $ dev_start --cluster models.yaml
  $ printf 'name: greedy\ntasks:\n  - {name: main, gpus: 1, cpu_per_gpu: 20, command: [x]}\n' > greedy.yaml
  $ hangar submit greedy.yaml
  error: task group 'main' asks for 20 cores of CPU per GPU, above the most a A100-SXM-80GB GPU may have (cpu_per_gpu at most 16 cores, max_cpu_per_gpu in the cluster's gpu_models); ask for at most 16 cores per GPU, or limit gpu_models to models that allow it (H100-SXM-80GB, L40S)
  [1]
  $ printf 'name: fits\ntasks:\n  - {name: main, gpus: 1, cpu_per_gpu: 20, gpu_models: [H100-SXM-80GB], command: [true]}\n' > fits.yaml
  $ hangar submit fits.yaml && wait_job 1 succeeded
  submitted job 1 (fits)
  $ dev_stop

The errors, each from a file of its own; `hangar dev` refuses the cluster and says where:

  $ check() { mkdir -p $1 && cat > $1/$2 && hangar dev --cluster $1/$2 --dir $PWD/d --port $DEV_PORT 2>&1 | sed "s|$PWD/$1/||"; }
  $ printf 'name: lab\nnode_defaults:\n  cpu: 32\n  memory: 64Gi\nnodes:\n  - {name: cpu-1, gpus: 0}\n  - name: gpu-[1-4]\n    gpus: 8\n' | check 1 lab.yaml
  hangar dev: lab.yaml:7: node 'gpu-[1-4]' has GPUs but no gpu_model; set it here or in node_defaults
  $ printf 'name: lab\nnode_defaults:\n  memory: 4Gb2\nnodes:\n  - {name: gpu-1, gpus: 8, gpu_model: H100, gpu_memory: 80Gi}\n' | check 2 lab.yaml
  hangar dev: lab.yaml:3: memory: '4Gb2' has an unknown unit 'Gb2'; use Mi, Gi or Ti
  $ printf 'name: c\nnode_defaults: {cpu: 32, memory: 64Gi, gpu_model: H100, gpu_memory: 80Gi, gpus: 8}\nnodes:\n  - name: a-1\n  - name: a-2\n  - name: a-3\n  - name: a-4\n  - name: a-5\n  - name: a-6\n  - name: a-7\n  - name: a-8\n  - name: a-1\n' | check 3 cluster.yaml
  hangar dev: cluster.yaml: line 12: node 'a-1' is declared twice
  $ printf 'name: c\nnode_defaults: {cpu: 192, memory: 1Ti, gpus: 8, gpu_memory: 80Gi}\nnodes:\n  - name: n-1\n    gpu_model: H100\n\n\ngpu_models:\n  A100: {}\n' | check 4 cluster.yaml
  hangar dev: cluster.yaml:9: gpu_models: 'A100' is not the gpu_model of any node; the models are: H100
  $ printf 'name: c\nnode_defaults: {cpu: 192, memory: 1Ti, gpus: 8, gpu_memory: 80Gi}\nnodes:\n  - name: n-1\n    gpu_model: H100\n\n\ngpu_models:\n  H100: {max_cpu_per_gpu: 16}\n' | check 5 cluster.yaml
  hangar dev: cluster.yaml:9: gpu_models.H100: the default CPU per GPU (24 cores, derived from the nodes) is above max_cpu_per_gpu (16 cores); raise the maximum or set a lower default_cpu_per_gpu
  $ printf 'name: c\nnode_defaults: {cpu: 192, memory: 1Ti, gpus: 8, gpu_memory: 80Gi}\nnodes:\n  - name: n-1\n    gpu_model: H100\n\ngpu_models:\n  H100:\n    max_cpu_per_gpu: lots\n' | check 6 cluster.yaml
  hangar dev: cluster.yaml:9: max_cpu_per_gpu: 'lots' is not a CPU count like 8 or 7500m
  $ cleanup
