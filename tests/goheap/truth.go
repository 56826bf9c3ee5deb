// truth.go - ground-truth workload for pushprof's Go heap snapshots.
//
// Retains memory from several distinct functions (one recursing 25 deep,
// one through an inlined helper), churns garbage from another, stops the
// GC, collects twice, writes its own heap profile with
// pprof.WriteHeapProfile and then idles without allocating. Readiness is
// signalled by creating the file named by the second argument.
package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"time"
)

type node struct {
	next *node
	pad  [200]byte
}

var (
	keepBytes [][]byte
	keepNodes []*node
	keepMaps  []map[int]int
	sink      []byte
)

//go:noinline
func retainSmall(n int) {
	for i := 0; i < n; i++ {
		keepBytes = append(keepBytes, make([]byte, 1000))
	}
}

//go:noinline
func retainLarge(n int) {
	for i := 0; i < n; i++ {
		keepBytes = append(keepBytes, make([]byte, 70000))
	}
}

//go:noinline
func deepRetain(depth, n int) {
	if depth > 0 {
		deepRetain(depth-1, n)
		return
	}
	for i := 0; i < n; i++ {
		keepNodes = append(keepNodes, &node{})
	}
}

// newMap is small enough to be inlined into retainMaps.
func newMap(k int) map[int]int {
	m := make(map[int]int, 64)
	m[k] = k
	return m
}

//go:noinline
func retainMaps(n int) {
	for i := 0; i < n; i++ {
		keepMaps = append(keepMaps, newMap(i))
	}
}

//go:noinline
func churn(n int) {
	for i := 0; i < n; i++ {
		sink = make([]byte, 3000+i%7*512)
	}
	sink = nil
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
	if len(os.Args) < 3 {
		os.Stderr.WriteString("usage: truth PROFILE READYFILE\n")
		os.Exit(2)
	}
	retainSmall(20000)
	churn(30000)
	retainLarge(300)
	deepRetain(25, 30000)
	retainMaps(3000)
	churn(10000)

	debug.SetGCPercent(-1)
	runtime.GC()
	runtime.GC()
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		panic(err)
	}
	f.Close()
	if err := os.WriteFile(os.Args[2], []byte("ready\n"), 0o644); err != nil {
		panic(err)
	}
	for {
		time.Sleep(time.Hour)
	}
}
