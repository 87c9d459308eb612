/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/volume-options.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"

static const char *const policy_names[_SELFTEST_POLICY_MAX] = {
	[SELFTEST_POLICY_UNSET] = "default",
	[SELFTEST_POLICY_OFF] = "off",
	[SELFTEST_POLICY_WARN] = "warn",
	[SELFTEST_POLICY_ENFORCE] = "enforce",
};

const char *manager_selftest_to_string(SelftestPolicy p)
{
	if (p < 0 || p >= _SELFTEST_POLICY_MAX)
		return NULL;
	return policy_names[p];
}

SelftestPolicy manager_selftest_from_string(const char *s)
{
	/* "default" is not accepted from users: leaving the option out means that. */
	for (int i = SELFTEST_POLICY_OFF; i < _SELFTEST_POLICY_MAX; i++)
		if (s && streq(s, policy_names[i]))
			return (SelftestPolicy)i;
	return _SELFTEST_POLICY_INVALID;
}

bool volume_name_is_valid(const char *name)
{
	size_t n;

	if (!name)
		return false;
	n = strlen(name);
	if (n < 2 || n > VOLUME_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (alnum)
			continue;
		if (i > 0 && (c == '_' || c == '.' || c == '-'))
			continue;
		return false;
	}
	return true;
}

const char *volume_options_valid_keys(void)
{
	return "partition (label or UUID), node (host name), uid, gid, mode (octal), size (e.g. 10G; units K, M, G, T), "
	       "inodes, selftest (off|warn|enforce), " SELFTEST_THRESHOLD_KEYS ", "
	       "health (off|warn|enforce), "
	       "suid (true|false), dev (true|false), "
	       "from (a volume to clone), clone_copy (true|false)";
}

static bool partition_ref_is_valid(const char *s)
{
	size_t n = strlen(s);

	/* XFS labels are at most 12 bytes; UUIDs are 36. Printable, no separators. */
	if (n == 0 || n > PARTITION_REF_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '/' || s[i] == ',' || s[i] == '=')
			return false;
	return true;
}

/*
 * A host name as swarm's node.hostname shows it: letters, digits, '-', '.' and
 * '_' (some hosts have one), starting with a letter or digit, at most 64 bytes.
 * Stored in lower case: host names compare without case, as swarm's
 * constraints do.
 */
static int parse_node(const char *val, char *ret, char **reterr_msg)
{
	size_t n = strlen(val);
	char c;

	if (n == 0 || n > NODE_NAME_MAX)
		goto invalid;
	for (size_t i = 0; i < n; i++) {
		c = val[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      (i > 0 && (c == '-' || c == '.' || c == '_'))))
			goto invalid;
		ret[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
	}
	ret[n] = '\0';
	return 0;
invalid:
	return errmsg_set(reterr_msg, -EINVAL,
			  "invalid node '%s': expected the host name of the node that may create the volume (as "
			  "'docker node ls' shows it: letters, digits, '-', '.', '_'; at most %d characters)",
			  val, NODE_NAME_MAX);
}

/* Every threshold option: where it goes and its range. Ratios are shares (min_*) or multiples (max_*) of the baseline. */
static const struct {
	const char *key;
	size_t offset;
	double min, max;
	const char *what;
} threshold_table[] = {
	{ "min_write_mbps", offsetof(SelftestThresholds, min_write_mbps), 0.001, 1e9, "a number" },
	{ "min_read_mbps", offsetof(SelftestThresholds, min_read_mbps), 0.001, 1e9, "a number" },
	{ "min_iops", offsetof(SelftestThresholds, min_iops), 0.001, 1e9, "a number" },
	{ "max_p99_ms", offsetof(SelftestThresholds, max_p99_ms), 0.001, 1e9, "a number" },
	{ "min_write_ratio", offsetof(SelftestThresholds, min_write_ratio), 0.01, 1, "a share of the partition's baseline" },
	{ "min_read_ratio", offsetof(SelftestThresholds, min_read_ratio), 0.01, 1, "a share of the partition's baseline" },
	{ "min_iops_ratio", offsetof(SelftestThresholds, min_iops_ratio), 0.01, 1, "a share of the partition's baseline" },
	{ "max_p99_ratio", offsetof(SelftestThresholds, max_p99_ratio), 1, 1000, "a multiple of the partition's baseline" },
};

static double *threshold_field(SelftestThresholds *t, size_t i)
{
	return (double *)((char *)t + threshold_table[i].offset);
}

