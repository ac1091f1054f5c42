package supervisor

// DieBeforeTell makes the supervisor skip the status record of a change
// where fn says, as if it died between the change and the record; call
// before Run.
func (s *Supervisor) DieBeforeTell(fn func(id string, steps int) bool) { s.dieBeforeTell = fn }
