/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd-devices.h"
#include "config.h"
#include "device-policy.h"
#include "device-report.h"
#include "device.h"
#include "mount.h"
#include "nvme-health.h"
#include "probe.h"
#include "xfs-geometry.h"
#include "util/macro.h"
#include "util/strutil.h"

#define EXIT_USAGE 2

DEFINE_CLEANUP_FUNC(Config *, config_free)

static void help(FILE *f)
{
	fputs("Usage: nvmevol devices [OPTIONS]\n"
	      "\n"
	      "Lists the partitions nvmevol would put in its pool (XFS labels starting with\n"
	      "the prefix, and NVMEVOL_DEVICES), with the facts of the device under each\n"
	      "(transport, model, serial, firmware, block sizes, alignment, write cache),\n"
	      "NVMe health (SMART / Health log), XFS geometry where the filesystem is\n"
	      "mounted, and whether nvmevol would use it, and why not. Needs root.\n"
	      "\n"
	      "Options (default: the NVMEVOL_* variable of the same name, else the plugin's default):\n"
	      "  --json                  print JSON instead of a table\n"
	      "  --label-prefix PREFIX   NVMEVOL_LABEL_PREFIX (nvmevol)\n"
	      "  --devices LIST          NVMEVOL_DEVICES: /dev paths, UUID=..., LABEL=..., comma-separated\n"
	      "  --require-nvme MODE     NVMEVOL_REQUIRE_NVME: off, warn or enforce (warn)\n"
	      "  --health MODE           NVMEVOL_HEALTH: off, warn or enforce (warn)\n"
	      "  -h, --help              show this help\n"
	      "\n"
	      "Exit status: 0 listed (whatever the verdicts), 1 failure, 2 usage error.\n",
	      f);
}

_printf_(1, 2) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("nvmevol devices: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'nvmevol devices --help'.\n", stderr);
	return EXIT_USAGE;
}

typedef struct Candidate {
	ProbedDevice probed;
	bool have_facts, have_xfs, have_health;
	DeviceFacts facts;
	XfsGeometry xfs;
	NvmeHealth health;
	char *mounted_at;
	char *problem;       /* why the facts or the filesystem are unusable, before any policy */
	char *health_error;
	DeviceDecision decision;
} Candidate;

static void candidate_done(Candidate *c)
{
	probed_device_done(&c->probed);
	free(c->mounted_at);
	free(c->problem);
	free(c->health_error);
}

static void evaluate(const Config *cfg, Candidate *c)
{
	const ProbedDevice *p = &c->probed;
	MountEntry e = { 0 };
	int r;

	if (!p->fstype) {
		if (asprintf(&c->problem, "no filesystem found, or the entry does not resolve to a device") < 0)
			c->problem = NULL;
		return;
	}
	if (!streq(p->fstype, "xfs")) {
		if (asprintf(&c->problem, "holds %s, not xfs; nvmevol leaves it alone", p->fstype) < 0)
			c->problem = NULL;
		return;
	}
	r = device_facts_read(p->device, &c->facts, &c->problem);
	if (r < 0)
		return;
	c->have_facts = true;

	if (c->facts.nvme_controller[0]) {
		r = nvme_health_read(c->facts.nvme_controller, c->facts.nvme_controller_devnum, &c->health,
				     &c->health_error);
		c->have_health = r == 0;
	}
	/* Geometry only from a mount this process can see (the plugin's own mounts live in its namespace). */
	if (mountinfo_find_device(c->facts.devnum, &e) == 0) {
		_cleanup_close_ int fd = open(e.target, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

		c->mounted_at = strdup(e.target);
		if (fd >= 0 && xfs_geometry_read(fd, &c->xfs) == 0)
			c->have_xfs = true;
		mount_entry_done(&e);
	}

	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = cfg->require_nvme, .health = cfg->health },
			       &(DeviceInputs){
				       .facts = &c->facts,
				       .uuid = p->uuid,
				       .listed = p->listed,
				       .xfs = c->have_xfs ? &c->xfs : NULL,
				       .health = c->have_health ? &c->health : NULL,
				       .health_error = c->health_error,
			       },
			       &c->decision);
}

static const char *use_word(const Candidate *c)
{
	if (!c->have_facts)
		return "no";
	switch (c->decision.verdict) {
	case DEVICE_VERDICT_USE:
		return "yes";
	case DEVICE_VERDICT_WARN:
		return "yes, warn";
	default:
		return "no";
	}
}

static json_t *candidate_json(const Candidate *c)
{
	json_t *j = json_object();
	const ProbedDevice *p = &c->probed;

	json_object_set_new(j, "device", json_string(p->device));
	json_object_set_new(j, "label", p->label ? json_string(p->label) : json_null());
	json_object_set_new(j, "uuid", p->uuid ? json_string(p->uuid) : json_null());
	json_object_set_new(j, "fstype", p->fstype ? json_string(p->fstype) : json_null());
	json_object_set_new(j, "listed", json_boolean(p->listed));
	json_object_set_new(j, "use", json_string(use_word(c)));
	if (c->problem)
		json_object_set_new(j, "problem", json_string(c->problem));
	if (!c->have_facts)
		return j;
	json_object_set_new(j, "facts", device_facts_to_json(&c->facts));
	json_object_set_new(j, "mounted_at", c->mounted_at ? json_string(c->mounted_at) : json_null());
	if (c->have_xfs)
		json_object_set_new(j, "xfs", xfs_geometry_to_json(&c->xfs));
	if (c->have_health)
		json_object_set_new(j, "health", nvme_health_to_json(&c->health));
	else if (c->health_error)
		json_object_set_new(j, "health", json_pack("{s:s,s:s}", "verdict", "unknown", "error", c->health_error));
	json_object_set_new(j, "policy", device_decision_to_json(&c->decision));
	return j;
}

