package main

import (
	"cmp"
	"context"
	"flag"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/roles"
)

func cmdRoles() *command {
	var nsc bool
	return &command{
		name: "roles", short: "print least-privilege NATS roles for a deployment's layout",
		long: `Print the least-privilege NATS roles (users client, node, supervisor and
admin in account EA) for a deployment's prefix, stream group count and
partition count, as a nats-server configuration, or with --nsc as a shell
script that makes the same users with nsc (operators and accounts, JWT).
It connects to nothing. deploy/nats/roles.conf and deploy/nats/nsc.sh are
its output for the default layout (one stream group, prefix ea).

  ea roles --stream-groups 3 --partitions 64 > roles.conf
  ea roles --nsc --stream-groups 3 --partitions 64 > nsc.sh

With stream groups (above 1) the permissions name every group's outbox
stream and state bucket, mailbox subjects carry the partition token, and
the configuration carries the account mapping the layout needs: use it on
every server. The counts must be the deployment's (ea-node's
--stream-groups and --partitions, which these flags default to through
EA_STREAM_GROUPS and EA_PARTITIONS). See deploy/nats/README.md.`,
		flags: func(fs *flag.FlagSet) {
			// --stream-groups and --partitions are every command's (the
			// deployment's layout, from EA_STREAM_GROUPS and EA_PARTITIONS).
			fs.Func("groups", "short for --stream-groups", func(v string) error { return fs.Set("stream-groups", v) })
			fs.BoolVar(&nsc, "nsc", false, "print an nsc script (JWT) instead of a nats-server configuration")
		},
		run: func(_ context.Context, a *app, args []string) error {
			if err := a.nargs(args, 0, 0); err != nil {
				return err
			}
			l := roles.Layout{Prefix: a.g.prefix, Groups: cmp.Or(a.g.groups, 1), Partitions: cmp.Or(a.g.partitions, bus.DefaultPartitions)}
			r, err := roles.For(l)
			if err != nil {
				return usagef(a.fs.Name(), "%v", err)
			}
			if nsc {
				return r.WriteNSC(a.stdout)
			}
			return r.WriteServerConfig(a.stdout)
		},
	}
}
