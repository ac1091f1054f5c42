package cli_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/effectors/effectors/internal/cli"
)

type config struct{ Format string }

func Example() {
	settings := []*cli.Setting[config]{{
		Name: "log-format", Arg: "FORMAT", Def: "text", Usage: "log format: text or json",
		Check: func(c *config, v string) string { return cli.LogFormat(v, &c.Format) },
	}}
	env := map[string]string{"EA_LOG_FORMAT": "JSON"}
	var cfg config
	explicit, err := cli.Parse("ea-demo", settings, nil, func(k string) string { return env[k] }, &cfg)
	fmt.Println(cfg.Format, explicit["log-format"], err)

	_, err = cli.Parse("ea-demo", settings, []string{"--log-format", "xml"}, func(string) string { return "" }, &cfg)
	var b strings.Builder
	fmt.Println(cli.ExitStatus("ea-demo", err, &b))
	fmt.Print(b.String())
	cli.WriteFlags(os.Stdout, settings)
	// Output:
	// json true <nil>
	// 2
	// ea-demo: --log-format "xml": want text or json
	// Run ea-demo -h for the flags.
	//   --log-format FORMAT
	//         log format: text or json
	//         (env EA_LOG_FORMAT; default "text")
}
