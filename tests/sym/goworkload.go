// goworkload: records its own stacks with the Go runtime (the reference
// symbolizer: runtime.CallersFrames expands inlined calls) so the test can
// resolve the same PCs with pushprof's pclntab reader and compare.
//
// Output:
//   MAP <line of /proc/self/maps for the executable>
//   STACK <name>
//   PC <hex return PCs from runtime.Callers, space separated>
//   FRAME <hex Frame.PC>\t<Function>\t<File>\t<Line>     (one per logical frame)
//   READY                      then, with "wait", blocks until stdin closes
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

var sink int

func record(name string) {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	pcs = pcs[:n]
	var b strings.Builder
	fmt.Fprintf(&b, "STACK %s\nPC", name)
	for _, pc := range pcs {
		fmt.Fprintf(&b, " %x", pc)
	}
	b.WriteString("\n")
	fr := runtime.CallersFrames(pcs)
	for {
		f, more := fr.Next()
		fmt.Fprintf(&b, "FRAME %x\t%s\t%s\t%d\n", f.PC, f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
	os.Stdout.WriteString(b.String())
}

//go:noinline
func leafRecord(name string, n int) int {
	record(name)
	return n + 1
}

// Inlined chain: deep3 -> deep2 -> deep1 all inlined into shallow.
func deep3(n int) int { return leafRecord("inline3", n*3) }
func deep2(n int) int { x := deep3(n + 2); return x * 2 }
func deep1(n int) int { y := deep2(n - 1); return y + 7 }

//go:noinline
func shallow(n int) int { return deep1(n) }

type T struct{ v int }

//go:noinline
func (t *T) method(n int) int { return leafRecord("method", t.v+n) }

func small(n int) int { return leafRecord("inline1", n) }

//go:noinline
func recurse(n int) int {
	if n == 0 {
		return leafRecord("recurse", 0)
	}
	return recurse(n-1) + 1
}

//go:noinline
func viaClosure(n int) int {
	f := func(k int) int { return leafRecord("closure", k) }
	return f(n) + 1
}

func burn(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i % 7
	}
	return s
}

func main() {
	maps, _ := os.ReadFile("/proc/self/maps")
	exe, _ := os.Readlink("/proc/self/exe")
	for _, l := range strings.Split(string(maps), "\n") {
		if strings.HasSuffix(l, " "+exe) {
			fmt.Printf("MAP %s\n", l)
		}
	}
	sink += shallow(5)
	sink += (&T{v: 3}).method(4)
	sink += small(9)
	sink += recurse(4)
	sink += viaClosure(2)
	fmt.Println("READY")
	if len(os.Args) > 1 && os.Args[1] == "wait" {
		r := bufio.NewReader(os.Stdin)
		for {
			sink += burn(1000)
			if _, err := r.ReadString('\n'); err != nil {
				break
			}
		}
	}
	fmt.Fprintln(os.Stderr, sink)
}
