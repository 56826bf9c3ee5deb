// nogc.go - a heap that has never been through a GC: all samples are still
// in the runtime's unpublished cycles, and runtime.MemProfile falls back to
// adding every cycle. GC is off from the start; the program allocates,
// signals readiness (argv[2]), and on SIGUSR1 writes its own heap profile to
// argv[1] (the first thing WriteHeapProfile does is read MemProfile, so the
// profile is the state at that moment), then creates argv[2]+".done".
package main

import (
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"
)

var keep [][]byte

//go:noinline
func grow(n, size int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, size))
	}
}

func main() {
	debug.SetGCPercent(-1)
	if len(os.Args) < 3 {
		os.Exit(2)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	keep = make([][]byte, 0, 100000)
	grow(20000, 2000)
	grow(100, 300000)
	if err := os.WriteFile(os.Args[2], []byte("ready\n"), 0o644); err != nil {
		panic(err)
	}
	<-ch
	if err := pprof.WriteHeapProfile(f); err != nil {
		panic(err)
	}
	f.Close()
	if err := os.WriteFile(os.Args[2]+".done", []byte("done\n"), 0o644); err != nil {
		panic(err)
	}
	for {
		time.Sleep(time.Hour)
	}
}
