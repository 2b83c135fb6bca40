/*
 * cmd_status.c — `retrace status`: ask a running agent for its figures.
 *
 * One nng request/reply round trip to the agent's local status address (derived
 * from the pool name, as the agent derives it), with a timeout. The agent renders
 * both the text and the JSON form, so this command parses nothing.
 *
 * cli_request, which every command that talks to a daemon uses, lives here:
 * with certificates it dials TLS (daemon/tls.h) and checks the daemon's name.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "cmd.h"
#include "config.h"
#include "daemon/tls.h"
#include "nng_close.h"
#include "shm/pool.h"

static void status_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace status [--pool NAME | --agent URL] [--coordinator URL] [--all | --json]\n"
		"                      [--timeout MS]\n"
		"Ask a running retrace-agent for its figures (buffers, traces, event horizon,\n"
		"evictions, malformed entries, clients, queues, reporting) and/or the\n"
		"coordinator for its own (agents, triggers in flight, traversal latency,\n"
		"coherent/incoherent traces, store). With only --coordinator, only the\n"
		"coordinator is asked. By default a summary of a few lines per daemon, in\n"
		"human units, naming every non-zero drop or error counter; --all prints\n"
		"every figure (docs/metrics.md names them).\n\n"
		"  -p, --pool NAME     the agent's pool (default /retrace, or $RETRACE_POOL)\n"
		"  -a, --agent URL     the agent's status address (default ipc:///tmp/retrace-UID/POOL.status)\n"
		"  -C, --coordinator URL  the coordinator's address (or $RETRACE_COORDINATOR)\n"
		"  -A, --all           every figure, as text\n"
		"  -j, --json          every figure, as JSON\n"
		"  -t, --timeout MS    give up after MS milliseconds (default " CLI_DEFAULT_TIMEOUT_TEXT ")\n"
		CLI_TLS_USAGE
		"  -h, --help          this text\n");
}

static struct rt_tls_opts tls_opts;
const char *cli_tls_peer = RT_TLS_COORDINATOR_NAME;

void cli_tls_opt(int ch, const char *arg)
{
	char *f = ch == CLI_OPT_TLS_CA ? tls_opts.ca
		  : ch == CLI_OPT_TLS_CERT ? tls_opts.cert : tls_opts.key;
	snprintf(f, RT_TLS_PATH_MAX, "%s", arg);
}

/* The identity of this run, loaded once: flags, else the environment. */
static int tls_identity(const struct rt_tls **out, char *err, size_t errlen)
{
	static struct rt_tls *tls;
	static int loaded;
	if (!loaded) {
		static const char *const env[] = { "RETRACE_TLS_CA", "RETRACE_TLS_CERT", "RETRACE_TLS_KEY" };
		char *f[] = { tls_opts.ca, tls_opts.cert, tls_opts.key };
		for (int i = 0; i < 3; i++)
			if (!f[i][0] && getenv(env[i]))
				snprintf(f[i], RT_TLS_PATH_MAX, "%s", getenv(env[i]));
		if (rt_tls_load(&tls_opts, &tls, err, errlen) < 0)
			return -1;
		loaded = 1;
	}
	*out = tls;
	return 0;
}

