/* parse.c — the text format's parser: hand-written recursive descent, one function per
 * grammar rule with the rule above it (docs/format.md has the whole grammar).
 *
 *   text ──utf8_check──► lexer (on demand, one token of lookahead, restartable) ──►
 *   parse_graph ─► ir_graph_add_input / ir_graph_add_node / ir_graph_add_output ─►
 *   ir_graph_verify
 *
 * Attributes whose meaning depends on the result dtype (value=, arange start=/delta=,
 * data=) come before the `: TYPE` that fixes that dtype, so a statement is read in two
 * passes: the first checks the syntax and remembers where each attribute's value is, the
 * second (once the type is known) converts the values, re-reading a data list from its
 * saved lexer state.
 *
 * Every error is reported once, where it is found, through ir_error; the parse functions
 * return false and the caller unwinds, freeing the partial graph. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define API "kiln_graph_parse"
/* Longest numeric literal accepted (a float with every digit of an f64 is ~770). */
#define NUM_MAX 1024

/* ---- tokens and lexer ------------------------------------------------------------------ */

typedef enum tkind {
    T_EOF,
    T_IDENT,  /* [A-Za-z_][A-Za-z0-9_]* */
    T_LABEL,  /* %123: a printer-generated value name */
    T_STRING, /* "…" with \\ \" \xNN escapes */
    T_B64,    /* b64"…" */
    T_NUM,    /* a numeric literal, sign included: 12, -0, 1.5e-3, 0x1p-3, nan:0x7fc00001 */
    T_ARROW,  /* -> */
    T_PUNCT,  /* ( ) [ ] { } , : = */
    T_BAD,    /* any other character */
} tkind;

typedef struct token {
    tkind kind;
    const char *s; /* the token's text in the input */
    size_t n;
    size_t line, col; /* 1-based; columns count code points */
} token;

/* Everything the lexer needs to resume: saving and restoring this is how a data list is
 * read twice and how `ident =` is told apart from an operand. */
typedef struct lexstate {
    size_t pos, line, col;
    token tok;
} lexstate;

/* A value name: an identifier or string (decoded), or a %N label, which only exists in
 * the text (the node it defines is unnamed). */
typedef struct entry {
    const char *s; /* NULL: empty slot */
    size_t n;
    bool label;
    int32_t id;
    size_t line, col; /* where it was defined */
} entry;

typedef struct table {
    entry *e;
    size_t cap, count;
} table;

typedef struct outdecl {
    const char *name; /* NUL-terminated, in the scratch arena */
    token at;         /* the output's name, for messages */
    token ref;        /* the value it names */
    ir_type type;
} outdecl;

typedef struct parser {
    const char *text;
    size_t len;
    const char *src;
    lexstate lx;
    kiln_graph *g;
    table names; /* value names -> node ids */
    ir_arena scratch;
    int32_t *ops; /* operand buffer of the current statement */
    size_t capops;
    outdecl *outs;
    size_t nouts, capouts;
    const char *attr; /* the attribute whose value is being read: parse errors name it */
} parser;

#define TOK (&p->lx.tok)

static bool
is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool
is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool
is_alnum(int c)
{
    return is_alpha(c) || is_digit(c);
}

