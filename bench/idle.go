// idle.go - an idle Go service for the memory benchmark: it keeps a few
// thousand objects from a handful of call sites alive (so its heap profile
// has buckets to read), references runtime/pprof so MemProfileRate keeps
// its default (a program that never refers to heap profiles has it at 0),
// then sleeps. Prints "ready" on stdout once its heap is built.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"time"
)

var keep [][]byte

//go:noinline
func small(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 64))
	}
}

//go:noinline
func medium(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 4096))
	}
}

//go:noinline
func large(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 256<<10))
	}
}

func main() {
	_ = pprof.Lookup("heap") // keeps heap profiling on (MemProfileRate default)
	small(5000)
	medium(500)
	large(4)
	fmt.Println("ready")
	os.Stdout.Sync()
	for {
		time.Sleep(time.Hour)
	}
}
