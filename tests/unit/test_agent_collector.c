/* A small stand-in for iotrace-collector that speaks the ROUTER side of
 * common/link.h, for the agent's integration tests and the transport
 * benchmark.  It can misbehave on purpose: acknowledge late, never, or die
 * after storing a batch but before acknowledging it, or (--junk) send
 * malformed and unexpected messages before each acknowledgement and, the
 * first time every fifth batch arrives, not store it and answer with an ACK
 * that names another epoch.  Like an older
 * collector it ignores clock PINGs, unless --pong is given.
 *
 * "Storing" is one line per batch in the --record file, flushed before the
 * ACK goes out; a restarted instance reads the file back to answer
 * DUPLICATE, as the real collector does from its durable store. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "link.h"
#include "log.h"
#include "opts.h"
#include "timeutil.h"
#include "wire.h"

struct pending_ack {
    int64_t due_ns;
    uint8_t id[256];
    size_t id_len;
    char key[512];
    uint64_t epoch, seq;
    uint8_t status;
    char reason[200];
};

struct collector {
    char *listen, *record;
    long credit, ack_delay_ms, die_after, reject_every;
    int no_ack, pong, junk;
    void *zctx, *sock;
    FILE *rec;
    char **seen; /* open-addressing set of "key epoch seq" */
    size_t seen_cap, seen_count;
    struct pending_ack *acks;
    size_t ack_head, ack_count, ack_cap;
    uint64_t stored, duplicates, rejected;
};

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static size_t hash_str(const char *s)
{
    size_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Returns 1 if `id` was new. */
static int seen_add(struct collector *c, const char *id)
{
    if (c->seen_count * 2 >= c->seen_cap) {
        size_t cap = c->seen_cap ? c->seen_cap * 2 : 1024;
        char **t = calloc(cap, sizeof *t);
        for (size_t i = 0; i < c->seen_cap; i++)
            if (c->seen[i]) {
                size_t j = hash_str(c->seen[i]) & (cap - 1);
                while (t[j])
                    j = (j + 1) & (cap - 1);
                t[j] = c->seen[i];
            }
        free(c->seen);
        c->seen = t;
        c->seen_cap = cap;
    }
    size_t j = hash_str(id) & (c->seen_cap - 1);
    for (; c->seen[j]; j = (j + 1) & (c->seen_cap - 1))
        if (!strcmp(c->seen[j], id))
            return 0;
    c->seen[j] = strdup(id);
    c->seen_count++;
    return 1;
}

static void load_record(struct collector *c)
{
    FILE *f = fopen(c->record, "r");
    if (!f)
        return;
    char line[1024], key[512];
    unsigned long long epoch, seq;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "STORED %511s %llx %llu", key, &epoch, &seq) == 3) {
            char id[600];
            snprintf(id, sizeof id, "%s %016llx %llu", key, epoch, seq);
            seen_add(c, id);
        }
    fclose(f);
}

static void queue_ack(struct collector *c, zmq_msg_t *id, const iot_batch *b,
                      const char *key, uint8_t status, const char *reason)
{
    if (c->ack_count == c->ack_cap) {
        size_t cap = c->ack_cap ? c->ack_cap * 2 : 256;
        struct pending_ack *a = calloc(cap, sizeof *a);
        for (size_t i = 0; i < c->ack_count; i++)
            a[i] = c->acks[(c->ack_head + i) % c->ack_cap];
        free(c->acks);
        c->acks = a;
        c->ack_cap = cap;
        c->ack_head = 0;
    }
    struct pending_ack *a = &c->acks[(c->ack_head + c->ack_count++) % c->ack_cap];
    a->due_ns = iot_mono_ns() + c->ack_delay_ms * 1000000;
    a->id_len = zmq_msg_size(id) < sizeof a->id ? zmq_msg_size(id) : sizeof a->id;
    memcpy(a->id, zmq_msg_data(id), a->id_len);
    snprintf(a->key, sizeof a->key, "%s", key);
    a->epoch = b->epoch;
    a->seq = b->seq;
    a->status = status;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
}

