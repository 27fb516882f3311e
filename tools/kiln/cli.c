/* cli.c — helpers shared by the kiln command's subcommands: messages and exit codes,
 * option matching, loading graph files, deterministic inputs, value summaries.  Public API
 * only (kiln.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* Files larger than this are not read whole (kiln's largest tensor, 2^48 bytes). */
#define CLI_MAX_FILE ((uint64_t)1 << 48)

/* The command's own error: the latest unless a kiln call has failed since (cli_error
 * clears kiln's, so kiln's being set means it came later). */
static kiln_status cli_code;
static char cli_msg[1024];

kiln_status
cli_error(kiln_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cli_msg, sizeof cli_msg, fmt, ap);
    va_end(ap);
    cli_code = status;
    kiln_clear_error();
    return status;
}

const char *
cli_errmsg(void)
{
    return kiln_errcode() == KILN_OK && cli_code != KILN_OK ? cli_msg : kiln_errmsg();
}

int
cli_fail(void)
{
    kiln_status code = kiln_errcode() == KILN_OK && cli_code != KILN_OK ? cli_code
                                                                          : kiln_errcode();
    const char *msg = cli_errmsg();
    fprintf(stderr, "kiln: %s\n", *msg ? msg : kiln_status_str(code));
    cli_code = KILN_OK;
    cli_msg[0] = '\0';
    return CLI_FAIL;
}

int
cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kiln%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'kiln%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return CLI_USAGE;
}

bool
cli_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int
cli_option(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        cli_usage(cmd, "option %s needs an argument", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

void
cli_free_buffers(void **bufs, int n)
{
    for (int i = 0; bufs && i < n; i++)
        free(bufs[i]);
    free(bufs);
}

kiln_status
cli_read_file(const char *path, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    bool is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return cli_error(KILN_ERR_IO, "%s: cannot open: %s", name, strerror(errno));
    size_t cap = 4096, n = 0;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (uint64_t)sb.st_size < CLI_MAX_FILE)
        cap = (size_t)sb.st_size + 2; /* room for the NUL and the EOF probe */
    char *buf = malloc(cap);
    kiln_status st = KILN_OK;
    if (!buf) {
        st = cli_error(KILN_ERR_NOMEM, "%s: out of memory: %zu bytes", name, cap);
        goto done;
    }
    errno = 0;
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = cap * 2 > cap ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                st = cli_error(KILN_ERR_NOMEM, "%s: out of memory: %zu bytes", name, cap * 2);
                goto done;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                st = cli_error(KILN_ERR_IO, "%s: read failed: %s", name,
                              errno ? strerror(errno) : "i/o error");
            break;
        }
    }
done:
    if (!is_stdin)
        fclose(f);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return KILN_OK;
}

kiln_status
cli_load_graph(const char *path, kiln_graph **graph)
{
    *graph = NULL;
    char *text;
    size_t len;
    kiln_status st = cli_read_file(path, &text, &len);
    if (st)
        return st;
    st = kiln_graph_parse_named(text, len, strcmp(path, "-") == 0 ? "<stdin>" : path, graph);
    free(text);
    return st;
}

/* splitmix64: small, fast, and the same stream on every platform. */
static uint64_t
next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void
cli_fill_random(kiln_dtype dtype, void *data, size_t count, uint64_t *state)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t r = next_u64(state);
        /* floats: 24 random bits, k/2^23 - 1 is exact in f32, so both dtypes see one value */
        double v = (double)(r >> 40) / 8388608.0 - 1.0;
        int64_t k = (int64_t)(r % 201) - 100;
        switch (dtype) {
        case KILN_DTYPE_F32:
            ((float *)data)[i] = (float)v;
            break;
        case KILN_DTYPE_F64:
            ((double *)data)[i] = v;
            break;
        case KILN_DTYPE_I32:
            ((int32_t *)data)[i] = (int32_t)k;
            break;
        case KILN_DTYPE_I64:
            ((int64_t *)data)[i] = k;
            break;
        case KILN_DTYPE_BOOL:
        default:
            ((unsigned char *)data)[i] = (unsigned char)(r >> 63);
            break;
        }
    }
}

