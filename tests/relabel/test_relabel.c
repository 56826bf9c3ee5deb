/*
 * Table-driven tests of relabel_configs. Most cases are Prometheus's own
 * (model/relabel/relabel_test.go) with the outcome it documents; the only
 * intended difference is that pushprof strips "__"-prefixed labels (except
 * __name__) after the rules, which Prometheus does later in scrape.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relabel.h"

static int failures;

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			failures++;                                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
		}                                                                          \
	} while (0)

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
	struct relabel *r2 = relabel_new();
	struct pp_err err = { 0 };
	int rc = relabel_parse_yaml(r2, d1, strlen(d1), "dump", &err);
	char *d2 = dump(r2);

	CHECK(rc == 0, "%s: dump does not parse back: %s\n%s", t->name, err.msg, d1);
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
		struct relabel *r = relabel_new();
		struct pp_labels l = { 0 };
		struct pp_err err = { 0 };
		int rc = relabel_parse_yaml(r, t->rules, strlen(t->rules), t->name, &err);

		CHECK(rc == 0, "%s: parse: %s", t->name, err.msg);
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
	{ "- {source_labels: [a], target_label: b, action: hashmod}", "non-zero 'modulus'" },
	{ "- {source_labels: [a], regex: '(', target_label: b}", "regex \"(\"" },
	{ "- {source_labels: [a], regex: '(?i)foo', action: keep}", "not supported" },
	{ "- {source_labels: [a], regex: b, action: labeldrop}", "requires only 'regex'" },
	{ "- {source_labels: [a], regex: 'b***', action: keep}", "bad repetition operator" },
	{ "- {source_labels: [a], regex: 'b{2}{3}', action: keep}", "bad repetition operator" },
	{ "- {source_labels: [a], regex: 'x*?', action: keep}", "bad repetition operator" },
	{ "- {source_labels: [a], regex: 'b{1,1001}', action: keep}", "above 1000" },
	{ "- {source_labels: [a], target_label: '-${3}'}", "invalid 'target_label'" },
	{ "- {source_labels: [a], target_label: '0${3}'}", "invalid 'target_label'" },
	{ "- {source_labels: [a], target_label: b, action: hashmod, modulus: x}", "modulus" },
	{ "- {source_labels: [a-b], target_label: b}", "not a valid label name" },
	{ "- {sourcelabels: [a], target_label: b}", "unknown relabel key" },
	{ "- {regex: x, replacement: '-x', action: labelmap}", "invalid 'replacement'" },
	{ "{a: b}", "expected a list" },
	{ "- [a, b]", "expected a mapping" },
	{ "- {a: [", "rules:2:1: did not find expected node content" },
};

static void run_bad(void)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct relabel *r = relabel_new();
		struct pp_err err = { 0 };
		int rc = relabel_parse_yaml(r, bad[i].yaml, strlen(bad[i].yaml), "rules", &err);
		CHECK(rc < 0, "bad[%zu] %s: accepted", i, bad[i].yaml);
		CHECK(strstr(err.msg, bad[i].msg), "bad[%zu] %s: message \"%s\" lacks \"%s\"", i,
		      bad[i].yaml, err.msg, bad[i].msg);
		CHECK(relabel_count(r) == 0, "bad[%zu]: rule kept", i);
		relabel_free(r);
	}
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

/* The struct constructor the config module uses. */
static void run_spec(void)
{
	const char *src[] = { "__meta_kubernetes_namespace" };
	struct relabel_rule_spec keep = { .source_labels = src, .nsource_labels = 1,
					  .regex = "prod|staging", .action = "keep" };
	struct relabel_rule_spec ren = { .source_labels = src, .nsource_labels = 1,
					 .target_label = "namespace" };
	struct relabel *r = relabel_new();
	struct pp_err err = { 0 };
	struct pp_labels l = { 0 };

	CHECK(relabel_add(r, &keep, &err) == 0, "spec keep: %s", err.msg);
	CHECK(relabel_add(r, &ren, &err) == 0, "spec replace: %s", err.msg);
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

int main(void)
{
	run_cases();
	run_bad();
	run_md5();
	run_spec();
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("relabel: %zu cases, %zu rejected configs, all ok\n",
	       sizeof(cases) / sizeof(cases[0]), sizeof(bad) / sizeof(bad[0]));
	return 0;
}
