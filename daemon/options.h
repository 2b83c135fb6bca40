/*
 * daemon/options.h — the daemons' settings parser: command-line flags, the config
 * file and --help, all from one table of rows.
 *
 * Owns: the row format, the value kinds (how a value is read, its range, the
 * sentence an error gives), the config-file grammar and the precedence. Each
 * daemon keeps its own table (agent/config.c, coordinator/config.c): a row names
 * a setting once, `{ "long-name", KIND, offsetof(field), "ARG", "help" }`, with
 * an optional short flag and a string buffer size after the help. KIND indexes
 * the daemon's own array of struct rt_opt_kind, so ranges stay with the daemon.
 *
 * Promises:
 * - the long name is also the config-file key; the file is `key = value` lines
 *   with `#` comments and blank lines; an unknown key, a line without `=`, a line
 *   longer than 1022 bytes or a bad value is refused with "FILE:LINE: why";
 * - every --config file is read before any flag, so flags win over the files;
 * - a value is taken whole and in range or refused with "PROG: --name wants
 *   ..., got 'value'"; a field is written only with a valid value;
 * - a boolean flag takes no argument on the command line; in a file it takes
 *   true/yes/1 or false/no/0;
 * - integers are decimal, or hexadecimal after 0x; never negative.
 */
#ifndef RETRACE_DAEMON_OPTIONS_H
#define RETRACE_DAEMON_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

enum rt_opt_base {
	RT_OPT_CONFIG, /* --config FILE: read before the flags; not a file key */
	RT_OPT_FLAG,   /* int: no argument on the command line */
	RT_OPT_STR,    /* char[size]: non-empty, shorter than size */
	RT_OPT_U32,    /* uint32_t */
	RT_OPT_U64,    /* uint64_t */
	RT_OPT_LONG,   /* long, >= 0 */
	RT_OPT_REAL,   /* double in [min, max] (RT_OPT_OPEN_*: bounds excluded), finite */
	RT_OPT_LEVEL,  /* int: a daemon/log.h level name */
	RT_OPT_GID,    /* long: a group name or a numeric gid */
};

#define RT_OPT_OPEN_MIN 1u    /* REAL: min itself is refused */
#define RT_OPT_OPEN_MAX 2u    /* REAL: max itself is refused */
#define RT_OPT_PERCENT 4u     /* REAL: "80%" means 0.8 */

/* A kind of value. `want` completes "--name wants ...". */
struct rt_opt_kind {
	enum rt_opt_base base;
	double min, max;  /* REAL */
	unsigned flags;   /* RT_OPT_OPEN_MIN | RT_OPT_OPEN_MAX | RT_OPT_PERCENT */
	size_t size;      /* STR: the buffer when the row gives none */
	const char *want;
};

/* One setting. */
struct rt_opt {
	const char *name; /* long flag and config-file key */
	int kind;         /* index into the table's kinds */
	size_t off;       /* offsetof the field in the daemon's config struct */
	const char *arg;  /* the value's name in --help (NULL for a flag) */
	const char *help;
	int short_name;   /* 0: none */
	size_t size;      /* STR: sizeof the field (0: the kind's size) */
};

/* Around a table of rows: a row may leave out the optional fields at its end
 * (short_name, size), which -Wextra would otherwise flag. */
#define RT_OPT_ROWS_BEGIN                                                                      \
	_Pragma("GCC diagnostic push")                                                         \
		_Pragma("GCC diagnostic ignored \"-Wmissing-field-initializers\"")
#define RT_OPT_ROWS_END _Pragma("GCC diagnostic pop")

struct rt_opt_table {
	const char *prog;  /* "retrace-agent": the prefix of errors */
	const char *intro; /* --help before the rows */
	const char *outro; /* --help after them (may be NULL) */
	const struct rt_opt *rows;
	size_t nrows;
	const struct rt_opt_kind *kinds;
	size_t nkinds;
};

/*
 * Parse argv into cfg (which holds the defaults): the --config files first, then
 * the flags. Returns 0 to run, 1 when --help was printed to stdout, -1 after a
 * sentence on err. Resets getopt's state (optind) before and leaves it after.
 */
int rt_opt_parse(const struct rt_opt_table *t, void *cfg, int argc, char **argv, FILE *err);

/* Read one config file into cfg; -1 after "FILE:LINE: why" (or why it cannot be
 * read) on err. */
int rt_opt_load(const struct rt_opt_table *t, void *cfg, const char *path, FILE *err);

/* Set one setting by its long name from a string, as the file would. 0, or -1
 * with the reason in why ("wants ..."; "unknown setting"). */
int rt_opt_set(const struct rt_opt_table *t, void *cfg, const char *name, const char *value,
	       char *why, size_t whylen);

/* --help: the intro, one line per row (a short flag column when any row has
 * one), -h/--help, the outro. */
void rt_opt_usage(const struct rt_opt_table *t, FILE *out);

#endif
