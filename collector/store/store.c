#include "store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fail.h"
#include "fsutil.h"
#include "link.h"
#include "log.h"
#include "wire.h"

/* Large enough that a group commit of small batches costs one write(). */
#define WRITE_BUFFER (1u << 20)
#define SEGMENT_NAME_LEN 21 /* "segment-" 8 digits ".iots" */
/* STORE/MANIFEST: what the store should hold, so that a segment deleted or
 * cut at a record boundary is seen (docs/store-format.md, "Manifest").  A
 * 32-byte head (magic, version, the segment being written and the bytes of
 * it the last sync covered, CRC-32), then per finished segment N, at
 * MANIFEST_HEAD + (N - 1) * MANIFEST_ENTRY, its final size, N and a CRC-32. */
#define MANIFEST_NAME "MANIFEST"
#define MANIFEST_MAGIC "IOTSMANI"
#define MANIFEST_HEAD 32u
#define MANIFEST_ENTRY 16u
#define MANIFEST_MAX_SEGMENTS (1u << 20) /* beyond: a damaged head, not a store */
#define DAMAGE_REPORTS 10 /* damaged records named per scan; the rest counted */

struct iot_store {
    char *dir;
    int writable;
    int lock_fd;
    int fd;              /* segment being written */
    uint32_t segment;    /* its number */
    uint64_t seg_bytes;  /* its size including what is still buffered */
    uint64_t seg_limit;
    uint8_t *buf;
    size_t buf_len;
    uint64_t durable;    /* bytes of the segment covered by the last sync */
    int man_fd;          /* MANIFEST, -1 if it could not be opened */
    int failed;
    int fail_errno;      /* errno of the failure, or what stands for it */
    char error[512];
};

struct rec_header {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint32_t len;
    uint32_t crc;
    uint64_t recv_ns;
    const uint8_t *payload; /* read_record(): its bytes, valid until the next read */
};

/* Reads one segment record by record, never past `size`: the size seen at
 * open, or what a sync covered, so a reader racing a writer sees a
 * consistent prefix.  Records come through a window of the file, refilled
 * a chunk at a time: one pread for many small records instead of two each.
 * Only bytes below `size` are ever in the window, and those do not change. */
#define READ_CHUNK (1u << 20)

struct seg_reader {
    int fd;
    uint64_t off;
    uint64_t size;
    uint8_t *win; /* the window: file bytes from win_off, win_len of them */
    size_t cap;
    uint64_t win_off;
    size_t win_len;
};

enum rec_result { REC_OK, REC_END, REC_SHORT, REC_BAD_HEADER, REC_BAD_CRC, REC_IO };

struct seglist {
    uint32_t *num;
    size_t n;
};

static void put_header(uint8_t *p, uint32_t len, uint32_t crc, uint64_t recv_ns)
{
    iot_put_u32(p, IOT_STORE_RECORD_MAGIC);
    p[4] = IOT_STORE_RECORD_VERSION & 0xff;
    p[5] = IOT_STORE_RECORD_VERSION >> 8;
    p[6] = p[7] = 0;
    iot_put_u32(p + 8, len);
    iot_put_u32(p + 12, crc);
    iot_put_u64(p + 16, recv_ns);
}

static void get_header(const uint8_t *p, struct rec_header *h)
{
    h->magic = iot_get_u32(p);
    h->version = (uint16_t)(p[4] | p[5] << 8);
    h->flags = (uint16_t)(p[6] | p[7] << 8);
    h->len = iot_get_u32(p + 8);
    h->crc = iot_get_u32(p + 12);
    h->recv_ns = iot_get_u64(p + 16);
}

static void file_header(uint8_t p[IOT_STORE_FILE_HEADER])
{
    memcpy(p, IOT_STORE_FILE_MAGIC, 8);
    iot_put_u32(p + 8, IOT_STORE_FORMAT_VERSION);
    iot_put_u32(p + 12, 0);
}

static void segment_name(char *buf, size_t len, uint32_t num)
{
    snprintf(buf, len, "segment-%08u.iots", num);
}

static void segment_path(char *buf, size_t len, const char *dir, uint32_t num)
{
    char name[32];
    segment_name(name, sizeof name, num);
    snprintf(buf, len, "%s/%s", dir, name);
}

