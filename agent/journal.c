#include "journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fsutil.h"
#include "grow.h"
#include "log.h"
#include "spool.h"
#include "timeutil.h"
#include "wire.h"

#define REC_MAGIC 0x4c505349u /* "ISPL" little-endian */
#define REC_HEAD 12           /* magic, payload length, CRC-32 of the payload */
#define REC_IDS 18            /* epoch, seq, key length */
#define SEG_MIN (1u << 20)
#define SEG_MAX (16u << 20)

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
    return spool_restore(sp, key, get64(ids), get64(ids + 8), data, n - REC_IDS - klen, seg);
}

/* Reads one segment into the spool; the newest may end in a torn record,
 * which is cut off so that appending could go on after it. */
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
    if (off < len) {
        j->damaged_bytes += len - off;
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

int journal_open(struct journal *j, const char *dir, int64_t sync_ns, uint64_t max_bytes,
                 struct spool *sp)
{
    *j = (struct journal){.dirfd = -1, .lockfd = -1, .fd = -1, .sync_ns = sync_ns};
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
    return recover(j, sp);
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

int journal_append(struct journal *j, struct spool_entry *e)
{
    size_t klen = strlen(e->key);
    if (j->fd >= 0 && j->segs[j->n_segs - 1].bytes >= j->segment_max)
        close_segment(j);
    if (j->fd < 0 && open_segment(j) < 0) {
        j->write_errors++;
        iot_warn("cannot create a spool segment in %s: %s; batches are held in memory only",
                 j->dir, strerror(errno));
        return -1;
    }
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
        j->write_errors++;
        iot_warn("cannot write to the spool in %s: %s; this batch is held in memory only",
                 j->dir, strerror(err));
        struct stat st;
        if (fstat(j->fd, &st) == 0 && (uint64_t)st.st_size > s->bytes) {
            j->disk_bytes += (uint64_t)st.st_size - s->bytes;
            s->bytes = (uint64_t)st.st_size;
        }
        close_segment(j);
        return -1;
    }
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
    free(j->segs);
    free(j->dir);
    *j = (struct journal){.dirfd = -1, .lockfd = -1, .fd = -1};
}
