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

#include "client.h"

#define MAX_PATTERNS 32
#define DEFAULT_EXCLUDE "/proc/*:/sys/*"

struct pattern_list {
    char text[2048]; /* the variable's value, ':' turned into '\0' */
    const char *pattern[MAX_PATTERNS];
    int n;
};

static struct {
    struct pattern_list exclude, include;
    int anonymize;
    char key[256];
} P;

static void parse(struct pattern_list *l, const char *value)
{
    snprintf(l->text, sizeof l->text, "%s", value);
    l->n = 0;
    for (char *p = l->text; *p && l->n < MAX_PATTERNS;) {
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
    snprintf(P.key, sizeof P.key, "%s", key ? key : "");
}

int iot_path_traced(const char *abs)
{
    if (matches(&P.exclude, abs))
        return 0;
    return P.include.n == 0 || matches(&P.include, abs);
}

/* FNV-1a over the key and the component: the same name always gives the
 * same hash under one key, so files still compare equal across processes
 * and jobs, while the names themselves are not kept. */
static uint64_t keyed_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *k = P.key; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; /* key and name cannot run together */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
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
