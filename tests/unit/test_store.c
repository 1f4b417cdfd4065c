/* The collector's append-only store: round trips, rotation, crash recovery,
 * damage reporting and the writer lock. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "store.h"

struct fixture {
    char dir[64];
};

struct seen {
    size_t count;
    size_t first_len_mismatch; /* index + 1 of the first bad record, 0 if none */
};

static size_t rec_len(size_t i) { return (i * 37) % 1000 + 1; }

static void rec_fill(uint8_t *buf, size_t i, size_t len)
{
    for (size_t j = 0; j < len; j++)
        buf[j] = (uint8_t)(i * 7 + j);
}

static uint64_t rec_time(size_t i) { return 1700000000000000000ull + i * 1000 + 7; }

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/iot-store-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void seg_path(char *buf, size_t len, const char *dir, unsigned n)
{
    snprintf(buf, len, "%s/segment-%08u.iots", dir, n);
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void append_bytes(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void patch_byte(const char *path, off_t off, uint8_t xor_mask)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= xor_mask;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

/* Appends records first .. first+n-1 of the deterministic sequence. */
static void write_records(const char *dir, size_t first, size_t n, uint64_t segment_size)
{
    char err[512];
    struct iot_store *s = iot_store_open(dir, 1, err, sizeof err);
    assert_non_null(s);
    if (segment_size)
        iot_store_set_segment_size(s, segment_size);
    uint8_t buf[1100];
    for (size_t i = first; i < first + n; i++) {
        rec_fill(buf, i, rec_len(i));
        assert_int_equal(iot_store_append(s, buf, rec_len(i), rec_time(i)), 0);
    }
    assert_int_equal(iot_store_sync(s), 0);
    assert_int_equal(iot_store_close(s), 0);
}

static int check_record(void *ctx, const uint8_t *batch, size_t len, uint64_t recv_ns)
{
    struct seen *seen = ctx;
    size_t i = seen->count++;
    uint8_t want[1100];
    rec_fill(want, i, rec_len(i));
    if (!seen->first_len_mismatch &&
        (len != rec_len(i) || memcmp(batch, want, len) != 0 || recv_ns != rec_time(i)))
        seen->first_len_mismatch = i + 1;
    return 0;
}

static size_t scan_ok(const char *dir)
{
    struct seen seen = {0, 0};
    char err[512] = "";
    int rc = iot_store_scan(dir, check_record, &seen, err, sizeof err);
    if (rc != 0)
        fail_msg("scan failed: %s", err);
    assert_int_equal(seen.first_len_mismatch, 0);
    return seen.count;
}

static void scan_fails(const char *dir, const char *want1, const char *want2)
{
    struct seen seen = {0, 0};
    char err[512] = "";
    assert_int_equal(iot_store_scan(dir, check_record, &seen, err, sizeof err), -1);
    if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
        fail_msg("error '%s' lacks '%s' / '%s'", err, want1, want2 ? want2 : "");
}

static int count_record(void *ctx, const uint8_t *batch, size_t len, uint64_t recv_ns)
{
    (void)batch;
    (void)len;
    (void)recv_ns;
    ++*(size_t *)ctx;
    return 0;
}

/* A store that is less than it should be: read to its end all the same,
 * the loss counted and named (want1, want2 in the first report); returns
 * the records read. */
static size_t scan_incomplete(const char *dir, struct iot_store_scan_info *info,
                              const char *want1, const char *want2)
{
    size_t n = 0;
    char err[512] = "";
    if (iot_store_scan_info(dir, count_record, &n, info, err, sizeof err) != 0)
        fail_msg("scan failed: %s", err);
    assert_true(iot_store_scan_incomplete(info));
    if (!strstr(info->damage, want1) || (want2 && !strstr(info->damage, want2)))
        fail_msg("report '%s' lacks '%s' / '%s'", info->damage, want1, want2 ? want2 : "");
    return n;
}

/* Offset of record i in a segment that holds records 0.. from its start. */
static off_t record_offset(size_t i)
{
    off_t off = IOT_STORE_FILE_HEADER;
    for (size_t k = 0; k < i; k++)
        off += IOT_STORE_RECORD_HEADER + (off_t)rec_len(k);
    return off;
}

static void test_round_trip(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 2000, 0);
    assert_int_equal(scan_ok(f->dir), 2000);
    char path[256];
    seg_path(path, sizeof path, f->dir, 1);
    assert_int_equal(file_size(path), record_offset(2000));
    /* Reopening appends to the same segment. */
    write_records(f->dir, 2000, 10, 0);
    assert_int_equal(scan_ok(f->dir), 2010);
}

static void test_file_header_bytes(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 1, 0);
    char path[256];
    seg_path(path, sizeof path, f->dir, 1);
    uint8_t hb[IOT_STORE_FILE_HEADER + IOT_STORE_RECORD_HEADER];
    int fd = open(path, O_RDONLY);
    assert_int_equal(read(fd, hb, sizeof hb), (ssize_t)sizeof hb);
    close(fd);
    static const uint8_t want_file[16] = {'I', 'O', 'T', 'S', 'T', 'O', 'R', 'E', 1, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(hb, want_file, 16);
    static const uint8_t want_rec[8] = {0x49, 0x54, 0x52, 0x53, 1, 0, 0, 0};
    assert_memory_equal(hb + 16, want_rec, 8);
    assert_int_equal(hb[24], rec_len(0)); /* length, little-endian */
}

static void test_rotation(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 300, 4096);
    char path[256];
    unsigned n = 0;
    for (unsigned k = 1;; k++) {
        seg_path(path, sizeof path, f->dir, k);
        if (access(path, F_OK) != 0)
            break;
        n = k;
        assert_true(file_size(path) <= 4096);
    }
    assert_true(n > 10);
    assert_int_equal(scan_ok(f->dir), 300);

    char err[512];
    struct iot_store *s = iot_store_open(f->dir, 1, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(iot_store_segment(s), n);
    assert_int_equal(iot_store_close(s), 0);
}

/* A reader following a live writer (the collector's live analysis): after
 * each sync it reads from where it stopped up to the writer's end, across
 * segment rotations, and sees every record once, in order; records the
 * writer has buffered but not synced are not read.  Stateless reads, and a
 * follower that keeps its segment and read-ahead between them; with small
 * segments (a rotation every few rounds) and one large one (reads that
 * continue the open segment and go past a read-ahead chunk). */
static void follow_writer(const char *dir, int follower, uint64_t segment_size, size_t per_round)
{
    char err[512] = "";
    struct iot_store *s = iot_store_open(dir, 1, err, sizeof err);
    assert_non_null(s);
    iot_store_set_segment_size(s, segment_size);
    struct iot_store_follower *fw = follower ? iot_store_follow(dir) : NULL;
    struct seen seen = {0, 0};
    struct iot_store_pos pos = {0, 0}, end;
    uint8_t buf[1100];
    size_t next = 0;
    for (size_t round = 0; round < 40; round++) {
        size_t n = round % 7 * per_round; /* some rounds append nothing */
        for (size_t k = 0; k < n; k++, next++) {
            rec_fill(buf, next, rec_len(next));
            assert_int_equal(iot_store_append(s, buf, rec_len(next), rec_time(next)), 0);
        }
        assert_int_equal(iot_store_sync(s), 0);
        iot_store_end(s, &end);
        /* Appended but not synced: not part of `end`. */
        rec_fill(buf, next, rec_len(next));
        assert_int_equal(iot_store_append(s, buf, rec_len(next), rec_time(next)), 0);
        int rc = fw ? iot_store_follow_read(fw, &pos, &end, check_record, &seen, err, sizeof err)
                    : iot_store_read_range(dir, &pos, &end, check_record, &seen, err, sizeof err);
        if (rc != 0)
            fail_msg("read: %s", err);
        assert_int_equal(seen.count, next);
        assert_int_equal(seen.first_len_mismatch, 0);
        assert_int_equal(pos.segment, end.segment);
        assert_int_equal(pos.offset, end.offset);
        next++; /* the unsynced record is covered by the next round's sync */
    }
    assert_true(segment_size > 4096 || iot_store_segment(s) > 5);
    assert_int_equal(iot_store_close(s), 0);
    iot_store_follow_close(fw);
    assert_int_equal(scan_ok(dir), next);
}

static void test_follow_writer(void **state)
{
    struct fixture *f = *state;
    follow_writer(f->dir, 0, 4096, 1);
}

static void test_follower(void **state)
{
    struct fixture *f = *state;
    follow_writer(f->dir, 1, 4096, 1);
}

static void test_follower_one_segment(void **state)
{
    struct fixture *f = *state;
    follow_writer(f->dir, 1, 1u << 30, 60); /* about 3.5 MB: several read-ahead chunks */
}

static void test_large_record_own_segment(void **state)
{
    struct fixture *f = *state;
    char err[512];
    struct iot_store *s = iot_store_open(f->dir, 1, err, sizeof err);
    assert_non_null(s);
    iot_store_set_segment_size(s, 4096);
    static uint8_t big[10000];
    assert_int_equal(iot_store_append(s, big, 100, 1), 0);
    assert_int_equal(iot_store_append(s, big, sizeof big, 2), 0);
    assert_int_equal(iot_store_append(s, big, 100, 3), 0);
    assert_int_equal(iot_store_close(s), 0);
    char path[256];
    seg_path(path, sizeof path, f->dir, 2);
    assert_int_equal(file_size(path), IOT_STORE_FILE_HEADER + IOT_STORE_RECORD_HEADER + sizeof big);
    seg_path(path, sizeof path, f->dir, 3);
    assert_int_equal(file_size(path), IOT_STORE_FILE_HEADER + IOT_STORE_RECORD_HEADER + 100);
}

/* A store removed under its writer: syncing into the unlinked segment
 * fails, so that nothing more is acknowledged as stored. */
static void test_deleted_under_writer(void **state)
{
    struct fixture *f = *state;
    char err[512];
    struct iot_store *s = iot_store_open(f->dir, 1, err, sizeof err);
    assert_non_null(s);
    static uint8_t rec[100];
    assert_int_equal(iot_store_append(s, rec, sizeof rec, 1), 0);
    assert_int_equal(iot_store_sync(s), 0);
    char path[256];
    seg_path(path, sizeof path, f->dir, 1);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(iot_store_append(s, rec, sizeof rec, 2), 0);
    assert_int_equal(iot_store_sync(s), -1);
    assert_non_null(strstr(iot_store_error(s), "was deleted while in use"));
    assert_int_equal(iot_store_append(s, rec, sizeof rec, 3), -1); /* and stays failed */
    iot_store_close(s);
}

static void torn_tail_case(const char *dir, const void *tail, size_t tail_len)
{
    write_records(dir, 0, 10, 0);
    char path[256];
    seg_path(path, sizeof path, dir, 1);
    off_t good = file_size(path);
    append_bytes(path, tail, tail_len);
    /* A reader stops quietly before an incomplete final record... */
    assert_int_equal(scan_ok(dir), 10);
    /* ...and the writer cuts it off and goes on appending after it. */
    write_records(dir, 10, 5, 0);
    assert_int_equal(file_size(path), record_offset(15));
    assert_true(good == record_offset(10));
    assert_int_equal(scan_ok(dir), 15);
}

static void test_torn_partial_payload(void **state)
{
    struct fixture *f = *state;
    uint8_t tail[IOT_STORE_RECORD_HEADER + 10] = {0x49, 0x54, 0x52, 0x53, 1, 0, 0, 0, 100};
    torn_tail_case(f->dir, tail, sizeof tail);
}

static void test_torn_partial_header(void **state)
{
    struct fixture *f = *state;
    uint8_t tail[7] = {0x49, 0x54, 0x52, 0x53, 1, 0, 0};
    torn_tail_case(f->dir, tail, sizeof tail);
}

static void test_torn_bad_crc(void **state)
{
    struct fixture *f = *state;
    /* A complete final record whose payload never reached the disk intact. */
    uint8_t tail[IOT_STORE_RECORD_HEADER + 4] = {0x49, 0x54, 0x52, 0x53, 1, 0, 0, 0, 4, 0, 0, 0,
                                                 0xde, 0xad, 0xbe, 0xef};
    write_records(f->dir, 0, 10, 0);
    char path[256];
    seg_path(path, sizeof path, f->dir, 1);
    append_bytes(path, tail, sizeof tail);
    struct iot_store_scan_info info;
    assert_int_equal(scan_incomplete(f->dir, &info, "CRC mismatch", "segment-00000001.iots"), 10);
    assert_int_equal(info.damaged_records, 1);
    assert_int_equal(info.damaged_bytes, sizeof tail);
    write_records(f->dir, 10, 5, 0);
    assert_int_equal(scan_ok(f->dir), 15);
}

static void test_torn_zeros(void **state)
{
    struct fixture *f = *state;
    static const uint8_t zeros[100];
    write_records(f->dir, 0, 10, 0);
    char path[256];
    seg_path(path, sizeof path, f->dir, 1);
    append_bytes(path, zeros, sizeof zeros);
    write_records(f->dir, 10, 5, 0);
    assert_int_equal(file_size(path), record_offset(15));
    assert_int_equal(scan_ok(f->dir), 15);
}

static void test_crc_damage_in_middle(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 10, 0);
    char path[256], want[64];
    seg_path(path, sizeof path, f->dir, 1);
    patch_byte(path, record_offset(3) + IOT_STORE_RECORD_HEADER + 1, 0x01);
    snprintf(want, sizeof want, "at offset %lld", (long long)record_offset(3));
    /* One bad record costs that record: the nine others are read... */
    struct iot_store_scan_info info;
    assert_int_equal(scan_incomplete(f->dir, &info, "segment-00000001.iots: CRC mismatch", want),
                     9);
    assert_int_equal(info.damaged_records, 1);
    assert_int_equal(info.damaged_bytes, record_offset(4) - record_offset(3));
    /* ...and the writer starts, appending after the last record. */
    char err[512] = "";
    struct iot_store *s = iot_store_open(f->dir, 1, err, sizeof err);
    if (!s)
        fail_msg("the writer refused a store with one damaged record: %s", err);
    assert_int_equal(iot_store_append(s, (const uint8_t *)"x", 1, 5), 0);
    assert_int_equal(iot_store_sync(s), 0);
    assert_int_equal(iot_store_close(s), 0);
    assert_int_equal(scan_incomplete(f->dir, &info, "CRC mismatch", want), 10);
}

