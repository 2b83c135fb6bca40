/* otlp_json.c — reader for OTLP-JSON trace exports (placeholder until implemented). */
#include "dataset_internal.h"

rt_sel_dataset *rt_sel_dataset_read_otlp_json(const char *dir, char *err, size_t errlen)
{
    rt_sel_ds_error(err, errlen, "%s: the otlp-json reader is not implemented yet", dir);
    return NULL;
}
