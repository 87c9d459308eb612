/* SPDX-License-Identifier: MIT */
#include "device/device-report.h"
#include "util/macro.h"

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static json_t *u64(uint64_t v)
{
	/* JSON integers are signed 64-bit here; clamp rather than wrap. */
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

json_t *device_facts_to_json(const DeviceFacts *f)
{
	json_t *j = json_object(), *part, *discard;

	if (!j)
		return NULL;
	json_object_set_new(j, "path", json_string(f->devnode));
	json_object_set_new(j, "name", json_string(f->name));
	json_object_set_new(j, "disk", json_string(f->disk));
	json_object_set_new(j, "transport", json_string(device_transport_to_string(f->transport)));
	json_object_set_new(j, "usb", json_boolean(f->usb));
	json_object_set_new(j, "removable", json_boolean(f->removable));
	if (f->opaque)
		json_object_set_new(j, "opaque", json_true());
	if (f->leaves[0])
		json_object_set_new(j, "lower_devices", json_string(f->leaves));
	if (f->untrusted_leaf[0])
		json_object_set_new(j, "untrusted_leaf", json_string(f->untrusted_leaf));
	json_object_set_new(j, "rotational", json_boolean(f->rotational));
	json_object_set_new(j, "read_only", json_boolean(f->read_only));
	json_object_set_new(j, "vendor", str_or_null(f->vendor));
	json_object_set_new(j, "model", str_or_null(f->model));
	json_object_set_new(j, "serial", str_or_null(f->serial));
	json_object_set_new(j, "firmware", str_or_null(f->firmware));
	if (f->nvme_controller[0])
		json_object_set_new(j, "nvme_controller", json_string(f->nvme_controller));
	if (f->loop_backing_file[0])
		json_object_set_new(j, "backing_file", json_string(f->loop_backing_file));
	json_object_set_new(j, "logical_block_size", json_integer(f->logical_block_size));
	json_object_set_new(j, "physical_block_size", json_integer(f->physical_block_size));
	json_object_set_new(j, "minimum_io_size", json_integer(f->minimum_io_size));
	json_object_set_new(j, "optimal_io_size", json_integer(f->optimal_io_size));
	discard = json_object();
	json_object_set_new(discard, "supported", json_boolean(f->discard_max_bytes > 0));
	json_object_set_new(discard, "granularity", u64(f->discard_granularity));
	json_object_set_new(discard, "max_bytes", u64(f->discard_max_bytes));
	json_object_set_new(j, "discard", discard);
	json_object_set_new(j, "write_cache", str_or_null(f->write_cache));
	json_object_set_new(j, "scheduler", str_or_null(f->scheduler));
	json_object_set_new(j, "numa_node", f->numa_node >= 0 ? json_integer(f->numa_node) : json_null());
	json_object_set_new(j, "size_bytes", u64(f->size_bytes));
	if (f->is_partition) {
		uint64_t unit = device_alignment_unit(f);

		part = json_object();
		json_object_set_new(part, "number", json_integer(f->partition_number));
		json_object_set_new(part, "start_bytes", u64(f->start_bytes));
		json_object_set_new(part, "alignment_unit", u64(unit));
		json_object_set_new(part, "aligned", json_boolean(device_partition_aligned(f)));
		json_object_set_new(j, "partition", part);
	}
	return j;
}

json_t *xfs_geometry_to_json(const XfsGeometry *g)
{
	json_t *j = json_object();

	if (!j)
		return NULL;
	json_object_set_new(j, "block_size", json_integer(g->block_size));
	json_object_set_new(j, "sector_size", json_integer(g->sector_size));
	json_object_set_new(j, "log_sector_size", json_integer(g->log_sector_size));
	json_object_set_new(j, "sunit_bytes", json_integer(g->sunit_bytes));
	json_object_set_new(j, "swidth_bytes", json_integer(g->swidth_bytes));
	json_object_set_new(j, "ag_count", json_integer(g->ag_count));
	json_object_set_new(j, "crc", json_boolean(g->crc));
	json_object_set_new(j, "reflink", json_boolean(g->reflink));
	json_object_set_new(j, "bigtime", json_boolean(g->bigtime));
	json_object_set_new(j, "ftype", json_boolean(g->ftype));
	json_object_set_new(j, "finobt", json_boolean(g->finobt));
	json_object_set_new(j, "rmapbt", json_boolean(g->rmapbt));
	json_object_set_new(j, "inobtcount", json_boolean(g->inobtcount));
	return j;
}

json_t *nvme_health_to_json(const NvmeHealth *h)
{
	json_t *j = json_object(), *bits = json_array();
	char why[512];
	NvmeHealthVerdict v = nvme_health_judge(h, why, sizeof(why));
	int c;

	if (!j || !bits) {
		json_decref(j);
		json_decref(bits);
		return NULL;
	}
	json_object_set_new(j, "verdict", json_string(nvme_health_verdict_to_string(v)));
	if (why[0])
		json_object_set_new(j, "why", json_string(why));
	json_object_set_new(j, "critical_warning", json_integer(h->critical_warning));
	for (unsigned bit = 0; bit < 8; bit++)
		if (h->critical_warning & (1u << bit))
			json_array_append_new(bits, json_string(nvme_critical_warning_name(bit)));
	json_object_set_new(j, "critical_warnings", bits);
	json_object_set_new(j, "temperature_celsius", nvme_health_celsius(h, &c) ? json_integer(c) : json_null());
	json_object_set_new(j, "available_spare_percent", json_integer(h->available_spare));
	json_object_set_new(j, "available_spare_threshold_percent", json_integer(h->available_spare_threshold));
	json_object_set_new(j, "percentage_used", json_integer(h->percentage_used));
	json_object_set_new(j, "media_errors", u64(h->media_errors));
	json_object_set_new(j, "error_log_entries", u64(h->error_log_entries));
	json_object_set_new(j, "unsafe_shutdowns", u64(h->unsafe_shutdowns));
	json_object_set_new(j, "power_cycles", u64(h->power_cycles));
	json_object_set_new(j, "power_on_hours", u64(h->power_on_hours));
	json_object_set_new(j, "data_units_read", u64(h->data_units_read));
	json_object_set_new(j, "data_units_written", u64(h->data_units_written));
	json_object_set_new(j, "host_read_commands", u64(h->host_read_commands));
	json_object_set_new(j, "host_write_commands", u64(h->host_write_commands));
	json_object_set_new(j, "volatile_write_cache",
			    h->volatile_write_cache < 0 ? json_null() : json_string(h->volatile_write_cache ? "enabled" : "disabled"));
	if (h->saturated)
		json_object_set_new(j, "counters_saturated", json_true());
	return j;
}

json_t *device_decision_to_json(const DeviceDecision *d)
{
	json_t *j = json_object(), *reasons = json_array();

	if (!j || !reasons) {
		json_decref(j);
		json_decref(reasons);
		return NULL;
	}
	json_object_set_new(j, "verdict", json_string(device_verdict_to_string(d->verdict)));
	for (size_t i = 0; i < d->n_reasons; i++) {
		const DeviceReason *r = &d->reasons[i];
		json_t *o = json_object();

		json_object_set_new(o, "level", json_string(device_verdict_to_string(r->level)));
		json_object_set_new(o, "code", json_string(r->code));
		json_object_set_new(o, "what", json_string(r->what));
		json_object_set_new(o, "setting", str_or_null(r->setting));
		json_object_set_new(o, "advice", json_string(r->advice));
		json_array_append_new(reasons, o);
	}
	json_object_set_new(j, "reasons", reasons);
	return j;
}