static void test_bad_record_magic_in_middle(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 10, 0);
    char path[256], want[64];
    seg_path(path, sizeof path, f->dir, 1);
    patch_byte(path, record_offset(5), 0xff);
    snprintf(want, sizeof want, "at offset %lld", (long long)record_offset(5));
    struct iot_store_scan_info info;
    assert_int_equal(scan_incomplete(f->dir, &info, "bad record magic", want), 9);
}

static void test_truncated_non_final_segment(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 100, 4096);
    char path[256];
    seg_path(path, sizeof path, f->dir, 1);
    assert_int_equal(truncate(path, file_size(path) - 5), 0);
    struct iot_store_scan_info info;
    scan_incomplete(f->dir, &info, "segment-00000001.iots", NULL);
    assert_int_equal(info.missing_bytes, 5); /* by the manifest */
    assert_true(info.damaged_records >= 1);  /* the record the cut shortened */
}

/* Segments deleted, first, in the middle or last, and a cut exactly at a
 * record boundary: each seen through the segments' numbers and the
 * manifest, with the bytes lost. */
static void test_missing_segments(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 100, 4096);
    uint32_t last = 0;
    char path[256];
    for (uint32_t k = 1;; k++) {
        seg_path(path, sizeof path, f->dir, k);
        if (access(path, F_OK) < 0)
            break;
        last = k;
    }
    assert_true(last >= 4);
    struct iot_store_scan_info info;
    for (uint32_t k = last;; k = k == last ? 1 : 2) {
        char copy[200];
        snprintf(copy, sizeof copy, "%.150s/copy-%u", f->dir, k);
        char cmd[1000];
        snprintf(cmd, sizeof cmd, "mkdir %s && cp %s/MANIFEST %s/segment-*.iots %s/", copy, f->dir,
                 f->dir, copy);
        assert_int_equal(system(cmd), 0);
        seg_path(path, sizeof path, copy, k);
        off_t size = file_size(path);
        assert_int_equal(unlink(path), 0);
        char want[64];
        snprintf(want, sizeof want, "segment-%08u.iots is missing", k);
        scan_incomplete(copy, &info, want, NULL);
        assert_int_equal(info.missing_segments, 1);
        assert_int_equal(info.missing_bytes, size);
        if (k == 2)
            break;
    }
    /* The last segment cut at a record boundary, after its first record. */
    seg_path(path, sizeof path, f->dir, last);
    off_t size = file_size(path);
    uint8_t len[4];
    int fd = open(path, O_RDONLY);
    assert_int_equal(pread(fd, len, 4, IOT_STORE_FILE_HEADER + 8), 4);
    close(fd);
    off_t cut = IOT_STORE_FILE_HEADER + IOT_STORE_RECORD_HEADER +
                (off_t)(len[0] | len[1] << 8 | len[2] << 16 | (uint32_t)len[3] << 24);
    assert_true(cut < size);
    assert_int_equal(truncate(path, cut), 0);
    scan_incomplete(f->dir, &info, "the store's manifest says", NULL);
    assert_int_equal(info.missing_bytes, size - cut);
    assert_int_equal(info.damaged_records, 0);
    /* The writer says so, and leaves it visible. */
    char err[512] = "";
    struct iot_store *s = iot_store_open(f->dir, 1, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(iot_store_append(s, (const uint8_t *)"x", 1, 5), 0);
    assert_int_equal(iot_store_sync(s), 0);
    assert_int_equal(iot_store_close(s), 0);
    scan_incomplete(f->dir, &info, "the store's manifest says", NULL);
    assert_int_equal(info.missing_bytes, size - cut);
    /* Every segment there: complete. */
    char copy[200];
    snprintf(copy, sizeof copy, "%.150s/whole", f->dir);
    write_records(copy, 0, 100, 4096);
    size_t n = 0;
    assert_int_equal(iot_store_scan_info(copy, count_record, &n, &info, err, sizeof err), 0);
    assert_false(iot_store_scan_incomplete(&info));
    assert_true(info.manifest);
    assert_int_equal(n, 100);
}

