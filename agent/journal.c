#include "journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fsutil.h"
#include "grow.h"
#include "log.h"
#include "spool.h"
#include "tally.h"
#include "timeutil.h"
#include "wire.h"

#define REC_MAGIC 0x4c505349u /* "ISPL" little-endian */
#define REC_HEAD 12           /* magic, payload length, CRC-32 of the payload */
#define REC_IDS 18            /* epoch, seq, key length */
#define SEG_MIN (1u << 20)
#define SEG_MAX (16u << 20)
#define RESERVE_NAME "reserve"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static void seg_name(uint64_t id, char out[40])
{
    snprintf(out, 40, "spool-%016llx.seg", (unsigned long long)id);
}

static struct journal_segment *find_seg(struct journal *j, uint64_t id)
{
    /* Few segments, and acknowledgements mostly concern the oldest. */
    for (size_t i = 0; i < j->n_segs; i++)
        if (j->segs[i].id == id)
            return &j->segs[i];
    return NULL;
}

static void remove_seg(struct journal *j, struct journal_segment *s)
{
    char name[40];
    seg_name(s->id, name);
    if (unlinkat(j->dirfd, name, 0) < 0 && errno != ENOENT)
        iot_warn("cannot remove spool segment %s/%s: %s", j->dir, name, strerror(errno));
    j->disk_bytes -= s->bytes;
    size_t i = (size_t)(s - j->segs);
    memmove(&j->segs[i], &j->segs[i + 1], (j->n_segs - i - 1) * sizeof *s);
    j->n_segs--;
}

static struct journal_segment *add_seg(struct journal *j, uint64_t id)
{
    if (iot_grow((void **)&j->segs, &j->cap_segs, j->n_segs + 1, sizeof *j->segs, 16) < 0)
        return NULL;
    j->segs[j->n_segs] = (struct journal_segment){.id = id};
    return &j->segs[j->n_segs++];
}

static int read_file(int dirfd, const char *name, uint8_t **out, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    uint8_t *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf)
        return -1;
    *out = buf;
    *len = got;
    return 0;
}

/* Length of the sound record at `p`, 0 if there is none. */
static size_t check_record(const uint8_t *p, size_t left)
{
    if (left < REC_HEAD + REC_IDS || get32(p) != REC_MAGIC)
        return 0;
    uint32_t n = get32(p + 4);
    if (n < REC_IDS || n > left - REC_HEAD || iot_wire_crc32(p + REC_HEAD, n) != get32(p + 8))
        return 0;
    uint16_t klen = (uint16_t)(p[REC_HEAD + 16] | p[REC_HEAD + 17] << 8);
    if ((size_t)klen + REC_IDS > n || memchr(p + REC_HEAD + REC_IDS, '\0', klen))
        return 0;
    return REC_HEAD + n;
}

/* The next offset after `off` where a sound record starts, `len` if none:
 * a damaged record is skipped by its framing, and what follows is kept. */
static size_t resync(const uint8_t *buf, size_t off, size_t len)
{
    static const uint8_t magic[4] = {REC_MAGIC & 0xff, REC_MAGIC >> 8 & 0xff,
                                     REC_MAGIC >> 16 & 0xff, REC_MAGIC >> 24};
    for (size_t at = off + 1; at < len;) {
        const uint8_t *m = memmem(buf + at, len - at, magic, sizeof magic);
        if (!m)
            break;
        at = (size_t)(m - buf);
        if (check_record(buf + at, len - at))
            return at;
        at++;
    }
    return len;
}

/* A damaged record's events, as far as its envelope still tells them: a
 * batch of drop records (unreadable) under its own identity, to be stored
 * once the segments are read.  Only when the envelope's identity checksum
 * holds and the key kept beside it agrees (producer and sender), so that a
 * damaged byte cannot put the count into another producer or user.  0
 * when counted. */
