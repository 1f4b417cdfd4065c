#include "stats.h"

#include <stdio.h>
#include <string.h>

#include "journal.h"
#include "log.h"
#include "spool.h"

void stats_log(const struct agent_stats *st, const struct spool *sp, int force)
{
    static struct agent_stats last;
    static uint64_t last_pending = UINT64_MAX;
    if (!force && !memcmp(&last, st, sizeof last) && last_pending == sp->count)
        return;
    last = *st;
    last_pending = sp->count;
    char offset[24] = "-", rtt[24] = "-";
    if (st->clock_valid) {
        snprintf(offset, sizeof offset, "%lld", (long long)st->clock_offset_ns);
        snprintf(rtt, sizeof rtt, "%llu", (unsigned long long)st->clock_rtt_ns);
    }
    char spool[192] = "spool=memory";
    if (sp->journal)
        snprintf(spool, sizeof spool,
                 "spool_bytes=%llu spool_errors=%llu spool_reserved=%llu spool_at_risk=%llu "
                 "spool_damaged=%llu",
                 (unsigned long long)sp->journal->disk_bytes,
                 (unsigned long long)sp->journal->write_errors,
                 (unsigned long long)sp->journal->reserved,
                 (unsigned long long)sp->journal->at_risk,
                 (unsigned long long)sp->journal->damaged_records);
    iot_info("stats: received=%llu invalid=%llu over_quota=%llu store_full=%llu discarded=%llu "
             "forwarded=%llu resent=%llu "
             "acked=%llu duplicate=%llu rejected=%llu deferred=%llu pending=%zu pending_bytes=%llu %s "
             "reconnects=%llu clock_samples=%llu clock_offset_ns=%s clock_rtt_ns=%s "
             "connections=%llu conn_refused=%llu conn_dropped=%llu",
             (unsigned long long)st->received, (unsigned long long)st->invalid,
             (unsigned long long)st->over_quota, (unsigned long long)st->store_full,
             (unsigned long long)st->discarded,
             (unsigned long long)st->forwarded, (unsigned long long)st->resent,
             (unsigned long long)st->acked, (unsigned long long)st->duplicates,
             (unsigned long long)st->rejected, (unsigned long long)st->deferred, sp->count, (unsigned long long)sp->bytes, spool,
             (unsigned long long)st->reconnects, (unsigned long long)st->clock_samples, offset,
             rtt, (unsigned long long)st->connections, (unsigned long long)st->conn_refused,
             (unsigned long long)st->conn_dropped);
}

int ratelimit_allow(struct ratelimit *rl, int64_t now_ns, uint64_t *suppressed)
{
    if (rl->window_start && now_ns - rl->window_start < rl->interval_ns) {
        rl->suppressed++;
        return 0;
    }
    rl->window_start = now_ns;
    *suppressed = rl->suppressed;
    rl->suppressed = 0;
    return 1;
}