static void test_bad_file_magic(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 3, 0);
    char path[256];
    seg_path(path, sizeof path, f->dir, 1);
    patch_byte(path, 0, 0x20);
    struct iot_store_scan_info info;
    assert_int_equal(scan_incomplete(f->dir, &info, "segment-00000001.iots: bad file magic", NULL),
                     3);
}

static void test_lock(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";
    struct iot_store *a = iot_store_open(f->dir, 1, err, sizeof err);
    assert_non_null(a);
    struct iot_store *b = iot_store_open(f->dir, 1, err, sizeof err);
    assert_null(b);
    if (!strstr(err, "in use by another collector") || !strstr(err, "LOCK"))
        fail_msg("unexpected lock error: %s", err);
    /* Readers do not need the lock. */
    assert_int_equal(iot_store_append(a, (const uint8_t *)"x", 1, 5), 0);
    assert_int_equal(iot_store_sync(a), 0);
    struct iot_store *r = iot_store_open(f->dir, 0, err, sizeof err);
    assert_non_null(r);
    assert_int_equal(iot_store_close(r), 0);
    assert_int_equal(iot_store_close(a), 0);
    b = iot_store_open(f->dir, 1, err, sizeof err);
    assert_non_null(b);
    assert_int_equal(iot_store_close(b), 0);
}