int selftest_threshold_parse(const char *key, const char *val, SelftestThresholds *t, char **reterr_msg)
{
	for (size_t i = 0; i < ELEMENTSOF(threshold_table); i++) {
		const char *dot;
		double v;

		if (!streq(key, threshold_table[i].key))
			continue;
		/* At most 3 decimals: the canonical form ("%.3f", zeros stripped) round-trips exactly. */
		dot = strchr(val, '.');
		if (parse_decimal(val, &v) < 0 || v < threshold_table[i].min || v > threshold_table[i].max ||
		    (dot && strlen(dot + 1) > 3))
			return errmsg_set(reterr_msg, -EINVAL,
					  "invalid value '%s' for option %s: expected %s from %.15g to %.15g with at most 3 decimals, e.g. %s=%s",
					  val, key, threshold_table[i].what, threshold_table[i].min, threshold_table[i].max, key,
					  threshold_table[i].max <= 1 ? "0.7" : threshold_table[i].min >= 1 ? "3" : "100");
		*threshold_field(t, i) = v;
		return 0;
	}
	return -ENOENT;
}

void selftest_thresholds_merge(SelftestThresholds *base, const SelftestThresholds *over)
{
	for (size_t i = 0; i < ELEMENTSOF(threshold_table); i++) {
		double v = *threshold_field((SelftestThresholds *)over, i);

		if (v > 0)
			*threshold_field(base, i) = v;
	}
}

static int parse(const json_t *opts, VolumeOptions *ret, CloneRequest *ret_clone, char **reterr_msg)
{
	VolumeOptions o = { 0 };
	CloneRequest c = { 0 };
	bool has_copy = false;
	const char *key;
	json_t *value;
	int r;

	if (opts && json_is_null(opts))
		opts = NULL;
	if (opts && !json_is_object(opts))
		return errmsg_set(reterr_msg, -EINVAL, "Opts must be an object of string values");
	if (opts && json_object_size(opts) > OPTIONS_MAX_COUNT)
		return errmsg_set(reterr_msg, -EINVAL, "too many options (%zu, at most %d)", json_object_size(opts),
			    OPTIONS_MAX_COUNT);

	json_object_foreach((json_t *)opts, key, value) {
		const char *val;

		if (!json_is_string(value))
			return errmsg_set(reterr_msg, -EINVAL, "option '%s' must be a string", key);
		val = json_string_value(value);
		if (strlen(key) > 64 || !string_is_printable_ascii(key))
			return errmsg_set(reterr_msg, -EINVAL, "invalid option name; valid options: %s", volume_options_valid_keys());
		if (json_string_length(value) > OPTION_VALUE_MAX - 1 || strlen(val) != json_string_length(value) ||
		    !string_is_printable_ascii(val))
			return errmsg_set(reterr_msg, -EINVAL, "invalid value for option %s: printable ASCII only, at most %d characters",
				    key, OPTION_VALUE_MAX - 1);

		if (streq(key, "partition")) {
			if (!partition_ref_is_valid(val))
				return errmsg_set(reterr_msg, -EINVAL, "invalid partition '%s': give a filesystem label or UUID", val);
			strcpy(o.partition, val);
		} else if (streq(key, "node")) {
			r = parse_node(val, o.node, reterr_msg);
			if (r < 0)
				return r;
		} else if (streq(key, "uid")) {
			if (parse_u32(val, &o.uid) < 0 || o.uid == UINT32_MAX)
				return errmsg_set(reterr_msg, -EINVAL, "invalid uid '%s': expected a number from 0 to 4294967294", val);
			o.has_uid = true;
		} else if (streq(key, "gid")) {
			if (parse_u32(val, &o.gid) < 0 || o.gid == UINT32_MAX)
				return errmsg_set(reterr_msg, -EINVAL, "invalid gid '%s': expected a number from 0 to 4294967294", val);
			o.has_gid = true;
		} else if (streq(key, "mode")) {
			if (parse_mode(val, &o.mode) < 0)
				return errmsg_set(reterr_msg, -EINVAL, "invalid mode '%s': expected octal permission bits such as 0755 or 0700",
					    val);
			o.has_mode = true;
		} else if (streq(key, "size")) {
			r = parse_size(val, &o.size_bytes);
			if (r < 0 || o.size_bytes == 0)
				return errmsg_set(reterr_msg, -EINVAL, "invalid size '%s': expected a whole number with a unit K, M, G or T, e.g. size=10G",
					    val);
			if (o.size_bytes < (1u << 20))
				return errmsg_set(reterr_msg, -EINVAL, "invalid size '%s': the smallest limit is 1M", val);
		} else if (streq(key, "inodes")) {
			if (parse_u64(val, &o.inodes) < 0 || o.inodes == 0)
				return errmsg_set(reterr_msg, -EINVAL, "invalid inodes '%s': expected a positive whole number", val);
		} else if (streq(key, "selftest")) {
			o.selftest = manager_selftest_from_string(val);
			if (o.selftest < 0)
				return errmsg_set(reterr_msg, -EINVAL, "invalid selftest '%s': expected off, warn or enforce", val);
		} else if (streq(key, "health")) {
			o.health = device_policy_mode_from_string(val);
			if (o.health < 0)
				return errmsg_set(reterr_msg, -EINVAL, "invalid health '%s': expected off, warn or enforce", val);
		} else if (streq(key, "suid") || streq(key, "dev")) {
			bool *flag = streq(key, "suid") ? &o.allow_suid : &o.allow_devices;
			if (!streq(val, "true") && !streq(val, "false"))
				return errmsg_set(reterr_msg, -EINVAL, "invalid %s '%s': expected true or false (default false: the volume is mounted %s)",
						  key, val, streq(key, "suid") ? "nosuid" : "nodev");
			*flag = streq(val, "true");
		} else if (ret_clone && streq(key, "from")) {
			if (!volume_name_is_valid(val))
				return errmsg_set(reterr_msg, -EINVAL, "invalid from '%s': expected the name of the volume to clone", val);
			strcpy(c.from, val);
		} else if (ret_clone && streq(key, "clone_copy")) {
			if (!streq(val, "true") && !streq(val, "false"))
				return errmsg_set(reterr_msg, -EINVAL,
						  "invalid clone_copy '%s': expected true (copy the data where the partition cannot share blocks) or false",
						  val);
			c.copy = streq(val, "true");
			has_copy = true;
		} else {
			r = selftest_threshold_parse(key, val, &o.thresholds, reterr_msg);
			if (r == -ENOENT)
				return errmsg_set(reterr_msg, -EINVAL, "unknown option '%s'; valid options: %s", key,
						  volume_options_valid_keys());
			if (r < 0)
				return r;
		}
	}
	if (has_copy && !c.from[0])
		return errmsg_set(reterr_msg, -EINVAL, "clone_copy only applies to a clone: add from=SOURCE");

	*ret = o;
	if (ret_clone)
		*ret_clone = c;
	return 0;
}

