// Package scripted is a deterministic stand-in for a language model, built
// into the binaries so that their agent kinds can be tried with no model, no
// network and no API key: ea-node and ea-supervisor take it with
// --llm-base-url scripted: ([BaseURL]), and make run gives it to them when
// no model is configured.
//
// It cannot be taken for a real model: every text it answers starts with
// "[scripted model]" ([Tag]) and says it is canned, it reports the model
// name "scripted" ([Model]), and the binaries log a warning at start when
// they use it.
//
// # What it answers
//
// [Script] is the whole of its behaviour, a pure function of the request:
// text that quotes the last user message (streamed word by word, at about
// a hosted model's pace), a call of every tool it is offered and then what
// the tools answered, and for structured output a JSON value that fits the
// requested schema. Its embeddings are [HashEmbedding]: deterministic,
// texts sharing words close.
//
// # The wire
//
// [New] returns the provider of package core/llm, the OpenAI API client
// every real model is asked through, whose requests a [Handler] serves in
// this process ([Transport]: no listener, no port). [Handler] speaks the
// chat-completions and embeddings wire format as the OpenAI API does:
// POST <base>/chat/completions answers a chat.completion object, or with
// "stream": true a text/event-stream of chat.completion.chunk events ended
// by "data: [DONE]"; POST <base>/embeddings answers an embeddings list.
// Errors are HTTP statuses with an {"error": {...}} body; a failure in the
// middle of a stream is a data event carrying "error", as OpenAI sends it.
// Tool calls are answered in a message's "tool_calls" (finish_reason
// "tool_calls"), and when streaming as deltas — each call's index, id and
// name first, then its arguments in pieces. Every answer reports "usage"
// (words count as tokens, [Tokens]); a stream whose request has
// "stream_options": {"include_usage": true} ends with a chunk whose
// "choices" is empty and which carries the usage. The fake server of tests,
// core/llmtest, is this Handler with answers a test scripts.
package scripted
