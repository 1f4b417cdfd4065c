#include "live_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static char dir[64], segment[128];
static struct ingest_view view;

static void copy_segment(const char *from)
{
    snprintf(segment, sizeof segment, "%s/segment-00000001.iots", dir);
    FILE *in = fopen(from, "rb"), *out = fopen(segment, "wb");
    char buf[4096];
    size_t n;
    if (!in || !out) {
        fprintf(stderr, "live_fixture: cannot copy %s to %s\n", from, segment);
        abort();
    }
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            abort();
    fclose(in);
    struct stat st;
    if (fclose(out) != 0 || stat(segment, &st) < 0)
        abort();
    view.durable = (struct iot_store_pos){1, (uint64_t)st.st_size};
}

static int settled(struct live *l, size_t jobs)
{
    json_t *doc = live_jobs_json(l, LIVE_ALL, 0, 0, LIVE_ANY_UID);
    json_t *list = json_object_get(doc, "jobs"), *j;
    size_t i;
    int done = json_array_size(list) == jobs;
    json_array_foreach(list, i, j)
        done = done && json_is_true(json_object_get(j, "final_stats_in_memory"));
    json_decref(doc);
    return done;
}

struct live *live_fixture_start(const char *segment_file, size_t jobs)
{
    snprintf(dir, sizeof dir, "/tmp/iot-live-fixture-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    iot_log_init("live_fixture", IOT_LOG_ERROR);
    ingest_view_init(&view);
    copy_segment(segment_file);
    struct live_config cfg = {.store = dir, .lateness_ns = 2000000000, .grace_ns = 2000000000,
                              .job_idle_ns = 100000000, .keep_ns = INT64_MAX / 2,
                              .producer_idle_ns = 2000000000};
    char err[512];
    struct live *l = live_start(&cfg, &view, err, sizeof err);
    if (!l) {
        fprintf(stderr, "live_fixture: %s\n", err);
        abort();
    }
    for (int i = 0; !settled(l, jobs); i++) {
        if (i == 300) {
            fprintf(stderr, "live_fixture: the live analysis did not finish %zu jobs\n", jobs);
            abort();
        }
        usleep(100000);
    }
    return l;
}

void live_fixture_stop(struct live *l)
{
    live_stop(l);
    unlink(segment);
    rmdir(dir);
}