char *
cli_type_str_of(kiln_dtype dtype, int rank, const int64_t *dims, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", kiln_dtype_name(dtype));
    for (int i = 0; i < rank && i < KILN_MAX_RANK && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%" PRId64 : "%" PRId64, dims[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

char *
cli_type_str(const kiln_value_info *info, char *buf, size_t n)
{
    return cli_type_str_of(info->dtype, info->rank, info->dims, buf, n);
}

bool
cli_dtype_is_float(kiln_dtype dtype)
{
    return dtype == KILN_DTYPE_F32 || dtype == KILN_DTYPE_F64;
}

double
cli_load_f64(kiln_dtype dtype, const void *data, size_t i)
{
    return dtype == KILN_DTYPE_F32   ? (double)((const float *)data)[i]
           : dtype == KILN_DTYPE_F64 ? ((const double *)data)[i]
                                     : (double)cli_load_i64(dtype, data, i);
}

int64_t
cli_load_i64(kiln_dtype dtype, const void *data, size_t i)
{
    switch (dtype) {
    case KILN_DTYPE_I32:
        return ((const int32_t *)data)[i];
    case KILN_DTYPE_I64:
        return ((const int64_t *)data)[i];
    case KILN_DTYPE_BOOL:
        return ((const unsigned char *)data)[i] != 0;
    case KILN_DTYPE_F32:
        return (int64_t)((const float *)data)[i];
    case KILN_DTYPE_F64:
        return (int64_t)((const double *)data)[i];
    case KILN_DTYPE_COUNT:
        break;
    }
    return 0;
}

static void
print_elem(FILE *f, kiln_dtype dtype, const void *data, size_t i)
{
    if (dtype == KILN_DTYPE_BOOL)
        fputs(((const unsigned char *)data)[i] ? "true" : "false", f);
    else if (cli_dtype_is_float(dtype))
        fprintf(f, "%.7g", cli_load_f64(dtype, data, i));
    else
        fprintf(f, "%" PRId64, cli_load_i64(dtype, data, i));
}

void
cli_print_summary(FILE *f, const kiln_value_info *info, const void *data)
{
    enum {
        SHOW = 8
    };
    char tb[CLI_TYPE_STR_MAX];
    fprintf(f, "  %s: %s", info->name, cli_type_str(info, tb, sizeof tb));
    if (info->count == 0) {
        fputs("  (no elements)\n", f);
        return;
    }
    if (cli_dtype_is_float(info->dtype)) {
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        size_t nans = 0;
        for (size_t i = 0; i < info->count; i++) {
            double v = cli_load_f64(info->dtype, data, i);
            if (isnan(v)) {
                nans++;
                continue;
            }
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
        }
        if (nans < info->count)
            fprintf(f, "  min %.6g  max %.6g  mean %.6g", lo, hi,
                    sum / (double)(info->count - nans));
        if (nans)
            fprintf(f, "  nan %zu", nans);
    } else if (info->dtype == KILN_DTYPE_BOOL) {
        size_t ones = 0;
        for (size_t i = 0; i < info->count; i++)
            ones += ((const unsigned char *)data)[i] != 0;
        fprintf(f, "  true %zu of %zu", ones, info->count);
    } else {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        double sum = 0;
        for (size_t i = 0; i < info->count; i++) {
            int64_t v = cli_load_i64(info->dtype, data, i);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += (double)v;
        }
        fprintf(f, "  min %" PRId64 "  max %" PRId64 "  mean %.6g", lo, hi,
                sum / (double)info->count);
    }
    fputs("\n    [", f);
    for (size_t i = 0; i < info->count && i < SHOW; i++) {
        if (i)
            fputs(", ", f);
        print_elem(f, info->dtype, data, i);
    }
    fputs(info->count > SHOW ? ", ...]\n" : "]\n", f);
}

int
cli_parse_mode(const char *s, kiln_mode *mode)
{
    static const char *const names[KILN_MODE_COUNT] = {"fused", "eager", "interp"};
    for (int m = 0; m < KILN_MODE_COUNT; m++)
        if (strcmp(s, names[m]) == 0) {
            *mode = (kiln_mode)m;
            return 0;
        }
    return -1;
}

int
cli_parse_code(const char *s, kiln_code *code)
{
    static const char *const names[KILN_CODE_COUNT] = {
        [KILN_CODE_AUTO] = "auto", [KILN_CODE_FULL] = "full", [KILN_CODE_COMPACT] = "compact"};
    for (int k = 0; k < KILN_CODE_COUNT; k++)
        if (strcmp(s, names[k]) == 0) {
            *code = (kiln_code)k;
            return 0;
        }
    return -1;
}

double
cli_clock_ms(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
