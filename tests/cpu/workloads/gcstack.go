// gcstack.go - Go workload whose CPU goes through the runtime's
// stack-switching and frameless mid-stack functions, while Go's own CPU
// profiler records the same seconds:
//   - garbage collection: gcBgMarkWorker -> runtime.systemstack -> (g0)
//     gcBgMarkWorker.func2 -> gcDrain, and mallocgc -> gcAssistAlloc ->
//     systemstack; Go 1.19 gives systemstack no frame and switches stacks;
//   - write barriers: main.link -> runtime.gcWriteBarrierCX (Go 1.19: a
//     frameless assembly stub that calls gcWriteBarrier).
// Usage: gcstack PROFILE SECONDS. Writes Go's CPU profile to PROFILE on exit
// (after SECONDS, or at SIGINT/SIGTERM).
package main

import (
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

type node struct {
	next *node
	pad  [4]*int
}

var live [64]*node
var stop atomic.Bool

// churn allocates a list: mallocgc, assists, and a live set for the mark
// workers to scan.
//
//go:noinline
func churn(n int) *node {
	var h *node
	for i := 0; i < n; i++ {
		h = &node{next: h}
	}
	return h
}

// link stores pointers into old objects while the GC marks: write barriers.
//
//go:noinline
func link(a, b *node) {
	for p := a; p != nil && b != nil; p, b = p.next, b.next {
		p.pad[0] = new(int)
		p.pad[1] = p.pad[0]
	}
}

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
		case <-time.After(time.Duration(secs * float64(time.Second))):
		}
		stop.Store(true)
	}()
	for i := 0; !stop.Load(); i++ {
		live[i%64] = churn(20000)
		link(live[(i+1)%64], live[i%64])
	}
	pprof.StopCPUProfile()
	f.Close()
}
