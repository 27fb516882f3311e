/* capture.h — lib/capture's internal interface: the router and its client registry,
 * devices, scopes and the recording of tensor operations.
 *
 * Locking: one process-wide mutex (cap_lock) guards the registry and every scope's graph.
 * Recording an op is a few hundred nanoseconds of work, so one lock is simpler and cheap
 * enough; functions named *_locked expect the caller to hold it. */
#ifndef KILN_CAPTURE_H
#define KILN_CAPTURE_H

#include "ir.h"

void cap_lock(void) IR_HIDDEN;
void cap_unlock(void) IR_HIDDEN;

/* ---- router ---------------------------------------------------------------------------
 * Clients are registered per (channel, device), in the spirit of Burn's RouterChannel.
 * When no client is registered the channel's init_client is asked for an unscoped one;
 * the capture channel has none and refuses with KILN_ERR_OUTSIDE_SCOPE. */
typedef struct cap_channel {
    const char *name;
    kiln_status (*init_client)(const struct cap_channel *ch, uint64_t device, const char *api,
                               void **client);
} cap_channel;

IR_HIDDEN extern const cap_channel cap_capture_channel;

/* KILN_ERR_SCOPE_ACTIVE if the device already has a client on this channel. */
IR_HIDDEN kiln_status cap_router_register_locked(const cap_channel *ch, uint64_t device,
                                                 void *client, const char *api);
IR_HIDDEN void cap_router_unregister_locked(const cap_channel *ch, uint64_t device);
IR_HIDDEN kiln_status cap_router_get_client_locked(const cap_channel *ch, uint64_t device,
                                                   const char *api, void **client);
/* Any client registered for the device, on any channel? */
IR_HIDDEN bool cap_router_has_device_locked(uint64_t device);

/* ---- devices ---------------------------------------------------------------------------- */
struct kiln_device {
    uint64_t id;
};
/* Checks the handle against the live devices, without reading *d; KILN_ERR_MISUSE naming
 * `api` otherwise.  kiln_device_free unregisters under cap_lock, so a device checked with
 * cap_lock held stays live until it is released. */
IR_HIDDEN kiln_status cap_device_check(const kiln_device *d, const char *api);

/* ---- scopes ----------------------------------------------------------------------------- */
typedef struct cap_scope {
    uint64_t serial; /* never reused */
    uint64_t device;
    kiln_graph *graph;
    kiln_status err; /* the first error recorded in the scope (sticky) */
    char *errmsg;
} cap_scope;

/* The live scope with this serial, or NULL (it ended, or never existed). */
IR_HIDDEN cap_scope *cap_scope_find_locked(uint64_t serial);
/* Remember the thread's current error as the scope's first error, if it has none. */
IR_HIDDEN void cap_scope_fail_locked(cap_scope *s);
IR_HIDDEN uint32_t cap_tensor_check(uint64_t scope, uint32_t node);
IR_HIDDEN kiln_tensor cap_tensor_make(const cap_scope *s, int32_t node);
/* Resolve tensor `t` (operand `argi` of `api`, 1-based; 0 = "tensor") to its live scope.
 * A null tensor keeps the thread's first error (or sets KILN_ERR_MISUSE if none). */
IR_HIDDEN kiln_status cap_tensor_resolve_locked(const char *api, kiln_tensor t, int argi,
                                                cap_scope **scope);

/* Finish a scope: check the boundaries, unregister it (on every path) and hand over the
 * completed, verified graph.  Used by kiln_scope_end (lib/jit) and kiln_scope_end_graph. */
IR_HIDDEN kiln_status cap_scope_finish(const char *api, kiln_scope scope, int noutputs,
                                       const kiln_tensor *outputs, const kiln_options *options,
                                       kiln_graph **graph);

/* ---- replay (replay.c) -------------------------------------------------------------------
 * Record every node of g again through the public tensor API, in order, into the open scope
 * of dev: t[n] (g->nnodes entries) gets node n's tensor.  Errors are the scope's (sticky):
 * a node the API cannot record (a concat of more than 64 values) gets the null tensor, and
 * kiln_scope_end reports it.  kiln bench's re-capture time; check_capture's test. */
IR_HIDDEN void cap_replay(kiln_device *dev, const kiln_graph *g, kiln_tensor *t);

#endif
