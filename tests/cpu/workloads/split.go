// split.go - Go workload whose CPU is split 70/30 by work units between
// hot and cold; both call spin, so the stacks are main.main -> main.hot ->
// main.spin and main.main -> main.cold -> main.spin. Runs os.Args[1]
// seconds.
package main

import (
	"os"
	"strconv"
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
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(end) {
		sink += hot()
		sink += cold()
	}
}
