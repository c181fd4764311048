docs/rbac.md on a controller with tokens (its default): the first admin token written beside the
store, people's tokens made from the document's own commands, a user who reads the events of
their own job and not of another's, rotation and revocation, and the audit log.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ P=$(free_port 2); export HANGAR_URL=http://127.0.0.1:$P
  $ hangar controller --cluster examples/clusters/dev-4x8.yaml --store sqlite://$PWD/hangar-dev/state.db --api 127.0.0.1:$P --agents 127.0.0.1:$((P + 1)) --insecure > controller.out 2>&1 &
  $ wait_for 30 'curl -sf $HANGAR_URL/healthz'
  $ ls -l hangar-dev/admin.token | cut -c1-10
  -rw-------
  $ hangar jobs
  error: this API needs a token; pass `Authorization: Bearer <token>` (the CLI reads $HANGAR_TOKEN); an admin makes tokens with `hangar token create`
  [1]
  $ export HANGAR_TOKEN=$(cat hangar-dev/admin.token)

The document's tokens for alice, bob and carol (block 3), each printed once:

  $ doc_block docs/rbac.md 3 | grep -E -- '--user (alice|bob|carol) ' | sed 's/ *#.*//' > make-tokens.sh
  $ cat make-tokens.sh
  hangar token create --user alice --role user --account alice
  hangar token create --user bob --role user --uid 61002 --gid 61002 --groups 61010,61011
  hangar token create --user carol --role user
  $ bash make-tokens.sh | grep -c '^hgr_'
  token ???????????? for alice (user), tasks run as alice, expires ????-??-??T??:??:??Z; it is shown only now: keep it secret (glob)
  token ???????????? for bob (user), tasks run as uid 61002 gid 61002 groups 61010,61011, expires ????-??-??T??:??:??Z; it is shown only now: keep it secret (glob)
  token ???????????? for carol (user), tasks run as carol, expires ????-??-??T??:??:??Z; it is shown only now: keep it secret (glob)
  3
  $ hangar token list | cut -c1-60 | sed 's/^[0-9a-f]\{12\}/ID/; s/ *$//' | sort
  ID            USER   ROLE   NODE  RUNS AS
  ID  admin  admin  -     admin
  ID  alice  user   -     alice
  ID  bob    user   -     uid 61002 gid 61002 groups
  ID  carol  user   -     carol
  $ ALICE=$(hangar token create --user alice --role user)
  token ???????????? for alice (user), tasks run as alice, expires ????-??-??T??:??:??Z; it is shown only now: keep it secret (glob)
  $ BOB=$(hangar token create --user bob --role user 2>bob.out); cat bob.out
  token ???????????? for bob (user), tasks run as bob, expires ????-??-??T??:??:??Z; it is shown only now: keep it secret (glob)
  $ HANGAR_TOKEN=$ALICE hangar submit examples/jobs/notebook.yaml
  submitted job 1 (notebook-alice)
  $ HANGAR_TOKEN=$BOB hangar submit examples/jobs/notebook.yaml
  submitted job 2 (notebook-alice)

A user reads the events of their own job, and not of bob's:

  $ HANGAR_TOKEN=$ALICE hangar events job/1 | cut -c23-
  SUBJECT  EVENT
  job/1    submitted 'notebook-alice' to queue default
  $ HANGAR_TOKEN=$ALICE hangar events job/2
  error: permission jobs:read on job 2 is missing: alice (user) may see only their own jobs; it belongs to bob in queue default
  [1]
  $ HANGAR_TOKEN=$ALICE hangar cancel 2
  error: permission jobs:cancel on job 2 is missing: alice (user) may cancel only their own jobs; it belongs to bob in queue default
  [1]

Rotated, the old secret is refused at once; revoked, so is the new one.

  $ id=$(grep -o '^token [0-9a-f]*' bob.out | cut -d' ' -f2)
  $ hangar token rotate $id > rotated.out 2>&1; NEW=$(grep -o 'hgr_[A-Za-z0-9_-]*' rotated.out); newid=$(grep -o '^token [0-9a-f]*' rotated.out | cut -d' ' -f2)
  $ grep -v hgr_ rotated.out
  token ???????????? replaces ???????????? (revoked now) for bob (user); it is shown only now: keep it secret (glob)
  $ HANGAR_TOKEN=$BOB hangar jobs 2>&1 | head -1
  error: token ???????????? was revoked at ????-??-??T??:??:??Z (rotated: token ???????????? replaces it); ask an admin for a new one (glob)
  $ HANGAR_TOKEN=$NEW hangar jobs --user bob | cut -c1-40
  ID  NAME            ARRAY  QUEUE    USER
  2   notebook-alice  -      default  bob 
  $ hangar token revoke $newid | sed "s/$newid/NEWID/"
  revoked token NEWID
  $ HANGAR_TOKEN=$NEW hangar jobs 2>&1 | head -1 | sed "s/$newid/NEWID/"
  error: token NEWID was revoked at ????-??-??T??:??:??Z; ask an admin for a new one (glob)
  $ hangar audit --user alice | cut -c23- | head -4
  USER   ROLE  CALL                    FROM             STATUS  MESSAGE
  alice  user  POST /v1/jobs/2/cancel  127.0.0.1:* *403     permission jobs:cancel on job 2 is missing: alice (user) may cancel only their own jobs; it belongs to bob in queue default (glob)
  alice  user  POST /v1/jobs           127.0.0.1:* *201 (glob)
  $ doc_block docs/rbac.md 5 | sed "s/ *#.*//; s|http://127.0.0.1:8080|$HANGAR_URL|" > audit.sh
  $ bash audit.sh > audit.out 2>/dev/null; echo "exit $?"
  exit 0
  $ grep -c '"user": *"alice"' audit.out
  1
  $ kill %1; wait
  $ cleanup
