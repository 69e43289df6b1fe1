/* ctl_help.h - per-command help of viewlowerctl (ctl_help.c). */
#ifndef VIEWLOWER_CTL_HELP_H
#define VIEWLOWER_CTL_HELP_H

#include <stdbool.h>
#include <stdio.h>

/* Prints the help of command; false when it has none. */
bool vl__ctl_help(FILE *out, const char *command);

#endif
