`hangar sim goodput` (docs/goodput.md) from the checkout's root, on the Philly trace it ships,
made small: a 512-GPU training job, 2 days of work, failures at 20 times Llama 3's rate.

  $ . "$TESTDIR/journey.sh"
  $ mkdir -p build/src && ln -s "$HANGAR_BINARY" build/src/hangar && ln -s "$HANGAR_SRC/data" data
  $ build/src/hangar sim goodput --job-gpus 512 --trace-nodes 16 --spares 4 --work 2d --seeds 1 \
  >   --rate-scale 20 --json goodput.json > goodput.out; echo "exit $?"
  exit 0
  $ grep -c "^checkpoint every" goodput.out
  2
  $ grep -o "^checkpoint every [0-9a-z]*" goodput.out
  checkpoint every 10m
  checkpoint every 30m

The figures a script reads, as fractions of 1; the first interval's at the top level:

  $ python3 - goodput.json <<'PY'
  > import json, sys
  > d = json.load(open(sys.argv[1]))
  > print(d["checkpoint_interval_s"], 0 < d["bound_ettr"] < 1)
  > for p in ("spares", "no_spares", "naive"):
  >     e = d["policies"][p]["ettr"]
  >     print(p, 0 < e <= 1, e <= d["policies"][p]["bound_ettr_same_failures"] + 0.05)
  > print(d["policies"]["spares"]["ettr"] > d["policies"]["naive"]["ettr"])
  > print([i["checkpoint_interval_s"] for i in d["by_interval"]])
  > PY
  600 True
  spares True True
  no_spares True True
  naive True True
  True
  [600, 1800]

A policy it does not know:

  $ build/src/hangar sim goodput --policies spares,hot
  hangar sim goodput: --policies: 'hot' is no policy; name spares, no_spares or naive, comma-separated
  [2]
  $ cleanup
