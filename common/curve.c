#include "curve.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "fail.h"
#include "log.h"

static int write_key_file(const char *path, mode_t mode, const char *text, char *err,
                          size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return iot_fail(err, errlen, "cannot create %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    /* fchmod: the umask must not widen nor narrow what the file needs. */
    int ok = fchmod(fd, mode) == 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    int e = errno;
    close(fd);
    if (!ok) {
        unlink(path);
        return iot_fail(err, errlen, "cannot write %s: %s", path, strerror(e));
    }
    return 0;
}

int iot_curve_keygen(const char *path, char *err, size_t errlen)
{
    char pub[IOT_CURVE_Z85 + 1], sec[IOT_CURVE_Z85 + 1];
    if (zmq_curve_keypair(pub, sec) != 0)
        return iot_fail(err, errlen, "this ZeroMQ cannot make CURVE keys: %s",
                        zmq_strerror(zmq_errno()));
    char pub_path[4096], text[256];
    if (snprintf(pub_path, sizeof pub_path, "%s.pub", path) >= (int)sizeof pub_path)
        return iot_fail(err, errlen, "key file name too long: %s", path);
    snprintf(text, sizeof text,
             "# iotrace CURVE key pair (ZeroMQ Z85).  Secret: keep it readable by the\n"
             "# service only.  The .pub file beside it goes to the other side.\n"
             "public = %s\nsecret = %s\n",
             pub, sec);
    if (write_key_file(path, 0600, text, err, errlen) < 0)
        return -1;
    snprintf(text, sizeof text, "# iotrace CURVE public key (ZeroMQ Z85)\npublic = %s\n", pub);
    if (write_key_file(pub_path, 0644, text, err, errlen) < 0) {
        unlink(path);
        return -1;
    }
    return 0;
}

static int valid_z85(const char *s)
{
    uint8_t bin[32];
    return strlen(s) == IOT_CURVE_Z85 && zmq_z85_decode(bin, s) != NULL;
}

int iot_curve_load(const char *path, int need_secret, struct iot_curve_keys *k, char *err,
                   size_t errlen)
{
    memset(k, 0, sizeof *k);
    FILE *f = fopen(path, "re");
    if (!f)
        return iot_fail(err, errlen, "cannot open key file %s: %s", path, strerror(errno));
    struct stat st;
    if (need_secret && fstat(fileno(f), &st) == 0 && (st.st_mode & 0077)) {
        fclose(f);
        return iot_fail(err, errlen,
                        "key file %s holds a secret key but may be read by others (mode %03o); "
                        "chmod 600 it",
                        path, (unsigned)(st.st_mode & 0777));
    }
    char line[512];
    int lineno = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        lineno++;
        char name[16], value[128];
        if (line[strspn(line, " \t")] == '#' || line[strspn(line, " \t\r\n")] == '\0')
            continue;
        if (sscanf(line, " %15[a-z] = %127s", name, value) != 2)
            bad = lineno;
        else if (!strcmp(name, "node"))
            continue; /* a .pub file's binding, read by key_speaks_for() */
        else if (!valid_z85(value))
            bad = lineno;
        else if (!strcmp(name, "public"))
            memcpy(k->public_key, value, IOT_CURVE_Z85 + 1);
        else if (!strcmp(name, "secret"))
            memcpy(k->secret_key, value, IOT_CURVE_Z85 + 1);
        else
            bad = lineno;
    }
    fclose(f);
    if (bad)
        return iot_fail(err, errlen, "key file %s, line %d: expected 'public = KEY' or "
                                     "'secret = KEY' with a 40-character Z85 key, or "
                                     "'node = NAME'",
                        path, bad);
    if (!k->public_key[0])
        return iot_fail(err, errlen, "key file %s has no public key", path);
    if (need_secret && !k->secret_key[0])
        return iot_fail(err, errlen, "key file %s has no secret key (a .pub file?)", path);
    return 0;
}

/* Whether the key of .pub file `path` (named `fname`) may speak for
 * `node`: its `node = NAME` lines name the nodes it may, or, with none, the
 * file's name without ".pub" does.  A node name from the file is compared
 * whole, so "cn1" does not cover "cn10". */
static int key_speaks_for(const char *path, const char *fname, const char *node)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[512], name[16], value[256];
    int lines = 0, found = 0;
    while (!found && fgets(line, sizeof line, f))
        if (sscanf(line, " %15[a-z] = %255s", name, value) == 2 && !strcmp(name, "node")) {
            lines++;
            found = strcmp(value, node) == 0;
        }
    fclose(f);
    if (lines)
        return found;
    size_t n = strlen(fname) - 4;
    return strlen(node) == n && strncmp(fname, node, n) == 0;
}

/* Every listed key is looked at: the same key may be listed in several
 * files, each binding it to other nodes. */
static int key_listed(const char *dir, const char *public_key, const char *node)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".pub") != 0)
            continue;
        char path[4096], err[256];
        struct iot_curve_keys k;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
            continue;
        if (iot_curve_load(path, 0, &k, err, sizeof err) != 0)
            iot_warn("ignoring %s", err);
        else if (strcmp(k.public_key, public_key) == 0)
            found = !node || key_speaks_for(path, de->d_name, node);
    }
    closedir(d);
    return found;
}

int iot_curve_allowed(const char *dir, const char *public_key)
{
    return key_listed(dir, public_key, NULL);
}

int iot_curve_speaks_for(const char *dir, const char *public_key, const char *node)
{
    return key_listed(dir, public_key, node);
}

int iot_endpoint_is_local(const char *ep)
{
    /* ZeroMQ's transports that reach other machines; anything else stays
     * here or is not a transport at all (and fails when bound). */
    static const char *const network[] = {"pgm://", "epgm://", "norm://", "ws://", "wss://",
                                          "tipc://", "vmci://", "udp://"};
    for (size_t i = 0; i < sizeof network / sizeof *network; i++)
        if (!strncmp(ep, network[i], strlen(network[i])))
            return 0;
    if (strncmp(ep, "tcp://", 6) != 0)
        return 1;
    const char *hostport = ep + 6;
    /* A connect endpoint may name its source first: "src;host:port". */
    const char *semi = strchr(hostport, ';');
    if (semi)
        hostport = semi + 1;
    const char *colon = strrchr(hostport, ':');
    char host[256];
    if (!colon || (size_t)(colon - hostport) >= sizeof host)
        return 0;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    /* ZeroMQ binds "lo" as the loopback interface. */
    if (!strcmp(host, "lo"))
        return 1;
    if (!strcmp(host, "localhost"))
        return 1;
    /* The address itself, as --http checks its own: a string that only
     * starts like one ("127.x.invalid") is a name ZeroMQ would resolve,
     * maybe to another machine, and names are not taken as loopback at all
     * (what a name resolves to can change after this check). */
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return 0;
}

void iot_curve_keygen_main(const char *program, const char *path)
{
    char err[512];
    if (iot_curve_keygen(path, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", program, err);
        exit(1);
    }
    printf("%s: wrote the key pair %s (mode 0600) and its public key %s.pub\n", program, path,
           path);
    exit(0);
}
