#include "cli.h"
int cmd_validate(int argc, char **argv) { (void)argc; (void)argv; return 2; }
