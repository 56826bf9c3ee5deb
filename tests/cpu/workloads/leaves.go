// leaves.go - Go workload whose CPU goes to frameless leaves (functions
// with a zero-size frame, hence no saved frame pointer), each called from
// named functions, while Go's own CPU profiler records the same seconds:
//   main.copyBig  -> runtime.memmove              (a large copy)
//   main.clearBig -> runtime.memclrNoHeapPointers (a clearing loop)
//   main.hashBig  -> crypto/sha256.Sum256 -> ... -> crypto/sha256.block
//   main.hotA / main.hotB -> main.mix             (a compiled frameless leaf,
//                                                  70/30 by work units)
//   main.readBig  -> syscall.Read -> ... -> runtime/internal/syscall.Syscall6
//                                                 (assembly, frameless: reads
//                                                  of /dev/zero, time in the
//                                                  kernel under it)
// Usage: leaves PROFILE SECONDS [GOROUTINES]. Writes Go's CPU profile to
// PROFILE on exit (after SECONDS, or at SIGINT/SIGTERM).
package main

import (
	"crypto/sha256"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

var sink uint64

// mix is a leaf without locals: the compiler gives it no frame, so it
// never saves %rbp (it must stay that way for the test to mean anything).
//
//go:noinline
func mix(b []byte, h uint64) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h ^= h << 13
		h ^= h >> 7
		h ^= h << 17
	}
	return h
}

//go:noinline
func hotA(b []byte) uint64 {
	var h uint64
	for i := 0; i < 7; i++ {
		h += mix(b, uint64(i))
	}
	return h
}

//go:noinline
func hotB(b []byte) uint64 {
	var h uint64
	for i := 0; i < 3; i++ {
		h += mix(b, uint64(i))
	}
	return h
}

//go:noinline
func copyBig(dst, src []byte) {
	for i := 0; i < 4; i++ {
		copy(dst, src)
	}
}

//go:noinline
func clearBig(b []byte) {
	for i := 0; i < 4; i++ {
		for j := range b {
			b[j] = 0
		}
	}
}

//go:noinline
func hashBig(b []byte) uint64 {
	var s uint64
	for i := 0; i < 4; i++ {
		d := sha256.Sum256(b)
		s += uint64(d[0])
	}
	return s
}

//go:noinline
func readBig(fd int, b []byte) {
	for i := 0; i < 6; i++ {
		syscall.Read(fd, b)
	}
}

type bufs struct {
	small, a, b, c, h, r []byte
	zero                 int
}

func newBufs() *bufs {
	small := make([]byte, 32<<10)
	for i := range small {
		small[i] = byte(i * 7)
	}
	zero, err := syscall.Open("/dev/zero", syscall.O_RDONLY, 0)
	if err != nil {
		panic(err)
	}
	return &bufs{small, make([]byte, 1<<20), make([]byte, 1<<20), make([]byte, 1<<20),
		make([]byte, 64<<10), make([]byte, 1<<20), zero}
}

// One round: about a quarter of the time in each leaf family.
func round(x *bufs) uint64 {
	s := hotA(x.small)
	s += hotB(x.small)
	copyBig(x.a, x.b)
	clearBig(x.c)
	s += hashBig(x.h)
	readBig(x.zero, x.r)
	return s
}

var stop atomic.Bool

//go:noinline
func worker(done chan<- uint64) {
	x := newBufs()
	var s uint64
	for !stop.Load() {
		s += round(x)
	}
	done <- s
}

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	n := 1
	if len(os.Args) > 3 {
		n, _ = strconv.Atoi(os.Args[3])
	}
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
	done := make(chan uint64, n)
	for i := 1; i < n; i++ {
		go worker(done)
	}
	// The main goroutine works too, straight from main.main, so that
	// main.main -> main.hotA -> main.mix is a whole chain.
	x := newBufs()
	for !stop.Load() {
		sink += hotA(x.small)
		sink += hotB(x.small)
		copyBig(x.a, x.b)
		clearBig(x.c)
		sink += hashBig(x.h)
		readBig(x.zero, x.r)
	}
	for i := 1; i < n; i++ {
		sink += <-done
	}
	pprof.StopCPUProfile()
	f.Close()
}
