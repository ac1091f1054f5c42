package node

import (
	"slices"
	"strings"
	"testing"
)

func TestReplySubjectsSetting(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want []string // nil: the default
		err  string
	}{
		{nil, nil, nil, ""},
		{[]string{"--reply-subjects", "none"}, nil, []string{}, ""},
		{nil, map[string]string{"EA_REPLY_SUBJECTS": "_INBOX.>, replies.>"}, []string{"_INBOX.>", "replies.>"}, ""},
		{[]string{"--reply-subjects", "a.*"}, map[string]string{"EA_REPLY_SUBJECTS": "b.>"}, []string{"a.*"}, ""},
		{[]string{"--reply-subjects", "a.>,,b"}, nil, nil, "want comma-separated subject patterns"},
		{[]string{"--reply-subjects", "$KV.>"}, nil, nil, `--reply-subjects: bus: invalid config: reply subject pattern "$KV.>"`},
		{[]string{"--prefix", "acme", "--reply-subjects", "acme.ctl.>"}, nil, nil, `"acme.ctl.>"`},
	}
	for _, tt := range tests {
		cfg, err := parseConfig("ea-node", tt.args, envOf(tt.env))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q %v: %v, want an error containing %q", tt.args, tt.env, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q %v: %v", tt.args, tt.env, err)
		}
		got := cfg.actorOptions(nil, nil).ReplySubjects
		if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("%q %v: ReplySubjects %q, want %q", tt.args, tt.env, got, tt.want)
		}
	}
}
