// Command hello prints hello: a main package for proctest's Build tests.
package main

import "fmt"

func main() { fmt.Println("hello") }
