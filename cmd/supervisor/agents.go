package main

import (
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/examples/threads"
	"github.com/effectors/effectors/supervisor"
)

// agentOrchestrations are ea-supervisor's model-driven orchestrations,
// served when a model is configured: "research" (examples/threads), whose
// next step a model chooses and whose workers are the researcher threads an
// ea-node with a model hosts.
func agentOrchestrations(svc *core.Services) ([]supervisor.Definition, error) {
	def, err := threads.Define(svc, threads.Config{})
	if err != nil {
		return nil, err
	}
	return []supervisor.Definition{def}, nil
}
