/*
 * Table-driven tests of relabel_configs. Most cases are Prometheus's own
 * (model/relabel/relabel_test.go) with the outcome it documents; the only
 * intended difference is that pushprof strips "__"-prefixed labels (except
 * __name__) after the rules, which Prometheus does later in scrape.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yaml.h>

#include "config.h"
#include "ppregex.h"
#include "relabel.h"
#include "check.h"

struct tcase {
	const char *name;
	const char *in[16];	/* name, value, ..., NULL */
	const char *rules;	/* YAML list */
	const char *want;	/* sorted "a=1,b=2", or NULL for dropped */
};

static const struct tcase cases[] = {
	{ "replace with ${1}", { "a", "foo", "b", "bar", "c", "baz" },
	  "- {source_labels: [a], regex: 'f(.*)', target_label: d, replacement: 'ch${1}-ch${1}'}",
	  "a=foo,b=bar,c=baz,d=choo-choo" },
	{ "two replaces, separator join", { "a", "foo", "b", "bar", "c", "baz" },
	  "- {source_labels: [a, b], regex: 'f(.*);(.*)r', target_label: a, replacement: 'b${1}${2}m'}\n"
	  "- {source_labels: [c, a], regex: '(b).*b(.*)ba(.*)', target_label: d, replacement: '$1$2$2$3'}",
	  "a=boobam,b=bar,c=baz,d=boooom" },
	{ "drop stops later rules", { "a", "foo" },
	  "- {source_labels: [a], regex: '.*o.*', action: drop}\n"
	  "- {source_labels: [a], regex: 'f(.*)', target_label: d, replacement: 'ch$1-ch$1'}",
	  NULL },
	{ "drop on match", { "a", "foo", "b", "bar" },
	  "- {source_labels: [a], regex: '.*o.*', action: drop}", NULL },
	{ "replace single group", { "a", "abc" },
	  "- {source_labels: [a], regex: '.*(b).*', target_label: d, replacement: '$1'}",
	  "a=abc,d=b" },
	{ "drop no match keeps", { "a", "foo" },
	  "- {source_labels: [a], regex: no-match, action: drop}", "a=foo" },
	{ "drop regex is anchored", { "a", "foo" },
	  "- {source_labels: [a], regex: 'f|o', action: drop}", "a=foo" },
	{ "keep no match drops", { "a", "foo" },
	  "- {source_labels: [a], regex: no-match, action: keep}", NULL },
	{ "keep match", { "a", "foo" },
	  "- {source_labels: [a], regex: 'f.*', action: keep}", "a=foo" },
	{ "replace no match is a no-op", { "a", "boo" },
	  "- {source_labels: [a], regex: f, target_label: b, replacement: bar}", "a=boo" },
	{ "hashmod", { "a", "foo", "b", "bar", "c", "baz" },
	  "- {source_labels: [c], target_label: d, action: hashmod, modulus: 1000}",
	  "a=foo,b=bar,c=baz,d=976" },
	{ "hashmod newline", { "a", "foo\nbar" },
	  "- {source_labels: [a], target_label: b, action: hashmod, modulus: 1000}",
	  "a=foo\nbar,b=734" },
	{ "hashmod joined sources", { "ns", "prod", "app", "api" },
	  "- {source_labels: [ns, app], target_label: shard, action: hashmod, modulus: 8}",
	  "app=api,ns=prod,shard=2" },
	{ "labelmap", { "a", "foo", "b1", "bar", "b2", "baz" },
	  "- {regex: '(b.*)', replacement: 'bar_${1}', action: labelmap}",
	  "a=foo,b1=bar,b2=baz,bar_b1=bar,bar_b2=baz" },
	{ "labelmap __meta then strip", { "a", "foo", "__meta_my_bar", "aaa", "__meta_my_baz", "bbb",
					  "__meta_other", "ccc" },
	  "- {regex: '__meta_(my.*)', replacement: '${1}', action: labelmap}",
	  "a=foo,my_bar=aaa,my_baz=bbb" },
	{ "target from group", { "a", "some-name-value" },
	  "- {source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${2}', target_label: '${1}'}",
	  "a=some-name-value,name=value" },
	{ "missing group gives empty replacement", { "a", "some-name-value" },
	  "- {source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${3}', target_label: '${1}'}",
	  "a=some-name-value" },
	{ "invalid expanded target skipped", { "a", "some-name-0" },
	  "- {source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${1}', target_label: '${3}'}\n"
	  "- {source_labels: [a], regex: 'some-([^-]+)(-[^,]+)', replacement: '${1}', target_label: '${3}'}",
	  "a=some-name-0" },
	{ "non-capturing groups keep numbering", { "__meta_sd_tags", "path:/secret,job:some-job,label:foo=bar" },
	  "- {source_labels: [__meta_sd_tags], regex: '(?:.+,|^)path:(/[^,]+).*', replacement: '${1}', target_label: __metrics_path__}\n"
	  "- {source_labels: [__meta_sd_tags], regex: '(?:.+,|^)job:([^,]+).*', replacement: '${1}', target_label: job}\n"
	  "- {source_labels: [__meta_sd_tags], regex: '(?:.+,|^)label:([^=]+)=([^,]+).*', replacement: '${2}', target_label: '${1}'}\n"
	  "- {source_labels: [__metrics_path__], target_label: path}",
	  "foo=bar,job=some-job,path=/secret" },
	{ "prometheus issue 12283", { "__meta_kubernetes_pod_container_port_name", "foo",
				      "__meta_kubernetes_pod_annotation_XXX_metrics_port", "9091" },
	  "- {regex: '^__meta_kubernetes_pod_container_port_name$', action: labeldrop}\n"
	  "- {source_labels: [__meta_kubernetes_pod_annotation_XXX_metrics_port], regex: '(.+)', replacement: metrics, target_label: __meta_kubernetes_pod_container_port_name}\n"
	  "- {source_labels: [__meta_kubernetes_pod_container_port_name], regex: '^metrics$', action: keep}\n"
	  "- {source_labels: [__meta_kubernetes_pod_container_port_name], target_label: port}",
	  "port=metrics" },
	{ "labelkeep", { "a", "foo", "b1", "bar", "b2", "baz" },
	  "- {regex: '(b.*)', action: labelkeep}", "b1=bar,b2=baz" },
	{ "labeldrop", { "a", "foo", "b1", "bar", "b2", "baz" },
	  "- {regex: '(b.*)', action: labeldrop}", "a=foo" },
	{ "$1x names group 1x (empty) and deletes the target", { "a", "foo", "t", "old" },
	  "- {source_labels: [a], target_label: t, replacement: '$1_x'}", "a=foo" },
	{ "$$ is a literal dollar", { "a", "foo" },
	  "- {source_labels: [a], target_label: t, replacement: '$$1${1}'}", "a=foo,t=$1foo" },
	{ "empty replacement deletes", { "a", "foo", "b", "bar" },
	  "- {source_labels: [a], target_label: b, replacement: ''}", "a=foo" },
	{ "missing source joins as empty, custom separator", { "a", "foo" },
	  "- {source_labels: [a, nope], separator: ',', regex: 'foo,', target_label: b, replacement: yes}",
	  "a=foo,b=yes" },
	{ "default regex on absent label sets a constant", { "a", "foo" },
	  "- {source_labels: [nope], target_label: env, replacement: prod}", "a=foo,env=prod" },
	{ "\\d and \\w", { "lat", "250ms" },
	  "- {source_labels: [lat], regex: '(\\d+)(\\w+)', target_label: unit, replacement: '$2'}",
	  "lat=250ms,unit=ms" },
	{ "bracket with ] and class", { "a", "x]1" },
	  "- {source_labels: [a], regex: '([]x]+)[[:digit:]]', target_label: b}", "a=x]1,b=x]" },
	{ "bounded repeats and quantified groups still work", { "a", "aaab" },
	  "- {source_labels: [a], regex: '(a{2,3})+(b)?', target_label: t, replacement: '$1$2'}",
	  "a=aaab,t=aaab" },
	{ "action is case-insensitive", { "a", "foo" },
	  "- {source_labels: [a], regex: foo, action: DROP}", NULL },
	{ "__name__ survives the strip", { "__name__", "process_cpu", "__tmp", "x", "a", "1" },
	  "[]", "__name__=process_cpu,a=1" },
	/* RE2 syntax that POSIX ERE lacked or read differently */
	{ "(?i) case-insensitive", { "a", "FoO" },
	  "- {source_labels: [a], regex: '(?i)foo', action: keep}", "a=FoO" },
	{ "non-greedy group (Prometheus's address rewrite)", { "addr", "10.0.0.1:80", "port", "9090" },
	  "- {source_labels: [addr, port], regex: '(.+?)(\\:\\d+)?;(\\d+)', target_label: addr, replacement: '$1:$3'}",
	  "addr=10.0.0.1:9090,port=9090" },
	{ "named groups: $name and ${name}", { "a", "shop/web-1" },
	  "- {source_labels: [a], regex: '(?P<ns>[^/]+)/(?<pod>.+)', target_label: '${ns}_pod', replacement: '$pod'}",
	  "a=shop/web-1,shop_pod=web-1" },
	{ "$0 is the whole match", { "a", "xy" },
	  "- {source_labels: [a], regex: 'x(y)', target_label: b, replacement: '<$0>'}", "a=xy,b=<xy>" },
	{ ". matches a newline ((?s) wrap)", { "a", "x\ny" },
	  "- {source_labels: [a], regex: 'x.y', action: keep}", "a=x\ny" },
	{ "$ is the end of the text, not before a final newline", { "a", "foo\n" },
	  "- {source_labels: [a], regex: 'foo$', action: drop}", "a=foo\n" },
	{ "\\s is [\\t\\n\\f\\r ] (no vertical tab)", { "a", "\v" },
	  "- {source_labels: [a], regex: '\\s', action: drop}", "a=\v" },
	{ "\\v is the vertical tab", { "a", "\v" },
	  "- {source_labels: [a], regex: '\\v', action: keep}", "a=\v" },
	{ "\\12 is octal (a newline), not a backreference", { "a", "a\nb" },
	  "- {source_labels: [a], regex: 'a\\12b', action: keep}", "a=a\nb" },
	{ "a { that is no repetition is a literal", { "a", "x{,3}" },
	  "- {source_labels: [a], regex: 'x{,3}', action: keep}", "a=x{,3}" },
	{ "a repeated assertion (RE2 takes x\\b*a; PCRE2 needs a group)", { "a", "xa" },
	  "- {source_labels: [a], regex: 'x\\b*a', action: keep}", "a=xa" },
	{ "a group name may repeat (as in Go); $name is the first", { "a", "xy" },
	  "- {source_labels: [a], regex: '(?P<n>x)(?P<n>y)', target_label: b, replacement: '$n'}",
	  "a=xy,b=x" },
	{ "(?m)^ matches after a newline that ends the value (as in Go)", { "a", "x\n" },
	  "- {source_labels: [a], regex: '(?m)x\\n^', action: keep}", "a=x\n" },
	{ "\\Q...\\E quotes", { "a", "a.b*" },
	  "- {source_labels: [a], regex: '\\Qa.b*\\E', action: keep}", "a=a.b*" },
	{ "(?i) folds Unicode", { "a", "École" },
	  "- {source_labels: [a], regex: '(?i)école', action: keep}", "a=École" },
	{ "\\pL and a UTF-8 character is one character", { "a", "é" },
	  "- {source_labels: [a], regex: '\\pL', action: keep}", "a=é" },
	{ "bytes outside UTF-8 match . one by one and come back as they were", { "a", "\xff\xfe" },
	  "- {source_labels: [a], regex: '(.)(.)', target_label: b, replacement: '$2$1'}",
	  "a=\xff\xfe,b=\xfe\xff" },
	{ "lowercase and uppercase map Unicode letters", { "a", "École-Straß" },
	  "- {source_labels: [a], target_label: lo, action: lowercase}\n"
	  "- {source_labels: [a], target_label: up, action: uppercase}",
	  "a=École-Straß,lo=école-straß,up=ÉCOLE-STRAß" },
	{ "lowercase of an empty value deletes the target", { "a", "", "b", "x" },
	  "- {source_labels: [a], target_label: b, action: lowercase}", "" },
	{ "keepequal with an absent target compares with empty", { "a", "x" },
	  "- {source_labels: [nope], target_label: absent, action: keepequal}", "a=x" },
	{ "hashmod with a 64-bit modulus", { "a", "abc" },
	  "- {source_labels: [a], target_label: h, action: hashmod, modulus: 18446744073709551615}",
	  "a=abc,h=15462616177412505458" },
	{ "regex given as null is the empty regex", { "a", "" , "b", "x"},
	  "- source_labels: [a]\n  regex:\n  action: keep", "b=x" },
	/* docs/labels.md examples */
	{ "keep one namespace (kept)", { "__meta_kubernetes_namespace", "shop",
					 "__meta_kubernetes_pod_name", "web-1" },
	  "- {source_labels: [__meta_kubernetes_namespace], regex: shop, action: keep}\n"
	  "- {source_labels: [__meta_kubernetes_namespace], target_label: namespace}\n"
	  "- {source_labels: [__meta_kubernetes_pod_name], target_label: pod}",
	  "namespace=shop,pod=web-1" },
	{ "keep one namespace (dropped)", { "__meta_kubernetes_namespace", "kube-system",
					    "__meta_kubernetes_pod_name", "coredns-1" },
	  "- {source_labels: [__meta_kubernetes_namespace], regex: shop, action: keep}", NULL },
	{ "copy pod labels, drop one", { "__meta_kubernetes_pod_label_app", "web",
					 "__meta_kubernetes_pod_label_pod_template_hash", "5d4f",
					 "comm", "nginx" },
	  "- {regex: '__meta_kubernetes_pod_label_(.+)', action: labelmap}\n"
	  "- {regex: pod_template_hash, action: labeldrop}",
	  "app=web,comm=nginx" },
	{ "no rules, null document", { "a", "1", "__meta_x", "y" }, "", "a=1" },
	{ "dump escapes YAML line breaks (NEL, LS, PS) and BOM", { "a", "x\xe2\x80\xa8y" },
	  "- {source_labels: [a], regex: \"x\\u2028y|\\u0085|\\u2029|\\uFEFF\", target_label: b, replacement: \"\\tok\"}",
	  "a=x\xe2\x80\xa8y,b=\tok" },
};

