// many.go - a workload with N distinct heap-profile buckets (N up to 2^20):
// a recursion that takes one of two call sites at each of LEVELS levels
// (2^LEVELS >= N) reaches N distinct stacks, and each leaf retains one
// allocation. Run with PP_MEMPROFILERATE=1 so every allocation makes its
// bucket. Writes its own heap profile to argv[2], then creates argv[3] and
// idles.
package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"time"
)

var keep []*[32]byte

//go:noinline
func leaf() {
	keep = append(keep, new([32]byte))
}

//go:noinline
func walk(bits, depth int) {
	if depth == 0 {
		leaf()
		return
	}
	if bits&1 == 0 {
		walk(bits>>1, depth-1)
	} else {
		walk(bits>>1, depth-1)
	}
}

// setRate applies PP_MEMPROFILERATE: GODEBUG=memprofilerate=N is overwritten
// by the runtime package's own initializer in Go 1.19, so the workloads set
// runtime.MemProfileRate themselves, first thing in main.
func setRate() {
	if v := os.Getenv("PP_MEMPROFILERATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(err)
		}
		runtime.MemProfileRate = n
	}
}

func main() {
	setRate()
	if len(os.Args) < 4 {
		os.Stderr.WriteString("usage: many N PROFILE READYFILE\n")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 || n > 1<<20 {
		os.Exit(2)
	}
	levels := 1
	for 1<<levels < n {
		levels++
	}
	keep = make([]*[32]byte, 0, n)
	for i := 0; i < n; i++ {
		walk(i, levels)
	}
	debug.SetGCPercent(-1)
	runtime.GC()
	runtime.GC()
	f, err := os.Create(os.Args[2])
	if err != nil {
		panic(err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		panic(err)
	}
	f.Close()
	if err := os.WriteFile(os.Args[3], []byte("ready\n"), 0o644); err != nil {
		panic(err)
	}
	for {
		time.Sleep(time.Hour)
	}
}
