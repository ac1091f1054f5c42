package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

// commands are ea's commands, in the order the usage lists them.
func commands() []*command {
	return []*command{
		cmdSend(), cmdState(), cmdCreate(), cmdTerminate(), cmdReplay(), cmdLs(), cmdKinds(),
		cmdTail(), cmdDead(), cmdOrch(), cmdTimer(), cmdTop(), cmdRoles(), cmdCompletion(), cmdVersion(),
	}
}
