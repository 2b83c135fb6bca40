/*
 * daemon/options.c — flags, config file and --help from a daemon's table of rows.
 *
 * One function reads a value for both inputs (set_value): the row says where the
 * field is, the row's kind says how to read it and what range it takes. The
 * getopt_long table (long names, and short ones when a row has one) is built on
 * the stack from the rows on each call. argv is walked twice: the first walk
 * reads only --config files and ignores everything else, the second sets the
 * flags, so a flag wins over a file whatever their order.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define LINE_MAX_BYTES 1024

static const struct rt_opt *find_row(const struct rt_opt_table *t, const char *name)
{
	size_t i;
	for (i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].name, name))
			return &t->rows[i];
	return NULL;
}

static const struct rt_opt_kind *kind_of(const struct rt_opt_table *t, const struct rt_opt *r)
{
	return (size_t)r->kind < t->nkinds ? &t->kinds[r->kind] : NULL;
}

/* Decimal, or hexadecimal after 0x; the whole string; never negative. */
static int read_unsigned(const char *v, unsigned long long *out)
{
	char *end;
	int base = (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) ? 16 : 10;
	if (strchr(v, '-') || strchr(v, '+') || v[0] == ' ' || v[0] == '\t')
		return -1;
	errno = 0;
	*out = strtoull(base == 16 ? v + 2 : v, &end, base);
	return errno || end == v + (base == 16 ? 2 : 0) || *end ? -1 : 0;
}

static int read_real(const struct rt_opt_kind *k, const char *v, double *out)
{
	char *end;
	double x;
	errno = 0;
	x = strtod(v, &end);
	if (end == v || errno)
		return -1;
	if ((k->flags & RT_OPT_PERCENT) && *end == '%' && end[1] == 0) {
		x /= 100.0;
		end++;
	}
	if (*end || !isfinite(x))
		return -1;
	if ((k->flags & RT_OPT_OPEN_MIN) ? !(x > k->min) : !(x >= k->min))
		return -1;
	if ((k->flags & RT_OPT_OPEN_MAX) ? !(x < k->max) : !(x <= k->max))
		return -1;
	*out = x;
	return 0;
}

static int set_value(const struct rt_opt_table *t, const struct rt_opt *r, const char *v, void *cfg,
		     char *why, size_t whylen)
{
	const struct rt_opt_kind *k = kind_of(t, r);
	void *field = (char *)cfg + r->off;
	unsigned long long u;
	if (!k) {
		snprintf(why, whylen, "has no kind (a bug in the table)");
		return -1;
	}
	switch (k->base) {
	case RT_OPT_CONFIG:
		return 0;
	case RT_OPT_FLAG:
		if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
			*(int *)field = 1;
		else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
			*(int *)field = 0;
		else
			break;
		return 0;
	case RT_OPT_STR: {
		size_t size = r->size ? r->size : k->size;
		if (v[0] == 0 || strlen(v) >= size)
			break;
		memcpy(field, v, strlen(v) + 1);
		return 0;
	}
	case RT_OPT_U32:
		if (read_unsigned(v, &u) != 0 || u > UINT32_MAX)
			break;
		*(uint32_t *)field = (uint32_t)u;
		return 0;
	case RT_OPT_U64:
		if (read_unsigned(v, &u) != 0)
			break;
		*(uint64_t *)field = u;
		return 0;
	case RT_OPT_LONG:
		if (read_unsigned(v, &u) != 0 || u > (unsigned long long)LONG_MAX)
			break;
		*(long *)field = (long)u;
		return 0;
	case RT_OPT_REAL: {
		double x;
		if (read_real(k, v, &x) != 0)
			break;
		*(double *)field = x;
		return 0;
	}
	case RT_OPT_LEVEL: {
		int level = rt_log_level_parse(v);
		if (level < 0)
			break;
		*(int *)field = level;
		return 0;
	}
	case RT_OPT_GID: {
		struct group *g = getgrnam(v);
		if (g) {
			*(long *)field = (long)g->gr_gid;
			return 0;
		}
		if (read_unsigned(v, &u) != 0 || u >= UINT32_MAX)
			break;
		*(long *)field = (long)u;
		return 0;
	}
	}
	if (k->base == RT_OPT_STR && k->want == NULL)
		snprintf(why, whylen, "wants a non-empty value shorter than %zu bytes",
			 r->size ? r->size : k->size);
	else
		snprintf(why, whylen, "wants %s", k->want ? k->want : "another value");
	return -1;
}

int rt_opt_set(const struct rt_opt_table *t, void *cfg, const char *name, const char *value,
	       char *why, size_t whylen)
{
	const struct rt_opt *r = find_row(t, name);
	const struct rt_opt_kind *k = r ? kind_of(t, r) : NULL;
	if (!r || (k && k->base == RT_OPT_CONFIG)) {
		snprintf(why, whylen, "unknown setting");
		return -1;
	}
	return set_value(t, r, value, cfg, why, whylen);
}

static char *trim(char *s)
{
	char *e;
	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = 0;
	return s;
}

