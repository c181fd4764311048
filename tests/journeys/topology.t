The fabric's topology from Slurm's topology.conf, an ibnetdiscover dump and a CSV of hosts
(docs/topology-import.md), on the fixtures of tests/data/topology/ (one two-pod fabric in the
three formats), and a cluster.yaml with a node on the wrong leaf.

  $ . "$TESTDIR/journey.sh"
  $ D="$HANGAR_SRC/tests/data/topology"
  $ cp "$D/two-pod.topology.conf" topology.conf; cp "$D/two-pod.ibnetdiscover" fabric.txt; cp "$D/two-pod.csv" hosts.csv
  $ cat > cluster.yaml <<'YAML'
  > name: lab
  > node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 192, memory: 2Ti}
  > fabric:
  >   spines:
  >     - name: pod-a
  >       leaves:
  >         - {name: rack-1, nodes: [{name: "gpu-[001-005]", rack: r1}]}
  >         - {name: rack-2, nodes: [{name: "gpu-[006-008]", rack: r2}]}
  >     - name: pod-b
  >       leaves:
  >         - {name: rack-3, nodes: [{name: "gpu-[009-012]"}]}
  >         - {name: rack-4, nodes: [{name: "gpu-[013-017]"}]}
  > YAML
  $ doc_block docs/topology-import.md 1 > examples.sh
  $ sed -n 4p examples.sh | sh
  node gpu-005 is on the wrong leaf: cluster.yaml declares it under rack-1 (the fabric's leaf-a1), but it is cabled to leaf-a2; move it in cluster.yaml or fix its cabling
  node gpu-017 is in cluster.yaml (leaf rack-4) but no switch of the fabric has it
  [1]
  $ sed -n 1p examples.sh | sh
  wrote cluster.new.yaml: 16 hosts under 4 leaves in 2 spine blocks
  $ cat cluster.new.yaml
  name: lab
  node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 192, memory: 2Ti}
  fabric:
    spines:
      - name: "spine-a1"
        leaves:
          - name: "leaf-a1"
            nodes: [{name: "gpu-[001-004]", rack: r1}]
          - name: "leaf-a2"
            nodes: [{name: "gpu-005", rack: r1}, {name: "gpu-[006-008]", rack: r2}]
      - name: "spine-b1"
        leaves:
          - name: "leaf-b1"
            nodes: [{name: "gpu-[009-012]"}]
          - name: "leaf-b2"
            nodes: [{name: "gpu-[013-016]"}]
  $ hangar topology diff --format ibnetdiscover fabric.txt --cluster cluster.new.yaml
  cluster.new.yaml agrees with the fabric: 16 nodes, 4 leaves, 2 spine blocks
  $ sed -n 2p examples.sh | sh | head -4
  fabric:
    spines:
      - name: "spine-a1"
        leaves:
  $ sed -n 3p examples.sh | sh | diff - <(hangar topology import --format slurm topology.conf) && echo same
  note: layers above the spine column join every spine block, as the cluster does: they are not kept
  same