/*
 * Rules as a config's relabel_configs (the only way rules are read: the
 * config module hands each entry to relabel_add()). NULL and err set on
 * failure; a block list ("- ...") or a one-line flow value.
 */
static struct relabel *load_rules(const char *yaml, const char *name, struct pp_err *err)
{
	size_t n = strlen(yaml) + 32;
	char *buf = malloc(n);
	struct config c = { 0 };
	struct relabel *r;

	snprintf(buf, n, "relabel_configs:%s%s", yaml[strspn(yaml, " ")] == '-' ? "\n" : " ",
		 yaml);
	if (config_parse(buf, strlen(buf), name, &c, err)) {
		free(buf);
		return NULL;
	}
	free(buf);
	r = c.relabel;
	if (!r)
		relabel_new(&r, NULL);	/* NULL (out of memory) applies no rules */
	c.relabel = NULL;
	config_free(&c);
	return r;
}

static char *render(const struct pp_labels *l)
{
	size_t cap = 1;
	for (size_t i = 0; i < l->n; i++)
		cap += strlen(l->v[i].name) + strlen(l->v[i].value) + 2;
	char *s = calloc(1, cap);
	for (size_t i = 0; i < l->n; i++) {
		if (i)
			strcat(s, ",");
		strcat(s, l->v[i].name);
		strcat(s, "=");
		strcat(s, l->v[i].value);
	}
	return s;
}

