/* CURVE keys for the agent ↔ collector hop (ZeroMQ's CurveZMQ, libsodium):
 * key files, the allow-list of agents' public keys, and the rule for which
 * endpoints may go without.  Shared by iotrace-agent and iotrace-collector.
 * docs/transport.md, "Authentication and encryption". */
#ifndef IOT_CURVE_H
#define IOT_CURVE_H

#include <stddef.h>

#define IOT_CURVE_Z85 40 /* a 32-byte key in Z85 text */

struct iot_curve_keys {
    char public_key[IOT_CURVE_Z85 + 1];
    char secret_key[IOT_CURVE_Z85 + 1]; /* "" when only the public key was read */
};

/* Writes a new key pair: PATH (mode 0600, both keys) and PATH.pub (mode
 * 0644, the public key, to hand to the other side).  Refuses to overwrite
 * either.  0, or -1 with a message in err. */
int iot_curve_keygen(const char *path, char *err, size_t errlen);

/* Reads a key file.  With `need_secret` the file must hold the secret key
 * and be readable by its owner only. */
int iot_curve_load(const char *path, int need_secret, struct iot_curve_keys *k, char *err,
                   size_t errlen);

/* Whether the public key (Z85) is in one of the *.pub files of `dir`, read
 * afresh each time so that adding or removing a file takes effect with the
 * next connection.  1 yes, 0 no, -1 the directory cannot be read. */
int iot_curve_allowed(const char *dir, const char *public_key);

/* Whether that key may speak for `node` (an agent's HELLO): a .pub file
 * listing it has a `node = NODE` line, or has none and is named NODE.pub.
 * 1 yes, 0 no, -1 the directory cannot be read. */
int iot_curve_speaks_for(const char *dir, const char *public_key, const char *node);

/* False for endpoints that may leave the machine: tcp:// to anything but a
 * loopback address or localhost, and ZeroMQ's other network transports. */
int iot_endpoint_is_local(const char *endpoint);

/* Handles the `--keygen PATH` of a program: writes the pair, says where,
 * and exits (0, or 1 on failure). */
void iot_curve_keygen_main(const char *program, const char *path);

#endif