static int parse_segment_name(const char *name, uint32_t *num)
{
    if (strlen(name) != SEGMENT_NAME_LEN || strncmp(name, "segment-", 8) != 0 ||
        strcmp(name + 16, ".iots") != 0)
        return 0;
    uint64_t v = 0;
    for (int i = 8; i < 16; i++) {
        if (!isdigit((unsigned char)name[i]))
            return 0;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    *num = (uint32_t)v;
    return v > 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int list_segments(const char *dir, struct seglist *out, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return iot_fail(err, errlen, "cannot read store directory %s: %s", dir, strerror(errno));
    size_t cap = 0;
    out->num = NULL;
    out->n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint32_t num;
        if (!parse_segment_name(e->d_name, &num))
            continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            uint32_t *p = realloc(out->num, cap * sizeof *p);
            if (!p) {
                closedir(d);
                free(out->num);
                return iot_fail(err, errlen, "out of memory listing %s", dir);
            }
            out->num = p;
        }
        out->num[out->n++] = num;
    }
    closedir(d);
    if (out->n)
        qsort(out->num, out->n, sizeof *out->num, cmp_u32);
    return 0;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? 1 : -1; /* 1: the file ended early */
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static enum rec_result check_record_header(const struct rec_header *h, char *why, size_t whylen)
{
    if (h->magic != IOT_STORE_RECORD_MAGIC)
        snprintf(why, whylen, "bad record magic 0x%08x", h->magic);
    else if (h->version != IOT_STORE_RECORD_VERSION)
        snprintf(why, whylen, "unsupported record version %u", h->version);
    else if (h->flags != 0)
        snprintf(why, whylen, "unknown record flags 0x%04x", h->flags);
    else if (h->len > IOT_WIRE_MAX_BATCH)
        snprintf(why, whylen, "record length %u exceeds the limit of %u", h->len,
                 IOT_WIRE_MAX_BATCH);
    else
        return REC_OK;
    return REC_BAD_HEADER;
}

static int reserve(struct seg_reader *r, size_t len)
{
    if (len <= r->cap)
        return 0;
    uint8_t *p = realloc(r->win, len);
    if (!p)
        return -1;
    r->win = p;
    r->cap = len;
    return 0;
}

/* The reader's file changed (or was reopened): nothing in the window holds. */
static void forget_window(struct seg_reader *r)
{
    r->win_len = 0;
}

/* The len bytes at off (below r->size), from the window or read into it
 * from off on; NULL with errno set, or with errno 0 if the file is shorter
 * than it was. */
static const uint8_t *bytes_at(struct seg_reader *r, uint64_t off, size_t len)
{
    if (off >= r->win_off && off - r->win_off <= r->win_len &&
        len <= r->win_len - (off - r->win_off))
        return r->win + (off - r->win_off);
    size_t want = len > READ_CHUNK ? len : READ_CHUNK;
    if (want > r->size - off)
        want = (size_t)(r->size - off);
    r->win_len = 0;
    if (reserve(r, want ? want : 1) < 0) {
        errno = ENOMEM;
        return NULL;
    }
    int rc = pread_full(r->fd, r->win, want, off);
    if (rc != 0) {
        if (rc > 0)
            errno = 0;
        return NULL;
    }
    r->win_off = off;
    r->win_len = want;
    return r->win;
}

/* Reads the record at r->off into h, its payload in the reader's window;
 * advances r->off only on REC_OK, so on failure r->off names the damaged
 * record. */
static enum rec_result read_record(struct seg_reader *r, struct rec_header *h, char *why,
                                   size_t whylen)
{
    if (r->off == r->size)
        return REC_END;
    if (r->size - r->off < IOT_STORE_RECORD_HEADER) {
        snprintf(why, whylen, "incomplete record header");
        return REC_SHORT;
    }
    const uint8_t *hb = bytes_at(r, r->off, IOT_STORE_RECORD_HEADER);
    if (!hb) {
        snprintf(why, whylen, "read error: %s", errno ? strerror(errno) : "file shrank");
        return REC_IO;
    }
    get_header(hb, h);
    enum rec_result res = check_record_header(h, why, whylen);
    if (res != REC_OK)
        return res;
    if (r->size - r->off - IOT_STORE_RECORD_HEADER < h->len) {
        snprintf(why, whylen, "record of %u bytes is cut off by the end of the file", h->len);
        return REC_SHORT;
    }
    const uint8_t *payload = bytes_at(r, r->off + IOT_STORE_RECORD_HEADER, h->len);
    if (!payload) {
        snprintf(why, whylen, "%s: %s",
                 errno == ENOMEM ? "out of memory for a record" : "read error",
                 errno ? strerror(errno) : "file shrank");
        return REC_IO;
    }
    uint32_t crc = iot_wire_crc32(payload, h->len);
    if (crc != h->crc) {
        snprintf(why, whylen, "CRC mismatch (stored 0x%08x, computed 0x%08x)", h->crc, crc);
        return REC_BAD_CRC;
    }
    h->payload = payload;
    r->off += IOT_STORE_RECORD_HEADER + h->len;
    return REC_OK;
}

/* After damage at r->off: moves r->off to the next offset where a sound
 * record starts (its header, length and CRC), r->size if there is none, so
 * that a damaged record costs that record, not what follows it.  Returns
 * the bytes passed over. */
static uint64_t skip_damage(struct seg_reader *r)
{
    static const uint8_t magic[4] = {IOT_STORE_RECORD_MAGIC & 0xff,
                                     IOT_STORE_RECORD_MAGIC >> 8 & 0xff,
                                     IOT_STORE_RECORD_MAGIC >> 16 & 0xff,
                                     IOT_STORE_RECORD_MAGIC >> 24};
    uint64_t from = r->off, at = r->off + 1;
    char why[256];
    while (at + IOT_STORE_RECORD_HEADER <= r->size) {
        size_t n = r->size - at < READ_CHUNK ? (size_t)(r->size - at) : READ_CHUNK;
        const uint8_t *p = bytes_at(r, at, n);
        if (!p)
            break;
        const uint8_t *m = memmem(p, n, magic, sizeof magic);
        if (!m) {
            at += n > 3 ? n - 3 : 1; /* a magic may straddle the chunks */
            continue;
        }
        uint64_t cand = at + (uint64_t)(m - p);
        struct rec_header h;
        r->off = cand;
        if (read_record(r, &h, why, sizeof why) == REC_OK) {
            r->off = cand;
            return cand - from;
        }
        at = cand + 1;
    }
    r->off = r->size;
    return r->size - from;
}

/* Whether `text` is said for the first time by this thread: a program that
 * reads the store twice (iotrace-export's clock pass, then its events)
 * reports each loss once.  A few dozen are remembered; beyond, they repeat. */
static int first_report(const char *text)
{
    static _Thread_local uint64_t seen[64];
    static _Thread_local size_t n_seen;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = text; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (size_t i = 0; i < n_seen; i++)
        if (seen[i] == h)
            return 0;
    if (n_seen < sizeof seen / sizeof *seen)
        seen[n_seen++] = h;
    return 1;
}

/* Counts and (the first few) reports a damaged range of a segment. */
static void note_damage(struct iot_store_scan_info *info, const char *dir, const char *name,
                        const char *why, uint64_t off, uint64_t skipped)
{
    if (!info)
        return;
    info->damaged_records++;
    info->damaged_bytes += skipped;
    char text[sizeof info->damage];
    snprintf(text, sizeof text, "%s/%s: %s at offset %llu (%llu bytes skipped, the records "
             "after them read)", dir, name, why, (unsigned long long)off,
             (unsigned long long)skipped);
    if (!info->damage[0])
        snprintf(info->damage, sizeof info->damage, "%s", text);
    if (info->damaged_records <= DAMAGE_REPORTS && first_report(text))
        iot_warn("store: %s", text);
}

/* 0: valid header; 1: the file is shorter than a header; -1: not a segment. */
static int check_file_header(int fd, uint64_t size, char *why, size_t whylen)
{
    if (size < IOT_STORE_FILE_HEADER)
        return 1;
    uint8_t hb[IOT_STORE_FILE_HEADER];
    if (pread_full(fd, hb, sizeof hb, 0) != 0) {
        snprintf(why, whylen, "cannot read the file header: %s", strerror(errno));
        return -1;
    }
    if (memcmp(hb, IOT_STORE_FILE_MAGIC, 8) != 0) {
        snprintf(why, whylen, "bad file magic (not an iotrace store segment)");
        return -1;
    }
    uint32_t version = iot_get_u32(hb + 8);
    if (version != IOT_STORE_FORMAT_VERSION) {
        snprintf(why, whylen, "unsupported store format version %u (this build reads %u)",
                 version, IOT_STORE_FORMAT_VERSION);
        return -1;
    }
    return 0;
}

static int open_segment(const char *dir, uint32_t num, int flags, uint64_t *size, char *err,
                        size_t errlen)
{
    char path[PATH_MAX];
    segment_path(path, sizeof path, dir, num);
    int fd = open(path, flags | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        iot_fail(err, errlen, "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

/* Whether a collector holds the store (its writes may be in progress). */
static int store_in_use(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/LOCK", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int busy = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd); /* releases a shared lock just taken */
    return busy;
}

/* The last segment may end inside a record (or its file header) while a
 * collector writes it; without one, that is a crash or a truncation, and
 * what was cut off is lost: said, not passed over. */
static void report_cut_end(const char *dir, const char *name, uint64_t off, uint64_t size,
                           const char *what, struct iot_store_scan_info *info)
{
    int writer = store_in_use(dir);
    if (info) {
        info->writer = writer;
        snprintf(info->cut_segment, sizeof info->cut_segment, "%s", name);
        info->cut_offset = off;
        info->cut_size = size;
    }
    if (writer)
        return;
    char text[PATH_MAX + 160];
    snprintf(text, sizeof text, "%s/%s ends inside %s at offset %llu of %llu bytes (a crash or "
             "a truncation): nothing after it can be read",
             dir, name, what, (unsigned long long)off, (unsigned long long)size);
    if (first_report(text))
        iot_warn("store: %s", text);
}

static int scan_segment(const char *dir, uint32_t num, int is_last, struct seg_reader *r,
                        iot_store_scan_fn fn, void *ctx, struct iot_store_scan_info *info,
                        char *err, size_t errlen)
{
    char name[32], why[256] = "";
    segment_name(name, sizeof name, num);
    r->fd = open_segment(dir, num, O_RDONLY, &r->size, err, errlen);
    forget_window(r);
    if (r->fd < 0)
        return -1;
    if (info) {
        info->segments++;
        info->bytes += r->size;
    }
    int rc = check_file_header(r->fd, r->size, why, sizeof why);
    /* A damaged magic costs its 16 bytes; an unknown version is a store
     * this build cannot read. */
    int bad_magic = rc < 0 && !strncmp(why, "bad file magic", 14);
    if (bad_magic)
        note_damage(info, dir, name, why, 0, IOT_STORE_FILE_HEADER);
    else if (rc != 0) {
        close(r->fd);
        if (rc > 0 && is_last) { /* a writer may have just created it */
            report_cut_end(dir, name, 0, r->size, "its file header", info);
            return 0;
        }
        return iot_fail(err, errlen, "%s/%s: %s", dir, name,
                    rc > 0 ? "truncated inside its file header" : why);
    }
    r->off = IOT_STORE_FILE_HEADER;
    struct rec_header h;
    enum rec_result res = REC_END;
    rc = 0;
    for (;;) {
        while (rc == 0 && (res = read_record(r, &h, why, sizeof why)) == REC_OK) {
            if (info)
                info->records++;
            rc = fn(ctx, h.payload, h.len, h.recv_ns);
        }
        if (rc != 0 || res == REC_END || res == REC_IO || (res == REC_SHORT && is_last))
            break;
        /* Damage: that record is lost, not the rest of the store. */
        uint64_t at = r->off;
        note_damage(info, dir, name, why, at, skip_damage(r));
    }
    close(r->fd);
    if (rc == 0 && res == REC_SHORT && is_last)
        report_cut_end(dir, name, r->off, r->size, "a record", info);
    if (rc != 0 || res != REC_IO)
        return rc;
    return iot_fail(err, errlen, "%s/%s: %s at offset %llu", dir, name, why,
                (unsigned long long)r->off);
}

struct manifest {
    int valid;
    uint32_t segment; /* being written, and the bytes of it a sync covered */
    uint64_t offset;
    uint64_t *sizes; /* of finished segments 1..n_sizes, 0 where not known */
    uint32_t n_sizes;
};

static void manifest_head(uint8_t p[MANIFEST_HEAD], uint32_t segment, uint64_t offset)
{
    memset(p, 0, MANIFEST_HEAD);
    memcpy(p, MANIFEST_MAGIC, 8);
    iot_put_u32(p + 8, 1);
    iot_put_u32(p + 12, segment);
    iot_put_u64(p + 16, offset);
    iot_put_u32(p + 24, iot_wire_crc32(p, 24));
}

static void manifest_entry(uint8_t p[MANIFEST_ENTRY], uint32_t segment, uint64_t size)
{
    iot_put_u64(p, size);
    iot_put_u32(p + 8, segment);
    iot_put_u32(p + 12, iot_wire_crc32(p, 12));
}

/* Reads DIR/MANIFEST; m->valid 0 when there is none (a store written before
 * it existed) or its head is damaged. */
static void read_manifest(const char *dir, struct manifest *m)
{
    memset(m, 0, sizeof *m);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, MANIFEST_NAME);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    uint8_t head[MANIFEST_HEAD];
    if (fd < 0)
        return;
    /* A read racing the writer's pwrite of the head may see half of it:
     * read again before calling it damaged. */
    int sound = 0;
    for (int tries = 0; tries < 3 && !sound; tries++)
        sound = fstat(fd, &st) == 0 && pread_full(fd, head, sizeof head, 0) == 0 &&
                !memcmp(head, MANIFEST_MAGIC, 8) && iot_get_u32(head + 8) == 1 &&
                iot_get_u32(head + 24) == iot_wire_crc32(head, 24);
    if (!sound || iot_get_u32(head + 12) == 0 ||
        iot_get_u32(head + 12) > MANIFEST_MAX_SEGMENTS) {
        iot_warn("store: %s is damaged: missing segments and cut ends can only be told by the "
                 "segments' numbers", path);
        close(fd);
        return;
    }
    m->valid = 1;
    m->segment = iot_get_u32(head + 12);
    m->offset = iot_get_u64(head + 16);
    m->n_sizes = m->segment - 1;
    m->sizes = m->n_sizes ? calloc(m->n_sizes, sizeof *m->sizes) : NULL;
    for (uint32_t i = 0; m->sizes && i < m->n_sizes; i++) {
        uint8_t e[MANIFEST_ENTRY];
        uint64_t at = MANIFEST_HEAD + (uint64_t)i * MANIFEST_ENTRY;
        if (at + MANIFEST_ENTRY > (uint64_t)st.st_size)
            break;
        if (pread_full(fd, e, sizeof e, at) == 0 && iot_get_u32(e + 8) == i + 1 &&
            iot_get_u32(e + 12) == iot_wire_crc32(e, 12))
            m->sizes[i] = iot_get_u64(e);
    }
    close(fd);
}

static void note_missing(struct iot_store_scan_info *info, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note_missing(struct iot_store_scan_info *info, uint64_t bytes, const char *fmt, ...)
{
    char text[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (first_report(text))
        iot_warn("store: %s", text);
    if (!info)
        return;
    info->missing_bytes += bytes;
    if (!info->damage[0])
        snprintf(info->damage, sizeof info->damage, "%s", text);
}

/* What the store should hold and does not: segments absent from 1..last
 * (they are numbered from 1 without gaps, and never removed), and, by the
 * manifest, a last segment deleted or a segment shorter than a sync or its
 * rotation left it (a cut, even at a record boundary). */
static void check_complete(const char *dir, const struct seglist *segs, struct manifest m,
                           struct iot_store_scan_info *info)
{
    if (info)
        info->manifest = m.valid;
    uint32_t last = segs->num[segs->n - 1];
    if (m.valid && m.segment > last)
        last = m.segment;
    size_t i = 0;
    for (uint32_t k = 1; k <= last; k++) {
        uint64_t should = k == m.segment ? m.offset : k <= m.n_sizes && m.sizes ? m.sizes[k - 1] : 0;
        char name[32];
        segment_name(name, sizeof name, k);
        if (i < segs->n && segs->num[i] == k) {
            i++;
            char path[PATH_MAX];
            struct stat st;
            segment_path(path, sizeof path, dir, k);
            if (should && stat(path, &st) == 0 && (uint64_t)st.st_size < should)
                note_missing(info, should - (uint64_t)st.st_size,
                             "%s/%s holds %llu bytes, the store's manifest says %llu were "
                             "stored: %llu bytes of it are missing (a cut or a truncation)",
                             dir, name, (unsigned long long)st.st_size,
                             (unsigned long long)should,
                             (unsigned long long)(should - (uint64_t)st.st_size));
            continue;
        }
        if (info)
            info->missing_segments++;
        if (should)
            note_missing(info, should, "%s/%s is missing (the store's manifest says it held "
                         "%llu bytes): its batches cannot be read", dir, name,
                         (unsigned long long)should);
        else
            note_missing(info, 0, "%s/%s is missing (segments are numbered from 1 without "
                         "gaps): its batches cannot be read", dir, name);
    }
    free(m.sizes);
}

int iot_store_scan_incomplete(const struct iot_store_scan_info *info)
{
    return info->missing_segments || info->missing_bytes || info->damaged_records ||
           (info->cut_segment[0] && !info->writer);
}

int iot_store_scan(const char *dir, iot_store_scan_fn fn, void *ctx, char *err, size_t errlen)
{
    return iot_store_scan_info(dir, fn, ctx, NULL, err, errlen);
}

int iot_store_scan_info(const char *dir, iot_store_scan_fn fn, void *ctx,
                        struct iot_store_scan_info *info, char *err, size_t errlen)
{
    if (info)
        memset(info, 0, sizeof *info);
    /* The manifest before the listing: a writer creates a segment before
     * the manifest names it, so what the manifest names is listed. */
    struct manifest m;
    read_manifest(dir, &m);
    struct seglist segs;
    if (list_segments(dir, &segs, err, errlen) < 0) {
        free(m.sizes);
        return -1;
    }
    if (segs.n == 0) {
        free(segs.num);
        free(m.sizes);
        return iot_fail(err, errlen, "%s holds no segment files: not an iotrace store", dir);
    }
    check_complete(dir, &segs, m, info); /* frees m.sizes */
    struct seg_reader r = {.fd = -1};
    int rc = 0;
    for (size_t i = 0; i < segs.n && rc == 0; i++)
        rc = scan_segment(dir, segs.num[i], i + 1 == segs.n, &r, fn, ctx, info, err, errlen);
    free(r.win);
    free(segs.num);
    return rc;
}

static int store_fail(struct iot_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Any write error may have left a partial record behind; refusing further
 * writes keeps the collector from acknowledging anything after it. */
static int store_fail(struct iot_store *s, const char *fmt, ...)
{
    s->fail_errno = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
    s->failed = 1;
    return -1;
}

static int make_dirs(const char *dir, char *err, size_t errlen)
{
    if (iot_mkdir_p(dir, 0755) < 0)
        return iot_fail(err, errlen, "cannot create store directory %s: %s", dir, strerror(errno));
    return 0;
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static void lock_holder(int fd, char *buf, size_t len)
{
    char text[32] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    long pid = n > 0 ? strtol(text, NULL, 10) : 0;
    if (pid > 0)
        snprintf(buf, len, " by pid %ld", pid);
    else
        buf[0] = '\0';
}

static int take_lock(struct iot_store *s, char *err, size_t errlen)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/LOCK", s->dir);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0)
        return iot_fail(err, errlen, "cannot open %s: %s", path, strerror(errno));
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char holder[48];
        lock_holder(s->lock_fd, holder, sizeof holder);
        if (e == EWOULDBLOCK)
            return iot_fail(err, errlen,
                        "store %s is in use by another collector (%s is locked%s)", s->dir,
                        path, holder);
        return iot_fail(err, errlen, "cannot lock %s: %s", path, strerror(e));
    }
    /* The pid is only for the message above; the lock itself is the flock. */
    char pid[24];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, pid, (size_t)n, 0) != n)
        iot_warn("cannot record the pid in %s: %s", path, strerror(errno));
    return 0;
}

static int create_segment(struct iot_store *s, uint32_t num, char *err, size_t errlen)
{
    char path[PATH_MAX];
    segment_path(path, sizeof path, s->dir, num);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return iot_fail(err, errlen, "cannot create %s: %s", path, strerror(errno));
    uint8_t hb[IOT_STORE_FILE_HEADER];
    file_header(hb);
    if (write_full(fd, hb, sizeof hb) < 0 || fdatasync(fd) < 0 || sync_dir(s->dir) < 0) {
        int e = errno;
        iot_fail(err, errlen, "cannot initialise %s: %s", path, strerror(e));
        close(fd);
        unlink(path); /* so that it can be made again once there is room */
        errno = e;
        return -1;
    }
    s->fd = fd;
    s->segment = num;
    s->seg_bytes = s->durable = IOT_STORE_FILE_HEADER;
    return 0;
}

static int all_zero_from(int fd, uint64_t off, uint64_t size)
{
    uint8_t chunk[4096];
    while (off < size) {
        size_t n = size - off < sizeof chunk ? (size_t)(size - off) : sizeof chunk;
        if (pread_full(fd, chunk, n, off) != 0)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (chunk[i])
                return 0;
        off += n;
    }
    return 1;
}

/* A crash can leave the last record half written, written with a bad CRC, or
 * (on file systems that extend before writing data) as trailing zeros.
 * Anything else is damage a human should look at. */
static int is_torn_tail(struct seg_reader *r, enum rec_result res, const struct rec_header *h)
{
    if (res == REC_SHORT)
        return 1;
    if (res == REC_BAD_CRC)
        return r->off + IOT_STORE_RECORD_HEADER + h->len == r->size;
    if (res == REC_BAD_HEADER)
        return all_zero_from(r->fd, r->off, r->size);
    return 0;
}

/* Walks the last segment to the end of its last intact record. */
static int find_good_end(struct iot_store *s, struct seg_reader *r, const char *name,
                         char *err, size_t errlen)
{
    char why[256] = "";
    struct rec_header h;
    enum rec_result res;
    r->off = IOT_STORE_FILE_HEADER;
    for (;;) {
        while ((res = read_record(r, &h, why, sizeof why)) == REC_OK)
            ;
        if (res == REC_END || is_torn_tail(r, res, &h))
            return 0;
        if (res == REC_IO)
            return iot_fail(err, errlen, "%s/%s: %s at offset %llu", s->dir, name, why,
                            (unsigned long long)r->off);
        /* Damage with sound records after it: that record is lost (readers
         * skip it too), the store is not.  With none after it, what follows
         * the last sound record is cut like a torn tail. */
        uint64_t at = r->off, skipped = skip_damage(r);
        if (r->off == r->size) {
            r->off = at;
            return 0;
        }
        iot_err("store: %s/%s: %s at offset %llu: %llu bytes (a damaged record) are skipped "
                "by every reader, the records after them kept",
                s->dir, name, why, (unsigned long long)at, (unsigned long long)skipped);
    }
}

static int cut_tail(struct iot_store *s, int fd, const char *name, uint64_t good, uint64_t size,
                    char *err, size_t errlen)
{
    if (ftruncate(fd, (off_t)good) < 0 || fdatasync(fd) < 0)
        return iot_fail(err, errlen, "cannot truncate %s/%s: %s", s->dir, name, strerror(errno));
    iot_warn("store: cut %llu bytes of an incomplete record at the end of %s/%s (offset %llu)",
             (unsigned long long)(size - good), s->dir, name, (unsigned long long)good);
    return 0;
}

static int rewrite_file_header(struct iot_store *s, int fd, const char *name, uint64_t size,
                               char *err, size_t errlen)
{
    uint8_t hb[IOT_STORE_FILE_HEADER];
    file_header(hb);
    if (ftruncate(fd, 0) < 0 || pwrite(fd, hb, sizeof hb, 0) != (ssize_t)sizeof hb ||
        fdatasync(fd) < 0)
        return iot_fail(err, errlen, "cannot rewrite %s/%s: %s", s->dir, name, strerror(errno));
    iot_warn("store: %s/%s had an incomplete file header (%llu bytes); rewrote it", s->dir,
             name, (unsigned long long)size);
    return 0;
}

static int recover_last(struct iot_store *s, uint32_t num, char *err, size_t errlen)
{
    char name[32], why[256] = "";
    segment_name(name, sizeof name, num);
    struct seg_reader r = {.fd = -1};
    r.fd = open_segment(s->dir, num, O_RDWR | O_APPEND, &r.size, err, errlen);
    forget_window(&r);
    if (r.fd < 0)
        return -1;
    int rc = check_file_header(r.fd, r.size, why, sizeof why);
    if (rc > 0)
        rc = rewrite_file_header(s, r.fd, name, r.size, err, errlen);
    else if (rc < 0)
        iot_fail(err, errlen, "%s/%s: %s", s->dir, name, why);
    else if ((rc = find_good_end(s, &r, name, err, errlen)) == 0 && r.off < r.size)
        rc = cut_tail(s, r.fd, name, r.off, r.size, err, errlen);
    /* A collector killed between its write and its sync leaves records
     * that only the page cache may hold: they are synced before any of
     * them counts as stored, that is before a resend of one is answered
     * DUPLICATE. */
    if (rc == 0 && fdatasync(r.fd) < 0)
        rc = iot_fail(err, errlen, "cannot sync %s/%s: %s", s->dir, name, strerror(errno));
    free(r.win);
    if (rc < 0) {
        close(r.fd);
        return -1;
    }
    s->fd = r.fd;
    s->segment = num;
    s->seg_bytes = s->durable = r.size < IOT_STORE_FILE_HEADER ? IOT_STORE_FILE_HEADER : r.off;
    return 0;
}

/* The head names what the last sync covered.  It is written after that
 * sync and not synced itself: lost in a power cut it names less than the
 * disk holds, never more, so that it cannot make readers report a loss
 * that did not happen. */
static void manifest_note_head(struct iot_store *s)
{
    uint8_t head[MANIFEST_HEAD];
    manifest_head(head, s->segment, s->durable);
    if (s->man_fd >= 0 && pwrite(s->man_fd, head, sizeof head, 0) != (ssize_t)sizeof head)
        iot_warn("store: cannot write %s/%s: %s", s->dir, MANIFEST_NAME, strerror(errno));
}

/* A finished segment's size, once it is synced.  Not synced either: lost,
 * it leaves that segment's size unknown, which hides a cut, never invents
 * one; and the store's own syncs stay the only ones. */
static void manifest_note_finished(struct iot_store *s, uint32_t num, uint64_t size)
{
    uint8_t e[MANIFEST_ENTRY];
    manifest_entry(e, num, size);
    off_t at = (off_t)MANIFEST_HEAD + (off_t)(num - 1) * MANIFEST_ENTRY;
    if (s->man_fd >= 0 && pwrite(s->man_fd, e, sizeof e, at) != (ssize_t)sizeof e)
        iot_warn("store: cannot write %s/%s: %s", s->dir, MANIFEST_NAME, strerror(errno));
}

/* The segment to write: a new store's first, else the last one, its torn
 * tail cut.  When MANIFEST says the store held more (the last segment
 * deleted, or cut, even at a record boundary), that is said and left
 * visible: writing goes on in a new segment after the one MANIFEST names,
 * whose size it keeps, so that readers go on reporting the loss. */
static int open_segments(struct iot_store *s, const struct seglist *segs,
                         const struct manifest *m, char *err, size_t errlen)
{
    uint32_t last = segs->n ? segs->num[segs->n - 1] : 0;
    if (m->valid && m->segment > last) {
        iot_err("store: %s/segment-%08u.iots is missing (the store's manifest says it held "
                "%llu bytes): its batches are lost; writing goes on in segment %u",
                s->dir, m->segment, (unsigned long long)m->offset, m->segment + 1);
        manifest_note_finished(s, m->segment, m->offset);
        return create_segment(s, m->segment + 1, err, errlen);
    }
    if (!last)
        return create_segment(s, 1, err, errlen);
    if (recover_last(s, last, err, errlen) < 0)
        return -1;
    if (!m->valid || m->segment != last || s->durable >= m->offset)
        return 0;
    iot_err("store: %s/segment-%08u.iots holds %llu bytes, the store's manifest says %llu "
            "were stored: the rest is lost; writing goes on in segment %u",
            s->dir, last, (unsigned long long)s->durable, (unsigned long long)m->offset,
            last + 1);
    manifest_note_finished(s, last, m->offset);
    close(s->fd);
    s->fd = -1;
    return create_segment(s, last + 1, err, errlen);
}

/* Completes MANIFEST with the finished segments it does not know (a store
 * written before it existed: their sizes as they are now), and names the
 * segment being written. */
static void complete_manifest(struct iot_store *s, const struct seglist *segs,
                              const struct manifest *m)
{
    for (size_t i = 0; i < segs->n; i++) {
        uint32_t k = segs->num[i];
        if (k >= s->segment || (m->sizes && k <= m->n_sizes && m->sizes[k - 1]) ||
            (m->valid && k == m->segment))
            continue; /* the current one, or known: a cut stays visible */
        char seg[PATH_MAX];
        struct stat st;
        segment_path(seg, sizeof seg, s->dir, k);
        if (stat(seg, &st) == 0)
            manifest_note_finished(s, k, (uint64_t)st.st_size);
    }
    manifest_note_head(s);
}

static int open_for_writing(struct iot_store *s, char *err, size_t errlen)
{
    if (make_dirs(s->dir, err, errlen) < 0 || take_lock(s, err, errlen) < 0)
        return -1;
    s->buf = malloc(WRITE_BUFFER);
    if (!s->buf)
        return iot_fail(err, errlen, "out of memory for the store buffer");
    struct seglist segs;
    if (list_segments(s->dir, &segs, err, errlen) < 0)
        return -1;
    struct manifest m;
    read_manifest(s->dir, &m);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", s->dir, MANIFEST_NAME);
    s->man_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->man_fd < 0)
        iot_warn("store: cannot open %s: %s; readers cannot tell a deleted segment or a cut at "
                 "a record boundary", path, strerror(errno));
    int rc = open_segments(s, &segs, &m, err, errlen);
    if (rc == 0)
        complete_manifest(s, &segs, &m);
    free(m.sizes);
    free(segs.num);
    return rc;
}

static int check_readable(struct iot_store *s, char *err, size_t errlen)
{
    struct seglist segs;
    if (list_segments(s->dir, &segs, err, errlen) < 0)
        return -1;
    free(segs.num);
    if (segs.n == 0)
        return iot_fail(err, errlen, "%s holds no segment files: not an iotrace store", s->dir);
    return 0;
}

static void store_free(struct iot_store *s)
{
    if (s->fd >= 0)
        close(s->fd);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the flock */
    if (s->man_fd >= 0)
        close(s->man_fd);
    free(s->buf);
    free(s->dir);
    free(s);
}

struct iot_store *iot_store_open(const char *dir, int writable, char *err, size_t errlen)
{
    struct iot_store *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        iot_fail(err, errlen, "out of memory opening the store");
        return NULL;
    }
    s->writable = writable;
    s->fd = s->lock_fd = s->man_fd = -1;
    s->seg_limit = IOT_STORE_DEFAULT_SEGMENT_SIZE;
    int rc = writable ? open_for_writing(s, err, errlen) : check_readable(s, err, errlen);
    if (rc < 0) {
        store_free(s);
        return NULL;
    }
    return s;
}

void iot_store_set_segment_size(struct iot_store *s, uint64_t bytes)
{
    s->seg_limit = bytes < IOT_STORE_MIN_SEGMENT_SIZE ? IOT_STORE_MIN_SEGMENT_SIZE : bytes;
}

uint32_t iot_store_segment(const struct iot_store *s) { return s->segment; }

const char *iot_store_error(const struct iot_store *s) { return s->error; }

static int flush_buffer(struct iot_store *s)
{
    if (s->buf_len == 0)
        return 0;
    if (write_full(s->fd, s->buf, s->buf_len) < 0) {
        char name[32];
        segment_name(name, sizeof name, s->segment);
        return store_fail(s, "write to %s/%s failed: %s", s->dir, name, strerror(errno));
    }
    s->buf_len = 0;
    return 0;
}

static int put_bytes(struct iot_store *s, const uint8_t *p, size_t len)
{
    if (s->buf_len + len > WRITE_BUFFER && flush_buffer(s) < 0)
        return -1;
    if (len >= WRITE_BUFFER) {
        if (write_full(s->fd, p, len) < 0)
            return store_fail(s, "write to store segment %u failed: %s", s->segment,
                              strerror(errno));
        return 0;
    }
    memcpy(s->buf + s->buf_len, p, len);
    s->buf_len += len;
    return 0;
}

static int sync_segment(struct iot_store *s)
{
    if (flush_buffer(s) < 0)
        return -1;
    char name[32];
    segment_name(name, sizeof name, s->segment);
    if (fdatasync(s->fd) < 0)
        return store_fail(s, "fdatasync of %s/%s failed: %s", s->dir, name, strerror(errno));
    /* Synced into a file nobody can open any more is not stored: a store
     * deleted under the collector must stop the acknowledgements. */
    struct stat st;
    if (fstat(s->fd, &st) == 0 && st.st_nlink == 0) {
        errno = ENOENT;
        return store_fail(s, "store segment %s/%s was deleted while in use (was the store "
                          "directory removed?)", s->dir, name);
    }
    s->durable = s->seg_bytes;
    manifest_note_head(s);
    return 0;
}

/* The finished segment is synced before the next one exists, so a record
 * that iot_store_sync() has covered never depends on an earlier unsynced one. */
static int rotate(struct iot_store *s)
{
    if (sync_segment(s) < 0)
        return -1;
    manifest_note_finished(s, s->segment, s->seg_bytes);
    close(s->fd);
    s->fd = -1;
    char why[512];
    if (create_segment(s, s->segment + 1, why, sizeof why) < 0)
        return store_fail(s, "%s", why);
    manifest_note_head(s);
    iot_info("store: started segment %u", s->segment);
    return 0;
}

int iot_store_out_of_space(const struct iot_store *s)
{
    return s->failed && (s->fail_errno == ENOSPC || s->fail_errno == EDQUOT);
}

int iot_store_recover(struct iot_store *s)
{
    if (!s->failed)
        return 0;
    if (!iot_store_out_of_space(s))
        return -1;
    char why[512];
    if (s->fd < 0) { /* rotation closed the old segment, then found no room for the new */
        if (create_segment(s, s->segment + 1, why, sizeof why) < 0)
            return store_fail(s, "%s", why);
        manifest_note_head(s);
    } else if (ftruncate(s->fd, (off_t)s->durable) < 0) {
        char name[32];
        segment_name(name, sizeof name, s->segment);
        return store_fail(s, "cannot cut %s/%s back to the %llu bytes its last sync covered: %s",
                          s->dir, name, (unsigned long long)s->durable, strerror(errno));
    }
    s->buf_len = 0;
    s->seg_bytes = s->durable;
    s->failed = 0;
    s->error[0] = '\0';
    return 0;
}

int iot_store_append(struct iot_store *s, const uint8_t *batch, size_t len, uint64_t recv_ns)
{
    if (!s->writable) {
        errno = EROFS;
        return store_fail(s, "store %s is open read-only", s->dir);
    }
    if (s->failed)
        return -1;
    if (len > IOT_WIRE_MAX_BATCH)
        return store_fail(s, "record of %zu bytes exceeds the limit of %u", len,
                          IOT_WIRE_MAX_BATCH);
    uint64_t rec = IOT_STORE_RECORD_HEADER + (uint64_t)len;
    if (s->seg_bytes > IOT_STORE_FILE_HEADER && s->seg_bytes + rec > s->seg_limit &&
        rotate(s) < 0)
        return -1;
    uint8_t hb[IOT_STORE_RECORD_HEADER];
    put_header(hb, (uint32_t)len, iot_wire_crc32(batch, len), recv_ns);
    if (put_bytes(s, hb, sizeof hb) < 0 || put_bytes(s, batch, len) < 0)
        return -1;
    s->seg_bytes += rec;
    return 0;
}

int iot_store_sync(struct iot_store *s)
{
    if (!s->writable)
        return 0;
    if (s->failed)
        return -1;
    return sync_segment(s);
}

/* After a failure, what no sync covered was never acknowledged, and after a
 * failed sync it may be lost although it can still be read (the kernel can
 * drop pages it failed to write back, and says so once).  It is cut, so
 * that a collector started on the store later does not take it for stored
 * and answer its resends DUPLICATE. */
static int cut_unsynced(struct iot_store *s)
{
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) < 0 || st.st_nlink == 0 ||
        (uint64_t)st.st_size <= s->durable)
        return 0;
    char name[32];
    segment_name(name, sizeof name, s->segment);
    if (ftruncate(s->fd, (off_t)s->durable) < 0 || fdatasync(s->fd) < 0) {
        iot_err("store: cannot cut %s/%s back to the %llu bytes its last sync covered (%s): "
                "what follows was never acknowledged and may not be on disk; cut it before a "
                "collector uses the store again: truncate -s %llu %s/%s", s->dir, name,
                (unsigned long long)s->durable, strerror(errno),
                (unsigned long long)s->durable, s->dir, name);
        return -1;
    }
    iot_warn("store: cut %s/%s back to the %llu bytes its last sync covered (%llu bytes that "
             "were not acknowledged)", s->dir, name, (unsigned long long)s->durable,
             (unsigned long long)((uint64_t)st.st_size - s->durable));
    return 0;
}