static char *dump(const struct relabel *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	relabel_dump(r, f, 2);
	fclose(f);
	return buf;
}

/* dump -> parse -> dump gives the same text and the same behaviour */
static void round_trip(const struct tcase *t, const struct relabel *r)
{
	char *d1 = dump(r);
	struct pp_err err = { 0 };
	struct relabel *r2 = load_rules(d1[0] ? d1 : "[]", "dump", &err);
	char *d2 = r2 ? dump(r2) : strdup("");

	CHECK(r2, "%s: dump does not parse back: %s\n%s", t->name, err.msg, d1);
	CHECK(!strcmp(d1, d2), "%s: dump differs after a round trip:\n%s---\n%s", t->name, d1, d2);
	CHECK(relabel_count(r) == relabel_count(r2), "%s: rule count after round trip", t->name);
	free(d1);
	free(d2);
	relabel_free(r2);
}

static void run_cases(void)
{
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct tcase *t = &cases[c];
		struct pp_labels l = { 0 };
		struct pp_err err = { 0 };
		struct relabel *r = load_rules(t->rules, t->name, &err);
		int rc;

		CHECK(r, "%s: parse: %s", t->name, err.msg);
		if (!r)
			continue;
		round_trip(t, r);
		for (size_t i = 0; t->in[i]; i += 2)
			pp_labels_set(&l, t->in[i], t->in[i + 1]);
		rc = relabel_apply(r, &l);
		if (!t->want) {
			CHECK(rc == 0, "%s: want dropped, got rc=%d", t->name, rc);
		} else {
			pp_labels_sort(&l);
			char *got = render(&l);
			CHECK(rc == 1, "%s: want kept, got rc=%d", t->name, rc);
			CHECK(strcmp(got, t->want) == 0, "%s: got {%s} want {%s}", t->name, got, t->want);
			free(got);
		}
		pp_labels_free(&l);
		relabel_free(r);
	}
}

