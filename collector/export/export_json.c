#include "export_json.h"

#include <stdlib.h>
#include <string.h>

void xp_buf_free(struct xp_buf *b)
{
    free(b->p);
    *b = (struct xp_buf){0};
}

char *xp_buf_grow(struct xp_buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return b->p + b->len;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return NULL;
    }
    b->p = p;
    b->cap = cap;
    return p + b->len;
}

size_t xp_hex(char *out, uint64_t v)
{
    char tmp[16], *q = tmp + sizeof tmp;
    do {
        *--q = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    size_t n = (size_t)(tmp + sizeof tmp - q);
    out[0] = '0';
    out[1] = 'x';
    memcpy(out + 2, q, n);
    out[2 + n] = '\0';
    return 2 + n;
}

/* Two digits at a time: the timestamps have 19. */
static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                               "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                               "8081828384858687888990919293949596979899";

/* Exactly 8 digits of v < 10^8, in 32-bit arithmetic. */
static inline __attribute__((always_inline)) void put8(char *p, uint32_t v)
{
    uint32_t hi = v / 10000, lo = v % 10000;
    memcpy(p, pairs + 2 * (hi / 100), 2);
    memcpy(p + 2, pairs + 2 * (hi % 100), 2);
    memcpy(p + 4, pairs + 2 * (lo / 100), 2);
    memcpy(p + 6, pairs + 2 * (lo % 100), 2);
}

/* v < 10^8 without leading zeros: two digits at a time, from the end of
 * a scratch of 16, then 8 bytes copied whatever the length (one move; the
 * caller's room is at least 20): no count of the digits first. */
static inline __attribute__((always_inline)) char *put_small(char *p, uint32_t v)
{
    char tmp[16], *q = tmp + 8;
    while (v >= 100) {
        uint32_t k = (v % 100) * 2;
        v /= 100;
        q -= 2;
        memcpy(q, pairs + k, 2);
    }
    if (v >= 10) {
        q -= 2;
        memcpy(q, pairs + 2 * v, 2);
    } else {
        *--q = (char)('0' + v);
    }
    memcpy(p, q, 8);
    return p + (tmp + 8 - q);
}

char *xp_put_int_long(char *p, int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v; /* INT64_MIN too */
    if (v < 0)
        *p++ = '-';
    /* In pieces of 8 digits, each in 32-bit arithmetic: a timestamp of 19
     * digits is three divisions by 10^8 instead of ten by 100. */
    if (u < 100000000)
        return put_small(p, (uint32_t)u);
    uint64_t hi = u / 100000000;
    uint32_t lo = (uint32_t)(u % 100000000);
    if (hi < 100000000) {
        p = put_small(p, (uint32_t)hi);
    } else {
        p = put_small(p, (uint32_t)(hi / 100000000));
        put8(p, (uint32_t)(hi % 100000000));
        p += 8;
    }
    put8(p, lo);
    return p + 8;
}

/* Length of the UTF-8 sequence at s as jansson accepts it (its
 * utf8_check_first and utf8_check_full: no overlong forms, no surrogates,
 * nothing past U+10FFFF), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
    unsigned char u = s[0];
    size_t n;
    uint32_t v;
    if (u < 0x80)
        return 1;
    if (u >= 0xC2 && u <= 0xDF)
        n = 2, v = u & 0x1F;
    else if (u >= 0xE0 && u <= 0xEF)
        n = 3, v = u & 0x0F;
    else if (u >= 0xF0 && u <= 0xF4)
        n = 4, v = u & 0x07;
    else
        return 0;
    if (n > left)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (n == 3 && v < 0x800) ||
        (n == 4 && v < 0x10000))
        return 0;
    return n;
}

static int valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len(s + i, n - i);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

/* 1: escaped in JSON (controls, quote, backslash); 2: not ASCII, replaced
 * by '?' in text that is not valid UTF-8 (with the controls). */
static const unsigned char json_class[256] = {
    [0 ... 0x1F] = 1, ['"'] = 1, ['\\'] = 1, [0x80 ... 0xFF] = 2,
};

char *xp_put_json_string(char *p, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + n;
    unsigned special = 1;
    for (const unsigned char *q = s; q < end; q++)
        if (*q >= 0x80) {
            special = valid_utf8(s, n) ? 1 : 3;
            break;
        }
    *p++ = '"';
    while (s < end) {
        unsigned char c = *s++;
        if (!(json_class[c] & special)) {
            *p++ = (char)c;
            continue;
        }
        if (special == 3 && (c >= 0x80 || c < 0x20)) {
            *p++ = '?';
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        default: {
            static const char hex[] = "0123456789ABCDEF";
            memcpy(p, "u00", 3);
            p[3] = hex[c >> 4];
            p[4] = hex[c & 15];
            p += 5;
        }
        }
    }
    *p++ = '"';
    return p;
}

char *xp_put_csv_field(char *p, const char *s, size_t n)
{
    if (!memchr(s, ',', n) && !memchr(s, '"', n) && !memchr(s, '\r', n) && !memchr(s, '\n', n)) {
        memcpy(p, s, n);
        return p + n;
    }
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            *p++ = '"';
        *p++ = s[i];
    }
    *p++ = '"';
    return p;
}

int xp_json_plain(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n; i++)
        if (json_class[s[i]])
            return 0;
    return 1;
}

void xp_buf_str(struct xp_buf *b, const char *s) { xp_buf_put(b, s, strlen(s)); }

void xp_buf_char(struct xp_buf *b, char c) { xp_buf_put(b, &c, 1); }

void xp_buf_int(struct xp_buf *b, int64_t v)
{
    char *p = xp_buf_reserve(b, 24);
    if (p)
        xp_buf_commit(b, xp_put_int(p, v));
}

char *xp_put_us(char *p, int64_t ns)
{
    uint32_t rest = (uint32_t)(ns % 1000);
    p = xp_put_int(p, ns / 1000);
    *p++ = '.';
    *p++ = (char)('0' + rest / 100);
    memcpy(p, pairs + 2 * (rest % 100), 2);
    return p + 2;
}

void xp_buf_json_string(struct xp_buf *b, const char *s)
{
    size_t n = strlen(s);
    char *p = xp_buf_reserve(b, 6 * n + 2);
    if (p)
        xp_buf_commit(b, xp_put_json_string(p, s, n));
}

void xp_buf_csv_field(struct xp_buf *b, const char *s)
{
    size_t n = strlen(s);
    char *p = xp_buf_reserve(b, 2 * n + 2);
    if (p)
        xp_buf_commit(b, xp_put_csv_field(p, s, n));
}

int xp_buf_flush(struct xp_buf *b, FILE *out)
{
    int rc = b->failed || (b->len && fwrite(b->p, 1, b->len, out) != b->len) ? -1 : 0;
    b->len = 0;
    b->failed = 0;
    return rc;
}
