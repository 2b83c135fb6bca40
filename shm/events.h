/*
 * shm/events.h — the record format of tracer events (spans, attributes, logs).
 *
 * Owns: the byte layout the client's tracer (client/tracer.c) writes into a
 * record and the coordinator's decoder (coordinator/decode.c) reads back. Raw
 * retrace_tracepoint() records share the same buffers; this header says how the
 * two are told apart. No policy, no code: the layout only (its constants are in
 * retrace/abi.h).
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

/* The magic byte, the event types, the limits, the trigger-name rule and the
 * template id are constants the installed headers need too: they are in
 * retrace/abi.h, the one home of each. This header is the layout above. */
#include "retrace/abi.h"

#endif