static const struct {
	const char *yaml, *msg;
} bad[] = {
	{ "- {action: frobnicate}", "unknown relabel action" },
	{ "- {source_labels: [a]}", "requires 'target_label'" },
	{ "- {source_labels: [a], target_label: b, action: hashmod}", "non-zero modulus" },
	{ "- {source_labels: [a], regex: '(', target_label: b}", "rules:2:31: relabel_configs[0].regex: invalid regular expression \"(\": missing closing )" },
	{ "- {source_labels: [a], regex: b, action: labeldrop}", "requires only 'regex'" },
	{ "- {source_labels: [a], regex: 'b***', action: keep}", "invalid nested repetition operator *" },
	{ "- {source_labels: [a], regex: 'b{2}{3}', action: keep}", "invalid nested repetition operator {3}" },
	{ "- {source_labels: [a], regex: 'x*?+', action: keep}", "possessive quantifier" },
	{ "- {source_labels: [a], regex: 'b{1,1001}', action: keep}", "repeat count above 1000" },
	{ "- {source_labels: [a], target_label: '-${3}'}", "invalid 'target_label'" },
	{ "- {source_labels: [a], target_label: '0${3}'}", "invalid 'target_label'" },
	{ "- {source_labels: [a], target_label: b, action: hashmod, modulus: x}", "modulus" },
	{ "- {source_labels: [a], target_label: b, action: hashmod, modulus: '8'}", "quoted" },
	{ "- {source_labels: [a-b], target_label: b}", "rules:2:20: relabel_configs[0].source_labels[0]: \"a-b\" is not a valid label name" },
	{ "- {sourcelabels: [a], target_label: b}", "did you mean 'source_labels'" },
	{ "- {regex: x, replacement: '-x', action: labelmap}", "invalid 'replacement'" },
	{ "- {action: ''}", "relabel action cannot be empty" },
	{ "- {source_labels: [a], action: lowercase}", "requires 'target_label'" },
	{ "- {source_labels: [a], target_label: 'b$1', action: uppercase}", "invalid 'target_label' for uppercase" },
	{ "- {source_labels: [a], target_label: b, replacement: x, action: lowercase}", "'replacement' can not be set" },
	{ "- {source_labels: [a], target_label: b, regex: x, action: keepequal}", "requires only 'source_labels' and `target_label`" },
	{ "- {source_labels: [a], target_label: b, separator: ',', action: dropequal}", "requires only 'source_labels'" },
	/* RE2 refuses these; PCRE2 alone would accept them */
	{ "- {source_labels: [a], regex: '(a)\\1', action: keep}", "backreference \\1 is not supported" },
	{ "- {source_labels: [a], regex: 'a(?=b)', action: keep}", "lookahead (?= is not supported" },
	{ "- {source_labels: [a], regex: 'a(?!b)', action: keep}", "negative lookahead (?! is not supported" },
	{ "- {source_labels: [a], regex: '(?<=a)b', action: keep}", "lookbehind (?<= is not supported" },
	{ "- {source_labels: [a], regex: '(?<!a)b', action: keep}", "lookbehind (?<! is not supported" },
	{ "- {source_labels: [a], regex: '(?>a+)b', action: keep}", "atomic group (?> is not supported" },
	{ "- {source_labels: [a], regex: 'a++', action: keep}", "possessive quantifier" },
	{ "- {source_labels: [a], regex: '(a|(?R))', action: keep}", "recursion (?R) is not supported" },
	{ "- {source_labels: [a], regex: '(a)(?1)', action: keep}", "recursion / subroutine call (?1" },
	{ "- {source_labels: [a], regex: 'a\\C', action: keep}", "\\C (one byte) is not supported" },
	{ "- {source_labels: [a], regex: 'a\\Z', action: keep}", "\\Z (use \\z) is not supported" },
	{ "- {source_labels: [a], regex: '(?P<n>a)(?P=n)', action: keep}", "named backreference (?P=name)" },
	{ "- {source_labels: [a], regex: '(?x)a b', action: keep}", "flag 'x' is not supported" },
	{ "- {source_labels: [a], regex: '(*LIMIT_MATCH=1)a', action: keep}", "(*VERB)" },
	{ "- {source_labels: [a], regex: '(?(1)a|b)', action: keep}", "conditional group" },
	{ "- {source_labels: [a], regex: 'a)', action: keep}", "unexpected )" },
	{ "- {source_labels: [a], regex: '[[:foo:]]', action: keep}", "invalid character class" },
	{ "- {source_labels: [a], regex: '\\p{greek}', action: keep}", "invalid Unicode class" },
	{ "{a: b}", "expected a list of relabel rules" },
	{ "- [a, b]", "expected a mapping" },
	{ "- {a: [", "invalid YAML" },
};

