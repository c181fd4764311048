docs/mig.md's two commands as they stand: `hangar dev` on the MIG cluster with the MIG examples
(each placed on its slice and finished), and the MIG day in the simulator.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ DEV_PORT=$(free_port 3)
  $ doc_block docs/mig.md 3 | sed "s|^hangar dev |hangar dev --dir $PWD/hangar-dev --port $DEV_PORT |" > mig-dev.sh
  $ timeout 120 bash mig-dev.sh > mig-dev.out 2>&1; echo "exit $?"
  exit 0
  $ grep "^submitted" mig-dev.out
  submitted eval-7g.yaml as job 1
  submitted inference-1g.yaml as job 2
  submitted train-3g.yaml as job 3
  $ grep -c " succeeded$" mig-dev.out
  3
  $ left_running

From the checkout's root, as the document runs it (build/src/hangar, data/traces):

  $ mkdir -p build/src && ln -s "$HANGAR_BINARY" build/src/hangar && ln -s "$HANGAR_SRC/data" data
  $ doc_block docs/mig.md 4 | bash > sim-mig.out 2>&1; echo "exit $?"
  exit 0
  $ head -1 sim-mig.out
  819 MIG jobs over a day on 16 H100-80GB GPUs (load 0.90, reshape 10 s)
  $ cleanup
