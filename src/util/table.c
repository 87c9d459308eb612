/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"
#include "util/table.h"

struct Table {
	size_t n_cols, n_rows;
	char **cells; /* row-major, row 0 the headers */
};

Table *table_free(Table *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < (t->n_rows + 1) * t->n_cols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
	return NULL;
}

static int add(Table *t, const char *const *cells, size_t row)
{
	char **nc = realloc(t->cells, (row + 1) * t->n_cols * sizeof(char *));

	if (!nc)
		return -ENOMEM;
	t->cells = nc;
	for (size_t c = 0; c < t->n_cols; c++) {
		/* Cells come from labels, device strings and the plugin's answers: no terminal control gets through. */
		t->cells[row * t->n_cols + c] = text_escape_dup(cells[c] ? cells[c] : "-", false);
		if (!t->cells[row * t->n_cols + c]) {
			for (size_t k = 0; k < c; k++)
				free(t->cells[row * t->n_cols + k]);
			return -ENOMEM;
		}
	}
	return 0;
}

Table *table_new(const char *const *headers)
{
	Table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	while (headers[t->n_cols])
		t->n_cols++;
	if (add(t, headers, 0) < 0) {
		free(t->cells);
		free(t);
		return NULL;
	}
	return t;
}

int table_add_row(Table *t, const char *const *cells)
{
	int r = add(t, cells, t->n_rows + 1);

	if (r == 0)
		t->n_rows++;
	return r;
}

void table_print(const Table *t, FILE *f)
{
	size_t *w = calloc(t->n_cols, sizeof(size_t));

	if (!w)
		return;
	for (size_t r = 0; r <= t->n_rows; r++)
		for (size_t c = 0; c < t->n_cols; c++) {
			size_t n = strlen(t->cells[r * t->n_cols + c]);
			if (n > w[c])
				w[c] = n;
		}
	for (size_t r = 0; r <= t->n_rows; r++) {
		for (size_t c = 0; c < t->n_cols; c++) {
			const char *s = t->cells[r * t->n_cols + c];
			if (c + 1 == t->n_cols)
				fprintf(f, "%s\n", s);
			else
				fprintf(f, "%-*s  ", (int)w[c], s);
		}
	}
	free(w);
}