static void run_bad(void)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pp_err err = { 0 };
		struct relabel *r = load_rules(bad[i].yaml, "rules", &err);
		CHECK(!r, "bad[%zu] %s: accepted", i, bad[i].yaml);
		CHECK(strstr(err.msg, bad[i].msg), "bad[%zu] %s: message \"%s\" lacks \"%s\"", i,
		      bad[i].yaml, err.msg, bad[i].msg);
		relabel_free(r);
	}
}

/* ---- tests/relabel/prometheus_cases.yaml ---------------------------------- */

static const char *y_str(yaml_document_t *d, yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		yaml_node_t *v = yaml_document_get_node(d, p->value);
		if (k && v && !strcmp((const char *)k->data.scalar.value, key) &&
		    v->type == YAML_SCALAR_NODE)
			return (const char *)v->data.scalar.value;
	}
	return NULL;
}

/* labels of a mapping node; strip: leave out "__" names but __name__ */
static bool y_labels(yaml_document_t *d, yaml_node_t *map, const char *key, bool strip,
		     struct pp_labels *out)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		yaml_node_t *v = yaml_document_get_node(d, p->value);
		if (!k || !v || strcmp((const char *)k->data.scalar.value, key))
			continue;
		if (v->type != YAML_MAPPING_NODE)
			return false;
		for (yaml_node_pair_t *q = v->data.mapping.pairs.start;
		     q < v->data.mapping.pairs.top; q++) {
			const char *n = (const char *)yaml_document_get_node(d, q->key)->data.scalar.value;
			const char *val =
				(const char *)yaml_document_get_node(d, q->value)->data.scalar.value;
			if (strip && n[0] == '_' && n[1] == '_' && strcmp(n, "__name__"))
				continue;
			pp_labels_set(out, n, val);
		}
		return true;
	}
	return false;
}

