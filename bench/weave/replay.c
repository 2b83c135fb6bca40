/* bench/weave/replay.c — the weaver again on the inputs the running coordinator
 * saw, with other options: what a change of the library would have done on the
 * real app's data, without running the app again (bench/weave/why.py --replay
 * writes the input).
 *
 *   weave_replay FILE [VARIANT ...]
 *
 * A VARIANT is a comma-separated list of options changed from the library's
 * defaults: window=N iterations=N skip_nats=X max_candidates=N components=N
 * skew_ns=N order_weight=X local_k=N use_conn=0|1; "default" (or none given) is the
 * defaults as they are.
 * Every variant weaves the same batches in the same run, so a model change is
 * compared old against new on identical inputs, free of the machine's noise.
 *
 * FILE: per batch a line "B", then "c START END TRUTH OURS [CONN]" per call (TRUTH:
 * the index among the batch's roots of the root it caused, -1 if not among them) and
 * "s START END [CONN]" per root; CONN, in hex, the connection id (0 or absent: none). Prints one line `bench weave replay ...`: the share of
 * all calls with a known root linked right (and of ours, the triggered hops),
 * FCFS on the same input, the CPU time; one line per variant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weave.h"

struct batch {
	rt_weave_span *c, *s;
	long *truth;
	int *ours;
	size_t nc, ns, capc, capt, capo, caps;
};

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 256;
	p = realloc(p, *cap * size);
	if (!p) {
		fprintf(stderr, "weave-replay: out of memory\n");
		exit(1);
	}
	return p;
}

/* Apply "k=v,k=v" to o; 0, or -1 on an unknown key. */
static int parse_variant(rt_weave_opts *o, const char *spec)
{
	char buf[512], *save = NULL, *kv;
	rt_weave_opts_default(o);
	if (!strcmp(spec, "default"))
		return 0;
	snprintf(buf, sizeof buf, "%s", spec);
	for (kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *v = strchr(kv, '=');
		if (!v)
			return -1;
		*v++ = 0;
		if (!strcmp(kv, "window"))
			o->window = (unsigned)atoi(v);
		else if (!strcmp(kv, "iterations"))
			o->iterations = (unsigned)atoi(v);
		else if (!strcmp(kv, "skip_nats"))
			o->skip_nats = atof(v);
		else if (!strcmp(kv, "max_candidates"))
			o->max_candidates = (unsigned)atoi(v);
		else if (!strcmp(kv, "components"))
			o->components = (unsigned)atoi(v);
		else if (!strcmp(kv, "skew_ns"))
			o->skew_ns = atoll(v);
		else if (!strcmp(kv, "local_k"))
			o->local_k = (unsigned)atoi(v);
		else if (!strcmp(kv, "order_weight"))
			o->order_weight = atof(v);
		else if (!strcmp(kv, "use_conn"))
			o->use_conn = atoi(v) != 0;
		else
			return -1;
	}
	return 0;
}

static int run_variant(const char *spec, const struct batch *b, size_t nb, FILE *dump)
{
	rt_weave_opts o;
	unsigned long right = 0, known = 0, oright = 0, oknown = 0, fright = 0;
	double cpu = 0;
	size_t spans = 0, i, k;
	if (parse_variant(&o, spec) < 0) {
		fprintf(stderr, "weave_replay: bad variant '%s'\n", spec);
		return 2;
	}
	for (i = 0; i < nb; i++) {
		const struct batch *x = &b[i];
		rt_weave_link *res = calloc(x->nc + 1, sizeof *res), *fc = calloc(x->nc + 1, sizeof *fc);
		struct timespec a0, a1;
		if (!res || !fc)
			return 1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a0);
		if (rt_weave_hop(&o, x->c, x->nc, x->s, x->ns, res, NULL) < 0)
			return 1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a1);
		cpu += (double)(a1.tv_sec - a0.tv_sec) * 1e3 + (double)(a1.tv_nsec - a0.tv_nsec) / 1e6;
		spans += x->nc + x->ns;
		rt_weave_fcfs(o.skew_ns, x->c, x->nc, x->s, x->ns, fc);
		if (dump) /* per call: batch, call, chosen root, true root, confidence */
			for (k = 0; k < x->nc; k++)
				fprintf(dump, "%zu %zu %td %ld %.4f\n", i, k, res[k].server,
					x->truth[k], res[k].confidence);
		for (k = 0; k < x->nc; k++) {
			if (x->truth[k] < 0)
				continue;
			known++;
			right += res[k].server == x->truth[k];
			fright += fc[k].server == x->truth[k];
			if (x->ours[k]) {
				oknown++;
				oright += res[k].server == x->truth[k];
			}
		}
		free(res);
		free(fc);
	}
	printf("bench weave replay variant=%s batches=%zu calls=%lu accuracy=%.4f "
	       "fcfs_accuracy=%.4f ours=%lu ours_accuracy=%.4f ms_per_1000_spans=%.2f\n",
	       spec, nb, known, known ? (double)right / known : 0,
	       known ? (double)fright / known : 0, oknown, oknown ? (double)oright / oknown : 0,
	       spans ? cpu / spans * 1000 : 0);
	return 0;
}

int main(int argc, char **argv)
{
	FILE *f;
	char line[256];
	struct batch *b = NULL;
	size_t nb = 0, capb = 0, i;
	int rc = 0;
	/* WEAVE_REPLAY_DUMP=FILE: the first variant's decisions, one line per call */
	const char *dump_to = getenv("WEAVE_REPLAY_DUMP");
	FILE *dump = dump_to ? fopen(dump_to, "w") : NULL;
	if (argc < 2 || !(f = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: weave_replay FILE [VARIANT ...]\n");
		return 2;
	}
	while (fgets(line, sizeof line, f)) {
		struct batch *x;
		long long s0, s1;
		unsigned long long conn = 0;
		long t;
		int ours;
		if (line[0] == 'B') {
			b = grow(b, &capb, nb, sizeof *b);
			memset(&b[nb++], 0, sizeof *b);
			continue;
		}
		if (!nb)
			continue;
		x = &b[nb - 1];
		if (line[0] == 'c' &&
		    sscanf(line + 1, "%lld %lld %ld %d %llx", &s0, &s1, &t, &ours, &conn) >= 4) {
			x->c = grow(x->c, &x->capc, x->nc, sizeof *x->c);
			x->truth = grow(x->truth, &x->capt, x->nc, sizeof *x->truth);
			x->ours = grow(x->ours, &x->capo, x->nc, sizeof *x->ours);
			x->c[x->nc] = (rt_weave_span){x->nc + 1, 0, x->nc + 1, s0, s1, 0, conn};
			x->truth[x->nc] = t;
			x->ours[x->nc++] = ours;
		} else if (line[0] == 's' && sscanf(line + 1, "%lld %lld %llx", &s0, &s1, &conn) >= 2) {
			x->s = grow(x->s, &x->caps, x->ns, sizeof *x->s);
			x->s[x->ns] = (rt_weave_span){x->ns + 1, 1, x->ns + 1, s0, s1, 0, conn};
			x->ns++;
		}
	}
	fclose(f);
	if (argc == 2)
		rc = run_variant("default", b, nb, dump);
	for (i = 2; i < (size_t)argc && rc == 0; i++)
		rc = run_variant(argv[i], b, nb, i == 2 ? dump : NULL);
	for (i = 0; i < nb; i++) {
		free(b[i].c);
		free(b[i].s);
		free(b[i].truth);
		free(b[i].ours);
	}
	free(b);
	if (dump)
		fclose(dump);
	return rc;
}
