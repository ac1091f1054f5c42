package main

import (
	"strings"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/conversation"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/examples/threads"
	"github.com/effectors/effectors/node"
)

// The agent kinds of ea-node, hosted when a model is configured.
const (
	// ChatKind is a conversation thread (core/conversation): one message
	// record is one turn with memory.
	ChatKind = "chat"
	// WriterKind runs a task (core/task) streaming the model's answer.
	WriterKind = "writer"
	// AssistantKind runs a task with the tool-call loop over the --tools
	// services; hosted only when --tools names some.
	AssistantKind = "assistant"
)

// Prompts of the agent kinds.
const (
	chatPrompt      = "You are a helpful assistant. Answer briefly."
	writerPrompt    = "You are a writer. Write what you are asked for, and nothing else."
	assistantPrompt = "You are an assistant with tools. Use them when they help, then answer briefly."
)

// agentKinds are ea-node's agent kinds: chat, writer, researcher (the
// worker threads of ea-supervisor's model-driven orchestration "research",
// examples/threads) and, with --tools, assistant.
func agentKinds(a node.Agents) ([]actor.Definition, error) {
	llmOnly := core.Permissions{Services: []core.Service{core.ServiceLLM}}
	chat, err := conversation.Kind(conversation.Config{Name: ChatKind, System: chatPrompt})
	if err != nil {
		return nil, err
	}
	chatDef, err := core.Wrap(a.Services, llmOnly, chat)
	if err != nil {
		return nil, err
	}
	writer, err := core.Wrap(a.Services, llmOnly, task.Kind(WriterKind, task.LLMAgent{System: writerPrompt}))
	if err != nil {
		return nil, err
	}
	out := []actor.Definition{chatDef, writer}
	researcher, err := threads.Worker(a.Services)
	if err != nil {
		return nil, err
	}
	out = append(out, researcher)
	if len(a.Tools) > 0 {
		agent := task.ToolAgent{Names: a.Tools, System: assistantPrompt + " Your tools: " + strings.Join(a.Tools, ", ") + "."}
		def, err := core.Wrap(a.Services, core.Permissions{
			Services: []core.Service{core.ServiceLLM, core.ServiceTools},
			Tools:    a.Tools,
		}, task.Kind(AssistantKind, agent))
		if err != nil {
			return nil, err
		}
		out = append(out, def)
	}
	return out, nil
}
