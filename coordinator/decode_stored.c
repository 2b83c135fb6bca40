/*
 * coordinator/decode_stored.c — a stored trace, decoded: the one place that
 * feeds a trace's slices from a store (rt_store_slices) into a decoder. The
 * coordinator's closing rule, its exporter and every `retrace` command that
 * reads spans (show, export, estimate) use it.
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "store.h"

static int feed_decoder(void *arg, const struct rt_store_slice *sl)
{
	return rt_decoder_add_message(arg, sl->msg, sl->msg_len) != 0 ? -1 : 0;
}

int rt_decode_stored(struct rt_store *s, uint64_t hi, uint64_t lo, struct rt_decoded_trace *out,
		     char *err, size_t errlen)
{
	struct rt_decoder *d = rt_decoder_new(hi, lo);
	int rc;
	memset(out, 0, sizeof *out);
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = rt_store_slices(s, hi, lo, feed_decoder, d);
	if (rc != 0) {
		/* -1 from feed_decoder is the decoder's out of memory */
		snprintf(err, errlen, "%s", rc == -1 ? "out of memory" : rt_store_errmsg(s));
		rt_decoder_free(d);
		return -1;
	}
	if (rt_decoder_finish(d, out) != 0) {
		snprintf(err, errlen, "out of memory while decoding");
		return -1;
	}
	return 0;
}
