//go:build !unix

package node

// alive cannot tell here: a node started while the previous one stops does
// not wait for it.
func alive(int) bool { return false }
