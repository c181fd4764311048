docs/ha.md's backup and restore, its transcript run as written but for the journey's own ports
and folders: a SQLite store backed up once its controller stops, restored into PostgreSQL (and
refused there a second time unless --force), a controller on the restored store, a backup of
PostgreSQL under its running controller, and that restored into a new SQLite store.

  $ . "$TESTDIR/journey.sh"
  $ cp "$HANGAR_SRC"/examples/clusters/dev-4x8.yaml "$HANGAR_SRC"/examples/jobs/finetune-8gpu.yaml "$HANGAR_SRC"/examples/jobs/notebook.yaml .
  $ pg_start
  $ "$PG_BIN/createdb" -h 127.0.0.1 -p $PG_PORT -U hangar hangar
  $ P=$(free_port 2); mkdir hdoc
  $ export DOC_SED="s|/tmp/hdoc|$PWD/hdoc|g; s|127.0.0.1:5544|127.0.0.1:$PG_PORT|g; s|--api 127.0.0.1:18080|--api 127.0.0.1:$P --agents 127.0.0.1:$((P + 1))|; s|127.0.0.1:18080|127.0.0.1:$P|g; s|^kill %1\$|kill %1; wait %1|; s/ &\$/ > controller.\$RANDOM.out 2>\&1 \& sleep 1; wait_for 30 'curl -sf http:\/\/127.0.0.1:$P\/healthz'/"
  $ doc_run docs/ha.md 5 2>&1 | sed -E "s|$PWD|.|g; s/:$PG_PORT/:PGPORT/g; s/:$P\b/:PORT/g; s/--agents 127.0.0.1:[0-9]+/--agents 127.0.0.1:PORT2/; s/pid [0-9]+/pid N/; s/ +[0-9]+(ms|s) ago +/  AGE  /g"
  [doc] $ hangar controller --cluster dev-4x8.yaml --store sqlite://./hdoc/state.db --auth none --insecure --api 127.0.0.1:PORT --agents 127.0.0.1:PORT2 > controller.$RANDOM.out 2>&1 & sleep 1; wait_for 30 'curl -sf http://127.0.0.1:PORT/healthz'
  [doc] $ hangar submit --server http://127.0.0.1:PORT finetune-8gpu.yaml
  submitted job 1 (finetune-llama-8b)
  [doc] $ hangar submit --server http://127.0.0.1:PORT notebook.yaml
  submitted job 2 (notebook-alice)
  [doc] $ hangar backup --store sqlite://./hdoc/state.db --out ./hdoc/backup.jsonl
  hangar backup: the store ./hdoc/state.db is in use by another controller (pid N); a SQLite store has one owner: stop that controller, then back up (a PostgreSQL store can be backed up while its controllers run)
  [doc] $ kill %1; wait %1
  [doc] $ hangar backup --store sqlite://./hdoc/state.db --out ./hdoc/backup.jsonl
  backed up sqlite://./hdoc/state.db to ./hdoc/backup.jsonl: 2 jobs, 0 nodes, 5 values, 2 events, 2 audit records, 1 history row
  [doc] $ hangar restore --store postgres://hangar@127.0.0.1:PGPORT/hangar --in ./hdoc/backup.jsonl
  restored ./hdoc/backup.jsonl into postgres://hangar@127.0.0.1:PGPORT/hangar: 2 jobs, 0 nodes, 5 values, 2 events, 2 audit records, 1 history row
  [doc] $ hangar restore --store postgres://hangar@127.0.0.1:PGPORT/hangar --in ./hdoc/backup.jsonl
  hangar restore: the store postgres://hangar@127.0.0.1:PGPORT/hangar is not empty; restore into an empty store, or add --force to erase everything in it and replace it with the backup
  [doc] $ hangar restore --store postgres://hangar@127.0.0.1:PGPORT/hangar --in ./hdoc/backup.jsonl --force
  restored ./hdoc/backup.jsonl into postgres://hangar@127.0.0.1:PGPORT/hangar: 2 jobs, 0 nodes, 5 values, 2 events, 2 audit records, 1 history row
  [doc] $ hangar controller --cluster dev-4x8.yaml --store postgres://hangar@127.0.0.1:PGPORT/hangar --secrets-key ./hdoc/state.db.key --auth none --insecure --api 127.0.0.1:PORT --agents 127.0.0.1:PORT2 > controller.$RANDOM.out 2>&1 & sleep 1; wait_for 30 'curl -sf http://127.0.0.1:PORT/healthz'
  [doc] $ hangar jobs --server http://127.0.0.1:PORT
  ID  NAME               ARRAY  QUEUE    USER       STATE    GPUS  TASKS  AGE     REASON
  2   notebook-alice     -      default  anonymous  pending  1     1  AGE  fits only on nodes that have not registered: no agent has connected f~
  1   finetune-llama-8b  -      default  anonymous  pending  8     1  AGE  fits only on nodes that have not registered: no agent has connected f~
  [doc] $ hangar backup --store postgres://hangar@127.0.0.1:PGPORT/hangar --out ./hdoc/pg.jsonl      # its controller running
  backed up postgres://hangar@127.0.0.1:PGPORT/hangar to ./hdoc/pg.jsonl: 2 jobs, 0 nodes, 5 values, 2 events, 2 audit records, 2 history rows
  [doc] $ hangar restore --store sqlite://./hdoc/back.db --in ./hdoc/pg.jsonl
  restored ./hdoc/pg.jsonl into sqlite://./hdoc/back.db: 2 jobs, 0 nodes, 5 values, 2 events, 2 audit records, 2 history rows
  $ pkill -INT -f -- "--api 127.0.0.1:$P "; wait_for 20 '! pgrep -f -- "--api 127.0.0.1:$P "'
  $ cleanup
