/* SPDX-License-Identifier: MIT */
/* Plain-text tables for the command line: columns padded to their widest cell. */
#pragma once

#include <stdio.h>

typedef struct Table Table;

/* A table with the given column headers (NULL-terminated). */
Table *table_new(const char *const *headers);
Table *table_free(Table *t);
/* Appends a row of as many cells as there are columns (NULL prints "-"); copies them, escaped (text_escape()). */
int table_add_row(Table *t, const char *const *cells);
void table_print(const Table *t, FILE *f);
