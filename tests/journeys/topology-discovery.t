The topology the agents discover (docs/topology-discovery.md): a controller and four agents
started by hand, each on its own copy of the HGX H100 sysfs fixture whose first HCA is that host's
in the two-pod fabric's ibnetdiscover dump (tests/data/topology/); cluster.yaml declares gpu-005
on rack-1 with gpu-001 and gpu-002, but its HCA is cabled to leaf-a2 with gpu-006.

  $ . "$TESTDIR/journey.sh"
  $ D="$HANGAR_SRC/tests/data/topology"
  $ cat > cluster.yaml <<'YAML'
  > name: lab
  > node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
  > fabric:
  >   spines:
  >     - name: pod-a
  >       leaves:
  >         - {name: rack-1, nodes: [{name: "gpu-[001-002]", rack: r1}, {name: gpu-005, rack: r1}]}
  >         - {name: rack-2, nodes: [{name: gpu-006, rack: r2}]}
  > YAML
  $ P=$(free_port 2); export HANGAR_URL=http://127.0.0.1:$P
  $ hangar controller --cluster cluster.yaml --store sqlite://$PWD/state.db --api 127.0.0.1:$P --agents 127.0.0.1:$((P + 1)) --auth none --insecure > controller.out 2>&1 &
  $ CTL=$!; wait_for 30 'curl -sf $HANGAR_URL/healthz'
  $ for n in 1 2 5 6; do
  >   cp -a "$D/sysfs-hgx-h100" sysfs-$n
  >   printf '0002:c903:00a1:%04x\n' $((9 + n)) > sysfs-$n/class/infiniband/mlx5_0/node_guid
  >   hangar agent --controller 127.0.0.1:$((P + 1)) --node gpu-00$n --cluster cluster.yaml --state-dir $PWD/agents/gpu-00$n --sysfs-root sysfs-$n --ibnetdiscover "$D/two-pod.ibnetdiscover" --stop-tasks-on-exit --insecure > agent-$n.out 2>&1 &
  > done
  $ wait_ready 4
  $ hangar topology diff
  gpu-005: declared on rack-1, but its IB port mlx5_0/1 reports switch 0xb8599f0300aa0001 (leaf-a2), which rack-2's other nodes report; move it under rack-2 in cluster.yaml or fix its cabling
  [1]
  $ wait_for 10 'hangar events node/gpu-005 | grep -q "which rack-2"'
  $ hangar events node/gpu-005 | grep -c "which rack-2's other nodes report"
  1
  $ hangar topology discover --write cluster.new.yaml --cluster cluster.yaml
  wrote cluster.new.yaml: 4 nodes under 2 leaves in 1 spine blocks
  $ cat cluster.new.yaml
  name: lab
  node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
  fabric:
    spines:
      - name: "pod-a"
        leaves:
          - name: "leaf-a1"
            nodes: [{name: "gpu-[001-002]", rack: r1}]
          - name: "leaf-a2"
            nodes: [{name: "gpu-005", rack: r1}, {name: "gpu-006", rack: r2}]

The controller restarted on the written file; the agents register again and it agrees.

  $ kill -TERM $CTL; wait $CTL
  $ hangar controller --cluster cluster.new.yaml --store sqlite://$PWD/state.db --api 127.0.0.1:$P --agents 127.0.0.1:$((P + 1)) --auth none --insecure > controller-2.out 2>&1 &
  $ CTL=$!; wait_for 30 'curl -sf $HANGAR_URL/healthz'
  $ wait_for 30 '[ "$(curl -sf $HANGAR_URL/v1/topology/diff | grep -o "\"reported\":4")" ]'
  $ hangar topology diff
  cluster.yaml agrees with what the agents discovered (4 of 4 nodes told)
  $ kill -INT $(jobs -p); wait

With fake GPUs, the agent's flags say what NVLink they answer; nonsense is refused:

  $ hangar agent --node gpu-001 --fake-gpus 2 --fake-fabric nonsense --insecure --state-dir $PWD/x 2>&1 | grep -o 'hangar agent: .*'; echo "exit ${PIPESTATUS[0]}"
  hangar agent: --fake-fabric 'nonsense': give the NVLink fabric's cluster UUID and clique as UUID/CLIQUE, e.g. 6f1c0e2a-0000-4000-8000-000000000001/1
  exit 2
  $ hangar agent --node gpu-001 --fake-gpus 2 --fake-nvlink rings --insecure --state-dir $PWD/x 2>&1 | grep -o 'hangar agent: .*'; echo "exit ${PIPESTATUS[0]}"
  hangar agent: --fake-nvlink must be switch, pairs or none, not 'rings'
  exit 2
  $ cleanup