int iot_store_close(struct iot_store *s)
{
    if (!s)
        return 0;
    int rc = 0;
    if (s->writable && !s->failed && sync_segment(s) < 0) {
        iot_err("store: %s", s->error);
        rc = -1;
    }
    if (s->writable && s->failed && cut_unsynced(s) < 0)
        rc = -1;
    store_free(s);
    return rc;
}

void iot_store_end(const struct iot_store *s, struct iot_store_pos *pos)
{
    pos->segment = s->segment;
    pos->offset = s->seg_bytes;
}

void iot_store_durable(const struct iot_store *s, struct iot_store_pos *pos)
{
    pos->segment = s->segment;
    pos->offset = s->durable;
}

struct iot_store_follower {
    char *dir;
    struct seg_reader r; /* r.fd: segment `segment`, kept open between reads, or -1 */
    uint32_t segment;
};

struct iot_store_follower *iot_store_follow(const char *dir)
{
    struct iot_store_follower *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = strdup(dir))) {
        free(f);
        return NULL;
    }
    f->r.fd = -1;
    return f;
}

static void follower_let_go(struct iot_store_follower *f)
{
    if (f->r.fd >= 0)
        close(f->r.fd);
    f->r.fd = -1;
    forget_window(&f->r);
}

void iot_store_follow_close(struct iot_store_follower *f)
{
    if (!f)
        return;
    follower_let_go(f);
    free(f->r.win);
    free(f->dir);
    free(f);
}

