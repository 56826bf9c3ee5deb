// edges.go - Go workload whose hot leaf, main.step, is a small function
// with a frame called at a very high rate: a good share of its samples
// land in its prologue (stack check, frame set-up) and epilogue, where
// %rbp is still the caller's frame and a plain frame-pointer walk skips
// the caller. main.edgeA calls it 7 times per round, main.edgeB 3 times
// (a 70/30 split by caller). Go's own CPU profiler records the same
// seconds. Usage: edges PROFILE SECONDS [GOROUTINES]; writes Go's CPU
// profile to PROFILE on exit (after SECONDS, or at SIGINT/SIGTERM).
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

var sink uint64

// step has locals that escape into an indexed array, so it keeps a frame
// (and with it a prologue and an epilogue); it is kept small so that they
// are a large part of it.
//
//go:noinline
func step(x uint64) uint64 {
	var buf [4]uint64
	buf[x&3] = x
	return buf[(x>>2)&3] + x*0x9e3779b97f4a7c15
}

//go:noinline
func edgeA(n int) uint64 {
	var h uint64
	for i := 0; i < 7*n; i++ {
		h += step(h + uint64(i))
	}
	return h
}

//go:noinline
func edgeB(n int) uint64 {
	var h uint64
	for i := 0; i < 3*n; i++ {
		h += step(h ^ uint64(i))
	}
	return h
}

func main() {
	if len(os.Args) < 3 {
		os.Stderr.WriteString("usage: edges PROFILE SECONDS [GOROUTINES]\n")
		os.Exit(2)
	}
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	threads := 1
	if len(os.Args) > 3 {
		threads, _ = strconv.Atoi(os.Args[3])
	}
	var stop int32
	for t := 0; t < threads; t++ {
		go func() {
			var s uint64
			for atomic.LoadInt32(&stop) == 0 {
				s += edgeA(1000)
				s += edgeB(1000)
			}
			atomic.AddUint64(&sink, s)
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case <-time.After(time.Duration(secs * float64(time.Second))):
	}
	atomic.StoreInt32(&stop, 1)
	pprof.StopCPUProfile()
	f.Close()
}
