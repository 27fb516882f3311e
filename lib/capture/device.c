/* device.c — capture devices.  Ids come from a process-wide counter and are never
 * reused, so a stale tensor can never alias a newer device.  The live devices are a
 * handle set (ir.h), so a freed or foreign device pointer is refused without a read. */
#include <stdatomic.h>

#include "capture.h"

static _Atomic uint64_t next_id = 1;
static ir_handle_set live_devices = IR_HANDLE_SET_INIT;

kiln_status
cap_device_check(const kiln_device *d, const char *api)
{
    if (!d)
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: device is NULL", api);
    if (!ir_handle_is_live(&live_devices, d))
        return ir_error(KILN_ERR_MISUSE,
                        "%s: invalid handle: not a live kiln_device (freed or foreign)", api);
    return KILN_OK;
}

kiln_device *
kiln_device_new(void)
{
    kiln_device *d = ir_calloc(1, sizeof *d);
    if (!d || !ir_handle_add(&live_devices, d)) {
        ir_free(d);
        ir_error(KILN_ERR_NOMEM, "kiln_device_new: out of memory");
        return NULL;
    }
    d->id = atomic_fetch_add(&next_id, 1);
    return d;
}

kiln_status
kiln_device_free(kiln_device *d)
{
    if (!d)
        return KILN_OK;
    cap_lock();
    kiln_status st = cap_device_check(d, "kiln_device_free");
    if (!st && cap_router_has_device_locked(d->id))
        st = ir_error(KILN_ERR_SCOPE_ACTIVE,
                      "kiln_device_free: device already has an open scope: device %llu; end "
                      "or abort the scope first",
                      (unsigned long long)d->id);
    if (!st)
        ir_handle_remove(&live_devices, d); /* true: checked live under cap_lock */
    cap_unlock();
    if (!st)
        ir_handle_retire(&live_devices, d);
    return st;
}

uint64_t
kiln_device_id(const kiln_device *d)
{
    return cap_device_check(d, "kiln_device_id") ? 0 : d->id;
}
