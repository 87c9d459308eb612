/* SPDX-License-Identifier: MIT */
/*
 * Shared, immutable copies of VolumeOptions. Almost every volume of a host has
 * one of a few option sets (the defaults, a size or two), so each Volume points
 * at one reference-counted copy per distinct set instead of carrying its own
 * 248 bytes. A volume whose options are unique pays its own copy plus the entry.
 */
#pragma once

#include "volume/volume-options.h"

/* The shared copy equal to @o, with one more reference; NULL when out of memory. */
const VolumeOptions *volume_options_intern(const VolumeOptions *o);
/* Drops one reference; the copy is freed with its last one. NULL is ignored. */
void volume_options_release(const VolumeOptions *o);
/* Distinct option sets held (for tests and status). */
size_t volume_options_interned(void);