static int count_damaged(struct journal *j, const uint8_t *p, size_t n, uint64_t *events,
                         char *why, size_t whylen)
{
    snprintf(why, whylen, "its frame is damaged");
    if (n < REC_HEAD + REC_IDS || get32(p) != REC_MAGIC)
        return -1;
    uint32_t plen = get32(p + 4);
    if (plen < REC_IDS || plen > n - REC_HEAD)
        plen = (uint32_t)(n - REC_HEAD); /* a damaged length: up to the next frame */
    const uint8_t *ids = p + REC_HEAD;
    uint16_t klen = (uint16_t)(ids[16] | ids[17] << 8);
    struct journal_drop d = {.epoch = get64(ids), .seq = get64(ids + 8)};
    if ((size_t)klen + REC_IDS > plen || klen >= sizeof d.key)
        return -1;
    memcpy(d.key, ids + REC_IDS, klen);
    d.key[klen] = '\0';
    char err[160], key[sizeof d.key];
    iot_batch *b = iot_wire_open_stored(ids + REC_IDS + klen, plen - REC_IDS - klen, err,
                                        sizeof err);
    int rc = -1;
    if (!b)
        snprintf(why, whylen, "%s", err);
    else if (iot_wire_batch_key(b, key, sizeof key) < 0 || strcmp(key, d.key))
        snprintf(why, whylen, "its batch's producer or sender differs from the record's");
    else if (iot_grow((void **)&j->drops, &j->cap_drops, j->n_drops + 1, sizeof *j->drops,
                      8) < 0 ||
             !(d.data = malloc(plen - REC_IDS - klen)))
        snprintf(why, whylen, "out of memory");
    else {
        /* The envelope's epoch and seq, which its identity checksum covers. */
        d.epoch = b->epoch;
        d.seq = b->seq;
        d.len = plen - REC_IDS - klen;
        memcpy(d.data, ids + REC_IDS + klen, d.len);
        j->drops[j->n_drops++] = d;
        *events = b->event_count;
        rc = 0;
    }
    if (b)
        iot_wire_free_batch(b);
    return rc;
}

static int restore_record(struct spool *sp, uint64_t seg, const uint8_t *p)
{
    uint32_t n = get32(p + 4);
    const uint8_t *ids = p + REC_HEAD;
    uint16_t klen = (uint16_t)(ids[16] | ids[17] << 8);
    char key[512];
    if (klen >= sizeof key)
        return -1;
    memcpy(key, ids + REC_IDS, klen);
    key[klen] = '\0';
    const uint8_t *data = ids + REC_IDS + klen;
    return spool_restore(sp, key, get64(ids), get64(ids + 8), data, n - REC_IDS - klen, seg, 0);
}

/* Reads one segment into the spool; the newest may end in a torn record,
 * which is cut off so that appending could go on after it.  A damaged
 * record elsewhere is skipped up to the next sound frame. */