static size_t run_data(const char *path)
{
	FILE *f = fopen(path, "rb");
	yaml_parser_t parser;
	yaml_document_t doc;
	size_t ncases = 0;

	CHECK(f, "open %s", path);
	if (!f)
		return 0;
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	CHECK(yaml_parser_load(&parser, &doc), "%s: YAML: %s", path, parser.problem);
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	for (yaml_node_item_t *it = root ? root->data.sequence.items.start : NULL;
	     root && it < root->data.sequence.items.top; it++) {
		yaml_node_t *c = yaml_document_get_node(&doc, *it);
		const char *name = y_str(&doc, c, "name"), *rules = y_str(&doc, c, "rules");
		const char *want_err = y_str(&doc, c, "error"), *drop = y_str(&doc, c, "drop");
		struct pp_labels in = { 0 }, want = { 0 };
		struct pp_err err = { 0 };

		ncases++;
		CHECK(name && rules && y_labels(&doc, c, "input", false, &in), "case %zu: malformed",
		      ncases);
		if (!name || !rules)
			continue;
		bool has_out = y_labels(&doc, c, "output", true, &want);
		CHECK(!!want_err + !!drop + has_out == 1, "%s: one of output, drop, error", name);
		struct relabel *r = load_rules(rules, name, &err);
		if (want_err) {
			CHECK(!r && strstr(err.msg, want_err), "%s: want error \"%s\", got %s", name,
			      want_err, r ? "a valid config" : err.msg);
		} else if (!r) {
			CHECK(0, "%s: %s", name, err.msg);
		} else {
			struct tcase t = { .name = name };
			round_trip(&t, r);
			int rc = relabel_apply(r, &in);
			if (drop) {
				CHECK(rc == 0, "%s: want dropped, got rc=%d", name, rc);
			} else {
				pp_labels_sort(&in);
				pp_labels_sort(&want);
				char *got = render(&in), *exp = render(&want);
				CHECK(rc == 1 && !strcmp(got, exp), "%s: rc=%d got {%s} want {%s}", name,
				      rc, got, exp);
				free(got);
				free(exp);
			}
		}
		relabel_free(r);
		pp_labels_free(&in);
		pp_labels_free(&want);
	}
	if (root)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	fclose(f);
	return ncases;
}

