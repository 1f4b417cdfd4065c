/* Whom a producer may hand its batches to: the process at the other end of
 * the agent's socket must be root, the producer's own user (an agent it
 * started by hand), or the service's account.  That account is known by the
 * runtime directory systemd's RuntimeDirectory= makes for it, not by name:
 * the owner of IOT_AGENT_RUNTIME_DIR, when that is a directory only its
 * owner may create entries in, inside a parent only root may write (/run),
 * so that no one but root can have made it or given it away.  Not the
 * owner of whatever directory the socket is in: every user's home is a
 * directory root made for that user.  No name service is asked: this runs
 * inside every traced process, where NSS modules (LDAP, sssd) could open
 * descriptors, block or recurse into the wrappers.  Another user who takes
 * an endpoint first (a socket in /tmp, any directory of their own) is never
 * trusted, nor is a drop box such a user made. */
#ifndef IOT_AGENTTRUST_H
#define IOT_AGENTTRUST_H

#include <sys/types.h>

#define IOT_AGENT_RUNTIME_DIR "/run/iotrace"

/* 1 when `uid` may receive the batches of this process, else 0. */
int iot_agent_uid_trusted(uid_t uid);

/* The uid of the process that made the connected Unix socket `fd` listen
 * (SO_PEERCRED): 0 and *uid set, or -1 with errno. */
int iot_agent_peer_uid(int fd, uid_t *uid);

#endif
