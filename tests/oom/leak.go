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

// Distinct stacks: each hex digit of path picks one of 16 functions on the
// way down (two frames per digit), so 5 digits give 1,048,576 stacks within
// the 32 frames Go 1.19 records.
var fns [16]func(int, int)

func init() {
	fns = [16]func(int, int){b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15}
}

//go:noinline
func b0(path, depth int) { step(path, depth) }

//go:noinline
func b1(path, depth int) { step(path, depth) }

//go:noinline
func b2(path, depth int) { step(path, depth) }

//go:noinline
func b3(path, depth int) { step(path, depth) }

//go:noinline
func b4(path, depth int) { step(path, depth) }

//go:noinline
func b5(path, depth int) { step(path, depth) }

//go:noinline
func b6(path, depth int) { step(path, depth) }

//go:noinline
func b7(path, depth int) { step(path, depth) }

//go:noinline
func b8(path, depth int) { step(path, depth) }

//go:noinline
func b9(path, depth int) { step(path, depth) }

//go:noinline
func b10(path, depth int) { step(path, depth) }

//go:noinline
func b11(path, depth int) { step(path, depth) }

//go:noinline
func b12(path, depth int) { step(path, depth) }

//go:noinline
func b13(path, depth int) { step(path, depth) }

//go:noinline
func b14(path, depth int) { step(path, depth) }

//go:noinline
func b15(path, depth int) { step(path, depth) }

//go:noinline
func step(path, depth int) {
	if depth == 0 {
		if path&(1<<30) != 0 {
			small2 = append(small2, new([48]byte))
		} else {
			small = append(small, new([16]byte))
		}
		return
	}
	fns[(path>>(4*(depth-1)))&15](path, depth-1)
}

// makeBuckets creates n distinct buckets: n/2 paths x 2 sizes.
func makeBuckets(n int) {
	digits := 1
	for (1 << (4 * digits)) < (n+1)/2 {
		digits++
	}
	paths := (n + 1) / 2
	for p := 0; p < paths; p++ {
		step(p, digits)
		step(p|1<<30, digits)
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

var churnN = 0
var churnEvery = 0
var slow = time.Duration(0)

// churn makes one new bucket (a stack no earlier allocation had) and
// reports how many it made, so a test can check none is missing.
//
//go:noinline
func churn() {
	step(1<<24|churnN, 5)
	churnN++
	fmt.Printf("churn %d\n", churnN)
}

//go:noinline
func leakyAllocator() {
	for i := 0; ; i++ {
		if churnEvery > 0 && i%churnEvery == 0 {
			churn()
		}
		if slow > 0 {
			time.Sleep(slow)
		}
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
	flag.IntVar(&churnEvery, "churn", 0, "a new bucket every N leaked blocks")
	flag.DurationVar(&slow, "slow", 0, "sleep this long per leaked block")
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
