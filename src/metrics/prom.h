/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition format (version 0.0.4), as node_exporter's
 * textfile collector reads it: "# HELP" and "# TYPE" once per metric family,
 * its samples right after, label values escaped. Pure code: text in memory
 * (prom_begin) or on a stream the caller owns (prom_begin_file).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct Prom {
	FILE *f;
	char *buf;
	size_t len;
	bool failed;        /* OOM, or a caller's invalid name: the text is not returned */
	bool own;           /* f is our memory stream (prom_begin), not the caller's */
	char family[128];   /* the family being written, to check sample names against */
} Prom;

/* Labels are "key", "value" pairs ended by NULL: PROM_LABELS("partition", uuid, "op", "write"). */
#define PROM_LABELS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names, [a-zA-Z_][a-zA-Z0-9_]* (not "__" first) for label names. */
bool prom_metric_name_is_valid(const char *s);
bool prom_label_name_is_valid(const char *s);

int prom_begin(Prom *p);
/* Writes to @f (the caller's; buffered as the caller set it up); end with prom_end_file(). */
void prom_begin_file(Prom *p, FILE *f);
/* Starts a family: "# HELP name help" and "# TYPE name type" (gauge, counter, histogram). */
void prom_family(Prom *p, const char *name, const char *type, const char *help);
/*
 * One sample of the current family. @suffix is appended to the family's name
 * ("" for gauges and counters, "_bucket"/"_sum"/"_count" for histograms).
 * Integral values print as integers, others with 15 significant digits
 * (they are rounded figures), NaN and infinities as NaN, +Inf, -Inf.
 */
void prom_sample(Prom *p, const char *suffix, const char *const *labels, double value);
/*
 * A histogram's samples for one label set: @counts[i] is the number of
 * observations in bucket i (not cumulative), @bounds[i] its upper bound;
 * @counts has @n + 1 entries, the last for +Inf.
 */
void prom_histogram(Prom *p, const char *const *labels, const double *bounds, const uint64_t *counts, size_t n,
		    double sum);
/* The text (malloc'd, NUL-terminated) and its length, or NULL if anything failed. Frees the rest. */
char *prom_end(Prom *p, size_t *ret_len);
/* After prom_begin_file(): flushes @f; 0, -EINVAL for a caller's invalid name, or -errno of the stream. */
int prom_end_file(Prom *p);
