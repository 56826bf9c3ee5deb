// leak_norate: leaks like leak.go but never references runtime/pprof, so
// the linker leaves runtime.MemProfileRate at 0: no buckets at all.
package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

var keep [][]byte

//go:noinline
func leakyNoRate() {
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
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	leakyNoRate()
}