static int recover_seg(struct journal *j, struct spool *sp, uint64_t id, int newest)
{
    char name[40];
    seg_name(id, name);
    uint8_t *buf;
    size_t len;
    if (read_file(j->dirfd, name, &buf, &len) < 0) {
        iot_err("cannot read spool segment %s/%s: %s", j->dir, name, strerror(errno));
        return -1;
    }
    struct journal_segment *s = add_seg(j, id);
    if (!s) {
        free(buf);
        iot_err("out of memory reading the spool");
        return -1;
    }
    size_t off = 0, rec;
    for (;;) {
        while (off < len && (rec = check_record(buf + off, len - off))) {
            if (restore_record(sp, id, buf + off) < 0) {
                free(buf);
                iot_err("out of memory reading the spool");
                return -1;
            }
            s->live++;
            j->recovered++;
            j->recovered_bytes += rec;
            off += rec;
        }
        size_t next = off < len ? resync(buf, off, len) : len;
        if (next == len)
            break;
        /* Damaged, with sound records after it: not a torn tail. */
        uint64_t events = 0;
        char why[200];
        int counted = count_damaged(j, buf + off, next - off, &events, why, sizeof why) == 0;
        j->damaged_bytes += next - off;
        j->damaged_records++;
        j->damaged_events += events;
        if (counted)
            iot_err("spool segment %s/%s is damaged from byte %zu to %zu of %zu: that batch "
                    "is skipped, its %llu events counted as dropped (unreadable); the "
                    "batches after it are sent",
                    j->dir, name, off, next, len, (unsigned long long)events);
        else
            iot_err("spool segment %s/%s is damaged from byte %zu to %zu of %zu and names "
                    "no producer one can trust (%s): skipped, its events show as lost once "
                    "its producer's later batches are stored; the batches after it are sent",
                    j->dir, name, off, next, len, why);
        off = next;
    }
    if (off < len) {
        j->damaged_bytes += len - off;
        /* A whole record whose checksum fails is damage, not a tear. */
        uint64_t events = 0;
        char why[200];
        if (len - off >= REC_HEAD && get32(buf + off) == REC_MAGIC &&
            get32(buf + off + 4) == len - off - REC_HEAD &&
            count_damaged(j, buf + off, len - off, &events, why, sizeof why) == 0) {
            j->damaged_records++;
            j->damaged_events += events;
            iot_err("the last batch of spool segment %s/%s is damaged (%zu bytes): its %llu "
                    "events are counted as dropped (unreadable)",
                    j->dir, name, len - off, (unsigned long long)events);
        }
        if (newest) {
            iot_warn("spool segment %s/%s ends in an incomplete batch (%zu of %zu bytes, "
                     "written when the agent stopped): cut off",
                     j->dir, name, len - off, len);
            int fd = openat(j->dirfd, name, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || ftruncate(fd, (off_t)off) < 0)
                iot_warn("cannot cut %s/%s: %s", j->dir, name, strerror(errno));
            if (fd >= 0)
                close(fd);
            len = off;
        } else {
            iot_err("spool segment %s/%s is damaged at byte %zu of %zu: the rest of it is "
                    "not sent",
                    j->dir, name, off, len);
        }
    }
    s->bytes = len;
    j->disk_bytes += len;
    free(buf);
    if (s->live == 0)
        remove_seg(j, s);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int recover(struct journal *j, struct spool *sp)
{
    DIR *d = fdopendir(dup(j->dirfd));
    if (!d) {
        iot_err("cannot list %s: %s", j->dir, strerror(errno));
        return -1;
    }
    uint64_t *ids = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        unsigned long long id;
        char tail[8];
        if (sscanf(de->d_name, "spool-%16llx.se%1s", &id, tail) != 2 || strcmp(tail, "g") ||
            strlen(de->d_name) != 26)
            continue;
        if (iot_grow((void **)&ids, &cap, n + 1, sizeof *ids, 64) < 0) {
            closedir(d);
            free(ids);
            iot_err("out of memory reading the spool");
            return -1;
        }
        ids[n++] = id;
    }
    closedir(d);
    if (n) /* qsort's base must not be NULL, even for nothing */
        qsort(ids, n, sizeof *ids, cmp_u64);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = recover_seg(j, sp, ids[i], i + 1 == n);
    j->next_id = n ? ids[n - 1] + 1 : 1;
    free(ids);
    if (rc == 0 && j->recovered)
        iot_info("spool %s: %llu batches (%llu bytes) left by the last run will be sent again",
                 j->dir, (unsigned long long)j->recovered,
                 (unsigned long long)j->recovered_bytes);
    return rc;
}

/* The running total of what a batch's producer had made after batch
 * (epoch, seq), from the batch after it or the one before it in the spool,
 * 0 if neither is there: readers count events a producer's totals leave
 * unexplained as lost, and a damaged batch's drop records must take its
 * place in that sequence, not add to it. */
static uint64_t made_through_of(const struct spool_entry *e, int after, uint64_t events)
{
    char err[160];
    iot_batch *b = iot_wire_open_stored(e->data, e->len, err, sizeof err);
    iot_body *body = b ? iot_wire_body(b, err, sizeof err) : NULL;
    uint64_t made = body ? body->made_through : 0;
    if (made && after) {
        uint64_t here = iot_wire_table_events(body);
        for (size_t i = 0; i < body->n_drops; i++)
            here += body->drops[i]->count;
        made = made > here ? made - here : 0;
    } else if (made) {
        made += events;
    }
    if (body)
        iot_wire_free_body(body);
    if (b)
        iot_wire_free_batch(b);
    return made;
}

