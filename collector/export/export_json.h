/* JSON and CSV text written straight into a buffer, byte for byte as
 * jansson's json_dumps(JSON_COMPACT) writes the same values (strings
 * through iot_json_text, integers), without building an object per row:
 * the exporters' rows went out at 28 000 to 290 000 a second through
 * jansson objects and fprintf, against millions through the analysis. */
#ifndef IOT_EXPORT_JSON_H
#define IOT_EXPORT_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct xp_buf {
    char *p;
    size_t len, cap;
    int failed; /* out of memory: what was appended since is lost */
};

void xp_buf_free(struct xp_buf *b);
/* Room for n more bytes at the end: where to write them, then
 * xp_buf_commit() with the end of what was written; NULL without memory. */
char *xp_buf_grow(struct xp_buf *b, size_t n);
static inline char *xp_buf_reserve(struct xp_buf *b, size_t n)
{
    return b->len + n <= b->cap ? b->p + b->len : xp_buf_grow(b, n);
}
static inline void xp_buf_commit(struct xp_buf *b, char *end) { b->len = (size_t)(end - b->p); }

/* Writers into reserved room; each returns the end of what it wrote. */
/* An integer, as "%lld" prints it: at most 20 bytes.  Inline for the
 * integers most of a row's are, -1 to 9 (ranks, sentinels, results): a
 * row has a dozen. */
char *xp_put_int_long(char *p, int64_t v);
static inline char *xp_put_int(char *p, int64_t v)
{
    if (v >= -1 && v <= 9) {
        if (v < 0) {
            p[0] = '-';
            p[1] = '1';
            return p + 2;
        }
        *p = (char)('0' + v);
        return p + 1;
    }
    return xp_put_int_long(p, v);
}
/* A JSON string of n bytes, quoted and escaped as jansson dumps it; text
 * that is not valid UTF-8 has its bytes at or above 0x80 (and controls)
 * replaced by '?', as iot_json_text does.  At most 6 n + 2 bytes. */
char *xp_put_json_string(char *p, const char *s, size_t n);
/* 1 when a JSON string of these n bytes is them between quotes: printable
 * ASCII without quote or backslash. */
int xp_json_plain(const char *s, size_t n);
/* An RFC 4180 CSV field: quoted, quotes doubled, when it holds a comma, a
 * quote or a line break.  At most 2 n + 2 bytes. */
char *xp_put_csv_field(char *p, const char *s, size_t n);

/* "%lld.%03lld" of ns / 1000 and ns % 1000, ns >= 0: microseconds with
 * three decimals of ns ("12.345"), as the Chrome trace wants them.  At
 * most 24 bytes. */
char *xp_put_us(char *p, int64_t ns);

/* "0x%llx" of v into out (at least 19 bytes), NUL-terminated; its length. */
size_t xp_hex(char *out, uint64_t v);

/* The same, appended to a buffer.  Inline: the Chrome trace's envelope
 * of a slice is a dozen of these, most of them literals. */
static inline void xp_buf_put(struct xp_buf *b, const char *s, size_t n)
{
    char *p = xp_buf_reserve(b, n);
    if (p) {
        __builtin_memcpy(p, s, n);
        b->len += n;
    }
}
void xp_buf_str(struct xp_buf *b, const char *s);
void xp_buf_char(struct xp_buf *b, char c);
void xp_buf_int(struct xp_buf *b, int64_t v);
void xp_buf_json_string(struct xp_buf *b, const char *s);
void xp_buf_csv_field(struct xp_buf *b, const char *s);
/* Writes the buffer out and empties it; -1 when it could not (or when
 * memory ran out since the last flush). */
int xp_buf_flush(struct xp_buf *b, FILE *out);

#endif
