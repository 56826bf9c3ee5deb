// otheralloc: a second Go workload with its own function names, started
// under a reused pid in the hostile test.
package main

import (
	"os"
	"runtime"
	"strconv"
	"time"
)

var hold [][]byte

//go:noinline
func otherAlloc(i int) {
	hold = append(hold, make([]byte, 2048+i%4096))
	if len(hold) > 3000 {
		hold = hold[1500:]
	}
}

func main() {
	runtime.MemProfileRate = 4096
	secs, _ := strconv.Atoi(os.Args[1])
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		otherAlloc(i)
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
