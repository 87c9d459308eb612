/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/prom.h"
#include "util/macro.h"

static bool name_chars_valid(const char *s, bool colon)
{
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');

		if (!alpha && !(p > s && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

bool prom_metric_name_is_valid(const char *s)
{
	return name_chars_valid(s, true);
}

bool prom_label_name_is_valid(const char *s)
{
	/* Names starting with "__" are reserved for Prometheus itself. */
	return name_chars_valid(s, false) && strncmp(s, "__", 2) != 0;
}

int prom_begin(Prom *p)
{
	*p = (Prom){ .own = true };
	p->f = open_memstream(&p->buf, &p->len);
	return p->f ? 0 : -ENOMEM;
}

void prom_begin_file(Prom *p, FILE *f)
{
	*p = (Prom){ .f = f };
	/* One thread writes the stream: no lock per character (most of a write's CPU otherwise). */
	(void)__fsetlocking(f, FSETLOCKING_BYCALLER);
}

/* Backslash and newline escaped, and the double quote in label values (not in HELP text); runs between them in one write. */
static void put_escaped(FILE *f, const char *s, bool quote)
{
	const char *special = quote ? "\\\"\n" : "\\\n";

	for (;;) {
		size_t n = strcspn(s, special);

		if (n > 0)
			fwrite(s, 1, n, f);
		s += n;
		if (!*s)
			return;
		fputs(*s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\", f);
		s++;
	}
}

/* @v (an integer below 2^53 in magnitude, not -0) in decimal, as "%.0f" prints it, without the floating-point formatter. */
static void put_integer(FILE *f, double v)
{
	char buf[24], *p = buf + sizeof(buf);
	bool neg = v < 0;
	uint64_t u = (uint64_t)(neg ? -v : v);

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (neg)
		*--p = '-';
	fwrite(p, 1, (size_t)(buf + sizeof(buf) - p), f);
}

static void put_value(FILE *f, double v)
{
	if (isnan(v))
		fputs("NaN", f);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", f);
	else if (!islessgreater(v, trunc(v)) && fabs(v) < 9007199254740992.0)
		/* An integral v with its sign bit below 1 is -0, which "%.0f" prints as such. */
		signbit(v) && fabs(v) < 1 ? (void)fputs("-0", f) : put_integer(f, v);
	else
		fprintf(f, "%.15g", v);
}

void prom_family(Prom *p, const char *name, const char *type, const char *help)
{
	if (p->failed)
		return;
	if (!prom_metric_name_is_valid(name) || strlen(name) >= sizeof(p->family) - 8) {
		p->failed = true;
		return;
	}
	strcpy(p->family, name);
	fprintf(p->f, "# HELP %s ", name);
	put_escaped(p->f, help, false);
	fprintf(p->f, "\n# TYPE %s %s\n", name, type);
}

static void put_labels(Prom *p, const char *const *labels, const char *le)
{
	bool any = false;

	for (size_t i = 0; labels && labels[i]; i += 2) {
		if (!labels[i + 1] || !prom_label_name_is_valid(labels[i])) {
			p->failed = true;
			return;
		}
		fprintf(p->f, "%s%s=\"", any ? "," : "{", labels[i]);
		put_escaped(p->f, labels[i + 1], true);
		fputc('"', p->f);
		any = true;
	}
	if (le) {
		fprintf(p->f, "%sle=\"%s\"", any ? "," : "{", le);
		any = true;
	}
	if (any)
		fputc('}', p->f);
}

static void sample(Prom *p, const char *suffix, const char *const *labels, const char *le, double value)
{
	if (p->failed || !p->family[0])
		return;
	fprintf(p->f, "%s%s", p->family, suffix);
	put_labels(p, labels, le);
	fputc(' ', p->f);
	put_value(p->f, value);
	fputc('\n', p->f);
}

void prom_sample(Prom *p, const char *suffix, const char *const *labels, double value)
{
	sample(p, suffix, labels, NULL, value);
}

void prom_histogram(Prom *p, const char *const *labels, const double *bounds, const uint64_t *counts, size_t n,
		    double sum)
{
	uint64_t cum = 0;
	char le[32];

	for (size_t i = 0; i < n; i++) {
		cum += counts[i];
		snprintf(le, sizeof(le), "%.15g", bounds[i]);
		sample(p, "_bucket", labels, le, (double)cum);
	}
	cum += counts[n];
	sample(p, "_bucket", labels, "+Inf", (double)cum);
	sample(p, "_sum", labels, NULL, sum);
	sample(p, "_count", labels, NULL, (double)cum);
}

char *prom_end(Prom *p, size_t *ret_len)
{
	char *out;

	if (!p->f || !p->own)
		return NULL;
	if (fclose(p->f) != 0)
		p->failed = true;
	p->f = NULL;
	out = TAKE_PTR(p->buf);
	if (p->failed || !out) {
		free(out);
		return NULL;
	}
	if (ret_len)
		*ret_len = p->len;
	return out;
}

int prom_end_file(Prom *p)
{
	FILE *f = TAKE_PTR(p->f);

	if (!f || p->own)
		return -EINVAL;
	if (fflush(f) != 0)
		return negative_errno();
	if (ferror(f))
		return -EIO;
	return p->failed ? -EINVAL : 0;
}