/* The records of one segment from pos->offset up to limit, or to its end
 * (a segment the writer has left).  The segment stays open for the next
 * read, which mostly continues it. */
static int read_segment_range(struct iot_store_follower *f, struct iot_store_pos *pos,
                              uint64_t limit, int to_end, iot_store_scan_fn fn, void *ctx,
                              char *err, size_t errlen)
{
    struct seg_reader *r = &f->r;
    char name[32], why[256] = "";
    segment_name(name, sizeof name, pos->segment);
    if (r->fd < 0 || f->segment != pos->segment) {
        follower_let_go(f);
        r->fd = open_segment(f->dir, pos->segment, O_RDONLY, &r->size, err, errlen);
        if (r->fd < 0)
            return -1;
        f->segment = pos->segment;
    } else if (to_end) { /* written on since it was opened */
        struct stat st;
        if (fstat(r->fd, &st) < 0) {
            iot_fail(err, errlen, "%s/%s: %s", f->dir, name, strerror(errno));
            follower_let_go(f);
            return -1;
        }
        r->size = (uint64_t)st.st_size;
    } else
        r->size = limit;
    if (!to_end && r->size > limit)
        r->size = limit;
    r->off = pos->offset;
    struct rec_header h;
    enum rec_result res;
    int rc = 0;
    for (;;) {
        while (rc == 0 && (res = read_record(r, &h, why, sizeof why)) == REC_OK) {
            pos->offset = r->off;
            rc = fn(ctx, h.payload, h.len, h.recv_ns);
        }
        if (rc != 0 || res == REC_END || res == REC_IO)
            break;
        /* A damaged record costs that record (iot_store_scan_info). */
        uint64_t at = r->off, skipped = skip_damage(r);
        iot_warn("store: %s/%s: %s at offset %llu (%llu bytes skipped, the records after "
                 "them read)", f->dir, name, why, (unsigned long long)at,
                 (unsigned long long)skipped);
        pos->offset = r->off;
    }
    if (rc != 0 || res == REC_END)
        return rc;
    follower_let_go(f);
    return iot_fail(err, errlen, "%s/%s: %s at offset %llu", f->dir, name, why,
                    (unsigned long long)r->off);
}

