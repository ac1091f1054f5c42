package plan

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrNoTag: the answer lacks a tag the protocol needs.
var ErrNoTag = errors.New("plan: answer lacks a required tag")

// ErrBadConfidence: an exit tag's confidence is not a number in [0, 1].
var ErrBadConfidence = errors.New("plan: exit confidence must be a number in [0, 1]")

// between returns the trimmed text between the first <tag> and the next
// </tag>, and whether both were found.
func between(text, tag string) (string, bool) {
	open, closing := "<"+tag+">", "</"+tag+">"
	i := strings.Index(text, open)
	if i < 0 {
		return "", false
	}
	rest := text[i+len(open):]
	j := strings.Index(rest, closing)
	if j < 0 {
		return "", false
	}
	return strings.TrimSpace(rest[:j]), true
}

// ParsePlan returns the plan inside <plan>…</plan>; an answer without one,
// or with an empty one, is ErrNoTag.
func ParsePlan(text string) (string, error) {
	p, ok := between(text, "plan")
	if !ok || p == "" {
		return "", fmt.Errorf("%w: <plan>…</plan> with a non-empty plan", ErrNoTag)
	}
	return p, nil
}

// Verdict is a reviewer's decision.
type Verdict struct {
	Approve  bool
	Feedback string
}

// ParseVerdict reads <verdict>approve</verdict> or <verdict>revise</verdict>
// (case-insensitive) and the optional <feedback>…</feedback>. A revise
// verdict without feedback gets a generic one.
func ParseVerdict(text string) (Verdict, error) {
	v, ok := between(text, "verdict")
	if !ok {
		return Verdict{}, fmt.Errorf("%w: <verdict>approve|revise</verdict>", ErrNoTag)
	}
	fb, _ := between(text, "feedback")
	switch strings.ToLower(v) {
	case "approve", "approved":
		return Verdict{Approve: true, Feedback: fb}, nil
	case "revise", "reject", "rejected":
		if fb == "" {
			fb = "the reviewer asked for a revision without saying why"
		}
		return Verdict{Feedback: fb}, nil
	}
	return Verdict{}, fmt.Errorf("%w: verdict %q is neither approve nor revise", ErrNoTag, v)
}

var exitRE = regexp.MustCompile(`<exit\s+confidence\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s/>]+))\s*/?>`)

// ParseExit reads the confidence of the last <exit confidence="0.8"/> tag
// (double, single or no quotes).
func ParseExit(text string) (float64, error) {
	all := exitRE.FindAllStringSubmatch(text, -1)
	if len(all) == 0 {
		return 0, fmt.Errorf(`%w: <exit confidence="…"/>`, ErrNoTag)
	}
	m := all[len(all)-1]
	raw := m[1] + m[2] + m[3]
	c, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil || c < 0 || c > 1 || c != c {
		return 0, fmt.Errorf("%w: got %q", ErrBadConfidence, raw)
	}
	return c, nil
}

// ParseSummary returns the text inside <summary>…</summary>, or else the
// answer without its exit tag, trimmed.
func ParseSummary(text string) string {
	if s, ok := between(text, "summary"); ok {
		return s
	}
	return strings.TrimSpace(exitRE.ReplaceAllString(text, ""))
}

// Outcome is what the executor reports: a summary and its exit confidence.
type Outcome struct {
	Summary    string  `json:"summary"`
	Confidence float64 `json:"confidence"`
}

// ParseOutcome reads an executor's answer: the summary and the exit
// confidence (required).
func ParseOutcome(text string) (Outcome, error) {
	c, err := ParseExit(text)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Summary: ParseSummary(text), Confidence: c}, nil
}
