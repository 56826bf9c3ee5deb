// re_probe.go - Go's regexp (what Prometheus runs) on the case stream of
// re_probe.c, same output; "F" cases are wrapped as Prometheus 3 wraps a
// relabel regex, ^(?s:PATTERN)$.
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

func unescape(s string) string {
	r := strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t")
	return r.Replace(s)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 65536), 65536)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.SplitN(in.Text(), "\t", 3)
		if len(f) != 3 {
			fmt.Fprintln(out, "BADLINE")
			continue
		}
		p := unescape(f[1])
		if f[0] == "F" {
			p = "^(?s:" + p + ")$"
		}
		re, err := regexp.Compile(p)
		if err != nil {
			fmt.Fprintln(out, "ERR")
			continue
		}
		m := re.FindStringSubmatchIndex(unescape(f[2]))
		if m == nil {
			fmt.Fprintln(out, "NO")
			continue
		}
		var b strings.Builder
		b.WriteString("YES")
		for i := 0; i < len(m); i += 2 {
			fmt.Fprintf(&b, " %d,%d", m[i], m[i+1])
		}
		fmt.Fprintln(out, b.String())
	}
}
