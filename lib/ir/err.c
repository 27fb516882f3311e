/* err.c — the thread-local error state behind kiln_errcode()/kiln_errmsg(), the error
 * hook, and the opt-in abort mode for misuse (KILN_ABORT_ON_MISUSE=1). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static _Thread_local kiln_status tl_code;
static _Thread_local char tl_msg[2048];

static _Atomic(kiln_error_hook) hook;
static void *_Atomic hook_user;

static const char *const status_text[] = {
#define X(name, value, text) [value] = text,
    KILN_STATUS_LIST(X)
#undef X
};

const char *
kiln_status_str(kiln_status status)
{
    if ((int)status < 0 || status >= KILN_STATUS_COUNT || !status_text[status])
        return "unknown status";
    return status_text[status];
}

kiln_status
kiln_errcode(void)
{
    return tl_code;
}

const char *
kiln_errmsg(void)
{
    return tl_msg;
}

void
kiln_clear_error(void)
{
    tl_code = KILN_OK;
    tl_msg[0] = '\0';
}

void
kiln_set_error_hook(kiln_error_hook h, void *user)
{
    atomic_store(&hook_user, user);
    atomic_store(&hook, h);
}

/* Misuse of the capture API (as opposed to bad data) may be turned into an abort. */
static bool
is_misuse(kiln_status code)
{
    switch (code) {
    case KILN_ERR_OUTSIDE_SCOPE:
    case KILN_ERR_SCOPE_CLOSED:
    case KILN_ERR_FOREIGN_TENSOR:
    case KILN_ERR_SCOPE_ACTIVE:
    case KILN_ERR_BOUNDARY:
    case KILN_ERR_MISUSE:
        return true;
    default:
        return false;
    }
}

kiln_status
ir_verror(kiln_status code, const char *fmt, va_list ap)
{
    /* Format into a local buffer first: callers wrap an earlier error by passing
     * kiln_errmsg(), i.e. tl_msg itself, and vsnprintf's source and destination must not
     * overlap. */
    char msg[sizeof tl_msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(tl_msg, msg, sizeof tl_msg);
    tl_code = code;
    kiln_error_hook h = atomic_load(&hook);
    if (h)
        h(code, tl_msg, atomic_load(&hook_user));
    if (is_misuse(code)) {
        if (ir_config_get()->abort_on_misuse) {
            fprintf(stderr, "kiln: aborting on misuse (KILN_ABORT_ON_MISUSE=1): %s\n", tl_msg);
            abort();
        }
    }
    return code;
}

kiln_status
ir_error(kiln_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_verror(code, fmt, ap);
    va_end(ap);
    return code;
}

_Noreturn void
ir_bug(const char *file, int line, const char *what)
{
    fprintf(stderr, "kiln: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

const char *
kiln_version(void)
{
    return KILN_VERSION_STRING;
}
