// split.go - Go workload whose CPU is split 70/30 by work units between
// hot and cold; both call spin, so the stacks are main.main -> main.hot ->
// main.spin and main.main -> main.cold -> main.spin. Runs os.Args[1]
// seconds, in os.Args[2] goroutines (default 1) so a loaded machine still
// gives enough samples.
package main

import (
	"os"
	"strconv"
	"sync"
	"time"
)

var sink uint64

//go:noinline
func spin(units int) uint64 {
	var buf [16]uint64 // a frame of its own, so frame pointers chain through it
	x := sink
	for u := 0; u < units; u++ {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
			buf[i&15] ^= x
		}
	}
	return x ^ buf[int(x&15)]
}

//go:noinline
func hot() uint64 { return spin(70) }

//go:noinline
func cold() uint64 { return spin(30) }

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		secs, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	threads := 1
	if len(os.Args) > 2 {
		threads, _ = strconv.Atoi(os.Args[2])
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var wg sync.WaitGroup
	for t := 1; t < threads; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(end)
		}()
	}
	// The main goroutine works too, straight from main.main.
	for time.Now().Before(end) {
		sink += hot()
		sink += cold()
	}
	wg.Wait()
}

//go:noinline
func work(end time.Time) {
	var s uint64
	for time.Now().Before(end) {
		s += hot()
		s += cold()
	}
	sink += s
}