int volume_options_parse(const json_t *opts, VolumeOptions *ret, char **reterr_msg)
{
	return parse(opts, ret, NULL, reterr_msg);
}

int volume_options_parse_create(const json_t *opts, VolumeOptions *ret, CloneRequest *ret_clone, char **reterr_msg)
{
	return parse(opts, ret, ret_clone, reterr_msg);
}

static int set_str(json_t *obj, const char *key, const char *val)
{
	return json_object_set_new(obj, key, json_string(val));
}

/* "%.3f" without trailing zeros or dot: 100 → "100", 0.5 → "0.5"; never an exponent. */
static int set_decimal(json_t *obj, const char *key, double v)
{
	char buf[64];
	size_t n;

	snprintf(buf, sizeof(buf), "%.3f", v);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	return set_str(obj, key, buf);
}

static int set_fmt(json_t *obj, const char *key, const char *fmt, ...) _printf_(3, 4);
static int set_fmt(json_t *obj, const char *key, const char *fmt, ...)
{
	char buf[64];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return set_str(obj, key, buf);
}

void selftest_thresholds_to_json(const SelftestThresholds *t, json_t *obj)
{
	for (size_t i = 0; i < ELEMENTSOF(threshold_table); i++) {
		double v = *threshold_field((SelftestThresholds *)t, i);

		if (v > 0)
			set_decimal(obj, threshold_table[i].key, v);
	}
}

json_t *volume_options_to_json(const VolumeOptions *o)
{
	json_t *j = json_object();
	char buf[32];

	if (!j)
		return NULL;
	if (o->partition[0])
		set_str(j, "partition", o->partition);
	if (o->node[0])
		set_str(j, "node", o->node);
	if (o->has_uid)
		set_fmt(j, "uid", "%u", o->uid);
	if (o->has_gid)
		set_fmt(j, "gid", "%u", o->gid);
	if (o->has_mode)
		set_fmt(j, "mode", "%04o", (unsigned)o->mode);
	if (o->size_bytes) {
		format_size(o->size_bytes, buf, sizeof(buf));
		set_str(j, "size", buf);
	}
	if (o->inodes)
		set_fmt(j, "inodes", "%llu", (unsigned long long)o->inodes);
	if (o->selftest != SELFTEST_POLICY_UNSET)
		set_str(j, "selftest", manager_selftest_to_string(o->selftest));
	if (o->health != DEVICE_POLICY_UNSET)
		set_str(j, "health", device_policy_mode_to_string(o->health));
	selftest_thresholds_to_json(&o->thresholds, j);
	/* "false" is the default and is left out, so that suid=false equals no option. */
	if (o->allow_suid)
		set_str(j, "suid", "true");
	if (o->allow_devices)
		set_str(j, "dev", "true");
	return j;
}

