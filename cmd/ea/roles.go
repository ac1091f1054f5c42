package main

import (
	"context"
	"errors"
	"flag"
	"strconv"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/roles"
)

func cmdRoles() *command {
	var o struct {
		groups, partitions string // as given, "" when not
		nsc                bool
	}
	count := func(dst *string) func(string) error {
		return func(v string) error {
			if n, err := strconv.Atoi(v); err != nil || n < 1 {
				return errors.New("want a whole number, at least 1")
			}
			*dst = v
			return nil
		}
	}
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
			fs.Func("stream-groups", "stream group count of the deployment, 1-64 (env EA_STREAM_GROUPS; default 1)", count(&o.groups))
			fs.Func("groups", "short for --stream-groups", count(&o.groups))
			fs.Func("partitions", "partition count of the deployment (env EA_PARTITIONS; default 64)", count(&o.partitions))
			fs.BoolVar(&o.nsc, "nsc", false, "print an nsc script (JWT) instead of a nats-server configuration")
		},
		run: func(_ context.Context, a *app, args []string) error {
			if err := a.nargs(args, 0, 0); err != nil {
				return err
			}
			l := roles.Layout{Prefix: a.g.prefix, Groups: 1, Partitions: bus.DefaultPartitions}
			for _, s := range []struct {
				flag, env, given string
				dst              *int
			}{
				{"--stream-groups", "EA_STREAM_GROUPS", o.groups, &l.Groups},
				{"--partitions", "EA_PARTITIONS", o.partitions, &l.Partitions},
			} {
				v, from := s.given, s.flag
				if v == "" {
					v, from = a.getenv(s.env), s.env
				}
				if v == "" {
					continue
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return usagef(a.fs.Name(), "%s %q: want a whole number, at least 1", from, v)
				}
				*s.dst = n
			}
			r, err := roles.For(l)
			if err != nil {
				return usagef(a.fs.Name(), "%v", err)
			}
			if o.nsc {
				return r.WriteNSC(a.stdout)
			}
			return r.WriteServerConfig(a.stdout)
		},
	}
}
