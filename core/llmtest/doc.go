// Package llmtest is a fake OpenAI-compatible server for tests, shaped like
// httptest: [NewServer] starts it on a random loopback port and closes it
// when the test ends ([Start] and [Server.Close] outside a test).
//
// # Wire format
//
// Its wire is core/llm/scripted's Handler, the one the scripted model of the
// shipped binaries answers through (its types, Request and Reply, are
// aliases of that package's). It speaks the real chat-completions and
// embeddings wire format:
// POST <base>/chat/completions answers a chat.completion object, or with
// "stream": true a text/event-stream of chat.completion.chunk events ended by
// "data: [DONE]"; POST <base>/embeddings answers an embeddings list. Errors
// are HTTP statuses with an {"error": {...}} body; a failure in the middle of
// a stream is a data event carrying "error", as OpenAI sends it.
//
// Tool calls are answered as the API does: in a message's "tool_calls"
// (finish_reason "tool_calls"), and when streaming as deltas — each call's
// index, id and name first, then its arguments in pieces. Every answer
// reports "usage" (prompt, completion and total tokens); a stream whose
// request has "stream_options": {"include_usage": true} ends with a chunk
// whose "choices" is empty and which carries the usage, as OpenAI sends it.
// By default tokens are words ([Tokens], [PromptTokens], [CompletionTokens]);
// [Reply].Usage sets them.
//
// # Scripting
//
// Replies come from a queue ([Server.Enqueue]) and, when it is empty, from a
// responder function ([Server.Respond]); with neither, the server answers
// "ok". A [Reply] with Hang streams its chunks and then holds the response
// open until the client closes the connection: [Server.Disconnects] reports
// each such close, so a test can prove cancellation really stopped the HTTP
// stream. [Server.Requests] returns every decoded request.
package llmtest