/* RFC 1321 test suite digests (last 8 bytes) plus block-boundary lengths. */
static void run_md5(void)
{
	static const struct {
		const char *s;
		size_t rep;
		uint64_t low;
	} v[] = {
		{ "", 1, 0xe9800998ecf8427eull },
		{ "abc", 1, 0xd6963f7d28e17f72ull },
		{ "abcdefghijklmnopqrstuvwxyz", 1, 0x7dfb496cca67e13bull },
		{ "1234567890", 8, 0xac49da2e2107b67aull },
		{ "a", 55, 0x358552954ad0df65ull },
		{ "a", 56, 0x4c6c197006d17218ull },
		{ "a", 64, 0x5a4a0363793f7367ull },
		{ "a", 119, 0xe75f6dabc90e1613ull },
		{ "a", 120, 0xc75ff505e1f1e537ull },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = strlen(v[i].s) * v[i].rep;
		char *buf = calloc(1, n + 1);
		for (size_t k = 0; k < v[i].rep; k++)
			memcpy(buf + k * strlen(v[i].s), v[i].s, strlen(v[i].s));
		uint64_t got = relabel_hashmod(buf, n, UINT64_MAX);
		CHECK(got == v[i].low, "md5 %zu: got %016" PRIx64 " want %016" PRIx64, i, got,
		      v[i].low);
		free(buf);
	}
}