static uint64_t made_around(const struct spool *sp, const struct journal_drop *d,
                            uint64_t events)
{
    const struct spool_entry *before = NULL;
    for (const struct spool_entry *e = sp->head; e; e = e->next) {
        if (e->epoch != d->epoch || strcmp(e->key, d->key))
            continue;
        if (e->seq == d->seq + 1)
            return made_through_of(e, 1, events);
        if (e->seq + 1 == d->seq)
            before = e;
    }
    return before ? made_through_of(before, 0, events) : 0;
}

/* Opens the reserve, making room for all of its slots now, while the disk
 * has some, and takes back the drop records the last run left in it: they
 * are sent, and their slots freed once acknowledged. */
static int open_reserve(struct journal *j, struct spool *sp)
{
    const off_t want = (off_t)JOURNAL_RESERVE_SLOTS * JOURNAL_RESERVE_SLOT;
    j->reserve_fd = openat(j->dirfd, RESERVE_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    if (j->reserve_fd < 0 || fstat(j->reserve_fd, &st) < 0) {
        iot_err("cannot open %s/%s: %s; a batch the disk refuses will be held in memory "
                "only, its events lost uncounted if the agent dies",
                j->dir, RESERVE_NAME, strerror(errno));
        return 0;
    }
    off_t have = st.st_size;
    if (have < want) {
        int rc = posix_fallocate(j->reserve_fd, 0, want);
        if (rc == 0)
            have = want;
        else
            iot_err("cannot reserve %lld bytes in %s/%s: %s; only %lld slots for the drop "
                    "records of batches the disk refuses",
                    (long long)want, j->dir, RESERVE_NAME, strerror(rc),
                    (long long)(have / JOURNAL_RESERVE_SLOT));
    }
    j->reserve_slots = (uint32_t)((have < want ? have : want) / JOURNAL_RESERVE_SLOT);
    if (!(j->slot_used = calloc(j->reserve_slots ? j->reserve_slots : 1, 1))) {
        iot_err("out of memory at start");
        return -1;
    }
    uint8_t slot[JOURNAL_RESERVE_SLOT];
    uint64_t restored = 0;
    for (uint32_t i = 0; i < j->reserve_slots; i++) {
        off_t at = (off_t)i * JOURNAL_RESERVE_SLOT;
        if (pread(j->reserve_fd, slot, sizeof slot, at) != (ssize_t)sizeof slot ||
            get32(slot) == 0)
            continue;
        if (!check_record(slot, sizeof slot)) {
            iot_err("slot %u of %s/%s is damaged: freed", i, j->dir, RESERVE_NAME);
            static const uint8_t zero[4];
            if (pwrite(j->reserve_fd, zero, sizeof zero, at) < 0)
                iot_warn("cannot free it: %s", strerror(errno));
            continue;
        }
        const uint8_t *ids = slot + REC_HEAD;
        uint16_t klen = (uint16_t)(ids[16] | ids[17] << 8);
        char key[512];
        if (klen >= sizeof key)
            continue;
        memcpy(key, ids + REC_IDS, klen);
        key[klen] = '\0';
        if (spool_restore(sp, key, get64(ids), get64(ids + 8), ids + REC_IDS + klen,
                          get32(slot + 4) - REC_IDS - klen, 0, i + 1) < 0) {
            iot_err("out of memory reading the spool");
            return -1;
        }
        j->slot_used[i] = 1;
        j->reserve_used++;
        restored++;
    }
    /* The last run's disk refused batches: this one's may still. */
    j->failing = restored > 0;
    if (restored)
        iot_warn("spool %s: %llu batches of the last run were held in memory only (the disk "
                 "refused them): their drop records are sent, the collector keeps those "
                 "whose batch it did not store",
                 j->dir, (unsigned long long)restored);
    return 0;
}

int journal_open(struct journal *j, const char *dir, int64_t sync_ns, uint64_t max_bytes,
                 struct spool *sp)
{
    *j = (struct journal){.dirfd = -1, .lockfd = -1, .fd = -1, .reserve_fd = -1,
                          .sync_ns = sync_ns, .refused_log.interval_ns = 1000000000};
    uint64_t seg = max_bytes / 16;
    j->segment_max = seg < SEG_MIN ? SEG_MIN : seg > SEG_MAX ? SEG_MAX : seg;
    if (!(j->dir = strdup(dir))) {
        iot_err("out of memory at start");
        return -1;
    }
    if (iot_mkdir_p(dir, 0700) < 0 || (j->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        iot_err("cannot create the spool directory %s: %s", dir, strerror(errno));
        return -1;
    }
    j->lockfd = openat(j->dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->lockfd < 0) {
        iot_err("cannot create %s/lock: %s", dir, strerror(errno));
        return -1;
    }
    if (flock(j->lockfd, LOCK_EX | LOCK_NB) < 0) {
        iot_err(errno == EWOULDBLOCK ? "another agent uses the spool directory %s"
                                     : "cannot lock the spool directory %s",
                dir);
        return -1;
    }
    sp->journal = j;
    if (recover(j, sp) < 0 || open_reserve(j, sp) < 0)
        return -1;
    /* The damaged records' drop records, written to the new segment. */
    for (size_t i = 0; i < j->n_drops; i++) {
        struct journal_drop *d = &j->drops[i];
        char err[160];
        iot_batch *b = iot_wire_open_stored(d->data, d->len, err, sizeof err);
        uint8_t *out = NULL;
        size_t len = 0;
        if (!b || tally_drop_batch(d->key, b, NULL, IOTRACE__DROP_REASON__DROP_UNREADABLE,
                                   made_around(sp, d, b->event_count), 0, &out, &len) < 0 ||
            spool_push(sp, d->key, d->epoch, d->seq, out, len) < 0)
            iot_err("out of memory storing the drop records of a damaged batch of %s", d->key);
        if (b)
            iot_wire_free_batch(b);
        free(out);
        free(d->data);
    }
    free(j->drops);
    j->drops = NULL;
    j->n_drops = j->cap_drops = 0;
    if (j->damaged_records)
        iot_err("spool %s: %llu damaged batches skipped, %llu of their events counted as "
                "dropped (unreadable)",
                dir, (unsigned long long)j->damaged_records,
                (unsigned long long)j->damaged_events);
    return 0;
}

int journal_at_risk(const struct journal *j)
{
    /* Without a reserve at all (no room for it at start) there is nothing
     * to wait for: each batch refused is then logged and counted. */
    return j->failing && j->reserve_slots && j->reserve_used >= j->reserve_slots;
}

/* Makes a segment's name durable along with its contents. */
static void sync_dir(struct journal *j)
{
    if (j->sync_ns != JOURNAL_SYNC_NEVER && fsync(j->dirfd) < 0)
        iot_warn("cannot sync the spool directory %s: %s", j->dir, strerror(errno));
}

static int open_segment(struct journal *j)
{
    char name[40];
    seg_name(j->next_id, name);
    int fd = openat(j->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (!add_seg(j, j->next_id)) {
        close(fd);
        unlinkat(j->dirfd, name, 0);
        errno = ENOMEM;
        return -1;
    }
    j->next_id++;
    j->fd = fd;
    sync_dir(j);
    return 0;
}

static void do_sync(struct journal *j)
{
    if (j->fd >= 0 && fdatasync(j->fd) < 0) {
        j->write_errors++;
        iot_warn("cannot sync the spool in %s: %s", j->dir, strerror(errno));
    }
    j->unsynced_since = 0;
}

/* The current segment is finished: synced, closed, and gone at once if
 * everything in it was acknowledged meanwhile. */
static void close_segment(struct journal *j)
{
    if (j->fd < 0)
        return;
    if (j->unsynced_since && j->sync_ns != JOURNAL_SYNC_NEVER)
        do_sync(j);
    close(j->fd);
    j->fd = -1;
    j->unsynced_since = 0;
    struct journal_segment *s = &j->segs[j->n_segs - 1];
    if (s->live == 0)
        remove_seg(j, s);
}

static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Puts a record of `key`, `epoch`, `seq` and `data` into `out` (at most
 * `max` bytes); its length, 0 if it does not fit. */
static size_t frame(uint8_t *out, size_t max, const char *key, uint64_t epoch, uint64_t seq,
                    const uint8_t *data, size_t len)
{
    size_t klen = strlen(key), n = REC_IDS + klen + len;
    if (REC_HEAD + n > max)
        return 0;
    uint8_t *ids = out + REC_HEAD;
    put64(ids, epoch);
    put64(ids + 8, seq);
    ids[16] = (uint8_t)klen;
    ids[17] = (uint8_t)(klen >> 8);
    memcpy(ids + REC_IDS, key, klen);
    memcpy(ids + REC_IDS + klen, data, len);
    put32(out, REC_MAGIC);
    put32(out + 4, (uint32_t)n);
    put32(out + 8, iot_wire_crc32(ids, n));
    return REC_HEAD + n;
}

/* The batch the disk refused is held in memory only: its drop record
 * (lost) goes into a free slot of the reserve at once, so that the agent's
 * death cannot make its events vanish uncounted. */
static const char *reserve_batch(struct journal *j, struct spool_entry *e)
{
    uint32_t i = 0;
    while (i < j->reserve_slots && j->slot_used[i])
        i++;
    char err[160];
    iot_batch *b = i < j->reserve_slots ? iot_wire_open_stored(e->data, e->len, err, sizeof err)
                                        : NULL;
    iot_body *body = b ? iot_wire_body(b, err, sizeof err) : NULL;
    uint8_t slot[JOURNAL_RESERVE_SLOT];
    size_t n = 0;
    for (int files = 1; b && !n && files >= 0; files--) {
        uint8_t *drops = NULL;
        size_t len = 0;
        if (tally_drop_batch(e->key, b, body, IOTRACE__DROP_REASON__DROP_LOST, 0, files,
                             &drops, &len) == 0)
            n = frame(slot, sizeof slot, e->key, e->epoch, e->seq, drops, len);
        free(drops);
    }
    if (body)
        iot_wire_free_body(body);
    if (b)
        iot_wire_free_batch(b);
    memset(slot + n, 0, sizeof slot - n);
    off_t at = (off_t)i * JOURNAL_RESERVE_SLOT;
    if (!n || pwrite(j->reserve_fd, slot, sizeof slot, at) != (ssize_t)sizeof slot) {
        j->at_risk++;
        return i >= j->reserve_slots ? "the reserve has no free slot"
               : !n                  ? "its drop record could not be made"
                                     : "its drop record could not be written";
    }
    if (j->sync_ns != JOURNAL_SYNC_NEVER && fdatasync(j->reserve_fd) < 0)
        iot_warn("cannot sync %s/%s: %s", j->dir, RESERVE_NAME, strerror(errno));
    j->slot_used[i] = 1;
    j->reserve_used++;
    j->reserved++;
    e->slot = i + 1;
    return NULL;
}

/* A failed write: said loudly, and the batch's events counted in the
 * reserve. */
static int refused(struct journal *j, struct spool_entry *e, const char *what, int err)
{
    j->write_errors++;
    j->failing = 1;
    const char *risk = reserve_batch(j, e);
    uint64_t held_back = 0;
    if (ratelimit_allow(&j->refused_log, iot_mono_ns(), &held_back))
        iot_err("cannot %s in %s: %s; the batch seq=%llu of %s is held in memory only%s%s%s "
                "(%llu more since the last report; spool_errors, spool_reserved and "
                "spool_at_risk count them all)",
                what, j->dir, strerror(err), (unsigned long long)e->seq, e->key,
                risk ? " and " : ", its drop record kept in the reserve", risk ? risk : "",
                risk ? ": if the agent dies before the collector acknowledges it, its events "
                       "are lost uncounted"
                     : "",
                (unsigned long long)held_back);
    return -1;
}

int journal_append(struct journal *j, struct spool_entry *e)
{
    size_t klen = strlen(e->key);
    if (j->fd >= 0 && j->segs[j->n_segs - 1].bytes >= j->segment_max)
        close_segment(j);
    if (j->fd < 0 && open_segment(j) < 0)
        return refused(j, e, "create a spool segment", errno);
    struct journal_segment *s = &j->segs[j->n_segs - 1];
    uint8_t head[REC_HEAD], ids[REC_IDS];
    put64(ids, e->epoch);
    put64(ids + 8, e->seq);
    ids[16] = (uint8_t)klen;
    ids[17] = (uint8_t)(klen >> 8);
    uint32_t n = (uint32_t)(REC_IDS + klen + e->len);
    put32(head, REC_MAGIC);
    put32(head + 4, n);
    uint32_t sum = iot_wire_crc32(ids, REC_IDS);
    sum = iot_wire_crc32_update(sum, e->key, klen);
    put32(head + 8, iot_wire_crc32_update(sum, e->data, e->len));
    struct iovec iov[4] = {{head, REC_HEAD}, {ids, REC_IDS}, {e->key, klen}, {e->data, e->len}};
    if (write_all(j->fd, iov, 4) < 0) {
        /* What part of the record was written is garbage to a later
         * reading: start a fresh segment for the next batch. */
        int err = errno;
        struct stat st;
        if (fstat(j->fd, &st) == 0 && (uint64_t)st.st_size > s->bytes) {
            j->disk_bytes += (uint64_t)st.st_size - s->bytes;
            s->bytes = (uint64_t)st.st_size;
        }
        close_segment(j);
        return refused(j, e, "write to the spool", err);
    }
    j->failing = 0;
    s->bytes += REC_HEAD + n;
    s->live++;
    j->disk_bytes += REC_HEAD + n;
    e->seg = s->id;
    if (j->sync_ns == JOURNAL_SYNC_ALWAYS)
        do_sync(j);
    else if (!j->unsynced_since)
        j->unsynced_since = iot_mono_ns();
    return 0;
}

void journal_release(struct journal *j, const struct spool_entry *e)
{
    if (e->slot && e->slot <= j->reserve_slots && j->slot_used[e->slot - 1]) {
        /* Acknowledged: its drop record is not needed any more. */
        static const uint8_t zero[4];
        if (pwrite(j->reserve_fd, zero, sizeof zero,
                   (off_t)(e->slot - 1) * JOURNAL_RESERVE_SLOT) < 0)
            iot_warn("cannot free a slot of %s/%s: %s", j->dir, RESERVE_NAME, strerror(errno));
        j->slot_used[e->slot - 1] = 0;
        j->reserve_used--;
    }
    struct journal_segment *s = e->seg ? find_seg(j, e->seg) : NULL;
    if (!s || s->live == 0)
        return;
    s->live--;
    int current = j->fd >= 0 && s == &j->segs[j->n_segs - 1];
    if (s->live == 0 && !current)
        remove_seg(j, s);
}

void journal_tick(struct journal *j, int64_t now)
{
    /* Not taking batches, no write tells when the disk has room again: its
     * free space does, once the largest batch a producer sends fits. */
    struct statvfs v;
    if (journal_at_risk(j) && fstatvfs(j->dirfd, &v) == 0 &&
        (uint64_t)v.f_bavail * v.f_frsize >= 2 * IOT_WIRE_MAX_PRODUCER_BATCH)
        j->failing = 0;
    if (j->unsynced_since && j->sync_ns > 0 && now - j->unsynced_since >= j->sync_ns)
        do_sync(j);
}

void journal_close(struct journal *j)
{
    close_segment(j);
    if (j->lockfd >= 0)
        close(j->lockfd);
    if (j->dirfd >= 0)
        close(j->dirfd);
    if (j->reserve_fd >= 0)
        close(j->reserve_fd);
    for (size_t i = 0; i < j->n_drops; i++)
        free(j->drops[i].data);
    free(j->drops);
    free(j->slot_used);
    free(j->segs);
    free(j->dir);
    *j = (struct journal){.dirfd = -1, .lockfd = -1, .fd = -1, .reserve_fd = -1};
}