static bool
is_hex(int c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int
hex_val(int c)
{
    return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* ---- errors ------------------------------------------------------------------------------ */

/* "'text'" for a token, "end of input", or "byte 0xNN" for a control byte. */
static const char *
describe(const token *t, char *buf, size_t n)
{
    if (t->kind == T_EOF)
        return "end of input";
    unsigned char c = (unsigned char)t->s[0];
    if (t->kind == T_BAD && (c < 0x20 || c == 0x7f)) {
        snprintf(buf, n, "byte 0x%02x", c);
        return buf;
    }
    size_t len = t->n;
    bool cut = false;
    if (len > 32) {
        /* Cut on a character boundary so the message stays valid UTF-8. */
        len = 32;
        while (len > 0 && ((unsigned char)t->s[len] & 0xc0) == 0x80)
            len--;
        cut = true;
    }
    snprintf(buf, n, "'%.*s%s'", (int)len, t->s, cut ? "..." : "");
    return buf;
}

static bool
error_at(parser *p, size_t line, size_t col, kiln_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parse errors read "kiln_graph_parse: parse error: SRC:L:C: DETAIL", and inside an
 * attribute's value "SRC:L:C: ATTR: DETAIL"; other codes (shape, overflow, type mismatch)
 * read "SRC:L:C: DETAIL" with DETAIL "<what>: <problem>: …", the form the type rules use
 * when given a position as their api. */
static bool
error_at(parser *p, size_t line, size_t col, kiln_status code, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (code == KILN_ERR_PARSE)
        ir_error(code, API ": parse error: %.400s:%zu:%zu: %s%s%s", p->src, line, col,
                 p->attr ? p->attr : "", p->attr ? ": " : "", detail);
    else
        ir_error(code, "%.400s:%zu:%zu: %s", p->src, line, col, detail);
    return false;
}

#define ERR_TOK(t, ...) error_at(p, (t)->line, (t)->col, KILN_ERR_PARSE, __VA_ARGS__)

static bool
expected(parser *p, const token *t, const char *what)
{
    char buf[64];
    return ERR_TOK(t, "expected %s, got %s", what, describe(t, buf, sizeof buf));
}

static bool
nomem(void)
{
    ir_error(KILN_ERR_NOMEM, API ": out of memory");
    return false;
}

/* ---- UTF-8 ----------------------------------------------------------------------------- */

/* The whole text must be valid UTF-8 without NUL bytes; the first offence is reported with
 * its position, so nothing after this has to think about encodings. */
static bool
utf8_check(parser *p)
{
    const unsigned char *s = (const unsigned char *)p->text;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->len;) {
        unsigned c = s[i];
        size_t k = 0;
        unsigned min = 0, cp = 0;
        if (c == 0)
            return error_at(p, line, col, KILN_ERR_PARSE, "NUL byte in the text");
        if (c < 0x80) {
            if (c == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) {
            k = 1, min = 0x80, cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, min = 0x800, cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, min = 0x10000, cp = c & 0x07;
        } else {
            return error_at(p, line, col, KILN_ERR_PARSE, "invalid UTF-8: byte 0x%02x", c);
        }
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= p->len || (s[i + j] & 0xc0) != 0x80)
                return error_at(p, line, col, KILN_ERR_PARSE,
                                "invalid UTF-8: truncated sequence starting with byte 0x%02x",
                                c);
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return error_at(p, line, col, KILN_ERR_PARSE,
                            "invalid UTF-8: bad sequence starting with byte 0x%02x", c);
        i += k + 1;
        col++;
    }
    return true;
}

/* ---- lexer ----------------------------------------------------------------------------- */

static int
cur(const parser *p)
{
    return p->lx.pos < p->len ? (unsigned char)p->text[p->lx.pos] : -1;
}

static int
at(const parser *p, size_t k)
{
    return p->lx.pos + k < p->len ? (unsigned char)p->text[p->lx.pos + k] : -1;
}

/* Advance one byte, keeping line and column (a column per code point). */
static void
bump(parser *p)
{
    unsigned char c = (unsigned char)p->text[p->lx.pos++];
    if (c == '\n') {
        p->lx.line++;
        p->lx.col = 1;
    } else if ((c & 0xc0) != 0x80) {
        p->lx.col++;
    }
}

static void
skip_space(parser *p)
{
    for (;;) {
        int c = cur(p);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            bump(p);
        } else if (c == '#') {
            while (cur(p) != -1 && cur(p) != '\n')
                bump(p);
        } else {
            return;
        }
    }
}

/* The rest of a numeric literal: letters, digits, '.', '_', and a sign right after an
 * exponent mark (e for decimal, p for hex floats). */
static void
lex_number_tail(parser *p, size_t start)
{
    size_t b = start;
    if (p->text[b] == '-' || p->text[b] == '+')
        b++;
    bool hex = b + 1 < p->len && p->text[b] == '0' && (p->text[b + 1] | 0x20) == 'x';
    for (;;) {
        int c = cur(p);
        if (is_alnum(c) || c == '.') {
            bump(p);
        } else if ((c == '+' || c == '-') && p->lx.pos > b) {
            int prev = p->text[p->lx.pos - 1] | 0x20;
            if (prev != (hex ? 'p' : 'e'))
                return;
            bump(p);
        } else {
            return;
        }
    }
}

/* A quoted string; the opening quote is at the current position.  Escapes are checked
 * here, decoded by decode_string. */
static bool
lex_string(parser *p)
{
    bump(p);
    for (;;) {
        int c = cur(p);
        if (c == -1 || c == '\n')
            return error_at(p, p->lx.line, p->lx.col, KILN_ERR_PARSE,
                            "unterminated string: expected '\"' before %s",
                            c == -1 ? "end of input" : "end of line");
        if (c == '"') {
            bump(p);
            return true;
        }
        if (c == '\\') {
            int e = at(p, 1);
            if (e == '\\' || e == '"') {
                bump(p);
                bump(p);
                continue;
            }
            if (e == 'x' && is_hex(at(p, 2)) && is_hex(at(p, 3)) &&
                !(at(p, 2) == '0' && at(p, 3) == '0')) {
                for (int i = 0; i < 4; i++)
                    bump(p);
                continue;
            }
            return error_at(p, p->lx.line, p->lx.col, KILN_ERR_PARSE,
                            "bad escape in string: expected \\\\, \\\" or \\xNN (not \\x00)");
        }
        if (c < 0x20 || c == 0x7f)
            return error_at(p, p->lx.line, p->lx.col, KILN_ERR_PARSE,
                            "control byte 0x%02x in string: write it as \\x%02x", c, c);
        bump(p);
    }
}

/* Read the next token into p->lx.tok. */
static bool
lex(parser *p)
{
    skip_space(p);
    token *t = TOK;
    size_t start = p->lx.pos;
    t->s = p->text + start;
    t->line = p->lx.line;
    t->col = p->lx.col;
    int c = cur(p);
    if (c == -1) {
        t->kind = T_EOF;
    } else if (is_alpha(c)) {
        while (is_alnum(cur(p)))
            bump(p);
        size_t n = p->lx.pos - start;
        t->kind = T_IDENT;
        if (n == 3 && memcmp(t->s, "b64", 3) == 0 && cur(p) == '"') {
            if (!lex_string(p))
                return false;
            t->kind = T_B64;
        } else if (n == 3 && memcmp(t->s, "nan", 3) == 0 && cur(p) == ':' && at(p, 1) == '0' &&
                   (at(p, 2) | 0x20) == 'x') {
            bump(p);
            while (is_alnum(cur(p)))
                bump(p);
            t->kind = T_NUM;
        }
    } else if (is_digit(c) || (c == '.' && is_digit(at(p, 1)))) {
        bump(p);
        lex_number_tail(p, start);
        t->kind = T_NUM;
    } else if (c == '-' && at(p, 1) == '>') {
        bump(p);
        bump(p);
        t->kind = T_ARROW;
    } else if ((c == '-' || c == '+') && (is_alnum(at(p, 1)) || at(p, 1) == '.')) {
        bump(p);
        lex_number_tail(p, start);
        t->kind = T_NUM;
    } else if (c == '%' && is_digit(at(p, 1))) {
        bump(p);
        while (is_digit(cur(p)))
            bump(p);
        t->kind = T_LABEL;
    } else if (c == '"') {
        if (!lex_string(p))
            return false;
        t->kind = T_STRING;
    } else if (c != 0 && strchr("()[]{},:=", c)) {
        bump(p);
        t->kind = T_PUNCT;
    } else {
        /* One whole character, so the message can quote it. */
        bump(p);
        while (cur(p) != -1 && (cur(p) & 0xc0) == 0x80)
            bump(p);
        t->kind = T_BAD;
    }
    t->n = p->lx.pos - start;
    return true;
}

static bool
is_punct(const token *t, char c)
{
    return t->kind == T_PUNCT && t->s[0] == c;
}

static bool
is_word(const token *t, const char *w)
{
    return t->kind == T_IDENT && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

/* Consume punctuation `c` or fail with "expected 'c'". */
static bool
expect(parser *p, char c)
{
    if (!is_punct(TOK, c)) {
        char what[8];
        snprintf(what, sizeof what, "'%c'", c);
        return expected(p, TOK, what);
    }
    return lex(p);
}

/* Whether the token after the current one is '=' (an attribute, not an operand). */
static bool
next_is_eq(parser *p, bool *yes)
{
    lexstate save = p->lx;
    if (!lex(p))
        return false;
    *yes = is_punct(TOK, '=');
    p->lx = save;
    return true;
}

/* ---- names ------------------------------------------------------------------------------- */

static uint64_t
name_hash(const char *s, size_t n, bool label)
{
    uint64_t h = label ? 0x9e3779b97f4a7c15ull : 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static entry *
table_slot(table *t, const char *s, size_t n, bool label)
{
    size_t i = (size_t)name_hash(s, n, label) & (t->cap - 1);
    for (;; i = (i + 1) & (t->cap - 1)) {
        entry *e = &t->e[i];
        if (!e->s || (e->n == n && e->label == label && memcmp(e->s, s, n) == 0))
            return e;
    }
}

static const entry *
table_find(const table *t, const char *s, size_t n, bool label)
{
    if (!t->cap)
        return NULL;
    const entry *e = table_slot((table *)t, s, n, label);
    return e->s ? e : NULL;
}

/* Insert a name known to be absent. */
static bool
table_add(table *t, const entry *add)
{
    if (2 * (t->count + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        entry *e = ir_calloc(cap, sizeof *e);
        if (!e)
            return nomem();
        table old = *t;
        t->e = e;
        t->cap = cap;
        for (size_t i = 0; i < old.cap; i++)
            if (old.e[i].s)
                *table_slot(t, old.e[i].s, old.e[i].n, old.e[i].label) = old.e[i];
        ir_free(old.e);
    }
    *table_slot(t, add->s, add->n, add->label) = *add;
    t->count++;
    return true;
}

/* The name a token spells, NUL-terminated in the scratch arena: an identifier or label
 * as written, a string decoded (empty only where allow_empty: the graph's name). */
static bool
token_name_ex(parser *p, const token *t, bool allow_empty, const char **out, size_t *outn)
{
    if (t->kind != T_STRING) {
        char *s = ir_arena_strndup(&p->scratch, t->s, t->n);
        if (!s)
            return false;
        *out = s;
        *outn = t->n;
        return true;
    }
    char *s = ir_arena_alloc(&p->scratch, t->n, 1); /* decoded is shorter than quoted */
    if (!s)
        return false;
    size_t n = 0;
    for (size_t i = 1; i + 1 < t->n; i++) {
        char c = t->s[i];
        if (c == '\\') {
            c = t->s[++i];
            if (c == 'x') {
                c = (char)(hex_val(t->s[i + 1]) * 16 + hex_val(t->s[i + 2]));
                i += 2;
            }
        }
        s[n++] = c;
    }
    s[n] = '\0';
    if (n == 0 && !allow_empty)
        return ERR_TOK(t, "expected a name, got an empty string");
    *out = s;
    *outn = n;
    return true;
}

static bool
token_name(parser *p, const token *t, const char **out, size_t *outn)
{
    return token_name_ex(p, t, false, out, outn);
}

/* name = ident | string */
static bool
parse_name(parser *p, const char *what, const char **out)
{
    size_t n;
    if (TOK->kind != T_IDENT && TOK->kind != T_STRING)
        return expected(p, TOK, what);
    return token_name(p, TOK, out, &n) && lex(p);
}

/* The node a value reference (ident, label or string token) names. */
static bool
resolve(parser *p, const token *t, int32_t *id)
{
    const char *s = t->s;
    size_t n = t->n;
    /* Identifiers and labels are looked up in place; only strings need decoding. */
    if (t->kind == T_STRING && !token_name(p, t, &s, &n))
        return false;
    const entry *e = table_find(&p->names, s, n, t->kind == T_LABEL);
    if (!e)
        return ERR_TOK(t, "undefined value '%.*s'", (int)n, s);
    *id = e->id;
    return true;
}

/* Record a new value name defined by token t; redefinition is an error. */
static bool
define(parser *p, const token *t, const char *s, size_t n, int32_t id)
{
    bool label = t->kind == T_LABEL;
    const entry *old = table_find(&p->names, s, n, label);
    if (old)
        return ERR_TOK(t, "redefinition of '%s' (first defined at %zu:%zu)", s, old->line,
                       old->col);
    entry e = {s, n, label, id, t->line, t->col};
    return table_add(&p->names, &e);
}

/* ---- literals ---------------------------------------------------------------------------- */

/* A decimal integer with an optional sign.  Returns 0 on success, 1 if the token is not an
 * integer, 2 if it is one outside int64. */
static int
lit_int(const token *t, int64_t *v)
{
    if (t->kind != T_NUM)
        return 1;
    size_t i = 0;
    bool neg = false;
    if (t->s[0] == '-' || t->s[0] == '+')
        neg = t->s[i++] == '-';
    if (i == t->n)
        return 1;
    uint64_t u = 0;
    bool big = false;
    for (; i < t->n; i++) {
        if (!is_digit(t->s[i]))
            return 1;
        unsigned d = (unsigned)(t->s[i] - '0');
        /* Keep scanning after overflow so "12x" still reads as "not an integer". */
        if (u > (UINT64_MAX - d) / 10)
            big = true;
        else
            u = u * 10 + d;
    }
    if (big || u > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return 2;
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 0;
}

/* An integer for an int64 attribute or list entry. */
static bool
parse_i64(parser *p, int64_t *v)
{
    int r = lit_int(TOK, v);
    if (r == 1)
        return expected(p, TOK, "an integer");
    if (r == 2)
        return ERR_TOK(TOK, "integer literal out of range for i64: %.*s", (int)TOK->n, TOK->s);
    return lex(p);
}

/* A dimension: like parse_i64, but one too large for int64 is a size overflow, the same
 * error a dimension too large for kiln gets. */
static bool
parse_dim(parser *p, int64_t *v)
{
    int r = lit_int(TOK, v);
    if (r == 1)
        return expected(p, TOK, "a dimension (an integer)");
    if (r == 2)
        return error_at(p, TOK->line, TOK->col, KILN_ERR_OVERFLOW,
                        "dimension: tensor too large: %.*s exceeds 2^48", (int)TOK->n,
                        TOK->s);
    return lex(p);
}

/* A float literal in dtype t (f32 or f64) into dst: strtod syntax, inf, -inf, nan,
 * nan:0x<bits>. */
static bool
lit_float(parser *p, const token *tk, kiln_dtype t, void *dst)
{
    bool f32 = t == KILN_DTYPE_F32;
    const char *s = tk->s;
    size_t n = tk->n;
    if (!(tk->kind == T_NUM || is_word(tk, "inf") || is_word(tk, "nan")))
        return expected(p, tk, f32 ? "an f32 literal" : "an f64 literal");
    bool neg = s[0] == '-';
    size_t b = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    const char *body = s + b;
    size_t bn = n - b;
    if (bn == 3 && memcmp(body, "inf", 3) == 0) {
        if (f32) {
            float v = neg ? -INFINITY : INFINITY;
            memcpy(dst, &v, 4);
        } else {
            double v = neg ? -(double)INFINITY : (double)INFINITY;
            memcpy(dst, &v, 8);
        }
        return true;
    }
    if (bn >= 4 && memcmp(body, "nan:", 4) == 0) {
        /* The raw bits, which must be a NaN of this dtype; a sign is part of the bits. */
        size_t i = 6; /* past "nan:0x" */
        if (b || bn <= i || bn - i > (f32 ? 8u : 16u))
            return ERR_TOK(tk, "expected nan:0x<bits> with 1 to %d hex digits, got '%.*s'",
                           f32 ? 8 : 16, (int)n, s);
        uint64_t bits = 0;
        for (; i < bn; i++) {
            if (!is_hex(body[i]))
                return ERR_TOK(tk, "expected hex digits after nan:0x, got '%.*s'", (int)n, s);
            bits = bits << 4 | (uint64_t)hex_val(body[i]);
        }
        bool isnan_bits = f32 ? ((bits >> 23 & 0xff) == 0xff && (bits & 0x7fffff) != 0)
                              : ((bits >> 52 & 0x7ff) == 0x7ff &&
                                 (bits & UINT64_C(0xfffffffffffff)) != 0);
        if (!isnan_bits)
            return ERR_TOK(tk, "'%.*s' is not the bit pattern of an %s NaN", (int)n, s,
                           kiln_dtype_name(t));
        if (f32) {
            uint32_t w = (uint32_t)bits;
            memcpy(dst, &w, 4);
        } else {
            memcpy(dst, &bits, 8);
        }
        return true;
    }
    if (bn == 3 && memcmp(body, "nan", 3) == 0) {
        if (b)
            return ERR_TOK(tk, "a NaN has no sign in the text: write nan:0x<bits>, got '%.*s'",
                           (int)n, s);
        if (f32) {
            uint32_t w = 0x7fc00000u;
            memcpy(dst, &w, 4);
        } else {
            uint64_t w = UINT64_C(0x7ff8000000000000);
            memcpy(dst, &w, 8);
        }
        return true;
    }
    /* strtod would also take "infinity" and "nan(...)": only digits or '.' may start. */
    if (bn == 0 || !(is_digit(body[0]) || body[0] == '.'))
        return expected(p, tk, f32 ? "an f32 literal" : "an f64 literal");
    if (n >= NUM_MAX)
        return ERR_TOK(tk, "numeric literal longer than %d characters", NUM_MAX - 1);
    char buf[NUM_MAX];
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    if (f32) {
        float v = strtof(buf, &end);
        if (end != buf + n)
            return expected(p, tk, "an f32 literal");
        if (isinf(v))
            return ERR_TOK(tk, "float literal out of range for f32: %s", buf);
        memcpy(dst, &v, 4);
    } else {
        double v = strtod(buf, &end);
        if (end != buf + n)
            return expected(p, tk, "an f64 literal");
        if (isinf(v))
            return ERR_TOK(tk, "float literal out of range for f64: %s", buf);
        memcpy(dst, &v, 8);
    }
    return true;
}

/* One element of dtype t from token tk into dst (element size of t). */
static bool
lit_scalar(parser *p, const token *tk, kiln_dtype t, void *dst)
{
    switch (t) {
    case KILN_DTYPE_BOOL:
        if (is_word(tk, "true") || is_word(tk, "false")) {
            *(uint8_t *)dst = is_word(tk, "true");
            return true;
        }
        return expected(p, tk, "true or false (a bool)");
    case KILN_DTYPE_I32:
    case KILN_DTYPE_I64: {
        int64_t v;
        int r = lit_int(tk, &v);
        bool i32 = t == KILN_DTYPE_I32;
        if (r == 1)
            return expected(p, tk, i32 ? "an integer (i32)" : "an integer (i64)");
        if (r == 2 || (i32 && (v < INT32_MIN || v > INT32_MAX)))
            return ERR_TOK(tk, "integer literal out of range for %s: %.*s", kiln_dtype_name(t),
                           (int)tk->n, tk->s);
        if (i32) {
            int32_t w = (int32_t)v;
            memcpy(dst, &w, 4);
        } else {
            memcpy(dst, &v, 8);
        }
        return true;
    }
    case KILN_DTYPE_F32:
    case KILN_DTYPE_F64:
        return lit_float(p, tk, t, dst);
    default:
        IR_ASSERT(!"bad dtype");
    }
}

/* ---- base64 (RFC 4648 with padding; the canonical form only) ---------------------------- */

static int
b64_val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (is_digit(c))
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* The decoded size of b64 text s[0..n), or an error at token tk. */
static bool
b64_size(parser *p, const token *tk, const char *s, size_t n, size_t *size)
{
    if (n % 4 != 0)
        return ERR_TOK(tk, "bad base64: length %zu is not a multiple of 4", n);
    size_t pad = 0;
    while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
        pad++;
    *size = n / 4 * 3 - pad;
    return true;
}

/* Decode s[0..n) (size from b64_size) into dst. */
static bool
b64_decode(parser *p, const token *tk, const char *s, size_t n, unsigned char *dst)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (size_t j = 0; j < 4; j++) {
            int c = (unsigned char)s[i + j];
            int d = b64_val(c);
            if (c == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '=')) {
                pad++;
                d = 0;
            } else if (d < 0 || pad) {
                /* The string is on one line and base64 is ASCII: the column is exact. */
                return error_at(p, tk->line, tk->col + 4 + i + j, KILN_ERR_PARSE,
                                "bad base64: expected a base64 character, got '%c'", c);
            }
            v = v << 6 | (uint32_t)d;
        }
        if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
            return ERR_TOK(tk, "bad base64: non-zero bits in the padded last group");
        dst[k++] = (unsigned char)(v >> 16);
        if (pad < 2)
            dst[k++] = (unsigned char)(v >> 8);
        if (pad < 1)
            dst[k++] = (unsigned char)v;
    }
    return true;
}

/* ---- types ------------------------------------------------------------------------------- */

/* type = dtype "[" (dim ("," dim)*)? "]" */
static bool
parse_type(parser *p, ir_type *t)
{
    token first = *TOK;
    if (TOK->kind != T_IDENT)
        return expected(p, TOK, "a type (a dtype and dims, e.g. f32[4])");
    int d = ir_dtype_from_name(TOK->s, TOK->n);
    if (d < 0)
        return ERR_TOK(TOK, "unknown dtype '%.*s' (expected f32, f64, i32, i64 or bool)",
                       (int)TOK->n, TOK->s);
    memset(t, 0, sizeof *t);
    t->dtype = (kiln_dtype)d;
    if (!lex(p) || !expect(p, '['))
        return false;
    if (!is_punct(TOK, ']')) {
        for (;;) {
            if (t->shape.rank == IR_MAX_RANK)
                return error_at(p, TOK->line, TOK->col, KILN_ERR_SHAPE,
                                "type: bad rank: more than %d dimensions", IR_MAX_RANK);
            if (!parse_dim(p, &t->shape.dims[t->shape.rank++]))
                return false;
            if (!is_punct(TOK, ','))
                break;
            if (!lex(p))
                return false;
        }
    }
    if (!expect(p, ']'))
        return false;
    char api[512];
    snprintf(api, sizeof api, "%.400s:%zu:%zu: type", p->src, first.line, first.col);
    return ir_shape_check(api, t->dtype, &t->shape) == KILN_OK;
}

/* ---- header -------------------------------------------------------------------------------- */

/* param = name ":" type */
static bool
parse_param(parser *p)
{
    token at = *TOK;
    const char *name;
    ir_type t;
    if (!parse_name(p, "an input name", &name) || !expect(p, ':') || !parse_type(p, &t))
        return false;
    size_t n = strlen(name);
    if (table_find(&p->names, name, n, false))
        return define(p, &at, name, n, -1); /* reports the redefinition */
    int32_t id = ir_graph_add_input(p->g, name, &t);
    if (id < 0)
        return false;
    return define(p, &at, name, n, id);
}

/* output = name ":" type ("=" value)? */
static bool
parse_output(parser *p)
{
    outdecl o;
    o.at = *TOK;
    o.ref = *TOK;
    if (!parse_name(p, "an output name", &o.name) || !expect(p, ':') ||
        !parse_type(p, &o.type))
        return false;
    if (is_punct(TOK, '=')) {
        if (!lex(p))
            return false;
        if (TOK->kind != T_IDENT && TOK->kind != T_LABEL && TOK->kind != T_STRING)
            return expected(p, TOK, "a value name");
        o.ref = *TOK;
        if (!lex(p))
            return false;
    }
    if (p->nouts == p->capouts) {
        size_t cap = p->capouts ? 2 * p->capouts : 8;
        outdecl *a = ir_realloc(p->outs, cap * sizeof *a);
        if (!a)
            return nomem();
        p->outs = a;
        p->capouts = cap;
    }
    p->outs[p->nouts++] = o;
    return true;
}

/* Once the body is read: bind each output to its value, check its type and name. */
static bool
bind_outputs(parser *p)
{
    table seen = {0};
    bool ok = false;
    for (size_t i = 0; i < p->nouts; i++) {
        const outdecl *o = &p->outs[i];
        size_t n = strlen(o->name);
        if (table_find(&seen, o->name, n, false)) {
            ERR_TOK(&o->at, "duplicate output '%s'", o->name);
            goto done;
        }
        entry e = {o->name, n, false, 0, o->at.line, o->at.col};
        if (!table_add(&seen, &e))
            goto done;
        int32_t id;
        if (!resolve(p, &o->ref, &id))
            goto done;
        const ir_type *vt = &p->g->nodes[id].type;
        if (!ir_type_equal(vt, &o->type)) {
            char b1[IR_TYPE_STR_MAX], b2[IR_TYPE_STR_MAX];
            error_at(p, o->at.line, o->at.col, KILN_ERR_VERIFY,
                     "output '%s': type mismatch: the value is %s, stated %s", o->name,
                     ir_type_str(vt, b1, sizeof b1), ir_type_str(&o->type, b2, sizeof b2));
            goto done;
        }
        if (ir_graph_add_output(p->g, o->name, id))
            goto done;
    }
    ok = true;
done:
    ir_free(seen.e);
    return ok;
}

/* ---- attributes ---------------------------------------------------------------------------
 * Each attribute's kind (ir.h's IR_ATTR_LIST) says how its value is read and, when it is
 * not there, what was expected: "axes: expected a list of integers, got 'true'".  While
 * an attribute's value is read, in either pass, p->attr names it in every parse error. */

typedef enum akind {
    AK_DATA,
    AK_SCALAR,
    AK_INTS,
    AK_DIMS,
    AK_INT,
    AK_DTYPE,
    AK_BOOL,
} akind;

static const akind attr_kinds[IR_ATTR_COUNT] = {
#define ATTR(E, name, kind) [IR_ATTR_##E##_BIT] = AK_##kind,
    IR_ATTR_LIST(ATTR)
#undef ATTR
};

/* What a value of each kind is, for "expected ...". */
static const char *const akind_what[] = {
    [AK_DATA] = "constant data (a list of literals or b64\"...\")",
    [AK_SCALAR] = "a literal",
    [AK_INTS] = "a list of integers",
    [AK_DIMS] = "a list of dimensions (integers)",
    [AK_INT] = "an integer",
    [AK_DTYPE] = "a dtype (f32, f64, i32, i64 or bool)",
    [AK_BOOL] = "true or false",
};

static akind
attr_kind(ir_op op, int bit)
{
    return bit == IR_ATTR_START_BIT && op == IR_OP_ARANGE ? AK_SCALAR : attr_kinds[bit];
}

/* ---- statements ---------------------------------------------------------------------------- */

/* What the first pass of a statement learns about its attributes. */
typedef struct pattrs {
    unsigned seen;               /* IR_A_* bits given */
    token name[IR_ATTR_COUNT];   /* each attribute's name, for messages */
    token val[IR_ATTR_COUNT];    /* a scalar's token; for data, the '[' or b64 token */
    int64_t list[IR_ATTR_COUNT][IR_MAX_RANK];
    int nlist[IR_ATTR_COUNT];
    lexstate data;               /* where a data list starts (at its '[') */
    size_t ndata;                /* elements in a data list */
} pattrs;

/* ilist = "[" (int ("," int)*)? "]"   (at most 8 entries; the '[' is the current token) */
static bool
parse_ilist(parser *p, int bit, bool dims, pattrs *pa)
{
    if (!lex(p))
        return false;
    int n = 0;
    if (!is_punct(TOK, ']')) {
        for (;;) {
            if (n == IR_MAX_RANK) {
                char buf[64];
                return ERR_TOK(TOK, "expected ']' (a list has at most %d entries), got %s",
                               IR_MAX_RANK, describe(TOK, buf, sizeof buf));
            }
            if (!(dims ? parse_dim(p, &pa->list[bit][n]) : parse_i64(p, &pa->list[bit][n])))
                return false;
            n++;
            if (!is_punct(TOK, ','))
                break;
            if (!lex(p))
                return false;
        }
    }
    pa->nlist[bit] = n;
    return expect(p, ']');
}

/* data = "[" (literal ("," literal)*)? "]" | b64string   (the first token is checked) */
static bool
skip_data(parser *p, pattrs *pa)
{
    if (TOK->kind == T_B64)
        return lex(p);
    pa->data = p->lx;
    if (!lex(p))
        return false;
    pa->ndata = 0;
    if (!is_punct(TOK, ']')) {
        for (;;) {
            if (TOK->kind != T_NUM && TOK->kind != T_IDENT)
                return expected(p, TOK, "a literal");
            pa->ndata++;
            if (!lex(p))
                return false;
            if (!is_punct(TOK, ','))
                break;
            if (!lex(p))
                return false;
        }
    }
    return expect(p, ']');
}

/* Whether the current token can start a value of kind k (what follows is checked as it
 * is read). */
static bool
starts_kind(parser *p, akind k)
{
    switch (k) {
    case AK_DATA:
        return TOK->kind == T_B64 || is_punct(TOK, '[');
    case AK_SCALAR:
        return TOK->kind == T_NUM || TOK->kind == T_IDENT;
    case AK_INTS:
    case AK_DIMS:
        return is_punct(TOK, '[');
    case AK_INT:
        return TOK->kind == T_NUM;
    case AK_DTYPE:
        return TOK->kind == T_IDENT && ir_dtype_from_name(TOK->s, TOK->n) >= 0;
    case AK_BOOL:
        return is_word(TOK, "true") || is_word(TOK, "false");
    }
    IR_ASSERT(!"bad attribute kind");
    return false;
}

/* attr_value, first pass: syntax, integers and lists; literals of the result dtype wait
 * for the second (build_attrs). */
static bool
read_attr_value(parser *p, akind k, int bit, pattrs *pa)
{
    pa->val[bit] = *TOK;
    if (!starts_kind(p, k)) {
        if (k == AK_DTYPE && TOK->kind == T_IDENT)
            return ERR_TOK(TOK, "unknown dtype '%.*s' (expected f32, f64, i32, i64 or bool)",
                           (int)TOK->n, TOK->s);
        return expected(p, TOK, akind_what[k]);
    }
    switch (k) {
    case AK_DATA:
        return skip_data(p, pa);
    case AK_INTS:
    case AK_DIMS:
        return parse_ilist(p, bit, k == AK_DIMS, pa);
    case AK_INT:
        return parse_i64(p, &pa->list[bit][0]);
    case AK_SCALAR:
    case AK_DTYPE:
    case AK_BOOL:
        return lex(p);
    }
    IR_ASSERT(!"bad attribute kind");
    return false;
}

/* attr = ident "=" attr_value
 * attr_value = literal | ilist | integer | dtype | bool | data   (fixed by the attribute) */
static bool
parse_attr(parser *p, ir_op op, pattrs *pa)
{
    token nm = *TOK;
    int bit = -1;
    for (int i = 0; i < IR_ATTR_COUNT; i++)
        if (is_word(&nm, ir_attr_names[i]))
            bit = i;
    if (bit < 0)
        return ERR_TOK(&nm, "unknown attribute '%.*s'", (int)nm.n, nm.s);
    if (!(ir_ops[op].attrs & (1u << bit)))
        return ERR_TOK(&nm, "attribute '%s' is not allowed for %s", ir_attr_names[bit],
                       ir_ops[op].name);
    if (pa->seen & (1u << bit))
        return ERR_TOK(&nm, "duplicate attribute '%s'", ir_attr_names[bit]);
    pa->seen |= 1u << bit;
    pa->name[bit] = nm;
    if (!lex(p) || !expect(p, '='))
        return false;
    p->attr = ir_attr_names[bit];
    bool ok = read_attr_value(p, attr_kind(op, bit), bit, pa);
    p->attr = NULL;
    return ok;
}

/* A per-axis list must have one entry per axis of the operand. */
static bool
check_len(parser *p, const pattrs *pa, int bit, int rank)
{
    if (pa->nlist[bit] == rank)
        return true;
    return ERR_TOK(&pa->val[bit], "expected %d entr%s (one per axis), got %d", rank,
                   rank == 1 ? "y" : "ies", pa->nlist[bit]);
}

/* An axis written in the text (negative counts from the end) as an index into `rank`. */
static bool
norm_axis(parser *p, const token *at, const char *opname, int64_t a, int rank, int *out)
{
    if (a < -(int64_t)rank || a >= rank)
        return error_at(p, at->line, at->col, KILN_ERR_SHAPE,
                        "%s: bad axis: axis %" PRId64 " is out of range for rank %d", opname, a,
                        rank);
    *out = (int)(a < 0 ? a + rank : a);
    return true;
}

/* data = list | b64string, second pass: the elements of a constant of type `given` into
 * a new buffer *data (NULL for an empty constant; the caller frees it). */
static bool
read_data(parser *p, const pattrs *pa, const ir_type *given, void **data)
{
    const token *v = &pa->val[IR_ATTR_DATA_BIT];
    kiln_dtype t = given->dtype;
    size_t count = ir_shape_count(&given->shape);
    size_t bytes = ir_type_bytes(given), size = kiln_dtype_size(t);
    /* Counts first, so a small text never makes a big allocation. */
    if (v->kind == T_B64) {
        size_t got = 0;
        if (!b64_size(p, v, v->s + 4, v->n - 5, &got))
            return false;
        if (got != bytes) {
            char tb[IR_TYPE_STR_MAX];
            return ERR_TOK(v, "%zu bytes, %s needs %zu", got, ir_type_str(given, tb, sizeof tb),
                           bytes);
        }
    } else if (pa->ndata != count) {
        return ERR_TOK(v, "%zu element%s, the type needs %zu", pa->ndata,
                       pa->ndata == 1 ? "" : "s", count);
    }
    if (bytes == 0)
        return true;
    unsigned char *buf = ir_malloc(bytes);
    if (!buf)
        return nomem();
    *data = buf;
    if (v->kind == T_B64) {
        if (!b64_decode(p, v, v->s + 4, v->n - 5, buf))
            return false;
        if (t == KILN_DTYPE_BOOL)
            for (size_t i = 0; i < bytes; i++)
                if (buf[i] > 1)
                    return ERR_TOK(v, "bool constant element %zu is byte 0x%02x, not 0 or 1", i,
                                   buf[i]);
        return true;
    }
    /* Re-read the list from its '[' now that the dtype is known. */
    lexstate after = p->lx;
    p->lx = pa->data;
    if (!lex(p))
        return false;
    for (size_t i = 0; i < count; i++) {
        if (!lit_scalar(p, TOK, t, buf + i * size) || !lex(p))
            return false;
        if (i + 1 < count && !lex(p)) /* past ',' */
            return false;
    }
    p->lx = after;
    return true;
}

/* Second pass: turn what parse_attr saw into ir_attrs, given the result dtype `t` and the
 * first operand's type `x` (NULL for sources).  `optok` is where missing ones are
 * reported.  Sets p->attr to each attribute in turn: build_attrs clears it. */
static bool
convert_attrs(parser *p, ir_op op, const pattrs *pa, const token *optok, kiln_dtype t,
              const ir_type *given, const ir_type *x, ir_attrs *at, void **data)
{
    unsigned m = ir_ops[op].attrs;
    const char *opname = ir_ops[op].name;
    int rank = x ? x->shape.rank : 0;
    memset(at, 0, sizeof *at);
    for (int bit = 0; bit < IR_ATTR_COUNT; bit++) {
        unsigned a = 1u << bit;
        if (!(m & a))
            continue;
        bool has = pa->seen & a;
        const token *v = &pa->val[bit];
        /* The defaults: keepdim=false, pad value=0, arange start=0 delta=1, slice per
         * Python; everything else must be given. */
        bool optional = a == IR_A_KEEPDIM || (a == IR_A_VALUE && op == IR_OP_PAD) ||
                        op == IR_OP_ARANGE || op == IR_OP_SLICE;
        p->attr = NULL;
        if (!has && !optional)
            return ERR_TOK(optok, "missing attribute '%s' for %s", ir_attr_names[bit], opname);
        p->attr = ir_attr_names[bit];
        switch (a) {
        case IR_A_DATA:
            if (!read_data(p, pa, given, data))
                return false;
            at->data = *data;
            break;
        case IR_A_VALUE:
            if (has && !lit_scalar(p, v, t, at->value.bytes))
                return false;
            break;
        case IR_A_START:
            if (op == IR_OP_ARANGE) {
                if (has && !lit_scalar(p, v, t, at->start.bytes))
                    return false;
            } else if (has && !check_len(p, pa, bit, rank)) {
                return false;
            }
            break;
        case IR_A_DELTA:
            if (!has)
                at->delta = ir_scalar_from_i64(t, 1);
            else if (!lit_scalar(p, v, t, at->delta.bytes))
                return false;
            break;
        case IR_A_STOP:
        case IR_A_STEP:
        case IR_A_LOW:
        case IR_A_HIGH:
        case IR_A_PERM:
            if (has && !check_len(p, pa, bit, rank))
                return false;
            break;
        case IR_A_TO: /* a known dtype: checked by the first pass */
            at->to = (kiln_dtype)ir_dtype_from_name(v->s, v->n);
            break;
        case IR_A_SHAPE:
            at->shape.rank = pa->nlist[bit];
            memcpy(at->shape.dims, pa->list[bit], sizeof(int64_t) * (size_t)at->shape.rank);
            break;
        case IR_A_AXIS:
            if (!norm_axis(p, v, opname, pa->list[bit][0], rank, &at->axis))
                return false;
            break;
        case IR_A_AXES:
            for (int i = 0; i < pa->nlist[bit]; i++) {
                int ax = 0;
                if (!norm_axis(p, v, opname, pa->list[bit][i], rank, &ax))
                    return false;
                if (at->axes & (1u << ax))
                    return error_at(p, v->line, v->col, KILN_ERR_SHAPE,
                                    "%s: bad axes: axis %d is listed twice", opname, ax);
                at->axes |= 1u << ax;
            }
            break;
        case IR_A_KEEPDIM: /* true or false: checked by the first pass */
            at->keepdim = has && is_word(v, "true");
            break;
        }
    }
    if (op == IR_OP_SLICE) {
        /* Omitted lists take Python's defaults for the sign of each step, written as the
         * numbers they amount to, so the printed form is explicit. */
        int sb = IR_ATTR_START_BIT, eb = IR_ATTR_STOP_BIT, pb = IR_ATTR_STEP_BIT;
        for (int i = 0; i < rank; i++) {
            int64_t n = x->shape.dims[i];
            int64_t step = (pa->seen & IR_A_STEP) ? pa->list[pb][i] : 1;
            at->step[i] = step;
            at->begin[i] = (pa->seen & IR_A_START) ? pa->list[sb][i] : step > 0 ? 0 : n - 1;
            at->stop[i] = (pa->seen & IR_A_STOP) ? pa->list[eb][i] : step > 0 ? n : -n - 1;
        }
    }
    if (op == IR_OP_PAD)
        for (int i = 0; i < rank; i++) {
            at->low[i] = pa->list[IR_ATTR_LOW_BIT][i];
            at->high[i] = pa->list[IR_ATTR_HIGH_BIT][i];
        }
    if (op == IR_OP_PERMUTE)
        for (int i = 0; i < rank; i++) {
            int64_t v = pa->list[IR_ATTR_PERM_BIT][i];
            /* Out-of-range entries are left for the type rule to report, as -1. */
            at->perm[i] = v >= 0 && v < IR_MAX_RANK ? (int)v : -1;
        }
    return true;
}

static bool
build_attrs(parser *p, ir_op op, const pattrs *pa, const token *optok, kiln_dtype t,
            const ir_type *given, const ir_type *x, ir_attrs *at, void **data)
{
    bool ok = convert_attrs(p, op, pa, optok, t, given, x, at, data);
    p->attr = NULL;
    return ok;
}

/* stmt = value "=" op "(" (arg ("," arg)*)? ")" (":" type)?
 * value = ident | label | string
 * arg = value | attr          (operands first, then attributes) */
static bool
parse_stmt(parser *p)
{
    token def = *TOK;
    const char *name;
    size_t namelen;
    if (def.kind != T_IDENT && def.kind != T_LABEL && def.kind != T_STRING)
        return expected(p, TOK, "a statement (NAME = op(...)) or '}'");
    if (!token_name(p, &def, &name, &namelen))
        return false;
    const entry *old = table_find(&p->names, name, namelen, def.kind == T_LABEL);
    if (old)
        return ERR_TOK(&def, "redefinition of '%s' (first defined at %zu:%zu)", name, old->line,
                       old->col);
    if (!lex(p) || !expect(p, '='))
        return false;

    token optok = *TOK;
    if (optok.kind != T_IDENT)
        return expected(p, TOK, "an op name");
    int opi = ir_op_from_name(optok.s, optok.n);
    if (opi < 0)
        return ERR_TOK(&optok, "unknown op '%.*s'", (int)optok.n, optok.s);
    ir_op op = (ir_op)opi;
    if (op == IR_OP_INPUT)
        return ERR_TOK(&optok, "an input is declared in the graph header, not as a statement");
    const ir_op_info *info = &ir_ops[op];
    if (!lex(p) || !expect(p, '('))
        return false;

    pattrs pa;
    memset(&pa, 0, sizeof pa);
    size_t nin = 0;
    if (!is_punct(TOK, ')')) {
        for (;;) {
            bool attr = false;
            if (TOK->kind == T_IDENT && !next_is_eq(p, &attr))
                return false;
            if (attr) {
                if (!parse_attr(p, op, &pa))
                    return false;
            } else if (pa.seen) {
                return expected(p, TOK, "an attribute (NAME=VALUE; operands come first)");
            } else {
                if (TOK->kind != T_IDENT && TOK->kind != T_LABEL && TOK->kind != T_STRING)
                    return expected(p, TOK, "an operand or an attribute");
                if (nin == p->capops) {
                    size_t cap = p->capops ? 2 * p->capops : 8;
                    int32_t *a = ir_realloc(p->ops, cap * sizeof *a);
                    if (!a)
                        return nomem();
                    p->ops = a;
                    p->capops = cap;
                }
                if (nin >= (1u << 16))
                    return ERR_TOK(TOK, "too many operands (at most %u)", 1u << 16);
                if (!resolve(p, TOK, &p->ops[nin]) || !lex(p))
                    return false;
                nin++;
            }
            if (!is_punct(TOK, ','))
                break;
            if (!lex(p))
                return false;
        }
    }
    if (!expect(p, ')'))
        return false;
    if (info->arity >= 0 && nin != (size_t)info->arity)
        return ERR_TOK(&optok, "%s takes %d operand%s, got %zu", info->name, info->arity,
                       info->arity == 1 ? "" : "s", nin);
    if (info->arity < 0 && nin < 1)
        return ERR_TOK(&optok, "%s takes one or more operands, got none", info->name);

    ir_type given;
    bool has_type = false;
    if (is_punct(TOK, ':')) {
        if (!lex(p) || !parse_type(p, &given))
            return false;
        has_type = true;
    } else if (info->kind == IR_KIND_SOURCE) {
        char what[64];
        snprintf(what, sizeof what, "':' and a result type (%s needs one)", info->name);
        return expected(p, TOK, what);
    }

    const ir_type *x = nin ? &p->g->nodes[p->ops[0]].type : NULL;
    kiln_dtype t = has_type ? given.dtype : x->dtype;
    ir_attrs at;
    void *data = NULL;
    bool ok = build_attrs(p, op, &pa, &optok, t, has_type ? &given : NULL, x, &at, &data);
    int32_t id = -1;
    if (ok) {
        char api[512];
        snprintf(api, sizeof api, "%.400s:%zu:%zu: %s", p->src, optok.line, optok.col,
                 info->name);
        id = ir_graph_add_node(p->g, api, op, (int)nin, p->ops, &at, has_type ? &given : NULL,
                               def.kind == T_LABEL ? NULL : name);
    }
    ir_free(data);
    return id >= 0 && define(p, &def, name, namelen, id);
}

/* graph = "graph" name "(" (param ("," param)*)? ")"
 *         "->" "(" (output ("," output)*)? ")" "{" stmt* "}" EOF */
static bool
parse_graph(parser *p)
{
    if (!is_word(TOK, "graph"))
        return expected(p, TOK, "'graph'");
    /* The API lets a graph have an empty name, so the text does too. */
    const char *name;
    size_t n;
    if (!lex(p))
        return false;
    if (TOK->kind != T_IDENT && TOK->kind != T_STRING)
        return expected(p, TOK, "a graph name");
    if (!token_name_ex(p, TOK, true, &name, &n) || !lex(p))
        return false;
    p->g = ir_graph_new(name);
    if (!p->g || !expect(p, '('))
        return false;
    if (!is_punct(TOK, ')')) {
        for (;;) {
            if (!parse_param(p))
                return false;
            if (!is_punct(TOK, ','))
                break;
            if (!lex(p))
                return false;
        }
    }
    if (!expect(p, ')'))
        return false;
    if (TOK->kind != T_ARROW)
        return expected(p, TOK, "'->'");
    if (!lex(p) || !expect(p, '('))
        return false;
    if (!is_punct(TOK, ')')) {
        for (;;) {
            if (!parse_output(p))
                return false;
            if (!is_punct(TOK, ','))
                break;
            if (!lex(p))
                return false;
        }
    }
    if (!expect(p, ')') || !expect(p, '{'))
        return false;
    while (!is_punct(TOK, '}'))
        if (!parse_stmt(p))
            return false;
    if (!lex(p))
        return false;
    if (TOK->kind != T_EOF)
        return expected(p, TOK, "end of input after the graph's '}'");
    return bind_outputs(p);
}

kiln_status
ir_parse(const char *text, size_t len, const char *srcname, kiln_graph **out)
{
    parser pr, *p = &pr;
    memset(p, 0, sizeof *p);
    p->text = text;
    p->len = len;
    p->src = srcname ? srcname : "<input>";
    p->lx.line = p->lx.col = 1;
    *out = NULL;
    bool ok = utf8_check(p) && lex(p) && parse_graph(p);
    kiln_status st = ok ? ir_graph_verify(p->g) : kiln_errcode();
    if (!ok && st == KILN_OK) /* every failing path sets an error; never return a half graph */
        st = ir_error(KILN_ERR_INTERNAL, API ": internal error: failed without a message");
    if (st == KILN_OK)
        *out = p->g;
    else
        kiln_graph_free(p->g);
    ir_free(p->names.e);
    ir_free(p->ops);
    ir_free(p->outs);
    ir_arena_free(&p->scratch);
    return st;
}

/* ---- public API ------------------------------------------------------------------------ */

kiln_status
kiln_graph_parse_named(const char *text, size_t len, const char *source, kiln_graph **out)
{
    if (!text || !out)
        return ir_error(KILN_ERR_INVALID_ARG, API ": invalid argument: %s is NULL",
                        text ? "out" : "text");
    *out = NULL;
    return ir_parse(text, len, source, out);
}

kiln_status
kiln_graph_parse(const char *text, size_t len, kiln_graph **out)
{
    return kiln_graph_parse_named(text, len, NULL, out);
}
