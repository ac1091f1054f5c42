#!/bin/sh
# effectors: the roles of roles.conf for NATS operators and accounts (JWT),
# made with nsc (https://github.com/nats-io/nsc). It creates (or adds to) an
# operator, an account EA with JetStream, and the users client, node,
# supervisor and admin with the same permissions as roles.conf, and writes
# their .creds files to ./creds. Give each binary its file: --creds
# creds/node.creds (EA_CREDS).
#
#   OPERATOR=acme ./deploy/nats/nsc.sh
#   nsc generate config --nats-resolver > resolver.conf   # the server's side
#
# For another prefix than "ea", replace "ea." with "<prefix>.", "EA_" with
# "<PREFIX>_" and "ea_" with "<prefix>_" below. roles_test.go checks that
# these lists equal roles.conf's.
set -eu

OPERATOR=${OPERATOR:-effectors}
ACCOUNT=${ACCOUNT:-EA}
CREDS=${CREDS:-./creds}

CLIENT_ALLOW_PUB='ea.mbox.*.*,ea.ctl.>,ea.orch.>,ea.store.>,$SRV.PING,$SRV.PING.>,$SRV.INFO,$SRV.INFO.>,$SRV.STATS,$SRV.STATS.>,$JS.API.STREAM.INFO.EA_OUT,$JS.API.STREAM.INFO.KV_ea_state,$JS.API.DIRECT.GET.KV_ea_state.>,$JS.API.DIRECT.GET.KV_ea_state,$JS.API.STREAM.MSG.GET.KV_ea_state,$JS.API.CONSUMER.CREATE.EA_OUT.*.>,$JS.API.CONSUMER.CREATE.KV_ea_state.*.>,$JS.API.CONSUMER.INFO.EA_OUT.*,$JS.API.CONSUMER.INFO.KV_ea_state.*,$JS.API.CONSUMER.MSG.NEXT.EA_OUT.*,$JS.API.CONSUMER.MSG.NEXT.KV_ea_state.*,$JS.API.CONSUMER.DELETE.EA_OUT.*,$JS.API.CONSUMER.DELETE.KV_ea_state.*'
CLIENT_DENY_PUB='ea.mbox.supervisor.*,ea.mbox.supervisor-timer.*,$JS.API.CONSUMER.CREATE.EA_OUT.ea_store_index.>,$JS.API.CONSUMER.DELETE.EA_OUT.ea_store_index'
CLIENT_ALLOW_SUB='_INBOX.>,ea.out.>'

NODE_ALLOW_PUB='ea.>,_INBOX.>,$SRV.>,$KV.ea_state.>,$KV.ea_place.>,$KV.ea_keys.>,$JS.API.>,$JS.ACK.>,$JS.FC.>'
NODE_DENY_PUB='$KV.ea_orch.>,$JS.API.STREAM.DELETE.>,$JS.API.STREAM.PURGE.EA_MBOX,$JS.API.STREAM.PURGE.EA_OUT,$JS.API.STREAM.PURGE.EA_DEAD,$JS.API.STREAM.PURGE.KV_ea_state,$JS.API.STREAM.PURGE.KV_ea_orch,$JS.API.STREAM.PURGE.KV_ea_place,$JS.API.STREAM.PURGE.KV_ea_keys'
NODE_ALLOW_SUB='ea.>,_INBOX.>,$SRV.>'

SUPERVISOR_ALLOW_PUB='ea.mbox.*.*,ea.ctl.>,ea.orch.>,ea.out.supervisor.*,ea.timer.set.supervisor-timer.>,_INBOX.>,$SRV.>,$KV.ea_orch.>,$KV.ea_keys.>,$JS.API.>,$JS.ACK.>,$JS.FC.>'
SUPERVISOR_DENY_PUB='$JS.API.STREAM.PURGE.>,$JS.API.STREAM.DELETE.>,$JS.API.STREAM.MSG.DELETE.>'
SUPERVISOR_ALLOW_SUB='ea.orch.>,_INBOX.>,$SRV.>'

nsc describe operator "$OPERATOR" >/dev/null 2>&1 || nsc add operator --generate-signing-key --sys --name "$OPERATOR"
nsc env --operator "$OPERATOR"
nsc describe account "$ACCOUNT" >/dev/null 2>&1 || nsc add account --name "$ACCOUNT"
# JetStream for the account, without limits (set yours).
nsc edit account --name "$ACCOUNT" --js-mem-storage -1 --js-disk-storage -1 --js-streams -1 --js-consumer -1

add_user() { # name allow-pub deny-pub allow-sub
	nsc describe user --account "$ACCOUNT" --name "$1" >/dev/null 2>&1 || nsc add user --account "$ACCOUNT" --name "$1"
	set -- "$1" "$2" "$3" "$4"
	if [ -n "$2" ]; then
		nsc edit user --account "$ACCOUNT" --name "$1" --allow-pub "$2" --allow-sub "$4"
	fi
	if [ -n "$3" ]; then
		nsc edit user --account "$ACCOUNT" --name "$1" --deny-pub "$3"
	fi
	mkdir -p "$CREDS"
	nsc generate creds --account "$ACCOUNT" --name "$1" > "$CREDS/$1.creds"
	chmod 600 "$CREDS/$1.creds"
}

add_user client "$CLIENT_ALLOW_PUB" "$CLIENT_DENY_PUB" "$CLIENT_ALLOW_SUB"
add_user node "$NODE_ALLOW_PUB" "$NODE_DENY_PUB" "$NODE_ALLOW_SUB"
add_user supervisor "$SUPERVISOR_ALLOW_PUB" "$SUPERVISOR_DENY_PUB" "$SUPERVISOR_ALLOW_SUB"
add_user admin "" "" ""   # no permissions: everything in the account

echo "credentials in $CREDS: client.creds node.creds supervisor.creds admin.creds"
