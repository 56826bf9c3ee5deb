/*
 * re_probe - agent/base/ppregex.c on a stream of cases, for test_re2_diff.py,
 * which runs Go's regexp (re_probe.go) on the same stream and compares.
 *
 * stdin, one case a line: MODE TAB PATTERN TAB SUBJECT, MODE "F" (relabel:
 * PP_REGEX_FULL) or "U" (targets: unanchored); "\n", "\t", "\\" escaped.
 * stdout, one line a case: ERR (refused), NO, LIMIT, or YES and the byte
 * offsets "a,b" of group 0..N (-1,-1 for a group that did not take part).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppregex.h"

static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && (s[1] == 'n' || s[1] == 't' || s[1] == '\\')) {
			*o++ = s[1] == 'n' ? '\n' : s[1] == 't' ? '\t' : '\\';
			s++;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

int main(void)
{
	static char line[65536];

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		char *pat = strchr(line, '\t'), *subj = pat ? strchr(pat + 1, '\t') : NULL;
		if (!subj) {
			puts("BADLINE");
			continue;
		}
		*pat++ = '\0';
		*subj++ = '\0';
		unescape(pat);
		unescape(subj);
		struct pp_regex *re;
		struct pp_regex_opts ro = { .src = pat, .flags = line[0] == 'F' ? PP_REGEX_FULL : 0 };
		if (pp_regex_new(&ro, &re, NULL)) {
			puts("ERR");
			continue;
		}
		size_t ng = pp_regex_groups(re) + 1;
		ssize_t *m = calloc(2 * ng, sizeof(*m));
		int rc = pp_regex_match(re, subj, strlen(subj), m, ng);
		if (rc < 0) {
			puts("LIMIT");
		} else if (!rc) {
			puts("NO");
		} else {
			fputs("YES", stdout);
			for (size_t i = 0; i < ng; i++)
				printf(" %zd,%zd", m[2 * i], m[2 * i + 1]);
			putchar('\n');
		}
		free(m);
		pp_regex_free(re);
	}
	return 0;
}