/*
 * A hostile value cannot make a match unbounded: exponential backtracking
 * stops at the match limit (an error, -E2BIG), quickly; in a rule it counts
 * as no match.
 */
static void run_limits(void)
{
	struct pp_regex *re = NULL;
	struct pp_err rerr = { 0 };
	char val[4096];
	struct timespec t0, t1;

	memset(val, 'a', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	struct pp_regex_opts ro = { .src = "(a|aa)*[bc]", .flags = PP_REGEX_FULL };
	CHECK(pp_regex_new(&ro, &re, &rerr) == 0, "%s", rerr.msg);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = pp_regex_match(re, val, 64, NULL, 0);
	int rc2 = pp_regex_match(re, val, sizeof(val) - 1, NULL, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK(rc == -E2BIG && rc2 == -E2BIG, "match limit: rc=%d rc2=%d", rc, rc2);
	CHECK(s < 2.0, "match limit reached in %.3f s", s);
	pp_regex_free(re);

	struct pp_err err = { 0 };
	struct relabel *r = load_rules("- {source_labels: [a], regex: '(a|aa)*[bc]', action: drop}",
				       "limits", &err);
	struct pp_labels l = { 0 };
	val[200] = '\0';
	pp_labels_set(&l, "a", val);
	CHECK(r && relabel_apply(r, &l) == 1, "a rule that hits the limit does not match: %s",
	      err.msg);
	pp_labels_free(&l);
	relabel_free(r);
}

/* The struct constructor the config module uses. */
static void run_spec(void)
{
	const char *src[] = { "__meta_kubernetes_namespace" };
	struct relabel_rule_spec keep = { .source_labels = src, .nsource_labels = 1,
					  .regex = "prod|staging", .action = "keep" };
	struct relabel_rule_spec ren = { .source_labels = src, .nsource_labels = 1,
					 .target_label = "namespace" };
	struct relabel *r;
	struct pp_err err = { 0 };
	struct pp_labels l = { 0 };

	CHECK(relabel_new(&r, &err) == 0, "relabel_new: %s", err.msg);
	CHECK(relabel_add(r, &keep, &err, NULL) == 0, "spec keep: %s", err.msg);
	CHECK(relabel_add(r, &ren, &err, NULL) == 0, "spec replace: %s", err.msg);
	CHECK(relabel_count(r) == 2, "count");
	pp_labels_set(&l, "__meta_kubernetes_namespace", "staging");
	CHECK(relabel_apply(r, &l) == 1 && l.n == 1 &&
		      strcmp(pp_labels_get(&l, "namespace") ?: "", "staging") == 0,
	      "spec apply keep");
	pp_labels_free(&l);
	memset(&l, 0, sizeof(l));
	pp_labels_set(&l, "__meta_kubernetes_namespace", "prod2");
	CHECK(relabel_apply(r, &l) == 0, "spec apply drop (anchored)");
	pp_labels_free(&l);
	memset(&l, 0, sizeof(l));
	pp_labels_set(&l, "__meta_process_pid", "1");
	CHECK(relabel_apply(NULL, &l) == 1 && l.n == 0, "NULL rules strip __meta");
	pp_labels_free(&l);
	relabel_free(r);
}

int main(int argc, char **argv)
{
	size_t ndata = argc > 1 ? run_data(argv[1]) : 0;

	CHECK(argc < 2 || ndata >= 50, "prometheus_cases.yaml: %zu cases", ndata);
	run_cases();
	run_bad();
	run_md5();
	run_limits();
	run_spec();
	printf("relabel: %zu cases, %zu Prometheus cases (data), %zu rejected configs\n",
	       sizeof(cases) / sizeof(cases[0]), ndata, sizeof(bad) / sizeof(bad[0]));
	return check_done();
}