/* One message to the agent `id`, its frames given as (data, size) pairs. */
static void send_frames(struct collector *c, const uint8_t *id, size_t id_len, int n,
                        const void *const *data, const size_t *len)
{
    zmq_send(c->sock, id, id_len, ZMQ_SNDMORE);
    for (int i = 0; i < n; i++)
        zmq_send(c->sock, data[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0);
}

/* What a broken or hostile collector might send: the agent must log it,
 * ignore it and carry on, and above all not let a batch go for an ACK that
 * does not name it. */
static void send_junk(struct collector *c, const struct pending_ack *a)
{
    uint8_t epoch[8], other[8], credit[4] = {0, 0, 0, 8};
    uint8_t stored = 0;
    iot_put_u64(epoch, a->epoch);
    iot_put_u64(other, a->seq + 1000000); /* a batch the agent does not hold */
    const char *p = IOT_LINK_PROTO;
    const void *no_header[] = {"NOPE", IOT_LINK_ACK};
    const size_t no_header_len[] = {4, 3};
    const void *unknown[] = {p, "ZZZ"};
    const size_t unknown_len[] = {4, 3};
    const void *short_ack[] = {p, IOT_LINK_ACK, a->key};
    const size_t short_ack_len[] = {4, 3, strlen(a->key)};
    const void *wrong_seq[] = {p, IOT_LINK_ACK, a->key, epoch, other, &stored, ""};
    const size_t wrong_seq_len[] = {4, 3, strlen(a->key), 8, 8, 1, 0};
    const void *bad_pong[] = {p, IOT_LINK_PONG, "x"};
    const size_t bad_pong_len[] = {4, 4, 1};
    const void *bad_welcome[] = {p, IOT_LINK_WELCOME, credit};
    const size_t bad_welcome_len[] = {4, 7, 3};
    const void *many[40];
    size_t many_len[40];
    for (int i = 0; i < 40; i++)
        many[i] = i ? "z" : p, many_len[i] = i ? 1 : 4;
    send_frames(c, a->id, a->id_len, 2, no_header, no_header_len);
    send_frames(c, a->id, a->id_len, 2, unknown, unknown_len);
    send_frames(c, a->id, a->id_len, 3, short_ack, short_ack_len);
    send_frames(c, a->id, a->id_len, 7, wrong_seq, wrong_seq_len);
    send_frames(c, a->id, a->id_len, 3, bad_pong, bad_pong_len);
    send_frames(c, a->id, a->id_len, 3, bad_welcome, bad_welcome_len);
    send_frames(c, a->id, a->id_len, 40, many, many_len);
}

static void send_due_acks(struct collector *c)
{
    int64_t now = iot_mono_ns();
    while (c->ack_count && c->acks[c->ack_head].due_ns <= now) {
        struct pending_ack *a = &c->acks[c->ack_head];
        uint8_t epoch[8], seq[8];
        iot_put_u64(epoch, a->epoch);
        iot_put_u64(seq, a->seq);
        if (c->junk)
            send_junk(c, a);
        zmq_send(c->sock, a->id, a->id_len, ZMQ_SNDMORE);
        zmq_send(c->sock, IOT_LINK_PROTO, 4, ZMQ_SNDMORE);
        zmq_send(c->sock, IOT_LINK_ACK, 3, ZMQ_SNDMORE);
        zmq_send(c->sock, a->key, strlen(a->key), ZMQ_SNDMORE);
        zmq_send(c->sock, epoch, 8, ZMQ_SNDMORE);
        zmq_send(c->sock, seq, 8, ZMQ_SNDMORE);
        zmq_send(c->sock, &a->status, 1, ZMQ_SNDMORE);
        zmq_send(c->sock, a->reason, strlen(a->reason), 0);
        c->ack_head = (c->ack_head + 1) % c->ack_cap;
        c->ack_count--;
    }
}

static void on_hello(struct collector *c, zmq_msg_t *f, int n)
{
    if (n != 5 || zmq_msg_size(&f[4]) != 8)
        return;
    fprintf(c->rec, "HELLO %.*s %016llx\n", (int)zmq_msg_size(&f[3]),
            (const char *)zmq_msg_data(&f[3]),
            (unsigned long long)iot_get_u64(zmq_msg_data(&f[4])));
    fflush(c->rec);
    uint8_t credit[4];
    iot_put_u32(credit, (uint32_t)c->credit);
    zmq_send(c->sock, zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), ZMQ_SNDMORE);
    zmq_send(c->sock, IOT_LINK_PROTO, 4, ZMQ_SNDMORE);
    zmq_send(c->sock, IOT_LINK_WELCOME, 7, ZMQ_SNDMORE);
    zmq_send(c->sock, credit, 4, 0);
}

