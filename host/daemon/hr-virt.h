/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * The libvirt domain of each guest that connects, looked up by UUID on a
 * read-only connection to config->libvirt_uri, in a thread of its own: a
 * libvirtd that is slow or busy starting the domain (its hook waits for
 * us) never holds up the main loop. What the domain's <hugeroom:policy>
 * says of donor and floor goes into config->domain_policies, on the main
 * loop, for the planner. Built without libvirt, it does nothing.
 */

#include "hr-config.h"

G_BEGIN_DECLS

typedef struct _HrVirt HrVirt;

/* NULL when there is nothing to look up in (libvirt_uri empty, or no libvirt) */
HrVirt *
hr_virt_new(HrConfig *config);
/* drops lookups not started; waits for one that runs */
void
hr_virt_free(HrVirt *virt);
/* queue a lookup of guest @name's domain, @uuid; a NULL @virt does nothing */
void
hr_virt_lookup(HrVirt *virt, const gchar *uuid, const gchar *name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrVirt, hr_virt_free)

G_END_DECLS
