/* abi.c — the one place that reads and writes the versioned public structs (kiln_stats,
 * kiln_options, kiln_cache_info, kiln_value_info, kiln_host_info; docs/abi.md).
 *
 * Each such struct starts with `size_t size`, set by the caller to sizeof the struct it was
 * compiled with.  Fields are only ever appended, so the first min(caller's size, ours)
 * bytes mean the same thing to both sides:
 *  - a struct the library fills (out): it fills a whole struct of its own and copies the
 *    first min(size, ours) bytes after the size field into the caller's; nothing past the
 *    caller's size is written, the size field is left as the caller set it, and fields a
 *    newer caller has beyond ours keep what the caller put there (0 with KILN_*_INIT);
 *  - a struct the library reads (in): a zeroed struct of its own gets the caller's first
 *    min(size, ours) bytes, so fields an older caller lacks take their defaults (0); bytes
 *    a newer caller has past ours must be 0 (fields this library cannot honour:
 *    KILN_ERR_UNSUPPORTED otherwise, never silently ignored).
 * A size smaller than the end of the first field after `size` (0 above all: a zeroed struct
 * or a caller that forgot) is KILN_ERR_INVALID_ARG and nothing is read or written.
 */
#include <string.h>

#include "ir.h"

_Static_assert(offsetof(kiln_stats, size) == 0, "size leads kiln_stats");
_Static_assert(offsetof(kiln_options, size) == 0, "size leads kiln_options");
_Static_assert(offsetof(kiln_cache_info, size) == 0, "size leads kiln_cache_info");
_Static_assert(offsetof(kiln_value_info, size) == 0, "size leads kiln_value_info");
_Static_assert(offsetof(kiln_host_info, size) == 0, "size leads kiln_host_info");

static kiln_status
too_small(const char *api, const char *type, size_t size, size_t min)
{
    return ir_error(KILN_ERR_INVALID_ARG,
                    "%s: invalid argument: %s.size is %zu, less than the %zu bytes of its "
                    "first fields (set it to sizeof(%s), e.g. with the _INIT macro)",
                    api, type, size, min, type);
}

kiln_status
ir_abi_out(const char *api, const char *type, void *dst, const void *src, size_t own,
           size_t min)
{
    if (!dst)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: %s is NULL", api, type);
    size_t size;
    memcpy(&size, dst, sizeof size);
    if (size < min)
        return too_small(api, type, size, min);
    size_t n = size < own ? size : own;
    memcpy((char *)dst + sizeof size, (const char *)src + sizeof size, n - sizeof size);
    return KILN_OK;
}

kiln_status
ir_abi_in(const char *api, const char *type, const void *src, void *dst, size_t own,
          size_t min)
{
    memset(dst, 0, own);
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size < min)
        return too_small(api, type, size, min);
    if (size > own) {
        const unsigned char *tail = (const unsigned char *)src + own;
        for (size_t i = 0; i < size - own; i++)
            if (tail[i])
                return ir_error(KILN_ERR_UNSUPPORTED,
                                "%s: unsupported: %s.size is %zu and byte %zu is set, past the "
                                "%zu bytes this library (kiln %s) knows: a field it cannot "
                                "honour",
                                api, type, size, own + i, own, KILN_VERSION_STRING);
    }
    memcpy(dst, src, size < own ? size : own);
    return KILN_OK;
}

kiln_status
ir_options_read(const char *api, const kiln_options *o, kiln_options *out)
{
    if (!o) {
        memset(out, 0, sizeof *out);
        out->size = sizeof *out;
        return KILN_OK;
    }
    kiln_status st = ir_abi_in(api, "kiln_options", o, out, sizeof *out,
                               offsetof(kiln_options, mode) + sizeof o->mode);
    if (st)
        return st;
    if ((int)out->mode < 0 || out->mode >= KILN_MODE_COUNT)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: mode %d", api,
                        (int)out->mode);
    if ((int)out->stores < 0 || out->stores >= KILN_STORES_COUNT)
        return ir_error(KILN_ERR_INVALID_ARG,
                        "%s: invalid argument: stores %d (expected KILN_STORES_AUTO, _STREAM "
                        "or _CACHED)",
                        api, (int)out->stores);
    if ((int)out->code < 0 || out->code >= KILN_CODE_COUNT)
        return ir_error(KILN_ERR_INVALID_ARG,
                        "%s: invalid argument: code %d (expected KILN_CODE_AUTO, _FULL or "
                        "_COMPACT)",
                        api, (int)out->code);
    unsigned known = KILN_KEEP_DUMPS | KILN_NO_CACHE | KILN_NO_DISK_CACHE | KILN_TIERED;
    if (out->flags & ~known)
        return ir_error(KILN_ERR_INVALID_ARG,
                        "%s: invalid argument: flags 0x%x: bits 0x%x are not KILN_KEEP_DUMPS, "
                        "KILN_NO_CACHE, KILN_NO_DISK_CACHE or KILN_TIERED (stores and code are "
                        "fields of their own)",
                        api, out->flags, out->flags & ~known);
    return KILN_OK;
}
