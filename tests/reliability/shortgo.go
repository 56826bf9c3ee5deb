// shortgo: a Go program that allocates a little and exits at once (pid
// reuse and exit-mid-read fodder for the heap tracker).
package main

import (
	"os"
	"runtime"
	"strconv"
)

var keep [][]byte

func main() {
	runtime.MemProfileRate = 512
	n := 200
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 1024+i))
	}
}
