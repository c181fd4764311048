Reservations and maintenance windows (docs/reservations.md) on `hangar dev`'s four nodes: booked,
listed, kept by the scheduler (a job without a time limit would cross every window, so it waits
and `hangar explain` names the reservation; a short job runs), refused to those it does not
admit, and deleted.

  $ . "$TESTDIR/journey.sh"
  $ dev_start

The document's commands, in a later year (its dates would pass, and windows in the past are refused):

  $ doc_block docs/reservations.md 1 | sed 's/2027-/2099-/g' > examples.sh
  $ sed -n 1,2p examples.sh | sh
  maintenance window maint1 booked: node-1,node-2 from 2099-01-04T10:00:00Z to 2099-01-04T11:00:00Z
  reservation demo booked: node-3,node-4 from 2099-01-05T09:00:00Z to 2099-01-05T18:00:00Z
  $ hangar reservation create --name late --nodes node-2 --start 2099-01-04T10:30:00Z --duration 1h --users alice
  error: reservation 'late' overlaps reservation 'maint1' (2099-01-04T10:00:00Z to 2099-01-04T11:00:00Z) on shared nodes; move its window or leave those nodes out
  [1]

A count of nodes is picked under one leaf switch, free over the window; Slurm's form books the same:

  $ hangar reservation create --name pair --count 2 --selector leaf-1 --start 2099-01-05T12:00:00Z --duration 1h --users alice
  error: no leaf switch under leaf-1 has 2 nodes free of other reservations from 2099-01-05T12:00:00Z to 2099-01-05T13:00:00Z (the most any has is 0); ask for fewer, another window, or name the nodes
  [1]
  $ hangar reservation create --name pair --count 2 --start 2099-01-05T12:00:00Z --duration 1h --users alice
  reservation pair booked: node-1,node-2 from 2099-01-05T12:00:00Z to 2099-01-05T13:00:00Z
  $ hangar reservation delete pair
  reservation pair deleted
  $ hangar slurm scontrol create reservation ReservationName=fw StartTime=2099-01-07T10:00 Duration=30 Nodes=node-4 Users=root Flags=MAINT
  Reservation created: fw
  $ hangar slurm scontrol show reservation fw
  ReservationName=fw StartTime=2099-01-07T10:00:00Z EndTime=2099-01-07T10:30:00Z Duration=30m
     Nodes=node-4 NodeCnt=1 Users=(null) Accounts=(null) Flags=MAINT State=INACTIVE
  
  $ hangar slurm scontrol delete ReservationName=fw
  $ sed -n 3p examples.sh | sh
  NAME    STATE      START                 END                   NODES          FOR
  demo    scheduled  2099-01-05T09:00:00Z  2099-01-05T18:00:00Z  node-3,node-4  users alice,bob
  maint1  scheduled  2099-01-04T10:00:00Z  2099-01-04T11:00:00Z  node-1,node-2  maintenance
  $ cat > forever.yaml <<'YAML'
  > name: forever
  > tasks:
  >   - {gpus: 8, command: ["/bin/sh", "-c", "sleep 300"]}
  > YAML
  $ hangar submit forever.yaml
  submitted job 1 (forever)
  $ wait_for 10 'hangar explain 1 | grep -q reservation'
  $ hangar explain 1
  job 1 (forever) is pending: fits only on nodes held by reservation maint1 (2099-01-04T10:00:00Z to 2099-01-04T11:00:00Z), and its time limit would cross the window's start (a job without a time limit counts as running for ever)  [rule: reservation-window]
  $ sed 's/^name: forever/name: short\ntime_limit: 1h/' forever.yaml > short.yaml
  $ hangar submit short.yaml
  submitted job 2 (short)
  $ wait_job 2 running
  $ doc_block docs/reservations.md 2 > demo-run.yaml
  $ hangar submit demo-run.yaml
  error: user 'anonymous' (queue 'default') may not run in reservation 'demo'; it admits users ["alice","bob"] and queues []: ask its owner (anonymous) to add you
  [1]
  $ hangar reservation delete maint1
  reservation maint1 deleted
  $ sed -n 4p examples.sh | sh
  reservation demo deleted
  $ wait_job 1 running
  $ hangar cancel 1 2 > /dev/null
  $ dev_stop