/* One request, one reply; the reply is printed as is. */
int cli_request(const char *url, const char *req, int timeout_ms, char **reply,
		    size_t *reply_len, char *err, size_t errlen)
{
	const struct rt_tls *tls;
	char secured[512], why[512];
	nng_socket s;
	int rv;
	/* The CLI may talk plain to anything (the daemon decides what it accepts). */
	if (tls_identity(&tls, err, errlen) != 0 ||
	    rt_url_secure(tls, 1, "address", url, secured, sizeof secured, err, errlen) != 0)
		return -1;
	url = secured;
	if ((rv = nng_req0_open(&s)) != 0) {
		snprintf(err, errlen, "cannot open a request socket: %s", nng_strerror(rv));
		return -1;
	}
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
	if (rt_tls_dial(s, tls, url, cli_tls_peer, 0, why, sizeof why) != 0) {
		snprintf(err, errlen, "%s (%s%s)", url, why,
			 tls || strncmp(url, "tcp://", 6) ? ""
			      : "; if it uses TLS, give --tls-ca, --tls-cert and --tls-key");
		rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
		return -1;
	}
	if ((rv = nng_send(s, (void *)req, strlen(req) + 1, 0)) != 0 ||
	    (rv = nng_recv(s, reply, reply_len, NNG_FLAG_ALLOC)) != 0) {
		snprintf(err, errlen, "%s: no reply: %s", url, nng_strerror(rv));
		rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
		return -1;
	}
	/* Bounded like the daemons' closes: nng 1.5.2 can deadlock in nng_close()
	 * when the peer dropped the pipe (nanomsg/nng#1543); the CLI must not hang. */
	rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
	return 0;
}

enum status_form { FORM_SUMMARY, FORM_ALL, FORM_JSON };

/* Print one daemon's figures: as it renders them (--all, --json), or the
 * summary made from its JSON (status_summary.c). 0 or 1. */
static int ask(const char *url, const char *what, enum status_form form, int timeout)
{
	char err[512], *reply = NULL;
	size_t len = 0, n;
	int rc = 0;
	/* An agent's certificate is agent-ID, which we may not know: any of the CA. */
	cli_tls_peer = !strcmp(what, "agent") ? NULL : RT_TLS_COORDINATOR_NAME;
	if (cli_request(url, form == FORM_ALL ? "status" : "status json", timeout, &reply, &len,
			    err, sizeof err) != 0) {
		fprintf(stderr, "retrace status: no %s answers at %s (is retrace-%s running?)\n",
			what, err, what);
		return 1;
	}
	n = len && reply[len - 1] == 0 ? len - 1 : len;
	if (form == FORM_SUMMARY)
		rc = cli_print_status_summary(reply, n, !strcmp(what, "coordinator"));
	else
		fwrite(reply, 1, n, stdout);
	if (form == FORM_JSON)
		fputc('\n', stdout);
	nng_free(reply, len);
	return rc;
}

int cli_cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pool", required_argument, NULL, 'p' },
		{ "agent", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'A' },
		{ "coordinator", required_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		CLI_TLS_LONGOPTS,
		{ 0, 0, 0, 0 },
	};
	const char *pool = getenv("RETRACE_POOL") ? getenv("RETRACE_POOL") : RT_POOL_DEFAULT_NAME;
	const char *coord = getenv("RETRACE_COORDINATOR");
	char url[256] = "";
	int agent_asked = 0, coord_asked = 0, rc = 0;
	enum status_form form = FORM_SUMMARY;
	int timeout = CLI_DEFAULT_TIMEOUT_MS, ch;
	char *end;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "p:a:C:jAt:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p': pool = optarg; agent_asked = 1; break;
		case 'a': snprintf(url, sizeof url, "%s", optarg); agent_asked = 1; break;
		case 'C': coord = optarg; coord_asked = 1; break;
		case 'j': form = FORM_JSON; break;
		case 'A': form = FORM_ALL; break;
		case 't':
			errno = 0;
			timeout = (int)strtol(optarg, &end, 10);
			if (errno || *end || timeout <= 0) {
				fprintf(stderr, "retrace status: --timeout wants milliseconds, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': status_usage(stdout); return 0;
		case CLI_OPT_TLS_CA:
		case CLI_OPT_TLS_CERT:
		case CLI_OPT_TLS_KEY: cli_tls_opt(ch, optarg); break;
		default: status_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "retrace status: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (coord && !*coord)
		coord = NULL;
	if (coord_asked && !agent_asked)
		return ask(coord, "coordinator", form, timeout);
	if (!url[0])
		rt_agent_default_status_addr(pool, url, sizeof url);
	rc = ask(url, "agent", form, timeout);
	if (coord) {
		if (form != FORM_JSON)
			printf("\n");
		rc |= ask(coord, "coordinator", form, timeout);
	}
	return rc;
}
