/*
 * shm/events.h — the record format of tracer events (spans, attributes, logs).
 *
 * Owns: the byte layout the client's tracer (client/tracer.c) writes into a
 * record and the coordinator's decoder (coordinator/decode.c) reads back. Raw
 * retrace_tracepoint() records share the same buffers; this header says how the
 * two are told apart. No policy, no code: constants only.
 *
 * A tracer event is one framed record (shm/frame.h) whose payload is
 *
 *     0xC1  TYPE  FIELD...
 *
 * 0xC1 is the one byte msgpack never uses, so a msgpack-encoded raw record can
 * never look like an event; a raw record of arbitrary bytes that happens to start
 * with 0xC1 and a known TYPE is decoded as an event and, unless its fields decode
 * exactly, counted as corrupt. FIELDs are consecutive msgpack objects (no
 * enclosing array): the decoder reads exactly the fields of TYPE, in order, and
 * the record must end right after the last one (trailing bytes = corrupt), except
 * for the variable tails noted below. Integers may use any msgpack integer width;
 * the client uses the fixed 9-byte form for ids and ticks (cheaper to write) and
 * the smallest form for the rest.
 *
 * Ticks are TSC ticks of the writing host; the slice carries the calibration
 * (rt_wire_slice_tick_ns turns them into Unix nanoseconds).
 *
 *   SPAN_START  span_id:u64  parent_id:u64 (0 = none)  kind:u8  tick:u64  name:str
 *               [p16:u16]  (only when the adaptive policy table kept the span
 *               with probability p16 / 65535 < 1; 65535 is never written)
 *   SPAN_END    span_id:u64  tick:u64  status:u8  [code:i64  message:str]  [adj:i64]
 *               (the code and message follow only when status == ERROR; adj,
 *               never 0 when present, is the ticks of spans the policy dropped
 *               under this one, to take off its exclusive time: the decoder's
 *               rt_span.dropped_ns, docs/adaptive.md "Self time")
 *   ATTR        span_id:u64  key:str  value:(str | int | float64 | bool)
 *   LOG         span_id:u64 (0 = outside any span)  tick:u64  level:u8
 *               template_id:u64  arg... (the rest of the record: each one of
 *               str | int | float64 | bool | nil, in the template's order)
 *   LOG_TEXT    span_id:u64  tick:u64  level:u8  text:str
 *   TEMPLATE    template_id:u64  text:str   (the printf-style format string)
 *   RESOURCE    pid:u32  map{str: str | int | float64 | bool}
 *               (service.name, host.name, process.pid, user attributes)
 *   TRIGGER     trigger_id:u32  name:str  (1..63 bytes of [A-Za-z0-9-_.:/])
 *               the trace fired this user trigger, named by the process with
 *               retrace_trigger_name(); written once at the trace's end by the
 *               thread that ends it. The coordinator keeps id -> name.
 *
 * Self-description: every writer stream (the buffers one begin..end run wrote:
 * one (pid, tid) of one host, where tid is the stream id of shm/pool.h) carries
 * a RESOURCE event before its first other event, and a TEMPLATE event before the
 * first LOG of each template in that stream, so a slice decodes without any other
 * source. Template ids are the 64-bit FNV-1a hash of the format string
 * (RETRACE_EVENT_TEMPLATE_ID), so they are equal on every host for the same text
 * and stable across restarts.
 */
#ifndef RETRACE_SHM_EVENTS_H
#define RETRACE_SHM_EVENTS_H

#include <stddef.h>
#include <stdint.h>

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
#define RETRACE_EV_MAX_STR 4096u  /* any one string field */
#define RETRACE_EV_MAX_ARGS 16u   /* arguments of one LOG */
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

/* FNV-1a, 64-bit: the template id of a format string (never 0). */
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

#endif
