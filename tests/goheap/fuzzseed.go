// fuzzseed: the Go program whose executable make_fuzz_seeds.py minimizes
// into the fuzz_gobin seeds and the fuzz_buckets symbol fixture. Small on
// purpose; it reads its own memory profile so runtime.MemProfile (one of
// the functions gobin decodes in stripped builds) is linked in, and has an
// inlined allocator so stacks carry inlined frames.
package main

import (
	"os"
	"runtime"
)

var sink [][]byte

func grow(n int) []byte { return make([]byte, n) } // inlined into leak

//go:noinline
func leak(n int) {
	for i := 0; i < n; i++ {
		sink = append(sink, grow(64+i))
	}
}

func main() {
	runtime.MemProfileRate = 1
	leak(16)
	runtime.GC()
	var recs [64]runtime.MemProfileRecord
	n, _ := runtime.MemProfile(recs[:], true)
	if n == 0 {
		os.Exit(1)
	}
}
