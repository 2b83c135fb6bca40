/* main.c — standalone `retrace-select-eval`, same as `retrace select-eval`. */
#include "cmd_select_eval.h"

int main(int argc, char **argv) { return cli_cmd_select_eval(argc, argv); }
