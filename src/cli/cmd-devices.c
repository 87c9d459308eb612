/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd-devices.h"
#include "settings.h"
#include "device/device-policy.h"
#include "device/device-report.h"
#include "device/device.h"
#include "pool/mount.h"
#include "device/nvme-health.h"
#include "device/probe.h"
#include "device/xfs-geometry.h"
#include "util/macro.h"
#include "util/strutil.h"

DEFINE_CLEANUP_FUNC(Settings *, settings_free)

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

static void evaluate(const Settings *cfg, Candidate *c)
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
	_cleanup_free_ char *label = NULL;
	json_t *j = json_object();
	const ProbedDevice *p = &c->probed;

	json_object_set_new(j, "device", json_string(p->device));
	/* As Status shows it: any bytes, escaped (a label may carry terminal controls). */
	label = p->label ? text_escape_dup(p->label, true) : NULL;
	json_object_set_new(j, "label", label ? json_string(label) : json_null());
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

static void print_table(FILE *f, const Candidate *cs, size_t n, const Settings *cfg)
{
	fprintf(f, "%-20s %-13s %-9s %-22s %-16s %8s %-8s %s\n", "DEVICE", "LABEL", "TRANSPORT", "MODEL", "SERIAL",
		"SIZE", "HEALTH", "USE");
	for (size_t i = 0; i < n; i++) {
		const Candidate *c = &cs[i];
		_cleanup_free_ char *label = text_escape_dup(c->probed.label ? c->probed.label : "", true);
		char size[32] = "-", health[16] = "-";

		if (c->have_facts)
			format_size(c->facts.size_bytes, size, sizeof(size));
		if (c->have_health)
			snprintf(health, sizeof(health), "%s",
				 nvme_health_verdict_to_string(nvme_health_judge(&c->health, NULL, 0)));
		else if (c->health_error)
			snprintf(health, sizeof(health), "unknown");
		fprintf(f, "%-20s %-13s %-9s %-22.22s %-16.16s %8s %-8s %s\n", c->probed.device, dash(label),
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

int cmd_devices(const CliArgs *a, char **args, int n)
{
	static const struct {
		unsigned bit;
		const char *var;
	} settings[] = {
		{ CLI_OPT_LABEL_PREFIX, "NVMEVOL_LABEL_PREFIX" },
		{ CLI_OPT_DEVICES, "NVMEVOL_DEVICES" },
		{ CLI_OPT_REQUIRE_NVME, "NVMEVOL_REQUIRE_NVME" },
		{ CLI_OPT_HEALTH, "NVMEVOL_HEALTH" },
	};
	const char *values[] = { a->label_prefix, a->devices, a->require_nvme, a->health };
	_cleanup_(settings_freep) Settings *cfg = NULL;
	_cleanup_free_ char *err = NULL;
	ProbedDevice *devs = NULL;
	Candidate *cs = NULL;
	bool json = a->given & CLI_OPT_JSON;
	int r, ret = EXIT_FAILURE;
	size_t n_devs = 0, n_silent = 0;
	ProbedDevice *silent = NULL;

	/* An option given wins over its NVMEVOL_* variable; the daemon's own parser validates the value. */
	for (size_t i = 0; i < ELEMENTSOF(settings); i++)
		if ((a->given & settings[i].bit) && setenv(settings[i].var, values[i], 1) < 0)
			return cli_usage_error(a, "cannot set %s", settings[i].var);

	r = settings_from_env(&cfg, &err);
	if (r < 0)
		return cli_usage_error(a, "%s", err ? err : "bad setting");
	if (geteuid() != 0)
		fputs("nvmevol devices: not root: devices, health and geometry may be unreadable\n", stderr);

	r = probe_scan(cfg->label_prefix, cfg->devices, cfg->n_devices, PROBE_DEADLINE_MS, &devs, &n_devs, &silent,
		       &n_silent);
	if (r < 0) {
		errno = -r;
		fprintf(stderr, "nvmevol devices: partition discovery failed: %m\n");
		return EXIT_FAILURE;
	}
	for (size_t i = 0; i < n_silent; i++)
		fprintf(stderr, "nvmevol devices: %s does not answer (no superblock within %u ms): skipped\n",
			silent[i].device, PROBE_DEADLINE_MS);
	probed_devices_free(silent, n_silent);
	cs = calloc(n_devs ? n_devs : 1, sizeof(*cs));
	if (!cs) {
		probed_devices_free(devs, n_devs);
		return EXIT_FAILURE;
	}
	for (size_t i = 0; i < n_devs; i++) {
		cs[i].probed = devs[i];
		devs[i] = (ProbedDevice){ 0 };
		evaluate(cfg, &cs[i]);
	}
	free(devs);

	if (json) {
		_cleanup_(json_decrefp) json_t *arr = json_array();

		for (size_t i = 0; arr && i < n_devs; i++)
			json_array_append_new(arr, candidate_json(&cs[i]));
		if (!arr || json_dumpf(arr, stdout, JSON_INDENT(2)) < 0) {
			fputs("nvmevol devices: cannot write the JSON result\n", stderr);
			goto out;
		}
		fputc('\n', stdout);
	} else
		print_table(stdout, cs, n_devs, cfg);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nvmevol devices: cannot write the result: %m\n");
		goto out;
	}
	ret = 0;
out:
	for (size_t i = 0; i < n_devs; i++)
		candidate_done(&cs[i]);
	free(cs);
	return ret;
}
