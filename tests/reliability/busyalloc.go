// busyalloc: a Go workload for the reliability tests. It burns CPU in a
// named function and keeps a live heap that changes over time, so both CPU
// windows and heap snapshots have something to report. Writes the file named
// by its last argument once running; runs for the seconds in its first
// argument (0 = until killed).
package main

import (
	"os"
	"runtime"
	"strconv"
	"time"
)

var keep [][]byte
var sink uint64

//go:noinline
func spin(n int) uint64 {
	var x uint64 = 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func grow(i int) {
	b := make([]byte, 4096+(i%7)*1024)
	keep = append(keep, b)
	if len(keep) > 2000 {
		keep = keep[1000:]
	}
}

func main() {
	runtime.MemProfileRate = 4096
	secs, _ := strconv.Atoi(os.Args[1])
	end := time.Now().Add(time.Duration(secs) * time.Second)
	if len(os.Args) > 2 {
		os.WriteFile(os.Args[len(os.Args)-1], []byte("ready"), 0644)
	}
	for i := 0; secs == 0 || time.Now().Before(end); i++ {
		sink += spin(200000)
		grow(i)
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
