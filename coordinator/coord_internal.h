/*
 * coordinator/coord_internal.h — the coordinator's state, shared by its .c files.
 *
 * All of it is owned by the thread in rt_coord_run; nng callbacks touch only
 * their own struct coord_in / coord_req and the ready list under `mu`.
 */
#ifndef RETRACE_COORD_INTERNAL_H
#define RETRACE_COORD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <nng/nng.h>

#include "coordinator.h"
#include "daemon/guard.h"
#include "daemon/metrics.h"
#include "daemon/reqrep.h"
#include "http_api.h"
#include "daemon/tls.h"
#include "daemon/log.h"
#include "decode.h"
#include "store.h"
#include "wire/wire.h"

#define COORD_GROUP_TRACES RT_WIRE_MAX_TRACES /* a trace mask fits a uint64_t */
#define COORD_MAX_GROUP_TRIGGERS 64           /* (agent, seq) keys kept per group */
/* REP contexts on the coordinator socket: TRIGGERs (each held until the group
 * commit that stores it), registrations, operators' requests. */
#define COORD_IN_COORD 128
/* REP contexts on the collector socket. A context whose slice waits for the
 * group commit (batch.c) cannot receive, so this bounds a commit's slices. */
#define COORD_IN_COLLECT 512 /* at most; --collector-contexts opens fewer */
#define COORD_MAX_REQS 1024                   /* remote triggers in flight */
#define COORD_MAX_ASKS 8192                   /* (group, agent) asks awaiting a flush */
#define COORD_LATENCY_RING 8192               /* traversal latency samples kept */
/* Requests on the coordinator socket: a TRIGGER is at most ~85 KB (64 traces of
 * 256 breadcrumbs); larger ones are refused and counted, and past the hard
 * bound nng drops the connection before the message exists (daemon/guard.h). */
#define COORD_REQUEST_MAX (256u << 10)
#define COORD_REQUEST_HARD (1u << 20)
/* Connections per listener when --max-connections is 0: without TLS only
 * loopback is served (a host's own agents and operators). */
#define COORD_MAX_CONNECTIONS_TLS 1024
#define COORD_MAX_CONNECTIONS_PLAIN 16
/* How long rt_coord_close waits, all sockets together, for nng to close them
 * (closes past it are abandoned and counted: wire/nng_close.h). */
#define COORD_EXIT_CLOSE_MS 3000u

