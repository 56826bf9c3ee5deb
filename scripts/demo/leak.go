// leak: the demo's leaking Go program, built and run by scripts/demo.sh
// inside a memory cgroup with a small limit. After a short pause (so the
// agent has found it), main.cacheForever keeps 1 MiB blocks forever until
// the kernel OOM-kills the program: the agent's OOM capture must name
// main.cacheForever as the owner of nearly all of the heap.
package main

import (
	"os"
	"runtime/pprof"
	"time"
)

var cache [][]byte

//go:noinline
func cacheForever() {
	for {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch it: the limit counts resident pages
		}
		cache = append(cache, b)
		time.Sleep(40 * time.Millisecond)
	}
}

func main() {
	if len(os.Args) > 1000 { // keeps the runtime's heap sampling on
		pprof.WriteHeapProfile(os.Stdout)
	}
	time.Sleep(2 * time.Second)
	cacheForever()
}
