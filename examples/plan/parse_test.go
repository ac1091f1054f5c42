package plan_test

import (
	"errors"
	"testing"

	"github.com/effectors/effectors/examples/plan"
)

func TestParsePlan(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"<plan>1. a\n2. b</plan>", "1. a\n2. b", nil},
		{"Sure!\n<plan>\n  step one \n</plan>\nthanks", "step one", nil},
		{"<plan>first</plan><plan>second</plan>", "first", nil},
		{"<plan></plan>", "", plan.ErrNoTag},
		{"<plan>no end", "", plan.ErrNoTag},
		{"no plan at all", "", plan.ErrNoTag},
		{"</plan>backwards<plan>", "", plan.ErrNoTag},
	} {
		got, err := plan.ParsePlan(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParsePlan(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseVerdict(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want plan.Verdict
		err  error
	}{
		{"<verdict>approve</verdict>", plan.Verdict{Approve: true}, nil},
		{"<verdict> APPROVED </verdict><feedback>nice</feedback>", plan.Verdict{Approve: true, Feedback: "nice"}, nil},
		{"<verdict>revise</verdict><feedback>add tests</feedback>", plan.Verdict{Feedback: "add tests"}, nil},
		{"<verdict>reject</verdict>", plan.Verdict{Feedback: "the reviewer asked for a revision without saying why"}, nil},
		{"<verdict>maybe</verdict>", plan.Verdict{}, plan.ErrNoTag},
		{"looks good", plan.Verdict{}, plan.ErrNoTag},
	} {
		got, err := plan.ParseVerdict(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseVerdict(%q) = %+v, %v; want %+v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseExit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  error
	}{
		{`done <exit confidence="0.8"/>`, 0.8, nil},
		{`<exit confidence='1'/>`, 1, nil},
		{`<exit confidence=0.25 />`, 0.25, nil},
		{`<exit  confidence = "0" >`, 0, nil},
		{`<exit confidence="0.1"/> then <exit confidence="0.9"/>`, 0.9, nil},
		{`<exit confidence="1.5"/>`, 0, plan.ErrBadConfidence},
		{`<exit confidence="-0.1"/>`, 0, plan.ErrBadConfidence},
		{`<exit confidence="high"/>`, 0, plan.ErrBadConfidence},
		{`<exit confidence="NaN"/>`, 0, plan.ErrBadConfidence},
		{`<exit/>`, 0, plan.ErrNoTag},
		{`no tag`, 0, plan.ErrNoTag},
	} {
		got, err := plan.ParseExit(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseExit(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseOutcome(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want plan.Outcome
		err  error
	}{
		{"<summary>Wrote the file.</summary>\n<exit confidence=\"0.7\"/>", plan.Outcome{Summary: "Wrote the file.", Confidence: 0.7}, nil},
		{"Did it all.\n<exit confidence=\"0.95\"/>", plan.Outcome{Summary: "Did it all.", Confidence: 0.95}, nil},
		{"<summary>no exit</summary>", plan.Outcome{}, plan.ErrNoTag},
	} {
		got, err := plan.ParseOutcome(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseOutcome(%q) = %+v, %v; want %+v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
