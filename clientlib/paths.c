/* Which files are traced, and under what name: IOTRACE_EXCLUDE and
 * IOTRACE_INCLUDE (colon-separated fnmatch(3) patterns on the absolute path;
 * by default the /proc and /sys reads an MPI launcher and runtime make are
 * left out) and IOTRACE_ANONYMIZE (each path component replaced by a keyed
 * hash, for sites that must not store paths).  Read once at start; the
 * checks run at open, never on a read or write. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "client.h"

#define DEFAULT_EXCLUDE "/proc/*:/sys/*"

struct pattern_list {
    char *text; /* the variable's value, ':' turned into '\0' */
    const char **pattern;
    int n;
};

static struct {
    struct pattern_list exclude, include;
    int anonymize;
    unsigned char hash_key[crypto_shorthash_KEYBYTES];
} P;

/* Every pattern is kept, however many: one silently left out would trace
 * (or hide) files the user excluded (or included). */
static void parse(struct pattern_list *l, const char *value)
{
    free(l->text);
    free(l->pattern);
    l->n = 0;
    l->text = strdup(value);
    size_t max = 1;
    for (const char *c = value; *c; c++)
        max += *c == ':';
    l->pattern = calloc(max, sizeof *l->pattern);
    if (!l->text || !l->pattern) {
        iot_debug_log("out of memory for the path patterns '%s'; none applied", value);
        return;
    }
    for (char *p = l->text; *p;) {
        char *colon = strchr(p, ':');
        if (colon)
            *colon = '\0';
        if (*p)
            l->pattern[l->n++] = p;
        if (!colon)
            break;
        p = colon + 1;
    }
}

static int matches(const struct pattern_list *l, const char *path)
{
    for (int i = 0; i < l->n; i++)
        if (fnmatch(l->pattern[i], path, 0) == 0)
            return 1;
    return 0;
}

void iot_paths_configure(void)
{
    const char *ex = getenv("IOTRACE_EXCLUDE");
    const char *in = getenv("IOTRACE_INCLUDE");
    parse(&P.exclude, ex ? ex : DEFAULT_EXCLUDE);
    parse(&P.include, in ? in : "");
    const char *an = getenv("IOTRACE_ANONYMIZE");
    P.anonymize = an && an[0] == '1' && !an[1];
    const char *key = getenv("IOTRACE_ANONYMIZE_KEY");
    if (!key)
        key = "";
    crypto_generichash(P.hash_key, sizeof P.hash_key, (const unsigned char *)key, strlen(key),
                       NULL, 0);
}

int iot_path_traced(const char *abs)
{
    if (matches(&P.exclude, abs))
        return 0;
    return P.include.n == 0 || matches(&P.include, abs);
}

/* SipHash-2-4 (libsodium's crypto_shorthash) under a 128-bit key drawn
 * from IOTRACE_ANONYMIZE_KEY with BLAKE2b: the same name always gives the
 * same hash under one key, so files still compare equal across processes and
 * jobs, while without the key a hash neither gives the name back nor lets one
 * test a guessed name (an unkeyed or key-prefixed FNV would: each of its steps
 * can be undone, so one known component exposes the state after the key). */
static uint64_t keyed_hash(const char *s, size_t n)
{
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, (const unsigned char *)s, n, P.hash_key);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof h; i++)
        v = v << 8 | h[i];
    return v;
}

size_t iot_path_name(char *path, size_t len, size_t cap)
{
    if (!P.anonymize)
        return len;
    char out[4096];
    size_t o = 0;
    for (size_t i = 0; i < len && o + 18 < sizeof out && o + 18 < cap;) {
        if (path[i] == '/') {
            out[o++] = path[i++];
            continue;
        }
        size_t j = i;
        while (j < len && path[j] != '/')
            j++;
        o += (size_t)snprintf(out + o, sizeof out - o, "%016llx",
                              (unsigned long long)keyed_hash(path + i, j - i));
        i = j;
    }
    memcpy(path, out, o);
    path[o] = '\0';
    return o;
}
