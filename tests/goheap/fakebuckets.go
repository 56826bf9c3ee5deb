// fakebuckets.go - a hostile but unprivileged Go program for the
// go_heap.budget test: it lays out N fake memory-profile buckets of DEPTH
// PCs each in its own memory, in the runtime's layout (next, allnext, typ,
// hash, size, nstk, stk[nstk], memRecord{active, future[3]}), linked
// through allnext. The PCs are spread over its own text (TEXT_START,
// TEXT_SIZE), so that they symbolize and are distinct within a bucket and
// across thousands of buckets. The test then points runtime.mbuckets at
// the list through /proc/PID/mem (what the program could do itself with
// go:linkname). The first line of the ready file is "HEAD TAIL" in hex.
//
// With NPCS, every PC is one of NPCS PCs spread over the text, picked at
// random: few distinct PCs, every stack distinct (the sample data is what
// grows then, not the symbol tables).
//
// SIGUSR1 makes it leak 1 MiB at a time until it is killed (the OOM case).
//
// usage: fakebuckets N DEPTH TEXT_START TEXT_SIZE [NPCS] READY
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

var (
	arena []uint64 // kept: the buckets live here (no pointers for the GC to see)
	leak  [][]byte
)

func main() {
	if len(os.Args) < 6 {
		fmt.Fprintln(os.Stderr, "usage: fakebuckets N DEPTH TEXT_START TEXT_SIZE [NPCS] READY")
		os.Exit(2)
	}
	npcs := uint64(0)
	if len(os.Args) > 6 {
		npcs, _ = strconv.ParseUint(os.Args[5], 0, 64)
	}
	ready := os.Args[len(os.Args)-1]
	rnd := uint64(88172645463325252)
	n, _ := strconv.Atoi(os.Args[1])
	depth, _ := strconv.Atoi(os.Args[2])
	text, _ := strconv.ParseUint(os.Args[3], 0, 64)
	size, _ := strconv.ParseUint(os.Args[4], 0, 64)
	words := 6 + depth + 16
	arena = make([]uint64, n*words)
	base := uint64(uintptr(unsafe.Pointer(&arena[0])))
	addr := func(i int) uint64 { return base + uint64(i*words*8) }
	pc := uint64(0)
	for i := 0; i < n; i++ {
		b := arena[i*words : (i+1)*words]
		if i+1 < n {
			b[1] = addr(i + 1) // allnext
		}
		b[2] = 1                 // memProfile
		b[3] = uint64(i) * 2654435761
		b[4] = 64                // size
		b[5] = uint64(depth)     // nstk
		for k := 0; k < depth; k++ {
			if npcs > 0 {
				rnd ^= rnd << 13
				rnd ^= rnd >> 7
				rnd ^= rnd << 17
				b[6+k] = text + (rnd%npcs)*(size/npcs) + 1
				continue
			}
			// odd strides over the text: distinct PCs, most of them
			// inside functions
			pc = (pc + 4099) % size
			b[6+k] = text + pc + 1
		}
		mr := b[6+depth:]
		mr[0] = 1  // active.allocs: published data, one walk
		mr[2] = 64 // active.alloc_bytes
	}
	if err := os.WriteFile(ready, []byte(fmt.Sprintf("%x %x\n", addr(0), addr(n-1))), 0o644); err != nil {
		os.Exit(1)
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	<-usr1
	for {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		leak = append(leak, b)
		time.Sleep(time.Millisecond)
	}
}
