// leak: a Go workload for the OOM tests. It prints "ready", waits for a line
// on stdin (so the watcher can track it first), optionally creates many
// distinct memory-profile buckets or deep stacks, then leaks 1 MiB blocks
// from leakyAllocator until the kernel OOM-kills it.
//
//	leak [-buckets N] [-depth D] [-rate R] [-norate] [-churn N] [-slow D] [-straddle]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"
	"unsafe"
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

// runtime.mbuckets: `var mbuckets *bucket` in runtime/mprof.go (Go 1.19:
// the head of the memory-profile bucket list, newest first). Layout as in
// bpf/oom_abi.h: nstk at offset 40, the stack from 48, the memRecord after it.
//
//go:linkname mbuckets runtime.mbuckets
var mbuckets uintptr

const recordSize = 128 // memRecord: active + future[3], 4 x uintptr each

var blocks [400][]byte
var pagemap int
var pmbuf [8]byte

// present reports whether addr's page has a page table entry
// (/proc/self/pagemap bit 63). No allocation: a new bucket would move the head.
func present(addr uintptr) bool {
	n, err := syscall.Pread(pagemap, pmbuf[:], int64(addr/4096)*8)
	if err != nil || n != 8 {
		os.Exit(3)
	}
	return pmbuf[7]&0x80 != 0
}

// straddling: the newest bucket's record crosses into an absent page.
func straddling() bool {
	b := mbuckets
	if b == 0 {
		return false
	}
	nstk := *(*uintptr)(unsafe.Pointer(b + 40))
	rec := b + 48 + nstk*8
	last := rec + recordSize - 1
	return rec/4096 != last/4096 && !present(last)
}

//go:noinline
func straddleBlock(i int) {
	blocks[i] = make([]byte, 1<<20)
}

// written before the search: a conversion later would allocate (a new bucket)
var msgReady, msgNoPagemap, msgNoStraddle, msgSurvived = []byte("ready\n"),
	[]byte("no pagemap\n"), []byte("no straddle\n"), []byte("survived\n")

// straddle (-straddle): the victim is killed while its newest memory-profile
// bucket's counter record runs into a page the process has never touched.
//
// Why this matters: the runtime allocates buckets with persistentalloc, a
// bump allocator over fresh mmap'd memory, and writes a new bucket's header
// and stack at once but its 128-byte memRecord only where mProf_Malloc (one
// of the four 32-byte cycles) and mProf_Flush (at GC) store into it. When
// the record crosses a page boundary, the part past it can stay untouched:
// never faulted in, no page table entry. The runtime reads it as zeros; a
// BPF read cannot fault it in and fails with -EFAULT. The kernel's OOM kill
// can come at exactly such a moment (CI saw it: "no_capture").
//
// It makes new buckets (distinct stacks through step) until the newest one's record straddles a page whose pagemap entry says
// "not present", with the garbage collector off (no mProf_Flush writes).
// It allocates the blocks it will leak beforehand, untouched, so the leak
// itself creates no bucket and no allocator metadata. It prints "ready",
// waits for a line on stdin, makes the straddling bucket, and writes the
// blocks until the memory cgroup OOM-kills it (milliseconds later: before
// a mirror pass of the watcher could read the new buckets).
func straddle() {
	runtime.MemProfileRate = 1
	debug.SetGCPercent(-1)
	fd, err := syscall.Open("/proc/self/pagemap", syscall.O_RDONLY, 0)
	if err != nil {
		os.Stdout.Write(msgNoPagemap)
		os.Exit(2)
	}
	pagemap = fd
	for i := range blocks { // fresh memory from the OS: not written, not resident
		straddleBlock(i)
	}
	line := make([]byte, 16)
	os.Stdout.Write(msgReady)
	os.Stdin.Read(line)
	// after the watcher's first mirror: its reads (process_vm_readv, which
	// faults pages in) must not touch the new buckets before the kill
	found := false
	for p := 0; p < 1<<20 && !found; p++ {
		step(p, 5)
		found = straddling()
	}
	if !found {
		os.Stdout.Write(msgNoStraddle)
		os.Exit(4)
	}
	for _, b := range blocks {
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
	}
	os.Stdout.Write(msgSurvived)
}

func main() {
	nb := flag.Int("buckets", 0, "distinct buckets to create before leaking")
	depth := flag.Int("depth", 0, "extra stack depth of the leak")
	rate := flag.Int("rate", -1, "set runtime.MemProfileRate")
	wait := flag.Bool("wait", true, "wait for a line on stdin before leaking")
	flag.IntVar(&churnEvery, "churn", 0, "a new bucket every N leaked blocks")
	flag.DurationVar(&slow, "slow", 0, "sleep this long per leaked block")
	straddleMode := flag.Bool("straddle", false, "see straddle()")
	flag.Parse()
	if *rate >= 0 {
		runtime.MemProfileRate = *rate
	}
	if len(os.Args) > 1000 { // keeps memory profiling reachable (MemProfileRate != 0)
		pprof.WriteHeapProfile(os.Stdout)
	}
	if *straddleMode {
		straddle()
		return
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