/* The levels of daemon/log.h, by the coordinator's short names. */
enum { LOG_ERROR = RT_LOG_ERROR, LOG_WARN = RT_LOG_WARN, LOG_INFO = RT_LOG_INFO, LOG_DEBUG = RT_LOG_DEBUG };
void coord_log(const struct rt_coord *c, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------- trace hash ---- */

/* Open addressing on trace_lo (never 0) with backward-shift deletion. */
struct coord_map {
	uint64_t *keys; /* 0 = empty */
	uint64_t *vals;
	uint64_t seed;  /* random per map: keys are chosen by whoever sends a traceparent */
	uint32_t mask, count;
};
int coord_map_init(struct coord_map *m, uint32_t capacity_pow2);
uint32_t coord_map_home(const struct coord_map *m, uint64_t key); /* a key's first slot */
void coord_map_free(struct coord_map *m);
int coord_map_get(const struct coord_map *m, uint64_t key, uint64_t *val);
int coord_map_put(struct coord_map *m, uint64_t key, uint64_t val); /* -1 when full */
void coord_map_del(struct coord_map *m, uint64_t key);

/* ------------------------------------------------------ directory ---- */

struct coord_agent {
	uint32_t id;
	uint32_t pid;
	char host[256];
	char addr[256];
	uint64_t start_ns;       /* the agent's own start (Unix ns) */
	uint64_t last_seen_ns;   /* Unix ns of the last registration */
	uint64_t seen_mono_ns;   /* monotonic; starts at load time for a stored entry */
	nng_socket sock;         /* REQ socket dialled to addr */
	int sock_open;
	uint64_t asked, answered, failed; /* remote triggers sent / answered / failed (each try) */
};

struct coord_directory {
	struct coord_agent *agents;
	uint32_t count, cap;
	uint64_t registrations, expired;
};

struct coord_agent *coord_dir_find(struct rt_coord *c, uint32_t id);
/* proven: the sender's certificate names r->agent_id (TLS); without it a live
 * id keeps its address (docs/security.md). 0, an RT_WIRE_E_ or RT_STORE_E_
 * code, or RT_ACK_REFUSED (counted). */
int coord_dir_register(struct rt_coord *c, const struct rt_wire_register *r, int proven);
int coord_dir_load(struct rt_coord *c);
void coord_dir_expire(struct rt_coord *c);
void coord_dir_free(struct rt_coord *c);

/* ------------------------------------------------------- traversal ---- */

enum coord_cell_state {
	CELL_NEW = 0,     /* named, not asked yet */
	CELL_ASKED = 1,   /* remote trigger in flight */
	CELL_REPLIED = 2, /* breadcrumb reply received */
	CELL_FAILED = 3,  /* unknown or unreachable agent */
	CELL_SEEN = 4,    /* not named: only slices from it (asked nothing) */
	CELL_OPEN = 5,    /* replied, but a writer there still holds buffers of the
	                     trace: asked again at ask_again_ns until it says none */
};

struct coord_cell { /* one (trace of a group, agent) pair */
	uint32_t agent_id;
	uint8_t trace;
	uint8_t state;
	uint8_t named;
	uint8_t unknown;   /* the directory did not know the agent */
	uint32_t buffers;  /* from its reply: buffers it has or had (0 = no data) */
	uint64_t expect;   /* from its reply: payload bytes in total */
	uint64_t received; /* payload bytes of slices received */
	uint32_t slices;
	uint32_t open;     /* from its last reply: buffers a writer still holds */
	uint32_t asks;     /* replies that said open, for the back-off */
	uint64_t ask_again_ns;
};

struct coord_gtrace {
	uint64_t hi, lo;
	uint64_t first_ns, last_ns; /* Unix ns range of its buffers */
	uint64_t bytes;
	uint32_t slices;
	/* weave.c: this trace was added by an inferred link from a CLIENT span of
	 * trace woven_from of the group (woven = 1); complete: its own row came out
	 * coherent at close (set there, read by the traces it closes the hop of). */
	uint8_t woven, woven_from, complete;
	double weave_confidence;
	uint64_t weave_client_span, weave_server_span;
};

struct coord_trigger_key {
	uint32_t agent_id;
	uint64_t seq;
};

struct coord_group {
	uint64_t id;              /* 0 = free slot */
	uint32_t ntraces;
	struct coord_gtrace traces[COORD_GROUP_TRACES];
	uint32_t ntrig;
	uint32_t trigger_ids[RT_STORE_MAX_TRIGGERS];
	uint32_t nkeys;
	struct coord_trigger_key keys[COORD_MAX_GROUP_TRIGGERS];
	struct coord_cell *cells;
	uint32_t ncells, cap;
	uint32_t inflight;        /* remote triggers outstanding */
	int has_trigger;          /* 0: opened by an orphan slice */
	int closing;              /* close_group runs: replies no longer change it */
	int recollect;            /* opened by an operator's recollect: skips selection */
	int store_counted;        /* the store's slices of its traces were counted (traversal.c) */
	int close_deferred;       /* its collect timeout passed inside a stalled turn (traversal.c) */
	int dirty;                /* cells to dispatch */
	uint64_t created_ns;      /* monotonic */
	uint64_t weave_until_ns;  /* weaving's own collect deadline (coord_group_deadline), 0: none */
	uint64_t triggered_unix_ns;
	uint64_t last_activity_ns;
	uint64_t traversal_ns;    /* 0 until the traversal went idle */
	uint32_t next_free;
	uint32_t share;           /* index+1 of the trigger share it is charged to */
	uint8_t weave_state;      /* weave.c: 1 while its agents are asked for candidates */
	uint32_t weave_job;       /* index+1 of that job */
	uint64_t weave_checked;   /* traces (mask) already looked at for open hops */
};

/*
 * The group table is shared fairly among trigger ids: a storm of one trigger
 * must not starve a quiet one. Each open group is charged to the trigger id that
 * opened it; one id may hold at most max_groups / (other ids holding groups + 2),
 * so there is always room for a newcomer. Ids past COORD_SHARES share the last
 * entry (id 0, "other").
 */
#define COORD_SHARES 64
struct coord_share {
	uint32_t trigger_id;
	uint32_t open;            /* groups open charged to it */
	uint64_t opened;
	uint64_t dropped;         /* groups refused: over its share, or the table full */
};

/*
 * One group's question to one agent: "these traces of mine (mask), what do you
 * hold?". Asks wait in a queue until the end of the loop's phase; then every
 * ask for the same agent and trigger id travels in one REMOTE_TRIGGER (up to
 * RT_WIRE_MAX_TRACES traces), so a burst of groups costs an agent one request
 * (one drain, one open-writer count) instead of one per group.
 */
struct coord_ask {
	uint64_t group_id;        /* the group's id when asked: a closed group's answer is dropped */
	uint64_t mask;            /* traces asked, as indices into the group */
	uint32_t group;           /* index */
	uint32_t agent_id;
	uint32_t trigger_id;      /* the agent charges the pin to this id's report class */
	uint32_t attempt;         /* 0, then retries up to agent_retries */
};

enum coord_req_kind {
	COORD_REQ_TRAVERSAL = 0,  /* REMOTE_TRIGGER -> BREADCRUMB_REPLY */
	COORD_REQ_WINDOW = 1,     /* weave.c: WINDOW_QUERY -> WINDOW_REPLY */
	COORD_REQ_RELEASE = 2,    /* weave.c: WINDOW_RELEASE -> ACK (ignored) */
};

struct coord_req {
	struct rt_reqrep rr;      /* the round trip; its context opened per request */
	int kind;                 /* enum coord_req_kind */
	int ok;
	nng_msg *reply;
	struct rt_coord *c;
	uint32_t agent_id;
	uint32_t job;             /* weave requests: the job (weave.c) */
	uint64_t tag;             /* weave requests: what the job asked */
	uint32_t nparts;          /* traversal: asks carried, 1..RT_WIRE_MAX_TRACES */
	struct coord_ask parts[RT_WIRE_MAX_TRACES];
	uint64_t request_id;
	uint64_t sent_ns, done_ns;  /* sent by the loop; reply callback (stage figures) */
	uint64_t overdue_ns;        /* past this the loop cancels it (coord_req_watchdog) */
	int overdue;               /* the loop cancelled it once */
	int in_use;                /* allocated, not yet released (req_alloc .. req_release) */
	int stuck;                 /* the watchdog reported it unended past the cancel */
	struct coord_req *next_ready;
	uint32_t next_free;
};

/* An incoming request on one of the two REP sockets. */
struct coord_in {
	int state;                /* IN_RECV, IN_READY, IN_SEND */
	int collector;            /* 1: the collector socket */
	nng_ctx ctx;
	nng_aio *aio;
	nng_msg *msg;             /* the request, until handled */
	nng_msg *reply;           /* queued until the store committed */
	int durable;              /* the reply promises something stored */
	struct rt_peer peer;      /* who sent msg (auth.c) */
	struct rt_coord *c;
	struct coord_in *next_ready;
};

/* Refusals (auth.c, `retrace status` section security). */
struct coord_sec_stats {
	uint64_t oversize;          /* requests over COORD_REQUEST_MAX */
	uint64_t unauthenticated;   /* TLS on, no verified certificate behind the request */
	uint64_t register_identity; /* REGISTER for an id the certificate does not name */
	uint64_t register_moves;    /* REGISTER moving a live agent id (no TLS) */
	uint64_t register_addr;     /* REGISTER with an address we will not dial */
	uint64_t triggers_refused;  /* TRIGGER for an agent the sender is not */
	uint64_t slices_refused;    /* SLICE for an agent the sender is not */
	uint64_t operator_refused;  /* alarm add/clear from a non-operator */
};

struct coord_stats {
	uint64_t registrations, triggers, trigger_duplicates, trigger_traces;
	uint64_t bad_messages, bad_slices, text_requests;
	uint64_t slices, slice_bytes, slice_duplicates, late_slices, orphan_slices;
	uint64_t stored_bytes_counted; /* bytes a held-up group found already stored (traversal.c) */
	uint64_t late_slices_unselected; /* late, for a trace selection deleted: acked, not stored */
	uint64_t store_errors;
	uint64_t remote_sent, remote_asks, remote_retries, remote_failed, remote_bad_replies;
	uint64_t requests_overdue;  /* cancelled by the loop: nng had not ended them */
	uint64_t requests_stuck;    /* still not acted on a second after that (any state) */
	uint64_t replies_direct;     /* acted on in nng's callback: the loop was waiting */
	uint64_t trigger_names_learned;  /* trigger_names.c: names written to the store */
	uint64_t trigger_names_uncached; /* past the name cache (written, not cached) */
	uint64_t unknown_agents;
	uint64_t groups_opened, groups_closed, groups_dropped, traces_dropped;
	uint64_t traces_coherent, traces_incoherent;
	uint64_t traces_incomplete;  /* every agent delivered, but the spans show a hole */
	uint64_t traces_untriggered; /* every agent named delivered, but no trigger came: incoherent */
	uint64_t traces_undecodable; /* could not be decoded at close: not shown complete */
	uint64_t recollections;      /* traces traversed again (operator, or reopened) */
	uint64_t reopened;           /* closed traces reopened: a trigger named a new hop */
	uint64_t retained_deleted;
};

/* Where the loop's turns (run_once) spend their time: one turn holds every
 * reply it owes, so a slow phase delays every agent's ACK, and with it the
 * next trigger each agent may send. */
enum coord_phase {
	COORD_PHASE_SLICES, COORD_PHASE_REQUESTS, COORD_PHASE_TRAVERSAL, COORD_PHASE_SELECTION,
	COORD_PHASE_COMMIT, COORD_PHASE_REPLIES, COORD_PHASES
};
#define COORD_SLOW_TURN_NS 1000000000ull /* a turn this long is logged (at most every 10 s) */

struct coord_loop_stats {
	uint64_t turns, slow_turns;
	uint64_t phase_ns[COORD_PHASES]; /* summed over all turns */
	uint64_t max_turn_ns;
	uint64_t last_slow_log_ns;
	/* When the current turn took its input (0 outside the loop). A collect
	 * timeout is judged against it, not the clock: a group whose deadline
	 * passed while the turn itself stalled waits one turn more, so what
	 * arrived before the deadline is counted before the group closes. */
	uint64_t input_ns;
	uint64_t closes_deferred; /* groups that waited for that turn */
};

/*
 * Group commit (batch.c): one store transaction spans turns until it is due
 * (--commit-interval passed since it opened, --commit-slices slices held, or
 * the contexts running out); the replies that promise something stored wait
 * in `held` until its commit.
 */
struct coord_batch {
	int open;                  /* a store transaction is open */
	uint64_t opened_ns;        /* monotonic */
	uint64_t interval_ns;      /* 0: commit every turn */
	uint32_t max_slices;
	uint32_t contexts;         /* collector contexts open (--collector-contexts) */
	uint32_t nheld, nslices, nreqs, turns;
	struct coord_in *held[COORD_IN_COORD + COORD_IN_COLLECT];
	/* figures */
	uint64_t commits, commit_failures, committed_slices, max_slices_seen;
	uint64_t turns_batched;    /* turns that ended without a commit */
};

struct rt_coord {
	struct rt_coord_config cfg;
	struct coord_batch batch;
	struct rt_store *store;
	nng_socket coord_sock, collect_sock;
	char listen_addr[RT_COORD_URL_MAX], collector_addr[RT_COORD_URL_MAX];
	struct coord_in in[COORD_IN_COORD + COORD_IN_COLLECT];

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct coord_in *ready_in;   /* LIFO under mu; reversed when taken */
	struct coord_req *ready_req;
	atomic_int replies_ready;    /* ready_req non-empty: set under mu by req_cb, read
				      * without it at the loop's poll points */
	/* Who may touch the loop's state (groups, asks, requests, directory, figures,
	 * c->out): the holder of loop_mu. rt_coord_run holds it all the time except
	 * where loop_idle says it let go — while it waits for work, and during the
	 * store's commit (coord_loop_let_go) — and then an agent's reply is acted on
	 * at once by the nng thread that got it (traversal.c, req_cb), so the next
	 * round goes out without waking the loop. Never taken while holding mu. */
	pthread_mutex_t loop_mu;
	int loop_idle;               /* under loop_mu: its holder is not the loop */
	atomic_int loop_idle_hint;   /* loop_idle, read without loop_mu */
	int loop_owned;              /* rt_coord_run is running (holds loop_mu) */
	atomic_int peers_answering;  /* c->peers is set: probes answered on nng's thread */
	int closing;
	/* Set when rt_coord_close starts: every socket its exit closes is waited
	 * for until then at the latest (wire/nng_close.h), so a wedged nng costs
	 * the exit one wait, not one per socket. */
	struct timespec close_by;

	struct coord_directory dir;
	struct coord_group *groups;
	uint32_t group_free;         /* free list head (index+1, 0 = none) */
	uint32_t groups_open;
	uint64_t next_group_id;
	struct coord_share shares[COORD_SHARES];
	uint32_t nshares;
	uint64_t drop_log_ns;         /* next time a dropped trigger may be logged */
	uint64_t drop_log_suppressed; /* dropped triggers not logged since the last line */
	struct coord_map traces;     /* trace_lo -> group index << 8 | trace index */
	struct coord_map closed;     /* trace_lo -> monotonic close time */
	uint64_t *closed_ring;       /* FIFO of closed trace_lo for expiry */
	uint32_t closed_head, closed_len, closed_cap;

	struct coord_req *reqs;
	uint32_t req_free;           /* index+1 */
	struct coord_ask *asks;      /* waiting for coord_traversal_flush */
	uint32_t nasks;
	uint64_t next_request_id;

	uint64_t latency[COORD_LATENCY_RING]; /* traversal ns */
	uint64_t latency_count;
	/* Remote triggers' stages (rt_coord_stage_samples), under mu like latency. */
	uint64_t stage[RT_COORD_STAGES][RT_COORD_STAGE_RING];
	uint64_t stage_count[RT_COORD_STAGES];
	uint64_t start_ns, start_unix_ns;
	uint64_t next_retain_ns, next_expire_ns;
	struct rt_wire_buf out;
	struct coord_stats st;
	struct coord_loop_stats loop;
	struct coord_selection *sel; /* selection.c: windows, alarms, per-group counts */
	struct coord_adaptive *adapt; /* adaptive.c: the span-site learner and its policy */
	struct rt_tls *tls;          /* auth.c: our identity; NULL = plain (loopback) */
	struct rt_pipe_cap *cap_listen, *cap_collect;
	struct coord_sec_stats sec;
	struct rt_metrics *metrics;  /* /metrics (daemon/metrics.h); NULL: off */
	struct coord_stream *stream; /* stream.c: continuous export; NULL: off */
	struct rt_http_api *http;    /* web UI and /api (http_api.h); NULL: off */
	struct coord_weave *weave;   /* weave.c; NULL: --weave off */
	struct coord_peers *peers;   /* peers.c: the ring of --peers; NULL: not sharded */
	struct coord_names *names;   /* trigger_names.c: learned trigger names */
	struct coord_history *history; /* history.c: the UI's samples; NULL: off */
};

uint64_t coord_now_ns(void);      /* CLOCK_MONOTONIC */
uint64_t coord_unix_ns(void);

/* history.c (history.h): periodic samples for the UI, with --http-listen */
struct rt_figures;
int coord_history_open(struct rt_coord *c);
void coord_history_close(struct rt_coord *c);
void coord_history_tick(struct rt_coord *c, uint64_t now);
void coord_history_figures(struct rt_figures *w, struct rt_coord *c);
/* selection.c: its cumulative counters, for the history */
void coord_selection_counts(const struct rt_coord *c, uint64_t *windows, uint64_t *kept,
			    uint64_t *dropped, uint64_t *last_alarmed);

/* trigger_names.c: names of user trigger ids, from the TRIGGER events of
 * closed traces into the store */
int coord_names_init(struct rt_coord *c);
void coord_names_free(struct rt_coord *c);
/* After a rolled back transaction: what the store has, not what the turn learned. */
void coord_names_reload(struct rt_coord *c);
/* 1 if the row fired a user trigger id whose name is not known yet (and was
 * not looked for in the last minute): decode it for its TRIGGER events */
int coord_names_unknown(struct rt_coord *c, const struct rt_store_trace *row);
struct rt_decoded_trace;
void coord_names_learn(struct rt_coord *c, const struct rt_decoded_trace *dt);

/* traversal.c */
int coord_traversal_init(struct rt_coord *c);
void coord_traversal_free(struct rt_coord *c);
int coord_handle_trigger(struct rt_coord *c, const struct rt_wire_trigger *t, uint64_t received_unix_ns);
void coord_handle_reply(struct rt_coord *c, struct coord_req *r);
/* Send the asks queued since the last flush, one request per (agent, trigger id)
 * for up to RT_WIRE_MAX_TRACES traces; what cannot be sent now is asked again
 * on the next tick. Called at the end of each phase of a loop turn. */
void coord_traversal_flush(struct rt_coord *c);
/* The loop's poll point: act on every agent's reply that has come (if any), then
 * send what they and the phase before asked. Cheap when nothing came (one atomic
 * load): called between the phases of a turn and between groups inside them. */
void coord_traversal_serve(struct rt_coord *c);
/* Around a stretch of the loop that touches neither the traversal nor c->out
 * (the store's commit, a wait): agents' replies are acted on meanwhile by nng's
 * threads. No-ops unless called by rt_coord_run's thread. */
void coord_loop_let_go(struct rt_coord *c);
void coord_loop_take_back(struct rt_coord *c);
/* A stored slice: add it to its trace (opening a group for an orphan). 1 if late. */
int coord_slice_arrived(struct rt_coord *c, const struct rt_wire_slice *s, uint64_t bytes,
			uint64_t first_ns, uint64_t last_ns, int *late);
int coord_trace_is_closed(struct rt_coord *c, uint64_t lo);
/* Selection deleted this closed trace: its late slices are acknowledged and
 * dropped instead of stored (remembered as long as the trace is, state_ttl). */
void coord_trace_mark_unselected(struct rt_coord *c, uint64_t lo);
int coord_trace_was_unselected(struct rt_coord *c, uint64_t lo);
int coord_trace_open(struct rt_coord *c, uint64_t lo);
void coord_traversal_tick(struct rt_coord *c, uint64_t now);
void coord_resume_received(struct rt_coord *c);

/* traversal.c, for weave.c: the request machinery and the group's traces. */
/* Send c->out to agent a as a request of `kind`; tag/job are kept in the
 * request (r->tag, r->job) for the reply. 0, or -1 (no slot or socket). */
int coord_req_send(struct rt_coord *c, struct coord_agent *a, int kind, uint32_t job,
		   uint64_t tag, uint64_t request_id, double timeout_s);
uint64_t coord_req_callbacks_ignored(struct rt_coord *c);
void coord_req_free(struct rt_coord *c, struct coord_req *r);
/* Cancel each request nng has not ended well past its timeout (every 100 ms). */
void coord_req_watchdog(struct rt_coord *c, uint64_t now);
/* Add trace (hi, lo) to g and name `agent` for it (to be asked at the next
 * dispatch): its index, or -1 (group full, or the trace is another group's). */
int coord_group_add_named(struct rt_coord *c, struct coord_group *g, uint64_t hi, uint64_t lo,
			  uint32_t agent);

/* weave.c (docs/weaving.md) */
struct rt_figures;
int coord_weave_init(struct rt_coord *c, char *err, size_t errlen);
void coord_weave_free(struct rt_coord *c);
/*
 * When g's collect timeout closes it regardless (traversal.c): collect_timeout
 * after the first news of its traces, or later while weaving works on it. A
 * weave job is a second traversal that can only start once the first is done,
 * and the traces it adds start being collected when it decides: each gets a
 * collect timeout of its own (weave.c pushes weave_until_ns), so a caller
 * whose own collection took most of the timeout on a stalled host is not
 * closed under its callees' feet, incoherent, with every byte on its way.
 */
uint64_t coord_group_deadline(const struct rt_coord *c, const struct coord_group *g);
/* Push g's deadline to at least collect_timeout after now (weave.c). */
void coord_group_extend(const struct rt_coord *c, struct coord_group *g, uint64_t now);
/* The group is ready to close: 1 if weaving holds it open (agents are being
 * asked for the other halves of its open hops), 0 to close now. */
int coord_weave_hold(struct rt_coord *c, struct coord_group *g, uint64_t now);
/* A WINDOW_REPLY / release ACK (or failure) for a weave request; frees r. */
void coord_weave_reply(struct rt_coord *c, struct coord_req *r);
/* Jobs whose agents did not all answer in time are decided with what came. */
void coord_weave_tick(struct rt_coord *c, uint64_t now);
/* The group closes: its job (if any) is dropped. */
void coord_weave_group_closed(struct rt_coord *c, struct coord_group *g);
/* At close, before trace idx's row: store the attributes of its inferred links
 * (a small slice of the weaver's own, agent RT_WEAVE_AGENT_ID). */
void coord_weave_store_links(struct rt_coord *c, struct coord_group *g, int idx);
/* Open hops of trace idx closed by a link to a complete trace (coherence). */
uint64_t coord_weave_forgiven(const struct coord_group *g, int idx, const struct rt_decoded_trace *dt);
void coord_weave_figures(struct rt_figures *w, struct rt_coord *c);
/* The call graph: learn from a decoded trace's coherent hops; name the callee of a
 * CLIENT span (peer.service, learnt edge, --weave-graph; NULL: unknown). */
void coord_weave_learn(struct rt_coord *c, const struct rt_decoded_trace *dt);
const char *coord_weave_callee(struct rt_coord *c, const struct rt_decoded_trace *dt,
			       const struct rt_span *s);
/* Who sends `callee` calls without context (the callers of every open hop seen,
 * the --weave-graph edges): each one's calls are asked for, as competitors. */
void coord_weave_note_hop(struct rt_coord *c, const char *caller, const char *callee);
uint32_t coord_weave_callers(const struct rt_coord *c, const char *callee, const char *out[],
			     uint32_t max);

/* spans_out.c: a closed trace's decoded spans into a store that keeps them as
 * rows (rt_store_wants_spans); 0, or a negative store error / -1 out of memory. */
int coord_store_spans(struct rt_coord *c, const struct rt_decoded_trace *dt);

/* collector.c */
void coord_process_slices(struct rt_coord *c, struct coord_in **batch, uint32_t n);

/* status.c */
/* The figures for Prometheus (an rt_metrics_render; arg is the coordinator). */
size_t coord_metrics_render(void *arg, char *out, size_t cap, int *cut);
/* The figures as JSON, for /api/status (an rt_metrics_render; arg is the coordinator). */
size_t coord_status_json_render(void *arg, char *out, size_t cap, int *cut);
void coord_latency_percentiles(const struct rt_coord *c, double q1, double q2, uint64_t *v1,
			       uint64_t *v2);

/* selection.c */
struct rt_figures;
int coord_selection_init(struct rt_coord *c);
void coord_selection_free(struct rt_coord *c);
/* A trace row close_group just stored: coherent ones are decoded and join the open
 * window (which may close here when it is full); the rest bypass selection. */
/*
 * Operator's "recollect": traverse a stored trace again (its data may still be on
 * hosts: an agent that restarted, a collector that was down) and rewrite its row.
 * Writes a one-line answer ("ok ..." or "error: ...") into out.
 */
size_t coord_recollect_request(struct rt_coord *c, const char *req, size_t len, char *out,
			       size_t cap);
/* `decoded`: the trace decoded from the store at close (NULL if that failed). */
void coord_selection_add(struct rt_coord *c, const struct rt_store_trace *row,
			 const struct rt_decoded_trace *decoded);
/* Decode a trace's stored slices (inside the loop's transaction). 0 or -1. */
int coord_decode_stored(struct rt_coord *c, uint64_t hi, uint64_t lo,
			struct rt_decoded_trace *out);
/* Close the window when its time is up; expire operator alarms. */
void coord_selection_tick(struct rt_coord *c, uint64_t now);
/* A text request "alarm ..." (add / list / clear); the reply text goes to out. */
size_t coord_alarm_request(struct rt_coord *c, const char *req, size_t len, char *out,
			   size_t cap);
void coord_selection_figures(struct rt_figures *w, struct rt_coord *c);

/* adaptive.c (docs/adaptive.md): the learner fed by coherent decoded traces,
 * one cycle per batch or window, its policy sent to the agents. */
int coord_adaptive_init(struct rt_coord *c);
void coord_adaptive_free(struct rt_coord *c);
void coord_adaptive_add(struct rt_coord *c, const struct rt_decoded_trace *dt);
void coord_adaptive_tick(struct rt_coord *c, uint64_t now);
void coord_adaptive_registered(struct rt_coord *c, uint32_t agent_id);
size_t coord_adaptive_request(struct rt_coord *c, const char *req, size_t len, char *out,
			      size_t cap);
void coord_adaptive_figures(struct rt_figures *w, struct rt_coord *c);

/* stream.c: continuous export (--export-url). The loop notes each kept trace
 * during a turn and hands the turn's list over after the store commit. */
int coord_stream_open(struct rt_coord *c, char *err, size_t errlen);
void coord_stream_note_kept(struct rt_coord *c, uint64_t hi, uint64_t lo);
void coord_stream_turn_done(struct rt_coord *c, int committed);
void coord_stream_close(struct rt_coord *c);
void coord_stream_figures(struct rt_figures *w, struct rt_coord *c);

/* auth.c (docs/security.md) */
struct rt_figures;
int coord_auth_open(struct rt_coord *c, char *err, size_t errlen); /* TLS, URL policy */
void coord_auth_close(struct rt_coord *c);
uint32_t coord_auth_max_connections(const struct rt_coord *c);
/* 1: handle the request; 0: refused, counted, its reply queued. Sets in->peer. */
int coord_admit_request(struct rt_coord *c, struct coord_in *in);
/* Slices whose sender may speak for their agent id go to admitted (returns how
 * many); the others get a refusal ACK and are counted. */
uint32_t coord_admit_slices(struct rt_coord *c, struct coord_in **batch, uint32_t n,
			    struct coord_in **admitted);
/* 1 if peer may speak for agent_id (TLS: its certificate is agent-N; plain: the
 * id is in the directory); 0 is logged with `what`. */
int coord_auth_agent(struct rt_coord *c, const struct rt_peer *p, uint32_t agent_id,
		     const char *what);
/* An agent control address the coordinator will dial. */
int coord_auth_addr_ok(const struct rt_coord *c, const char *addr);
void coord_auth_figures(struct rt_figures *w, struct rt_coord *c);
/* The name of a phase of the loop's turns (coordinator.c). */
const char *coord_phase_name(enum coord_phase p);

/* batch.c */
void coord_batch_init(struct rt_coord *c);
/* The wait for the next turn: at most until the open batch is due. */
uint64_t coord_batch_wait(const struct rt_coord *c, uint64_t wait_ns);
/* Open the store transaction unless one is open; 0 or a store error. */
int coord_batch_begin(struct rt_coord *c);
/* Keep in's reply until the batch commits (slices; requests that promise durability). */
void coord_batch_hold(struct rt_coord *c, struct coord_in *in);
/* 1 when the open batch must commit now; `quiet`: the turn brought nothing
 * (the senders wait for their ACKs: waiting longer gathers nothing more). */
int coord_batch_due(const struct rt_coord *c, uint64_t now_ns, int quiet);
/* Commit (rc == 0) or roll back (rc != 0: every held durable reply becomes an
 * error ACK), then send every held reply. Returns the outcome (0 committed). */
int coord_batch_finish(struct rt_coord *c, int rc);
void coord_batch_figures(struct rt_figures *w, const struct rt_coord *c);

/* peers.c: the coordinator group's ring, for status (docs/scaling.md) */
int coord_peers_open(struct rt_coord *c, char *err, size_t errlen);
void coord_peers_close(struct rt_coord *c);
/* "load" asked through the loop (not sharded: an operator command) */
size_t coord_peers_load_reply(struct rt_coord *c, char *out, size_t cap);
/* The loop's load, published after each turn for coord_peers_answer. */
void coord_peers_publish_load(struct rt_coord *c);
/* A peer's "load" probe, answered on nng's thread without the loop: the reply
 * (an answer or a refusal), or NULL when the loop must take it (not sharded,
 * or no memory). */
nng_msg *coord_peers_answer(struct rt_coord *c, nng_msg *request);
/* The members this one sees live, as ring seeds (daemon/ring.h), for the ACK of
 * a REGISTER (wire.h); 0 when not sharded. */
uint32_t coord_peers_view(struct rt_coord *c, uint64_t *seeds, uint32_t cap);
void coord_peers_figures(struct rt_figures *w, struct rt_coord *c);

/* coordinator.c */
void coord_send_reply(struct coord_in *in);
void coord_reply(struct rt_coord *c, struct coord_in *in, const void *data, size_t len);
void coord_reply_ack(struct rt_coord *c, struct coord_in *in, int32_t status,
		     const uint64_t *seqs, uint32_t n);

#endif