static void test_not_a_store(void **state)
{
    struct fixture *f = *state;
    scan_fails(f->dir, "no segment files", NULL);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing", f->dir);
    scan_fails(missing, "cannot read store directory", NULL);
    char err[512];
    assert_null(iot_store_open(missing, 0, err, sizeof err));
}

static void test_creates_directories(void **state)
{
    struct fixture *f = *state;
    char nested[128];
    snprintf(nested, sizeof nested, "%s/a/b/c", f->dir);
    write_records(nested, 0, 3, 0);
    assert_int_equal(scan_ok(nested), 3);
}

static void test_short_new_segment_header(void **state)
{
    struct fixture *f = *state;
    write_records(f->dir, 0, 5, 0);
    /* A crash right after creating the next segment leaves it header-less. */
    char path[256];
    seg_path(path, sizeof path, f->dir, 2);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "IOTS", 4), 4);
    close(fd);
    assert_int_equal(scan_ok(f->dir), 5);
    write_records(f->dir, 5, 5, 0);
    assert_int_equal(scan_ok(f->dir), 10);
}

int main(void)
{
    iot_log_init("test_store", IOT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_header_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follow_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower_one_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_record_own_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_under_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_partial_payload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_partial_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_bad_crc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_zeros, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crc_damage_in_middle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_record_magic_in_middle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_non_final_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_file_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_creates_directories, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_new_segment_header, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