int iot_store_follow_read(struct iot_store_follower *f, struct iot_store_pos *pos,
                          const struct iot_store_pos *end, iot_store_scan_fn fn, void *ctx,
                          char *err, size_t errlen)
{
    /* Mostly more of the segment already open: no need to list the others. */
    if (f->r.fd >= 0 && pos->segment == f->segment && end->segment == pos->segment &&
        pos->offset >= IOT_STORE_FILE_HEADER)
        return read_segment_range(f, pos, end->offset, 0, fn, ctx, err, errlen);
    struct seglist segs;
    if (list_segments(f->dir, &segs, err, errlen) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < segs.n && rc == 0; i++) {
        uint32_t num = segs.num[i];
        if (num < pos->segment || num > end->segment)
            continue;
        if (num > pos->segment || pos->offset < IOT_STORE_FILE_HEADER)
            *pos = (struct iot_store_pos){num, IOT_STORE_FILE_HEADER};
        /* Earlier segments are complete; the last one is read up to what
         * the writer has made durable. */
        rc = read_segment_range(f, pos, end->offset, num < end->segment, fn, ctx, err, errlen);
    }
    free(segs.num);
    return rc;
}

int iot_store_read_range(const char *dir, struct iot_store_pos *pos,
                         const struct iot_store_pos *end, iot_store_scan_fn fn, void *ctx,
                         char *err, size_t errlen)
{
    struct iot_store_follower *f = iot_store_follow(dir);
    if (!f)
        return iot_fail(err, errlen, "out of memory reading the store");
    int rc = iot_store_follow_read(f, pos, end, fn, ctx, err, errlen);
    iot_store_follow_close(f);
    return rc;
}

int64_t iot_store_bytes(const char *dir)
{
    struct seglist segs;
    char err[256], path[PATH_MAX];
    if (list_segments(dir, &segs, err, sizeof err) < 0)
        return -1;
    int64_t total = 0;
    for (size_t i = 0; i < segs.n; i++) {
        struct stat st;
        segment_path(path, sizeof path, dir, segs.num[i]);
        if (stat(path, &st) == 0)
            total += (int64_t)st.st_size;
    }
    free(segs.num);
    return total;
}