char *volume_options_diff(const VolumeOptions *existing, const VolumeOptions *requested)
{
	json_t *a = volume_options_to_json(existing);
	json_t *b = volume_options_to_json(requested);
	char *out = NULL;
	size_t len = 0;
	FILE *f;
	const char *key;
	json_t *v;

	if (!a || !b)
		goto done;
	f = open_memstream(&out, &len);
	if (!f)
		goto done;
	json_object_foreach(a, key, v) {
		json_t *w = json_object_get(b, key);
		if (!w)
			fprintf(f, "%s%s: %s (existing) vs not set (requested)", ftell(f) ? "; " : "", key,
				json_string_value(v));
		else if (!json_equal(v, w))
			fprintf(f, "%s%s: %s (existing) vs %s (requested)", ftell(f) ? "; " : "", key,
				json_string_value(v), json_string_value(w));
	}
	json_object_foreach(b, key, v)
		if (!json_object_get(a, key))
			fprintf(f, "%s%s: not set (existing) vs %s (requested)", ftell(f) ? "; " : "", key,
				json_string_value(v));
	if (fclose(f) != 0) {
		free(out);
		out = NULL;
	} else if (out && out[0] == '\0') {
		free(out);
		out = NULL;
	}
done:
	json_decref(a);
	json_decref(b);
	return out;
}

/* Copies the field that @key names from @from to @to; clears it in @to if @from is NULL. */
static void copy_option(VolumeOptions *to, const VolumeOptions *from, const char *key)
{
	static const VolumeOptions none = { 0 };

	if (!from)
		from = &none;
	if (streq(key, "size"))
		to->size_bytes = from->size_bytes;
	else if (streq(key, "inodes"))
		to->inodes = from->inodes;
	else if (streq(key, "selftest"))
		to->selftest = from->selftest;
	else if (streq(key, "min_write_mbps"))
		to->thresholds.min_write_mbps = from->thresholds.min_write_mbps;
	else if (streq(key, "min_read_mbps"))
		to->thresholds.min_read_mbps = from->thresholds.min_read_mbps;
	else if (streq(key, "min_iops"))
		to->thresholds.min_iops = from->thresholds.min_iops;
	else if (streq(key, "max_p99_ms"))
		to->thresholds.max_p99_ms = from->thresholds.max_p99_ms;
	else if (streq(key, "suid"))
		to->allow_suid = from->allow_suid;
	else if (streq(key, "dev"))
		to->allow_devices = from->allow_devices;
}

int volume_options_change(const VolumeOptions *cur, const json_t *changes, const char *const *allowed,
			  VolumeOptions *ret, char **reterr_msg)
{
	VolumeOptions o = *cur;
	const char *key;
	json_t *value;

	if (!json_is_object(changes) || json_object_size(changes) == 0)
		return errmsg_set(reterr_msg, -EINVAL, "no change given");
	if (json_object_size(changes) > OPTIONS_MAX_COUNT)
		return errmsg_set(reterr_msg, -EINVAL, "too many changes (at most %d)", OPTIONS_MAX_COUNT);
	json_object_foreach((json_t *)changes, key, value) {
		_cleanup_free_ char *list = NULL;
		VolumeOptions parsed;
		bool ok = false;
		size_t len = 0;
		FILE *f;
		json_t *one;
		int r;

		for (const char *const *a = allowed; *a; a++)
			ok = ok || streq(key, *a);
		if (!ok) {
			f = open_memstream(&list, &len);
			for (const char *const *a = allowed; f && *a; a++)
				fprintf(f, "%s%s", a == allowed ? "" : ", ", *a);
			if (!f || fclose(f) != 0)
				return -ENOMEM;
			return errmsg_set(reterr_msg, -EINVAL, "'%.64s' cannot be changed here; this command changes: %s", key, list);
		}
		if (json_is_string(value) && streq(json_string_value(value), "none")) {
			copy_option(&o, NULL, key);
			continue;
		}
		/* The same checks as at create, one key at a time. */
		one = json_pack("{sO}", key, value);
		if (!one)
			return -ENOMEM;
		r = volume_options_parse(one, &parsed, reterr_msg);
		json_decref(one);
		if (r < 0)
			return r;
		copy_option(&o, &parsed, key);
	}
	*ret = o;
	return 0;
}
