#include "support.h"

#include <stdio.h>
#include <stdlib.h>

kiln_graph *
ts_parse(const char *text)
{
    kiln_graph *g = NULL;
    kiln_status st = kiln_graph_parse(text, strlen(text), &g);
    ck_assert_msg(st == KILN_OK, "parse failed: %s\n%s", kiln_errmsg(), text);
    return g;
}

char *
ts_read_source_file(const char *relpath, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", KILN_TEST_SOURCE_DIR, relpath);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert(buf != NULL);
    ck_assert(fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

int
ts_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int
ts_quick(void)
{
    const char *e = getenv("KILN_QUICK");
    return e && *e && strcmp(e, "0") != 0;
}

int
ts_quick_n(int n, int div)
{
    if (!ts_quick() || div <= 1)
        return n;
    return n / div > 0 ? n / div : 1;
}
