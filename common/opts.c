#include "opts.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef IOTRACE_VERSION
#define IOTRACE_VERSION "0"
#endif

int iot_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    uint64_t mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end != '\0' || (v && mult > UINT64_MAX / v))
        return -1;
    *out = v * mult;
    return 0;
}

void iot_opts_usage(const struct iot_opts_spec *spec, int to_stderr)
{
    FILE *f = to_stderr ? stderr : stdout;
    fprintf(f, "Usage: %s %s\n\n%s\n\nOptions:\n", spec->program, spec->synopsis,
            spec->description);
    for (int i = 0; i < spec->n_opts; i++) {
        const struct iot_opt *o = &spec->opts[i];
        char left[96];
        int n = 0;
        if (o->short_name)
            n = snprintf(left, sizeof left, "-%c, ", o->short_name);
        snprintf(left + n, sizeof left - n, "--%s%s%s", o->name, o->arg_name ? " " : "",
                 o->arg_name ? o->arg_name : "");
        fprintf(f, "  %-34s %s\n", left, o->help);
    }
    if (spec->allow_config)
        fprintf(f, "  %-34s %s\n", "--config FILE",
                "read options from FILE: one \"name = value\" per line, names as the "
                "long options, '#' starts a comment; the command line wins");
    fprintf(f, "  %-34s %s\n  %-34s %s\n", "-h, --help", "print this help and exit",
            "--version", "print the version and exit");
}

static int set_value(const struct iot_opts_spec *spec, const struct iot_opt *o,
                     const char *val, const char *where)
{
    char *end;
    switch (o->type) {
    case IOT_OPT_STRING:
        *(char **)o->value = (char *)val;
        return 0;
    case IOT_OPT_INT:
        errno = 0;
        long v = strtol(val, &end, 10);
        if (errno || end == val || *end) {
            fprintf(stderr, "%s: %s: --%s expects an integer, got '%s'\n", spec->program,
                    where, o->name, val);
            return -1;
        }
        *(long *)o->value = v;
        return 0;
    case IOT_OPT_SIZE:
        if (iot_parse_size(val, (uint64_t *)o->value) < 0) {
            fprintf(stderr, "%s: %s: --%s expects a size such as 4096, 64K or 1G, got '%s'\n",
                    spec->program, where, o->name, val);
            return -1;
        }
        return 0;
    case IOT_OPT_FLAG:
        if (!val || !strcmp(val, "true") || !strcmp(val, "yes") || !strcmp(val, "1"))
            *(int *)o->value = 1;
        else if (!strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "0"))
            *(int *)o->value = 0;
        else {
            fprintf(stderr, "%s: %s: %s expects true or false, got '%s'\n", spec->program,
                    where, o->name, val);
            return -1;
        }
        return 0;
    }
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static const struct iot_opt *find_opt(const struct iot_opts_spec *spec, const char *name)
{
    for (int i = 0; i < spec->n_opts; i++)
        if (strcmp(spec->opts[i].name, name) == 0)
            return &spec->opts[i];
    return NULL;
}

/* Values from the file are kept for the life of the process: options point
 * into them.  A key given twice replaces its copy (the first is freed). */
static struct {
    void *value;
    char *copy;
} owned[64];

static char *keep_copy(void *value, const char *val)
{
    char *copy = strdup(val);
    size_t i = 0;
    while (i < sizeof owned / sizeof owned[0] && owned[i].value && owned[i].value != value)
        i++;
    if (copy && i < sizeof owned / sizeof owned[0]) {
        free(owned[i].copy);
        owned[i].value = value;
        owned[i].copy = copy;
    }
    return copy;
}

int iot_opts_load_config(const struct iot_opts_spec *spec, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot read config file %s: %s\n", spec->program, path,
                strerror(errno));
        return -1;
    }
    char line[4096];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char where[512];
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        char *eq = strchr(s, '=');
        if (!eq) {
            fprintf(stderr, "%s: %s: expected 'name = value'\n", spec->program, where);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        const struct iot_opt *o = find_opt(spec, key);
        if (!o) {
            fprintf(stderr, "%s: %s: unknown option '%s'\n", spec->program, where, key);
            rc = -1;
            break;
        }
        if (o->type == IOT_OPT_STRING && !(val = keep_copy(o->value, val))) {
            fprintf(stderr, "%s: %s: out of memory\n", spec->program, where);
            rc = -1;
            break;
        }
        rc = set_value(spec, o, val, where);
    }
    fclose(f);
    return rc;
}

int iot_opts_parse(const struct iot_opts_spec *spec, int argc, char **argv)
{
    enum { OPT_HELP = 1000, OPT_VERSION, OPT_CONFIG, OPT_BASE = 2000 };
    struct option *lo = calloc((size_t)spec->n_opts + 4, sizeof *lo);
    char shorts[128] = "+:h";
    size_t ns = strlen(shorts);
    for (int i = 0; i < spec->n_opts; i++) {
        const struct iot_opt *o = &spec->opts[i];
        int has_arg = o->type == IOT_OPT_FLAG ? no_argument : required_argument;
        lo[i] = (struct option){o->name, has_arg, NULL, o->short_name ? o->short_name : OPT_BASE + i};
        if (o->short_name && ns + 3 < sizeof shorts) {
            shorts[ns++] = o->short_name;
            if (has_arg == required_argument)
                shorts[ns++] = ':';
            shorts[ns] = '\0';
        }
    }
    int k = spec->n_opts;
    lo[k++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    lo[k++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    if (spec->allow_config)
        lo[k++] = (struct option){"config", required_argument, NULL, OPT_CONFIG};

    /* First pass finds --config so that the command line can override it. */
    const char *config = NULL;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        if (c == OPT_CONFIG)
            config = optarg;
        else if (c == OPT_HELP || c == 'h') {
            iot_opts_usage(spec, 0);
            free(lo);
            exit(IOT_EXIT_OK);
        } else if (c == OPT_VERSION) {
            printf("%s %s\n", spec->program, IOTRACE_VERSION);
            free(lo);
            exit(IOT_EXIT_OK);
        }
    }
    if (config && iot_opts_load_config(spec, config) < 0) {
        free(lo);
        exit(IOT_EXIT_USAGE);
    }

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        if (c == OPT_CONFIG)
            continue;
        if (c == '?' || c == ':') {
            const char *bad = argv[optind - 1];
            if (optopt && optopt < 256 && c == '?')
                fprintf(stderr, "%s: unknown option '-%c'\n", spec->program, optopt);
            else if (c == '?' && optopt == 0)
                fprintf(stderr, "%s: unknown option '%s'\n", spec->program, bad);
            else
                fprintf(stderr, "%s: option '%s' needs a value\n", spec->program, bad);
            fprintf(stderr, "Try '%s --help'.\n", spec->program);
            free(lo);
            exit(IOT_EXIT_USAGE);
        }
        const struct iot_opt *o = NULL;
        if (c >= OPT_BASE)
            o = &spec->opts[c - OPT_BASE];
        else
            for (int i = 0; i < spec->n_opts; i++)
                if (spec->opts[i].short_name == c)
                    o = &spec->opts[i];
        if (!o)
            continue;
        if (set_value(spec, o, optarg, "command line") < 0) {
            free(lo);
            exit(IOT_EXIT_USAGE);
        }
    }
    free(lo);
    return optind;
}
