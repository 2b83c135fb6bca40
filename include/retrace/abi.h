/*
 * retrace/abi.h — the constants the writers of trace data and its readers share.
 *
 * Owns: the numbers both halves of the system must agree on, in one installed
 * header: the record framing word (written by the client's inline tracepoint,
 * read by the agent and the coordinator), the tracer event magic, types and
 * limits (the two layouts are described in the source tree's shm/frame.h and
 * shm/events.h), the span kinds and status codes (OpenTelemetry's numbers), and
 * the error codes every public call returns. It promises nothing else: no code
 * but two pure inline helpers of the event format (the trigger-name rule and the
 * template id), and it includes no other header of ours, so shm/, the client,
 * the triggers, the coordinator's decoder and exporter and a user's program all
 * include this one file. Changing a value here changes the pool ABI (its version
 * number) or the event format: both halves change together, from here.
 */
#ifndef RETRACE_ABI_H
#define RETRACE_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------- error codes ---- */

/* Returned by every public call (retrace_strerror names them); the daemons' own
 * ranges are in docs/errors.md. */
enum retrace_error {
	RETRACE_OK = 0,
	RETRACE_E_NOPOOL = -1,    /* no shared-memory object with that name */
	RETRACE_E_PERM = -2,      /* permission denied opening the pool */
	RETRACE_E_VERSION = -3,   /* pool ABI version differs from this library */
	RETRACE_E_GEOMETRY = -4,  /* geometry inconsistent or not the one expected */
	RETRACE_E_CORRUPT = -5,   /* bad magic or header fields out of range */
	RETRACE_E_NOTREADY = -6,  /* the agent has not finished creating the pool */
	RETRACE_E_INVAL = -7,     /* a bad argument or malformed input */
	RETRACE_E_FULL = -8,      /* a queue was full: the entry was dropped, counted */
	RETRACE_E_NOTRACE = -9,   /* the calling thread is not in a trace */
	RETRACE_E_AGAIN = -10,    /* re-entered from a signal handler; dropped, counted */
	RETRACE_E_SYS = -11,      /* another system error; errno is kept */
	RETRACE_E_EXISTS = -12,   /* the pool already exists (create) */
};

/* ---------------------------------------------------- record framing ---- */

/* A buffer's payload is frames and a zero end mark; a frame is the word
 * (len << 4) | flags, an optional 8-byte TSC tick (FRAME_TS), then len bytes. A
 * record too long for the rest of a buffer continues in the writer's next one
 * (CONT_NEXT on this chunk, CONT_PREV on the next). */
#define RETRACE_FRAME_VALID 0x1u     /* always set: a zero word is the end mark */
#define RETRACE_FRAME_TS 0x2u        /* a u64 tick follows the word */
#define RETRACE_FRAME_CONT_NEXT 0x4u /* the record continues in the next buffer */
#define RETRACE_FRAME_CONT_PREV 0x8u /* this chunk continues the previous buffer's */
#define RETRACE_FRAME_HDR 4u         /* bytes of the frame header word */
#define RETRACE_FRAME_TERM 4u        /* bytes of the zero end mark after the last frame */

/* ---------------------------------------------------- tracer events ---- */

/* A tracer event is a record whose payload starts with this byte (one msgpack
 * never uses) and a type; its fields follow (shm/events.h in the source tree). */
#define RETRACE_EVENT_MAGIC 0xC1u

enum retrace_event_type {
	RETRACE_EV_SPAN_START = 1,
	RETRACE_EV_SPAN_END = 2,
	RETRACE_EV_ATTR = 3,
	RETRACE_EV_LOG = 4,
	RETRACE_EV_LOG_TEXT = 5,
	RETRACE_EV_TEMPLATE = 6,
	RETRACE_EV_RESOURCE = 7,
	RETRACE_EV_TRIGGER = 8,
};
#define RETRACE_EV_MAX RETRACE_EV_TRIGGER

/* Limits the encoder enforces (longer strings are cut, counted) and the decoder
 * checks (larger = corrupt). */
#define RETRACE_EV_MAX_STR 4096u    /* any one string field */
#define RETRACE_EV_MAX_ARGS 16u     /* arguments of one LOG */
#define RETRACE_EV_MAX_RESOURCE 32u /* resource attributes */

/* A TRIGGER event's name: 1..RETRACE_EV_MAX_TRIGGER_NAME bytes of letters,
 * digits and "-_.:/" (safe in a URL, a shell word, CSV and JSON). The client
 * refuses any other name; the decoder counts any other as corrupt. */
#define RETRACE_EV_MAX_TRIGGER_NAME 63u
static inline int retrace_event_trigger_name_ok(const char *name, size_t len)
{
	size_t i;
	if (len == 0 || len > RETRACE_EV_MAX_TRIGGER_NAME)
		return 0;
	for (i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == ':' || c == '/'))
			return 0;
	}
	return 1;
}

/* FNV-1a, 64-bit: the template id of a format string (never 0), equal on every
 * host for the same text and stable across restarts. */
static inline uint64_t retrace_event_template_id(const char *text)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *text; text++) {
		h ^= (uint8_t)*text;
		h *= 0x100000001b3ull;
	}
	return h ? h : 1;
}
#define RETRACE_EVENT_TEMPLATE_ID(text) retrace_event_template_id(text)

/* ------------------------------------------------ spans (OpenTelemetry) ---- */

/* OpenTelemetry's span kinds, same numbers. */
enum retrace_span_kind {
	RETRACE_SPAN_INTERNAL = 1,
	RETRACE_SPAN_SERVER = 2,
	RETRACE_SPAN_CLIENT = 3,
	RETRACE_SPAN_PRODUCER = 4,
	RETRACE_SPAN_CONSUMER = 5,
};

/* OpenTelemetry's status codes, same numbers. */
enum retrace_span_status {
	RETRACE_STATUS_UNSET = 0,
	RETRACE_STATUS_OK = 1,
	RETRACE_STATUS_ERROR = 2,
};

#endif
