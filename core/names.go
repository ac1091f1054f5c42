package core

import "regexp"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkName validates a pipeline or tool name: [A-Za-z0-9_-]{1,64}, the set
// OpenAI-compatible APIs accept for function names.
func checkName(op, what, name string) error {
	if !nameRE.MatchString(name) {
		return Errorf(CodeInvalid, op, "%s name %q must match [A-Za-z0-9_-]{1,64}", what, name)
	}
	return nil
}
