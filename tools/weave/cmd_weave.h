/* cmd_weave.h — `retrace weave FILE`: reconstruct offline the links that hops without
 * context propagation cut, in an OTLP/JSON file, and print the reconstructed traces
 * with a confidence per link and per callee service (--out writes the file back with
 * the links applied). argv[0] is the subcommand name; returns the exit status (0 ok,
 * 1 failure, 2 usage). */
#ifndef RETRACE_CMD_WEAVE_H
#define RETRACE_CMD_WEAVE_H

int cli_cmd_weave(int argc, char **argv);

#endif