/* Clock exchange, answered at once with this host's clock; PONG lines in
 * the record show that the agent's exchanges arrived. */
static void on_ping(struct collector *c, zmq_msg_t *f, int n)
{
    if (!c->pong || n != 4 || zmq_msg_size(&f[3]) != 8)
        return;
    uint8_t t2[8], t3[8];
    iot_put_u64(t2, (uint64_t)iot_now_ns());
    fprintf(c->rec, "PONG\n");
    fflush(c->rec);
    zmq_send(c->sock, zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), ZMQ_SNDMORE);
    zmq_send(c->sock, IOT_LINK_PROTO, 4, ZMQ_SNDMORE);
    zmq_send(c->sock, IOT_LINK_PONG, 4, ZMQ_SNDMORE);
    zmq_send(c->sock, zmq_msg_data(&f[3]), 8, ZMQ_SNDMORE);
    zmq_send(c->sock, t2, 8, ZMQ_SNDMORE);
    iot_put_u64(t3, (uint64_t)iot_now_ns());
    zmq_send(c->sock, t3, 8, 0);
}

static void on_batch(struct collector *c, zmq_msg_t *f, int n)
{
    if (n != 4)
        return;
    char err[256], key[512], id[600];
    const uint8_t *data = zmq_msg_data(&f[3]);
    size_t len = zmq_msg_size(&f[3]);
    iot_batch *b = iot_wire_open(data, len, err, sizeof err);
    if (!b) {
        fprintf(c->rec, "UNREADABLE %s\n", err);
        fflush(c->rec);
        return;
    }
    iot_wire_batch_key(b, key, sizeof key);
    snprintf(id, sizeof id, "%s %016llx %llu", key, (unsigned long long)b->epoch,
             (unsigned long long)b->seq);
    uint8_t status;
    char refused[640];
    snprintf(refused, sizeof refused, "refused %s", id);
    if (c->junk && b->seq % 5 == 0 && seen_add(c, refused)) {
        /* Not stored, and answered with an ACK of another epoch: an agent
         * that let the batch go on it would lose it. */
        fprintf(c->rec, "REFUSED %s\n", id);
        fflush(c->rec);
        queue_ack(c, &f[0], b, key, IOT_ACK_STORED, "");
        c->acks[(c->ack_head + c->ack_count - 1) % c->ack_cap].epoch ^= 1;
        iot_wire_free_batch(b);
        return;
    }
    if (c->reject_every && b->seq % (uint64_t)c->reject_every == (uint64_t)c->reject_every - 1) {
        status = IOT_ACK_REJECTED;
        c->rejected++;
        snprintf(err, sizeof err, "refused by the test collector (--reject-every)");
        fprintf(c->rec, "REJECTED %s %s\n", id, err);
    } else if (iot_wire_validate(data, len, err, sizeof err) < 0) {
        status = IOT_ACK_REJECTED;
        c->rejected++;
        fprintf(c->rec, "REJECTED %s %s\n", id, err);
    } else if (!seen_add(c, id)) {
        status = IOT_ACK_DUPLICATE;
        c->duplicates++;
        fprintf(c->rec, "DUPLICATE %s\n", id);
        err[0] = '\0';
    } else {
        status = IOT_ACK_STORED;
        c->stored++;
        fprintf(c->rec, "STORED %s %u\n", id, b->event_count);
        err[0] = '\0';
    }
    fflush(c->rec);
    if (c->die_after && c->stored >= (uint64_t)c->die_after) {
        fprintf(stderr, "test-collector: dying after storing %llu batches, before the ACK\n",
                (unsigned long long)c->stored);
        _exit(3);
    }
    if (!c->no_ack)
        queue_ack(c, &f[0], b, key, status, err);
    iot_wire_free_batch(b);
}

