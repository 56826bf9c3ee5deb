// leak: a Go workload for the OOM tests. It prints "ready", waits for a line
// on stdin (so the watcher can track it first), optionally creates many
// distinct memory-profile buckets or deep stacks, then leaks 1 MiB blocks
// from leakyAllocator until the kernel OOM-kills it.
//
//	leak [-buckets N] [-depth D] [-rate R] [-norate]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

var keep [][]byte
var small []*[16]byte
var small2 []*[48]byte

// Distinct stacks: each bit of path picks branchA or branchB on the way down.
//
//go:noinline
func branchA(path, depth int) { walk(path, depth) }

//go:noinline
func branchB(path, depth int) { walk(path, depth) }

//go:noinline
func walk(path, depth int) {
	if depth == 0 {
		if path&(1<<30) != 0 {
			small2 = append(small2, new([48]byte))
		} else {
			small = append(small, new([16]byte))
		}
		return
	}
	if path&(1<<(depth-1)) != 0 {
		branchA(path, depth-1)
	} else {
		branchB(path, depth-1)
	}
}

// makeBuckets creates n distinct buckets: n/2 paths x 2 sizes.
func makeBuckets(n int) {
	bits := 1
	for (1 << bits) < (n+1)/2 {
		bits++
	}
	paths := (n + 1) / 2
	for p := 0; p < paths; p++ {
		walk(p, bits)
		walk(p|1<<30, bits)
	}
}

//go:noinline
func deep(d int) {
	if d > 0 {
		deep(d - 1)
		return
	}
	leakyAllocator()
}

//go:noinline
func leakyAllocator() {
	for {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
		if len(keep)%16 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

func main() {
	nb := flag.Int("buckets", 0, "distinct buckets to create before leaking")
	depth := flag.Int("depth", 0, "extra stack depth of the leak")
	rate := flag.Int("rate", -1, "set runtime.MemProfileRate")
	wait := flag.Bool("wait", true, "wait for a line on stdin before leaking")
	flag.Parse()
	if *rate >= 0 {
		runtime.MemProfileRate = *rate
	}
	if len(os.Args) > 1000 { // keeps memory profiling reachable (MemProfileRate != 0)
		pprof.WriteHeapProfile(os.Stdout)
	}
	if *nb > 0 {
		// every allocation must be sampled for one bucket per stack:
		// run with -rate 1 (a rate changed at run time would mis-scale)
		makeBuckets(*nb)
		runtime.GC() // publish the buckets' records
	}
	fmt.Println("ready")
	if *wait {
		bufio.NewReader(os.Stdin).ReadString('\n')
	}
	deep(*depth)
}
