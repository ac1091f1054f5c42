package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
)

func cmdCompletion() *command {
	return &command{
		name: "completion", args: "bash|zsh",
		short: "print a shell completion script",
		long: `Print a completion script for bash or zsh:

  source <(ea completion bash)           # bash, this shell
  ea completion zsh > "${fpath[1]}/_ea"  # zsh, then start a new shell`,
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 1, 1); err != nil {
				return err
			}
			switch args[0] {
			case "bash":
				_, err := fmt.Fprint(a.stdout, bashCompletion(commands()))
				return err
			case "zsh":
				_, err := fmt.Fprint(a.stdout, zshCompletion(commands()))
				return err
			}
			return usagef(a.fs.Name(), "shell %q: want bash or zsh", args[0])
		},
	}
}

// words lists, for every command path, what may follow it: subcommands or
// fixed first arguments, and flags.
func words(cmds []*command) map[string][]string {
	global := []string{"--nats", "--prefix", "--timeout", "--json"}
	for _, s := range authSettings() {
		global = append(global, "--"+s.Name)
	}
	out := map[string][]string{}
	var top []string
	var walk func(path string, c *command)
	walk = func(path string, c *command) {
		var ws []string
		for _, s := range c.sub {
			ws = append(ws, s.name)
			walk(path+" "+s.name, s)
		}
		switch c.name {
		case "tail":
			ws = append(ws, "mailbox", "outbox", "effector", "process", "type", "dead")
		case "completion":
			ws = append(ws, "bash", "zsh")
		}
		if c.sub == nil {
			fs := flag.NewFlagSet(path, flag.ContinueOnError)
			if c.flags != nil {
				c.flags(fs)
			}
			fs.VisitAll(func(f *flag.Flag) { ws = append(ws, "--"+f.Name) })
			ws = append(ws, global...)
		}
		sort.Strings(ws)
		out[path] = ws
	}
	for _, c := range cmds {
		top = append(top, c.name)
		walk(c.name, c)
	}
	out[""] = append(top, "help")
	return out
}

func bashCompletion(cmds []*command) string {
	var b strings.Builder
	b.WriteString(`# bash completion for ea; source <(ea completion bash)
_ea() {
    local cur="${COMP_WORDS[COMP_CWORD]}" path="" i w
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${COMP_WORDS[i]}"
        [[ $w == -* ]] && continue
        case "${path:+$path }$w" in
`)
	ws := words(cmds)
	keys := make([]string, 0, len(ws))
	for k := range ws {
		if k != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "        %q) path=%q ;;\n", k, k)
	}
	b.WriteString(`        *) break ;;
        esac
    done
    local words
    case "$path" in
`)
	fmt.Fprintf(&b, "    \"\") words=%q ;;\n", strings.Join(ws[""], " "))
	for _, k := range keys {
		fmt.Fprintf(&b, "    %q) words=%q ;;\n", k, strings.Join(ws[k], " "))
	}
	b.WriteString(`    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _ea ea
`)
	return b.String()
}

func zshCompletion(cmds []*command) string {
	var b strings.Builder
	b.WriteString("#compdef ea\n# zsh completion for ea: ea completion zsh > \"${fpath[1]}/_ea\"\n")
	b.WriteString(`_ea() {
    local path="" w i
    for ((i = 2; i < CURRENT; i++)); do
        w="${words[i]}"
        [[ $w == -* ]] && continue
        case "${path:+$path }$w" in
`)
	ws := words(cmds)
	keys := make([]string, 0, len(ws))
	for k := range ws {
		if k != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "        %q) path=%q ;;\n", k, k)
	}
	b.WriteString(`        *) break ;;
        esac
    done
    local -a opts
    case "$path" in
`)
	fmt.Fprintf(&b, "    \"\") opts=(%s) ;;\n", strings.Join(ws[""], " "))
	for _, k := range keys {
		fmt.Fprintf(&b, "    %q) opts=(%s) ;;\n", k, strings.Join(ws[k], " "))
	}
	b.WriteString(`    esac
    compadd -- $opts
}
compdef _ea ea
`)
	return b.String()
}