int rt_opt_load(const struct rt_opt_table *t, void *cfg, const char *path, FILE *err)
{
	FILE *f = fopen(path, "r");
	char line[LINE_MAX_BYTES], why[160];
	unsigned lineno = 0;
	if (!f) {
		fprintf(err, "%s: cannot read config file %s: %s\n", t->prog, path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *s, *eq, *key, *val;
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(err, "%s:%u: line longer than %zu bytes\n", path, lineno,
				sizeof line - 2);
			goto fail;
		}
		s = trim(line);
		if (*s == 0 || *s == '#')
			continue;
		if (!(eq = strchr(s, '='))) {
			fprintf(err, "%s:%u: expected `key = value`, got '%s'\n", path, lineno, s);
			goto fail;
		}
		*eq = 0;
		key = trim(s);
		val = trim(eq + 1);
		if (rt_opt_set(t, cfg, key, val, why, sizeof why) != 0) {
			if (!strcmp(why, "unknown setting"))
				fprintf(err, "%s:%u: unknown setting '%s' (see %s --help)\n", path,
					lineno, key, t->prog);
			else
				fprintf(err, "%s:%u: %s %s, got '%s'\n", path, lineno, key, why, val);
			goto fail;
		}
	}
	fclose(f);
	return 0;
fail:
	fclose(f);
	return -1;
}

static int has_arg(const struct rt_opt_table *t, const struct rt_opt *r)
{
	const struct rt_opt_kind *k = kind_of(t, r);
	return !(k && k->base == RT_OPT_FLAG);
}

static int is_config(const struct rt_opt_table *t, const struct rt_opt *r)
{
	const struct rt_opt_kind *k = kind_of(t, r);
	return k && k->base == RT_OPT_CONFIG;
}

#define OPT_VAL0 1000 /* getopt_long's value for row i is OPT_VAL0 + i */

/* The row getopt_long's answer ch names (a long option's value or a short flag). */
static const struct rt_opt *row_of(const struct rt_opt_table *t, int ch)
{
	size_t i;
	if (ch >= OPT_VAL0 && (size_t)(ch - OPT_VAL0) < t->nrows)
		return &t->rows[ch - OPT_VAL0];
	for (i = 0; i < t->nrows; i++)
		if (ch > 0 && t->rows[i].short_name == ch)
			return &t->rows[i];
	return NULL;
}

int rt_opt_parse(const struct rt_opt_table *t, void *cfg, int argc, char **argv, FILE *err)
{
	struct option longopts[t->nrows + 2];
	char shortopts[3 * t->nrows + 4], why[160];
	size_t i, ns = 0;
	int ch, idx;

	shortopts[ns++] = ':'; /* a missing argument is ':', an unknown option '?' */
	for (i = 0; i < t->nrows; i++) {
		longopts[i].name = t->rows[i].name;
		longopts[i].has_arg = has_arg(t, &t->rows[i]) ? required_argument : no_argument;
		longopts[i].flag = NULL;
		longopts[i].val = OPT_VAL0 + (int)i;
		if (t->rows[i].short_name) {
			shortopts[ns++] = (char)t->rows[i].short_name;
			if (has_arg(t, &t->rows[i]))
				shortopts[ns++] = ':';
		}
	}
	longopts[t->nrows] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[t->nrows + 1] = (struct option){ 0, 0, 0, 0 };
	shortopts[ns++] = 'h';
	shortopts[ns] = 0;

	/* First walk: the --config files only, so that the flags win over them. */
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, &idx)) != -1) {
		const struct rt_opt *r = row_of(t, ch);
		if (r && is_config(t, r) && rt_opt_load(t, cfg, optarg, err) != 0)
			return -1;
	}
	optind = 1;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, &idx)) != -1) {
		const struct rt_opt *r;
		const char *v;
		if (ch == 'h') {
			rt_opt_usage(t, stdout);
			return 1;
		}
		if (ch == ':') {
			fprintf(err, "%s: %s wants a value (try --help)\n", t->prog, argv[optind - 1]);
			return -1;
		}
		if (ch == '?') {
			if (optopt >= OPT_VAL0) /* --flag=value on a flag */
				fprintf(err, "%s: --%s takes no value (try --help)\n", t->prog,
					t->rows[optopt - OPT_VAL0].name);
			else if (optopt)
				fprintf(err, "%s: unknown option '-%c' (try --help)\n", t->prog, optopt);
			else
				fprintf(err, "%s: unknown option '%s' (try --help)\n", t->prog,
					argv[optind - 1]);
			return -1;
		}
		r = row_of(t, ch);
		if (!r || is_config(t, r))
			continue;
		v = has_arg(t, r) ? optarg : "true";
		if (set_value(t, r, v, cfg, why, sizeof why) != 0) {
			fprintf(err, "%s: --%s %s, got '%s'\n", t->prog, r->name, why, v);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(err, "%s: unexpected argument '%s' (try --help)\n", t->prog, argv[optind]);
		return -1;
	}
	return 0;
}

void rt_opt_usage(const struct rt_opt_table *t, FILE *out)
{
	size_t i;
	int shorts = 0;
	for (i = 0; i < t->nrows; i++)
		shorts |= t->rows[i].short_name != 0;
	fputs(t->intro, out);
	for (i = 0; i < t->nrows; i++) {
		const struct rt_opt *r = &t->rows[i];
		char flag[64];
		snprintf(flag, sizeof flag, "--%s%s%s", r->name, r->arg ? " " : "",
			 r->arg ? r->arg : "");
		if (r->short_name)
			fprintf(out, "  -%c, %-26s %s\n", r->short_name, flag, r->help);
		else
			fprintf(out, "  %s%-26s %s\n", shorts ? "    " : "", flag, r->help);
	}
	if (shorts)
		fprintf(out, "  -h, %-26s %s\n", "--help", "this text");
	else
		fprintf(out, "  %-26s %s\n", "-h, --help", "this text");
	if (t->outro)
		fputs(t->outro, out);
}
