// shop: the demo's Go service, built and run by scripts/demo.sh. Its profile
// is known in advance, so the demo shows that the agent sees what is there:
//
//   - CPU: about 70 % pricing orders (main.priceOrders, which hashes every
//     order with crypto/sha256) and 30 % rendering reports
//     (main.renderReport: strconv and strings.Builder).
//   - Heap: a 48 MiB product catalog (main.loadCatalog) and 12 MiB of
//     sessions (main.openSessions), held for the whole run.
//
// usage: shop SECONDS
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// threadCPU is the CPU time of the calling OS thread
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID)).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

type product struct {
	name  string
	price int64
	blob  [96]byte
}

type session struct {
	user string
	cart [4000]byte
}

var catalog []*product
var sessions []*session
var sink uint64

//go:noinline
func loadCatalog() {
	for i := 0; i < 48<<20/128; i++ { // 48 MiB in 128-byte objects
		catalog = append(catalog, &product{name: "p" + strconv.Itoa(i), price: int64(i)})
	}
}

//go:noinline
func openSessions() {
	for i := 0; i < 12<<20/4096; i++ { // 12 MiB in 4 KiB objects
		sessions = append(sessions, &session{user: "u" + strconv.Itoa(i)})
	}
}

//go:noinline
func priceOrders(n int) {
	var order [512]byte
	for i := 0; i < n; i++ {
		order[i%len(order)]++
		h := sha256.Sum256(order[:])
		sink += uint64(h[0])
	}
}

//go:noinline
func renderReport(n int) {
	for i := 0; i < n; i++ {
		var b strings.Builder
		for j := 0; j < 40; j++ {
			b.WriteString(catalog[(i*40+j)%len(catalog)].name)
			b.WriteString(strconv.FormatInt(int64(i*j), 10))
		}
		sink += uint64(b.Len())
	}
}

func main() {
	secs, _ := strconv.Atoi(os.Args[1])
	if len(os.Args) > 1000 { // a service that can write its own heap profile:
		pprof.WriteHeapProfile(os.Stdout) // keeps the runtime's heap sampling on
	}
	loadCatalog()
	openSessions()
	fmt.Println("ready")
	// Of every 100 ms of this thread's CPU time, 70 go to pricing orders
	// and 30 to rendering reports. CPU time, not wall time: on a busy
	// machine the thread is descheduled at random, which would skew a
	// wall-clock split. GC assists run on this thread and count where they
	// happen. 100 ms, not 10: a cycle as long as the sampling period (10 ms
	// at 99 Hz) locks onto the sampler's phase and biases the split.
	runtime.LockOSThread()
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(end) {
		t := threadCPU()
		for threadCPU()-t < 70*time.Millisecond {
			priceOrders(50)
		}
		t = threadCPU()
		for threadCPU()-t < 30*time.Millisecond {
			renderReport(5)
		}
	}
}
