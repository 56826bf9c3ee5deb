// shaloop.go - Go workload hashing with crypto/sha256 in a loop for
// os.Args[1] seconds in os.Args[2] goroutines (default 1). The amd64
// assembly of sha256.block uses %rbp as a data register, so a frame-pointer
// walk sampled inside it reads SHA-256 state as "return addresses": the
// junk frames the agent must cut off.
package main

import (
	"crypto/sha256"
	"os"
	"strconv"
	"sync"
	"time"
)

var sink byte

//go:noinline
func hashLoop(buf []byte, until time.Time) {
	for time.Now().Before(until) {
		for i := 0; i < 64; i++ {
			s := sha256.Sum256(buf)
			buf[i] ^= s[0]
			sink ^= s[1]
		}
	}
}

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		secs, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	n := 1
	if len(os.Args) > 2 {
		n, _ = strconv.Atoi(os.Args[2])
	}
	until := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			buf := make([]byte, 16384)
			for i := range buf {
				buf[i] = byte(i * (g + 1))
			}
			hashLoop(buf, until)
		}(g)
	}
	wg.Wait()
}
