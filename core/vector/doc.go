// Package vector is the vector-search service of the agent services: add
// documents, search the top k by cosine similarity. Embeddings come from the
// LLM provider's embeddings endpoint (any core.LLM); documents and their
// vectors are stored durably in a JetStream KV bucket, so every node sees the
// same collection and it survives restarts.
//
// # Layout
//
// Bucket <prefix>_vectors (created on Open), key <collection>.<doc id>, value
// {doc, vector} as msgpack. Search reads the collection's entries and ranks
// them in memory: fine for thousands of documents, not for millions.
//
// # Off when not configured
//
// Vector search is optional: leave core.Services.Vector nil and logic that
// asks for it gets a core.CodeUnavailable error.
package vector
