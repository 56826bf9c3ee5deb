// helmrender renders a Helm v2 chart the way `helm template` does, for the
// subset of Helm that pushprof's chart uses: Go text/template with sprig
// (the library Helm uses, Debian's golang-github-masterminds-sprig-dev) plus
// Helm's include, tpl, required, toYaml, fromYaml and toJson, the .Chart,
// .Release and .Values objects, values files merged over values.yaml.
// Helm itself is not packaged in Debian 12.
//
//	helmrender -chart DIR -name RELEASE -namespace NS [-f values.yaml]...
//
// Prints every rendered manifest as "---\n# Source: templates/x.yaml\n...".
// NOTES.txt is rendered (so errors in it fail) but not printed.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(s string) error { *f = append(*f, s); return nil }

func loadYAML(path string) (map[string]interface{}, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// mergeValues: src over dst, maps merged key by key, null deletes (as Helm).
func mergeValues(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = mergeValues(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	enc.Close()
	return strings.TrimSuffix(buf.String(), "\n")
}

func main() {
	chart := flag.String("chart", "", "chart directory")
	name := flag.String("name", "release", "release name")
	ns := flag.String("namespace", "default", "release namespace")
	var files fileList
	flag.Var(&files, "f", "values file (repeatable, later wins)")
	flag.Parse()
	if *chart == "" {
		fmt.Fprintln(os.Stderr, "helmrender: -chart is required")
		os.Exit(2)
	}
	if err := render(*chart, *name, *ns, files); err != nil {
		fmt.Fprintln(os.Stderr, "helmrender:", err)
		os.Exit(1)
	}
}

func render(chartDir, name, ns string, files []string) error {
	meta, err := loadYAML(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	if meta["apiVersion"] != "v2" {
		return fmt.Errorf("Chart.yaml: apiVersion %v, want v2", meta["apiVersion"])
	}
	values, err := loadYAML(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		o, err := loadYAML(f)
		if err != nil {
			return err
		}
		values = mergeValues(values, o)
	}
	top := map[string]interface{}{
		"Chart": map[string]interface{}{
			"Name": meta["name"], "Version": meta["version"],
			"AppVersion": meta["appVersion"], "Description": meta["description"],
		},
		"Release": map[string]interface{}{
			"Name": name, "Namespace": ns, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Values": values,
	}

	t := template.New("chart").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	funcs["include"] = func(n string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := t.ExecuteTemplate(&buf, n, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(s string, data interface{}) (string, error) {
		tt, err := t.Clone()
		if err != nil {
			return "", err
		}
		tt, err = tt.New("tpl").Parse(s)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = tt.Execute(&buf, data)
		return buf.String(), err
	}
	t.Funcs(funcs)

	var names []string
	err = filepath.Walk(filepath.Join(chartDir, "templates"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := t.New(rel).Parse(string(b)); err != nil {
			return err
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		base := filepath.Base(n)
		if strings.HasPrefix(base, "_") {
			continue
		}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, n, top); err != nil {
			return err
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" || strings.TrimSpace(out) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s\n%s\n", n, strings.TrimSpace(out))
	}
	return nil
}