static void on_message(struct collector *c)
{
    zmq_msg_t f[8];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t scratch, *m = n < 8 ? &f[n] : &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, c->sock, 0) < 0) {
            zmq_msg_close(m);
            break;
        }
        more = zmq_msg_more(m);
        if (m == &scratch)
            zmq_msg_close(m);
        else
            n++;
    }
    if (n >= 3 && zmq_msg_size(&f[1]) == 4 && !memcmp(zmq_msg_data(&f[1]), IOT_LINK_PROTO, 4)) {
        size_t tl = zmq_msg_size(&f[2]);
        const char *t = zmq_msg_data(&f[2]);
        if (tl == 5 && !memcmp(t, IOT_LINK_HELLO, 5))
            on_hello(c, f, n);
        else if (tl == 5 && !memcmp(t, IOT_LINK_BATCH, 5))
            on_batch(c, f, n);
        else if (tl == 4 && !memcmp(t, IOT_LINK_PING, 4))
            on_ping(c, f, n);
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

int main(int argc, char **argv)
{
    static struct collector c = {.listen = "tcp://127.0.0.1:5555", .record = "/dev/null",
                                 .credit = IOT_LINK_DEFAULT_CREDIT};
    const struct iot_opt opts[] = {
        {"listen", 'l', IOT_OPT_STRING, &c.listen, "ENDPOINT", "ROUTER endpoint to bind"},
        {"record", 'r', IOT_OPT_STRING, &c.record, "FILE",
         "append HELLO/STORED/DUPLICATE/REJECTED lines; read back at start for duplicates"},
        {"credit", 0, IOT_OPT_INT, &c.credit, "N", "credit granted in WELCOME (default 64)"},
        {"ack-delay", 0, IOT_OPT_INT, &c.ack_delay_ms, "MS", "acknowledge this late"},
        {"no-ack", 0, IOT_OPT_FLAG, &c.no_ack, NULL, "store but never acknowledge"},
        {"pong", 0, IOT_OPT_FLAG, &c.pong, NULL,
         "answer clock PINGs (by default they are ignored, as an older collector does)"},
        {"junk", 0, IOT_OPT_FLAG, &c.junk, NULL,
         "before each ACK send the agent malformed messages, one of an unknown type and an "
         "ACK for a batch it does not hold; the first time every fifth batch arrives, do not "
         "store it and answer with an ACK of another epoch"},
        {"reject-every", 0, IOT_OPT_INT, &c.reject_every, "N",
         "answer REJECTED, with a reason, to every batch whose seq is N-1 modulo N"},
        {"die-after", 0, IOT_OPT_INT, &c.die_after, "N",
         "exit with status 3 right after storing the N-th batch, before acknowledging it"},
    };
    const struct iot_opts_spec spec = {
        .program = "test-agent-collector",
        .synopsis = "--listen ENDPOINT --record FILE [options]",
        .description = "Minimal collector for the agent's tests (ROUTER side of common/link.h).",
        .opts = opts,
        .n_opts = (int)(sizeof opts / sizeof opts[0]),
    };
    iot_log_init("test-agent-collector", IOT_LOG_INFO);
    iot_opts_parse(&spec, argc, argv);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    load_record(&c);
    c.rec = fopen(c.record, "a");
    if (!c.rec) {
        perror(c.record);
        return 1;
    }
    c.zctx = zmq_ctx_new();
    c.sock = zmq_socket(c.zctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(c.sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(c.sock, c.listen) < 0) {
        fprintf(stderr, "test-agent-collector: bind %s: %s\n", c.listen,
                zmq_strerror(zmq_errno()));
        return 1;
    }
    while (!stop) {
        long timeout = 100;
        if (c.ack_count) {
            int64_t wait = (c.acks[c.ack_head].due_ns - iot_mono_ns()) / 1000000;
            timeout = wait < 0 ? 0 : wait < timeout ? wait : timeout;
        }
        zmq_pollitem_t item = {.socket = c.sock, .events = ZMQ_POLLIN};
        if (zmq_poll(&item, 1, timeout) > 0)
            on_message(&c);
        send_due_acks(&c);
    }
    fprintf(stderr, "test-agent-collector: stored=%llu duplicates=%llu rejected=%llu\n",
            (unsigned long long)c.stored, (unsigned long long)c.duplicates,
            (unsigned long long)c.rejected);
    fclose(c.rec);
    for (size_t i = 0; i < c.seen_cap; i++)
        free(c.seen[i]);
    free(c.seen);
    free(c.acks);
    zmq_close(c.sock);
    zmq_ctx_term(c.zctx);
    return 0;
}
