/* Whose iotrace tags a brick believes: see tag_trust.h. */
#include "tag_trust.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRIVILEGED_PORTS 1024u

unsigned iotrace_privileged_ports(void)
{
    /* A host that lets everyone bind low ports (containers often do) gives
     * such a port no meaning; the sysctl says where ports stop being
     * root's. Unreadable (not Linux, no /proc): the classic 1024. */
    unsigned limit = PRIVILEGED_PORTS;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "r");
    if (f) {
        unsigned v;
        if (fscanf(f, "%u", &v) == 1 && v < limit)
            limit = v;
        fclose(f);
    }
    return limit;
}

int iotrace_peer_privileged(const char *identifier, unsigned limit)
{
    if (!identifier)
        return 0;
    const char *colon = strrchr(identifier, ':');
    if (!colon || colon == identifier || colon[1] < '0' || colon[1] > '9')
        return 0;
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || port == 0 || port >= limit)
        return 0;
    /* The address must be one: a Unix socket's path can hold a colon
     * and digits ("/run/x:80") and is any user's to choose. */
    char host[64];
    size_t n = (size_t)(colon - identifier);
    if (n >= sizeof host)
        return 0;
    memcpy(host, identifier, n);
    host[n] = '\0';
    unsigned char addr[16];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

void iotrace_unverified_job(const char *job, char *out, size_t outlen)
{
    size_t suffix = sizeof IOTRACE_UNVERIFIED_SUFFIX - 1;
    if (outlen <= suffix) {
        if (outlen)
            out[0] = '\0';
        return;
    }
    size_t keep = strnlen(job, outlen - 1 - suffix);
    memcpy(out, job, keep);
    memcpy(out + keep, IOTRACE_UNVERIFIED_SUFFIX, suffix + 1);
}