static const char *dash(const char *s)
{
	return s && *s ? s : "-";
}

static void print_table(FILE *f, const Candidate *cs, size_t n, const Config *cfg)
{
	fprintf(f, "%-20s %-13s %-9s %-22s %-16s %8s %-8s %s\n", "DEVICE", "LABEL", "TRANSPORT", "MODEL", "SERIAL",
		"SIZE", "HEALTH", "USE");
	for (size_t i = 0; i < n; i++) {
		const Candidate *c = &cs[i];
		char size[32] = "-", health[16] = "-";

		if (c->have_facts)
			format_size(c->facts.size_bytes, size, sizeof(size));
		if (c->have_health)
			snprintf(health, sizeof(health), "%s",
				 nvme_health_verdict_to_string(nvme_health_judge(&c->health, NULL, 0)));
		else if (c->health_error)
			snprintf(health, sizeof(health), "unknown");
		fprintf(f, "%-20s %-13s %-9s %-22.22s %-16.16s %8s %-8s %s\n", c->probed.device, dash(c->probed.label),
			c->have_facts ? device_transport_to_string(c->facts.transport) : "-",
			c->have_facts ? dash(c->facts.model) : "-", c->have_facts ? dash(c->facts.serial) : "-", size,
			health, use_word(c));
		if (c->problem)
			fprintf(f, "    %s\n", c->problem);
		for (size_t k = 0; c->have_facts && k < c->decision.n_reasons; k++) {
			const DeviceReason *r = &c->decision.reasons[k];

			fprintf(f, "    %s: %s%s%s%s\n        %s\n", device_verdict_to_string(r->level), r->what,
				r->setting[0] ? " (" : "", r->setting, r->setting[0] ? ")" : "", r->advice);
		}
	}
	if (n == 0)
		fprintf(f, "(no candidates: no XFS label starts with '%s'%s)\n", cfg->label_prefix,
			cfg->n_devices ? " and no NVMEVOL_DEVICES entry resolved" : " and NVMEVOL_DEVICES is empty");
}

int cmd_devices(int argc, char **argv)
{
	enum { ARG_JSON = 0x100, ARG_PREFIX, ARG_DEVICES, ARG_REQUIRE_NVME, ARG_HEALTH };
	static const struct option options[] = {
		{ "json", no_argument, NULL, ARG_JSON },
		{ "label-prefix", required_argument, NULL, ARG_PREFIX },
		{ "devices", required_argument, NULL, ARG_DEVICES },
		{ "require-nvme", required_argument, NULL, ARG_REQUIRE_NVME },
		{ "health", required_argument, NULL, ARG_HEALTH },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	_cleanup_(config_freep) Config *cfg = NULL;
	_cleanup_free_ char *err = NULL;
	ProbedDevice *devs = NULL;
	Candidate *cs = NULL;
	size_t n = 0;
	bool json = false;
	int c, r, ret = EXIT_FAILURE;

	optind = 0;
	opterr = 0;
	/* Options anywhere on the line; an option given wins over its NVMEVOL_* variable. */
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		const char *var = NULL;

		switch (c) {
		case ARG_JSON:
			json = true;
			break;
		case ARG_PREFIX:
			var = "NVMEVOL_LABEL_PREFIX";
			break;
		case ARG_DEVICES:
			var = "NVMEVOL_DEVICES";
			break;
		case ARG_REQUIRE_NVME:
			var = "NVMEVOL_REQUIRE_NVME";
			break;
		case ARG_HEALTH:
			var = "NVMEVOL_HEALTH";
			break;
		case 'h':
			help(stdout);
			return 0;
		case '?':
			if (optopt > 0 && optopt < 0x100)
				return usage_error("unknown or incomplete option '-%c'", optopt);
			return usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
		default:
			return usage_error("unexpected option");
		}
		/* The daemon's own parser validates the value: one set of rules and messages. */
		if (var && setenv(var, optarg, 1) < 0)
			return usage_error("cannot set %s", var);
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);

	r = config_from_env(&cfg, &err);
	if (r < 0)
		return usage_error("%s", err ? err : "bad setting");
	if (geteuid() != 0)
		fputs("nvmevol devices: not root: devices, health and geometry may be unreadable\n", stderr);

	r = probe_scan(cfg->label_prefix, cfg->devices, cfg->n_devices, &devs, &n);
	if (r < 0) {
		errno = -r;
		fprintf(stderr, "nvmevol devices: partition discovery failed: %m\n");
		return EXIT_FAILURE;
	}
	cs = calloc(n ? n : 1, sizeof(*cs));
	if (!cs) {
		probed_devices_free(devs, n);
		return EXIT_FAILURE;
	}
	for (size_t i = 0; i < n; i++) {
		cs[i].probed = devs[i];
		devs[i] = (ProbedDevice){ 0 };
		evaluate(cfg, &cs[i]);
	}
	free(devs);

	if (json) {
		_cleanup_(json_decrefp) json_t *a = json_array();

		for (size_t i = 0; a && i < n; i++)
			json_array_append_new(a, candidate_json(&cs[i]));
		if (!a || json_dumpf(a, stdout, JSON_INDENT(2)) < 0) {
			fputs("nvmevol devices: cannot write the JSON result\n", stderr);
			goto out;
		}
		fputc('\n', stdout);
	} else
		print_table(stdout, cs, n, cfg);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nvmevol devices: cannot write the result: %m\n");
		goto out;
	}
	ret = 0;
out:
	for (size_t i = 0; i < n; i++)
		candidate_done(&cs[i]);
	free(cs);
	return ret;
}
