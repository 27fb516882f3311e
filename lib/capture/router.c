/* router.c — the client registry.  A capture device has no client of its own: only an
 * open scope registers one, so an operation routed to a device without a scope is
 * refused here, before anything is recorded. */
#include <pthread.h>

#include "capture.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void
cap_lock(void)
{
    pthread_mutex_lock(&lock);
}

void
cap_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

typedef struct entry {
    const cap_channel *channel;
    uint64_t device;
    void *client;
} entry;

static entry *entries;
static size_t nentries, capentries;

static kiln_status
capture_init_client(const cap_channel *ch, uint64_t device, const char *api, void **client)
{
    (void)ch;
    *client = NULL;
    return ir_error(KILN_ERR_OUTSIDE_SCOPE,
                    "%s: capture tensor operations must run inside kiln_capture_scope (device "
                    "%llu has no open scope; create tensors after kiln_scope_begin)",
                    api, (unsigned long long)device);
}

const cap_channel cap_capture_channel = {"capture", capture_init_client};

static entry *
find(const cap_channel *ch, uint64_t device)
{
    for (size_t i = 0; i < nentries; i++)
        if (entries[i].channel == ch && entries[i].device == device)
            return &entries[i];
    return NULL;
}

kiln_status
cap_router_register_locked(const cap_channel *ch, uint64_t device, void *client, const char *api)
{
    if (find(ch, device))
        return ir_error(KILN_ERR_SCOPE_ACTIVE,
                        "%s: device already has an open scope: device %llu; end it with "
                        "kiln_scope_end before beginning another",
                        api, (unsigned long long)device);
    if (nentries == capentries) {
        size_t n = capentries ? 2 * capentries : 8;
        entry *e = ir_realloc(entries, n * sizeof *e);
        if (!e)
            return ir_error(KILN_ERR_NOMEM, "%s: out of memory registering a client", api);
        entries = e;
        capentries = n;
    }
    entries[nentries++] = (entry){ch, device, client};
    return KILN_OK;
}

void
cap_router_unregister_locked(const cap_channel *ch, uint64_t device)
{
    entry *e = find(ch, device);
    if (e)
        *e = entries[--nentries];
}

kiln_status
cap_router_get_client_locked(const cap_channel *ch, uint64_t device, const char *api,
                             void **client)
{
    entry *e = find(ch, device);
    if (e) {
        *client = e->client;
        return KILN_OK;
    }
    return ch->init_client(ch, device, api, client);
}

bool
cap_router_has_device_locked(uint64_t device)
{
    for (size_t i = 0; i < nentries; i++)
        if (entries[i].device == device)
            return true;
    return false;
}

cap_scope *
cap_scope_find_locked(uint64_t serial)
{
    for (size_t i = 0; i < nentries; i++)
        if (entries[i].channel == &cap_capture_channel &&
            ((cap_scope *)entries[i].client)->serial == serial)
            return entries[i].client;
    return NULL;
}
