// norate.go - a Go program that references no heap profile at all, so the
// linker turns memory profiling off (runtime.MemProfileRate == 0). It keeps
// allocating from main.leaker (retaining a bounded ring) until killed, and
// signals readiness by creating the file named by its first argument.
package main

import (
	"os"
	"time"
)

var ring [4096][]byte

//go:noinline
func leaker(i int) {
	ring[i%len(ring)] = make([]byte, 8192)
}

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	for i := 0; i < 1000; i++ {
		leaker(i)
	}
	if err := os.WriteFile(os.Args[1], []byte("ready\n"), 0o644); err != nil {
		panic(err)
	}
	for i := 1000; ; i++ {
		leaker(i)
		if i%64 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
