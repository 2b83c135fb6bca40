/*
 * tools/select_eval/dataset_read.h — the dataset readers of `retrace select-eval`
 * and bench/select: files in, an rt_sel_dataset (select/select.h) out.
 *
 * Owns: the file formats it reads (Nezha / TrainTicket CSV, OTLP/JSON) and how
 * strictly: no silent partial input.
 *
 * Promises: a dataset built through select/dataset_build.h (traces sorted by
 * start), or NULL with a message naming the file (and the byte or line) in err.
 * The coordinator never reads these files; that is why they live here, not in
 * select/ (docs/architecture.md).
 */
#ifndef RETRACE_TOOLS_DATASET_READ_H
#define RETRACE_TOOLS_DATASET_READ_H

#include "select.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nezha / TrainTicket CSV layout: DIR/trace/HH_MM_trace.csv and DIR/log/HH_MM_log.csv.
 * On failure returns NULL and writes a message into err. Traces are sorted by start.
 * What it skipped (and counted) is in rt_sel_dataset_read_stats (select.h). */
rt_sel_dataset *rt_sel_dataset_read_nezha(const char *dir, char *err, size_t errlen);
/* OTLP/JSON: every *.json / *.jsonl / *.ndjson file under DIR (recursively; DIR may
 * also be one file), each holding one or more ExportTraceServiceRequest objects
 * (a document, or one per line). Spans: resource service.name, name, ids, times,
 * status.code 2 = error; span events are logs (name = body, attributes log.severity
 * and log.template_id). Malformed JSON or a span without valid ids fails the read
 * with "FILE: byte N: what" in err. Traces are sorted by start. */
rt_sel_dataset *rt_sel_dataset_read_otlp_json(const char *dir, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
