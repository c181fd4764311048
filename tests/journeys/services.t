A service on `hangar dev` (docs/services.md): three replicas of a stand-in model behind HAProxy,
reached through one endpoint; an update, a scale-down and a delete, as the document shows them.

  $ . "$TESTDIR/journey.sh"
  $ dev_start
  $ grep -o "services: endpoints on 127.0.0.1:[0-9]*-[0-9]* (HAProxy)" dev-1.out | sed 's/[0-9][0-9]*-[0-9]*/PORTS/'
  services: endpoints on 127.0.0.1:PORTS (HAProxy)
  $ DOC_SED="s#examples/#$HANGAR_SRC/examples/#g"
  $ doc_run docs/services.md 1 | sed 's/127.0.0.1:[0-9]*/127.0.0.1:PORT/'
  [doc] $ hangar service create -f */examples/services/echo.yaml (glob)
  created service echo (revision 1): endpoint 127.0.0.1:PORT
  $ wait_for 60 '[ "$(hangar service get echo -o json | jq -r .ready)" = 3 ]'
  $ hangar explain echo
  service echo wants 3 replicas, 3 ready: its file (or `hangar service scale`) asks for 3 replicas
    queue default: guaranteed 0 GPUs, 0.75 in use (0.75 borrowed)
    revision 1: complete
  $ doc_run docs/services.md 2 > get.out; grep -c "^replica=[123] revision=1 version=v1$" get.out; grep -c "ready  127.0.0.1" get.out
  1
  3
  $ doc_run docs/services.md 5 > update.out; grep -v '^\[doc\]' update.out | grep -v "^NAME\|^echo "
  service echo: rolling out revision 2
  service echo: 2 replicas wanted
  service echo: deleting (its replicas drain, then stop)
  $ wait_for 60 '[ "$(hangar service list -o json | jq ".services | length")" = 0 ]'
  $ hangar service get echo
  error: service 'echo' does not exist; `hangar service list` lists them
  [1]
  $ hangar service create -f missing.yaml
  error: missing.yaml: cannot open the service file; check the path
  [1]
  $ printf 'name: two\nservice: {replicas: 1}\ntasks: [{cpu: 1, replicas: 2, command: [x]}]\n' > two.yaml
  $ hangar service create -f two.yaml
  error: request body: the task group's replicas must be 1 (one task per replica); give the count as service: {replicas: 2}
  [1]
  $ hangar service lb-config unix:/run/hangar/lb.sock@0.0.0.0:30000+4 --verify-clients
  error: client certificates need TLS at the endpoints: give --tls-dir DIR or --tls-cert FILE
  [1]
  $ hangar service lb-config unix:/run/hangar/lb.sock@0.0.0.0:30000+4 --tls-dir missing-certs
  error: the certificate missing-certs/controller.crt is not a file; issue the cluster's with `hangar certs issue --controller --host NAME` (NAME: the endpoints' address)
  [1]
  $ dev_stop
  $ cleanup
