/* Whose iotrace tags a brick believes (docs/gluster.md, *Whose tags count*).
 *
 * A request's tags (iotrace.job, iotrace.callid, iotrace.uid) are what the
 * client that sent it says. Only a client run by root can be held to them:
 * the FUSE client, whose iotrace-client takes job and CallID from the
 * calling user's own registry and the uid from the caller's credentials.
 * The one thing a brick can tell such a client by is the source port of its
 * connection: below 1024 only root can bind (GlusterFS's clients do with
 * client-bind-insecure off). Everyone else's tags are kept, but as their
 * own job "JOB~unverified" of no real user, never as the job they name.
 * Plain C, no GlusterFS headers, so that it is tested on its own. */
#ifndef IOTRACE_TAG_TRUST_H
#define IOTRACE_TAG_TRUST_H

#include <stddef.h>

#define IOTRACE_UNVERIFIED_SUFFIX "~unverified"

/* The user an unverified tag's job is given to: (uid_t)-2, which no account
 * has, so readers keep such a job apart from any a real user named first
 * (as JOB~unverified~u4294967294) and never let it join one. (uid_t)-1 would
 * be "not known", which joins any. */
#define IOTRACE_UID_UNVERIFIED 4294967294u

/* The ports below which only root can bind on this host: 1024, or fewer
 * when net.ipv4.ip_unprivileged_port_start is lower (0: none). */
unsigned iotrace_privileged_ports(void);

/* 1 when `identifier`, a peer as GlusterFS's socket transport names it
 * ("ADDR:PORT", numeric IPv4 or IPv6 address), has a port in 1..limit-1.
 * Anything else (a Unix socket's path, NULL, junk) is 0. */
int iotrace_peer_privileged(const char *identifier, unsigned limit);

/* `job` with IOTRACE_UNVERIFIED_SUFFIX into out[outlen], the job cut so
 * that the suffix always fits whole: the result never equals a job id a
 * tag names (unless that too ends in the suffix). */
void iotrace_unverified_job(const char *job, char *out, size_t outlen);

#endif
