/* cmd_select_eval.h — `retrace select-eval`: replay a dataset through a sampler and
 * print selection-quality metrics next to random sampling at the same budget.
 * argv[0] is the subcommand name; returns the process exit status (0 ok, 1 runtime
 * failure, 2 usage error). Writes results to stdout, errors and progress to stderr. */
#ifndef RETRACE_CMD_SELECT_EVAL_H
#define RETRACE_CMD_SELECT_EVAL_H

int cli_cmd_select_eval(int argc, char **argv);

#endif
