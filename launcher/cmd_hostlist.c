#include "cli.h"
int cmd_hostlist(int argc, char **argv) { (void)argc; (void)argv; return 2; }
